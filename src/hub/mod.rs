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
//! ([`HubEvent::EpochChanged`]). A broker that loses only part of its subscriptions (one
//! master of a Redis Cluster) reports those topics lost instead
//! ([`HubEvent::BrokerDegraded`], [`HubMetrics::broker_lost_topics`]); they are caught up
//! the same way once subscribed again, and the other topics go on. Bad input from a broker (over
//! [`HubConfig::max_message_size`], a malformed envelope, text that is not UTF-8) is
//! dropped and counted ([`HubMetrics::broker_invalid`]), never a panic.

mod broker;
mod config;
mod envelope;
mod history;
mod metrics;
#[cfg(feature = "hub-nats")]
mod nats;
mod publish;
mod recovery;
#[cfg(feature = "hub-redis")]
mod redis;
mod subscribe;
mod types;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{Notify, broadcast};

pub use broker::{Broker, BrokerError, BrokerHistory, Interest, Link, MemoryBroker};
pub use config::{HubConfig, SlowConsumer};
pub use history::{HistoryConfig, HistoryPage, Position, Recovery};
pub use metrics::HubMetrics;
#[cfg(feature = "hub-nats")]
pub use nats::{NatsBroker, NatsConfig};
#[cfg(feature = "hub-redis")]
pub use redis::{RedisBroker, RedisConfig};
use types::Framer;
pub use types::{HubError, HubEvent, Payload, PublicationRef};

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
    /// The broker is connected (set by [`Link::up`], cleared by [`Link::down`]).
    broker_up: AtomicBool,
    /// Live topics whose broker subscription is lost ([`Link::lost`]) until
    /// [`Link::restored`]; locked after `topics` when both are.
    lost: Mutex<HashSet<Topic>>,
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
            lost: Mutex::default(),
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
        m.broker_lost_topics = lock(&self.lost).len();
        m.broker_up = self.broker_up.load(Relaxed) && m.broker_lost_topics == 0;
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
        if !self.broker_up.swap(true, Relaxed) && lock(&self.lost).is_empty() {
            self.emit(HubEvent::BrokerUp);
        }
    }

    /// The broker lost its subscriptions to `topics` (those still live): they are not
    /// ready until [`broker_restored`](Self::broker_restored).
    fn broker_lost(&self, topics: &[Topic], reason: &str) {
        let mut newly = Vec::new();
        {
            let map = read(&self.topics);
            let mut lost = lock(&self.lost);
            for t in topics {
                if let Some(state) = map.get(t) {
                    state.ready.store(false, Relaxed);
                    if lost.insert(state.name.clone()) {
                        newly.push(state.name.clone());
                    }
                }
            }
        }
        if !newly.is_empty() {
            self.counters.broker_disconnects.fetch_add(1, Relaxed);
            self.emit(HubEvent::BrokerDegraded {
                reason: reason.to_owned(),
                topics: newly,
            });
        }
    }

    /// `topic` is no longer lost (restored, or no longer live): reports the broker up
    /// when it was the last one and the broker is connected.
    fn unlose(&self, lost: &mut HashSet<Topic>, topic: &Topic) {
        if lost.remove(topic) && lost.is_empty() && self.broker_up.load(Relaxed) {
            self.emit(HubEvent::BrokerUp);
        }
    }
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
