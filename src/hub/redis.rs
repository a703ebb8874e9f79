//! The Redis broker (feature `hub-redis`): Redis pub/sub between nodes through the
//! `redis` crate on tokio, and, when the hub keeps history, Redis Streams for it; against
//! one server, or a Redis Cluster with sharded pub/sub.
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
//! refreshes the keys' time to live and publishes, atomically. (A topic that starts with
//! `}` would give an empty hash tag, so its names get a space after the brace: `P:{ T}`;
//! topics never contain spaces.)
//!
//! In cluster mode ([`RedisConfig::cluster`]) the channels are shard channels
//! (`SSUBSCRIBE`, `SPUBLISH`, Redis 7.0 or later): a publication goes to the master that
//! owns its topic's slot and reaches only the nodes subscribed there, instead of every
//! server of the cluster. Both connections are cluster connections (RESP3 for the pub/sub
//! one) that follow the slot map; subscriptions and publication pipelines are split by
//! slot, and the script only touches the keys and channel of one topic, all in that
//! topic's slot.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use futures_core::future::BoxFuture;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{MultipleNodeRoutingInfo, RoutingInfo, Slot};
use redis::{AsyncConnectionConfig, Client, ErrorKind, PushKind, RedisResult, Value};
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
    /// The server, as a `redis://` URL (one server; unused in cluster mode).
    pub url: String,
    /// Cluster mode when not empty: some nodes of a Redis Cluster (`redis://host:port/`
    /// each; the rest are discovered), with sharded pub/sub (`SSUBSCRIBE`/`SPUBLISH`,
    /// Redis 7.0 or later). Set by [`RedisConfig::cluster`].
    pub cluster_nodes: Vec<String>,
    /// Prefix of every channel and key. Default `rapidws`.
    pub prefix: String,
    /// Publications waiting for the server; past this they are dropped and counted. In
    /// cluster mode also the publications received and waiting to be delivered (while a
    /// lost master is recovered); past this they are dropped and counted, and the node
    /// catches up from the streams. Default 65,536.
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
            cluster_nodes: Vec::new(),
            prefix: "rapidws".into(),
            queue_capacity: 65_536,
            batch: 512,
            backoff_min: Duration::from_millis(100),
            backoff_max: Duration::from_secs(5),
            timeout: Duration::from_secs(2),
        }
    }

    /// Settings for a Redis Cluster reached through any of `nodes` (`redis://host:port/`
    /// each; one is enough, more help when it is down): sharded pub/sub, so that a
    /// publication is handled by the master that owns its topic's slot and reaches only
    /// the nodes subscribed to the topic, and topics spread over the shards.
    ///
    /// The pub/sub connection holds one connection per master and follows the cluster's
    /// slot map. When a master's connection is lost the hub is told
    /// ([`HubEvent::BrokerDown`](super::HubEvent::BrokerDown)); the broker subscribes
    /// every live topic again once the master is back (or a replica took its slots),
    /// holding what the other shards send meanwhile (up to
    /// [`queue_capacity`](Self::queue_capacity)), and the hub catches up from the streams
    /// before the held publications are delivered, so every subscriber still sees each
    /// publication once and in order. Publications for the lost master's topics are
    /// delivered locally, unrecorded, until it is back.
    ///
    /// ```
    /// use rapidws::hub::{Hub, RedisBroker, RedisConfig};
    ///
    /// let config = RedisConfig::cluster(["redis://10.0.0.1:7000/", "redis://10.0.0.2:7000/"]);
    /// assert!(config.is_cluster());
    /// let broker = RedisBroker::new(config)?;
    /// // Inside the runtime: let hub = Hub::builder().broker(broker).build()?;
    /// # let _ = (broker, Hub::builder);
    /// # Ok::<(), rapidws::hub::BrokerError>(())
    /// ```
    pub fn cluster<S: Into<String>>(nodes: impl IntoIterator<Item = S>) -> Self {
        let mut c = RedisConfig::new(String::new());
        c.cluster_nodes = nodes.into_iter().map(Into::into).collect();
        c
    }

    /// Whether this is cluster mode (sharded pub/sub).
    pub fn is_cluster(&self) -> bool {
        !self.cluster_nodes.is_empty()
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

/// Where the commands go: one server, or a cluster.
enum Backend {
    Single(Client),
    Cluster {
        /// For the command connection (RESP2, no push messages); boxed, it is twice
        /// the size of a [`Client`].
        commands: Box<ClusterClient>,
    },
}

/// The command connection: one server's multiplexed connection, or a cluster connection
/// that routes each command (and each single-slot pipeline) to the master of its slot.
#[derive(Clone)]
enum Conn {
    Single(MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a redis::Cmd) -> redis::RedisFuture<'a, Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

struct Inner {
    config: RedisConfig,
    backend: Backend,
    link: OnceLock<Link>,
    interest: Notify,
    out: mpsc::Sender<Out>,
    out_rx: Mutex<Option<mpsc::Receiver<Out>>>,
    /// The command connection (cheap to clone), `None` while disconnected.
    cmd: tokio::sync::Mutex<Option<Conn>>,
    /// Counts the times the server was found working again after a loss; the publisher
    /// drops its retry pause when this moves.
    recovered: std::sync::atomic::AtomicU64,
    record: redis::Script,
    since: redis::Script,
}

/// The Redis broker (feature `hub-redis`): Redis pub/sub between nodes through the
/// `redis` crate on tokio, and, when the hub keeps history, Redis Streams for it; against
/// one server, or a Redis Cluster with sharded pub/sub ([`RedisConfig::cluster`]).
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
///
/// In cluster mode the channels are shard channels (`SSUBSCRIBE`/`SPUBLISH`): each topic
/// lives on the master that owns its slot, and both connections follow the slot map;
/// see [`RedisConfig::cluster`].
#[derive(Clone)]
pub struct RedisBroker {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for RedisBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = &self.inner.config;
        let mut d = f.debug_struct("RedisBroker");
        if c.is_cluster() {
            d.field("cluster_nodes", &c.cluster_nodes);
        } else {
            d.field("url", &c.url);
        }
        d.finish_non_exhaustive()
    }
}

fn server_error(e: impl std::fmt::Display) -> BrokerError {
    BrokerError::Server(e.to_string())
}

impl RedisBroker {
    /// A broker for the server at `config.url`, or the cluster of `config.cluster_nodes`;
    /// it connects when the hub starts it. Fails on a malformed URL, and in cluster mode
    /// on a prefix with braces (it would move every key and channel into one slot, or
    /// split a topic's over several).
    pub fn new(config: RedisConfig) -> Result<Self, BrokerError> {
        let backend = if config.is_cluster() {
            if config.prefix.contains(['{', '}']) {
                return Err(BrokerError::Server(
                    "a cluster prefix may not contain braces".into(),
                ));
            }
            Backend::Cluster {
                commands: Box::new(cluster_builder(&config).build().map_err(server_error)?),
            }
        } else {
            Backend::Single(Client::open(config.url.as_str()).map_err(server_error)?)
        };
        let (out, out_rx) = mpsc::channel(config.queue_capacity.max(1));
        Ok(RedisBroker {
            inner: Arc::new(Inner {
                config,
                backend,
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

/// A cluster client for `config`: its timeouts, and one retry per request (the broker
/// has its own backoff, and a publication waiting on a lost master holds up the others).
fn cluster_builder(config: &RedisConfig) -> ClusterClientBuilder {
    ClusterClientBuilder::new(config.cluster_nodes.iter().map(String::as_str))
        .connection_timeout(config.timeout)
        .response_timeout(config.timeout)
        .overall_response_timeout(Some(config.timeout))
        .retries(1)
        .min_retry_wait(config.backoff_min.as_millis() as u64)
        .max_retry_wait(config.backoff_max.as_millis() as u64)
}

impl Inner {
    fn is_cluster(&self) -> bool {
        matches!(self.backend, Backend::Cluster { .. })
    }

    fn channel(&self, topic: &str) -> String {
        if topic.starts_with('}') {
            // `P:{}...` has an empty hash tag: Redis Cluster would hash each whole name,
            // and the channel and streams of the topic would land in different slots.
            format!("{}:{{ {topic}}}", self.config.prefix)
        } else {
            format!("{}:{{{topic}}}", self.config.prefix)
        }
    }

    fn stream_keys(&self, topic: &str) -> (String, String) {
        let c = self.channel(topic);
        (format!("{c}:s"), format!("{c}:m"))
    }

    fn topic_of<'a>(&self, channel: &'a str) -> Option<&'a str> {
        let t = channel
            .strip_prefix(self.config.prefix.as_str())?
            .strip_prefix(":{")?
            .strip_suffix('}')?;
        Some(t.strip_prefix(' ').unwrap_or(t))
    }

    /// The commands that publish, as the script calls them.
    fn publish_command(&self) -> &'static str {
        if self.is_cluster() {
            "spublish"
        } else {
            "publish"
        }
    }

    fn connection_config(&self) -> AsyncConnectionConfig {
        AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.config.timeout))
            .set_response_timeout(Some(self.config.timeout))
    }

    /// The command connection, connecting (and loading the scripts) when there is none.
    ///
    /// A cluster connection is kept for good: it repairs its connections to the nodes
    /// itself, and works on with the other shards while one is away. The scripts are
    /// loaded on every node when they all answer; a node that lacks them (it restarted)
    /// gets the script's text instead of its hash.
    async fn command(&self) -> Result<Conn, BrokerError> {
        let mut slot = self.cmd.lock().await;
        if let Some(c) = slot.as_ref() {
            return Ok(c.clone());
        }
        let c = match &self.backend {
            Backend::Single(client) => {
                let mut c = Conn::Single(
                    client
                        .get_multiplexed_async_connection_with_config(&self.connection_config())
                        .await
                        .map_err(server_error)?,
                );
                self.load_scripts(&mut c).await?;
                c
            }
            Backend::Cluster { commands } => {
                let mut c = Conn::Cluster(
                    commands
                        .get_async_connection()
                        .await
                        .map_err(server_error)?,
                );
                let _ = self.load_scripts(&mut c).await;
                c
            }
        };
        *slot = Some(c.clone());
        Ok(c)
    }

    /// SCRIPT LOAD of both scripts (on every node of a cluster).
    async fn load_scripts(&self, c: &mut Conn) -> Result<(), BrokerError> {
        for script in [&self.record, &self.since] {
            script
                .prepare_invoke()
                .load_async(c)
                .await
                .map_err(server_error)?;
        }
        Ok(())
    }

    /// Forgets a connection that failed (one server; a cluster connection is kept).
    async fn drop_command(&self) {
        if !self.is_cluster() {
            *self.cmd.lock().await = None;
        }
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
        if self.inner.is_cluster() {
            tokio::spawn(sharded_subscriber(self.inner.clone(), link));
        } else {
            tokio::spawn(subscriber(self.inner.clone(), link));
        }
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
                let r: Result<Value, _> = if inner.is_cluster() {
                    // The script's text: a node that restarted lacks it, and loading it
                    // (on every node of a cluster) fails while another node is away.
                    redis::cmd("EVAL")
                        .arg(SINCE)
                        .arg(2)
                        .arg(&stream)
                        .arg(&meta)
                        .arg(offset)
                        .arg(limit)
                        .query_async(&mut c)
                        .await
                } else {
                    inner
                        .since
                        .key(&stream)
                        .key(&meta)
                        .arg(offset)
                        .arg(limit)
                        .invoke_async(&mut c)
                        .await
                };
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

/// How a pipeline calls the record script: by its hash, or (on a node that lacks it)
/// with its text.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Call {
    Hash,
    Text,
}

/// The commands for one batch of publications.
fn pipeline(
    inner: &Inner,
    history: Option<&HistoryConfig>,
    batch: &[Out],
    call: Call,
) -> redis::Pipeline {
    let mut pipe = redis::pipe();
    for o in batch {
        match o {
            Out::Plain { channel, envelope } => {
                pipe.cmd(inner.publish_command())
                    .arg(channel)
                    .arg(&envelope[..]);
            }
            Out::Recorded {
                topic,
                head,
                payload,
            } => {
                let (stream, meta) = inner.stream_keys(topic);
                let (capacity, ttl) = history.map_or((1000, 0), |h| (h.capacity, h.ttl.as_secs()));
                match call {
                    Call::Hash => pipe.cmd("EVALSHA").arg(inner.record.get_hash()),
                    Call::Text => pipe.cmd("EVAL").arg(RECORD),
                };
                pipe.arg(2)
                    .arg(stream)
                    .arg(meta)
                    .arg(head)
                    .arg(&payload[..])
                    .arg(capacity)
                    .arg(ttl)
                    .arg(inner.channel(topic))
                    .arg(inner.publish_command());
            }
        }
    }
    pipe
}

/// Publications that could not be sent: plain ones are counted, recorded ones go back
/// to the hub for local fan-out.
fn give_back(link: &Link, items: impl IntoIterator<Item = Out>) {
    let mut dropped = 0;
    for o in items {
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

/// The slot of a publication's channel (and of its topic's streams).
fn slot_of(inner: &Inner, o: &Out) -> Slot {
    match o {
        Out::Plain { channel, .. } => Slot::for_key(channel),
        Out::Recorded { topic, .. } => Slot::for_key(inner.channel(topic)),
    }
}

/// A slot whose master failed a pipeline: skipped until `until`, then tried again.
struct Pause {
    until: tokio::time::Instant,
    backoff: Duration,
}

/// Cluster mode: one pipeline per slot (a pipeline may not cross slots), each to the
/// master of its slot. A slot whose pipeline failed is paused with backoff, alone: the
/// other shards go on.
async fn publish_sharded(
    inner: &Inner,
    link: &Link,
    history: Option<&HistoryConfig>,
    batch: &mut Vec<Out>,
    paused: &mut HashMap<Slot, Pause>,
) {
    let mut groups: Vec<(Slot, Vec<Out>)> = Vec::new();
    let mut index: HashMap<Slot, usize> = HashMap::new();
    for o in batch.drain(..) {
        let slot = slot_of(inner, &o);
        let i = *index.entry(slot).or_insert_with(|| {
            groups.push((slot, Vec::new()));
            groups.len() - 1
        });
        groups[i].1.push(o);
    }
    let now = tokio::time::Instant::now();
    for (slot, group) in groups {
        if paused.get(&slot).is_some_and(|p| now < p.until) {
            give_back(link, group);
            continue;
        }
        let failed = match inner.command().await {
            Ok(mut c) => send_slot(inner, &mut c, history, group).await,
            Err(_) => group,
        };
        if failed.is_empty() {
            paused.remove(&slot);
            continue;
        }
        give_back(link, failed);
        let p = paused.entry(slot).or_insert(Pause {
            until: now,
            backoff: inner.config.backoff_min,
        });
        p.until = tokio::time::Instant::now() + p.backoff;
        p.backoff = (p.backoff * 2).min(inner.config.backoff_max);
    }
}

/// Sends one slot's publications; returns those that failed, in order.
async fn send_slot(
    inner: &Inner,
    c: &mut Conn,
    history: Option<&HistoryConfig>,
    group: Vec<Out>,
) -> Vec<Out> {
    let mut call = Call::Hash;
    let mut todo = group;
    loop {
        let replies: RedisResult<Vec<RedisResult<Value>>> = pipeline(inner, history, &todo, call)
            .ignore_errors()
            .query_async(c)
            .await;
        let Ok(replies) = replies else {
            return todo;
        };
        if replies.len() != todo.len() {
            return todo;
        }
        // A node that restarted lacks the script until the subscriber loads it again:
        // those calls are made again with its text, unless a later one went through
        // (that would reorder the topic's offsets).
        let mut failed = Vec::new();
        let mut missing = Vec::new();
        let mut later_ok = false;
        for (o, r) in todo.into_iter().zip(replies) {
            match r {
                Ok(_) => later_ok |= !missing.is_empty(),
                Err(e)
                    if call == Call::Hash
                        && e.kind() == ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
                {
                    missing.push(o)
                }
                Err(_) => failed.push(o),
            }
        }
        if missing.is_empty() || later_ok {
            failed.extend(missing);
            return failed;
        }
        if !failed.is_empty() {
            // Other errors too: no second round, keep the order of what is handed back.
            failed.extend(missing);
            return failed;
        }
        call = Call::Text;
        todo = missing;
    }
}

/// Sends publications, pipelined in batches; reconnects with backoff. Publications it
/// cannot send are counted (plain) or handed back to the hub for local fan-out
/// (recorded).
async fn publisher(inner: Arc<Inner>, link: Link, mut rx: mpsc::Receiver<Out>) {
    let mut backoff = inner.config.backoff_min;
    let mut retry_at = tokio::time::Instant::now();
    let mut batch = Vec::with_capacity(inner.config.batch);
    let mut seen_recovered = inner.recovered.load(std::sync::atomic::Ordering::Acquire);
    let mut paused: HashMap<Slot, Pause> = HashMap::new();
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
            paused.clear();
        }
        if inner.is_cluster() {
            publish_sharded(&inner, &link, history.as_ref(), &mut batch, &mut paused).await;
            continue;
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
            sent = pipeline(&inner, history.as_ref(), &batch, Call::Hash)
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
        give_back(&link, batch.drain(..));
    }
}

/// The pub/sub connection: subscribes to what the hub wants, delivers what arrives,
/// reconnects with backoff and subscribes again.
async fn subscriber(inner: Arc<Inner>, link: Link) {
    use futures_core::Stream;
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
            if !sink.add(channels(&inner, chunk)).await {
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
///
/// In a cluster, "works" means every master answers and says `cluster_state:ok`: a
/// master that restarted takes subscriptions before it has rejoined its cluster, and
/// refuses keyed commands (CLUSTERDOWN) until then, which takes the cluster bus a few
/// seconds, so the wait there is up to five times the timeout.
async fn command_ready(inner: &Inner, link: &Link) {
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
fn channels(inner: &Inner, topics: &[Topic]) -> Vec<String> {
    topics.iter().map(|t| inner.channel(t)).collect()
}

/// What the subscriber needs of a pub/sub connection; false when the connection failed.
trait Channels {
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
struct Shards {
    conn: ClusterConnection,
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
fn every_reply_says(v: &Value, text: &str) -> bool {
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
async fn apply_interest(
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
async fn sharded_subscriber(inner: Arc<Inner>, link: Link) {
    let batch = inner.config.batch.max(1);
    let mut backoff = inner.config.backoff_min;
    let mut connected_before = false;
    'connect: loop {
        if link.is_closed() {
            return;
        }
        // What the connection receives waits here, bounded: past the queue capacity it is
        // dropped and counted, and the broker treats that as a gap (resubscribes and
        // catches up).
        let (tx, mut rx) = mpsc::channel::<redis::PushInfo>(inner.config.queue_capacity.max(1));
        let overflow = Arc::new(AtomicBool::new(false));
        let (flag, counter) = (overflow.clone(), link.clone());
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
        let mut shards = match conn {
            Ok(Ok(conn)) => Shards { conn },
            Ok(Err(e)) => {
                link.down(&format!("redis cluster pub/sub connect failed: {e}"));
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(inner.config.backoff_max);
                continue;
            }
            Err(_) => {
                link.down("redis cluster pub/sub connect timed out");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(inner.config.backoff_max);
                continue;
            }
        };
        let mut held: HashSet<Topic> = HashSet::new();
        loop {
            // Everything the hub wants now (pending changes folded in), subscribed again
            // on this connection (SSUBSCRIBE of a held channel changes nothing).
            let _ = link.take_interest(usize::MAX);
            let all = link.topics();
            let stale: Vec<Topic> = {
                let want: HashSet<&Topic> = all.iter().collect();
                held.iter().filter(|t| !want.contains(t)).cloned().collect()
            };
            let mut ok = stale.is_empty() || shards.remove(channels(&inner, &stale)).await;
            if ok {
                held.clear();
                for chunk in all.chunks(batch) {
                    if !shards.add(channels(&inner, chunk)).await {
                        ok = false;
                        break;
                    }
                    held.extend(chunk.iter().cloned());
                    link.subscribed(chunk);
                }
            }
            if !ok {
                link.down("redis cluster ssubscribe failed");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(inner.config.backoff_max);
                continue;
            }
            backoff = inner.config.backoff_min;
            command_ready(&inner, &link).await;
            // What was dropped while the broker was away is in the streams, after each
            // topic's last position: the catch-up brings it.
            overflow.store(false, Ordering::Relaxed);
            if connected_before {
                link.up_after_gap().await;
            } else {
                link.up();
                connected_before = true;
            }
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            let reason = loop {
                tokio::select! {
                    push = rx.recv() => {
                        let Some(push) = push else {
                            link.down("redis cluster pub/sub connection closed");
                            continue 'connect;
                        };
                        match push.kind {
                            PushKind::SMessage => {
                                if let Some(msg) = redis::Msg::from_push_info(push)
                                    && let Some(topic) = inner.topic_of(msg.get_channel_name())
                                {
                                    link.deliver(
                                        topic,
                                        Bytes::copy_from_slice(msg.get_payload_bytes()),
                                    );
                                }
                            }
                            // A master's connection was lost: its channels may have
                            // missed publications.
                            PushKind::Disconnection => break "redis cluster node connection lost",
                            // The server dropped a channel we hold (its slot moved).
                            PushKind::SUnsubscribe
                                if unsolicited(&inner, &held, &push.data) =>
                            {
                                break "redis cluster moved a shard channel";
                            }
                            _ => {}
                        }
                        if overflow.swap(false, Ordering::Relaxed) {
                            break "redis cluster pub/sub fell behind";
                        }
                    }
                    _ = inner.interest.notified() => {
                        if !apply_interest(&inner, &link, &mut shards, &mut held).await {
                            break "redis cluster ssubscribe failed";
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
}

/// Whether an `sunsubscribe` push names a channel the broker still holds (its own
/// SUNSUBSCRIBE removes the topic from `held` before the confirmation is read).
fn unsolicited(inner: &Inner, held: &HashSet<Topic>, data: &[Value]) -> bool {
    let Some(Value::BulkString(channel)) = data.first() else {
        return false;
    };
    std::str::from_utf8(channel)
        .ok()
        .and_then(|c| inner.topic_of(c))
        .is_some_and(|t| held.contains(t))
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
        let odd = b.inner.channel("}x");
        assert_eq!(odd, "rapidws:{ }x}");
        assert_eq!(b.inner.topic_of(&odd), Some("}x"));
    }

    #[test]
    fn a_topics_channel_and_streams_share_one_cluster_slot() {
        let b = RedisBroker::new(RedisConfig::cluster(["redis://127.0.0.1:1/"])).unwrap();
        assert!(b.inner.is_cluster());
        assert_eq!(b.inner.publish_command(), "spublish");
        for topic in ["t", "room:1", "}x", "a}b", "{x}", "x{", "}", "{}", "a.b.c"] {
            let c = b.inner.channel(topic);
            let (s, m) = b.inner.stream_keys(topic);
            assert_eq!(Slot::for_key(&c), Slot::for_key(&s), "{topic}");
            assert_eq!(Slot::for_key(&c), Slot::for_key(&m), "{topic}");
            assert_eq!(b.inner.topic_of(&c), Some(topic));
        }
        assert_ne!(
            Slot::for_key(b.inner.channel("room:1")),
            Slot::for_key(b.inner.channel("room:2"))
        );
        let braces = RedisConfig::cluster(["redis://127.0.0.1:1/"]).with_prefix("app{1}");
        assert!(RedisBroker::new(braces).is_err());
        assert!(
            RedisBroker::new(RedisConfig::new("redis://127.0.0.1:1/").with_prefix("a{b}")).is_ok()
        );
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
