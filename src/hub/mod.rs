//! A fan-out hub: topics on one node through prepared messages, and across nodes through
//! a broker (in memory, Redis, NATS).
//!
//! One [`Hub`] per process, cloned into every task that needs it. Connections join it
//! with their sending half ([`Hub::join`]), subscribe to topics and leave them (all of
//! them when the [`Member`] is dropped, which the connection's task does when its receive
//! loop ends). [`Hub::publish`] frames a publication once, as a [`PreparedMessage`]
//! (compressed once per distinct negotiated window size, valid for peers with context
//! takeover), and queues it to every local subscriber without waiting on any of them: a
//! queue that is full gets the hub's [`SlowConsumer`] policy (drop and count, or close
//! with 1008 or 1013), so a slow subscriber never delays the others. Queueing wakes the
//! task that owns the subscriber's socket, which writes the frame out.
//!
//! ```
//! use rapidws::hub::Hub;
//! use rapidws::tokio::{ClientConfig, Message, ServerConfig, accept, connect};
//! use tokio::net::TcpListener;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # std::thread::spawn(|| {
//! #     std::thread::sleep(std::time::Duration::from_secs(30));
//! #     eprintln!("doctest timed out");
//! #     std::process::exit(1);
//! # });
//! let hub = Hub::new();
//! let listener = TcpListener::bind("127.0.0.1:0").await?;
//! let url = format!("ws://{}/", listener.local_addr()?);
//! let server_hub = hub.clone();
//! tokio::spawn(async move {
//!     let (stream, _) = listener.accept().await?;
//!     let (mut rd, wr) = accept(stream, &ServerConfig::default()).await?.into_split();
//!     let member = server_hub.join(wr);
//!     member.subscribe("news")?;
//!     // Keep receiving: it answers pings and writes what the hub queues.
//!     while let Some(msg) = rd.recv().await? {
//!         if let Message::Text(t) = msg {
//!             member.publish("news", t.as_str())?; // to every subscriber but this one
//!         }
//!     }
//!     Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
//! });
//!
//! let mut ws = connect(&url, &ClientConfig::default()).await?;
//! while hub.metrics().subscribers("news") == 0 {
//!     tokio::task::yield_now().await;
//! }
//! hub.publish("news", r#"{"headline":"hello"}"#)?;
//! assert_eq!(ws.recv().await?, Some(Message::text(r#"{"headline":"hello"}"#)));
//! ws.close(1000, "").await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Several nodes
//!
//! A [`Broker`] carries publications between the hubs of several processes. It is
//! interest-based: a node subscribes to a topic on the broker only while it has a local
//! subscriber (or keeps its history), in batches, so it receives each remote publication
//! once and fans it out locally. A node never delivers its own publication twice (it fans
//! out locally and skips its own echo), and every subscriber sees the publications of one
//! publisher on one topic in publish order. Brokers: [`MemoryBroker`] (the default: one
//! process, nothing to configure), `RedisBroker` (feature `hub-redis`) and `NatsBroker`
//! (feature `hub-nats`).
//!
//! # History and recovery
//!
//! With [`HubConfig::history`] set, each publication of a topic gets a [`Position`]
//! (offset and epoch). The framer ([`HubBuilder::framer`]) sees it and decides how (and
//! whether) the message carries it: the hub imposes no wire format. A client that comes
//! back with its last position is subscribed with [`Member::subscribe_from`]: it gets
//! exactly what it missed, in order and before anything newer, or is told the epoch
//! changed or the history was trimmed, so that it resynchronises. With Redis the history
//! is a Redis Stream shared by all nodes; otherwise each node keeps a bounded ring of what
//! it delivered, and starts a new epoch whenever it may have missed something (its broker
//! connection was lost).
//!
//! # Faults
//!
//! Losing the broker is a [`HubEvent::BrokerDown`] and a metric; local fan-out goes on.
//! The broker reconnects with backoff, subscribes to every live topic again, and the hub
//! marks the gap: it catches up from the broker's history, or changes the epoch
//! ([`HubEvent::EpochChanged`]). Bad input from a broker (over
//! [`HubConfig::max_message_size`], a malformed envelope, text that is not UTF-8) is
//! dropped and counted ([`HubMetrics::broker_invalid`]), never a panic.

mod broker;
mod envelope;
mod history;
mod metrics;
#[cfg(feature = "hub-nats")]
mod nats;
#[cfg(feature = "hub-redis")]
mod redis;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{Notify, broadcast};

pub use broker::{Broker, BrokerError, BrokerHistory, Interest, Link, MemoryBroker};
pub use history::{HistoryConfig, HistoryPage, Position, Recovery};
pub use metrics::HubMetrics;
#[cfg(feature = "hub-nats")]
pub use nats::{NatsBroker, NatsConfig};
#[cfg(feature = "hub-redis")]
pub use redis::{RedisBroker, RedisConfig};

use crate::codec::{CloseCode, MessageKind};
use crate::connection::{DEFAULT_PREPARED_LEVEL, PreparedMessage};
use crate::tokio::{TrySendError, WriteHalf};
use envelope::Envelope;
use history::Ring;
use metrics::Counters;

/// A topic name, shared.
pub type Topic = Arc<str>;

/// Identifies a joined connection within its hub.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u64);

/// What the hub does with a delivery for a subscriber whose send queue is past its
/// high-water mark (`Config::send_queue_high_water` of that connection).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SlowConsumer {
    /// Drop this delivery and count it ([`HubMetrics::dropped`]); the subscriber stays.
    Drop,
    /// Close the connection with `code` (1008 policy violation or 1013 try again later
    /// are the usual ones) and `reason`, and count it ([`HubMetrics::closed_slow`]).
    Close {
        /// The close code.
        code: u16,
        /// The close reason (at most 123 bytes).
        reason: String,
    },
}

impl SlowConsumer {
    /// Close with 1013 (try again later) and `reason`.
    pub fn close_try_again_later(reason: impl Into<String>) -> Self {
        SlowConsumer::Close {
            code: CloseCode::TRY_AGAIN_LATER.0,
            reason: reason.into(),
        }
    }

    /// Close with 1008 (policy violation) and `reason`.
    pub fn close_policy(reason: impl Into<String>) -> Self {
        SlowConsumer::Close {
            code: CloseCode::POLICY.0,
            reason: reason.into(),
        }
    }
}

/// A hub's settings. Every limit has a safe default (listed in SECURITY.md).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct HubConfig {
    /// What happens when a subscriber's queue is full. Default [`SlowConsumer::Drop`].
    pub slow_consumer: SlowConsumer,
    /// Largest publication payload, published here or arriving from a broker. 1 MiB.
    pub max_message_size: usize,
    /// Longest topic name, in bytes. 255.
    pub max_topic_len: usize,
    /// Most topics one connection may subscribe to. 1,024.
    pub max_topics_per_connection: usize,
    /// History per topic; `None` (the default) keeps none.
    pub history: Option<HistoryConfig>,
    /// The deflate level prepared messages are compressed with (0-9). 6.
    pub compression_level: i32,
    /// How long [`Member::subscribe_from`] waits for the broker. 5 s.
    pub recovery_timeout: Duration,
    /// Events buffered for each [`Hub::events`] receiver. 256.
    pub event_capacity: usize,
}

impl Default for HubConfig {
    fn default() -> Self {
        HubConfig {
            slow_consumer: SlowConsumer::Drop,
            max_message_size: 1 << 20,
            max_topic_len: 255,
            max_topics_per_connection: 1024,
            history: None,
            compression_level: DEFAULT_PREPARED_LEVEL,
            recovery_timeout: Duration::from_secs(5),
            event_capacity: 256,
        }
    }
}

impl HubConfig {
    /// Sets [`slow_consumer`](Self::slow_consumer).
    pub fn with_slow_consumer(mut self, policy: SlowConsumer) -> Self {
        self.slow_consumer = policy;
        self
    }

    /// Sets [`max_message_size`](Self::max_message_size).
    pub fn with_max_message_size(mut self, bytes: usize) -> Self {
        self.max_message_size = bytes;
        self
    }

    /// Sets [`history`](Self::history).
    pub fn with_history(mut self, history: Option<HistoryConfig>) -> Self {
        self.history = history;
        self
    }

    /// Sets [`max_topics_per_connection`](Self::max_topics_per_connection).
    pub fn with_max_topics_per_connection(mut self, n: usize) -> Self {
        self.max_topics_per_connection = n;
        self
    }

    /// Sets [`compression_level`](Self::compression_level).
    pub fn with_compression_level(mut self, level: i32) -> Self {
        self.compression_level = level.clamp(0, 9);
        self
    }

    /// Sets [`recovery_timeout`](Self::recovery_timeout).
    pub fn with_recovery_timeout(mut self, t: Duration) -> Self {
        self.recovery_timeout = t;
        self
    }
}

/// Something the hub reports ([`Hub::events`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HubEvent {
    /// The broker lost its connection; local fan-out goes on.
    BrokerDown {
        /// What happened.
        reason: String,
    },
    /// The broker is connected and subscribed to every live topic.
    BrokerUp,
    /// A topic's numbering restarted: publications may have been missed since
    /// `previous`. Subscribers that track positions should resynchronise.
    EpochChanged {
        /// The topic.
        topic: Topic,
        /// The last position delivered before the gap.
        previous: Position,
        /// Where the topic stands now.
        current: Position,
    },
}

/// A message to publish: text or binary, or an already prepared message.
#[derive(Clone, Debug)]
pub struct Payload {
    kind: MessageKind,
    data: Bytes,
    prepared: Option<PreparedMessage>,
}

impl Payload {
    /// A text message.
    pub fn text(text: impl Into<String>) -> Self {
        Payload {
            kind: MessageKind::Text,
            data: Bytes::from(text.into()),
            prepared: None,
        }
    }

    /// A binary message.
    pub fn binary(data: impl Into<Bytes>) -> Self {
        Payload {
            kind: MessageKind::Binary,
            data: data.into(),
            prepared: None,
        }
    }
}

impl From<&str> for Payload {
    fn from(t: &str) -> Self {
        Payload::text(t)
    }
}

impl From<String> for Payload {
    fn from(t: String) -> Self {
        Payload::text(t)
    }
}

impl From<PreparedMessage> for Payload {
    /// Reuses the message's frames for local subscribers when the framer is the default
    /// one and the publication has no position.
    fn from(m: PreparedMessage) -> Self {
        Payload {
            kind: m.kind(),
            data: m.payload(),
            prepared: Some(m),
        }
    }
}

/// Why the hub refused a request.
#[derive(Debug)]
#[non_exhaustive]
pub enum HubError {
    /// The topic name is empty, too long, or has a character outside printable ASCII
    /// (or `*`, `>`, an empty `.`-separated part: they mean something to brokers).
    InvalidTopic,
    /// The payload is over [`HubConfig::max_message_size`].
    TooLarge,
    /// The connection already has [`HubConfig::max_topics_per_connection`] topics.
    TooManyTopics,
    /// The hub keeps no history ([`HubConfig::history`]).
    NoHistory,
    /// The broker could not answer (it is away, or did not answer in time).
    Broker(BrokerError),
    /// The connection left the hub (it was closed as a slow consumer, or its send failed).
    Left,
    /// Building a hub whose broker needs a tokio runtime, outside one.
    NoRuntime,
}

impl fmt::Display for HubError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HubError::InvalidTopic => f.write_str("invalid topic name"),
            HubError::TooLarge => f.write_str("publication over the size limit"),
            HubError::TooManyTopics => f.write_str("too many topics for one connection"),
            HubError::NoHistory => f.write_str("the hub keeps no history"),
            HubError::Broker(e) => e.fmt(f),
            HubError::Left => f.write_str("the connection left the hub"),
            HubError::NoRuntime => f.write_str("no tokio runtime to start the broker in"),
        }
    }
}

impl std::error::Error for HubError {}

/// A publication as the framer sees it.
#[derive(Debug)]
#[non_exhaustive]
pub struct PublicationRef<'a> {
    /// The topic.
    pub topic: &'a str,
    /// Text or binary.
    pub kind: MessageKind,
    /// The payload as published (text payloads are UTF-8).
    pub payload: &'a [u8],
    /// Its position, when the hub keeps history and the publication was recorded.
    pub position: Option<Position>,
}

type Framer = dyn Fn(&PublicationRef<'_>) -> Option<PreparedMessage> + Send + Sync;

/// Where a delivery goes: a connection's sending half, type-erased.
trait Outlet: Send + Sync {
    fn try_send_prepared(&self, msg: &PreparedMessage) -> Result<(), Refused>;
    fn try_close(&self, code: u16, reason: &str);
    fn queued_bytes(&self) -> usize;
}

enum Refused {
    Full,
    Closed,
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> Outlet for WriteHalf<S> {
    fn try_send_prepared(&self, msg: &PreparedMessage) -> Result<(), Refused> {
        match WriteHalf::try_send_prepared(self, msg) {
            Ok(()) => Ok(()),
            Err(TrySendError::QueueFull(_)) => Err(Refused::Full),
            Err(_) => Err(Refused::Closed),
        }
    }

    fn try_close(&self, code: u16, reason: &str) {
        let _ = WriteHalf::try_close(self, code, reason);
    }

    fn queued_bytes(&self) -> usize {
        WriteHalf::queued_bytes(self)
    }
}

/// A joined connection, as the hub holds it.
struct Conn {
    id: u64,
    outlet: Arc<dyn Outlet>,
    topics: Mutex<HashSet<Topic>>,
    /// Closed as a slow consumer, or its send failed: it leaves every topic.
    gone: AtomicBool,
}

/// A subscriber waiting for its history replay: live publications are kept for it
/// meanwhile.
struct Pending {
    conn: Arc<Conn>,
    buffer: Mutex<Vec<(Option<Position>, PreparedMessage)>>,
}

#[derive(Default)]
struct Subs {
    live: Vec<Arc<Conn>>,
    index: HashMap<u64, usize>,
    pending: Vec<Arc<Pending>>,
}

impl Subs {
    fn contains(&self, id: u64) -> bool {
        self.index.contains_key(&id) || self.pending.iter().any(|p| p.conn.id == id)
    }

    fn add_live(&mut self, conn: Arc<Conn>) {
        if !self.index.contains_key(&conn.id) {
            self.index.insert(conn.id, self.live.len());
            self.live.push(conn);
        }
    }

    fn remove(&mut self, id: u64) -> bool {
        self.pending.retain(|p| p.conn.id != id);
        let Some(i) = self.index.remove(&id) else {
            return false;
        };
        self.live.swap_remove(i);
        if let Some(moved) = self.live.get(i) {
            self.index.insert(moved.id, i);
        }
        true
    }

    fn is_empty(&self) -> bool {
        self.live.is_empty() && self.pending.is_empty()
    }

    fn len(&self) -> usize {
        self.live.len() + self.pending.len()
    }
}

/// Per-topic ordering state: the node's ring, or the last position delivered from the
/// broker's history.
#[derive(Default)]
struct Order {
    ring: Option<Ring>,
    last: Option<Position>,
}

struct TopicState {
    name: Topic,
    subs: RwLock<Subs>,
    /// Held across position assignment and fan-out on topics with history, so that
    /// offsets reach every subscriber in order.
    order: Mutex<Order>,
    /// The broker is subscribed to this topic (recorded history waits for it).
    ready: AtomicBool,
    ready_notify: Notify,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section completes or leaves consistent state: go on after a panic.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn read<T>(m: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(m: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(|e| e.into_inner())
}

/// The hub's state, shared by its clones and (weakly) by its broker.
pub(crate) struct Shared {
    node: u64,
    config: HubConfig,
    broker: Box<dyn Broker>,
    framer: Option<Box<Framer>>,
    topics: RwLock<HashMap<Topic, Arc<TopicState>>>,
    /// Interest changes not yet taken by the broker: topic -> wanted now.
    interest: Mutex<HashMap<Topic, bool>>,
    conns: Mutex<HashMap<u64, Weak<Conn>>>,
    counters: Counters,
    events: broadcast::Sender<HubEvent>,
    next_conn: AtomicU64,
    broker_up: AtomicBool,
    last_sweep: Mutex<Instant>,
}

/// The fan-out hub: see the [module docs](self). Cheap to clone; `Send + Sync`.
#[derive(Clone)]
pub struct Hub {
    shared: Arc<Shared>,
}

impl fmt::Debug for Hub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hub")
            .field("node", &format_args!("{:016x}", self.shared.node))
            .finish_non_exhaustive()
    }
}

impl Default for Hub {
    fn default() -> Self {
        Hub::new()
    }
}

/// Builds a [`Hub`] with a broker, settings and a framer.
pub struct HubBuilder {
    config: HubConfig,
    broker: Option<Box<dyn Broker>>,
    framer: Option<Box<Framer>>,
}

impl fmt::Debug for HubBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HubBuilder")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl HubBuilder {
    /// The hub's settings.
    pub fn config(mut self, config: HubConfig) -> Self {
        self.config = config;
        self
    }

    /// The broker to other nodes; [`MemoryBroker`] (one node) when none is given.
    pub fn broker(mut self, broker: impl Broker) -> Self {
        self.broker = Some(Box::new(broker));
        self
    }

    /// How a publication becomes the message subscribers receive. The default sends the
    /// payload as published; a framer can wrap it (with its position, say) in the
    /// application's own format. Called once per publication per node; `None` drops the
    /// publication. The framer also chooses whether subscribers with permessage-deflate
    /// get the message compressed ([`PreparedMessage::with_compression`]): per topic, say,
    /// or by what the payload is. With the default framer, a [`PreparedMessage`]
    /// published as it is keeps its own choice for this node's subscribers; other nodes
    /// frame what their broker delivers, and their framer chooses there.
    pub fn framer(
        mut self,
        f: impl Fn(&PublicationRef<'_>) -> Option<PreparedMessage> + Send + Sync + 'static,
    ) -> Self {
        self.framer = Some(Box::new(f));
        self
    }

    /// Builds the hub and starts its broker. [`HubError::NoRuntime`] outside a tokio
    /// runtime when the broker is not the in-memory one.
    pub fn build(self) -> Result<Hub, HubError> {
        let needs_runtime = self.broker.is_some();
        if needs_runtime && tokio::runtime::Handle::try_current().is_err() {
            return Err(HubError::NoRuntime);
        }
        let (events, _) = broadcast::channel(self.config.event_capacity.max(1));
        let shared = Arc::new(Shared {
            node: history::new_epoch(),
            config: self.config,
            broker: self.broker.unwrap_or_else(|| Box::new(MemoryBroker::new())),
            framer: self.framer,
            topics: RwLock::default(),
            interest: Mutex::default(),
            conns: Mutex::default(),
            counters: Counters::default(),
            events,
            next_conn: AtomicU64::new(1),
            broker_up: AtomicBool::new(!needs_runtime),
            last_sweep: Mutex::new(Instant::now()),
        });
        shared.broker.start(Link {
            hub: Arc::downgrade(&shared),
        });
        Ok(Hub { shared })
    }
}

/// Whether `t` may name a topic: 1..=`max` bytes of printable ASCII, no `*` or `>`, no
/// empty `.`-separated part (NATS subjects are built from topic names).
fn valid_topic(t: &str, max: usize) -> bool {
    !t.is_empty()
        && t.len() <= max
        && t.bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && b != b'*' && b != b'>')
        && !t.starts_with('.')
        && !t.ends_with('.')
        && !t.contains("..")
}

impl Hub {
    /// A hub with the in-memory broker and default settings: one node, nothing to
    /// configure, no runtime needed to build it.
    pub fn new() -> Hub {
        Hub::builder()
            .build()
            .unwrap_or_else(|_| unreachable!("the in-memory broker needs no runtime"))
    }

    /// A builder, for a broker, settings or a framer.
    pub fn builder() -> HubBuilder {
        HubBuilder {
            config: HubConfig::default(),
            broker: None,
            framer: None,
        }
    }

    /// The hub's settings.
    pub fn config(&self) -> &HubConfig {
        &self.shared.config
    }

    /// This node's id, random per hub.
    pub fn node_id(&self) -> u64 {
        self.shared.node
    }

    /// Joins a connection by its sending half; the returned [`Member`] subscribes it to
    /// topics. Keep polling the connection's [`ReadHalf`](crate::tokio::ReadHalf): it
    /// writes what the hub queues, and drop the member when that loop ends.
    pub fn join<S>(&self, writer: WriteHalf<S>) -> Member<S>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let writer = Arc::new(writer);
        let id = self.shared.next_conn.fetch_add(1, Relaxed);
        let conn = Arc::new(Conn {
            id,
            outlet: writer.clone(),
            topics: Mutex::default(),
            gone: AtomicBool::new(false),
        });
        lock(&self.shared.conns).insert(id, Arc::downgrade(&conn));
        Member {
            hub: self.clone(),
            conn,
            writer,
        }
    }

    /// Publishes to every subscriber of `topic`, on this node and (through the broker)
    /// on the others. Never waits: local subscribers get it queued before this returns
    /// (with history recorded by the broker, when it comes back from the broker).
    pub fn publish(&self, topic: &str, payload: impl Into<Payload>) -> Result<(), HubError> {
        self.shared.publish(topic, payload.into(), None)
    }

    /// [`publish`](Self::publish), to everyone but connection `except` (the publisher's
    /// own, typically: see [`Member::publish`]).
    pub fn publish_except(
        &self,
        topic: &str,
        payload: impl Into<Payload>,
        except: ConnId,
    ) -> Result<(), HubError> {
        self.shared.publish(topic, payload.into(), Some(except.0))
    }

    /// Whether the broker is subscribed to `topic` for this node (so that publications
    /// from other nodes arrive); false while the broker is away.
    pub fn broker_ready(&self, topic: &str) -> bool {
        read(&self.shared.topics)
            .get(topic)
            .is_some_and(|t| t.ready.load(Relaxed))
    }

    /// A snapshot of the hub's metrics.
    pub fn metrics(&self) -> HubMetrics {
        self.shared.metrics()
    }

    /// A receiver of the hub's events from now on (it lags and skips when not read).
    pub fn events(&self) -> broadcast::Receiver<HubEvent> {
        self.shared.events.subscribe()
    }

    /// The latest position of `topic` (offset 0 when nothing was published in the
    /// current epoch); [`HubError::NoHistory`] without history.
    pub async fn position(&self, topic: &str) -> Result<Position, HubError> {
        let page = self.shared.fetch_history(topic, u64::MAX, 0).await?;
        Ok(page.top.unwrap_or(Position {
            offset: 0,
            epoch: 0,
        }))
    }
}

/// A connection joined to a [`Hub`]: subscribe it to topics, publish from it. Dropping
/// it leaves every topic.
pub struct Member<S> {
    hub: Hub,
    conn: Arc<Conn>,
    writer: Arc<WriteHalf<S>>,
}

impl<S> fmt::Debug for Member<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Member")
            .field("id", &self.conn.id)
            .finish_non_exhaustive()
    }
}

impl<S> Drop for Member<S> {
    fn drop(&mut self) {
        self.hub.shared.leave_all(&self.conn);
        lock(&self.hub.shared.conns).remove(&self.conn.id);
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> Member<S> {
    /// This connection's id in the hub.
    pub fn id(&self) -> ConnId {
        ConnId(self.conn.id)
    }

    /// The connection's sending half, for messages of its own (`try_send`).
    pub fn writer(&self) -> &WriteHalf<S> {
        &self.writer
    }

    /// Whether the hub let go of this connection (closed as a slow consumer, or its
    /// sends failed).
    pub fn has_left(&self) -> bool {
        self.conn.gone.load(Relaxed)
    }

    /// Subscribes to `topic` (nothing happens if it already is).
    pub fn subscribe(&self, topic: &str) -> Result<(), HubError> {
        self.hub
            .shared
            .subscribe(&self.conn, topic, false)
            .map(|_| ())
    }

    /// Leaves `topic`.
    pub fn unsubscribe(&self, topic: &str) {
        self.hub.shared.unsubscribe(&self.conn, topic);
    }

    /// The topics this connection is subscribed to.
    pub fn topics(&self) -> Vec<Topic> {
        lock(&self.conn.topics).iter().cloned().collect()
    }

    /// Publishes to `topic` for every subscriber but this connection.
    pub fn publish(&self, topic: &str, payload: impl Into<Payload>) -> Result<(), HubError> {
        self.hub.publish_except(topic, payload, self.id())
    }

    /// Subscribes to `topic` and first replays what was published after `since` (the
    /// last position the client saw), in order and before anything newer: with
    /// [`Recovery::Recovered`] nothing was lost or duplicated. When the history cannot
    /// cover the gap the subscription still starts and the answer says why
    /// ([`Recovery::EpochChanged`], [`Recovery::Trimmed`]), so the client resynchronises.
    ///
    /// The replay is queued like live traffic: a send queue too small for it meets the
    /// slow-consumer policy.
    pub async fn subscribe_from(&self, topic: &str, since: Position) -> Result<Recovery, HubError> {
        self.hub
            .shared
            .subscribe_from(&self.conn, topic, since)
            .await
    }
}

impl Shared {
    fn emit(&self, event: HubEvent) {
        let _ = self.events.send(event);
    }

    fn records(&self) -> Option<&dyn BrokerHistory> {
        self.config.history.as_ref()?;
        self.broker.history()
    }

    fn metrics(&self) -> HubMetrics {
        let mut m = HubMetrics::from_counters(&self.counters);
        m.broker_up = self.broker_up.load(Relaxed);
        {
            let conns = lock(&self.conns);
            m.connections = conns.len();
            m.queued_bytes = conns
                .values()
                .filter_map(Weak::upgrade)
                .map(|c| c.outlet.queued_bytes() as u64)
                .sum();
        }
        let topics = read(&self.topics);
        m.topics = topics
            .values()
            .map(|t| (t.name.to_string(), read(&t.subs).len()))
            .collect();
        m.topics.sort();
        m
    }

    // ----- interest -----

    /// Records that the node now wants (or no longer wants) `topic`; called with the
    /// topic map locked, so that changes are recorded in the order they happened.
    fn note_interest(&self, topic: &Topic, wanted: bool) {
        lock(&self.interest).insert(topic.clone(), wanted);
    }

    fn take_interest(&self, max: usize) -> Interest {
        let mut pending = lock(&self.interest);
        let mut out = Interest::default();
        let keys: Vec<Topic> = pending.keys().take(max).cloned().collect();
        for k in keys {
            if let Some(wanted) = pending.remove(&k) {
                if wanted {
                    out.subscribe.push(k);
                } else {
                    out.unsubscribe.push(k);
                }
            }
        }
        out
    }

    fn wanted_topics(&self) -> Vec<Topic> {
        read(&self.topics).keys().cloned().collect()
    }

    fn mark_ready(&self, topics: &[Topic]) {
        let map = read(&self.topics);
        for t in topics {
            if let Some(state) = map.get(t) {
                state.ready.store(true, Relaxed);
                state.ready_notify.notify_waiters();
            }
        }
    }

    fn broker_down(&self, reason: &str) {
        if self.broker_up.swap(false, Relaxed) {
            self.counters.broker_disconnects.fetch_add(1, Relaxed);
            for t in read(&self.topics).values() {
                t.ready.store(false, Relaxed);
            }
            self.emit(HubEvent::BrokerDown {
                reason: reason.to_owned(),
            });
        }
    }

    fn broker_up(&self) {
        if !self.broker_up.swap(true, Relaxed) {
            self.emit(HubEvent::BrokerUp);
        }
    }

    // ----- subscriptions -----

    fn topic_state(name: Topic, now: Instant, config: &HubConfig, ring: bool) -> TopicState {
        TopicState {
            name,
            subs: RwLock::default(),
            order: Mutex::new(Order {
                ring: config
                    .history
                    .as_ref()
                    .filter(|_| ring)
                    .map(|h| Ring::new(h.capacity, now)),
                last: None,
            }),
            ready: AtomicBool::new(false),
            ready_notify: Notify::new(),
        }
    }

    /// Adds `conn` to `topic`, live or (`pending`) waiting for a replay.
    fn subscribe(
        &self,
        conn: &Arc<Conn>,
        topic: &str,
        pending: bool,
    ) -> Result<(Arc<TopicState>, Option<Arc<Pending>>), HubError> {
        if !valid_topic(topic, self.config.max_topic_len) {
            return Err(HubError::InvalidTopic);
        }
        if conn.gone.load(Relaxed) {
            return Err(HubError::Left);
        }
        let mut created = false;
        let result = {
            let mut map = write(&self.topics);
            {
                let topics = lock(&conn.topics);
                if !topics.contains(topic) && topics.len() >= self.config.max_topics_per_connection
                {
                    return Err(HubError::TooManyTopics);
                }
            }
            let state = match map.get(topic) {
                Some(s) => s.clone(),
                None => {
                    let name: Topic = Arc::from(topic);
                    let ring = self.broker.history().is_none();
                    let s = Arc::new(Self::topic_state(
                        name.clone(),
                        Instant::now(),
                        &self.config,
                        ring,
                    ));
                    map.insert(name.clone(), s.clone());
                    self.note_interest(&name, true);
                    created = true;
                    s
                }
            };
            let mut subs = write(&state.subs);
            let p = if pending {
                subs.remove(conn.id);
                let p = Arc::new(Pending {
                    conn: conn.clone(),
                    buffer: Mutex::default(),
                });
                subs.pending.push(p.clone());
                Some(p)
            } else {
                if !subs.contains(conn.id) {
                    subs.add_live(conn.clone());
                }
                None
            };
            drop(subs);
            lock(&conn.topics).insert(state.name.clone());
            (state, p)
        };
        if created {
            self.broker.interest_changed();
        }
        Ok(result)
    }

    /// The topic's state, made (with its ring, and the broker's interest) if missing.
    fn topic_for_history(&self, topic: &str) -> Option<Arc<TopicState>> {
        let state = {
            let mut map = write(&self.topics);
            if let Some(s) = map.get(topic) {
                return Some(s.clone());
            }
            let name: Topic = Arc::from(topic);
            let s = Arc::new(Self::topic_state(
                name.clone(),
                Instant::now(),
                &self.config,
                true,
            ));
            map.insert(name.clone(), s.clone());
            self.note_interest(&name, true);
            s
        };
        self.broker.interest_changed();
        self.maybe_sweep();
        Some(state)
    }

    fn unsubscribe(&self, conn: &Arc<Conn>, topic: &str) {
        let removed = {
            let mut map = write(&self.topics);
            lock(&conn.topics).remove(topic);
            let Some(state) = map.get(topic).cloned() else {
                return;
            };
            let mut subs = write(&state.subs);
            subs.remove(conn.id);
            let empty = subs.is_empty();
            drop(subs);
            empty && self.drop_if_idle(&mut map, &state, Instant::now())
        };
        if removed {
            self.broker.interest_changed();
        }
        self.maybe_sweep();
    }

    /// Removes an empty topic from the map unless its ring is still within its time to
    /// live; true when removed (interest noted).
    fn drop_if_idle(
        &self,
        map: &mut HashMap<Topic, Arc<TopicState>>,
        state: &Arc<TopicState>,
        now: Instant,
    ) -> bool {
        if let Some(h) = &self.config.history {
            let order = lock(&state.order);
            if order
                .ring
                .as_ref()
                .is_some_and(|r| r.top().offset > 0 && now.duration_since(r.touched) < h.ttl)
            {
                return false;
            }
        }
        if !read(&state.subs).is_empty() {
            return false;
        }
        map.remove(&state.name);
        self.note_interest(&state.name, false);
        true
    }

    /// Drops topics whose rings expired, at most once a second (called from
    /// subscription changes: an idle hub holds at most what it held).
    fn maybe_sweep(&self) {
        if self.config.history.is_none() {
            return;
        }
        let now = Instant::now();
        {
            let Ok(mut last) = self.last_sweep.try_lock() else {
                return;
            };
            if now.duration_since(*last) < Duration::from_secs(1) {
                return;
            }
            *last = now;
        }
        let mut removed = false;
        {
            let mut map = write(&self.topics);
            let idle: Vec<Arc<TopicState>> = map
                .values()
                .filter(|t| read(&t.subs).is_empty())
                .cloned()
                .collect();
            for t in idle {
                removed |= self.drop_if_idle(&mut map, &t, now);
            }
        }
        if removed {
            self.broker.interest_changed();
        }
    }

    fn leave_all(&self, conn: &Arc<Conn>) {
        let topics: Vec<Topic> = lock(&conn.topics).iter().cloned().collect();
        for t in topics {
            self.unsubscribe(conn, &t);
        }
    }

    // ----- publishing -----

    fn frame(
        &self,
        topic: &str,
        kind: MessageKind,
        payload: &[u8],
        position: Option<Position>,
    ) -> Option<PreparedMessage> {
        match &self.framer {
            Some(f) => f(&PublicationRef {
                topic,
                kind,
                payload,
                position,
            }),
            None => {
                let m = PreparedMessage::new(kind, payload).ok()?;
                #[cfg(feature = "deflate")]
                let m = if self.config.compression_level == DEFAULT_PREPARED_LEVEL {
                    m
                } else {
                    m.with_compression_level(self.config.compression_level)
                };
                Some(m)
            }
        }
    }

    fn publish(&self, topic: &str, payload: Payload, except: Option<u64>) -> Result<(), HubError> {
        if !valid_topic(topic, self.config.max_topic_len) {
            return Err(HubError::InvalidTopic);
        }
        if payload.data.len() > self.config.max_message_size {
            return Err(HubError::TooLarge);
        }
        self.counters.publications.fetch_add(1, Relaxed);
        let state = read(&self.topics).get(topic).cloned();
        if let Some(history) = self.records() {
            // Fanned out when it comes back from the broker, with its position.
            let name = state.map_or_else(|| Arc::from(topic), |s| s.name.clone());
            history.publish_recorded(
                &name,
                envelope::head(self.node, payload.kind, except),
                payload.data,
            );
            return Ok(());
        }
        let envelope = envelope::encode(self.node, payload.kind, except, &payload.data);
        // With history in the node's ring, a topic without subscribers keeps it too (for
        // clients that come back), so it comes to exist here.
        let state = match state {
            None if self.config.history.is_some() => self.topic_for_history(topic),
            s => s,
        };
        let Some(state) = state else {
            // No local subscriber: only other nodes may want it.
            self.broker.publish(&Arc::from(topic), envelope);
            return Ok(());
        };
        let reuse = |position: Option<Position>| match (&payload.prepared, position, &self.framer) {
            (Some(m), None, None) => Some(m.clone()),
            // Framed again for its position: the published message's choice of
            // compression still holds here.
            (Some(m), Some(_), None) => self
                .frame(topic, payload.kind, &payload.data, position)
                .map(|f| f.with_compression(m.compression())),
            _ => self.frame(topic, payload.kind, &payload.data, position),
        };
        if self.config.history.is_some() {
            // The ring's numbering and the fan-out happen under one lock, so every
            // subscriber gets the offsets in order.
            let mut order = lock(&state.order);
            let position = order.ring.as_ref().map(Ring::next_position);
            if let Some(ring) = order.ring.as_mut() {
                ring.push(envelope.clone(), Instant::now());
            }
            if let Some(msg) = reuse(position) {
                self.fan_out(&state, &msg, position, except);
            }
        } else if let Some(msg) = reuse(None) {
            self.fan_out(&state, &msg, None, except);
        }
        self.broker.publish(&state.name, envelope);
        Ok(())
    }

    /// Queues `msg` to every subscriber of `state` but `except`; keeps it for those
    /// waiting for a replay. Subscribers whose sends fail, or that are closed as slow
    /// consumers, leave every topic afterwards.
    fn fan_out(
        &self,
        state: &TopicState,
        msg: &PreparedMessage,
        position: Option<Position>,
        except: Option<u64>,
    ) {
        let mut gone = Vec::new();
        let mut delivered = 0u64;
        let mut dropped = 0u64;
        {
            let subs = read(&state.subs);
            for c in &subs.live {
                if Some(c.id) == except {
                    continue;
                }
                match self.deliver_to(c, msg) {
                    Delivered::Yes => delivered += 1,
                    Delivered::Dropped => dropped += 1,
                    Delivered::Gone => gone.push(c.clone()),
                }
            }
            for p in &subs.pending {
                if Some(p.conn.id) != except {
                    lock(&p.buffer).push((position, msg.clone()));
                }
            }
        }
        self.counters.deliveries.fetch_add(delivered, Relaxed);
        if dropped > 0 {
            self.counters.dropped.fetch_add(dropped, Relaxed);
        }
        for c in gone {
            self.leave_all(&c);
        }
    }

    fn deliver_to(&self, c: &Conn, msg: &PreparedMessage) -> Delivered {
        if c.gone.load(Relaxed) {
            return Delivered::Gone;
        }
        match c.outlet.try_send_prepared(msg) {
            Ok(()) => Delivered::Yes,
            Err(Refused::Full) => match &self.config.slow_consumer {
                SlowConsumer::Drop => Delivered::Dropped,
                SlowConsumer::Close { code, reason } => {
                    if !c.gone.swap(true, Relaxed) {
                        c.outlet.try_close(*code, reason);
                        self.counters.closed_slow.fetch_add(1, Relaxed);
                    }
                    Delivered::Gone
                }
            },
            Err(Refused::Closed) => {
                c.gone.store(true, Relaxed);
                Delivered::Gone
            }
        }
    }

    /// A publication from the broker.
    fn deliver_remote(&self, topic: &str, data: Bytes) {
        let env = match Envelope::parse(data, self.config.max_message_size) {
            Ok(e) => e,
            Err(_) => {
                self.counters.broker_invalid.fetch_add(1, Relaxed);
                return;
            }
        };
        let own = env.origin == self.node;
        let recorded = self.records().is_some();
        if own && !(recorded && env.position.is_some()) {
            // Our own echo: local subscribers had it when it was published.
            return;
        }
        if !own {
            self.counters.remote_publications.fetch_add(1, Relaxed);
        }
        let Some(state) = read(&self.topics).get(topic).cloned() else {
            return;
        };
        let except = if own { env.exclude } else { None };
        let mut order = lock(&state.order);
        let position = if recorded {
            let Some(pos) = env.position else {
                // A plain publication on a hub with recorded history (a node without
                // history on the same broker): deliver it as it is.
                drop(order);
                if let Some(msg) = self.frame(topic, env.kind, &env.payload, None) {
                    self.fan_out(&state, &msg, None, except);
                }
                return;
            };
            match order.last {
                Some(last) if last.epoch == pos.epoch && pos.offset <= last.offset => return,
                Some(last) if last.epoch != pos.epoch => {
                    self.counters.epoch_changes.fetch_add(1, Relaxed);
                    self.emit(HubEvent::EpochChanged {
                        topic: state.name.clone(),
                        previous: last,
                        current: pos,
                    });
                }
                _ => {}
            }
            order.last = Some(pos);
            Some(pos)
        } else if let Some(ring) = order.ring.as_mut() {
            let pos = ring.next_position();
            let local = envelope::encode(env.origin, env.kind, None, &env.payload);
            ring.push(local, Instant::now());
            Some(pos)
        } else {
            None
        };
        if let Some(msg) = self.frame(topic, env.kind, &env.payload, position) {
            self.fan_out(&state, &msg, position, except);
        }
        drop(order);
    }

    /// A recorded publication the broker could not record: local subscribers get it,
    /// without a position.
    fn deliver_unrecorded(&self, topic: &Topic, head: &str, payload: Bytes) {
        self.counters.unrecorded.fetch_add(1, Relaxed);
        let mut full = head.as_bytes().to_vec();
        full.extend_from_slice(b"- -\n");
        full.extend_from_slice(&payload);
        let Ok(env) = Envelope::parse(Bytes::from(full), usize::MAX) else {
            return;
        };
        let Some(state) = read(&self.topics).get(topic).cloned() else {
            return;
        };
        let order = lock(&state.order);
        if let Some(msg) = self.frame(topic, env.kind, &env.payload, None) {
            self.fan_out(&state, &msg, None, env.exclude);
        }
        drop(order);
    }

    // ----- history -----

    async fn fetch_history(
        &self,
        topic: &str,
        offset: u64,
        limit: usize,
    ) -> Result<HistoryPage, HubError> {
        if self.config.history.is_none() {
            return Err(HubError::NoHistory);
        }
        if !valid_topic(topic, self.config.max_topic_len) {
            return Err(HubError::InvalidTopic);
        }
        if let Some(h) = self.broker.history() {
            let name: Topic = Arc::from(topic);
            let fut = h.since(&name, offset, limit);
            return match tokio::time::timeout(self.config.recovery_timeout, fut).await {
                Ok(r) => r.map_err(HubError::Broker),
                Err(_) => Err(HubError::Broker(BrokerError::Unavailable)),
            };
        }
        let state = read(&self.topics).get(topic).cloned();
        let Some(state) = state else {
            // No ring: nothing was kept here.
            return Ok(HistoryPage::default());
        };
        let order = lock(&state.order);
        Ok(order
            .ring
            .as_ref()
            .map(|r| r.since(offset, limit))
            .unwrap_or_default())
    }

    async fn wait_ready(&self, state: &TopicState) -> Result<(), HubError> {
        let wait = async {
            loop {
                let notified = state.ready_notify.notified();
                let mut notified = std::pin::pin!(notified);
                notified.as_mut().enable();
                if state.ready.load(Relaxed) {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(self.config.recovery_timeout, wait)
            .await
            .map_err(|_| HubError::Broker(BrokerError::Unavailable))
    }

    async fn subscribe_from(
        &self,
        conn: &Arc<Conn>,
        topic: &str,
        since: Position,
    ) -> Result<Recovery, HubError> {
        let Some(history) = self.config.history.clone() else {
            return Err(HubError::NoHistory);
        };
        let (state, pending) = self.subscribe(conn, topic, true)?;
        let Some(pending) = pending else {
            return Err(HubError::Left);
        };
        let page = async {
            if self.records().is_some() {
                self.wait_ready(&state).await?;
            }
            self.fetch_history(topic, since.offset, history.max_replay)
                .await
        }
        .await;
        let page = match page {
            Ok(p) => p,
            Err(e) => {
                // Not subscribed after all.
                self.unsubscribe(conn, topic);
                return Err(e);
            }
        };
        // Order, then the subscriber list: no publication passes while the replay and
        // the kept live ones are queued.
        let _order = lock(&state.order);
        let mut subs = write(&state.subs);
        let top = page.top.unwrap_or(Position {
            offset: 0,
            epoch: 0,
        });
        let first = page.entries.first().map(|(o, _)| *o);
        let outcome = if top.epoch != since.epoch {
            Recovery::EpochChanged { position: top }
        } else if top.offset > since.offset && first != Some(since.offset + 1) {
            Recovery::Trimmed { position: top }
        } else {
            Recovery::Recovered {
                replayed: page.entries.len(),
                position: top,
            }
        };
        let mut sent = since.offset;
        let mut ok = true;
        if let Recovery::Recovered { .. } = outcome {
            for (offset, data) in &page.entries {
                let Ok(env) = Envelope::parse(data.clone(), self.config.max_message_size) else {
                    self.counters.broker_invalid.fetch_add(1, Relaxed);
                    continue;
                };
                let position = Position {
                    offset: *offset,
                    epoch: top.epoch,
                };
                if let Some(msg) = self.frame(topic, env.kind, &env.payload, Some(position)) {
                    match self.deliver_to(conn, &msg) {
                        Delivered::Yes => {}
                        Delivered::Dropped => {
                            self.counters.dropped.fetch_add(1, Relaxed);
                        }
                        Delivered::Gone => {
                            ok = false;
                            break;
                        }
                    }
                }
                sent = *offset;
            }
            self.counters
                .recovered
                .fetch_add(page.entries.len() as u64, Relaxed);
        }
        // Live publications kept meanwhile: those the replay did not already carry.
        let kept = std::mem::take(&mut *lock(&pending.buffer));
        for (position, msg) in kept {
            if !ok {
                break;
            }
            if let Some(p) = position
                && p.epoch == top.epoch
                && p.offset <= sent
            {
                continue;
            }
            match self.deliver_to(conn, &msg) {
                Delivered::Yes => {}
                Delivered::Dropped => {
                    self.counters.dropped.fetch_add(1, Relaxed);
                }
                Delivered::Gone => ok = false,
            }
        }
        let still_pending = subs.pending.iter().any(|p| Arc::ptr_eq(p, &pending));
        subs.pending.retain(|p| !Arc::ptr_eq(p, &pending));
        if ok && still_pending {
            subs.add_live(conn.clone());
        }
        drop(subs);
        drop(_order);
        if !ok {
            self.leave_all(conn);
            return Err(HubError::Left);
        }
        Ok(outcome)
    }

    /// After the broker reconnected: catch up from the broker's history, or start new
    /// epochs in the node's rings.
    async fn recover_gap(self: Arc<Self>) {
        let topics: Vec<Arc<TopicState>> = read(&self.topics).values().cloned().collect();
        if self.config.history.is_none() {
            self.mark_ready(&topics.iter().map(|t| t.name.clone()).collect::<Vec<_>>());
            self.broker_up();
            return;
        }
        let limit = self.config.history.as_ref().map_or(0, |h| h.max_replay);
        for state in topics {
            if self.records().is_none() {
                let mut order = lock(&state.order);
                if let Some(ring) = order.ring.as_mut() {
                    let previous = ring.top();
                    ring.break_epoch();
                    if previous.offset > 0 {
                        self.counters.epoch_changes.fetch_add(1, Relaxed);
                        self.emit(HubEvent::EpochChanged {
                            topic: state.name.clone(),
                            previous,
                            current: ring.top(),
                        });
                    }
                }
                continue;
            }
            let Some(last) = lock(&state.order).last else {
                continue;
            };
            let Ok(page) = self.fetch_history(&state.name, last.offset, limit).await else {
                continue;
            };
            let mut order = lock(&state.order);
            let Some(top) = page.top else { continue };
            let first = page.entries.first().map(|(o, _)| *o);
            let Some(last) = order.last else { continue };
            if top.epoch != last.epoch
                || (top.offset > last.offset && first != Some(last.offset + 1))
            {
                self.counters.epoch_changes.fetch_add(1, Relaxed);
                self.emit(HubEvent::EpochChanged {
                    topic: state.name.clone(),
                    previous: last,
                    current: top,
                });
                order.last = Some(top);
                continue;
            }
            for (offset, data) in page.entries {
                if offset <= order.last.map_or(0, |l| l.offset) {
                    continue;
                }
                let Ok(env) = Envelope::parse(data, self.config.max_message_size) else {
                    self.counters.broker_invalid.fetch_add(1, Relaxed);
                    continue;
                };
                let position = Position {
                    offset,
                    epoch: top.epoch,
                };
                order.last = Some(position);
                let except = (env.origin == self.node).then_some(env.exclude).flatten();
                if let Some(msg) = self.frame(&state.name, env.kind, &env.payload, Some(position)) {
                    self.fan_out(&state, &msg, Some(position), except);
                }
            }
        }
        self.mark_ready(&self.wanted_topics());
        self.broker_up();
    }
}

enum Delivered {
    Yes,
    Dropped,
    Gone,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_are_checked() {
        for ok in ["a", "room:1", "chat.lobby", "x/y@z-_=+#,"] {
            assert!(valid_topic(ok, 255), "{ok}");
        }
        for bad in ["", "a b", "a*", "a>", ".a", "a.", "a..b", "é", "\n"] {
            assert!(!valid_topic(bad, 255), "{bad:?}");
        }
        assert!(!valid_topic(&"a".repeat(256), 255));
    }
}
