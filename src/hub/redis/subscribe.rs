//! The pub/sub side against one server: subscribing to what the hub wants, delivering
//! what arrives, reconnecting and subscribing again. (Cluster mode's is in `cluster.rs`.)

use redis::aio::{PubSubSink, PubSubStream};

use super::*;

/// The pub/sub connection: subscribes to what the hub wants, delivers what arrives,
/// reconnects with backoff and subscribes again.
pub(super) async fn subscriber(inner: Arc<Inner>, link: Link) {
    let Backend::Single(client) = &inner.backend else {
        return;
    };
    let mut backoff = inner.config.backoff_min;
    let mut connected_before = false;
    loop {
        if link.is_closed() {
            return;
        }
        let pubsub = tokio::time::timeout(inner.config.timeout, client.get_async_pubsub()).await;
        let Some(pubsub) = connected(&inner, &link, &mut backoff, "redis pub/sub", pubsub).await
        else {
            continue;
        };
        let (mut sink, mut stream) = pubsub.split();
        // Everything the hub wants now; pending changes are folded in.
        let _ = link.take_interest(usize::MAX);
        let mut held: HashSet<Topic> = HashSet::new();
        if !subscribe_all(&inner, &link, &link.topics(), &mut sink, &mut held).await {
            backoff_after(
                &inner,
                &link,
                &mut backoff,
                "redis pub/sub subscribe failed",
            )
            .await;
            continue;
        }
        backoff = inner.config.backoff_min;
        // SUBSCRIBE is served while a restarted server still loads its data, the
        // commands that record a publication are not: "up" waits until a fresh command
        // connection has its scripts loaded, so a publication made once the hub reports
        // the broker up is recorded.
        command_ready(&inner, &link).await;
        if connected_before {
            // Subscribed again to every live topic: catch up before reading on.
            link.up_after_gap().await;
        } else {
            link.up();
            connected_before = true;
        }
        let Some(lost) = read_on(&inner, &link, &mut sink, &mut stream, &mut held).await else {
            return;
        };
        link.down(lost);
    }
}

/// Waits (with backoff, for at most the configured timeout in all) until a fresh command
/// connection works; the subscriber goes on either way, the publisher retries on its own.
pub(super) async fn command_ready(inner: &Inner, link: &Link) {
    let deadline = tokio::time::Instant::now() + inner.config.timeout;
    let mut pause = inner.config.backoff_min;
    inner.drop_command().await;
    while !link.is_closed() {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if let Ok(Ok(_)) = tokio::time::timeout(left, inner.command()).await {
            inner
                .recovered
                .fetch_add(1, std::sync::atomic::Ordering::Release);
            return;
        }
        if tokio::time::Instant::now() + pause >= deadline {
            return;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(inner.config.backoff_max);
    }
}

/// The channels of `topics`.
pub(super) fn channels(inner: &Inner, topics: &[Topic]) -> Vec<String> {
    topics.iter().map(|t| inner.channel(t)).collect()
}

/// Applies the hub's interest changes in batches; false when the connection failed.
async fn apply_interest(
    inner: &Inner,
    link: &Link,
    sink: &mut PubSubSink,
    held: &mut HashSet<Topic>,
) -> bool {
    loop {
        let batch = link.take_interest(inner.config.batch.max(1));
        if batch.is_empty() {
            return true;
        }
        let add = sorted_out(&batch.subscribe, held, false);
        let remove = sorted_out(&batch.unsubscribe, held, true);
        if !add.is_empty() {
            if sink.subscribe(channels(inner, &add)).await.is_err() {
                return false;
            }
            held.extend(add.iter().cloned());
        }
        // Already held ones are confirmed too (a topic that left and came back before
        // the broker took the change).
        link.subscribed(&batch.subscribe);
        if !remove.is_empty() {
            if sink.unsubscribe(channels(inner, &remove)).await.is_err() {
                return false;
            }
            for t in &remove {
                held.remove(t);
            }
        }
    }
}

/// Reports the broker down with `reason`, waits out `backoff`, and doubles it up to the
/// configured maximum: what every failed connect or subscribe does before its next try.
async fn backoff_after(inner: &Inner, link: &Link, backoff: &mut Duration, reason: &str) {
    link.down(reason);
    tokio::time::sleep(*backoff).await;
    *backoff = (*backoff * 2).min(inner.config.backoff_max);
}

/// The connection of a connect attempt bounded by the configured timeout, or `None` after
/// [`backoff_after`] with why it failed (`what` names the connection).
async fn connected<T, E: std::fmt::Display>(
    inner: &Inner,
    link: &Link,
    backoff: &mut Duration,
    what: &str,
    attempt: Result<Result<T, E>, tokio::time::error::Elapsed>,
) -> Option<T> {
    let reason = match attempt {
        Ok(Ok(conn)) => return Some(conn),
        Ok(Err(e)) => format!("{what} connect failed: {e}"),
        Err(_) => format!("{what} connect timed out"),
    };
    backoff_after(inner, link, backoff, &reason).await;
    None
}

/// Subscribes a fresh connection to `all` (every topic the hub wants), in batches, each
/// batch confirmed to the hub and added to `held`; false when the connection failed.
async fn subscribe_all(
    inner: &Inner,
    link: &Link,
    all: &[Topic],
    sink: &mut PubSubSink,
    held: &mut HashSet<Topic>,
) -> bool {
    for chunk in all.chunks(inner.config.batch.max(1)) {
        if sink.subscribe(channels(inner, chunk)).await.is_err() {
            return false;
        }
        held.extend(chunk.iter().cloned());
        link.subscribed(chunk);
    }
    true
}

/// Reads on a subscribed connection until it is lost (`None`: the hub is gone), applying
/// the hub's interest changes as they come; whether the hub is gone is checked once a
/// second. Says why it stopped.
async fn read_on(
    inner: &Inner,
    link: &Link,
    sink: &mut PubSubSink,
    stream: &mut PubSubStream,
    held: &mut HashSet<Topic>,
) -> Option<&'static str> {
    use futures_core::Stream;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            msg = std::future::poll_fn(|cx| std::pin::Pin::new(&mut *stream).poll_next(cx)) => {
                let Some(msg) = msg else {
                    return Some("redis pub/sub connection lost");
                };
                if let Some(topic) = inner.topic_of(msg.get_channel_name()) {
                    link.deliver(topic, Bytes::copy_from_slice(msg.get_payload_bytes()));
                }
            }
            _ = inner.interest.notified() => {
                if !apply_interest(inner, link, sink, held).await {
                    return Some("redis pub/sub subscribe failed");
                }
            }
            _ = tick.tick() => {
                if link.is_closed() {
                    return None;
                }
            }
        }
    }
}
