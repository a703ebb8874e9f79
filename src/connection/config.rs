//! The settings of one connection, in either role and under any IO layer.

use std::time::Duration;

use crate::codec::{DEFAULT_MAX_FRAME_SIZE, DEFAULT_MAX_MESSAGE_SIZE};

use super::{Budget, Shutdown};

/// How received data messages are handed over.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Delivery {
    /// One [`Event::Message`](super::Event::Message) per message, assembled by the
    /// connection.
    #[default]
    Whole,
    /// [`Event::Chunk`](super::Event::Chunk)s as payload arrives: nothing is assembled, so
    /// memory stays small whatever the message size.
    Chunks,
}

/// Default of [`Config::max_read_ahead`]: 1 MiB.
pub const DEFAULT_MAX_READ_AHEAD: usize = 1 << 20;
/// Default of [`Config::read_buffer_size`]: 4 KiB.
pub const DEFAULT_READ_BUFFER_SIZE: usize = 4096;
/// Default of [`Config::send_queue_high_water`]: 256 KiB.
pub const DEFAULT_SEND_QUEUE_HIGH_WATER: usize = 256 << 10;
/// Default of [`Config::control_queue_capacity`]: 16 frames.
pub const DEFAULT_CONTROL_QUEUE_CAPACITY: usize = 16;

settings! {
    /// The settings of one WebSocket connection: limits, delivery, timers and buffer sizes.
    ///
    /// One type for the sans-IO [`Connection`](super::Connection) and for every IO layer
    /// (tokio, blocking, hyper/axum), with one set of defaults; every limit has a safe one, and
    /// `None` turns a timer off. Start from [`Config::default`] and chain the `with_*` setters:
    ///
    /// ```
    /// use std::time::Duration;
    /// use rapidws::Config;
    ///
    /// let config = Config::default()
    ///     .with_max_message_size(1 << 20)
    ///     .with_idle_timeout(Some(Duration::from_secs(120)));
    /// assert_eq!(config.max_message_size, 1 << 20);
    /// assert_eq!(config.keepalive_interval, Some(Duration::from_secs(30)));
    /// ```
    #[derive(Clone, Debug)]
    pub struct Config {
        /// Largest frame payload accepted, refused at the frame's header (1009). A frame of a
        /// compressed message may be larger by DEFLATE's worst-case expansion
        /// ([`max_compressed_frame_size`](crate::codec::max_compressed_frame_size): 13.1 %),
        /// so a peer compressing a whole message into one frame is not refused for it; its
        /// bytes are inflated as they arrive, never held. Default 16 MiB.
        pub max_frame_size: usize = DEFAULT_MAX_FRAME_SIZE,
        /// Largest message accepted, as the application receives it: the sum of its
        /// fragments, inflated when compressed (1009 past it). This is the limit that bounds
        /// the memory one message takes. Default 16 MiB.
        pub max_message_size: usize = DEFAULT_MAX_MESSAGE_SIZE,
        /// How data messages are delivered. Default [`Delivery::Whole`].
        pub delivery: Delivery = Delivery::Whole,
        /// Answer pings with pongs automatically. Default on.
        pub auto_pong: bool = true,
        /// Echo the peer's close automatically. Default on. When off, call
        /// [`Connection::close`](super::Connection::close) after the peer's close arrives.
        pub auto_close: bool = true,
        /// Send a ping after this long without receiving anything. Default 30 s.
        pub keepalive_interval: Option<Duration> = Some(Duration::from_secs(30)),
        /// Fail when a keepalive ping has had no answer (no bytes at all) for this long.
        /// Default 30 s (only used with `keepalive_interval`).
        pub pong_timeout: Option<Duration> = Some(Duration::from_secs(30)),
        /// After sending a close, wait this long for the peer's. Default 5 s; `None` waits
        /// without a limit.
        pub close_timeout: Option<Duration> = Some(Duration::from_secs(5)),
        /// Close (1001, "idle timeout") after this long without progress: a complete frame
        /// (a pong to the keepalive ping counts), or 64 KiB of one. Bytes trickling in do not
        /// count, so a peer cannot hold a connection with a byte now and then. Default 120 s.
        pub idle_timeout: Option<Duration> = Some(Duration::from_secs(120)),
        /// A fragmented message must complete within this long after its first frame, or the
        /// connection closes with 1008 ("message not completed in time"): a peer cannot keep
        /// a message, and the memory it holds, open forever. Default 30 s.
        pub message_timeout: Option<Duration> = Some(Duration::from_secs(30)),
        /// How long output may wait for the socket without any of it being written: past
        /// it the peer is taken to have stopped reading, the connection closes with 1008
        /// ("send timed out") and a send that was waiting fails with
        /// [`Timeout::Send`](super::Timeout::Send). It bounds every send (a waiting one, and
        /// what `feed` or `try_send` queued, which a receive writes) without a timer of the
        /// application's own. A peer that reads slowly but steadily is not affected: every
        /// write that makes progress starts the wait again. Default 30 s; `None` waits as
        /// long as the other timers allow.
        pub send_timeout: Option<Duration> = Some(Duration::from_secs(30)),
        /// After a failure (our close frame sent with its code), how long to go on reading and
        /// discarding what the peer still sends before the transport is closed, so that the
        /// peer reads our close code rather than a reset. Ends early at the peer's FIN.
        /// Default 1 s; `None` waits for the FIN.
        pub linger_timeout: Option<Duration> = Some(Duration::from_secs(1)),
        /// Most bytes read and discarded during that linger. Default 64 MiB (nothing is kept:
        /// they cost reading time only).
        pub linger_bytes: usize = 64 << 20,
        /// Most room reserved in the receive buffer in one step for the announced, not yet
        /// received rest of a single-frame message
        /// ([`Connection::reserve_recv`](super::Connection::reserve_recv)): the rest of a frame
        /// up to this size is read straight into place, with no reallocation while it arrives.
        /// Past it, room grows with what has arrived (by at most what the frame has already
        /// delivered), so a peer that announces a large frame and then stalls makes the
        /// connection reserve at most this much. Default 1 MiB.
        pub max_read_ahead: usize = DEFAULT_MAX_READ_AHEAD,
        /// Bytes asked of the socket per read at first. The receive buffer is allocated on
        /// the first read, grows (doubling, up to 256 KiB per read) while a large message
        /// streams in, keeps room for twice what the last read or frame brought (up to
        /// 64 KiB) so that messages of one size arrive in one read each, and is released when the
        /// connection goes idle, so an idle connection holds none. Default 4 KiB (at least
        /// 256).
        pub read_buffer_size: usize = DEFAULT_READ_BUFFER_SIZE,
        /// Bytes the send queue may hold before a non-waiting send answers `QueueFull` and a
        /// waiting send waits. A single message larger than this is still accepted into an
        /// empty queue. Default 256 KiB.
        pub send_queue_high_water: usize = DEFAULT_SEND_QUEUE_HIGH_WATER,
        /// Control frames (pongs, the close echo) that may wait for the socket. When that many
        /// wait, reading stops until the socket takes them, so a ping flood cannot grow
        /// memory. Default 16 (at least 1).
        pub control_queue_capacity: usize = DEFAULT_CONTROL_QUEUE_CAPACITY,
        /// The memory budget this connection shares with others: the bytes of messages being
        /// received (until complete and handed over) count against it. A message that
        /// needs more than it has left waits (the connection stops reading) until memory is
        /// returned, for at most [`budget_wait`](Self::budget_wait); then it is refused
        /// with 1013 ("try again later", [`Error::OverBudget`](super::Error::OverBudget)).
        /// Default [`Budget::shared`]: one budget of 1 GiB for every connection of the
        /// process that keeps the default. `None`: only the per-connection limits apply.
        pub budget: Option<Budget> = Some(Budget::shared()),
        /// How long a connection may wait for memory from its [`budget`](Self::budget)
        /// when the budget is exhausted: it stops reading (TCP flow control holds the peer
        /// back) and goes on as soon as other connections return memory, in the order the
        /// connections began to wait; past this it fails with
        /// [`Error::OverBudget`](super::Error::OverBudget) and closes with 1013. The wait
        /// is counted from its start and ends at the first grant. Default 10 s; zero
        /// refuses at once, without waiting.
        pub budget_wait: Duration = Duration::from_secs(10),
        /// The shutdown signal this connection goes away at: once it is given
        /// ([`Shutdown::trigger`]), the connection sends what it has queued, then a close
        /// with 1001 ("going away"), and waits for the peer's within `close_timeout`.
        /// The accept loops stop at it and wait for their connections. Default `None`.
        pub shutdown: Option<Shutdown> = None,
    }
}

impl Config {
    /// Sets the keepalive: a ping after `interval` without receiving anything, and failure
    /// when nothing answers it within `pong_timeout`. `None` turns it off.
    pub fn with_keepalive(mut self, interval: Option<Duration>, pong_timeout: Duration) -> Self {
        self.keepalive_interval = interval;
        self.pong_timeout = Some(pong_timeout);
        self
    }
    /// Sets [`Config::linger_timeout`] and [`Config::linger_bytes`].
    pub fn with_linger(mut self, t: Option<Duration>, bytes: usize) -> Self {
        self.linger_timeout = t;
        self.linger_bytes = bytes;
        self
    }
}

setters! { Config {
    /// Sets [`Config::max_message_size`] (inflated size when compressed).
    with_max_message_size(bytes: usize) => max_message_size;
    /// Sets [`Config::max_frame_size`].
    with_max_frame_size(bytes: usize) => max_frame_size;
    /// Sets [`Config::max_read_ahead`].
    with_max_read_ahead(bytes: usize) => max_read_ahead;
    /// Sets [`Config::delivery`]: whole messages (default) or chunks as they arrive (for
    /// messages larger than memory).
    with_delivery(delivery: Delivery) => delivery;
    /// Sets [`Config::read_buffer_size`] (at least 256).
    with_read_buffer_size(bytes: usize) => read_buffer_size = bytes.max(256);
    /// Sets [`Config::send_queue_high_water`].
    with_send_queue_high_water(bytes: usize) => send_queue_high_water;
    /// Sets [`Config::control_queue_capacity`] (at least 1).
    with_control_queue_capacity(frames: usize) => control_queue_capacity = frames.max(1);
    /// Sets [`Config::idle_timeout`]: close (1001) after this long without progress.
    with_idle_timeout(t: Option<Duration>) => idle_timeout;
    /// Sets [`Config::message_timeout`].
    with_message_timeout(t: Option<Duration>) => message_timeout;
    /// Sets [`Config::send_timeout`].
    with_send_timeout(t: Option<Duration>) => send_timeout;
    /// Sets [`Config::budget`]: the memory budget shared with other connections (`None`:
    /// none, only the per-connection limits).
    with_budget(budget: Option<Budget>) => budget;
    /// Sets [`Config::budget_wait`]: how long a connection may wait for memory from the
    /// budget before it is refused with 1013 (zero: refused at once).
    with_budget_wait(t: Duration) => budget_wait;
    /// Sets [`Config::shutdown`]: the connection goes away when `shutdown` is triggered.
    with_shutdown(shutdown: &Shutdown) => shutdown = Some(shutdown.clone());
    /// Sets [`Config::close_timeout`]: how long to wait for the peer's close after ours
    /// (and for the transport to close after the close handshake).
    with_close_timeout(t: Duration) => close_timeout = Some(t);
} }
