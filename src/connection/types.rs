//! Configuration, events, errors and output frames of a [`super::Connection`].

use core::fmt;
use std::time::Duration;

use bytes::{Buf, Bytes};

use crate::codec::{
    CloseCode, DEFAULT_MAX_FRAME_SIZE, DEFAULT_MAX_MESSAGE_SIZE, MAX_HEADER_LEN, MessageKind,
    ProtocolError, RandomError,
};
#[cfg(feature = "deflate")]
use crate::deflate::DeflateError;

/// How received data messages are handed over.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Delivery {
    /// One [`Event::Message`] per message, assembled by the connection.
    #[default]
    Whole,
    /// [`Event::Chunk`]s as payload arrives: nothing is assembled, so memory stays small
    /// whatever the message size.
    Chunks,
}

/// Default of `Config::max_read_ahead`.
const DEFAULT_MAX_READ_AHEAD: usize = 1 << 20;

/// Connection settings. Every limit has a safe default; `None` turns a timer off.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Config {
    /// Largest frame payload accepted. Default 16 MiB.
    pub max_frame_size: usize,
    /// Largest message accepted (inflated size when compressed). Default 64 MiB.
    pub max_message_size: usize,
    /// How data messages are delivered. Default [`Delivery::Whole`].
    pub delivery: Delivery,
    /// Answer pings with pongs automatically. Default on.
    pub auto_pong: bool,
    /// Echo the peer's close automatically. Default on. When off, call
    /// [`super::Connection::close`] after [`Event::Close`].
    pub auto_close: bool,
    /// Send a ping after this long without receiving anything. Default `None`.
    pub keepalive_interval: Option<Duration>,
    /// Fail when a keepalive ping has had no answer (no bytes at all) for this long.
    /// Default 30 s (only used with `keepalive_interval`).
    pub pong_timeout: Option<Duration>,
    /// After sending a close, wait this long for the peer's. Default 5 s.
    pub close_timeout: Option<Duration>,
    /// Close (1001) after this long without receiving anything. Default `None`.
    pub idle_timeout: Option<Duration>,
    /// Decode a receive buffer holding several complete frames in batches
    /// ([`crate::codec::DecoderConfig::batch`]): same events, less time per small frame.
    /// Default on; off decodes one frame per call.
    pub batch_decode: bool,
    /// Most room reserved in the receive buffer in one step for the announced, not yet
    /// received rest of a single-frame message ([`super::Connection::reserve_recv`]): the
    /// rest of a frame up to this size is read straight into place, with no reallocation
    /// while it arrives. Past it, room grows with what has arrived (by at most what the
    /// frame has already delivered), so a peer that announces a large frame and then
    /// stalls makes the connection reserve at most this much. Default 1 MiB.
    pub max_read_ahead: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            delivery: Delivery::Whole,
            auto_pong: true,
            auto_close: true,
            keepalive_interval: None,
            pong_timeout: Some(Duration::from_secs(30)),
            close_timeout: Some(Duration::from_secs(5)),
            idle_timeout: None,
            batch_decode: true,
            max_read_ahead: DEFAULT_MAX_READ_AHEAD,
        }
    }
}

/// A received close frame's content.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CloseFrame<'a> {
    /// The status code.
    pub code: CloseCode,
    /// The reason, possibly empty.
    pub reason: &'a str,
}

/// A received data message (whole, in [`Delivery::Whole`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message<'a> {
    /// Text or binary.
    pub kind: MessageKind,
    /// The payload (inflated when compressed). For text, valid UTF-8.
    pub data: &'a [u8],
}

impl<'a> Message<'a> {
    /// The text of a text message; `None` for binary. The bytes were validated as they
    /// arrived; this re-check is a cheap pass that keeps the crate free of `unsafe`.
    pub fn as_text(&self) -> Option<&'a str> {
        match self.kind {
            MessageKind::Text => core::str::from_utf8(self.data).ok(),
            MessageKind::Binary => None,
        }
    }
}

/// What happened on the connection. Payloads borrow the connection's buffers until the
/// next call on it; use [`super::Connection::poll_event_owned`] for owned payloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event<'a> {
    /// A whole data message ([`Delivery::Whole`]).
    Message(Message<'a>),
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
    /// The peer's close; `None` when it had no status code. Echoed automatically unless
    /// [`Config::auto_close`] is off. No events follow.
    Close(Option<CloseFrame<'a>>),
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
    /// The peer's close: code and reason.
    Close(Option<(CloseCode, String)>),
}

/// Which timer ran out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Timeout {
    /// A keepalive ping got no answer within [`Config::pong_timeout`].
    Pong,
    /// The peer did not answer our close within [`Config::close_timeout`].
    Close,
    /// Nothing was received for [`Config::idle_timeout`].
    Idle,
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
}

impl Error {
    /// The close code this error sends, if it sends one.
    pub fn close_code(&self) -> Option<CloseCode> {
        match self {
            Error::Protocol(e) => Some(e.close_code()),
            #[cfg(feature = "deflate")]
            Error::Deflate(e) => Some(CloseCode(e.close_code())),
            Error::Timeout(Timeout::Idle) => Some(CloseCode::GOING_AWAY),
            Error::Timeout(_) => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Protocol(e) => write!(f, "protocol error: {e}"),
            #[cfg(feature = "deflate")]
            Error::Deflate(e) => write!(f, "permessage-deflate error: {e}"),
            Error::Timeout(Timeout::Pong) => f.write_str("no pong before the deadline"),
            Error::Timeout(Timeout::Close) => f.write_str("no close reply before the deadline"),
            Error::Timeout(Timeout::Idle) => f.write_str("idle timeout"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Protocol(e) => Some(e),
            #[cfg(feature = "deflate")]
            Error::Deflate(e) => Some(e),
            Error::Timeout(_) => None,
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

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::Closed => f.write_str("the connection is closing or closed"),
            SendError::ControlTooLong => f.write_str("control frame payload over 125 bytes"),
            SendError::InvalidCloseCode(c) => write!(f, "close code {c} may not be sent"),
            SendError::MessageInProgress => f.write_str("a fragmented message is being sent"),
            SendError::NoMessageInProgress => f.write_str("no fragmented message was begun"),
            SendError::Random(e) => e.fmt(f),
            #[cfg(feature = "deflate")]
            SendError::Deflate(e) => e.fmt(f),
        }
    }
}

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
    pub(crate) fn new(header: crate::codec::HeaderBuf, payload: Bytes) -> Self {
        let (header, header_len) = header.into_parts();
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
