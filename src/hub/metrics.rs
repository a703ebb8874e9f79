//! Counters a hub keeps, and the snapshot a scraper reads ([`HubMetrics`]), with a
//! Prometheus text rendering.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[derive(Default, Debug)]
pub(crate) struct Counters {
    pub(crate) publications: AtomicU64,
    pub(crate) remote_publications: AtomicU64,
    pub(crate) deliveries: AtomicU64,
    pub(crate) dropped: AtomicU64,
    pub(crate) closed_slow: AtomicU64,
    pub(crate) broker_invalid: AtomicU64,
    pub(crate) broker_dropped: AtomicU64,
    pub(crate) broker_disconnects: AtomicU64,
    pub(crate) unrecorded: AtomicU64,
    pub(crate) epoch_changes: AtomicU64,
    pub(crate) recovered: AtomicU64,
}

impl Counters {
    pub(crate) fn add_broker_dropped(&self, n: u64) {
        self.broker_dropped.fetch_add(n, Relaxed);
    }
}

/// A snapshot of a hub's metrics ([`Hub::metrics`](super::Hub::metrics)). Counters count
/// from the hub's start; the rest is the state at the snapshot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HubMetrics {
    /// Publications made on this node.
    pub publications: u64,
    /// Publications from other nodes, received through the broker.
    pub remote_publications: u64,
    /// Messages queued to a subscriber's connection.
    pub deliveries: u64,
    /// Deliveries dropped because the subscriber's send queue was full.
    pub dropped: u64,
    /// Subscribers closed because their send queue was full.
    pub closed_slow: u64,
    /// Broker input refused: malformed envelope, over the size limit, text not UTF-8.
    pub broker_invalid: u64,
    /// Publications the broker could not send (its queue full, the server refusing).
    pub broker_dropped: u64,
    /// Times the broker's connection was lost, or (in a Redis Cluster) a part of its
    /// subscriptions ([`HubEvent::BrokerDegraded`](super::HubEvent::BrokerDegraded)).
    pub broker_disconnects: u64,
    /// Publications with history that could not be recorded (broker away) and went to
    /// local subscribers only.
    pub unrecorded: u64,
    /// Times a topic's epoch changed under live subscribers (a gap).
    pub epoch_changes: u64,
    /// Publications replayed to recovering subscribers.
    pub recovered: u64,
    /// Whether the broker is connected now and subscribed to every live topic (false
    /// while it is down or degraded).
    pub broker_up: bool,
    /// Topics whose broker subscription is lost now (their Redis Cluster master away,
    /// or their slot moved): remote publications on them do not arrive until it is
    /// restored.
    pub broker_lost_topics: usize,
    /// Connections joined now.
    pub connections: usize,
    /// Bytes waiting in the send queues of the joined connections.
    pub queued_bytes: u64,
    /// Subscribers per topic, by topic name.
    pub topics: Vec<(String, usize)>,
}

impl HubMetrics {
    pub(crate) fn from_counters(c: &Counters) -> Self {
        HubMetrics {
            publications: c.publications.load(Relaxed),
            remote_publications: c.remote_publications.load(Relaxed),
            deliveries: c.deliveries.load(Relaxed),
            dropped: c.dropped.load(Relaxed),
            closed_slow: c.closed_slow.load(Relaxed),
            broker_invalid: c.broker_invalid.load(Relaxed),
            broker_dropped: c.broker_dropped.load(Relaxed),
            broker_disconnects: c.broker_disconnects.load(Relaxed),
            unrecorded: c.unrecorded.load(Relaxed),
            epoch_changes: c.epoch_changes.load(Relaxed),
            recovered: c.recovered.load(Relaxed),
            ..HubMetrics::default()
        }
    }

    /// Subscribers of `topic` now (0 when nobody on this node subscribes).
    pub fn subscribers(&self, topic: &str) -> usize {
        self.topics
            .iter()
            .find(|(t, _)| t == topic)
            .map_or(0, |(_, n)| *n)
    }

    /// The metrics in the Prometheus text exposition format, names prefixed with
    /// `rapidws_hub_`; subscribers per topic carry a `topic` label.
    pub fn to_prometheus(&self) -> String {
        let mut out = String::new();
        let counters: [(&str, &str, u64); 11] = [
            (
                "publications_total",
                "Publications made on this node.",
                self.publications,
            ),
            (
                "remote_publications_total",
                "Publications received from other nodes.",
                self.remote_publications,
            ),
            (
                "deliveries_total",
                "Messages queued to subscribers.",
                self.deliveries,
            ),
            (
                "dropped_total",
                "Deliveries dropped: the subscriber's send queue was full.",
                self.dropped,
            ),
            (
                "closed_slow_total",
                "Subscribers closed for a full send queue.",
                self.closed_slow,
            ),
            (
                "broker_invalid_total",
                "Broker input refused (malformed, too large, bad UTF-8).",
                self.broker_invalid,
            ),
            (
                "broker_dropped_total",
                "Publications the broker could not send.",
                self.broker_dropped,
            ),
            (
                "broker_disconnects_total",
                "Times the broker connection was lost.",
                self.broker_disconnects,
            ),
            (
                "unrecorded_total",
                "Publications that could not be recorded in history.",
                self.unrecorded,
            ),
            (
                "epoch_changes_total",
                "Topic epoch changes under live subscribers.",
                self.epoch_changes,
            ),
            (
                "recovered_total",
                "Publications replayed to recovering subscribers.",
                self.recovered,
            ),
        ];
        let gauges: [(&str, &str, u64); 4] = [
            (
                "broker_up",
                "1 while the broker is connected and subscribed to every live topic.",
                u64::from(self.broker_up),
            ),
            (
                "broker_lost_topics",
                "Topics whose broker subscription is lost (a cluster shard away or moved).",
                self.broker_lost_topics as u64,
            ),
            (
                "connections",
                "Connections joined to the hub.",
                self.connections as u64,
            ),
            (
                "queued_bytes",
                "Bytes waiting in subscribers' send queues.",
                self.queued_bytes,
            ),
        ];
        for (kind, family) in [("counter", &counters[..]), ("gauge", &gauges[..])] {
            for (name, help, v) in family {
                let _ = writeln!(out, "# HELP rapidws_hub_{name} {help}");
                let _ = writeln!(out, "# TYPE rapidws_hub_{name} {kind}");
                let _ = writeln!(out, "rapidws_hub_{name} {v}");
            }
        }
        let _ = writeln!(out, "# HELP rapidws_hub_subscribers Subscribers per topic.");
        let _ = writeln!(out, "# TYPE rapidws_hub_subscribers gauge");
        for (topic, n) in &self.topics {
            // Topic names are printable ASCII without '"' or '\\' issues: escape anyway.
            let escaped = topic.replace('\\', "\\\\").replace('"', "\\\"");
            let _ = writeln!(out, "rapidws_hub_subscribers{{topic=\"{escaped}\"}} {n}");
        }
        out
    }
}
