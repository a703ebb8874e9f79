//! The WebSocket protocol's types, with tungstenite's names: [`Message`], [`CloseFrame`],
//! [`Role`], [`WebSocketConfig`], the blocking [`WebSocket`].

mod coding;
pub mod frame;
mod message;
pub(crate) mod websocket;

pub use frame::CloseFrame;
pub use message::Message;
pub(crate) use message::{close_for_rapidws, unsendable_frame};
pub use websocket::WebSocket;

/// Which end of the connection this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The end that accepted the upgrade.
    Server,
    /// The end that asked for it.
    Client,
}

impl From<Role> for rapidws::Role {
    fn from(r: Role) -> Self {
        match r {
            Role::Server => rapidws::Role::Server,
            Role::Client => rapidws::Role::Client,
        }
    }
}

/// A connection's settings, tungstenite's fields and defaults.
///
/// The size limits are rapidws's own limits ([`rapidws::Config::max_message_size`] and
/// [`max_frame_size`](rapidws::Config::max_frame_size)), refused with close code 1009;
/// `None` lifts them. The buffer sizes are hints rapidws does without: it sizes its
/// buffers to the traffic and applies backpressure at a send queue's high-water mark
/// (a waiting send, never [`Error::WriteBufferFull`](crate::tungstenite::Error::WriteBufferFull)).
/// `accept_unmasked_frames` is not supported: a client's unmasked frame is a protocol
/// error (RFC 6455 5.1), as it is with tungstenite's default.
///
/// The connection runs with rapidws's other defaults except the timers tungstenite does
/// not have: no keepalive pings and no idle timeout (a quiet connection stays open). The
/// close, send and fragmented-message timers stay (5 s for the peer's close after ours,
/// 30 s for a peer that stopped reading, 30 s to finish a fragmented message), as does
/// the memory budget shared by all connections (1 GiB, 1013 past it). To set any of them,
/// open the connection with rapidws and wrap it:
/// [`WebSocketStream::from_rapidws`](crate::WebSocketStream::from_rapidws).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct WebSocketConfig {
    /// Read buffer capacity, a hint (rapidws sizes its buffer to the traffic). Default
    /// 128 KiB.
    pub read_buffer_size: usize,
    /// Bytes to buffer before writing, a hint (rapidws writes many frames per write when
    /// they queue). Default 128 KiB.
    pub write_buffer_size: usize,
    /// Kept for tungstenite's API: rapidws's send queue waits at its high-water mark
    /// instead of failing. Default unlimited.
    pub max_write_buffer_size: usize,
    /// Largest message received, `None` for no limit. Default 64 MiB.
    pub max_message_size: Option<usize>,
    /// Largest frame payload received, `None` for no limit. Default 16 MiB.
    pub max_frame_size: Option<usize>,
    /// Not supported: unmasked frames from a client are always refused (1002).
    pub accept_unmasked_frames: bool,
}

impl Default for WebSocketConfig {
    fn default() -> Self {
        WebSocketConfig {
            read_buffer_size: 128 * 1024,
            write_buffer_size: 128 * 1024,
            max_write_buffer_size: usize::MAX,
            max_message_size: Some(64 << 20),
            max_frame_size: Some(16 << 20),
            accept_unmasked_frames: false,
        }
    }
}

impl WebSocketConfig {
    /// Sets [`Self::read_buffer_size`].
    pub fn read_buffer_size(mut self, read_buffer_size: usize) -> Self {
        self.read_buffer_size = read_buffer_size;
        self
    }

    /// Sets [`Self::write_buffer_size`].
    pub fn write_buffer_size(mut self, write_buffer_size: usize) -> Self {
        self.write_buffer_size = write_buffer_size;
        self
    }

    /// Sets [`Self::max_write_buffer_size`].
    pub fn max_write_buffer_size(mut self, max_write_buffer_size: usize) -> Self {
        self.max_write_buffer_size = max_write_buffer_size;
        self
    }

    /// Sets [`Self::max_message_size`].
    pub fn max_message_size(mut self, max_message_size: Option<usize>) -> Self {
        self.max_message_size = max_message_size;
        self
    }

    /// Sets [`Self::max_frame_size`].
    pub fn max_frame_size(mut self, max_frame_size: Option<usize>) -> Self {
        self.max_frame_size = max_frame_size;
        self
    }

    /// Sets [`Self::accept_unmasked_frames`] (not supported; see the type's docs).
    pub fn accept_unmasked_frames(mut self, accept_unmasked_frames: bool) -> Self {
        self.accept_unmasked_frames = accept_unmasked_frames;
        self
    }

    /// The rapidws connection settings these stand for.
    pub fn to_rapidws(&self) -> rapidws::Config {
        let mut c = rapidws::Config::default();
        c.max_message_size = self.max_message_size.unwrap_or(usize::MAX);
        c.max_frame_size = self.max_frame_size.unwrap_or(usize::MAX);
        c.keepalive_interval = None;
        c.idle_timeout = None;
        // The peer's close is echoed by this crate, as tungstenite does: with its code and
        // reason (rapidws echoes the code only).
        c.auto_close = false;
        c
    }
}
