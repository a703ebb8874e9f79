//! Sending: messages, fragments, control frames and the close, framed (masked,
//! compressed) into the output queues.

use std::time::Instant;

use bytes::Bytes;

use crate::codec::Role;
use crate::codec::{CloseCode, MAX_CONTROL_PAYLOAD, MessageKind, OpCode};
#[cfg(feature = "deflate")]
use crate::deflate::PerMessageDeflate;

use super::{Connection, OutMessage, SendError, Transmit};

impl Connection {
    /// The next frame to write, if any. Pings and pongs may pass queued data frames;
    /// everything else keeps its order.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.control_out
            .pop_front()
            .or_else(|| self.data_out.pop_front())
    }

    /// True when [`poll_transmit`](Self::poll_transmit) has something.
    #[inline]
    pub fn has_pending_output(&self) -> bool {
        !self.control_out.is_empty() || !self.data_out.is_empty()
    }

    /// Bytes of the frames [`poll_transmit`](Self::poll_transmit) has still to give.
    #[cfg(feature = "tokio")]
    pub(crate) fn pending_output_len(&self) -> usize {
        self.control_out.iter().map(Transmit::len).sum::<usize>()
            + self.data_out.iter().map(Transmit::len).sum::<usize>()
    }

    /// Appends all pending output to `out` (for blocking IO and tests).
    pub fn write_pending(&mut self, out: &mut Vec<u8>) {
        while let Some(t) = self.poll_transmit() {
            out.extend_from_slice(t.header());
            out.extend_from_slice(t.payload());
        }
    }

    // ----- sending -----

    fn check_open(&self) -> Result<(), SendError> {
        // RFC 6455 5.5.1: "After sending a Close frame, the application MUST NOT send any
        // more data frames."
        if self.close_queued || self.is_closed() {
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
    pub fn send(&mut self, kind: MessageKind, payload: &[u8]) -> Result<(), SendError> {
        self.check_open()?;
        if self.sending.is_some() {
            return Err(SendError::MessageInProgress);
        }
        #[cfg(feature = "deflate")]
        if let Some(pmd) = self.deflate_mut() {
            let mut out = Vec::new();
            if pmd
                .compress(payload, &mut out)
                .map_err(SendError::Deflate)?
            {
                return self.queue_owned(true, true, kind.opcode(), out.into());
            }
        }
        let t = self.frame_slice(true, false, kind.opcode(), payload)?;
        self.data_out.push_back(t);
        Ok(())
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
    pub fn send_bytes(&mut self, kind: MessageKind, payload: Bytes) -> Result<(), SendError> {
        if self.role == Role::Client {
            return self.send(kind, &payload);
        }
        self.check_open()?;
        if self.sending.is_some() {
            return Err(SendError::MessageInProgress);
        }
        #[cfg(feature = "deflate")]
        if let Some(pmd) = self.deflate_mut() {
            let mut out = Vec::new();
            if pmd
                .compress(&payload, &mut out)
                .map_err(SendError::Deflate)?
            {
                return self.queue_owned(true, true, kind.opcode(), out.into());
            }
            // Sent uncompressed (short, or incompressible): the payload itself goes out.
        }
        self.queue_owned(true, false, kind.opcode(), payload)
    }

    // ----- for prepared messages (prepared.rs) -----

    /// Queues a whole, already-encoded data frame as-is, refused as [`send`](Self::send)
    /// would refuse a message.
    pub(crate) fn queue_raw_frame(&mut self, frame: Bytes) -> Result<(), SendError> {
        self.check_open()?;
        if self.sending.is_some() {
            return Err(SendError::MessageInProgress);
        }
        self.data_out.push_back(Transmit::raw(frame));
        Ok(())
    }

    /// The permessage-deflate codec, when the extension is on.
    #[cfg(feature = "deflate")]
    pub(crate) fn deflate_mut(&mut self) -> Option<&mut PerMessageDeflate> {
        self.deflate.as_deref_mut().map(|d| &mut d.pmd)
    }

    /// Starts a fragmented message; send its parts with [`send_chunk`](Self::send_chunk)
    /// and finish with [`end_message`](Self::end_message). Control frames may be sent in
    /// between; other messages may not. Nothing is queued until the first chunk.
    ///
    /// # Errors
    ///
    /// [`SendError::Closed`] after our close; [`SendError::MessageInProgress`] when a
    /// fragmented message is already open.
    pub fn begin_message(&mut self, kind: MessageKind) -> Result<(), SendError> {
        self.check_open()?;
        if self.sending.is_some() {
            return Err(SendError::MessageInProgress);
        }
        self.sending = Some(OutMessage {
            kind,
            first: true,
            #[cfg(feature = "deflate")]
            compressed: self.deflate.is_some(),
        });
        Ok(())
    }

    /// Sends one non-final fragment of the message begun with
    /// [`begin_message`](Self::begin_message). A text message's chunks may split a code
    /// point; the whole must be UTF-8. With permessage-deflate the chunk is compressed
    /// and a frame is queued only once the compressor has output.
    ///
    /// # Errors
    ///
    /// [`SendError::NoMessageInProgress`] without `begin_message`, and the errors of
    /// [`send`](Self::send) but `MessageInProgress`.
    pub fn send_chunk(&mut self, data: &[u8]) -> Result<(), SendError> {
        self.fragment(data, false)
    }

    /// Sends the final fragment (possibly empty) and ends the message; fails like
    /// [`send_chunk`](Self::send_chunk).
    pub fn end_message(&mut self, data: &[u8]) -> Result<(), SendError> {
        self.fragment(data, true)
    }

    fn fragment(&mut self, data: &[u8], fin: bool) -> Result<(), SendError> {
        self.check_open()?;
        let Some(mut m) = self.sending else {
            return Err(SendError::NoMessageInProgress);
        };
        // RFC 6455 5.4: the first fragment carries the opcode, the rest are continuations.
        let opcode = if m.first {
            m.kind.opcode()
        } else {
            OpCode::Continuation
        };
        #[cfg(feature = "deflate")]
        if m.compressed {
            let mut out = Vec::new();
            if let Some(pmd) = self.deflate_mut() {
                pmd.compress_chunk(data, fin, &mut out)
                    .map_err(SendError::Deflate)?;
            }
            if out.is_empty() && !fin {
                // Nothing flushed yet: no frame needed.
                return Ok(());
            }
            // RFC 7692 6: RSV1 on the first frame of a compressed message only.
            self.queue_owned(fin, m.first, opcode, Bytes::from(out))?;
        } else {
            let t = self.frame_slice(fin, false, opcode, data)?;
            self.data_out.push_back(t);
        }
        #[cfg(not(feature = "deflate"))]
        {
            let t = self.frame_slice(fin, false, opcode, data)?;
            self.data_out.push_back(t);
        }
        m.first = false;
        self.sending = if fin { None } else { Some(m) };
        Ok(())
    }

    /// Queues a ping. Control frames go out ahead of queued data frames, and may be sent
    /// in the middle of a fragmented message.
    ///
    /// # Errors
    ///
    /// [`SendError::ControlTooLong`] for a payload over 125 bytes (RFC 6455 5.5);
    /// [`SendError::Closed`] after our close.
    pub fn ping(&mut self, payload: &[u8]) -> Result<(), SendError> {
        self.check_open()?;
        self.queue_control(OpCode::Ping, Bytes::copy_from_slice(payload))
    }

    /// Sends an unsolicited pong (payload at most 125 bytes).
    pub fn pong(&mut self, payload: &[u8]) -> Result<(), SendError> {
        self.check_open()?;
        self.queue_control(OpCode::Pong, Bytes::copy_from_slice(payload))
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
        let mut payload = Vec::with_capacity(2 + reason.len());
        if let Some(code) = code {
            payload.extend_from_slice(&code.0.to_be_bytes());
            payload.extend_from_slice(reason.as_bytes());
        }
        let t = self.frame(true, false, OpCode::Close, payload.into())?;
        self.data_out.push_back(t);
        self.sending = None;
        let now = self.now;
        self.on_close_queued(now);
        Ok(())
    }

    pub(super) fn queue_control(
        &mut self,
        opcode: OpCode,
        payload: Bytes,
    ) -> Result<(), SendError> {
        // RFC 6455 5.5: "All control frames MUST have a payload length of 125 bytes or less".
        if payload.len() > MAX_CONTROL_PAYLOAD {
            return Err(SendError::ControlTooLong);
        }
        let t = self.frame(true, false, opcode, payload)?;
        self.control_out.push_back(t);
        Ok(())
    }

    fn queue_owned(
        &mut self,
        fin: bool,
        rsv1: bool,
        opcode: OpCode,
        payload: Bytes,
    ) -> Result<(), SendError> {
        let t = self.frame(fin, rsv1, opcode, payload)?;
        self.data_out.push_back(t);
        Ok(())
    }

    /// Builds a frame; for a client, masks the payload (copying it unless it is ours alone).
    fn frame(
        &mut self,
        fin: bool,
        rsv1: bool,
        opcode: OpCode,
        payload: Bytes,
    ) -> Result<Transmit, SendError> {
        let (header, mask) = self
            .encoder
            .header(fin, rsv1, opcode, payload.len() as u64)?;
        let payload = match mask {
            None => payload,
            Some(mut key) => match payload.try_into_mut() {
                Ok(mut owned) => {
                    rapidws_simd::mask::apply(&mut owned, &mut key);
                    owned.freeze()
                }
                Err(shared) => {
                    self.wbuf.reserve(shared.len());
                    self.wbuf.extend_from_slice(&shared);
                    rapidws_simd::mask::apply(&mut self.wbuf, &mut key);
                    self.wbuf.split().freeze()
                }
            },
        };
        Ok(Transmit::new(header, payload))
    }

    /// Builds a frame from a borrowed payload, copied (and masked, for a client) into the
    /// send arena: one allocation amortized over many frames, one pass over the bytes.
    fn frame_slice(
        &mut self,
        fin: bool,
        rsv1: bool,
        opcode: OpCode,
        data: &[u8],
    ) -> Result<Transmit, SendError> {
        let (header, mask) = self.encoder.header(fin, rsv1, opcode, data.len() as u64)?;
        self.wbuf.reserve(data.len());
        self.wbuf.extend_from_slice(data);
        if let Some(mut key) = mask {
            rapidws_simd::mask::apply(&mut self.wbuf, &mut key);
        }
        Ok(Transmit::new(header, self.wbuf.split().freeze()))
    }
}
