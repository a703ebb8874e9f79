//! Messages as applications see them, for every layer: owned ([`Message`], shaped like
//! tungstenite's) and borrowed ([`MessageRef`]), with their text and close-frame types.

use bytes::Bytes;

use crate::codec::{CloseCode, MessageKind};

/// UTF-8 text held in [`Bytes`], so a text message is shared, not copied.
///
/// The bytes are validated when the value is built; [`Utf8Bytes::as_str`] checks again with
/// the standard library (this crate forbids `unsafe`), which for ASCII runs at memory speed.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Utf8Bytes(Bytes);

impl Utf8Bytes {
    /// Wraps `bytes` without a copy if they are valid UTF-8; hands them back otherwise.
    pub fn try_from_bytes(bytes: Bytes) -> Result<Self, Bytes> {
        match crate::simd::utf8::validate(&bytes) {
            Ok(()) => Ok(Utf8Bytes(bytes)),
            Err(_) => Err(bytes),
        }
    }

    /// Wraps bytes the codec has already validated as UTF-8.
    pub(crate) fn from_validated(bytes: Bytes) -> Self {
        debug_assert!(std::str::from_utf8(&bytes).is_ok());
        Utf8Bytes(bytes)
    }

    /// A static string, without copying.
    pub const fn from_static(s: &'static str) -> Self {
        Utf8Bytes(Bytes::from_static(s.as_bytes()))
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        // Validated on construction; `from_utf8` cannot fail here.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }

    /// The text's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The underlying buffer.
    pub fn into_bytes(self) -> Bytes {
        self.0
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the text is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::ops::Deref for Utf8Bytes {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl std::fmt::Debug for Utf8Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl std::fmt::Display for Utf8Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<String> for Utf8Bytes {
    fn from(s: String) -> Self {
        Utf8Bytes(Bytes::from(s))
    }
}

impl From<&str> for Utf8Bytes {
    fn from(s: &str) -> Self {
        Utf8Bytes(Bytes::copy_from_slice(s.as_bytes()))
    }
}

impl From<Utf8Bytes> for Bytes {
    fn from(s: Utf8Bytes) -> Bytes {
        s.0
    }
}

impl PartialEq<str> for Utf8Bytes {
    fn eq(&self, other: &str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<&str> for Utf8Bytes {
    fn eq(&self, other: &&str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

/// A close frame's status code and reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CloseFrame {
    /// The status code (RFC 6455 7.4), e.g. [`CloseCode::NORMAL`].
    pub code: CloseCode,
    /// The reason, at most 123 bytes of UTF-8.
    pub reason: Utf8Bytes,
}

impl CloseFrame {
    /// A close frame with `code` (a [`CloseCode`] or its number) and `reason`.
    pub fn new(code: impl Into<CloseCode>, reason: impl Into<Utf8Bytes>) -> Self {
        CloseFrame {
            code: code.into(),
            reason: reason.into(),
        }
    }
}

/// A WebSocket message, as the receive calls (and the tokio layer's `Stream`) yield and
/// the send calls (and its `Sink`) take.
///
/// Pings and pongs are answered by the library; they are yielded so an application can
/// watch them. Sending `Ping`/`Pong` sends that control frame; sending `Close` starts the
/// closing handshake.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// A text message.
    Text(Utf8Bytes),
    /// A binary message.
    Binary(Bytes),
    /// A ping (payload at most 125 bytes).
    Ping(Bytes),
    /// A pong (payload at most 125 bytes).
    Pong(Bytes),
    /// A close frame; `None` when the frame had no status code.
    Close(Option<CloseFrame>),
}

impl Message {
    /// A text message.
    pub fn text(s: impl Into<Utf8Bytes>) -> Self {
        Message::Text(s.into())
    }

    /// A binary message.
    pub fn binary(b: impl Into<Bytes>) -> Self {
        Message::Binary(b.into())
    }

    /// Payload length in bytes.
    pub fn len(&self) -> usize {
        match self {
            Message::Text(t) => t.len(),
            Message::Binary(b) | Message::Ping(b) | Message::Pong(b) => b.len(),
            Message::Close(c) => c.as_ref().map_or(0, |c| 2 + c.reason.len()),
        }
    }

    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether this is a text or binary message.
    pub fn is_data(&self) -> bool {
        matches!(self, Message::Text(_) | Message::Binary(_))
    }

    /// A data message of `kind` whose payload the codec has validated (UTF-8 for text).
    pub(crate) fn from_data(kind: MessageKind, data: Bytes) -> Self {
        match kind {
            MessageKind::Text => Message::Text(Utf8Bytes::from_validated(data)),
            MessageKind::Binary => Message::Binary(data),
        }
    }
}

/// A received message borrowed from the connection's buffers: what the borrowing receive
/// calls (`recv_ref` in the tokio layer) yield. It lives until the next call on the
/// connection; nothing is allocated or copied to produce it. [`to_message`](Self::to_message)
/// copies it into a [`Message`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageRef<'a> {
    /// A text message (validated as it arrived).
    Text(&'a str),
    /// A binary message.
    Binary(&'a [u8]),
    /// A ping (answered by the library).
    Ping(&'a [u8]),
    /// A pong.
    Pong(&'a [u8]),
    /// A close frame: status code and reason; `None` when the frame had no status code.
    Close(Option<(CloseCode, &'a str)>),
}

impl<'a> MessageRef<'a> {
    /// A data message of `kind` whose payload the codec has validated (UTF-8 for text).
    pub(crate) fn from_data(kind: MessageKind, data: &'a [u8]) -> Self {
        match kind {
            MessageKind::Text => {
                debug_assert!(core::str::from_utf8(data).is_ok(), "text was validated");
                // Validated as it arrived; the standard library checks again because this
                // crate forbids `unsafe` (at memory speed for ASCII).
                MessageRef::Text(core::str::from_utf8(data).unwrap_or_default())
            }
            MessageKind::Binary => MessageRef::Binary(data),
        }
    }

    /// The payload's bytes (for a close frame: the reason).
    pub fn as_bytes(&self) -> &'a [u8] {
        match *self {
            MessageRef::Text(t) => t.as_bytes(),
            MessageRef::Binary(b) | MessageRef::Ping(b) | MessageRef::Pong(b) => b,
            MessageRef::Close(c) => c.map_or(&[], |(_, reason)| reason.as_bytes()),
        }
    }

    /// Payload length in bytes (for a close frame: code and reason, as on the wire).
    pub fn len(&self) -> usize {
        match *self {
            MessageRef::Close(c) => c.map_or(0, |(_, reason)| 2 + reason.len()),
            _ => self.as_bytes().len(),
        }
    }

    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether this is a text or binary message.
    pub fn is_data(&self) -> bool {
        matches!(self, MessageRef::Text(_) | MessageRef::Binary(_))
    }

    /// The text of a text message; `None` otherwise.
    pub fn as_text(&self) -> Option<&'a str> {
        match *self {
            MessageRef::Text(t) => Some(t),
            _ => None,
        }
    }

    /// Copies the message into an owned [`Message`].
    pub fn to_message(&self) -> Message {
        match *self {
            MessageRef::Text(t) => Message::Text(Utf8Bytes::from(t)),
            MessageRef::Binary(b) => Message::Binary(Bytes::copy_from_slice(b)),
            MessageRef::Ping(b) => Message::Ping(Bytes::copy_from_slice(b)),
            MessageRef::Pong(b) => Message::Pong(Bytes::copy_from_slice(b)),
            MessageRef::Close(c) => {
                Message::Close(c.map(|(code, reason)| CloseFrame::new(code, reason)))
            }
        }
    }
}
