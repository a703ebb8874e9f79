//! Cluster mode's pub/sub side: one RESP3 connection per master, held by the broker,
//! each subscribed (`SSUBSCRIBE`) to the shard channels of the live topics whose slots
//! that master owns.
//!
//! The broker holds these connections itself rather than leaving them to the `redis`
//! crate's cluster connection, because that one repairs its node connections on its own:
//! it replaces a node's connection after a redirect, a failed check, a slot refresh or a
//! request that found no connection (then every node's), closes the replaced one without a
//! word (only a connection that breaks sends a disconnection push), and subscribes the new
//! one again with requests whose failure nobody sees. A broker on top of it can believe it
//! holds subscriptions that no connection holds any more, report itself up, and miss
//! publications without knowing: the loss of issue 38.
//!
//! Here a topic is *held* when its `SSUBSCRIBE` was confirmed on the broker's connection
//! to the master that owned its slot at that moment (Redis refuses it elsewhere, with
//! `MOVED`) and the hub has caught it up; only what arrives for held topics is delivered.
//! Three things end a hold, and the broker sees each: the connection breaks (a
//! disconnection push), the server drops the channel because its slot moved (an
//! `sunsubscribe` push the broker did not ask for), or the slot map names another master
//! for the slot (read every [`RedisConfig::topology_interval`]: a failover whose old
//! master is still reachable, a node replaced under a new id).
//!
//! A topic that is not held is reported lost ([`Link::lost`]) and subscribed again, with
//! backoff, on the master that owns it now; once that is confirmed, the hub catches it up
//! from the streams before anything newer is delivered ([`Link::restored`]: in order, or
//! an epoch change when the history is gone). A catch-up that fails (the master still
//! loading, or not serving its slots yet) unsubscribes the topic again, to be tried later,
//! so a topic is always either delivered in order or reported lost. The other masters'
//! topics go on meanwhile.

use std::collections::hash_map::Entry;

use redis::aio::MultiplexedConnection;
use redis::{ConnectionAddr, ConnectionInfo};

use super::*;

mod shards;
mod slots;

use shards::Shard;
pub(super) use slots::{Master, SlotMap, key_slot};

/// The cluster subscriber's state.
struct Sharded {
    inner: Arc<Inner>,
    link: Link,
    /// How to reach a node (credentials, TLS), from the first configured node.
    seed: ConnectionInfo,
    /// The configured nodes, to read the slot map from when no master answers.
    seeds: Vec<(String, u16)>,
    map: Option<SlotMap>,
    /// Read the slot map again before the next repair.
    map_stale: bool,
    /// The connection the slot map is read through (no subscriptions on it), and the
    /// host it reaches.
    control: Option<(String, MultiplexedConnection)>,
    shards: HashMap<Master, Shard>,
    /// The master each connection tag belongs to.
    tags: HashMap<u64, Master>,
    next_tag: u64,
    /// Live topics not held: waiting for their master, a subscription or a catch-up.
    lost: HashSet<Topic>,
    /// The pushes of every connection, tagged; bounded by the queue capacity.
    tx: mpsc::Sender<(u64, redis::PushInfo)>,
    rx: mpsc::Receiver<(u64, redis::PushInfo)>,
    /// A push did not fit in the queue.
    overflow: Arc<AtomicBool>,
    backoff: Duration,
    retry_at: tokio::time::Instant,
    /// Whether the hub was told the broker is up.
    up: bool,
}

/// Cluster mode: holds a connection to every master and keeps every live topic subscribed
/// on the master that owns its slot (see the [module docs](self)).
pub(super) async fn sharded_subscriber(inner: Arc<Inner>, link: Link) {
    let Backend::Cluster { seeds, .. } = &inner.backend else {
        return;
    };
    let Some(seed) = seeds.first().cloned() else {
        return;
    };
    let seeds = seeds
        .iter()
        .filter_map(|s| match s.addr() {
            ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
                Some((host.clone(), *port))
            }
            _ => None,
        })
        .collect();
    let (tx, rx) = mpsc::channel(inner.config.queue_capacity.max(1));
    let mut s = Sharded {
        backoff: inner.config.backoff_min,
        inner,
        link,
        seed,
        seeds,
        map: None,
        map_stale: true,
        control: None,
        shards: HashMap::new(),
        tags: HashMap::new(),
        next_tag: 0,
        lost: HashSet::new(),
        tx,
        rx,
        overflow: Arc::new(AtomicBool::new(false)),
        retry_at: tokio::time::Instant::now(),
        up: false,
    };
    s.run().await;
}

impl Sharded {
    async fn run(&mut self) {
        let mut check = tokio::time::interval(self.inner.config.topology_interval);
        check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            if self.link.is_closed() {
                return;
            }
            if self.overflow.swap(false, Ordering::Relaxed) {
                // Publications were dropped: every held topic may have missed some.
                let masters: Vec<Master> = self.shards.keys().cloned().collect();
                for m in masters {
                    self.drop_shard(&m, "redis cluster pub/sub fell behind");
                }
            }
            let repair = self.needs_repair();
            if repair && tokio::time::Instant::now() >= self.retry_at {
                if self.repair().await {
                    self.backoff = self.inner.config.backoff_min;
                } else {
                    self.retry_at = tokio::time::Instant::now() + self.backoff;
                    self.backoff = (self.backoff * 2).min(self.inner.config.backoff_max);
                }
                continue;
            }
            let retry = async {
                if repair {
                    tokio::time::sleep_until(self.retry_at).await;
                } else {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                push = self.rx.recv() => {
                    // The sender lives in self: the queue never closes.
                    if let Some((tag, push)) = push {
                        self.on_push(tag, push);
                    }
                }
                _ = self.inner.interest.notified() => self.apply_interest().await,
                _ = check.tick() => self.check_topology().await,
                _ = retry => {}
            }
        }
    }

    /// Whether something wanted is not held, or a master of the map has no connection.
    fn needs_repair(&self) -> bool {
        !self.up
            || self.map_stale
            || !self.lost.is_empty()
            || self
                .map
                .as_ref()
                .is_none_or(|m| m.masters.iter().any(|m| !self.shards.contains_key(m)))
    }

    /// Delivers what arrived for held topics, and notes losses.
    fn on_push(&mut self, tag: u64, push: redis::PushInfo) {
        let Some(master) = self.tags.get(&tag).cloned() else {
            // A connection the broker has let go of.
            return;
        };
        match push.kind {
            PushKind::SMessage => {
                let Some(shard) = self.shards.get(&master) else {
                    return;
                };
                if let Some(msg) = redis::Msg::from_push_info(push)
                    && let Some(topic) = self.inner.topic_of(msg.get_channel_name())
                    && shard.held.contains(topic)
                {
                    self.link
                        .deliver(topic, Bytes::copy_from_slice(msg.get_payload_bytes()));
                }
            }
            PushKind::Disconnection => {
                self.drop_shard(&master, "redis cluster master connection lost");
            }
            PushKind::SUnsubscribe => {
                let Some(shard) = self.shards.get_mut(&master) else {
                    return;
                };
                let Some(Value::BulkString(channel)) = push.data.first() else {
                    return;
                };
                let Some(topic) = std::str::from_utf8(channel)
                    .ok()
                    .and_then(|c| self.inner.topic_of(c))
                else {
                    return;
                };
                let topic: Topic = Arc::from(topic);
                if let Entry::Occupied(mut e) = shard.unsubscribing.entry(topic.clone()) {
                    // The confirmation of the broker's own SUNSUBSCRIBE.
                    *e.get_mut() -= 1;
                    if *e.get() == 0 {
                        e.remove();
                    }
                    return;
                }
                if shard.held.remove(&topic) {
                    // The server dropped it: its slot moved.
                    self.map_stale = true;
                    self.lose(vec![topic], "redis cluster moved a shard channel");
                }
            }
            _ => {}
        }
    }

    /// Delivers everything queued now, before the held topics change.
    fn drain(&mut self) {
        while let Ok((tag, push)) = self.rx.try_recv() {
            self.on_push(tag, push);
        }
    }

    /// `topics` are not held any more: reported, and subscribed again soon.
    fn lose(&mut self, topics: Vec<Topic>, reason: &str) {
        if topics.is_empty() {
            return;
        }
        self.link.lost(&topics, reason);
        self.lost.extend(topics);
        self.retry_at = tokio::time::Instant::now();
    }

    /// Lets go of the connection to `master`; its topics are lost.
    fn drop_shard(&mut self, master: &Master, reason: &str) {
        if let Some(shard) = self.shards.remove(master) {
            self.tags.remove(&shard.tag);
            self.lose(shard.held.into_iter().collect(), reason);
        }
    }

    /// The hub's interest changes, one batch (the queue is read between batches).
    async fn apply_interest(&mut self) {
        let batch = self.link.take_interest(self.inner.config.batch.max(1));
        if batch.is_empty() {
            return;
        }
        // More may be waiting: come back after reading what arrived meanwhile.
        self.inner.interest.notify_one();
        let mut leave: HashMap<Master, Vec<Topic>> = HashMap::new();
        for t in batch.unsubscribe {
            self.lost.remove(&t);
            if let Some((m, shard)) = self.shards.iter_mut().find(|(_, s)| s.held.contains(&t)) {
                shard.held.remove(&t);
                leave.entry(m.clone()).or_default().push(t);
            }
        }
        for (m, topics) in leave {
            self.unsubscribe(&m, topics).await;
        }
        let mut join: HashMap<Master, Vec<Topic>> = HashMap::new();
        let mut held = Vec::new();
        for t in batch.subscribe {
            if self.shards.values().any(|s| s.held.contains(&t)) {
                held.push(t);
                continue;
            }
            let owner = self.owner_of(&t).filter(|m| self.shards.contains_key(m));
            match owner {
                Some(m) => join.entry(m).or_default().push(t),
                // Its master is not connected (or the map unknown): the repair brings it.
                None => {
                    self.lost.insert(t);
                }
            }
        }
        // Already held ones are confirmed too (a topic that left and came back before
        // the broker took the change).
        self.link.subscribed(&held);
        for (m, topics) in join {
            self.subscribe(&m, topics, "redis cluster ssubscribe failed")
                .await;
        }
    }

    /// The master that owns `topic`'s slot, by the current map.
    fn owner_of(&self, topic: &str) -> Option<Master> {
        let slot = key_slot(self.inner.channel(topic).as_bytes());
        self.map.as_ref()?.owner(slot).cloned()
    }

    /// Brings everything to where it should be: the slot map read, a connection to every
    /// master, every live topic held on its owner. True when it all worked.
    async fn repair(&mut self) -> bool {
        self.drain();
        if self.map_stale || self.map.is_none() {
            let Some(map) = self.read_map().await else {
                if self.shards.is_empty() {
                    self.link.down("no node of the redis cluster answers");
                    self.up = false;
                }
                return false;
            };
            self.apply_map(map).await;
        }
        // Everything the hub wants now (pending changes folded in).
        let _ = self.link.take_interest(usize::MAX);
        let wanted: HashSet<Topic> = self.link.topics().into_iter().collect();
        let masters: Vec<Master> = self.shards.keys().cloned().collect();
        for m in &masters {
            let Some(shard) = self.shards.get_mut(m) else {
                continue;
            };
            let stale = sorted_out(&shard.held, &wanted, false);
            for t in &stale {
                shard.held.remove(t);
            }
            self.unsubscribe(m, stale).await;
        }
        self.lost.retain(|t| wanted.contains(t));
        for t in wanted {
            if !self.shards.values().any(|s| s.held.contains(&t)) {
                self.lost.insert(t);
            }
        }
        let mut ok = true;
        let missing: Vec<Master> = self
            .map
            .as_ref()
            .map(|m| {
                m.masters
                    .iter()
                    .filter(|m| !self.shards.contains_key(*m))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        for m in missing {
            ok &= self.connect(&m).await;
        }
        if self.shards.is_empty() {
            // No master answers: the broker is down, not degraded.
            self.link.down("no master of the redis cluster answers");
            self.up = false;
            return false;
        }
        let mut by_owner: HashMap<Master, Vec<Topic>> = HashMap::new();
        let mut orphans = Vec::new();
        for t in &self.lost {
            match self.owner_of(t).filter(|m| self.shards.contains_key(m)) {
                Some(m) => by_owner.entry(m).or_default().push(t.clone()),
                None => orphans.push(t.clone()),
            }
        }
        // Wanted, with no master to hold them (it is away, or no master serves the slot).
        if !orphans.is_empty() {
            ok = false;
            self.link
                .lost(&orphans, "redis cluster: no master serves the slot");
        }
        for (m, topics) in by_owner {
            for chunk in topics.chunks(self.inner.config.batch.max(1)) {
                ok &= self
                    .subscribe(&m, chunk.to_vec(), "redis cluster resubscribe failed")
                    .await;
                self.drain();
            }
        }
        ok &= !self.map_stale && self.lost.is_empty();
        if ok && !self.up {
            self.up = true;
            self.link.up();
        }
        ok
    }
}
