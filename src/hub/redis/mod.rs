//! The Redis broker (feature `hub-redis`): Redis pub/sub between nodes through the
//! `redis` crate on tokio, and, when the hub keeps history, Redis Streams for it; against
//! one server, or a Redis Cluster with sharded pub/sub.
//!
//! Against one server, two connections per node: a dedicated pub/sub connection,
//! subscribed to the channels
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
//! server of the cluster. The command connection is the `redis` crate's cluster
//! connection, which follows the slot map; publication pipelines are split by slot, and
//! the script only touches the keys and channel of one topic, all in that topic's slot.
//! The pub/sub side holds one connection per master itself and keeps every live topic
//! subscribed on the master that owns its slot; a topic it cannot vouch for is reported
//! lost until it is subscribed there again and caught up (see `cluster.rs`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures_core::future::BoxFuture;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::Slot;
use redis::{AsyncConnectionConfig, Client, ErrorKind, PushKind, RedisResult, Value};
use tokio::sync::{Notify, mpsc};

use super::Topic;
use super::broker::{Broker, BrokerError, BrokerHistory, Link, Outbox};
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
    /// cluster mode also what the masters sent and the subscriber has not read yet (it
    /// reads between subscribing and catching up); past this it is dropped and counted,
    /// and every topic is reported lost, subscribed again and caught up from the streams.
    /// Default 65,536.
    pub queue_capacity: usize,
    /// Most channels per SUBSCRIBE (in cluster mode, per pipeline of one-channel
    /// SSUBSCRIBEs) and most publications per pipeline. Default 512.
    pub batch: usize,
    /// First reconnect delay, doubled after each failure. Default 100 ms.
    pub backoff_min: Duration,
    /// Longest reconnect delay. Default 5 s.
    pub backoff_max: Duration,
    /// Connect and response timeout of each connection. Default 2 s.
    pub timeout: Duration,
    /// Cluster mode: how often the broker reads the cluster's slot map (`CLUSTER
    /// SLOTS`), to find slots whose master changed without its connections showing it
    /// (a failover whose old master is still reachable, a node replaced under a new id).
    /// Default 1 s.
    pub topology_interval: Duration,
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
            topology_interval: Duration::from_secs(1),
        }
    }

    /// Settings for a Redis Cluster reached through any of `nodes` (`redis://host:port/`
    /// each; one is enough, more help when it is down): sharded pub/sub, so that a
    /// publication is handled by the master that owns its topic's slot and reaches only
    /// the nodes subscribed to the topic, and topics spread over the shards.
    ///
    /// The broker holds one pub/sub connection per master and keeps every live topic
    /// subscribed on the master that owns its slot. A topic is delivered only while its
    /// subscription is confirmed there; whatever ends that is seen and reported: the
    /// master's connection breaks (it died or restarted, with or without its data), the
    /// master drops the channel because its slot moved (a reshard, a failover that
    /// demoted it), or the slot map, read every
    /// [`topology_interval`](Self::topology_interval), names another master for the slot
    /// (a failover whose old master is still reachable, a node replaced under a new id).
    ///
    /// The topics of a lost master are reported lost
    /// ([`HubEvent::BrokerDegraded`](super::HubEvent::BrokerDegraded),
    /// [`Hub::broker_ready`](super::Hub::broker_ready) false for each,
    /// [`HubMetrics::broker_up`](super::HubMetrics::broker_up) false), and subscribed
    /// again, with backoff, on the master that owns them now (`MOVED` or `ASK` make the
    /// broker read the slot map again). Once confirmed there, the hub catches them up from
    /// the streams before anything newer is delivered: what was recorded meanwhile comes
    /// in order, and when the history is gone (a master back without its data) the topic's
    /// epoch changes ([`HubEvent::EpochChanged`](super::HubEvent::EpochChanged), and
    /// [`Recovery::EpochChanged`](super::Recovery::EpochChanged) for clients that come back
    /// with a position), so no gap goes unreported. A catch-up the master cannot serve yet
    /// (still loading, or not back in its cluster) is tried again later, the topic still
    /// reported lost. When every topic is held again the hub reports
    /// [`HubEvent::BrokerUp`](super::HubEvent::BrokerUp). The other masters' topics go on
    /// live meanwhile, and publications for the lost master's topics are delivered
    /// locally, unrecorded, until it is back. Only when no master answers at all is the
    /// broker down ([`HubEvent::BrokerDown`](super::HubEvent::BrokerDown)).
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
        /// The configured nodes, parsed: where the subscriber reads the slot map from,
        /// and how it reaches every master (credentials, TLS).
        seeds: Vec<redis::ConnectionInfo>,
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
    interest: Notify,
    out: Outbox<Out>,
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
/// Against one server, two connections per node: a dedicated pub/sub connection,
/// subscribed to the channels
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
/// lives on the master that owns its slot; the broker holds a pub/sub connection to every
/// master, and reports the topics of a master it lost until they are subscribed again
/// and caught up; see [`RedisConfig::cluster`].
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

/// The topics of `topics` that `set` does not hold (or, when `held`, those it does).
fn sorted_out<'a>(
    topics: impl IntoIterator<Item = &'a Topic>,
    set: &HashSet<Topic>,
    held: bool,
) -> Vec<Topic> {
    topics
        .into_iter()
        .filter(|t| set.contains(*t) == held)
        .cloned()
        .collect()
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
            let seeds = config
                .cluster_nodes
                .iter()
                .map(|n| redis::IntoConnectionInfo::into_connection_info(n.as_str()))
                .collect::<RedisResult<Vec<_>>>()
                .map_err(server_error)?;
            Backend::Cluster {
                commands: Box::new(cluster_builder(&config).build().map_err(server_error)?),
                seeds,
            }
        } else {
            Backend::Single(Client::open(config.url.as_str()).map_err(server_error)?)
        };
        Ok(RedisBroker {
            inner: Arc::new(Inner {
                out: Outbox::new(config.queue_capacity),
                config,
                backend,
                interest: Notify::new(),
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
            Backend::Cluster { commands, .. } => {
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
        let Some(rx) = self.inner.out.start(&link) else {
            return;
        };
        tokio::spawn(publisher(self.inner.clone(), link.clone(), rx));
        if self.inner.is_cluster() {
            tokio::spawn(cluster::sharded_subscriber(self.inner.clone(), link));
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
        if let Some((_, link)) = self.inner.out.push(out) {
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
        if let Some((
            Out::Recorded {
                topic,
                head,
                payload,
            },
            link,
        )) = self.inner.out.push(out)
        {
            link.unrecorded(&topic, &head, payload);
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

mod cluster;
mod history;
mod publish;
mod subscribe;

use history::*;
use publish::*;
use subscribe::*;

#[cfg(test)]
mod tests;
