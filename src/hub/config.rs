//! A hub's settings and its policy for slow consumers.

use super::*;

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

setters! { HubConfig {
    /// Sets [`slow_consumer`](Self::slow_consumer).
    with_slow_consumer(policy: SlowConsumer) => slow_consumer;
    /// Sets [`max_message_size`](Self::max_message_size).
    with_max_message_size(bytes: usize) => max_message_size;
    /// Sets [`history`](Self::history).
    with_history(history: Option<HistoryConfig>) => history;
    /// Sets [`max_topics_per_connection`](Self::max_topics_per_connection).
    with_max_topics_per_connection(n: usize) => max_topics_per_connection;
    /// Sets [`compression_level`](Self::compression_level).
    with_compression_level(level: i32) => compression_level = level.clamp(0, 9);
    /// Sets [`recovery_timeout`](Self::recovery_timeout).
    with_recovery_timeout(t: Duration) => recovery_timeout;
} }
