//! Settings for connections, servers and clients. Every limit has a safe default.

use std::time::Duration;

use crate::connection;
#[cfg(feature = "deflate")]
use crate::deflate::DeflateConfig;
use crate::handshake;

#[cfg(feature = "proxy")]
use crate::proxy::Proxy;

/// Settings of one WebSocket connection (either role).
///
/// The protocol settings (size limits, keepalive, idle and close timeouts, delivery mode)
/// are the sans-IO core's [`connection::Config`]; the rest is about IO. Start from
/// [`Config::default`] and change what you need, or chain the `with_*` setters.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Config {
    /// Protocol settings of the core connection. This layer's defaults differ from the
    /// core's in two ways: a keepalive ping after 30 s of silence (a silent peer is
    /// dropped after `pong_timeout`, 30 s) and a 16 MiB message limit.
    pub protocol: connection::Config,
    /// Bytes asked of the socket per read at first. The receive buffer is allocated on the
    /// first read, grows (doubling, up to 256 KiB per read) while a large message streams
    /// in, and is released whenever it is empty and the socket has nothing more, so an
    /// idle connection holds none. Once the header of a single-frame message has arrived,
    /// room for the rest of the frame is reserved in one step (up to
    /// [`connection::Config::max_read_ahead`]) and the payload is read straight into
    /// place. Default 4 KiB.
    pub read_buffer_size: usize,
    /// Bytes the send queue may hold before `try_send` answers `QueueFull` and `send`
    /// waits. A single message larger than this is still accepted into an empty queue.
    /// Default 256 KiB.
    pub send_queue_high_water: usize,
    /// Control frames (pongs, the close echo) that may wait for the socket. When that many
    /// wait, reading stops until the socket takes them, so a ping flood cannot grow
    /// memory. Default 16.
    pub control_queue_capacity: usize,
    /// Time allowed for the opening handshake. Default 10 s.
    pub handshake_timeout: Option<Duration>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            protocol: connection::Config {
                max_message_size: 16 << 20,
                keepalive_interval: Some(Duration::from_secs(30)),
                ..connection::Config::default()
            },
            read_buffer_size: 4096,
            send_queue_high_water: 256 << 10,
            control_queue_capacity: 16,
            handshake_timeout: Some(Duration::from_secs(10)),
        }
    }
}

impl Config {
    /// Sets the largest message accepted (inflated size when compressed).
    pub fn with_max_message_size(mut self, bytes: usize) -> Self {
        self.protocol.max_message_size = bytes;
        self
    }
    /// Sets the largest frame accepted.
    pub fn with_max_frame_size(mut self, bytes: usize) -> Self {
        self.protocol.max_frame_size = bytes;
        self
    }
    /// Sets the most room reserved at once for the announced, not yet received rest of
    /// a large frame ([`connection::Config::max_read_ahead`], default 1 MiB).
    pub fn with_max_read_ahead(mut self, bytes: usize) -> Self {
        self.protocol.max_read_ahead = bytes;
        self
    }
    /// Sets how data messages are delivered: whole (default) or in chunks as they arrive
    /// (for messages larger than memory; read them with
    /// [`recv_stream`](super::WebSocket::recv_stream)).
    pub fn with_delivery(mut self, delivery: connection::Delivery) -> Self {
        self.protocol.delivery = delivery;
        self
    }
    /// Sets [`Config::read_buffer_size`].
    pub fn with_read_buffer_size(mut self, bytes: usize) -> Self {
        self.read_buffer_size = bytes.max(256);
        self
    }
    /// Sets [`Config::send_queue_high_water`].
    pub fn with_send_queue_high_water(mut self, bytes: usize) -> Self {
        self.send_queue_high_water = bytes;
        self
    }
    /// Sets [`Config::control_queue_capacity`] (at least 1).
    pub fn with_control_queue_capacity(mut self, frames: usize) -> Self {
        self.control_queue_capacity = frames.max(1);
        self
    }
    /// Sets [`Config::handshake_timeout`].
    pub fn with_handshake_timeout(mut self, t: Option<Duration>) -> Self {
        self.handshake_timeout = t;
        self
    }
    /// Sets the keepalive: a ping after `interval` without receiving anything, and failure
    /// when nothing answers it within `pong_timeout`. `None` turns it off.
    pub fn with_keepalive(mut self, interval: Option<Duration>, pong_timeout: Duration) -> Self {
        self.protocol.keepalive_interval = interval;
        self.protocol.pong_timeout = Some(pong_timeout);
        self
    }
    /// Sets the idle timeout: close (1001) after this long without receiving anything.
    pub fn with_idle_timeout(mut self, t: Option<Duration>) -> Self {
        self.protocol.idle_timeout = t;
        self
    }
    /// Sets how long to wait for the peer's close after ours (and for the TCP close after
    /// the close handshake).
    pub fn with_close_timeout(mut self, t: Duration) -> Self {
        self.protocol.close_timeout = Some(t);
        self
    }
}

/// Settings of a server: the connection settings, the handshake settings and accept-side
/// limits.
#[derive(Clone)]
#[non_exhaustive]
pub struct ServerConfig {
    /// Settings of each accepted connection.
    pub connection: Config,
    /// Handshake settings: request size limits, subprotocols, origin check and
    /// permessage-deflate acceptance.
    pub handshake: handshake::ServerConfig,
    /// Connections handled at once by [`serve`](super::serve); further TCP connections
    /// wait in the listen backlog until one ends. Default 10 000.
    pub max_connections: usize,
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("connection", &self.connection)
            .field("max_connections", &self.max_connections)
            .finish_non_exhaustive()
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            connection: Config::default(),
            handshake: handshake::ServerConfig::default(),
            max_connections: 10_000,
        }
    }
}

impl ServerConfig {
    /// Sets the per-connection settings.
    pub fn with_connection(mut self, connection: Config) -> Self {
        self.connection = connection;
        self
    }
    /// Sets [`ServerConfig::max_connections`] (at least 1).
    pub fn with_max_connections(mut self, n: usize) -> Self {
        self.max_connections = n.max(1);
        self
    }
    /// Sets the subprotocols the server speaks, most preferred first.
    pub fn with_subprotocols<I: IntoIterator<Item = S>, S: Into<String>>(mut self, p: I) -> Self {
        self.handshake.subprotocols = p.into_iter().map(Into::into).collect();
        self
    }
    /// Accepts permessage-deflate offers with these settings (`None`: ignore offers).
    #[cfg(feature = "deflate")]
    pub fn with_deflate(mut self, deflate: Option<DeflateConfig>) -> Self {
        self.handshake.deflate = deflate;
        self
    }
}

/// Settings of a client: the connection settings plus connect-side options.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ClientConfig {
    /// Settings of the connection once open.
    pub connection: Config,
    /// Handshake settings: response size limits and the permessage-deflate offer.
    pub handshake: handshake::ClientConfig,
    /// Time allowed for DNS resolution plus the TCP connect (every resolved address is
    /// tried in turn within it). Default 10 s.
    pub connect_timeout: Duration,
    /// Set `TCP_NODELAY` on the socket. Default true: the library batches writes itself.
    pub nodelay: bool,
    /// Subprotocols to offer (`Sec-WebSocket-Protocol`), most preferred first.
    pub subprotocols: Vec<String>,
    /// Extra request headers, for example `Authorization`.
    pub headers: Vec<(String, String)>,
    /// An `Origin` header to send.
    pub origin: Option<String>,
    /// The proxy to connect through (feature `proxy`). Default [`Proxy::none`]: direct,
    /// whatever the environment says; [`Proxy::from_env`] follows `https_proxy` & co.
    #[cfg(feature = "proxy")]
    pub proxy: Proxy,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            connection: Config::default(),
            handshake: handshake::ClientConfig::default(),
            connect_timeout: Duration::from_secs(10),
            nodelay: true,
            subprotocols: Vec::new(),
            headers: Vec::new(),
            origin: None,
            #[cfg(feature = "proxy")]
            proxy: Proxy::none(),
        }
    }
}

impl ClientConfig {
    /// Sets the per-connection settings.
    pub fn with_connection(mut self, connection: Config) -> Self {
        self.connection = connection;
        self
    }
    /// Sets [`ClientConfig::connect_timeout`].
    pub fn with_connect_timeout(mut self, t: Duration) -> Self {
        self.connect_timeout = t;
        self
    }
    /// Sets the subprotocols to offer.
    pub fn with_subprotocols<I: IntoIterator<Item = S>, S: Into<String>>(mut self, p: I) -> Self {
        self.subprotocols = p.into_iter().map(Into::into).collect();
        self
    }
    /// Adds a request header.
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
    /// Offers permessage-deflate with these settings (`None`: no offer).
    #[cfg(feature = "deflate")]
    pub fn with_deflate(mut self, deflate: Option<DeflateConfig>) -> Self {
        self.handshake.deflate = deflate;
        self
    }
    /// Sets [`ClientConfig::proxy`] (feature `proxy`).
    #[cfg(feature = "proxy")]
    pub fn with_proxy(mut self, proxy: Proxy) -> Self {
        self.proxy = proxy;
        self
    }
}
