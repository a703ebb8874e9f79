//! Events, errors and output frames of a [`super::Connection`].

use core::fmt;

use bytes::{Buf, Bytes};

use crate::codec::{CloseCode, MAX_HEADER_LEN, MessageKind, ProtocolError, RandomError};
use crate::message::{CloseFrame, Message, MessageRef};

#[cfg(doc)]
use super::{Config, Delivery};
#[cfg(feature = "deflate")]
use crate::deflate::DeflateError;

/// What happened on the connection. Payloads borrow the connection's buffers until the
/// next call on it; use [`super::Connection::poll_event_owned`] for owned payloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event<'a> {
    /// A whole data message ([`Delivery::Whole`]): always [`MessageRef::Text`] or
    /// [`MessageRef::Binary`].
    Message(MessageRef<'a>),
    /// A part of a data message ([`Delivery::Chunks`]). For text, the concatenation of a
    /// message's chunks is UTF-8, but a chunk may end inside a code point.
    Chunk {
        /// Text or binary.
        kind: MessageKind,
        /// The bytes (inflated when compressed).
        data: &'a [u8],
        /// The message's first chunk.
        first: bool,
        /// The message's last chunk.
        fin: bool,
    },
    /// A ping; answered automatically unless [`Config::auto_pong`] is off.
    Ping(&'a [u8]),
    /// A pong.
    Pong(&'a [u8]),
    /// The peer's close: status code and reason; `None` when it had no status code.
    /// Echoed automatically unless [`Config::auto_close`] is off. No events follow.
    Close(Option<(CloseCode, &'a str)>),
}

impl<'a> Event<'a> {
    /// The event as an application sees it; `None` for a chunk (which the caller gathers).
    pub(crate) fn message_ref(self) -> Option<MessageRef<'a>> {
        Some(match self {
            Event::Message(m) => m,
            Event::Ping(p) => MessageRef::Ping(p),
            Event::Pong(p) => MessageRef::Pong(p),
            Event::Close(c) => MessageRef::Close(c),
            Event::Chunk { .. } => return None,
        })
    }
}

impl OwnedEvent {
    /// The event as an application sees it: chunks (only in [`Delivery::Chunks`]) become
    /// binary or text messages of their own.
    pub(crate) fn into_message(self) -> Message {
        match self {
            OwnedEvent::Message { kind, data } | OwnedEvent::Chunk { kind, data, .. } => {
                Message::from_data(kind, data)
            }
            OwnedEvent::Ping(p) => Message::Ping(p),
            OwnedEvent::Pong(p) => Message::Pong(p),
            OwnedEvent::Close(c) => Message::Close(c),
        }
    }
}

/// An owned-payload version of [`Event`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OwnedEvent {
    /// A whole data message.
    Message {
        /// Text or binary.
        kind: MessageKind,
        /// The payload.
        data: Bytes,
    },
    /// A part of a data message.
    Chunk {
        /// Text or binary.
        kind: MessageKind,
        /// The bytes.
        data: Bytes,
        /// The message's first chunk.
        first: bool,
        /// The message's last chunk.
        fin: bool,
    },
    /// A ping.
    Ping(Bytes),
    /// A pong.
    Pong(Bytes),
    /// The peer's close; `None` when it had no status code.
    Close(Option<CloseFrame>),
}

/// Which deadline passed: one of the connection's timers, or (in the IO layers) the
/// connect or the opening handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Timeout {
    /// DNS resolution plus TCP connect, and opening the proxy tunnel when there is one
    /// (`ClientConfig::connect_timeout`).
    Connect,
    /// The opening handshake (`ServerConfig::handshake_timeout`,
    /// `ClientConfig::handshake_timeout`).
    Handshake,
    /// A keepalive ping got no answer within [`Config::pong_timeout`].
    Pong,
    /// The peer did not answer our close within [`Config::close_timeout`].
    Close,
    /// No progress (a complete frame, or 64 KiB of one) for [`Config::idle_timeout`].
    Idle,
    /// A fragmented message did not complete within [`Config::message_timeout`] of its
    /// first frame.
    Message,
    /// Output waited for the socket, none of it written, for [`Config::send_timeout`]: the
    /// peer stopped reading.
    Send,
}

impl fmt::Display for Timeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Timeout::Connect => "connect timed out",
            Timeout::Handshake => "opening handshake timed out",
            Timeout::Pong => "no pong received for the keepalive ping",
            Timeout::Idle => "connection idle for too long",
            Timeout::Close => "peer did not answer the close frame in time",
            Timeout::Message => "fragmented message not completed in time",
            Timeout::Send => "the peer took nothing we sent in time",
        })
    }
}

/// Why the connection failed. After one is reported, the connection is closed: flush the
/// pending output (it holds our close frame, when one could be sent) and drop the transport.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The peer broke RFC 6455; a close with [`ProtocolError::close_code`] was queued.
    Protocol(ProtocolError),
    /// A compressed message could not be inflated or grew past the limit.
    #[cfg(feature = "deflate")]
    Deflate(DeflateError),
    /// A timer ran out.
    Timeout(Timeout),
    /// The transport ended without the close handshake (RFC 6455 7.1.5: the connection
    /// is closed abnormally, code 1006). The IO layers report it as an IO error of kind
    /// `UnexpectedEof`.
    Eof,
    /// A message being received needed more of the memory budget shared with other
    /// connections ([`Config::budget`]) than it had left, and none came within
    /// [`Config::budget_wait`] (the connection waited, reading nothing), or it could never
    /// fit (this connection alone would hold more than the limit): it is refused and the
    /// connection closed with 1013 ("try again later"), although the message itself is
    /// within [`Config::max_message_size`] as far as it arrived. The budget counts the
    /// refusal ([`Budget::refused`](super::Budget::refused)).
    OverBudget,
    /// A fragmented message we were sending was abandoned part way (its writer dropped,
    /// or its send cancelled, after some of it was queued): the peer holds a message that
    /// can no longer be completed truthfully, so the connection was closed with 1011
    /// rather than end that message short. See
    /// [`Connection::abort_message`](super::Connection::abort_message).
    Abandoned,
}

impl Error {
    /// The close code this error sends, if it sends one: the protocol error's, 1001 when
    /// the peer went quiet (idle, no pong), 1008 for a message not completed in time,
    /// 1013 for a message over the shared memory budget;
    /// none when the peer cannot read it anyway (our close went unanswered, it stopped
    /// reading, the transport ended).
    pub fn close_code(&self) -> Option<CloseCode> {
        match self {
            Error::Protocol(e) => Some(e.close_code()),
            #[cfg(feature = "deflate")]
            Error::Deflate(e) => Some(CloseCode(e.close_code())),
            Error::Timeout(Timeout::Idle | Timeout::Pong) => Some(CloseCode::GOING_AWAY),
            Error::Timeout(Timeout::Message | Timeout::Send) => Some(CloseCode::POLICY),
            // IANA registry: 1013, "Try Again Later": the server is overloaded.
            Error::OverBudget => Some(CloseCode::TRY_AGAIN_LATER),
            Error::Abandoned => Some(CloseCode::INTERNAL),
            Error::Timeout(_) | Error::Eof => None,
        }
    }

    /// The reason sent with [`close_code`](Self::close_code): short, so the peer (and
    /// whoever reads its logs) knows which limit it met.
    pub fn close_reason(&self) -> &'static str {
        match self {
            Error::Timeout(Timeout::Idle) => "idle timeout",
            Error::Timeout(Timeout::Pong) => "no pong to the keepalive ping",
            Error::Timeout(Timeout::Message) => "message not completed in time",
            Error::Timeout(Timeout::Send) => "send timed out",
            Error::OverBudget => "over the memory budget, try again later",
            Error::Abandoned => "message abandoned by the sender",
            Error::Protocol(e) if e.close_code() == CloseCode::TOO_BIG => "message too big",
            #[cfg(feature = "deflate")]
            Error::Deflate(crate::deflate::DeflateError::TooLarge) => "message too big",
            _ => "",
        }
    }
}

display! { Error {
    Error::Protocol(e) => "protocol error: {e}";
    #[cfg(feature = "deflate")]
    Error::Deflate(e) => "permessage-deflate error: {e}";
    Error::Timeout(t) => "{t}";
    Error::Eof => "the transport closed without a close frame";
    Error::OverBudget => "message refused: the shared memory budget stayed exhausted";
    Error::Abandoned =>
        "a fragmented message being sent was abandoned part way; closed with 1011";
} }

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Protocol(e) => Some(e),
            #[cfg(feature = "deflate")]
            Error::Deflate(e) => Some(e),
            Error::Timeout(_) | Error::Eof | Error::OverBudget | Error::Abandoned => None,
        }
    }
}

/// Why a send was refused. Nothing was queued.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendError {
    /// A close was already sent (or the connection failed): RFC 6455 5.5.1 forbids
    /// anything after it.
    Closed,
    /// A control frame payload over 125 bytes (a close reason over 123).
    ControlTooLong,
    /// A close code that may not be sent (RFC 6455 7.4).
    InvalidCloseCode(CloseCode),
    /// A whole message or a prepared one while a fragmented message is being sent.
    MessageInProgress,
    /// A chunk or end without [`super::Connection::begin_message`].
    NoMessageInProgress,
    /// No masking key could be drawn.
    Random(RandomError),
    /// Compression failed.
    #[cfg(feature = "deflate")]
    Deflate(DeflateError),
}

impl From<RandomError> for SendError {
    fn from(e: RandomError) -> Self {
        SendError::Random(e)
    }
}

display! { SendError {
    SendError::Closed => "the connection is closing or closed";
    SendError::ControlTooLong => "control frame payload over 125 bytes";
    SendError::InvalidCloseCode(c) => "close code {c} may not be sent";
    SendError::MessageInProgress => "a fragmented message is being sent";
    SendError::NoMessageInProgress => "no fragmented message was begun";
    SendError::Random(e) => "{e}";
    #[cfg(feature = "deflate")]
    SendError::Deflate(e) => "{e}";
} }

impl std::error::Error for SendError {}

/// One frame to write: a header array and a payload that is never copied on the way out.
///
/// Implements [`bytes::Buf`] (with `chunks_vectored` giving header and payload), so an IO
/// layer can hand it to a vectored write. A prepared frame has an empty header and its
/// whole encoding as payload.
#[derive(Clone, Debug)]
pub struct Transmit {
    header: [u8; MAX_HEADER_LEN],
    header_len: u8,
    header_pos: u8,
    payload: Bytes,
}

impl Transmit {
    pub(crate) fn from_parts(header: [u8; MAX_HEADER_LEN], header_len: u8, payload: Bytes) -> Self {
        Transmit {
            header,
            header_len,
            header_pos: 0,
            payload,
        }
    }

    pub(crate) fn raw(frame: Bytes) -> Self {
        Transmit {
            header: [0; MAX_HEADER_LEN],
            header_len: 0,
            header_pos: 0,
            payload: frame,
        }
    }

    /// The header bytes not yet advanced over.
    #[inline]
    pub fn header(&self) -> &[u8] {
        &self.header[self.header_pos as usize..self.header_len as usize]
    }

    /// The payload bytes not yet advanced over.
    #[inline]
    pub fn payload(&self) -> &Bytes {
        &self.payload
    }

    /// Total bytes left to write.
    #[allow(clippy::len_without_is_empty)]
    #[inline]
    pub fn len(&self) -> usize {
        self.header().len() + self.payload.len()
    }
}

impl Buf for Transmit {
    fn remaining(&self) -> usize {
        self.len()
    }

    fn chunk(&self) -> &[u8] {
        let h = self.header();
        if h.is_empty() { &self.payload } else { h }
    }

    fn advance(&mut self, mut cnt: usize) {
        let h = self.header().len();
        let from_header = cnt.min(h);
        self.header_pos += from_header as u8;
        cnt -= from_header;
        self.payload.advance(cnt);
    }

    fn chunks_vectored<'a>(&'a self, dst: &mut [std::io::IoSlice<'a>]) -> usize {
        let mut n = 0;
        for part in [self.header(), &self.payload[..]] {
            if !part.is_empty() && n < dst.len() {
                dst[n] = std::io::IoSlice::new(part);
                n += 1;
            }
        }
        n
    }
}
