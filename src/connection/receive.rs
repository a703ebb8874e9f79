//! Receiving: bytes in, decoded frames, assembled and inflated messages, events out.

use bytes::{Buf, Bytes};

use std::ops::Range;

use crate::codec::MessageKind;
use crate::codec::{
    ControlKind, DataChunk, Decoded, Item, MAX_CONTROL_PAYLOAD, OpCode, Short, parse_close_payload,
};
use crate::message::{CloseFrame, Message, MessageRef};

use super::{Connection, Delivery, Error, Event, Loc, OwnedEvent, RETAIN_CAPACITY, Raw};

impl Connection {
    /// The next event, with payload borrowed until the next call; `None` when more bytes
    /// are needed or nothing more will come. An error is returned once, and closes the
    /// connection.
    pub fn poll_event(&mut self) -> Option<Result<Event<'_>, Error>> {
        Some(match self.next_raw()? {
            Ok(raw) => Ok(self.raw_event(&raw)),
            Err(e) => Err(e),
        })
    }

    /// [`poll_event`](Self::poll_event) with owned payloads. A single-frame message is
    /// handed over without a copy (split off the receive buffer).
    pub fn poll_event_owned(&mut self) -> Option<Result<OwnedEvent, Error>> {
        Some(match self.next_raw()? {
            Ok(raw) => Ok(self.raw_owned(raw)),
            Err(e) => Err(e),
        })
    }

    /// The next message as an application sees it, owned: text, binary, a ping or pong
    /// (already answered), or the peer's close (already echoed); `None` when more bytes are
    /// needed or nothing more will come. An error is returned once, and closes the
    /// connection.
    ///
    /// A message that arrived in one frame is handed over without a copy (split off the
    /// receive buffer). With [`Delivery::Chunks`] the chunks of a message are gathered
    /// into one buffer first: use [`poll_event_owned`](Self::poll_event_owned) to take
    /// them as they arrive instead.
    pub fn poll_message(&mut self) -> Option<Result<Message, Error>> {
        Some(match self.next_whole()? {
            Ok(Raw::Data { kind, loc, .. }) => Ok(Message::from_data(kind, self.take(loc))),
            Ok(raw) => Ok(self.raw_owned(raw).into_message()),
            Err(e) => Err(e),
        })
    }

    /// [`poll_message`](Self::poll_message), borrowed: the message is lent from the
    /// connection's buffers until the next call on it, with no copy and no allocation
    /// once the buffers have grown to the message size.
    pub fn poll_message_ref(&mut self) -> Option<Result<MessageRef<'_>, Error>> {
        Some(match self.next_whole()? {
            Ok(raw) => Ok(self.raw_ref(&raw)),
            Err(e) => Err(e),
        })
    }

    /// For the IO layers, which decide after polling how to hand a message over: the next
    /// event as positions, valid until the next call that takes `&mut self`; whole
    /// messages ([`next_whole`](Self::next_whole)) when `whole`, else every event as it
    /// comes.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    #[inline]
    pub(crate) fn poll_raw(&mut self, whole: bool) -> Option<Result<Raw, Error>> {
        if self.nothing_to_poll() {
            return None;
        }
        if whole {
            self.next_whole()
        } else {
            self.next_raw()
        }
    }

    /// Whether an event poll would find nothing and change nothing: no bytes past a held
    /// frame to decode, nothing lent to release, no failure or end of input to report.
    /// An IO layer polls once before every read, and most of those polls find the buffer
    /// empty: this answers them without the full poll.
    #[inline]
    fn nothing_to_poll(&self) -> bool {
        self.rx_read + self.held == self.rx.len()
            && self.rx_pending == 0
            && !self.msg_delivered
            && !self.input_eof
            && (self.failure_reported || self.failure.is_none())
            && !(self.rx.is_empty() && self.rx.capacity() > RETAIN_CAPACITY)
            && self.stall.is_none()
    }

    /// The message `raw` (from [`poll_raw`](Self::poll_raw)), taken.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    #[inline]
    pub(crate) fn take_message(&mut self, raw: Raw) -> Message {
        match raw {
            Raw::Data { kind, loc, .. } => Message::from_data(kind, self.take(loc)),
            raw => self.raw_owned(raw).into_message(),
        }
    }

    /// The message `raw` (from [`poll_raw`](Self::poll_raw)), borrowed.
    pub(crate) fn raw_ref(&self, raw: &Raw) -> MessageRef<'_> {
        match raw {
            Raw::Data { kind, loc, .. } => MessageRef::from_data(*kind, self.slice(loc)),
            raw => self
                .raw_event(raw)
                .message_ref()
                .unwrap_or(MessageRef::Binary(&[])),
        }
    }

    /// The next event with the chunks of a message ([`Delivery::Chunks`]) gathered into
    /// the message buffer: whole messages, pings, pongs and the close.
    #[inline]
    pub(super) fn next_whole(&mut self) -> Option<Result<Raw, Error>> {
        loop {
            let raw = match self.next_raw()? {
                Ok(raw) => raw,
                Err(e) => return Some(Err(e)),
            };
            let Raw::Data { kind, loc, fin, .. } = &raw else {
                return Some(Ok(raw));
            };
            if self.config.delivery == Delivery::Whole {
                return Some(Ok(raw));
            }
            let (kind, fin) = (*kind, *fin);
            let len = match loc {
                Loc::Rx(r) => r.len(),
                #[cfg(feature = "deflate")]
                Loc::Scratch => self.deflate.as_deref().map_or(0, |d| d.scratch.len()),
                Loc::Msg => 0,
            };
            if let Err(e) = self.charge_partial(len) {
                return Some(Err(self.fail_now(e)));
            }
            // In chunk delivery the chunks are lent from the receive buffer or, inflated,
            // from the scratch buffer; the message buffer is free to gather them.
            match loc {
                Loc::Rx(r) => self.msg.extend_from_slice(&self.rx[r.clone()]),
                #[cfg(feature = "deflate")]
                Loc::Scratch => {
                    if let Some(d) = self.deflate.as_deref() {
                        self.msg.extend_from_slice(&d.scratch);
                    }
                }
                Loc::Msg => {}
            }
            if fin {
                self.msg_delivered = true;
                let _ = self.charge_partial(0);
                return Some(Ok(Raw::whole(kind, Loc::Msg)));
            }
        }
    }

    /// The event `raw` (from [`poll_raw`](Self::poll_raw)) borrowed.
    pub(crate) fn raw_event(&self, raw: &Raw) -> Event<'_> {
        match raw {
            Raw::Data { kind, loc, .. } if self.config.delivery == Delivery::Whole => {
                Event::Message(MessageRef::from_data(*kind, self.slice(loc)))
            }
            &Raw::Data {
                kind,
                ref loc,
                first,
                fin,
            } => Event::Chunk {
                kind,
                data: self.slice(loc),
                first,
                fin,
            },
            Raw::Ping(r) => Event::Ping(&self.rx[r.clone()]),
            Raw::Pong(r) => Event::Pong(&self.rx[r.clone()]),
            Raw::Close(r) => Event::Close(parse_close_payload(&self.rx[r.clone()]).ok().flatten()),
        }
    }

    /// The event `raw` (from [`poll_raw`](Self::poll_raw)) owned.
    pub(crate) fn raw_owned(&mut self, raw: Raw) -> OwnedEvent {
        match raw {
            Raw::Data {
                kind,
                loc,
                first,
                fin,
            } => {
                let data = self.take(loc);
                match self.config.delivery {
                    Delivery::Whole => OwnedEvent::Message { kind, data },
                    Delivery::Chunks => OwnedEvent::Chunk {
                        kind,
                        data,
                        first,
                        fin,
                    },
                }
            }
            Raw::Ping(r) => OwnedEvent::Ping(self.take(Loc::Rx(r))),
            Raw::Pong(r) => OwnedEvent::Pong(self.take(Loc::Rx(r))),
            Raw::Close(r) => OwnedEvent::Close(
                parse_close_payload(&self.rx[r])
                    .ok()
                    .flatten()
                    .map(|(code, reason)| CloseFrame::new(code, reason)),
            ),
        }
    }

    fn slice(&self, loc: &Loc) -> &[u8] {
        match loc {
            Loc::Rx(r) => &self.rx[r.clone()],
            Loc::Msg => &self.msg,
            #[cfg(feature = "deflate")]
            Loc::Scratch => self.deflate.as_ref().map_or(&[], |d| &d.scratch[..]),
        }
    }

    #[inline]
    fn take(&mut self, loc: Loc) -> Bytes {
        match loc {
            Loc::Rx(r) => {
                // The frame leaves the buffer; its payload is cut out of it in place (no
                // second handle, as `Bytes::slice` would make). The header is skipped on
                // the frozen handle: `Bytes::advance` moves a pointer, where
                // `BytesMut::advance` is a call that first asks how the buffer is shared.
                let frame_len = self.rx_pending;
                let mut frame = self.rx.split_to(self.rx_read + frame_len);
                self.rx_shared = true;
                self.last_frame = frame_len.min(u32::MAX as usize) as u32;
                self.rx_pending = 0;
                self.rx_read = 0;
                frame.truncate(r.end);
                self.detach_after_large(frame_len);
                let mut payload = frame.freeze();
                payload.advance(r.start);
                payload
            }
            Loc::Msg => {
                self.msg_delivered = false;
                Bytes::from(core::mem::take(&mut self.msg))
            }
            #[cfg(feature = "deflate")]
            Loc::Scratch => Bytes::copy_from_slice(self.slice(&Loc::Scratch)),
        }
    }

    #[inline]
    fn next_raw(&mut self) -> Option<Result<Raw, Error>> {
        self.release();
        if let Some(e) = self.report_failure() {
            return Some(Err(e));
        }
        if self.input_done() {
            // Nothing more is delivered; the transport's end after the peer's close (with
            // `auto_close` off, ours not sent yet) still ends the connection.
            return self.end_of_input().map(Err);
        }
        if self.stall.is_some()
            && let Some(r) = self.resume()
        {
            return r;
        }
        if self.rx_read + self.held >= self.rx.len() {
            if self.rx_read + self.held > self.rx.len() {
                // The buffer was replaced through `recv_buffer` against its contract;
                // forget the held frame rather than index past the end.
                self.held = 0;
                self.rx_read = 0;
            }
            // Nothing new to decode (the IO layer asks once more before every read).
            return self.end_of_input().map(Err);
        }
        // The usual frame, a whole message, decided and lent on a path of its own: its
        // result stays in registers, where joined with the general loop's `Decoded` it
        // would go through memory (callgrind, firehose `recv` at 64 B: 12 instructions
        // fewer a message, a 16 B echo 40).
        let at = self.rx_read + self.held;
        match self.decoder.decode_short(&mut self.rx[at..]) {
            Some(Ok(short)) => {
                if self.config.delivery == Delivery::Whole {
                    let (kind, payload) = self.lend_short(at, short);
                    return Some(Ok(Raw::whole(kind, Loc::Rx(payload))));
                }
                // Delivered in chunks: the general path.
                if let Some(r) = self.after_decode(short.into_decoded()) {
                    return r;
                }
            }
            Some(Err(e)) => return Some(Err(self.fail_now(Error::Protocol(e)))),
            None => {}
        }
        self.decode_loop()
    }

    /// The whole message `short`, decoded at `at` in the receive buffer, taken as the
    /// next event: a frame's progress, no message open, its bytes consumed on the next
    /// poll. Its kind and where it lies in the buffer.
    #[inline(always)]
    fn lend_short(&mut self, at: usize, short: Short) -> (MessageKind, Range<usize>) {
        self.note_frame();
        self.timers.message_since = None;
        self.rx_pending = short.payload.end;
        (short.kind, short.payload.start + at..short.payload.end + at)
    }

    /// The next message when it is the usual one, a whole message already in the
    /// receive buffer, decoded and lent as [`poll_raw`](Self::poll_raw) would
    /// (`poll_raw(true)`, with no control frame waiting to be written): its kind and
    /// where it lies ([`Connection::lent`]). `None` for everything else, left for
    /// `poll_raw` to find: nothing buffered, another frame, a failure, a close, a pong
    /// to write. An invalid frame has failed the connection and `poll_raw` reports it.
    ///
    /// For the IO layer's lending receive: the message comes out in registers, without
    /// the general event that `poll_raw` returns through memory.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    #[inline(always)]
    pub(crate) fn poll_short(&mut self) -> Option<(MessageKind, Range<usize>)> {
        if self.failure.is_some()
            || self.stall.is_some()
            || self.config.delivery != Delivery::Whole
            || self.has_control_output()
            || self.input_done()
        {
            return None;
        }
        // As `next_raw` begins: the message lent before is done with.
        self.release();
        let at = self.rx_read + self.held;
        if at >= self.rx.len() {
            return None;
        }
        match self.decoder.decode_short(&mut self.rx[at..])? {
            Ok(short) => Some(self.lend_short(at, short)),
            Err(e) => {
                // The poll that follows reports it, as `next_raw` would have at once.
                self.fail(Error::Protocol(e));
                None
            }
        }
    }

    /// [`poll_short_next`](Self::poll_short_next) for an owning receive, the message
    /// taken.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    #[inline(always)]
    pub(crate) fn take_short(&mut self) -> Option<Message> {
        let (kind, at) = self.poll_short_next()?;
        Some(Message::from_data(kind, self.take(Loc::Rx(at))))
    }

    /// [`poll_short`](Self::poll_short) for a receive that lends or takes what it finds:
    /// a receive that waits for the peer finds nothing past the message before it, which
    /// is tested first.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    #[inline(always)]
    pub(crate) fn poll_short_next(&mut self) -> Option<(MessageKind, Range<usize>)> {
        if self.rx_read + self.held + self.rx_pending >= self.rx.len() {
            return None;
        }
        self.poll_short()
    }

    /// The payload of a message [`poll_short`](Self::poll_short) lent.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    #[inline(always)]
    pub(crate) fn lent(&self, kind: MessageKind, at: Range<usize>) -> MessageRef<'_> {
        MessageRef::from_data(kind, &self.rx[at])
    }

    /// [`next_raw`](Self::next_raw) from the decoder's general path on: decodes until
    /// there is something to deliver or nothing more to decode.
    #[inline(never)]
    fn decode_loop(&mut self) -> Option<Result<Raw, Error>> {
        loop {
            let decoded = match self
                .decoder
                .decode_long(&mut self.rx[self.rx_read + self.held..])
            {
                Ok(d) => d,
                Err(e) => return Some(Err(self.fail_now(Error::Protocol(e)))),
            };
            if let Some(r) = self.after_decode(decoded) {
                return r;
            }
        }
    }

    /// What one decoded step means for the connection: `Some` with what to return from
    /// [`next_raw`](Self::next_raw), `None` to decode on.
    fn after_decode(&mut self, decoded: Decoded) -> Option<Option<Result<Raw, Error>>> {
        let consumed = decoded.consumed;
        let Some(item) = decoded.item else {
            // Inside a held frame the decoder consumes nothing without an item.
            debug_assert!(self.held == 0 || consumed == 0);
            if self.held == 0 {
                self.consume_rx(consumed);
            }
            return Some(self.end_of_input().map(Err));
        };
        match item {
            Item::Data(mut chunk) => {
                if chunk.frame_end {
                    self.note_frame();
                    // A fragmented message is open from the end of its first frame
                    // to its last (the message timer). The first frame may end in a
                    // chunk of its own (it arrived in several reads), so the timer
                    // starts at the first frame end of a message, whichever chunk that
                    // is.
                    self.timers.message_since = match chunk.message_end {
                        true => None,
                        false => self.timers.message_since.or(Some(self.now)),
                    };
                }
                // Data the peer sent after our close was queued, before its own close,
                // is delivered like any other, within the same limits, budget and close
                // timeout: RFC 6455 5.5.1 lets the peer finish what it was sending ("An
                // endpoint MAY delay sending a Close frame until its current message is
                // sent"), and an application that closed one half still reads the other.
                // Positions in `rx` from here on.
                let at = self.rx_read + self.held;
                chunk.payload = chunk.payload.start + at..chunk.payload.end + at;
                match self.data(chunk, consumed) {
                    Ok(Some(raw)) => Some(Some(Ok(raw))),
                    // Waits for memory: nothing is decoded past the chunk (unless the
                    // budget grants it at once).
                    Ok(None) if self.stall.is_some() => self.resume(),
                    Ok(None) => None,
                    Err(e) => Some(Some(Err(self.fail_now(e)))),
                }
            }
            Item::Control(frame) => {
                // Control frames come between frames, never inside a held one.
                debug_assert_eq!(self.held, 0);
                self.note_frame();
                self.rx_pending = consumed;
                let payload = frame.payload.start + self.rx_read..frame.payload.end + self.rx_read;
                Some(Some(Ok(match frame.kind {
                    ControlKind::Ping => {
                        // RFC 6455 5.5.2: "Upon receipt of a Ping frame, an endpoint MUST
                        // send a Pong frame in response" with "identical Application data".
                        if self.config.auto_pong && !self.close_queued {
                            // The payload is at most 125 bytes (the decoder checked), so
                            // this cannot fail on length; a random-source failure only
                            // loses this pong.
                            let mut data = [0u8; MAX_CONTROL_PAYLOAD];
                            let data = &mut data[..payload.len()];
                            data.copy_from_slice(&self.rx[payload.clone()]);
                            let _ = self.queue_control(OpCode::Pong, data);
                        }
                        Raw::Ping(payload)
                    }
                    ControlKind::Pong => Raw::Pong(payload),
                    ControlKind::Close => {
                        // The decoder checked the payload: a valid code and UTF-8
                        // reason, or empty.
                        let (code, reason) = match parse_close_payload(&self.rx[payload.clone()]) {
                            Ok(Some((code, reason))) => (Some(code), reason.to_owned()),
                            _ => (None, String::new()),
                        };
                        self.on_close_received(code, &reason);
                        Raw::Close(payload)
                    }
                })))
            }
        }
    }

    /// Handles a data chunk; `None` when nothing is to be delivered yet.
    #[inline]
    fn data(&mut self, chunk: DataChunk, consumed: usize) -> Result<Option<Raw>, Error> {
        if chunk.first
            && chunk.message_end
            && !chunk.compressed
            && self.config.delivery == Delivery::Whole
        {
            // The usual frame: a whole message in the receive buffer. It is lent, no copy.
            self.rx_pending = consumed;
            return Ok(Some(Raw::whole(chunk.kind, Loc::Rx(chunk.payload))));
        }
        self.data_rest(chunk, consumed)
    }
}
