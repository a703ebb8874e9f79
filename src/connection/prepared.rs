//! Prepared messages: encode a broadcast once, send it to many connections.
//!
//! A [`PreparedMessage`] holds the ready-to-write frame of one data message. Server frames
//! are not masked (RFC 6455 5.1), so one buffer serves every connection: sending it queues
//! a reference-counted [`Bytes`] clone, with no copy and no allocation per recipient.
//!
//! With permessage-deflate, the message also has a compressed frame, made on first need
//! (once per window size in use) by a fresh compressor, so it refers to no earlier message
//! and every peer can inflate it whatever it holds: with or without context takeover. A
//! connection that takes over its compression context is then kept consistent with the
//! peer's window: its compressor is primed with the message's bytes before it next
//! compresses a message of its own (see [`crate::deflate`]).
//!
//! ```
//! use rapidws::MessageKind;
//! use rapidws::PreparedMessage;
//!
//! // Serialize straight into the frame buffer (here with `write!`; `serde_json::to_writer`
//! // works the same way, since the writer implements `std::io::Write`).
//! let msg = PreparedMessage::build(MessageKind::Text, |w| {
//!     use std::io::Write;
//!     write!(w, r#"{{"tick":{}}}"#, 42)
//! })
//! .unwrap();
//! assert_eq!(&msg.payload()[..], br#"{"tick":42}"#);
//! assert_eq!(msg.frame()[0], 0x81); // FIN + text, unmasked, uncompressed
//! ```
//!
//! Send it with [`Connection::send_prepared`], or with the tokio layer's
//! `send_prepared`/`try_send_prepared` on a `WebSocket` or `WriteHalf`.

use std::convert::Infallible;
use std::fmt;
use std::io;
use std::sync::Arc;
#[cfg(feature = "deflate")]
use std::sync::OnceLock;

use bytes::{Buf, Bytes};

use super::{Connection, SendError};
use crate::codec::Role;
use crate::codec::{MessageKind, encode_header};
use crate::message::Compression;

/// Largest unmasked frame header: 2 bytes and an 8-byte extended length.
const HEADROOM: usize = 10;

/// The compression level a prepared message is deflated with unless set otherwise: it is
/// compressed once for all its recipients, so a higher level than per-connection messages
/// (level 1 by default) is cheap.
pub const DEFAULT_PREPARED_LEVEL: i32 = 6;

/// A data message encoded once for many connections. Cloning is a reference-count
/// increment; the type is `Send + Sync`.
#[derive(Clone)]
pub struct PreparedMessage {
    inner: Arc<Inner>,
}

#[derive(Clone)]
struct Inner {
    kind: MessageKind,
    /// The uncompressed frame: header then payload.
    frame: Bytes,
    header_len: usize,
    /// Whether connections with permessage-deflate send it compressed.
    compression: Compression,
    #[cfg(feature = "deflate")]
    level: i32,
    /// Compressed frames by window bits 9..=15, made on first need; `None` when the
    /// compressor failed (the message then goes uncompressed).
    #[cfg(feature = "deflate")]
    compressed: [OnceLock<Option<Bytes>>; 7],
}

impl fmt::Debug for PreparedMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PreparedMessage")
            .field("kind", &self.inner.kind)
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

/// Why a message could not be prepared.
#[derive(Debug)]
#[non_exhaustive]
pub enum PrepareError<E = Infallible> {
    /// A text message's payload is not UTF-8 (RFC 6455 5.6: text data MUST be UTF-8).
    InvalidUtf8,
    /// The closure given to [`PreparedMessage::build`] failed.
    Write(E),
}

impl<E: fmt::Display> fmt::Display for PrepareError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrepareError::InvalidUtf8 => f.write_str("text message is not UTF-8"),
            PrepareError::Write(e) => write!(f, "writing the payload failed: {e}"),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for PrepareError<E> {}

/// The append-only writer [`PreparedMessage::build`] hands to its closure: bytes written
/// land directly in the frame buffer, after room left for the header.
#[derive(Debug)]
pub struct PayloadWriter<'a> {
    buf: &'a mut Vec<u8>,
}

impl PayloadWriter<'_> {
    /// Appends `data` to the payload.
    pub fn extend_from_slice(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// Reserves room for `additional` more payload bytes.
    pub fn reserve(&mut self, additional: usize) {
        self.buf.reserve(additional);
    }

    /// Payload bytes written so far.
    pub fn len(&self) -> usize {
        self.buf.len() - HEADROOM
    }

    /// Whether nothing was written yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl io::Write for PayloadWriter<'_> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        self.buf.extend_from_slice(data);
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl fmt::Write for PayloadWriter<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.buf.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

impl PreparedMessage {
    /// Prepares a `kind` message with a copy of `payload`.
    /// [`PrepareError::InvalidUtf8`] when a text payload is not UTF-8.
    pub fn new(kind: MessageKind, payload: &[u8]) -> Result<Self, PrepareError> {
        Self::build(kind, |w| {
            w.extend_from_slice(payload);
            Ok(())
        })
    }

    /// Prepares a text message (one copy, into the frame buffer).
    pub fn text(text: &str) -> Self {
        Self::finish(MessageKind::Text, Self::buffer(text.len()), text.as_bytes())
    }

    /// Prepares a binary message (one copy, into the frame buffer).
    pub fn binary(data: &[u8]) -> Self {
        Self::finish(MessageKind::Binary, Self::buffer(data.len()), data)
    }

    fn buffer(payload_len: usize) -> Vec<u8> {
        let mut buf = Vec::with_capacity(HEADROOM + payload_len);
        buf.resize(HEADROOM, 0);
        buf
    }

    fn finish(kind: MessageKind, mut buf: Vec<u8>, append: &[u8]) -> Self {
        buf.extend_from_slice(append);
        let payload_len = buf.len() - HEADROOM;
        let header = encode_header(true, false, kind.opcode(), None, payload_len as u64);
        let header_len = header.len();
        // The header goes right before the payload, in the room left for it.
        buf[HEADROOM - header_len..HEADROOM].copy_from_slice(header.as_slice());
        let mut frame = Bytes::from(buf);
        frame.advance(HEADROOM - header_len);
        PreparedMessage {
            inner: Arc::new(Inner {
                kind,
                frame,
                header_len,
                compression: Compression::Auto,
                #[cfg(feature = "deflate")]
                level: DEFAULT_PREPARED_LEVEL,
                #[cfg(feature = "deflate")]
                compressed: Default::default(),
            }),
        }
    }

    /// Prepares a `kind` message whose payload `write` writes straight into the frame
    /// buffer (no intermediate copy); a text payload is then checked to be UTF-8.
    ///
    /// ```
    /// # use rapidws::{MessageKind, PreparedMessage};
    /// let msg = PreparedMessage::build(MessageKind::Binary, |w| {
    ///     w.extend_from_slice(&[1, 2, 3]);
    ///     Ok::<_, std::io::Error>(())
    /// })
    /// .unwrap();
    /// assert_eq!(&msg.frame()[..], &[0x82, 3, 1, 2, 3]);
    /// ```
    pub fn build<E>(
        kind: MessageKind,
        write: impl FnOnce(&mut PayloadWriter<'_>) -> Result<(), E>,
    ) -> Result<Self, PrepareError<E>> {
        let mut buf = Self::buffer(0);
        write(&mut PayloadWriter { buf: &mut buf }).map_err(PrepareError::Write)?;
        // RFC 6455 5.6: "the 'Payload data' is text data encoded as UTF-8"; we never send
        // a text message the peer would have to fail with 1007.
        if kind == MessageKind::Text && rapidws_simd::utf8::validate(&buf[HEADROOM..]).is_err() {
            return Err(PrepareError::InvalidUtf8);
        }
        Ok(Self::finish(kind, buf, &[]))
    }

    /// Sets the level (0..=9) the compressed frames are made with; the default is
    /// [`DEFAULT_PREPARED_LEVEL`]. Call before sending (frames already made are dropped).
    #[cfg(feature = "deflate")]
    pub fn with_compression_level(mut self, level: i32) -> Self {
        let inner = Arc::make_mut(&mut self.inner);
        inner.level = level.clamp(0, 9);
        inner.compressed = Default::default();
        self
    }

    /// Sets whether connections that agreed permessage-deflate send this message
    /// compressed: [`Compression::Auto`] (the default) as each connection's settings say
    /// for a message of this size, and only when deflate makes it shorter;
    /// [`Compression::Never`] always the plain frame, RSV1 clear (no compressed frame is
    /// ever made); [`Compression::Always`] the compressed frame, however short the
    /// message. Either way every recipient can inflate its later messages, with or
    /// without context takeover (see [`Connection::send_prepared`]).
    ///
    /// ```
    /// use rapidws::{Compression, PreparedMessage};
    ///
    /// // A video chunk, already compressed: deflate would only spend time on it.
    /// let chunk = PreparedMessage::binary(&[0x47; 1316]).with_compression(Compression::Never);
    /// assert_eq!(chunk.compression(), Compression::Never);
    /// ```
    pub fn with_compression(mut self, compression: Compression) -> Self {
        Arc::make_mut(&mut self.inner).compression = compression;
        self
    }

    /// Whether connections with permessage-deflate send it compressed; see
    /// [`with_compression`](Self::with_compression).
    pub fn compression(&self) -> Compression {
        self.inner.compression
    }

    /// The message kind.
    pub fn kind(&self) -> MessageKind {
        self.inner.kind
    }

    /// The payload, uncompressed (a slice of the frame buffer, not a copy).
    pub fn payload(&self) -> Bytes {
        self.inner.frame.slice(self.inner.header_len..)
    }

    /// The payload length.
    pub fn len(&self) -> usize {
        self.inner.frame.len() - self.inner.header_len
    }

    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The uncompressed frame (header and payload), as written to every peer without
    /// permessage-deflate.
    pub fn frame(&self) -> &Bytes {
        &self.inner.frame
    }

    /// The compressed frame (RSV1 set) for peers whose inflater accepts a
    /// `window_bits` window (9..=15, clamped), compressed against an empty history. Made on
    /// the first call for each window size; `None` if the compressor failed.
    #[cfg(feature = "deflate")]
    pub fn compressed_frame(&self, window_bits: u8) -> Option<&Bytes> {
        let bits = window_bits.clamp(9, 15);
        self.inner.compressed[usize::from(bits - 9)]
            .get_or_init(|| self.compress(bits))
            .as_ref()
    }

    #[cfg(feature = "deflate")]
    fn compress(&self, bits: u8) -> Option<Bytes> {
        let payload = &self.inner.frame[self.inner.header_len..];
        // Header room in front, as for the plain frame; the compressed payload is at most
        // slightly longer than the plain one.
        let mut buf = Self::buffer(payload.len() / 2 + 64);
        crate::deflate::compressor::compress_standalone(
            payload,
            bits,
            self.inner.level,
            8,
            &mut buf,
        )
        .ok()?;
        let len = buf.len() - HEADROOM;
        // RFC 7692 6: RSV1 is set on the first frame of a compressed message.
        let header = encode_header(true, true, self.inner.kind.opcode(), None, len as u64);
        buf[HEADROOM - header.len()..HEADROOM].copy_from_slice(header.as_slice());
        let mut frame = Bytes::from(buf);
        frame.advance(HEADROOM - header.len());
        Some(frame)
    }
}

impl Connection {
    /// Sends a prepared message.
    ///
    /// A server queues the shared frame as-is (a [`Bytes`] clone: no copy, no
    /// allocation): the compressed one when permessage-deflate is on and the message's
    /// [`compression`](PreparedMessage::with_compression) says so (by default: this
    /// connection's policy compresses a message of this size, and deflate made it
    /// shorter), the plain one otherwise.
    /// After a compressed one, a connection that takes over its compression context
    /// primes its compressor with the message before its next own compressed message,
    /// so everything it sends stays decodable by the peer.
    ///
    /// A client must mask every frame with a fresh key (RFC 6455 5.3), so on a client this
    /// is the same as [`send`](Self::send) with the payload (copied, masked, compressed).
    ///
    /// Fails like `send`: after our close, or inside a fragmented message.
    pub fn send_prepared(&mut self, msg: &PreparedMessage) -> Result<(), SendError> {
        let compression = msg.inner.compression;
        if self.role() == Role::Client {
            return self.send_with(
                msg.kind(),
                &msg.inner.frame[msg.inner.header_len..],
                compression,
            );
        }
        #[cfg(feature = "deflate")]
        if let Some(bits) = self
            .deflate_mut()
            .and_then(|d| d.prepared_window_bits_with(msg.len(), compression))
            && let Some(frame) = msg.compressed_frame(bits)
            // Deflate did not help: the plain frame is as valid (an uncompressed message
            // never enters the peer's inflater window) and shorter. Unless compression
            // was asked for.
            && (frame.len() < msg.inner.frame.len() || compression == Compression::Always)
        {
            self.queue_raw_frame(frame.clone())?;
            if let Some(d) = self.deflate_mut() {
                d.prepared_sent(msg.payload());
            }
            return Ok(());
        }
        self.queue_raw_frame(msg.inner.frame.clone())
    }
}
