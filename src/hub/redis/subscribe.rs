//! The pub/sub side: subscribing to what the hub wants, delivering what arrives,
//! reconnecting and subscribing again; plain channels or shard channels.

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
        let failed = "redis pub/sub subscribe failed";
        if !subscribe_all(&inner, &link, &link.topics(), &mut sink, &mut held).await {
            backoff_after(&inner, &link, &mut backoff, failed).await;
            continue;
        }
        backoff = inner.config.backoff_min;
        // SUBSCRIBE is served while a restarted server still loads its data, the
        // commands that record a publication are not: "up" waits until a fresh command
        // connection has its scripts loaded, so a publication made once the hub reports
        // the broker up is recorded.
        command_ready(&inner, &link).await;
        up(&link, &mut connected_before).await;
        let Some(lost) = read_on(&inner, &link, &mut sink, &mut stream, &mut held, failed).await
        else {
            return;
        };
        link.down(lost.reason());
    }
}

/// Waits (with backoff, for at most the configured timeout in all) until a fresh command
/// connection works; the subscriber goes on either way, the publisher retries on its own.
///
/// In a cluster, "works" means every master answers and says `cluster_state:ok`: a
/// master that restarted takes subscriptions before it has rejoined its cluster, and
/// refuses keyed commands (CLUSTERDOWN) until then, which takes the cluster bus a few
/// seconds, so the wait there is up to five times the timeout.
pub(super) async fn command_ready(inner: &Inner, link: &Link) {
    let wait = if inner.is_cluster() {
        inner.config.timeout * 5
    } else {
        inner.config.timeout
    };
    let deadline = tokio::time::Instant::now() + wait;
    let mut pause = inner.config.backoff_min;
    inner.drop_command().await;
    let works = async || {
        let mut c = inner.command().await?;
        if let Conn::Cluster(cluster) = &mut c {
            // The cluster connection is kept: every master must answer and be in its
            // cluster again; the scripts are loaded on every node once more (a node
            // that restarted lost them).
            let info = cluster
                .route_command(
                    redis::cmd("CLUSTER").arg("INFO").clone(),
                    RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None)),
                )
                .await
                .map_err(server_error)?;
            if !every_reply_says(&info, "cluster_state:ok") {
                return Err(BrokerError::Unavailable);
            }
            inner.load_scripts(&mut c).await?;
        }
        Ok::<(), BrokerError>(())
    };
    while !link.is_closed() {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if let Ok(Ok(())) = tokio::time::timeout(left, works()).await {
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

/// What the subscriber needs of a pub/sub connection; false when the connection failed.
pub(super) trait Channels {
    async fn add(&mut self, channels: Vec<String>) -> bool;
    async fn remove(&mut self, channels: Vec<String>) -> bool;
}

impl Channels for redis::aio::PubSubSink {
    async fn add(&mut self, channels: Vec<String>) -> bool {
        self.subscribe(channels).await.is_ok()
    }

    async fn remove(&mut self, channels: Vec<String>) -> bool {
        self.unsubscribe(channels).await.is_ok()
    }
}

/// Shard channels on a cluster connection: one SSUBSCRIBE or SUNSUBSCRIBE per slot (the
/// command may not cross slots), each sent to the master of the slot.
pub(super) struct Shards {
    pub(super) conn: ClusterConnection,
}

impl Shards {
    async fn each_slot(&mut self, channels: Vec<String>, subscribe: bool) -> bool {
        let mut by_slot: HashMap<Slot, Vec<String>> = HashMap::new();
        for c in channels {
            by_slot.entry(Slot::for_key(&c)).or_default().push(c);
        }
        for group in by_slot.into_values() {
            let r = if subscribe {
                self.conn.ssubscribe(group).await
            } else {
                self.conn.sunsubscribe(group).await
            };
            if r.is_err() {
                return false;
            }
        }
        true
    }
}

impl Channels for Shards {
    async fn add(&mut self, channels: Vec<String>) -> bool {
        self.each_slot(channels, true).await
    }

    async fn remove(&mut self, channels: Vec<String>) -> bool {
        self.each_slot(channels, false).await
    }
}

/// Whether every reply of a command sent to several nodes (a map of node to reply)
/// contains `text`.
pub(super) fn every_reply_says(v: &Value, text: &str) -> bool {
    let says = |v: &Value| match v {
        Value::BulkString(b) => memchr::memmem::find(b, text.as_bytes()).is_some(),
        Value::VerbatimString { text: t, .. } => t.contains(text),
        _ => false,
    };
    match v {
        Value::Map(replies) => !replies.is_empty() && replies.iter().all(|(_, r)| says(r)),
        other => says(other),
    }
}

/// Applies the hub's interest changes in batches; false when the connection failed.
pub(super) async fn apply_interest(
    inner: &Inner,
    link: &Link,
    sink: &mut impl Channels,
    held: &mut HashSet<Topic>,
) -> bool {
    loop {
        let batch = link.take_interest(inner.config.batch.max(1));
        if batch.is_empty() {
            return true;
        }
        let add: Vec<Topic> = batch
            .subscribe
            .iter()
            .filter(|t| !held.contains(*t))
            .cloned()
            .collect();
        let remove: Vec<Topic> = batch
            .unsubscribe
            .into_iter()
            .filter(|t| held.contains(t))
            .collect();
        if !add.is_empty() {
            if !sink.add(channels(inner, &add)).await {
                return false;
            }
            held.extend(add.iter().cloned());
        }
        // Already held ones are confirmed too (a topic that left and came back before
        // the broker took the change).
        link.subscribed(&batch.subscribe);
        if !remove.is_empty() {
            if !sink.remove(channels(inner, &remove)).await {
                return false;
            }
            for t in &remove {
                held.remove(t);
            }
        }
    }
}

/// Cluster mode: the pub/sub connection (RESP3, one connection per master, following
/// the slot map), subscribed to the shard channels of what the hub wants.
///
/// The connection repairs a lost master's connection by itself; the broker keeps it,
/// reports the loss, and subscribes every live topic again (retrying with backoff until
/// the master is back), then lets the hub catch up from the streams, and only then
/// reads on: what the other shards sent meanwhile waits in the connection's queue, and
/// is delivered after the catch-up, so nothing is delivered out of order. That queue
/// holds at most [`RedisConfig::queue_capacity`] messages; past it they are dropped and
/// counted, and the broker catches up from the streams as after a loss.
pub(super) async fn sharded_subscriber(inner: Arc<Inner>, link: Link) {
    let mut backoff = inner.config.backoff_min;
    let mut connected_before = false;
    'connect: loop {
        if link.is_closed() {
            return;
        }
        // What the connection receives waits here, bounded: past the queue capacity it is
        // dropped and counted, and the broker treats that as a gap (resubscribes and
        // catches up).
        let (tx, rx) = mpsc::channel::<redis::PushInfo>(inner.config.queue_capacity.max(1));
        let overflow = Arc::new(AtomicBool::new(false));
        let (flag, counter) = (overflow.clone(), link.clone());
        let mut pushes = Pushes {
            rx,
            overflow: overflow.clone(),
        };
        let client = cluster_builder(&inner.config)
            .use_protocol(redis::ProtocolVersion::RESP3)
            .push_sender(move |push: redis::PushInfo| {
                if tx.try_send(push).is_err() {
                    flag.store(true, Ordering::Relaxed);
                    counter.count_dropped(1);
                }
                Ok::<(), std::convert::Infallible>(())
            })
            .build();
        let conn = match client {
            Ok(c) => tokio::time::timeout(inner.config.timeout, c.get_async_connection()).await,
            Err(e) => Ok(Err(e)),
        };
        let conn = connected(&inner, &link, &mut backoff, "redis cluster pub/sub", conn).await;
        let Some(conn) = conn else {
            continue;
        };
        let mut shards = Shards { conn };
        let mut held: HashSet<Topic> = HashSet::new();
        let failed = "redis cluster ssubscribe failed";
        loop {
            // Everything the hub wants now (pending changes folded in), subscribed again
            // on this connection (SSUBSCRIBE of a held channel changes nothing).
            let _ = link.take_interest(usize::MAX);
            let all = link.topics();
            let stale: Vec<Topic> = {
                let want: HashSet<&Topic> = all.iter().collect();
                held.iter().filter(|t| !want.contains(t)).cloned().collect()
            };
            let ok = (stale.is_empty() || shards.remove(channels(&inner, &stale)).await) && {
                held.clear();
                subscribe_all(&inner, &link, &all, &mut shards, &mut held).await
            };
            if !ok {
                backoff_after(&inner, &link, &mut backoff, failed).await;
                continue;
            }
            backoff = inner.config.backoff_min;
            command_ready(&inner, &link).await;
            // What was dropped while the broker was away is in the streams, after each
            // topic's last position: the catch-up brings it.
            overflow.store(false, Ordering::Relaxed);
            up(&link, &mut connected_before).await;
            let lost = read_on(&inner, &link, &mut shards, &mut pushes, &mut held, failed).await;
            match lost {
                None => return,
                Some(Lost::Connection(reason)) => {
                    link.down(reason);
                    continue 'connect;
                }
                // The connection repairs a lost master's connection itself: subscribe
                // again on it.
                Some(Lost::Channels(reason)) => link.down(reason),
            }
        }
    }
}

/// Whether an `sunsubscribe` push names a channel the broker still holds (its own
/// SUNSUBSCRIBE removes the topic from `held` before the confirmation is read).
pub(super) fn unsolicited(inner: &Inner, held: &HashSet<Topic>, data: &[Value]) -> bool {
    let Some(Value::BulkString(channel)) = data.first() else {
        return false;
    };
    std::str::from_utf8(channel)
        .ok()
        .and_then(|c| inner.topic_of(c))
        .is_some_and(|t| held.contains(t))
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
    sink: &mut impl Channels,
    held: &mut HashSet<Topic>,
) -> bool {
    for chunk in all.chunks(inner.config.batch.max(1)) {
        if !sink.add(channels(inner, chunk)).await {
            return false;
        }
        held.extend(chunk.iter().cloned());
        link.subscribed(chunk);
    }
    true
}

/// Reports the broker up once subscribed: the first time as it is, after a reconnect
/// once the hub has caught up on the gap (every live topic is subscribed again).
async fn up(link: &Link, connected_before: &mut bool) {
    if *connected_before {
        link.up_after_gap().await;
    } else {
        link.up();
        *connected_before = true;
    }
}

/// What a subscriber lost while reading on.
enum Lost {
    /// The connection, for good: a new one is needed.
    Connection(&'static str),
    /// Some of its subscriptions, or publications on them: it subscribes again.
    Channels(&'static str),
}

impl Lost {
    fn reason(&self) -> &'static str {
        match self {
            Lost::Connection(r) | Lost::Channels(r) => r,
        }
    }
}

/// What a subscribed connection receives.
trait Incoming {
    /// Waits for the next thing received and delivers it to the hub; says what was lost
    /// instead, if anything (`held`: the topics subscribed to).
    async fn next(&mut self, inner: &Inner, link: &Link, held: &HashSet<Topic>) -> Option<Lost>;
}

impl Incoming for redis::aio::PubSubStream {
    async fn next(&mut self, inner: &Inner, link: &Link, _: &HashSet<Topic>) -> Option<Lost> {
        use futures_core::Stream;
        let msg = std::future::poll_fn(|cx| std::pin::Pin::new(&mut *self).poll_next(cx)).await;
        let Some(msg) = msg else {
            return Some(Lost::Connection("redis pub/sub connection lost"));
        };
        if let Some(topic) = inner.topic_of(msg.get_channel_name()) {
            link.deliver(topic, Bytes::copy_from_slice(msg.get_payload_bytes()));
        }
        None
    }
}

/// The pushes of a cluster pub/sub connection, as its push sender queued them, and
/// whether that queue overflowed.
struct Pushes {
    rx: mpsc::Receiver<redis::PushInfo>,
    overflow: Arc<AtomicBool>,
}

impl Incoming for Pushes {
    async fn next(&mut self, inner: &Inner, link: &Link, held: &HashSet<Topic>) -> Option<Lost> {
        let Some(push) = self.rx.recv().await else {
            return Some(Lost::Connection("redis cluster pub/sub connection closed"));
        };
        match push.kind {
            PushKind::SMessage => {
                if let Some(msg) = redis::Msg::from_push_info(push)
                    && let Some(topic) = inner.topic_of(msg.get_channel_name())
                {
                    link.deliver(topic, Bytes::copy_from_slice(msg.get_payload_bytes()));
                }
            }
            // A master's connection was lost: its channels may have missed publications.
            PushKind::Disconnection => {
                return Some(Lost::Channels("redis cluster node connection lost"));
            }
            // The server dropped a channel we hold (its slot moved).
            PushKind::SUnsubscribe if unsolicited(inner, held, &push.data) => {
                return Some(Lost::Channels("redis cluster moved a shard channel"));
            }
            _ => {}
        }
        if self.overflow.swap(false, Ordering::Relaxed) {
            return Some(Lost::Channels("redis cluster pub/sub fell behind"));
        }
        None
    }
}

/// Reads on a subscribed connection until something is lost (`None`: the hub is gone).
/// Meanwhile the hub's interest changes are applied as they come (a failure loses the
/// channels, `failed` says so), and whether the hub is gone is checked once a second.
async fn read_on(
    inner: &Inner,
    link: &Link,
    sink: &mut impl Channels,
    incoming: &mut impl Incoming,
    held: &mut HashSet<Topic>,
    failed: &'static str,
) -> Option<Lost> {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            lost = incoming.next(inner, link, held) => {
                if lost.is_some() {
                    return lost;
                }
            }
            _ = inner.interest.notified() => {
                if !apply_interest(inner, link, sink, held).await {
                    return Some(Lost::Channels(failed));
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
