//! Messages as applications see them, for every layer: owned ([`Message`], shaped like
//! tungstenite's) and borrowed ([`MessageRef`]), with their text and close-frame types.

use bytes::Bytes;

use crate::codec::{CloseCode, MessageKind};

mod utf8;

pub use utf8::{FromUtf8Error, Utf8Bytes};

/// The kind tests the owned and the borrowed message share (both enums have the same
/// five variants), and `is_empty` from their `len`.
macro_rules! kind_tests {
    ($view:ident) => {
        /// Whether the payload is empty.
        pub fn is_empty(&self) -> bool {
            self.len() == 0
        }

        /// Whether this is a text or binary message.
        pub fn is_data(&self) -> bool {
            matches!(self, $view::Text(_) | $view::Binary(_))
        }

        /// Whether this is a text message.
        pub fn is_text(&self) -> bool {
            matches!(self, $view::Text(_))
        }

        /// Whether this is a binary message.
        pub fn is_binary(&self) -> bool {
            matches!(self, $view::Binary(_))
        }

        /// Whether this is a ping.
        pub fn is_ping(&self) -> bool {
            matches!(self, $view::Ping(_))
        }

        /// Whether this is a pong.
        pub fn is_pong(&self) -> bool {
            matches!(self, $view::Pong(_))
        }

        /// Whether this is a close frame.
        pub fn is_close(&self) -> bool {
            matches!(self, $view::Close(_))
        }
    };
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
    /// The message borrowed.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn as_message_ref(&self) -> MessageRef<'_> {
        match self {
            Message::Text(t) => MessageRef::Text(t.as_str()),
            Message::Binary(b) => MessageRef::Binary(b),
            Message::Ping(p) => MessageRef::Ping(p),
            Message::Pong(p) => MessageRef::Pong(p),
            Message::Close(c) => MessageRef::Close(c.as_ref().map(|f| (f.code, f.reason.as_str()))),
        }
    }

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

    kind_tests!(Message);

    /// The text of a text message; `None` for every other kind (see
    /// [`into_text`](Self::into_text) to read a binary payload as text).
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Message::Text(t) => Some(t.as_str()),
            _ => None,
        }
    }

    /// The payload as text, borrowed, as tungstenite's `to_text` reads it: a text
    /// message's text; a binary, ping or pong payload when it is UTF-8 (the error says
    /// where it is not); a close frame's reason (`""` without one). [`as_text`](Self::as_text)
    /// is `Some` for text messages only.
    ///
    /// ```
    /// use rapidws::{CloseFrame, Message};
    ///
    /// assert_eq!(Message::text("hi").to_text(), Ok("hi"));
    /// assert_eq!(Message::binary(&b"{}"[..]).to_text(), Ok("{}"));
    /// assert_eq!(Message::binary(vec![b'o', b'k', 0xff]).to_text().unwrap_err().valid_up_to(), 2);
    /// assert_eq!(Message::Close(Some(CloseFrame::new(1000, "bye"))).to_text(), Ok("bye"));
    /// assert_eq!(Message::Close(None).to_text(), Ok(""));
    /// ```
    ///
    /// # Errors
    ///
    /// [`Utf8Error`](core::str::Utf8Error) when a binary, ping or pong payload is not UTF-8.
    pub fn to_text(&self) -> Result<&str, core::str::Utf8Error> {
        match self {
            Message::Text(t) => Ok(t.as_str()),
            Message::Binary(b) | Message::Ping(b) | Message::Pong(b) => core::str::from_utf8(b),
            Message::Close(c) => Ok(c.as_ref().map_or("", |c| c.reason.as_str())),
        }
    }

    /// The payload's bytes, whatever the kind (for a close frame: the reason).
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Message::Text(t) => t.as_bytes(),
            Message::Binary(b) | Message::Ping(b) | Message::Pong(b) => b,
            Message::Close(c) => c.as_ref().map_or(&[], |c| c.reason.as_bytes()),
        }
    }

    /// The payload as text, without a copy: a text message's text; a binary, ping or pong
    /// payload once validated as UTF-8 (the error says where it broke and hands the bytes
    /// back); a close frame's reason.
    ///
    /// ```
    /// use rapidws::Message;
    ///
    /// assert_eq!(Message::text("hi").into_text().unwrap(), "hi");
    /// assert_eq!(Message::binary(&b"{}"[..]).into_text().unwrap(), "{}");
    /// assert_eq!(Message::binary(vec![0xff]).into_text().unwrap_err().valid_up_to(), 0);
    /// ```
    pub fn into_text(self) -> Result<Utf8Bytes, FromUtf8Error> {
        match self {
            Message::Text(t) => Ok(t),
            Message::Binary(b) | Message::Ping(b) | Message::Pong(b) => {
                Utf8Bytes::try_from_bytes(b)
            }
            Message::Close(c) => Ok(c.map(|c| c.reason).unwrap_or_default()),
        }
    }

    /// The payload, without a copy, whatever the kind (for a close frame: the reason).
    pub fn into_data(self) -> Bytes {
        match self {
            Message::Text(t) => t.into_bytes(),
            Message::Binary(b) | Message::Ping(b) | Message::Pong(b) => b,
            Message::Close(c) => c.map(|c| c.reason.into_bytes()).unwrap_or_default(),
        }
    }

    /// A data message of `kind` whose payload the codec has validated (UTF-8 for text).
    #[inline]
    pub(crate) fn from_data(kind: MessageKind, data: Bytes) -> Self {
        match kind {
            MessageKind::Text => Message::Text(Utf8Bytes::from_validated(data)),
            MessageKind::Binary => Message::Binary(data),
        }
    }
}

/// A text message.
impl From<Utf8Bytes> for Message {
    fn from(text: Utf8Bytes) -> Self {
        Message::Text(text)
    }
}

/// A text message, without a copy.
impl From<String> for Message {
    fn from(text: String) -> Self {
        Message::Text(text.into())
    }
}

/// A text message (the text is copied).
impl From<&str> for Message {
    fn from(text: &str) -> Self {
        Message::Text(text.into())
    }
}

/// A binary message.
impl From<Bytes> for Message {
    fn from(data: Bytes) -> Self {
        Message::Binary(data)
    }
}

/// A binary message, without a copy.
impl From<Vec<u8>> for Message {
    fn from(data: Vec<u8>) -> Self {
        Message::Binary(data.into())
    }
}

/// A binary message (the bytes are copied).
impl From<&[u8]> for Message {
    fn from(data: &[u8]) -> Self {
        Message::Binary(Bytes::copy_from_slice(data))
    }
}

/// A close frame with this code and reason.
impl From<CloseFrame> for Message {
    fn from(frame: CloseFrame) -> Self {
        Message::Close(Some(frame))
    }
}

/// The payload: [`Message::into_data`].
impl From<Message> for Bytes {
    fn from(msg: Message) -> Self {
        msg.into_data()
    }
}

/// A copy: [`MessageRef::to_message`].
impl From<MessageRef<'_>> for Message {
    fn from(msg: MessageRef<'_>) -> Self {
        msg.to_message()
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
    #[inline]
    pub(crate) fn from_data(kind: MessageKind, data: &'a [u8]) -> Self {
        match kind {
            MessageKind::Text => {
                debug_assert!(core::str::from_utf8(data).is_ok(), "text was validated");
                // Validated as it arrived; checked again because this crate forbids
                // `unsafe`, with the SIMD kernels (std's check of non-ASCII text runs at a
                // fraction of their speed).
                MessageRef::Text(rapidws_simd::utf8::from_utf8(data).unwrap_or_default())
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

    kind_tests!(MessageRef);

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

feature_links! {
    [
        "deflate" "[`DeflateConfig::min_size`]": "crate::deflate::DeflateConfig::min_size", "deflate/struct.DeflateConfig.html#structfield.min_size";
        "deflate" "[`DeflateConfig::predict_incompressible`]": "crate::deflate::DeflateConfig::predict_incompressible", "deflate/struct.DeflateConfig.html#structfield.predict_incompressible";
        "deflate" "[`DeflateConfig::skip_if_not_smaller`]": "crate::deflate::DeflateConfig::skip_if_not_smaller", "deflate/struct.DeflateConfig.html#structfield.skip_if_not_smaller";
    ]
    /// Whether one data message is compressed, on a connection that agreed
    /// permessage-deflate (RFC 7692). Given to the `*_with` send calls
    /// ([`Connection::send_with`](crate::connection::Connection::send_with),
    /// [`Connection::begin_message_with`](crate::connection::Connection::begin_message_with), the IO
    /// layers' `send_with`, `feed_with`, `try_send_with`, `begin_message_with` and
    /// `send_from_with`) and held by a prepared message
    /// ([`PreparedMessage::with_compression`](crate::connection::PreparedMessage::with_compression));
    /// the plain calls use [`Auto`](Compression::Auto).
    ///
    /// [`Auto`](Compression::Auto) leaves the choice to the connection's settings: a whole
    /// message goes uncompressed when it is shorter than [`DeflateConfig::min_size`], looks
    /// incompressible ([`DeflateConfig::predict_incompressible`]) or, with
    /// [`DeflateConfig::skip_if_not_smaller`], did not shrink; a message sent as fragments
    /// is compressed. [`Never`](Compression::Never) and [`Always`](Compression::Always)
    /// override those settings for one message.
    ///
    /// Without permessage-deflate every message goes uncompressed, whatever this says;
    /// control frames are never compressed (RFC 7692 6.1).
    ///
    /// The two ends' compression contexts stay in step with or without context takeover: a
    /// message sent uncompressed never passes through our compressor, and the peer's
    /// inflater never sees it either (RFC 7692 6.1 lets any message go uncompressed), so the
    /// next compressed message inflates at the peer as if the uncompressed one had not been
    /// sent.
    ///
    /// ```
    /// use rapidws::Compression;
    ///
    /// assert_eq!(Compression::default(), Compression::Auto);
    /// ```
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    #[non_exhaustive]
    pub enum Compression {
        /// The connection's settings decide (see [`Compression`]).
        #[default]
        Auto,
        /// Uncompressed: RSV1 clear, the payload as it is. For data that is already
        /// compressed or encrypted, and for small latency-critical messages: costs no
        /// compressor time, and leaves the compressor's history as it was.
        Never,
        /// Compressed, whatever its size or contents: the size threshold, the
        /// incompressibility test and `skip_if_not_smaller` do not apply. A direction agreed
        /// with an 8-bit window, with which zlib cannot compress, still sends whole messages
        /// uncompressed.
        Always,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_become_text_and_bytes_become_binary() {
        let from_string = Message::from(String::from("hi"));
        let from_str = Message::from("hi");
        let from_utf8 = Message::from(Utf8Bytes::from_static("hi"));
        for m in [&from_string, &from_str, &from_utf8] {
            assert_eq!(m, &Message::text("hi"));
            assert!(m.is_text() && m.is_data() && !m.is_binary());
        }
        let from_vec = Message::from(vec![1u8, 2]);
        let from_slice = Message::from(&[1u8, 2][..]);
        let from_bytes = Message::from(Bytes::from_static(&[1, 2]));
        for m in [&from_vec, &from_slice, &from_bytes] {
            assert_eq!(m, &Message::binary(vec![1u8, 2]));
            assert!(m.is_binary() && m.is_data() && !m.is_text());
        }
        let close = Message::from(CloseFrame::new(CloseCode::NORMAL, "bye"));
        assert_eq!(
            close,
            Message::Close(Some(CloseFrame::new(1000, Utf8Bytes::from("bye"))))
        );
    }

    #[test]
    fn a_string_or_vec_is_moved_into_the_message_without_a_copy() {
        let s = String::from("moved");
        let ptr = s.as_ptr();
        let Message::Text(t) = Message::from(s) else {
            panic!("text expected")
        };
        assert_eq!(t.as_ptr(), ptr);
        let v = vec![7u8; 16];
        let ptr = v.as_ptr();
        assert_eq!(Message::from(v).into_data().as_ptr(), ptr);
    }

    #[test]
    fn each_kind_answers_exactly_one_predicate() {
        let all = [
            Message::text("t"),
            Message::binary(vec![1u8]),
            Message::Ping(Bytes::from_static(b"p")),
            Message::Pong(Bytes::from_static(b"q")),
            Message::Close(None),
        ];
        for (i, m) in all.iter().enumerate() {
            let answers = [
                m.is_text(),
                m.is_binary(),
                m.is_ping(),
                m.is_pong(),
                m.is_close(),
            ];
            let expected: Vec<bool> = (0..5).map(|j| j == i).collect();
            assert_eq!(answers.to_vec(), expected, "{m:?}");
            let r = match m {
                Message::Text(t) => MessageRef::Text(t.as_str()),
                Message::Binary(b) => MessageRef::Binary(b),
                Message::Ping(b) => MessageRef::Ping(b),
                Message::Pong(b) => MessageRef::Pong(b),
                Message::Close(_) => MessageRef::Close(None),
            };
            let answers = [
                r.is_text(),
                r.is_binary(),
                r.is_ping(),
                r.is_pong(),
                r.is_close(),
            ];
            assert_eq!(answers.to_vec(), expected, "{r:?}");
            assert_eq!(&Message::from(r), m);
        }
    }

    #[test]
    fn to_text_reads_every_payload_as_tungstenite_does() {
        assert_eq!(Message::text("x").to_text(), Ok("x"));
        assert_eq!(Message::binary(&b"x"[..]).to_text(), Ok("x"));
        assert_eq!(Message::Ping(Bytes::from_static(b"p")).to_text(), Ok("p"));
        assert_eq!(Message::Pong(Bytes::from_static(b"q")).to_text(), Ok("q"));
        assert!(Message::binary(vec![0xc3]).to_text().is_err());
        let close = Message::Close(Some(CloseFrame::new(1000, "done")));
        assert_eq!(close.to_text(), Ok("done"));
        assert_eq!(Message::Close(None).to_text(), Ok(""));
    }

    #[test]
    fn as_text_is_only_for_text_and_as_bytes_for_every_payload() {
        assert_eq!(Message::text("x").as_text(), Some("x"));
        assert_eq!(Message::binary(&b"x"[..]).as_text(), None);
        assert_eq!(Message::Ping(Bytes::from_static(b"x")).as_text(), None);
        assert_eq!(Message::binary(&b"ab"[..]).as_bytes(), b"ab");
        let close = Message::Close(Some(CloseFrame::new(1001, "away")));
        assert_eq!(close.as_bytes(), b"away");
        assert_eq!(Message::Close(None).as_bytes(), b"");
    }

    #[test]
    fn into_text_validates_other_payloads_and_reports_where_they_break() {
        assert_eq!(Message::text("a").into_text().unwrap(), "a");
        assert_eq!(
            Message::binary(&b"{\"a\":1}"[..]).into_text().unwrap(),
            "{\"a\":1}"
        );
        assert_eq!(
            Message::Pong(Bytes::from_static(b"ok"))
                .into_text()
                .unwrap(),
            "ok"
        );
        let close = Message::Close(Some(CloseFrame::new(1000, "done")));
        assert_eq!(close.into_text().unwrap(), "done");
        assert_eq!(Message::Close(None).into_text().unwrap(), "");
        let err = Message::binary(&b"ok\xe2\x82"[..]).into_text().unwrap_err();
        assert_eq!((err.valid_up_to(), err.error_len()), (2, None));
        assert_eq!(err.as_bytes(), b"ok\xe2\x82");
        assert!(err.to_string().contains("index 2"), "{err}");
    }

    #[test]
    fn into_data_and_into_bytes_hand_the_payload_over() {
        let data = Bytes::from_static(b"payload");
        assert_eq!(Message::Binary(data.clone()).into_data(), data);
        assert_eq!(Bytes::from(Message::text("payload")), data);
        assert_eq!(Message::Ping(data.clone()).into_data(), data);
        let close = Message::Close(Some(CloseFrame::new(1000, "payload")));
        assert_eq!(Bytes::from(close), data);
        assert!(Message::Close(None).into_data().is_empty());
    }

    #[test]
    fn try_from_bytes_gives_the_position_and_length_of_the_bad_sequence() {
        let ok = Utf8Bytes::try_from_bytes(Bytes::from_static("h\u{e9}llo".as_bytes())).unwrap();
        assert_eq!(ok, "h\u{e9}llo");
        assert_eq!(ok, String::from("h\u{e9}llo"));
        assert_eq!(String::from("h\u{e9}llo"), ok);
        assert_eq!("h\u{e9}llo", ok);
        // Cases with std's answer as the oracle: a bad byte, an overlong form, a surrogate,
        // a truncated sequence at the end.
        for bad in [
            &b"ab\xffcd"[..],
            b"\xc0\x80",
            b"x\xed\xa0\x80y",
            b"abc\xf0\x9f\x98",
        ] {
            let std_err = std::str::from_utf8(bad).unwrap_err();
            let err = Utf8Bytes::try_from_bytes(Bytes::copy_from_slice(bad)).unwrap_err();
            assert_eq!(err.valid_up_to(), std_err.valid_up_to(), "{bad:?}");
            assert_eq!(err.error_len(), std_err.error_len(), "{bad:?}");
            assert_eq!(err.into_bytes(), bad);
        }
    }

    #[test]
    fn try_from_bytes_and_vec_validate_without_copying() {
        let v = b"vec text".to_vec();
        let ptr = v.as_ptr();
        let t = Utf8Bytes::try_from(v).unwrap();
        assert_eq!((t.as_str(), t.as_ptr()), ("vec text", ptr));
        let b = Bytes::from_static(b"static");
        assert_eq!(Utf8Bytes::try_from(b).unwrap(), "static");
        let err = Utf8Bytes::try_from(vec![b'a', 0x80]).unwrap_err();
        assert_eq!((err.valid_up_to(), err.error_len()), (1, Some(1)));
        let err = Utf8Bytes::try_from(Bytes::from_static(b"\x80")).unwrap_err();
        assert_eq!(err.into_bytes(), &b"\x80"[..]);
    }
}
