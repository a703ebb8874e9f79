//! What the hub takes and reports: payloads, events, errors.

use super::*;

/// Something the hub reports ([`Hub::events`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HubEvent {
    /// The broker lost its connection; local fan-out goes on.
    BrokerDown {
        /// What happened.
        reason: String,
    },
    /// The broker is connected and subscribed to every live topic (after
    /// [`BrokerDown`](Self::BrokerDown), or once nothing is lost any more after
    /// [`BrokerDegraded`](Self::BrokerDegraded)).
    BrokerUp,
    /// Part of the broker's subscriptions is lost (a Redis Cluster master went away, or
    /// its slots moved): remote publications on `topics` do not arrive until the broker
    /// has subscribed them again where they now live and the hub has caught them up
    /// (then [`BrokerUp`](Self::BrokerUp), once nothing is lost). Meanwhile
    /// [`Hub::broker_ready`] is false for each of them; the other topics go on.
    BrokerDegraded {
        /// What happened.
        reason: String,
        /// The topics newly lost.
        topics: Vec<Topic>,
    },
    /// A topic's numbering restarted, or its history no longer covers a gap:
    /// publications may have been missed since `previous`. Subscribers that track
    /// positions should resynchronise. `current` is where the topic stands now (offset 0,
    /// epoch 0 when its history is gone and nothing was published since).
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
    pub(super) kind: MessageKind,
    pub(super) data: Bytes,
    pub(super) prepared: Option<PreparedMessage>,
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

pub(super) type Framer = dyn Fn(&PublicationRef<'_>) -> Option<PreparedMessage> + Send + Sync;
