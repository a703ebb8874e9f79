//! [`Message`], tungstenite's message enum.

use std::fmt;

use bytes::Bytes;

use super::frame::{CloseFrame, Frame, Utf8Bytes};
use crate::tungstenite::error::{Error, Result};

/// A WebSocket message, as tungstenite's: what the streams yield and the sinks take.
///
/// Pings are answered and a peer's close echoed by the connection itself; they are yielded
/// so a program can watch them, as tungstenite does.
#[derive(Debug, Eq, PartialEq, Clone)]
pub enum Message {
    /// A text message.
    Text(Utf8Bytes),
    /// A binary message.
    Binary(Bytes),
    /// A ping (payload at most 125 bytes).
    Ping(Bytes),
    /// A pong (payload at most 125 bytes).
    Pong(Bytes),
    /// A close frame; `None` when it had no status code.
    Close(Option<CloseFrame>),
    /// A raw frame, for sending: a whole text or binary message, a ping, a pong or a close
    /// is sent as that; a fragment or a frame with reserved bits or opcodes is refused
    /// (rapidws writes its frames itself). Never received.
    Frame(Frame),
}

impl Message {
    /// A text message.
    pub fn text<S: Into<Utf8Bytes>>(string: S) -> Message {
        Message::Text(string.into())
    }

    /// A binary message.
    pub fn binary<B: Into<Bytes>>(bin: B) -> Message {
        Message::Binary(bin.into())
    }

    /// Whether this is a text message.
    pub fn is_text(&self) -> bool {
        matches!(self, Message::Text(_))
    }

    /// Whether this is a binary message.
    pub fn is_binary(&self) -> bool {
        matches!(self, Message::Binary(_))
    }

    /// Whether this is a ping.
    pub fn is_ping(&self) -> bool {
        matches!(self, Message::Ping(_))
    }

    /// Whether this is a pong.
    pub fn is_pong(&self) -> bool {
        matches!(self, Message::Pong(_))
    }

    /// Whether this is a close frame.
    pub fn is_close(&self) -> bool {
        matches!(self, Message::Close(_))
    }

    /// The payload's length (a close frame's: its reason's).
    pub fn len(&self) -> usize {
        match self {
            Message::Text(t) => t.len(),
            Message::Binary(b) | Message::Ping(b) | Message::Pong(b) => b.len(),
            Message::Close(c) => c.as_ref().map_or(0, |c| c.reason.len()),
            Message::Frame(f) => f.len(),
        }
    }

    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The payload (a close frame's: its reason).
    pub fn into_data(self) -> Bytes {
        match self {
            Message::Text(t) => t.into(),
            Message::Binary(b) | Message::Ping(b) | Message::Pong(b) => b,
            Message::Close(c) => c.map(|c| c.reason.into()).unwrap_or_default(),
            Message::Frame(f) => f.into_payload(),
        }
    }

    /// The payload as text: a binary, ping or pong payload if it is UTF-8
    /// ([`Error::Utf8`] if not), a close frame's reason.
    pub fn into_text(self) -> Result<Utf8Bytes> {
        match self {
            Message::Text(t) => Ok(t),
            Message::Binary(b) | Message::Ping(b) | Message::Pong(b) => Ok(b.try_into()?),
            Message::Close(c) => Ok(c.map(|c| c.reason).unwrap_or_default()),
            Message::Frame(f) => Ok(f.into_text()?),
        }
    }

    /// The payload as text, borrowed: as [`into_text`](Self::into_text).
    pub fn to_text(&self) -> Result<&str> {
        match self {
            Message::Text(t) => Ok(t.as_str()),
            Message::Binary(b) | Message::Ping(b) | Message::Pong(b) => Ok(std::str::from_utf8(b)?),
            Message::Close(c) => Ok(c.as_ref().map_or("", |c| c.reason.as_str())),
            Message::Frame(f) => Ok(f.to_text()?),
        }
    }

    /// This message for rapidws; `None` for a raw frame rapidws does not send.
    pub(crate) fn into_rapidws(self) -> Option<rapidws::Message> {
        Some(match self {
            Message::Text(t) => rapidws::Message::Text(t.0),
            Message::Binary(b) => rapidws::Message::Binary(b),
            Message::Ping(b) => rapidws::Message::Ping(b),
            Message::Pong(b) => rapidws::Message::Pong(b),
            Message::Close(c) => close_for_rapidws(c.map(Into::into)),
            Message::Frame(f) => return f.into_message(),
        })
    }
}

/// The close rapidws sends for a close frame: `None` as a close frame without a status
/// code (tungstenite's), which rapidws sends for 1005 with no reason (its own `None` is
/// 1000).
pub(crate) fn close_for_rapidws(c: Option<rapidws::CloseFrame>) -> rapidws::Message {
    rapidws::Message::Close(Some(
        c.unwrap_or_else(|| rapidws::CloseFrame::new(rapidws::CloseCode::NO_STATUS, "")),
    ))
}

/// The error for a [`Message::Frame`] rapidws does not send.
pub(crate) fn unsendable_frame() -> Error {
    Error::Io(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "rapidws-tungstenite sends a Message::Frame only as a whole message, ping, pong or close",
    ))
}

impl From<rapidws::Message> for Message {
    fn from(m: rapidws::Message) -> Self {
        match m {
            rapidws::Message::Text(t) => Message::Text(t.into()),
            rapidws::Message::Binary(b) => Message::Binary(b),
            rapidws::Message::Ping(b) => Message::Ping(b),
            rapidws::Message::Pong(b) => Message::Pong(b),
            rapidws::Message::Close(c) => Message::Close(c.map(Into::into)),
        }
    }
}

impl From<String> for Message {
    fn from(s: String) -> Self {
        Message::text(s)
    }
}

impl<'s> From<&'s str> for Message {
    fn from(s: &'s str) -> Self {
        Message::text(s)
    }
}

impl<'b> From<&'b [u8]> for Message {
    fn from(data: &'b [u8]) -> Self {
        Message::binary(Bytes::copy_from_slice(data))
    }
}

impl From<Bytes> for Message {
    fn from(data: Bytes) -> Self {
        Message::binary(data)
    }
}

impl From<Vec<u8>> for Message {
    fn from(data: Vec<u8>) -> Self {
        Message::binary(data)
    }
}

impl From<Message> for Bytes {
    fn from(m: Message) -> Self {
        m.into_data()
    }
}

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.to_text() {
            Ok(s) => f.write_str(s),
            Err(_) => write!(f, "Binary Data<length={}>", self.len()),
        }
    }
}
