//! The Redis broker (feature `hub-redis`): Redis pub/sub between nodes through the
//! `redis` crate on tokio, and, when the hub keeps history, Redis Streams for it.
//!
//! Two connections per node: a dedicated pub/sub connection, subscribed to the channels
//! of the topics the node has local subscribers for (in batches of
//! [`RedisConfig::batch`]), and a multiplexed command connection for publishing
//! (pipelined, in batches) and history. Both reconnect with exponential backoff; after a
//! reconnect the pub/sub connection subscribes to every live topic again before it
//! reads on, and the hub marks the gap (it catches up from the streams, so nothing
//! recorded is lost).
//!
//! Keys, for a topic `T` under the prefix `P` (default `rapidws`): the channel `P:{T}`,
//! the stream `P:{T}:s` and the stream's meta hash `P:{T}:m` (epoch and last offset); the
//! braces keep the three in one Redis Cluster slot. One Lua script assigns the offset
//! and epoch, appends to the stream (`XADD ... MAXLEN`, with the offset as the entry id),
//! refreshes the keys' time to live and publishes, atomically.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use futures_core::future::BoxFuture;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, Value};
use tokio::sync::{Notify, mpsc};

use super::Topic;
use super::broker::{Broker, BrokerError, BrokerHistory, Link};
use super::history::{HistoryConfig, HistoryPage, Position};

/// Records a publication and publishes it: KEYS stream, meta; ARGV head, payload,
/// capacity, ttl (seconds, 0: none), channel, publish command. Returns the offset.
const RECORD: &str = r#"
local epoch = redis.call('hget', KEYS[2], 'e')
if not epoch then
  local t = redis.call('time')
  epoch = t[1] .. string.format('%06d', tonumber(t[2]))
  redis.call('del', KEYS[1])
  redis.call('hset', KEYS[2], 'e', epoch)
end
local offset = string.format('%d', redis.call('hincrby', KEYS[2], 'o', 1))
local env = ARGV[1] .. offset .. ' ' .. epoch .. '\n' .. ARGV[2]
redis.call('xadd', KEYS[1], 'MAXLEN', ARGV[3], offset .. '-0', 'p', env)
local ttl = tonumber(ARGV[4])
if ttl > 0 then
  redis.call('expire', KEYS[1], ttl)
  redis.call('expire', KEYS[2], ttl)
end
redis.call(ARGV[6], ARGV[5], env)
return offset
"#;

/// The epoch, last offset and entries after an offset: KEYS stream, meta; ARGV offset
/// (exclusive), limit.
const SINCE: &str = r#"
local epoch = redis.call('hget', KEYS[2], 'e')
if not epoch then
  return {'', '0', {}}
end
local top = redis.call('hget', KEYS[2], 'o') or '0'
local entries = {}
if tonumber(ARGV[2]) > 0 then
  entries = redis.call('xrange', KEYS[1], '(' .. ARGV[1] .. '-0', '+', 'COUNT', ARGV[2])
end
return {epoch, top, entries}
"#;

/// Settings of a [`RedisBroker`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RedisConfig {
    /// The server, as a `redis://` URL.
    pub url: String,
    /// Prefix of every channel and key. Default `rapidws`.
    pub prefix: String,
    /// Publications waiting for the server; past this they are dropped and counted.
    /// Default 65,536.
    pub queue_capacity: usize,
    /// Most channels per SUBSCRIBE and most publications per pipeline. Default 512.
    pub batch: usize,
    /// First reconnect delay, doubled after each failure. Default 100 ms.
    pub backoff_min: Duration,
    /// Longest reconnect delay. Default 5 s.
    pub backoff_max: Duration,
    /// Connect and response timeout of each connection. Default 2 s.
    pub timeout: Duration,
}

impl RedisConfig {
    /// Settings for the server at `url` (`redis://host:port/`).
    pub fn new(url: impl Into<String>) -> Self {
        RedisConfig {
            url: url.into(),
            prefix: "rapidws".into(),
            queue_capacity: 65_536,
            batch: 512,
            backoff_min: Duration::from_millis(100),
            backoff_max: Duration::from_secs(5),
            timeout: Duration::from_secs(2),
        }
    }

    /// Sets [`prefix`](Self::prefix).
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Sets the reconnect backoff.
    pub fn with_backoff(mut self, min: Duration, max: Duration) -> Self {
        self.backoff_min = min;
        self.backoff_max = max.max(min);
        self
    }
}

enum Out {
    Plain {
        channel: String,
        envelope: Bytes,
    },
    Recorded {
        topic: Topic,
        head: String,
        payload: Bytes,
    },
}

struct Inner {
    config: RedisConfig,
    client: Client,
    link: OnceLock<Link>,
    interest: Notify,
    out: mpsc::Sender<Out>,
    out_rx: Mutex<Option<mpsc::Receiver<Out>>>,
    /// The command connection (cheap to clone), `None` while disconnected.
    cmd: tokio::sync::Mutex<Option<MultiplexedConnection>>,
    /// Counts the times the server was found working again after a loss; the publisher
    /// drops its retry pause when this moves.
    recovered: std::sync::atomic::AtomicU64,
    record: redis::Script,
    since: redis::Script,
}

/// The Redis broker (feature `hub-redis`): Redis pub/sub between nodes through the
/// `redis` crate on tokio, and, when the hub keeps history, Redis Streams for it.
///
/// Two connections per node: a dedicated pub/sub connection, subscribed to the channels
/// of the topics the node has local subscribers for (in batches of
/// [`RedisConfig::batch`]), and a multiplexed command connection for publishing
/// (pipelined, in batches) and history. Both reconnect with exponential backoff; after a
/// reconnect the pub/sub connection subscribes to every live topic again before it
/// reads on, and the hub marks the gap (it catches up from the streams, so nothing
/// recorded is lost).
///
/// Keys, for a topic `T` under the prefix `P` (default `rapidws`): the channel `P:{T}`,
/// the stream `P:{T}:s` and the stream's meta hash `P:{T}:m` (epoch and last offset); the
/// braces keep the three in one Redis Cluster slot. One Lua script assigns the offset
/// and epoch, appends to the stream (`XADD ... MAXLEN`, with the offset as the entry id),
/// refreshes the keys' time to live and publishes, atomically.
#[derive(Clone)]
pub struct RedisBroker {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for RedisBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBroker")
            .field("url", &self.inner.config.url)
            .finish_non_exhaustive()
    }
}

impl RedisBroker {
    /// A broker for the server at `config.url`; it connects when the hub starts it.
    /// Fails only on a malformed URL.
    pub fn new(config: RedisConfig) -> Result<Self, BrokerError> {
        let client =
            Client::open(config.url.as_str()).map_err(|e| BrokerError::Server(e.to_string()))?;
        let (out, out_rx) = mpsc::channel(config.queue_capacity.max(1));
        Ok(RedisBroker {
            inner: Arc::new(Inner {
                config,
                client,
                link: OnceLock::new(),
                interest: Notify::new(),
                out,
                out_rx: Mutex::new(Some(out_rx)),
                cmd: tokio::sync::Mutex::new(None),
                recovered: std::sync::atomic::AtomicU64::new(0),
                record: redis::Script::new(RECORD),
                since: redis::Script::new(SINCE),
            }),
        })
    }
}

impl Inner {
    fn channel(&self, topic: &str) -> String {
        format!("{}:{{{topic}}}", self.config.prefix)
    }

    fn stream_keys(&self, topic: &str) -> (String, String) {
        let c = self.channel(topic);
        (format!("{c}:s"), format!("{c}:m"))
    }

    fn topic_of<'a>(&self, channel: &'a str) -> Option<&'a str> {
        channel
            .strip_prefix(self.config.prefix.as_str())?
            .strip_prefix(":{")?
            .strip_suffix('}')
    }

    fn connection_config(&self) -> AsyncConnectionConfig {
        AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.config.timeout))
            .set_response_timeout(Some(self.config.timeout))
    }

    /// The command connection, connecting (and loading the scripts) when there is none.
    async fn command(&self) -> Result<MultiplexedConnection, BrokerError> {
        let mut slot = self.cmd.lock().await;
        if let Some(c) = slot.as_ref() {
            return Ok(c.clone());
        }
        let mut c = self
            .client
            .get_multiplexed_async_connection_with_config(&self.connection_config())
            .await
            .map_err(|e| BrokerError::Server(e.to_string()))?;
        for script in [&self.record, &self.since] {
            script
                .prepare_invoke()
                .load_async(&mut c)
                .await
                .map_err(|e| BrokerError::Server(e.to_string()))?;
        }
        *slot = Some(c.clone());
        Ok(c)
    }

    async fn drop_command(&self) {
        *self.cmd.lock().await = None;
    }
}

impl Broker for RedisBroker {
    fn start(&self, link: Link) {
        if self.inner.link.set(link.clone()).is_err() {
            return;
        }
        let Some(rx) = self
            .inner
            .out_rx
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        else {
            return;
        };
        tokio::spawn(publisher(self.inner.clone(), link.clone(), rx));
        tokio::spawn(subscriber(self.inner.clone(), link));
    }

    fn interest_changed(&self) {
        self.inner.interest.notify_one();
    }

    fn publish(&self, topic: &Topic, envelope: Bytes) {
        let out = Out::Plain {
            channel: self.inner.channel(topic),
            envelope,
        };
        if self.inner.out.try_send(out).is_err()
            && let Some(link) = self.inner.link.get()
        {
            link.count_dropped(1);
        }
    }

    fn history(&self) -> Option<&dyn BrokerHistory> {
        Some(self)
    }
}

impl BrokerHistory for RedisBroker {
    fn publish_recorded(&self, topic: &Topic, head: String, payload: Bytes) {
        let out = Out::Recorded {
            topic: topic.clone(),
            head,
            payload,
        };
        if let Err(e) = self.inner.out.try_send(out)
            && let Some(link) = self.inner.link.get()
        {
            let (mpsc::error::TrySendError::Full(out) | mpsc::error::TrySendError::Closed(out)) = e;
            if let Out::Recorded {
                topic,
                head,
                payload,
            } = out
            {
                link.unrecorded(&topic, &head, payload);
            }
        }
    }

    fn since(
        &self,
        topic: &Topic,
        offset: u64,
        limit: usize,
    ) -> BoxFuture<'static, Result<HistoryPage, BrokerError>> {
        let inner = self.inner.clone();
        let (stream, meta) = inner.stream_keys(topic);
        Box::pin(async move {
            // As for publishing: a cached connection may be dead; one retry on a fresh one.
            let mut last = BrokerError::Unavailable;
            for _ in 0..2 {
                let mut c = inner.command().await?;
                let r: Result<Value, _> = inner
                    .since
                    .key(&stream)
                    .key(&meta)
                    .arg(offset)
                    .arg(limit)
                    .invoke_async(&mut c)
                    .await;
                match r {
                    Ok(v) => {
                        return parse_page(v)
                            .ok_or_else(|| BrokerError::Server("unexpected history reply".into()));
                    }
                    Err(e) => {
                        inner.drop_command().await;
                        last = BrokerError::Server(e.to_string());
                    }
                }
            }
            Err(last)
        })
    }
}

fn bulk(v: &Value) -> Option<&[u8]> {
    match v {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.as_bytes()),
        _ => None,
    }
}

fn number(v: &Value) -> Option<u64> {
    match v {
        Value::Int(i) => u64::try_from(*i).ok(),
        other => std::str::from_utf8(bulk(other)?).ok()?.parse().ok(),
    }
}

/// `{epoch, top, {{id, {"p", envelope}}, ...}}` from the history script.
fn parse_page(v: Value) -> Option<HistoryPage> {
    let Value::Array(parts) = v else { return None };
    let [epoch, top, entries] = <[Value; 3]>::try_from(parts).ok()?;
    let epoch_raw = bulk(&epoch)?;
    if epoch_raw.is_empty() {
        return Some(HistoryPage::default());
    }
    let epoch = std::str::from_utf8(epoch_raw).ok()?.parse().ok()?;
    let top = Position {
        offset: number(&top)?,
        epoch,
    };
    let Value::Array(entries) = entries else {
        return None;
    };
    let mut out = Vec::with_capacity(entries.len());
    for e in entries {
        let Value::Array(e) = e else { return None };
        let [id, fields] = <[Value; 2]>::try_from(e).ok()?;
        let id = std::str::from_utf8(bulk(&id)?).ok()?;
        let offset: u64 = id.strip_suffix("-0")?.parse().ok()?;
        let Value::Array(fields) = fields else {
            return None;
        };
        let data = fields.get(1).and_then(bulk)?;
        out.push((offset, Bytes::copy_from_slice(data)));
    }
    Some(HistoryPage {
        top: Some(top),
        entries: out,
    })
}

/// The commands for one batch of publications.
fn pipeline(inner: &Inner, history: Option<&HistoryConfig>, batch: &[Out]) -> redis::Pipeline {
    let mut pipe = redis::pipe();
    for o in batch {
        match o {
            Out::Plain { channel, envelope } => {
                pipe.cmd("PUBLISH").arg(channel).arg(&envelope[..]).ignore();
            }
            Out::Recorded {
                topic,
                head,
                payload,
            } => {
                let (stream, meta) = inner.stream_keys(topic);
                let (capacity, ttl) = history.map_or((1000, 0), |h| (h.capacity, h.ttl.as_secs()));
                pipe.cmd("EVALSHA")
                    .arg(inner.record.get_hash())
                    .arg(2)
                    .arg(stream)
                    .arg(meta)
                    .arg(head)
                    .arg(&payload[..])
                    .arg(capacity)
                    .arg(ttl)
                    .arg(inner.channel(topic))
                    .arg("publish")
                    .ignore();
            }
        }
    }
    pipe
}

/// Sends publications, pipelined in batches; reconnects with backoff. Publications it
/// cannot send are counted (plain) or handed back to the hub for local fan-out
/// (recorded).
async fn publisher(inner: Arc<Inner>, link: Link, mut rx: mpsc::Receiver<Out>) {
    let mut backoff = inner.config.backoff_min;
    let mut retry_at = tokio::time::Instant::now();
    let mut batch = Vec::with_capacity(inner.config.batch);
    let mut seen_recovered = inner.recovered.load(std::sync::atomic::Ordering::Acquire);
    while let Some(first) = rx.recv().await {
        if link.is_closed() {
            return;
        }
        batch.clear();
        batch.push(first);
        while batch.len() < inner.config.batch.max(1) {
            match rx.try_recv() {
                Ok(o) => batch.push(o),
                Err(_) => break,
            }
        }
        let history = link.history_config();
        // The server came back since the last failure: no reason to wait out the pause.
        let recovered = inner.recovered.load(std::sync::atomic::Ordering::Acquire);
        if recovered != seen_recovered {
            seen_recovered = recovered;
            retry_at = tokio::time::Instant::now();
        }
        // A cached connection may have died since it was last used (the server
        // restarted): one more try on a fresh one before giving up on the batch.
        let mut sent = false;
        for _ in 0..2 {
            if sent || tokio::time::Instant::now() < retry_at {
                break;
            }
            let Ok(mut c) = inner.command().await else {
                break;
            };
            sent = pipeline(&inner, history.as_ref(), &batch)
                .query_async::<()>(&mut c)
                .await
                .is_ok();
            if !sent {
                inner.drop_command().await;
            }
        }
        if sent {
            backoff = inner.config.backoff_min;
            continue;
        }
        if tokio::time::Instant::now() >= retry_at {
            retry_at = tokio::time::Instant::now() + backoff;
            backoff = (backoff * 2).min(inner.config.backoff_max);
        }
        let mut dropped = 0;
        for o in batch.drain(..) {
            match o {
                Out::Plain { .. } => dropped += 1,
                Out::Recorded {
                    topic,
                    head,
                    payload,
                } => link.unrecorded(&topic, &head, payload),
            }
        }
        if dropped > 0 {
            link.count_dropped(dropped);
        }
    }
}

/// The pub/sub connection: subscribes to what the hub wants, delivers what arrives,
/// reconnects with backoff and subscribes again.
async fn subscriber(inner: Arc<Inner>, link: Link) {
    use futures_core::Stream;
    let mut backoff = inner.config.backoff_min;
    let mut connected_before = false;
    loop {
        if link.is_closed() {
            return;
        }
        let pubsub =
            tokio::time::timeout(inner.config.timeout, inner.client.get_async_pubsub()).await;
        let pubsub = match pubsub {
            Ok(Ok(p)) => p,
            Ok(Err(e)) => {
                link.down(&format!("redis pub/sub connect failed: {e}"));
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(inner.config.backoff_max);
                continue;
            }
            Err(_) => {
                link.down("redis pub/sub connect timed out");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(inner.config.backoff_max);
                continue;
            }
        };
        let (mut sink, mut stream) = pubsub.split();
        // Everything the hub wants now; pending changes are folded in.
        let _ = link.take_interest(usize::MAX);
        let mut held: HashSet<Topic> = HashSet::new();
        let all = link.topics();
        let mut ok = true;
        for chunk in all.chunks(inner.config.batch.max(1)) {
            let channels: Vec<String> = chunk.iter().map(|t| inner.channel(t)).collect();
            if sink.subscribe(channels).await.is_err() {
                ok = false;
                break;
            }
            held.extend(chunk.iter().cloned());
            link.subscribed(chunk);
        }
        if !ok {
            link.down("redis pub/sub subscribe failed");
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(inner.config.backoff_max);
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
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let reason = loop {
            tokio::select! {
                msg = std::future::poll_fn(|cx| std::pin::Pin::new(&mut stream).poll_next(cx)) => {
                    let Some(msg) = msg else { break "redis pub/sub connection lost" };
                    if let Some(topic) = inner.topic_of(msg.get_channel_name()) {
                        link.deliver(topic, Bytes::copy_from_slice(msg.get_payload_bytes()));
                    }
                }
                _ = inner.interest.notified() => {
                    if !apply_interest(&inner, &link, &mut sink, &mut held).await {
                        break "redis pub/sub subscribe failed";
                    }
                }
                _ = tick.tick() => {
                    if link.is_closed() {
                        return;
                    }
                }
            }
        };
        link.down(reason);
    }
}

/// Waits (with backoff, for at most the configured timeout in all) until a fresh command
/// connection works; the subscriber goes on either way, the publisher retries on its own.
async fn command_ready(inner: &Inner, link: &Link) {
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

/// Applies the hub's interest changes in batches; false when the connection failed.
async fn apply_interest(
    inner: &Inner,
    link: &Link,
    sink: &mut redis::aio::PubSubSink,
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
            let channels: Vec<String> = add.iter().map(|t| inner.channel(t)).collect();
            if sink.subscribe(channels).await.is_err() {
                return false;
            }
            held.extend(add.iter().cloned());
        }
        // Already held ones are confirmed too (a topic that left and came back before
        // the broker took the change).
        link.subscribed(&batch.subscribe);
        if !remove.is_empty() {
            let channels: Vec<String> = remove.iter().map(|t| inner.channel(t)).collect();
            if sink.unsubscribe(channels).await.is_err() {
                return false;
            }
            for t in &remove {
                held.remove(t);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_map_back_to_topics() {
        let b = RedisBroker::new(RedisConfig::new("redis://127.0.0.1:1/")).unwrap();
        let c = b.inner.channel("room:1");
        assert_eq!(c, "rapidws:{room:1}");
        assert_eq!(b.inner.topic_of(&c), Some("room:1"));
        assert_eq!(b.inner.topic_of("other:{x}"), None);
        assert_eq!(b.inner.stream_keys("t").0, "rapidws:{t}:s");
    }

    #[test]
    fn history_replies_are_parsed_and_odd_ones_refused() {
        let entry = |id: &str, data: &[u8]| {
            Value::Array(vec![
                Value::BulkString(id.as_bytes().to_vec()),
                Value::Array(vec![
                    Value::BulkString(b"p".to_vec()),
                    Value::BulkString(data.to_vec()),
                ]),
            ])
        };
        let v = Value::Array(vec![
            Value::BulkString(b"1700000000123456".to_vec()),
            Value::BulkString(b"7".to_vec()),
            Value::Array(vec![entry("6-0", b"a"), entry("7-0", b"b")]),
        ]);
        let page = parse_page(v).unwrap();
        assert_eq!(
            page.top,
            Some(Position {
                offset: 7,
                epoch: 1_700_000_000_123_456
            })
        );
        assert_eq!(page.entries.len(), 2);
        assert_eq!(page.entries[1].0, 7);
        let none = Value::Array(vec![
            Value::BulkString(Vec::new()),
            Value::BulkString(b"0".to_vec()),
            Value::Array(vec![]),
        ]);
        assert!(parse_page(none).unwrap().top.is_none());
        assert!(parse_page(Value::Nil).is_none());
        assert!(parse_page(Value::Array(vec![Value::Nil])).is_none());
        let bad_id = Value::Array(vec![
            Value::BulkString(b"1".to_vec()),
            Value::Int(1),
            Value::Array(vec![entry("x", b"a")]),
        ]);
        assert!(parse_page(bad_id).is_none());
    }
}
