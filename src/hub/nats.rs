//! The NATS broker (feature `hub-nats`): NATS core subjects between nodes, through
//! `async-nats`.
//!
//! Each topic `T` is the subject `P.T` (prefix `P`, default `rapidws`). The node
//! subscribes to a subject only while the topic has local subscribers; the client is
//! connected with `no_echo`, so the server never sends a node its own publications.
//! `async-nats` reconnects with backoff and subscribes again by itself; the broker
//! reports the loss ([`HubEvent::BrokerDown`](super::HubEvent::BrokerDown)) and, once
//! connected again, has the hub mark the gap: NATS core keeps no history, so each node's
//! history ring starts a new epoch for every topic.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;

use super::Topic;
use super::broker::{Broker, Link, Outbox};

/// Settings of a [`NatsBroker`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct NatsConfig {
    /// The server, as a `nats://` URL (or several, comma-separated).
    pub url: String,
    /// Prefix of every subject. Default `rapidws`.
    pub prefix: String,
    /// Publications waiting for the client; past this they are dropped and counted.
    /// Default 65,536.
    pub queue_capacity: usize,
    /// Connect timeout. Default 2 s.
    pub timeout: Duration,
    /// Longest reconnect delay (the client backs off exponentially up to it). 5 s.
    pub backoff_max: Duration,
}

impl NatsConfig {
    /// Settings for the server at `url`.
    pub fn new(url: impl Into<String>) -> Self {
        NatsConfig {
            url: url.into(),
            prefix: "rapidws".into(),
            queue_capacity: 65_536,
            timeout: Duration::from_secs(2),
            backoff_max: Duration::from_secs(5),
        }
    }
}

setters! { NatsConfig {
    /// Sets [`prefix`](Self::prefix).
    with_prefix(prefix: impl Into<String>) => prefix = prefix.into();
    /// Sets [`backoff_max`](Self::backoff_max).
    with_backoff_max(max: Duration) => backoff_max;
} }

struct Inner {
    config: NatsConfig,
    interest: Notify,
    /// Subjects and envelopes to publish.
    out: Outbox<(String, Bytes)>,
}

/// The NATS broker (feature `hub-nats`): NATS core subjects between nodes, through
/// `async-nats`.
///
/// Each topic `T` is the subject `P.T` (prefix `P`, default `rapidws`). The node
/// subscribes to a subject only while the topic has local subscribers; the client is
/// connected with `no_echo`, so the server never sends a node its own publications.
/// `async-nats` reconnects with backoff and subscribes again by itself; the broker
/// reports the loss ([`HubEvent::BrokerDown`](super::HubEvent::BrokerDown)) and, once
/// connected again, has the hub mark the gap: NATS core keeps no history, so each node's
/// history ring starts a new epoch for every topic.
#[derive(Clone)]
pub struct NatsBroker {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for NatsBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsBroker")
            .field("url", &self.inner.config.url)
            .finish_non_exhaustive()
    }
}

impl NatsBroker {
    /// A broker for the server at `config.url`; it connects when the hub starts it.
    pub fn new(config: NatsConfig) -> Self {
        NatsBroker {
            inner: Arc::new(Inner {
                out: Outbox::new(config.queue_capacity),
                config,
                interest: Notify::new(),
            }),
        }
    }
}

impl Inner {
    fn subject(&self, topic: &str) -> String {
        format!("{}.{topic}", self.config.prefix)
    }
}

impl Broker for NatsBroker {
    fn start(&self, link: Link) {
        if let Some(rx) = self.inner.out.start(&link) {
            tokio::spawn(run(self.inner.clone(), link, rx));
        }
    }

    fn interest_changed(&self) {
        self.inner.interest.notify_one();
    }

    fn publish(&self, topic: &Topic, envelope: Bytes) {
        if let Some((_, link)) = self.inner.out.push((self.inner.subject(topic), envelope)) {
            link.count_dropped(1);
        }
    }
}

/// Connects (retrying until the hub is gone: `None` then).
async fn connect(
    inner: &Inner,
    link: &Link,
    events: mpsc::UnboundedSender<async_nats::Event>,
) -> Option<async_nats::Client> {
    let max = inner.config.backoff_max;
    let options = async_nats::ConnectOptions::new()
        .no_echo()
        .retry_on_initial_connect()
        .connection_timeout(inner.config.timeout)
        .reconnect_delay_callback(move |attempts| {
            let ms = 100u64.saturating_mul(1 << attempts.min(16) as u64);
            Duration::from_millis(ms).min(max)
        })
        .event_callback(move |event| {
            let _ = events.send(event);
            async {}
        });
    loop {
        match options.clone().connect(inner.config.url.as_str()).await {
            Ok(c) => return Some(c),
            Err(e) => {
                // With retry_on_initial_connect only a malformed URL or option fails here.
                link.down(&format!("nats connect failed: {e}"));
                tokio::time::sleep(max).await;
                if link.is_closed() {
                    return None;
                }
            }
        }
    }
}

async fn run(inner: Arc<Inner>, link: Link, mut rx: mpsc::Receiver<(String, Bytes)>) {
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let Some(client) = connect(&inner, &link, events_tx).await else {
        return;
    };
    link.up();
    let publisher = {
        let client = client.clone();
        let link = link.clone();
        tokio::spawn(async move {
            while let Some((subject, payload)) = rx.recv().await {
                if client.publish(subject, payload).await.is_err() {
                    link.count_dropped(1);
                }
            }
        })
    };
    let mut subs: HashMap<Topic, JoinHandle<()>> = HashMap::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = inner.interest.notified() => {}
            Some(event) = events.recv() => {
                match event {
                    async_nats::Event::Disconnected => link.down("nats connection lost"),
                    async_nats::Event::Connected => {
                        // async-nats has sent every subscription again; once a flush is
                        // through the server holds them.
                        let _ = client.flush().await;
                        link.up_after_gap().await;
                    }
                    _ => {}
                }
                continue;
            }
            _ = tick.tick() => {
                if link.is_closed() {
                    break;
                }
                continue;
            }
        }
        loop {
            let batch = link.take_interest(1024);
            if batch.is_empty() {
                break;
            }
            for t in batch.unsubscribe {
                if let Some(task) = subs.remove(&t) {
                    // Dropping the subscriber inside unsubscribes it.
                    task.abort();
                }
            }
            let mut added = Vec::new();
            for t in batch.subscribe {
                if subs.contains_key(&t) {
                    added.push(t);
                    continue;
                }
                match client.subscribe(inner.subject(&t)).await {
                    Ok(sub) => {
                        let link = link.clone();
                        let topic = t.clone();
                        subs.insert(t.clone(), tokio::spawn(forward(sub, link, topic)));
                        added.push(t);
                    }
                    Err(e) => link.event(super::HubEvent::BrokerDown {
                        reason: format!("nats subscribe failed: {e}"),
                    }),
                }
            }
            // The server has the subscriptions once a flush (a PING answered) is through.
            let _ = client.flush().await;
            link.subscribed(&added);
        }
    }
    for (_, task) in subs {
        task.abort();
    }
    publisher.abort();
    drop(client);
}

async fn forward(mut sub: async_nats::Subscriber, link: Link, topic: Topic) {
    use futures_core::Stream;
    while let Some(msg) =
        std::future::poll_fn(|cx| std::pin::Pin::new(&mut sub).poll_next(cx)).await
    {
        link.deliver(&topic, msg.payload);
    }
}
