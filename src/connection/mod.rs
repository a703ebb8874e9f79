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

mod assemble;
mod batch;
mod budget;
mod config;
mod fragments;
mod input;
mod lifecycle;
mod prepared;
mod queue;
mod receive;
#[cfg(feature = "tokio")]
mod replies;
mod send;
mod shutdown;
mod stall;
mod stock;
mod timers;
mod types;

pub use batch::Batch;
#[cfg(feature = "tokio")]
pub(crate) use batch::Detached;
pub use budget::{Budget, DEFAULT_BUDGET};
pub use config::{
    Config, DEFAULT_CONTROL_QUEUE_CAPACITY, DEFAULT_MAX_READ_AHEAD, DEFAULT_READ_BUFFER_SIZE,
    DEFAULT_SEND_QUEUE_HIGH_WATER, Delivery,
};
pub use prepared::{DEFAULT_PREPARED_LEVEL, PayloadWriter, PrepareError, PreparedMessage};
pub use shutdown::Shutdown;
pub use types::{Error, Event, OwnedEvent, SendError, Timeout, Transmit};

pub use crate::message::Compression;

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;

use crate::codec::Role;
use crate::codec::{Decoder, DecoderConfig, Encoder, MessageKind};
#[cfg(feature = "deflate")]
use crate::deflate::PerMessageDeflate;
use crate::message::CloseFrame;

use budget::Charge;
use lifecycle::Phase;
use queue::OutQueue;
#[cfg(feature = "tokio")]
pub(crate) use replies::Replies;
use timers::Timers;

/// Largest read the IO layers are asked for while a large message streams in.
const MAX_READ_CHUNK: u32 = 256 * 1024;

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
/// 4. **Memory**: when the shared [`Budget`] has no room for the message being received,
///    [`waits_for_budget`](Self::waits_for_budget) is true and
///    [`wants_read`](Self::wants_read) false: read nothing, register a waker with
///    [`register_budget_waker`](Self::register_budget_waker) (or poll again a little
///    later), and poll events again when woken; the wait's deadline
///    ([`Config::budget_wait`]) is in [`poll_timeout`](Self::poll_timeout).
/// 5. **Sending**: [`send`](Self::send), [`send_bytes`](Self::send_bytes),
///    [`begin_message`](Self::begin_message)/[`send_chunk`](Self::send_chunk)/
///    [`end_message`](Self::end_message), [`ping`](Self::ping), [`pong`](Self::pong),
///    [`close`](Self::close), [`send_prepared`](Self::send_prepared) queue frames.
///    The `_with` forms ([`send_with`](Self::send_with),
///    [`send_bytes_with`](Self::send_bytes_with),
///    [`begin_message_with`](Self::begin_message_with)) choose per message whether it
///    is compressed ([`Compression`]).
///
/// # Close
///
/// Calling [`close`](Self::close) queues our close; from then on sends fail with
/// [`SendError::Closed`] while the peer's close is awaited (at most
/// [`Config::close_timeout`], counted from the `now` given to `close`). What the peer sends
/// meanwhile is still delivered, within the same limits: it may finish what it was sending
/// before it answers. The peer's close is reported as [`Event::Close`] and, unless
/// [`Config::auto_close`] is off, echoed. Once both closes
/// have passed, [`is_closed`](Self::is_closed) is true: flush the output, then close the
/// transport (RFC 6455 7.1.1: the server closes TCP first; a client waits for it, within
/// a timeout of its own). On a protocol error, [`poll_event`](Self::poll_event) returns it
/// once, a close frame with its code is queued, and the connection is closed at once.
pub struct Connection {
    role: Role,
    /// Shared by the connections of one server (`tokio::serve`), so an idle connection
    /// does not carry its own copy.
    config: Arc<Config>,
    decoder: Decoder,
    encoder: Encoder,
    /// Received bytes not yet consumed.
    rx: BytesMut,
    /// Bytes at the front of `rx` that were delivered and released: dropped from the
    /// buffer (one `advance`) when it must make room or is handed out whole
    /// (`recv_buffer`, `handle_bytes`), or cleared with it once nothing past them is left,
    /// rather than one `advance` per message. Never all of `rx` (0 then): an empty `rx`
    /// means nothing unread.
    rx_read: usize,
    /// Bytes after `rx_read` that the last event borrowed; released at the next call.
    rx_pending: usize,
    /// Bytes after `rx_read` that the last batch's run decoded (unmasked in place), handed
    /// out or not; past `rx_pending`, those it did not hand out, which the next call masks
    /// again (`remask_decoded`). 0 when no batch ran.
    rx_decoded: usize,
    /// `rx.len()` when the IO layer last got the buffer to read into: what
    /// `handle_received` finds past it arrived with that read.
    rx_mark: usize,
    /// The size of the next read (`reserve_read`), and the room it offered the last one.
    read_size: u32,
    read_offer: u32,
    /// The length of the last frame handed over from `rx` (the read sizing's guess at
    /// the next one).
    last_frame: u32,
    /// No read since the receive buffer was last given back (or ever): the next read
    /// gets a buffer of exactly its size.
    rx_cold: bool,
    /// The receive buffer went to the thread's stock when a read found nothing
    /// ([`read_would_block`](Self::read_would_block)): the next read takes one from there
    /// rather than reading into the IO layer's memory as an idle connection does.
    rx_stocked: bool,
    /// A message was cut out of `rx` (an owned handle now shares its allocation, or did)
    /// since `rx` last went to the thread's stock.
    rx_shared: bool,
    /// Bytes after `rx_read` that belong to a single-frame message still arriving
    /// (`Delivery::Whole`, uncompressed): decoded and unmasked, kept in place so that the
    /// whole message is lent or handed over from `rx` without a copy. 0 when none.
    held: usize,
    /// Where the held message's payload starts, counted from `rx_read`.
    held_start: usize,
    /// A whole message being assembled (Delivery::Whole, fragmented or compressed).
    msg: Vec<u8>,
    /// `msg` was delivered; cleared at the next call.
    msg_delivered: bool,
    /// A chunk of the current incoming message has been delivered (Delivery::Chunks).
    chunk_started: bool,
    /// Payload arena for copied (and masked) outgoing payloads.
    wbuf: BytesMut,
    /// The one output queue (queue.rs).
    out: OutQueue,
    /// The fragmented message we are sending.
    sending: Option<OutMessage>,
    /// Where the connection is in its life (lifecycle.rs).
    phase: Phase,
    /// Our close frame is queued.
    close_queued: bool,
    /// The peer's close frame arrived.
    close_in: bool,
    /// The transport ended before the close handshake: what is buffered is delivered,
    /// then the connection fails (RFC 6455 7.1.5).
    input_eof: bool,
    /// The transport failed: nothing more is written (what was received is still
    /// delivered, see `handle_transport_error`).
    transport_lost: bool,
    /// The peer's close frame (boxed: an open connection has none).
    peer_close: Option<Box<CloseFrame>>,
    /// The error that failed the connection, kept until taken.
    failure: Option<Error>,
    /// `failure` was reported by an event poll.
    failure_reported: bool,
    /// The time of the last input or call that passed one.
    now: Instant,
    /// The timers' state (timers.rs).
    timers: Timers,
    /// What the message being received holds, charged to the shared budget (given back
    /// when the connection is dropped, however it ends).
    charge: Charge,
    /// Waiting for memory from the budget: what to do again once granted (stall.rs).
    stall: Option<Box<stall::Stall>>,
    /// Its place under the shutdown signal of [`Config::shutdown`] (shutdown.rs), when it
    /// has one; boxed, so that a connection without one holds a null pointer.
    shutdown: Option<Box<shutdown::Enrolled>>,
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
            .field("buffered", &(self.rx.len() - self.rx_read))
            .field("queued_frames", &self.out.len())
            .field("phase", &self.phase)
            .finish_non_exhaustive()
    }
}

#[derive(Clone, Copy, Debug)]
struct OutMessage {
    kind: MessageKind,
    first: bool,
    /// Some of the message was handed to the compressor (which may not have output yet).
    fed: bool,
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

impl Raw {
    /// A whole data message at `loc`.
    #[inline]
    pub(crate) fn whole(kind: MessageKind, loc: Loc) -> Raw {
        Raw::Data {
            kind,
            loc,
            first: true,
            fin: true,
        }
    }
}

impl Connection {
    /// A connection for `role`, opened at `now`. Buffers are allocated when first needed.
    pub fn new(role: Role, config: Config, now: Instant) -> Self {
        Self::with_config(role, Arc::new(config), now)
    }

    /// [`new`](Self::new) with settings shared with other connections.
    pub(crate) fn with_config(role: Role, config: Arc<Config>, now: Instant) -> Self {
        let mut dc = DecoderConfig::new(role);
        dc.max_frame_size = config.max_frame_size;
        dc.max_message_size = config.max_message_size;
        let read_size = config.read_buffer_size.clamp(256, MAX_READ_CHUNK as usize) as u32;
        Connection {
            role,
            decoder: Decoder::new(dc),
            encoder: Encoder::new(role),
            rx: BytesMut::new(),
            rx_read: 0,
            rx_pending: 0,
            rx_decoded: 0,
            rx_mark: 0,
            read_size,
            read_offer: 0,
            last_frame: 0,
            rx_cold: true,
            rx_stocked: false,
            rx_shared: false,
            held: 0,
            held_start: 0,
            msg: Vec::new(),
            msg_delivered: false,
            chunk_started: false,
            wbuf: BytesMut::new(),
            out: OutQueue::default(),
            sending: None,
            phase: Phase::Open,
            close_queued: false,
            close_in: false,
            input_eof: false,
            transport_lost: false,
            peer_close: None,
            failure: None,
            failure_reported: false,
            now,
            timers: Timers::new(now),
            charge: Charge::new(config.budget.as_ref()),
            stall: None,
            shutdown: Connection::enroll(&config),
            #[cfg(feature = "deflate")]
            deflate: None,
            config,
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

    /// The connection for a finished opening handshake, as the IO layers open it: `role`,
    /// its settings and, when permessage-deflate was agreed, the agreed parameters with
    /// this end's deflate settings.
    #[cfg_attr(not(any(feature = "tokio", feature = "blocking")), allow(dead_code))]
    pub(crate) fn open(
        role: Role,
        config: Arc<Config>,
        now: Instant,
        #[cfg(feature = "deflate")] deflate: Option<(
            crate::deflate::DeflateParams,
            &crate::deflate::DeflateConfig,
        )>,
    ) -> Self {
        #[allow(unused_mut)]
        let mut conn = Connection::with_config(role, config, now);
        #[cfg(feature = "deflate")]
        if let Some((params, settings)) = deflate {
            conn.set_deflate(PerMessageDeflate::new(role, params, settings));
        }
        conn
    }

    /// This end's role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// Whether permessage-deflate (RFC 7692) is on for this connection (agreed in the
    /// handshake). Always `false` without feature `deflate`.
    pub fn is_deflate(&self) -> bool {
        #[cfg(feature = "deflate")]
        return self.deflate.is_some();
        #[cfg(not(feature = "deflate"))]
        false
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.config
    }
}
