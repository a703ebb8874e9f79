//! What connects the hubs of several nodes: the [`Broker`] trait, the [`Link`] a broker
//! talks back to its hub through, and the in-memory broker.
//!
//! A broker is *interest-based*: the hub tells it which topics have local subscribers
//! ([`Link::take_interest`], in batches), and it subscribes to those alone on the server,
//! so that a node receives each remote publication once and only for topics it serves.
//! A broker never fans out to connections: it hands every publication it receives to
//! [`Link::deliver`], and the hub frames it once and fans it out.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use bytes::Bytes;
use futures_core::future::BoxFuture;
use tokio::sync::mpsc;

use super::history::{HistoryConfig, HistoryPage};
use super::{HubEvent, Shared, Topic};

/// The interest changes a broker applies in one batch.
#[derive(Debug, Default)]
pub struct Interest {
    /// Topics that got their first local subscriber: subscribe on the server.
    pub subscribe: Vec<Topic>,
    /// Topics that lost their last one: unsubscribe.
    pub unsubscribe: Vec<Topic>,
}

impl Interest {
    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.subscribe.is_empty() && self.unsubscribe.is_empty()
    }
}

/// Why a broker could not do what was asked.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum BrokerError {
    /// The broker has no connection to its server right now.
    Unavailable,
    /// The server answered with an error, or something unexpected.
    Server(String),
}

impl std::fmt::Display for BrokerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BrokerError::Unavailable => f.write_str("broker unavailable"),
            BrokerError::Server(e) => write!(f, "broker error: {e}"),
        }
    }
}

impl std::error::Error for BrokerError {}

/// Connects a hub to the other nodes. Implementations own their connections and tasks;
/// every method returns at once (none waits on the network).
pub trait Broker: Send + Sync + 'static {
    /// Starts the broker for the hub behind `link`: called once, when the hub is built
    /// (inside a tokio runtime when the broker needs one).
    fn start(&self, link: Link);

    /// The hub's interest changed: take the batch with [`Link::take_interest`] (now or
    /// soon; changes that cancel out disappear from the batch), apply it, and confirm
    /// the subscriptions with [`Link::subscribed`].
    fn interest_changed(&self);

    /// Sends a publication (an envelope made by the hub) to every other node with
    /// interest in `topic`. Never waits: a broker that cannot keep up drops and counts
    /// ([`Link::count_dropped`]).
    fn publish(&self, topic: &Topic, envelope: Bytes);

    /// A broker that keeps history itself, shared by all nodes (Redis Streams), returns
    /// it here; otherwise each node keeps a ring of what it delivered.
    fn history(&self) -> Option<&dyn BrokerHistory> {
        None
    }
}

/// History kept by the broker, with positions assigned by the broker so that every node
/// sees the same numbering.
pub trait BrokerHistory: Send + Sync {
    /// Records a publication and sends it to every node with interest in `topic`, this
    /// one included: the hub fans out a recorded publication when it comes back through
    /// [`Link::deliver`] with its position. `head` is the envelope up to its position
    /// fields; the broker appends `"<offset> <epoch>\n"` and the payload. When it cannot
    /// record, it hands the publication back with [`Link::unrecorded`], in order.
    fn publish_recorded(&self, topic: &Topic, head: String, payload: Bytes);

    /// The topic's latest position and up to `limit` recorded envelopes after `offset`.
    fn since(
        &self,
        topic: &Topic,
        offset: u64,
        limit: usize,
    ) -> BoxFuture<'static, Result<HistoryPage, BrokerError>>;
}

/// A broker's handle on its hub. Cheap to clone; once the hub is dropped every call does
/// nothing.
#[derive(Clone)]
pub struct Link {
    pub(crate) hub: Weak<Shared>,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link").finish_non_exhaustive()
    }
}

impl Link {
    fn with<T>(&self, f: impl FnOnce(&Arc<Shared>) -> T) -> Option<T> {
        self.hub.upgrade().map(|h| f(&h))
    }

    /// Whether the hub is gone (the broker's tasks should end).
    pub fn is_closed(&self) -> bool {
        self.hub.strong_count() == 0
    }

    /// This node's id (publications carry it, so a node can skip its own echo).
    pub fn node_id(&self) -> u64 {
        self.with(|h| h.node).unwrap_or(0)
    }

    /// The interest changes since the last call: at most `max` topics in all (the rest
    /// stay for the next call).
    pub fn take_interest(&self, max: usize) -> Interest {
        self.with(|h| h.take_interest(max)).unwrap_or_default()
    }

    /// Every topic the node wants now (to subscribe again after a reconnect).
    pub fn topics(&self) -> Vec<Topic> {
        self.with(|h| h.wanted_topics()).unwrap_or_default()
    }

    /// The broker is subscribed to `topics` on its server.
    pub fn subscribed(&self, topics: &[Topic]) {
        self.with(|h| h.mark_ready(topics));
    }

    /// A publication from the broker for `topic`. Malformed or oversized input is dropped
    /// and counted, never a panic.
    pub fn deliver(&self, topic: &str, data: Bytes) {
        self.with(|h| h.deliver_remote(topic, data));
    }

    /// A publication given to [`BrokerHistory::publish_recorded`] that could not be
    /// recorded: the hub fans it out locally, without a position.
    pub fn unrecorded(&self, topic: &Topic, head: &str, payload: Bytes) {
        self.with(|h| h.deliver_unrecorded(topic, head, payload));
    }

    /// The connection to the server is lost: reported as an event and a metric; local
    /// fan-out goes on.
    pub fn down(&self, reason: &str) {
        self.with(|h| h.broker_down(reason));
    }

    /// The connection is back and every topic of [`topics`](Self::topics) is subscribed
    /// again. Call it before reading publications again: the hub catches up from the
    /// broker's history (or, with node rings, starts a new epoch for every topic, since
    /// the node may have missed publications) and returns when done.
    pub fn up_after_gap(&self) -> BoxFuture<'static, ()> {
        match self.hub.upgrade() {
            Some(h) => Box::pin(async move { h.recover_gap().await }),
            None => Box::pin(async {}),
        }
    }

    /// Part of the broker's subscriptions is lost: `topics` no longer receive remote
    /// publications (their Redis Cluster master went away, or their slot moved). The hub
    /// reports it ([`HubEvent::BrokerDegraded`], [`Hub::broker_ready`](super::Hub::broker_ready)
    /// false for each, [`HubMetrics::broker_up`](super::HubMetrics::broker_up) false)
    /// until [`restored`](Self::restored); the other topics go on.
    pub fn lost(&self, topics: &[Topic], reason: &str) {
        self.with(|h| h.broker_lost(topics, reason));
    }

    /// The broker is subscribed to `topics` again after [`lost`](Self::lost), where they
    /// now live. Call it before delivering anything more for them: the hub catches them up
    /// from the broker's history (or starts new epochs in its rings, since the node may
    /// have missed publications), marks them ready and, once nothing is lost, reports the
    /// broker up. Returns the topics it could not catch up (the history did not answer):
    /// they stay lost, and the broker must not deliver for them before a later call
    /// succeeds.
    pub fn restored(&self, topics: Vec<Topic>) -> BoxFuture<'static, Vec<Topic>> {
        match self.hub.upgrade() {
            Some(h) => Box::pin(async move { h.restore(topics).await }),
            None => Box::pin(async { Vec::new() }),
        }
    }

    /// The broker is connected for the first time.
    pub fn up(&self) {
        self.with(|h| h.broker_up());
    }

    /// A publication the broker dropped (its outbound queue was full, or the server
    /// refused it).
    pub fn count_dropped(&self, n: u64) {
        self.with(|h| h.counters.add_broker_dropped(n));
    }

    /// The hub's history settings (`None`: no history).
    pub fn history_config(&self) -> Option<HistoryConfig> {
        self.with(|h| h.config.history.clone()).flatten()
    }

    /// The largest payload the hub accepts.
    pub fn max_payload(&self) -> usize {
        self.with(|h| h.config.max_message_size).unwrap_or(0)
    }

    /// Sends a hub event (for brokers that learn things the hub should report).
    pub fn event(&self, event: HubEvent) {
        self.with(|h| h.emit(event));
    }
}

/// What a networked broker sends from a task of its own: a bounded queue, whose receiver
/// the first [`Broker::start`] takes with the hub's [`Link`].
pub(super) struct Outbox<T> {
    link: OnceLock<Link>,
    tx: mpsc::Sender<T>,
    rx: Mutex<Option<mpsc::Receiver<T>>>,
}

impl<T> Outbox<T> {
    /// A queue of `capacity` items (at least 1).
    pub(super) fn new(capacity: usize) -> Self {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        Outbox {
            link: OnceLock::new(),
            tx,
            rx: Mutex::new(Some(rx)),
        }
    }

    /// Keeps `link` and gives the queue's receiver, to the first start only (`None` after).
    pub(super) fn start(&self, link: &Link) -> Option<mpsc::Receiver<T>> {
        self.link.set(link.clone()).ok()?;
        self.rx.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Queues `item` without waiting. An item the queue has no room for (or whose task has
    /// ended) comes back with the link to report it to, once the broker is started.
    pub(super) fn push(&self, item: T) -> Option<(T, &Link)> {
        let (mpsc::error::TrySendError::Full(item) | mpsc::error::TrySendError::Closed(item)) =
            self.tx.try_send(item).err()?;
        Some((item, self.link.get()?))
    }
}

/// The in-memory broker: the default, for one node with no server and nothing to
/// configure. Clones share one bus, so several hubs in one process (one per runtime, say)
/// reach each other through it exactly as nodes do through Redis or NATS.
#[derive(Clone, Default)]
pub struct MemoryBroker {
    bus: Arc<Mutex<Vec<Node>>>,
    me: Arc<OnceLock<Link>>,
}

struct Node {
    link: Link,
    interest: HashSet<Topic>,
}

impl std::fmt::Debug for MemoryBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryBroker").finish_non_exhaustive()
    }
}

impl MemoryBroker {
    /// A bus of its own.
    pub fn new() -> Self {
        Self::default()
    }

    /// Another broker on the same bus, for another hub.
    pub fn connect(&self) -> Self {
        MemoryBroker {
            bus: self.bus.clone(),
            me: Arc::new(OnceLock::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Node>> {
        self.bus.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Broker for MemoryBroker {
    fn start(&self, link: Link) {
        if self.me.set(link.clone()).is_ok() {
            let mut bus = self.lock();
            bus.retain(|n| !n.link.is_closed());
            bus.push(Node {
                link,
                interest: HashSet::new(),
            });
        }
    }

    fn interest_changed(&self) {
        let Some(me) = self.me.get() else { return };
        let interest = me.take_interest(usize::MAX);
        {
            let mut bus = self.lock();
            if let Some(n) = bus.iter_mut().find(|n| n.link.hub.ptr_eq(&me.hub)) {
                for t in &interest.unsubscribe {
                    n.interest.remove(t);
                }
                n.interest.extend(interest.subscribe.iter().cloned());
            }
        }
        me.subscribed(&interest.subscribe);
    }

    fn publish(&self, topic: &Topic, envelope: Bytes) {
        let Some(me) = self.me.get() else { return };
        let targets: Vec<Link> = self
            .lock()
            .iter()
            .filter(|n| !n.link.hub.ptr_eq(&me.hub) && n.interest.contains(topic))
            .map(|n| n.link.clone())
            .collect();
        for t in targets {
            t.deliver(topic, envelope.clone());
        }
    }
}
