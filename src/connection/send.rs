//! Sending: messages, fragments, control frames and the close, framed (masked,
//! compressed) into the output queue (queue.rs), and the queue's face to the IO layers.

use std::io::IoSlice;
use std::time::Instant;

use bytes::Bytes;

use crate::codec::{
    CloseCode, HeaderBuf, MAX_CONTROL_PAYLOAD, MessageKind, OpCode, Role, encode_header, header_len,
};
#[cfg(feature = "deflate")]
use crate::deflate::PerMessageDeflate;

use super::queue::COALESCE_PAYLOAD_MAX;
use super::{Connection, SendError, Transmit};
use crate::message::{Compression, Message};

/// The least a new send arena holds: frames a little over the coalesce size share one;
/// a larger frame gets one of its own size (see [`Tx::queue_slice`]).
const SEND_ARENA: usize = 16 * 1024;

impl Connection {
    /// Slices worth handing to [`io_slices`](Self::io_slices) for one vectored write: a
    /// frame is one or two (header, payload), so this holds a burst of 128 replies, and
    /// a read of pipelined messages is answered in one write. Linux takes up to 1,024.
    pub const WRITE_SLICES: usize = 256;

    /// Fills `out` with the output not yet written, in the order it goes out (control
    /// frames at the next frame boundary, the rest in order), for one vectored write;
    /// returns how many slices were used (0: nothing to write). Report what the transport
    /// took with [`advance_output`](Self::advance_output).
    #[inline]
    pub fn io_slices<'a>(&'a self, out: &mut [IoSlice<'a>]) -> usize {
        self.out.io_slices(out)
    }

    /// Marks `n` bytes of [`io_slices`](Self::io_slices) as written.
    #[inline]
    pub fn advance_output(&mut self, n: usize) {
        self.out.advance(n);
        self.note_written(n);
    }

    /// The next frame to write, taken out of the queue (for writing frame by frame;
    /// [`io_slices`](Self::io_slices) writes many at once). Pings and pongs may pass
    /// queued data frames; everything else keeps its order.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        let t = self.out.pop();
        self.note_written(t.as_ref().map_or(0, |t| t.len()));
        t
    }

    /// True when there is output to write.
    #[inline]
    pub fn has_pending_output(&self) -> bool {
        !self.out.is_empty()
    }

    /// True when control frames (pongs, the close echo) wait to be written.
    #[inline]
    pub fn has_control_output(&self) -> bool {
        self.out.control_frames() > 0
    }

    /// Bytes of output not yet written.
    #[inline]
    pub fn pending_output_len(&self) -> usize {
        self.out.len()
    }

    /// Whether a message of `len` bytes fits under
    /// [`Config::send_queue_high_water`](super::Config::send_queue_high_water) now; an
    /// empty queue takes any one message.
    #[inline]
    pub fn has_room(&self, len: usize) -> bool {
        self.out.has_room(len, self.config.send_queue_high_water)
    }

    /// Appends all pending output to `out` (for tests and simple transports).
    pub fn write_pending(&mut self, out: &mut Vec<u8>) {
        while let Some(t) = self.poll_transmit() {
            out.extend_from_slice(t.header());
            out.extend_from_slice(t.payload());
        }
    }

    // ----- sending -----

    pub(super) fn check_open(&self) -> Result<(), SendError> {
        // RFC 6455 5.5.1: "After sending a Close frame, the application MUST NOT send any
        // more data frames."
        if self.close_queued || self.is_closed() || self.transport_lost {
            Err(SendError::Closed)
        } else {
            Ok(())
        }
    }

    /// Queues a whole message as one frame: copied, masked for clients, compressed when
    /// permessage-deflate is on and the policy says so. Take it with
    /// [`poll_transmit`](Self::poll_transmit).
    ///
    /// A `Text` payload is not checked here: it must be UTF-8, or the peer fails the
    /// connection with 1007 ([`send_text`](Self::send_text) takes a `&str`). No size
    /// limit applies on the sending side.
    ///
    /// # Errors
    ///
    /// Nothing is queued on error. [`SendError::Closed`] after our close or a failure;
    /// [`SendError::MessageInProgress`] between [`begin_message`](Self::begin_message)
    /// and [`end_message`](Self::end_message); [`SendError::Random`] when no masking key
    /// could be drawn (client); `SendError::Deflate` when compression failed.
    #[inline]
    pub fn send(&mut self, kind: MessageKind, payload: &[u8]) -> Result<(), SendError> {
        self.send_with(kind, payload, Compression::Auto)
    }

    /// [`send`](Self::send) with the choice, for this message, of whether it is
    /// compressed: [`Compression::Never`] sends it with RSV1 clear on a connection that
    /// agreed permessage-deflate, [`Compression::Always`] compresses it however short
    /// (see [`Compression`]). Without permessage-deflate it is `send`. Fails like `send`.
    ///
    #[cfg_attr(feature = "deflate", doc = "```")]
    #[cfg_attr(not(feature = "deflate"), doc = "```ignore")]
    /// use std::time::Instant;
    /// use rapidws::connection::{Config, Connection};
    /// use rapidws::deflate::{DeflateConfig, DeflateParams, PerMessageDeflate};
    /// use rapidws::{Compression, MessageKind, Role};
    ///
    /// let mut server = Connection::new(Role::Server, Config::default(), Instant::now());
    /// let settings = DeflateConfig::default();
    /// server.set_deflate(PerMessageDeflate::new(Role::Server, DeflateParams::default(), &settings));
    ///
    /// // Latency first: this one goes as it is, RSV1 clear.
    /// let quote = r#"{"bid":101.25,"ask":101.5}"#.repeat(8);
    /// server.send_with(MessageKind::Text, quote.as_bytes(), Compression::Never)?;
    /// let mut wire = Vec::new();
    /// server.write_pending(&mut wire);
    /// assert_eq!(wire[0], 0x81, "FIN + text, RSV1 clear");
    /// assert_eq!(&wire[4..], quote.as_bytes());
    ///
    /// // Under the 128-byte threshold, but compressed as asked: RSV1 set.
    /// server.send_with(MessageKind::Text, b"ping ping ping", Compression::Always)?;
    /// wire.clear();
    /// server.write_pending(&mut wire);
    /// assert_eq!(wire[0], 0xc1, "FIN + RSV1 + text");
    /// # Ok::<(), rapidws::connection::SendError>(())
    /// ```
    pub fn send_with(
        &mut self,
        kind: MessageKind,
        payload: &[u8],
        compression: Compression,
    ) -> Result<(), SendError> {
        if self.queue_compressed(kind, payload, compression)? {
            return Ok(());
        }
        self.queue_slice(true, false, kind.opcode(), payload)
    }

    /// What every whole message goes through first: refused on a closed connection or
    /// while a fragmented message is open; then, with permessage-deflate, compressed and
    /// queued when the policy says so (`Ok(true)`). `Ok(false)`: it goes out as it is.
    #[inline(always)]
    fn queue_compressed(
        &mut self,
        kind: MessageKind,
        payload: &[u8],
        compression: Compression,
    ) -> Result<bool, SendError> {
        self.check_open()?;
        if self.sending.is_some() {
            return Err(SendError::MessageInProgress);
        }
        #[cfg(feature = "deflate")]
        if self.deflate.is_some() {
            return self.compress_and_queue(kind, payload, compression);
        }
        #[cfg(not(feature = "deflate"))]
        let _ = (kind, payload, compression);
        Ok(false)
    }

    /// [`queue_compressed`](Self::queue_compressed) with permessage-deflate on: out of
    /// line, so that a connection without it sends through a few inlined checks.
    #[cfg(feature = "deflate")]
    #[inline(never)]
    fn compress_and_queue(
        &mut self,
        kind: MessageKind,
        payload: &[u8],
        compression: Compression,
    ) -> Result<bool, SendError> {
        if let Some(pmd) = self.deflate_mut() {
            let mut out = Vec::new();
            if pmd
                .compress_with(payload, &mut out, compression)
                .map_err(SendError::Deflate)?
            {
                self.queue_owned(true, true, kind.opcode(), out.into())?;
                return Ok(true);
            }
            // Sent uncompressed (short, incompressible, or asked so).
        }
        Ok(false)
    }

    /// Sends a text message.
    pub fn send_text(&mut self, text: &str) -> Result<(), SendError> {
        self.send(MessageKind::Text, text.as_bytes())
    }

    /// Sends a binary message.
    pub fn send_binary(&mut self, data: &[u8]) -> Result<(), SendError> {
        self.send(MessageKind::Binary, data)
    }

    /// [`send`](Self::send) for a payload the caller owns: a server sending it
    /// uncompressed (no permessage-deflate, or the sender policy leaves this message
    /// uncompressed) queues the `Bytes` itself, without a copy (a received message can be
    /// echoed this way). Clients copy it as `send` does (every frame gets its own mask).
    /// Fails like `send`.
    #[inline]
    pub fn send_bytes(&mut self, kind: MessageKind, payload: Bytes) -> Result<(), SendError> {
        self.send_bytes_with(kind, payload, Compression::Auto)
    }

    /// [`send_bytes`](Self::send_bytes) with the choice of whether this message is
    /// compressed (see [`send_with`](Self::send_with)). A server sending it uncompressed
    /// ([`Compression::Never`] among other cases) queues the `Bytes` itself. Fails like
    /// [`send`](Self::send).
    #[inline]
    pub fn send_bytes_with(
        &mut self,
        kind: MessageKind,
        payload: Bytes,
        compression: Compression,
    ) -> Result<(), SendError> {
        if self.role == Role::Client {
            return self.send_with(kind, &payload, compression);
        }
        if self.queue_compressed(kind, &payload, compression)? {
            return Ok(());
        }
        // Not compressed: the payload itself goes out.
        self.queue_owned(true, false, kind.opcode(), payload)
    }

    /// Queues a whole [`Message`]: text and binary as
    /// [`send_bytes_with`](Self::send_bytes_with) (a server's uncompressed payload is not
    /// copied), a ping or pong as [`ping`](Self::ping) and [`pong`](Self::pong), a close
    /// as [`close`](Self::close) at `now()` (no frame: 1000, no reason; the clock is read
    /// for a close only). Fails like those.
    ///
    /// A close frame with [`CloseCode::NO_STATUS`] (1005) and no reason, which
    /// [`close`](Self::close) refuses, sends a close frame without a status code: the frame
    /// a peer's code-less close is reported as (RFC 6455 7.1.5), so that echoing it sends
    /// it back as it came (what tungstenite-compatible layers need).
    #[inline]
    pub fn send_message(
        &mut self,
        msg: Message,
        compression: Compression,
        now: impl FnOnce() -> Instant,
    ) -> Result<(), SendError> {
        match msg {
            Message::Text(t) => {
                self.send_bytes_with(MessageKind::Text, t.into_bytes(), compression)
            }
            Message::Binary(b) => self.send_bytes_with(MessageKind::Binary, b, compression),
            Message::Ping(p) => self.ping(&p),
            Message::Pong(p) => self.pong(&p),
            Message::Close(Some(f)) if f.code == CloseCode::NO_STATUS && f.reason.is_empty() => {
                self.check_open()?;
                self.now = now();
                self.queue_close(None, "")
            }
            Message::Close(Some(f)) => self.close(now(), f.code, f.reason.as_str()),
            Message::Close(None) => self.close(now(), CloseCode::NORMAL, ""),
        }
    }

    // ----- a lone frame, written without the queue -----

    /// The header of a lone data frame that an IO layer may write straight to the
    /// transport, header and payload as two slices of one vectored write, without
    /// queueing it: a whole uncompressed message of `len` bytes from a server, when nothing
    /// is queued (so nothing has to go out first). `None` when the message is to be queued
    /// with [`send_bytes_with`](Self::send_bytes_with) instead (output waits, the client
    /// masks a copy, permessage-deflate is on), or refused: the same checks run there.
    ///
    /// Whatever the write does not take goes to the queue with
    /// [`lone_unwritten`](Self::lone_unwritten) before the layer waits, so the frame is
    /// owned by the connection from then on, exactly as a queued one.
    #[inline]
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn lone_header(&self, kind: MessageKind, len: usize) -> Option<HeaderBuf> {
        if !self.out.is_empty()
            || self.role == Role::Client
            || self.is_deflate()
            || self.sending.is_some()
            || self.check_open().is_err()
        {
            return None;
        }
        Some(encode_header(true, false, kind.opcode(), None, len as u64))
    }

    /// Queues what a write of the lone frame `header` + `payload` (from
    /// [`lone_header`](Self::lone_header)) left: its first `written` bytes went out, so the
    /// rest finishes before any control frame is written.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn lone_unwritten(&mut self, header: &HeaderBuf, payload: Bytes, written: usize) {
        if self.transport_lost {
            return;
        }
        self.out.push_rest(header.as_slice(), payload, written);
    }

    // ----- for prepared messages (prepared.rs) -----

    /// Queues a whole, already-encoded data frame as-is, refused as [`send`](Self::send)
    /// would refuse a message.
    pub(crate) fn queue_raw_frame(&mut self, frame: Bytes) -> Result<(), SendError> {
        self.check_open()?;
        if self.sending.is_some() {
            return Err(SendError::MessageInProgress);
        }
        self.out.push_encoded(frame);
        Ok(())
    }

    /// The permessage-deflate codec, when the extension is on.
    #[cfg(feature = "deflate")]
    pub(crate) fn deflate_mut(&mut self) -> Option<&mut PerMessageDeflate> {
        self.deflate.as_deref_mut().map(|d| &mut d.pmd)
    }

    /// Queues a ping, in order with the messages sent before and after it; it may be sent
    /// between the fragments of a fragmented message. (The connection's own control
    /// frames, the pongs it answers with and its keepalive pings, go out ahead of queued
    /// messages instead, so that a large message never delays them.)
    ///
    /// # Errors
    ///
    /// [`SendError::ControlTooLong`] for a payload over 125 bytes (RFC 6455 5.5);
    /// [`SendError::Closed`] after our close.
    pub fn ping(&mut self, payload: &[u8]) -> Result<(), SendError> {
        self.check_open()?;
        self.queue_app_control(OpCode::Ping, payload)
    }

    /// Sends an unsolicited pong (payload at most 125 bytes), in order like
    /// [`ping`](Self::ping).
    pub fn pong(&mut self, payload: &[u8]) -> Result<(), SendError> {
        self.check_open()?;
        self.queue_app_control(OpCode::Pong, payload)
    }

    /// An application's ping or pong: checked like any control frame, queued in order.
    fn queue_app_control(&mut self, opcode: OpCode, payload: &[u8]) -> Result<(), SendError> {
        // RFC 6455 5.5: "All control frames MUST have a payload length of 125 bytes or less".
        if payload.len() > MAX_CONTROL_PAYLOAD {
            return Err(SendError::ControlTooLong);
        }
        self.queue_slice(true, false, opcode, payload)
    }

    /// Starts (or, after the peer's close, completes) the close handshake with `code` and
    /// a reason of at most 123 bytes, at `now`: the wait for the peer's close
    /// ([`Config::close_timeout`](super::Config::close_timeout)) runs from `now`, however long the connection was quiet
    /// before. Later sends fail with [`SendError::Closed`].
    pub fn close(&mut self, now: Instant, code: CloseCode, reason: &str) -> Result<(), SendError> {
        self.check_open()?;
        self.now = now;
        // RFC 6455 7.4.1: 1004-1006 and 1015 "MUST NOT be set as a status code in a Close
        // control frame by an endpoint".
        if !code.is_valid_on_wire() {
            return Err(SendError::InvalidCloseCode(code));
        }
        self.queue_close(Some(code), reason)
    }

    pub(super) fn queue_close(
        &mut self,
        code: Option<CloseCode>,
        reason: &str,
    ) -> Result<(), SendError> {
        if 2 + reason.len() > MAX_CONTROL_PAYLOAD {
            return Err(SendError::ControlTooLong);
        }
        let mut payload = [0u8; MAX_CONTROL_PAYLOAD];
        let mut n = 0;
        if let Some(code) = code {
            payload[..2].copy_from_slice(&code.0.to_be_bytes());
            payload[2..2 + reason.len()].copy_from_slice(reason.as_bytes());
            n = 2 + reason.len();
        }
        // The close goes in order with the data frames: after everything sent before it.
        // A transport that failed takes nothing more; the close handshake still moves on.
        if !self.transport_lost {
            self.queue_slice(true, false, OpCode::Close, &payload[..n])?;
        }
        self.sending = None;
        let now = self.now;
        self.on_close_queued(now);
        Ok(())
    }

    /// Queues one of the connection's own control frames (an automatic pong, a keepalive
    /// ping): ahead of queued messages, at the next frame boundary.
    pub(super) fn queue_control(
        &mut self,
        opcode: OpCode,
        payload: &[u8],
    ) -> Result<(), SendError> {
        // RFC 6455 5.5: "All control frames MUST have a payload length of 125 bytes or less".
        if payload.len() > MAX_CONTROL_PAYLOAD {
            return Err(SendError::ControlTooLong);
        }
        if self.transport_lost {
            return Ok(());
        }
        let (header, mask) = self
            .encoder
            .header(true, false, opcode, payload.len() as u64)?;
        match mask {
            None => self.out.push_control(header.as_slice(), payload),
            Some(mut key) => {
                let mut masked = [0u8; MAX_CONTROL_PAYLOAD];
                let masked = &mut masked[..payload.len()];
                masked.copy_from_slice(payload);
                rapidws_simd::mask::apply(masked, &mut key);
                self.out.push_control(header.as_slice(), masked);
            }
        }
        Ok(())
    }

    /// Queues a frame whose payload the caller owns: as it is for a server (a large one
    /// is never copied), masked for a client (in place when the payload is ours alone).
    #[inline]
    pub(super) fn queue_owned(
        &mut self,
        fin: bool,
        rsv1: bool,
        opcode: OpCode,
        payload: Bytes,
    ) -> Result<(), SendError> {
        self.tx_with_rx().0.queue_owned(fin, rsv1, opcode, payload)
    }

    /// Queues a frame from a borrowed payload (see [`Tx::queue_slice`]).
    #[inline]
    pub(super) fn queue_slice(
        &mut self,
        fin: bool,
        rsv1: bool,
        opcode: OpCode,
        data: &[u8],
    ) -> Result<(), SendError> {
        self.tx_with_rx().0.queue_slice(fin, rsv1, opcode, data)
    }
}

impl Connection {
    /// The framing part of the connection ([`Tx`]), and apart from it the receive buffer
    /// (a reply lent from it is framed from there).
    #[inline(always)]
    pub(super) fn tx_with_rx(&mut self) -> (Tx<'_>, &bytes::BytesMut) {
        let tx = Tx {
            role: self.role,
            encoder: &mut self.encoder,
            out: &mut self.out,
            wbuf: &mut self.wbuf,
        };
        (tx, &self.rx)
    }
}

/// What framing a frame into the output queue takes of a connection: the encoder, the
/// queue and the send arena, borrowed apart from the rest (the replies of the handler
/// API's borrowed callback frame into them while the message is lent from the receive
/// buffer, replies.rs).
pub(super) struct Tx<'a> {
    pub(super) role: Role,
    pub(super) encoder: &'a mut crate::codec::Encoder,
    pub(super) out: &'a mut super::queue::OutQueue,
    pub(super) wbuf: &'a mut bytes::BytesMut,
}

impl Tx<'_> {
    /// [`Connection::queue_owned`]'s framing.
    #[inline]
    pub(super) fn queue_owned(
        self,
        fin: bool,
        rsv1: bool,
        opcode: OpCode,
        payload: Bytes,
    ) -> Result<(), SendError> {
        if payload.len() <= COALESCE_PAYLOAD_MAX || self.role == Role::Client {
            return self.queue_slice(fin, rsv1, opcode, &payload);
        }
        let (header, _) = self
            .encoder
            .header(fin, rsv1, opcode, payload.len() as u64)?;
        self.out.push_frame(header, payload);
        Ok(())
    }

    /// Queues a frame from a borrowed payload, copied (and masked, for a client) once: a
    /// small one straight into the queue's coalesce chunk, a large one into the send
    /// arena (one allocation amortized over the frames that fit in [`SEND_ARENA`]).
    #[inline]
    pub(super) fn queue_slice(
        self,
        fin: bool,
        rsv1: bool,
        opcode: OpCode,
        data: &[u8],
    ) -> Result<(), SendError> {
        let mask = self.encoder.key()?;
        let len = data.len() as u64;
        if data.len() <= COALESCE_PAYLOAD_MAX {
            let header = || encode_header(fin, rsv1, opcode, mask, len);
            let header_len = header_len(len, mask.is_some());
            self.out.push_copied(header_len, header, data, mask);
            return Ok(());
        }
        let header = encode_header(fin, rsv1, opcode, mask, len);
        if !self.wbuf.try_reclaim(data.len()) && self.wbuf.is_empty() {
            // A new arena sized for this frame, at least `SEND_ARENA`. `reserve` would
            // size it from the arena's history instead (up to 64 KiB, doubling while
            // the queued frames still share it): a connection streaming 16 KiB
            // fragments then held 64 KiB per frame in flight (10,000 streaming echoes,
            // heaptrack: 367 MB of arenas at the peak).
            *self.wbuf = bytes::BytesMut::with_capacity(data.len().max(SEND_ARENA));
        }
        self.wbuf.reserve(data.len());
        self.wbuf.extend_from_slice(data);
        if let Some(mut key) = mask {
            rapidws_simd::mask::apply(self.wbuf, &mut key);
        }
        let payload = self.wbuf.split().freeze();
        self.out.push_frame(header, payload);
        Ok(())
    }
}
