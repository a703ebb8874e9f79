//! The sans-IO WebSocket connection: bytes and time in, events and bytes out.
//!
//! See [`Connection`] for the call order, and the [crate documentation](crate#the-sans-io-core-driven-by-hand)
//! for a client and a server wired together, handshake included.
//!
//! With permessage-deflate the handshake's agreed parameters go to each end's
//! [`Connection::set_deflate`] before any frame passes; from then on sending and receiving
//! compress and inflate on their own:
//!
#![cfg_attr(feature = "deflate", doc = "```")]
#![cfg_attr(not(feature = "deflate"), doc = "```ignore")]
//! use std::time::Instant;
//!
//! use rapidws::connection::{Config, Connection, Event};
//! use rapidws::deflate::{DeflateConfig, PerMessageDeflate};
//! use rapidws::handshake::{
//!     ClientConfig, ClientHandshake, ClientRequest, ServerConfig, ServerHandshake,
//! };
//! use rapidws::Role;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let now = Instant::now();
//! let deflate = DeflateConfig::default();
//!
//! // The client offers permessage-deflate; the server accepts it.
//! let client_config = ClientConfig::default().with_deflate(Some(deflate.clone()));
//! let request = ClientRequest::new("example.com", "/");
//! let (mut client_hs, request_bytes) = ClientHandshake::new(&request, client_config)?;
//! let server_config = ServerConfig::default().with_deflate(Some(deflate.clone()));
//! let accepted = ServerHandshake::new(&server_config)
//!     .feed(&request_bytes)?
//!     .expect("the whole request head was fed")
//!     .accept(&server_config)?;
//! let upgraded = client_hs.feed(&accepted.response)?.expect("the whole response head was fed");
//!
//! let mut client = Connection::new(Role::Client, Config::default(), now);
//! let mut server = Connection::new(Role::Server, Config::default(), now);
//! if let Some(params) = upgraded.deflate {
//!     client.set_deflate(PerMessageDeflate::new(Role::Client, params, &deflate));
//! }
//! if let Some(params) = accepted.deflate {
//!     server.set_deflate(PerMessageDeflate::new(Role::Server, params, &deflate));
//! }
//!
//! let text = "to compress, or not to compress: ".repeat(40);
//! client.send_text(&text)?;
//! let mut wire = Vec::new();
//! client.write_pending(&mut wire);
//! assert!(wire.len() < text.len() / 10, "{} bytes on the wire", wire.len());
//!
//! server.handle_bytes(now, &wire);
//! match server.poll_event() {
//!     Some(Ok(Event::Message(msg))) => assert_eq!(msg.as_text(), Some(text.as_str())),
//!     other => panic!("expected the message, got {other:?}"),
//! }
//! # Ok(())
//! # }
//! ```

mod types;

pub use types::{
    CloseFrame, Config, Delivery, Error, Event, Message, OwnedEvent, SendError, Timeout, Transmit,
};

use std::collections::VecDeque;
use std::ops::Range;
use std::time::Instant;

use bytes::{Buf, Bytes, BytesMut};

use crate::Role;
#[cfg(feature = "deflate")]
use crate::codec::ProtocolError;
use crate::codec::{
    CloseCode, ControlKind, DataChunk, Decoder, DecoderConfig, Encoder, Item, MAX_CONTROL_PAYLOAD,
    MessageKind, OpCode, PreparedFrame, parse_close_payload,
};
#[cfg(feature = "deflate")]
use crate::deflate::PerMessageDeflate;
use crate::deque::Deque;

/// Buffers larger than this are freed once empty rather than kept for the next message.
const RETAIN_CAPACITY: usize = 64 * 1024;

/// A WebSocket connection after the handshake, for either role, with no IO and no clock.
///
/// # Call order
///
/// 1. **Bytes arrive**: append them with [`handle_bytes`](Self::handle_bytes), or read
///    straight into [`reserve_recv`](Self::reserve_recv) (which makes room for a large
///    frame's rest in one step) or [`recv_buffer`](Self::recv_buffer) and then call
///    [`handle_received`](Self::handle_received). Then call
///    [`poll_event`](Self::poll_event) (or [`poll_event_owned`](Self::poll_event_owned))
///    until it returns `None`. A borrowed event's payload lives until the next call on the
///    connection.
/// 2. **Output**: after anything that may produce output (received bytes: automatic pongs
///    and close echoes; sends; timeouts), take frames with
///    [`poll_transmit`](Self::poll_transmit) until `None` and write them in order.
///    [`has_pending_output`](Self::has_pending_output) says whether there is any.
/// 3. **Time**: [`poll_timeout`](Self::poll_timeout) says when the next timer is due;
///    call [`handle_timeout`](Self::handle_timeout) then (or later), poll events (a
///    timeout is reported there as an error) and poll output (a keepalive ping).
/// 4. **Sending**: [`send`](Self::send), [`send_bytes`](Self::send_bytes),
///    [`begin_message`](Self::begin_message)/[`send_chunk`](Self::send_chunk)/
///    [`end_message`](Self::end_message), [`ping`](Self::ping), [`pong`](Self::pong),
///    [`close`](Self::close), [`send_prepared`](Self::send_prepared) queue frames.
///
/// # Close
///
/// Calling [`close`](Self::close) queues our close; from then on sends fail with
/// [`SendError::Closed`] and received data frames are discarded while the peer's close is
/// awaited (at most [`Config::close_timeout`], counted from the `now` given to `close`). The peer's close is reported as
/// [`Event::Close`] and, unless [`Config::auto_close`] is off, echoed. Once both closes
/// have passed, [`is_closed`](Self::is_closed) is true: flush the output, then close the
/// transport (RFC 6455 7.1.1: the server closes TCP first; a client waits for it, within
/// a timeout of its own). On a protocol error, [`poll_event`](Self::poll_event) returns it
/// once, a close frame with its code is queued, and the connection is closed at once.
pub struct Connection {
    role: Role,
    config: Config,
    decoder: Decoder,
    encoder: Encoder,
    /// Received bytes not yet consumed.
    rx: BytesMut,
    /// Bytes at the front of `rx` that the last event borrowed; dropped at the next call.
    rx_pending: usize,
    /// Bytes at the front of `rx` that belong to a single-frame message still arriving
    /// (`Delivery::Whole`, uncompressed): decoded and unmasked, kept in place so that the
    /// whole message is lent or handed over from `rx` without a copy. 0 when none.
    held: usize,
    /// Where the held message's payload starts in `rx`.
    held_start: usize,
    /// A whole message being assembled (Delivery::Whole, fragmented or compressed).
    msg: Vec<u8>,
    /// `msg` was delivered; cleared at the next call.
    msg_delivered: bool,
    /// A chunk of the current incoming message has been delivered (Delivery::Chunks).
    chunk_started: bool,
    /// Payload arena for copied (and masked) outgoing payloads.
    wbuf: BytesMut,
    /// Pings and pongs: they may pass queued data frames.
    control_out: VecDeque<Transmit>,
    /// Data frames and the close, in order.
    data_out: Deque<Transmit>,
    /// The fragmented message we are sending.
    sending: Option<OutMessage>,
    close_sent: bool,
    close_received: bool,
    failed: bool,
    pending_error: Option<Error>,
    now: Instant,
    last_rx: Instant,
    ping_sent_at: Option<Instant>,
    close_sent_at: Option<Instant>,
    /// Boxed: most connections never negotiate it, and its state would otherwise make
    /// every idle connection larger.
    #[cfg(feature = "deflate")]
    deflate: Option<Box<Inflating>>,
}

/// permessage-deflate state: the codec and what inflating a message needs.
#[cfg(feature = "deflate")]
struct Inflating {
    pmd: PerMessageDeflate,
    /// Inflated bytes of one chunk (Delivery::Chunks).
    scratch: Vec<u8>,
    /// Validates inflated text.
    utf8: rapidws_simd::utf8::Validator,
    /// Inflated bytes of the current message (Delivery::Chunks).
    inflated: usize,
}

impl core::fmt::Debug for Connection {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Connection")
            .field("role", &self.role)
            .field("buffered", &self.rx.len())
            .field(
                "queued_frames",
                &(self.control_out.len() + self.data_out.len()),
            )
            .field("close_sent", &self.close_sent)
            .field("close_received", &self.close_received)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

#[derive(Clone, Copy, Debug)]
struct OutMessage {
    kind: MessageKind,
    first: bool,
    #[cfg(feature = "deflate")]
    compressed: bool,
}

/// Where a delivered payload lives.
#[derive(Clone, Debug)]
pub(crate) enum Loc {
    /// In `rx`, inside the first `rx_pending` bytes.
    Rx(Range<usize>),
    /// `msg`, whole.
    Msg,
    /// `scratch`, whole.
    #[cfg(feature = "deflate")]
    Scratch,
}

/// An event as positions in the connection's buffers (see [`Connection::poll_raw`]).
#[derive(Clone, Debug)]
pub(crate) enum Raw {
    Data {
        kind: MessageKind,
        loc: Loc,
        first: bool,
        fin: bool,
    },
    Ping(Range<usize>),
    Pong(Range<usize>),
    Close(Range<usize>),
}

impl Connection {
    /// A connection for `role`, opened at `now`. Buffers are allocated when first needed.
    pub fn new(role: Role, config: Config, now: Instant) -> Self {
        let mut dc = DecoderConfig::new(role);
        dc.max_frame_size = config.max_frame_size;
        dc.max_message_size = config.max_message_size;
        dc.batch = config.batch_decode;
        Connection {
            role,
            config,
            decoder: Decoder::new(dc),
            encoder: Encoder::new(role),
            rx: BytesMut::new(),
            rx_pending: 0,
            held: 0,
            held_start: 0,
            msg: Vec::new(),
            msg_delivered: false,
            chunk_started: false,
            wbuf: BytesMut::new(),
            control_out: VecDeque::new(),
            data_out: Deque::default(),
            sending: None,
            close_sent: false,
            close_received: false,
            failed: false,
            pending_error: None,
            now,
            last_rx: now,
            ping_sent_at: None,
            close_sent_at: None,
            #[cfg(feature = "deflate")]
            deflate: None,
        }
    }

    /// Turns permessage-deflate on, with the codec for the parameters agreed in the
    /// handshake. Call before any data is exchanged.
    #[cfg(feature = "deflate")]
    pub fn set_deflate(&mut self, deflate: PerMessageDeflate) {
        self.deflate = Some(Box::new(Inflating {
            pmd: deflate,
            scratch: Vec::new(),
            utf8: rapidws_simd::utf8::Validator::new(),
            inflated: 0,
        }));
        self.decoder.set_rsv1_allowed(true);
    }

    /// This end's role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// True once both closes have passed, a protocol error or timeout failed the
    /// connection, or nothing more can happen. Flush the output, then drop the transport.
    #[inline]
    pub fn is_closed(&self) -> bool {
        self.failed || (self.close_sent && self.close_received)
    }

    /// True once our close frame was queued (sends are refused from then on).
    #[inline]
    pub fn close_sent(&self) -> bool {
        self.close_sent
    }

    /// True once the peer's close frame was received.
    pub fn close_received(&self) -> bool {
        self.close_received
    }

    // ----- input -----

    /// Appends received bytes. `now` is the time they arrived.
    pub fn handle_bytes(&mut self, now: Instant, data: &[u8]) {
        self.release();
        if self.input_done() || data.is_empty() {
            return;
        }
        self.rx.extend_from_slice(data);
        self.note_received(now);
    }

    /// The receive buffer, for reading into it without a copy: reserve, append (never
    /// change what is already there), then call [`handle_received`](Self::handle_received).
    pub fn recv_buffer(&mut self) -> &mut BytesMut {
        self.release();
        &mut self.rx
    }

    /// [`recv_buffer`](Self::recv_buffer) with room for the next read: at least
    /// `read_size` spare bytes when less than half of that is spare, and while a
    /// single-frame message is arriving, room for the rest of its frame (and `read_size`
    /// more), so that it is read straight into place with no reallocation on the way. That room is bounded by
    /// [`Config::max_read_ahead`], or by what the frame has delivered so far when that is
    /// more: a peer that announces a large frame and sends little gets little reserved.
    pub fn reserve_recv(&mut self, read_size: usize) -> &mut BytesMut {
        self.release();
        let spare = self.rx.capacity() - self.rx.len();
        let rest = match self.decoder.frame_remaining() {
            Some(rest) if self.held > 0 => {
                let arrived = self.held - self.held_start;
                let bound = self.config.max_read_ahead.max(arrived);
                usize::try_from(rest).map_or(bound, |r| r.min(bound))
            }
            _ => 0,
        };
        if rest > 0 {
            // The frame's rest and one read more, in one step: the read that completes
            // the frame then leaves room unused, which tells the IO layer the socket is
            // drained (an exactly filled buffer costs one more read that would block).
            // Never more when there is room for the rest: growing a buffer that holds most
            // of a large message for a read past its end would copy the message.
            if rest > spare {
                self.rx.reserve(rest.saturating_add(read_size));
            }
        } else if spare < read_size / 2 {
            self.rx.reserve(read_size);
        }
        &mut self.rx
    }

    /// Notes that bytes were appended to [`recv_buffer`](Self::recv_buffer) at `now`.
    pub fn handle_received(&mut self, now: Instant) {
        if self.input_done() {
            self.rx = BytesMut::new();
            self.held = 0;
            return;
        }
        self.note_received(now);
    }

    fn note_received(&mut self, now: Instant) {
        self.now = now;
        self.last_rx = now;
        // Any bytes prove the peer alive: the keepalive ping has done its job.
        self.ping_sent_at = None;
    }

    /// Nothing received from now on matters: the peer closed, or we failed.
    fn input_done(&self) -> bool {
        self.failed || self.close_received
    }

    /// Drops what the previous event borrowed.
    #[inline]
    fn release(&mut self) {
        // Called on every entry; most calls have nothing to do.
        if self.rx_pending > 0
            || self.msg_delivered
            || (self.rx.is_empty() && self.rx.capacity() > RETAIN_CAPACITY)
        {
            self.release_slow();
        }
    }

    fn release_slow(&mut self) {
        if self.rx_pending > 0 {
            self.rx.advance(self.rx_pending);
            self.detach_after_large(self.rx_pending);
            self.rx_pending = 0;
        }
        if self.msg_delivered {
            self.msg_delivered = false;
            if self.msg.capacity() > RETAIN_CAPACITY {
                self.msg = Vec::new();
            } else {
                self.msg.clear();
            }
        }
        // An idle connection keeps little memory: a buffer grown for one large message is
        // given back once it is empty.
        if self.rx.is_empty() && self.rx.capacity() > RETAIN_CAPACITY {
            self.rx = BytesMut::new();
        }
    }

    /// After `len` bytes were handed over or dropped from the front of the receive
    /// buffer: when they were a large message and nothing is left, start the next message
    /// in a new buffer. The empty rest would be a small view into the large allocation
    /// and keep all of it alive (in a buffer stock, say) with only its own few bytes of
    /// capacity showing; the message's own handle, if any, now frees it.
    fn detach_after_large(&mut self, len: usize) {
        if len > RETAIN_CAPACITY && self.rx.is_empty() {
            self.rx = BytesMut::new();
        }
    }

    /// Gives back the memory kept for reuse between messages: the receive buffer and the
    /// message assembly buffer when they are empty, the output queues' storage when all
    /// output has been taken, the send arena. Nothing observable changes; the next
    /// message allocates again.
    ///
    /// Call it when the connection goes idle (the tokio layer does when the socket has
    /// nothing to read), so that many idle connections hold only their fixed state.
    pub fn release_idle_memory(&mut self) {
        self.release();
        if self.rx.is_empty() && self.rx.capacity() > 0 {
            self.rx = BytesMut::new();
        }
        if self.msg.is_empty() && self.msg.capacity() > 0 {
            self.msg = Vec::new();
        }
        #[cfg(feature = "deflate")]
        if let Some(d) = self.deflate.as_deref_mut() {
            d.scratch = Vec::new();
        }
        if self.control_out.is_empty() && self.control_out.capacity() > 0 {
            self.control_out = VecDeque::new();
        }
        self.data_out.shrink_idle(0);
        if self.wbuf.capacity() > 0 {
            // Payloads split off earlier keep their own handles; this only drops ours.
            self.wbuf = BytesMut::new();
        }
    }

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

    /// The next event as positions in the connection's buffers, for IO layers that
    /// decide after polling whether to borrow ([`raw_event`](Self::raw_event)) or take
    /// ([`raw_owned`](Self::raw_owned)) it. The positions are valid until the next call
    /// that takes `&mut self`.
    #[cfg(feature = "tokio")]
    pub(crate) fn poll_raw(&mut self) -> Option<Result<Raw, Error>> {
        self.next_raw()
    }

    /// The event `raw` (from [`poll_raw`](Self::poll_raw)) borrowed.
    pub(crate) fn raw_event(&self, raw: &Raw) -> Event<'_> {
        match raw {
            Raw::Data {
                kind,
                loc,
                first,
                fin,
            } => {
                let data = self.slice(loc);
                match self.config.delivery {
                    Delivery::Whole => Event::Message(Message { kind: *kind, data }),
                    Delivery::Chunks => Event::Chunk {
                        kind: *kind,
                        data,
                        first: *first,
                        fin: *fin,
                    },
                }
            }
            Raw::Ping(r) => Event::Ping(&self.rx[r.clone()]),
            Raw::Pong(r) => Event::Pong(&self.rx[r.clone()]),
            Raw::Close(r) => Event::Close(
                parse_close_payload(&self.rx[r.clone()])
                    .ok()
                    .flatten()
                    .map(|(code, reason)| CloseFrame { code, reason }),
            ),
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
                    .map(|(code, reason)| (code, reason.to_owned())),
            ),
        }
    }

    /// A whole data message's kind and payload, taken (as [`raw_owned`](Self::raw_owned)
    /// would); any other event is handed back.
    #[cfg(feature = "tokio")]
    pub(crate) fn raw_whole(&mut self, raw: Raw) -> Result<(MessageKind, Bytes), Raw> {
        match raw {
            Raw::Data { kind, loc, .. } if self.config.delivery == Delivery::Whole => {
                Ok((kind, self.take(loc)))
            }
            other => Err(other),
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

    fn take(&mut self, loc: Loc) -> Bytes {
        match loc {
            Loc::Rx(r) => {
                // The frame leaves the buffer; its payload is cut out of it in place (no
                // second handle, as `Bytes::slice` would make).
                let mut frame = self.rx.split_to(self.rx_pending);
                let frame_len = frame.len();
                self.rx_pending = 0;
                frame.truncate(r.end);
                frame.advance(r.start);
                self.detach_after_large(frame_len);
                frame.freeze()
            }
            Loc::Msg => {
                self.msg_delivered = false;
                Bytes::from(core::mem::take(&mut self.msg))
            }
            #[cfg(feature = "deflate")]
            Loc::Scratch => Bytes::copy_from_slice(self.slice(&Loc::Scratch)),
        }
    }

    fn next_raw(&mut self) -> Option<Result<Raw, Error>> {
        self.release();
        if let Some(e) = self.pending_error.take() {
            return Some(Err(e));
        }
        if self.input_done() {
            return None;
        }
        if self.held >= self.rx.len() {
            if self.held > self.rx.len() {
                // The buffer was replaced through `recv_buffer` against its contract;
                // forget the held frame rather than index past the end.
                self.held = 0;
            }
            // Nothing new to decode (the IO layer asks once more before every read).
            return None;
        }
        loop {
            let decoded = match self.decoder.decode(&mut self.rx[self.held..]) {
                Ok(d) => d,
                Err(e) => return Some(Err(self.fail(Error::Protocol(e)))),
            };
            let consumed = decoded.consumed;
            let Some(item) = decoded.item else {
                // Inside a held frame the decoder consumes nothing without an item.
                debug_assert!(self.held == 0 || consumed == 0);
                if self.held == 0 {
                    self.rx.advance(consumed);
                }
                return None;
            };
            match item {
                Item::Data(mut chunk) => {
                    if self.close_sent {
                        // RFC 6455 1.4: after sending a close we only wait for the peer's;
                        // data still in flight from it is discarded.
                        self.rx.advance(self.held + consumed);
                        self.held = 0;
                        continue;
                    }
                    // Positions in `rx` from here on.
                    chunk.payload = chunk.payload.start + self.held..chunk.payload.end + self.held;
                    match self.data(chunk, consumed) {
                        Ok(Some(raw)) => return Some(Ok(raw)),
                        Ok(None) => continue,
                        Err(e) => return Some(Err(self.fail(e))),
                    }
                }
                Item::Control(frame) => {
                    // Control frames come between frames, never inside a held one.
                    debug_assert_eq!(self.held, 0);
                    self.rx_pending = consumed;
                    let payload = frame.payload;
                    return Some(Ok(match frame.kind {
                        ControlKind::Ping => {
                            // RFC 6455 5.5.2: "Upon receipt of a Ping frame, an endpoint MUST
                            // send a Pong frame in response" with "identical Application data".
                            if self.config.auto_pong && !self.close_sent {
                                let data = Bytes::copy_from_slice(&self.rx[payload.clone()]);
                                // The payload is at most 125 bytes, so this cannot fail on
                                // length; a random-source failure only loses this pong.
                                let _ = self.queue_control(OpCode::Pong, data);
                            }
                            Raw::Ping(payload)
                        }
                        ControlKind::Pong => Raw::Pong(payload),
                        ControlKind::Close => {
                            self.close_received = true;
                            // RFC 6455 5.5.1: "If an endpoint receives a Close frame and did
                            // not previously send a Close frame, the endpoint MUST send a
                            // Close frame in response", typically echoing the status code.
                            if !self.close_sent && self.config.auto_close {
                                let code = parse_close_payload(&self.rx[payload.clone()])
                                    .ok()
                                    .flatten()
                                    .map(|(c, _)| c);
                                let _ = self.queue_close(code, "");
                            }
                            Raw::Close(payload)
                        }
                    }));
                }
            }
        }
    }

    /// Handles a data chunk; `None` when nothing is to be delivered yet.
    fn data(&mut self, chunk: DataChunk, consumed: usize) -> Result<Option<Raw>, Error> {
        #[cfg(feature = "deflate")]
        if chunk.compressed {
            return self.inflate(chunk, consumed);
        }
        let kind = chunk.kind;
        match self.config.delivery {
            Delivery::Whole => {
                if chunk.first && chunk.message_end {
                    // The whole message is in the receive buffer: lend it, no copy.
                    self.rx_pending = consumed;
                    return Ok(Some(Raw::Data {
                        kind,
                        loc: Loc::Rx(chunk.payload),
                        first: true,
                        fin: true,
                    }));
                }
                if chunk.first && !chunk.frame_end {
                    // The start of a message's first frame: keep it where it is, and the
                    // rest of the frame after it, so that a single-frame message is
                    // never copied (`reserve_recv` makes room for the rest up front).
                    self.held_start = chunk.payload.start;
                    self.held = consumed;
                    return Ok(None);
                }
                if self.held > 0 {
                    self.held += consumed;
                    let held = self.held_start..chunk.payload.end;
                    if chunk.message_end {
                        self.held = 0;
                        self.rx_pending = chunk.payload.end;
                        return Ok(Some(Raw::Data {
                            kind,
                            loc: Loc::Rx(held),
                            first: true,
                            fin: true,
                        }));
                    }
                    if chunk.frame_end {
                        // The first frame of a fragmented message: its fragments are
                        // assembled in `msg`.
                        self.msg.extend_from_slice(&self.rx[held]);
                        self.rx.advance(self.held);
                        self.held = 0;
                    }
                    return Ok(None);
                }
                self.msg.extend_from_slice(&self.rx[chunk.payload]);
                self.rx.advance(consumed);
                if chunk.message_end {
                    self.msg_delivered = true;
                    return Ok(Some(Raw::Data {
                        kind,
                        loc: Loc::Msg,
                        first: true,
                        fin: true,
                    }));
                }
                Ok(None)
            }
            Delivery::Chunks => {
                if chunk.payload.is_empty() && !chunk.message_end {
                    self.rx.advance(consumed);
                    return Ok(None);
                }
                let first = !self.chunk_started;
                self.chunk_started = !chunk.message_end;
                self.rx_pending = consumed;
                Ok(Some(Raw::Data {
                    kind,
                    loc: Loc::Rx(chunk.payload),
                    first,
                    fin: chunk.message_end,
                }))
            }
        }
    }

    /// Inflates a compressed chunk; the size limit applies to the inflated bytes.
    #[cfg(feature = "deflate")]
    fn inflate(&mut self, chunk: DataChunk, consumed: usize) -> Result<Option<Raw>, Error> {
        let Some(d) = self.deflate.as_deref_mut() else {
            // The decoder refuses RSV1 unless deflate was set.
            return Err(Error::Protocol(ProtocolError::ReservedBits));
        };
        let pmd = &mut d.pmd;
        let input = &self.rx[chunk.payload.clone()];
        let max = self.config.max_message_size;
        let (out, start) = match self.config.delivery {
            Delivery::Whole => {
                let start = self.msg.len();
                pmd.decompress(input, chunk.message_end, &mut self.msg, max)
                    .map_err(Error::Deflate)?;
                (&self.msg, start)
            }
            Delivery::Chunks => {
                d.scratch.clear();
                let budget = max.saturating_sub(d.inflated);
                pmd.decompress(input, chunk.message_end, &mut d.scratch, budget)
                    .map_err(Error::Deflate)?;
                d.inflated += d.scratch.len();
                (&d.scratch, 0)
            }
        };
        if chunk.kind == MessageKind::Text {
            // RFC 7692 + RFC 6455 8.1: text is validated after inflation, failing fast.
            d.utf8
                .feed(&out[start..])
                .map_err(|_| Error::Protocol(ProtocolError::InvalidUtf8))?;
            if chunk.message_end {
                d.utf8
                    .finish()
                    .map_err(|_| Error::Protocol(ProtocolError::InvalidUtf8))?;
            }
        }
        let produced = out.len() > start;
        self.rx.advance(consumed);
        let kind = chunk.kind;
        match self.config.delivery {
            Delivery::Whole => {
                if chunk.message_end {
                    self.msg_delivered = true;
                    return Ok(Some(Raw::Data {
                        kind,
                        loc: Loc::Msg,
                        first: true,
                        fin: true,
                    }));
                }
                Ok(None)
            }
            Delivery::Chunks => {
                if !produced && !chunk.message_end {
                    return Ok(None);
                }
                let first = !self.chunk_started;
                self.chunk_started = !chunk.message_end;
                if chunk.message_end
                    && let Some(d) = self.deflate.as_deref_mut()
                {
                    d.inflated = 0;
                }
                Ok(Some(Raw::Data {
                    kind,
                    loc: Loc::Scratch,
                    first,
                    fin: chunk.message_end,
                }))
            }
        }
    }

    /// Fails the connection (RFC 6455 7.1.7): queue a close with the error's code if we
    /// have not sent one, and stop.
    fn fail(&mut self, e: Error) -> Error {
        if !self.close_sent
            && let Some(code) = e.close_code()
        {
            let _ = self.queue_close(Some(code), "");
        }
        self.failed = true;
        self.rx = BytesMut::new();
        self.rx_pending = 0;
        self.held = 0;
        self.msg = Vec::new();
        e
    }

    // ----- time -----

    /// When [`handle_timeout`](Self::handle_timeout) should next be called, if ever.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.is_closed() {
            return None;
        }
        let c = &self.config;
        let mut next: Option<Instant> = None;
        let mut add = |t: Option<Instant>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        if self.close_sent {
            add(self.close_sent_at.zip(c.close_timeout).map(|(t, d)| t + d));
            return next;
        }
        match self.ping_sent_at {
            Some(at) => add(c.pong_timeout.map(|d| at + d)),
            None => add(c.keepalive_interval.map(|d| self.last_rx + d)),
        }
        add(c.idle_timeout.map(|d| self.last_rx + d));
        next
    }

    /// Runs the timers due at `now`: a keepalive ping is queued, or a timeout fails the
    /// connection (reported by the next [`poll_event`](Self::poll_event)).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = now;
        if self.is_closed() {
            return;
        }
        let c = &self.config;
        let due = |t: Option<Instant>| t.is_some_and(|t| t <= now);
        if self.close_sent {
            if due(self.close_sent_at.zip(c.close_timeout).map(|(t, d)| t + d)) {
                self.failed = true;
                self.pending_error = Some(Error::Timeout(Timeout::Close));
            }
            return;
        }
        if due(c.idle_timeout.map(|d| self.last_rx + d)) {
            let e = self.fail(Error::Timeout(Timeout::Idle));
            self.pending_error = Some(e);
            return;
        }
        match self.ping_sent_at {
            Some(at) => {
                if due(c.pong_timeout.map(|d| at + d)) {
                    let e = self.fail(Error::Timeout(Timeout::Pong));
                    self.pending_error = Some(e);
                }
            }
            None => {
                if due(c.keepalive_interval.map(|d| self.last_rx + d))
                    && self.queue_control(OpCode::Ping, Bytes::new()).is_ok()
                {
                    self.ping_sent_at = Some(now);
                }
            }
        }
    }

    // ----- output -----

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
        if self.close_sent || self.failed {
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

    /// Queues a prepared frame as-is: a `Bytes` clone, no copy. Servers only, and never
    /// compressed, even with permessage-deflate on (an uncompressed message is always
    /// valid); [`send_prepared_message`](Self::send_prepared_message) sends the
    /// compressed form when it pays.
    ///
    /// # Errors
    ///
    /// [`SendError::PreparedOnClient`] on a client (its frames need fresh masks), and the
    /// errors of [`send`](Self::send).
    pub fn send_prepared(&mut self, frame: &PreparedFrame) -> Result<(), SendError> {
        self.check_open()?;
        if self.role == Role::Client {
            return Err(SendError::PreparedOnClient);
        }
        if self.sending.is_some() {
            return Err(SendError::MessageInProgress);
        }
        self.data_out
            .push_back(Transmit::raw(frame.as_bytes().clone()));
        Ok(())
    }

    // ----- hooks for prepared messages (src/prepared.rs) -----

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
    /// ([`Config::close_timeout`]) runs from `now`, however long the connection was quiet
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

    fn queue_close(&mut self, code: Option<CloseCode>, reason: &str) -> Result<(), SendError> {
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
        self.close_sent = true;
        self.close_sent_at = Some(self.now);
        self.sending = None;
        Ok(())
    }

    fn queue_control(&mut self, opcode: OpCode, payload: Bytes) -> Result<(), SendError> {
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
