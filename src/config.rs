//! The settings of a server and of a client, one set for every IO layer (tokio, blocking,
//! TLS, hyper/axum): the connection's [`Config`], the handshake's settings, and what the
//! accept and connect sides add. Every limit has a safe default.

#[cfg(feature = "rustls")]
use std::sync::Arc;
use std::time::Duration;

use crate::connection::{Config, Shutdown};
#[cfg(feature = "deflate")]
use crate::deflate::DeflateConfig;
use crate::handshake::{self, ClientRequest};
#[cfg(feature = "proxy")]
use crate::proxy::Proxy;

/// Default of [`ServerConfig::handshake_timeout`] and [`ClientConfig::handshake_timeout`]:
/// 10 s.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Settings of a server: each connection's settings, the handshake's, and accept-side
/// limits.
#[derive(Clone)]
#[non_exhaustive]
pub struct ServerConfig {
    /// Settings of each accepted connection.
    pub connection: Config,
    /// Handshake settings: request size limits, subprotocols, origin check and
    /// permessage-deflate acceptance.
    pub handshake: handshake::ServerConfig,
    /// Time allowed for the opening handshake (TLS included where the layer runs it).
    /// Default 10 s. The blocking layer bounds it with the socket's read timeout instead.
    pub handshake_timeout: Option<Duration>,
    /// Connections handled at once by an accept loop (`tokio::serve`,
    /// `handler::serve_handler`); further TCP connections wait in the listen backlog until
    /// one ends. Default 10 000.
    pub max_connections: usize,
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("connection", &self.connection)
            .field("handshake_timeout", &self.handshake_timeout)
            .field("max_connections", &self.max_connections)
            .finish_non_exhaustive()
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            connection: Config::default(),
            handshake: handshake::ServerConfig::default(),
            handshake_timeout: Some(DEFAULT_HANDSHAKE_TIMEOUT),
            max_connections: 10_000,
        }
    }
}

impl ServerConfig {
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

impl ServerConfig {
    /// Sets the shutdown signal of every connection ([`Config::shutdown`]): at
    /// [`Shutdown::trigger`] each goes away (its queued messages, then a close with 1001),
    /// and the accept loops (`tokio::serve`, `handler::serve_handler`) stop accepting and
    /// return once their connections are gone.
    pub fn with_shutdown(mut self, shutdown: &Shutdown) -> Self {
        self.connection.shutdown = Some(shutdown.clone());
        self
    }

    /// For an accept loop: the shutdown signal, and how long to wait for the connections
    /// after it: twice the close timeout (the flush and the peer's close within one, the
    /// transport's close within the other), none without one.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn shutdown_limit(&self) -> (Option<Shutdown>, Option<Duration>) {
        let c = &self.connection;
        (
            c.shutdown.clone(),
            c.close_timeout.map(|t| t.saturating_mul(2)),
        )
    }
}

setters! { ServerConfig {
    /// Sets the per-connection settings.
    with_connection(connection: Config) => connection;
    /// Sets [`ServerConfig::max_connections`] (at least 1).
    with_max_connections(n: usize) => max_connections = n.max(1);
    /// Sets [`ServerConfig::handshake_timeout`].
    with_handshake_timeout(t: Option<Duration>) => handshake_timeout;
} }

/// Settings of a client: the connection's settings, the handshake's, and connect-side
/// options.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ClientConfig {
    /// Settings of the connection once open.
    pub connection: Config,
    /// Handshake settings: response size limits and the permessage-deflate offer.
    pub handshake: handshake::ClientConfig,
    /// Time allowed for DNS resolution plus the TCP connect (every resolved address is
    /// tried in turn within it), and for a proxy to open its tunnel. Default 10 s.
    pub connect_timeout: Duration,
    /// Time allowed for the opening handshake (TLS included). Default 10 s.
    pub handshake_timeout: Option<Duration>,
    /// The socket's read timeout, set by the blocking client: a blocking call that waits
    /// this long for the peer returns a timeout error that may be retried. Default 30 s.
    pub read_timeout: Option<Duration>,
    /// The socket's write timeout, set by the blocking client. Default 30 s.
    pub write_timeout: Option<Duration>,
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
    /// The rustls configuration for `wss://` URLs (feature `rustls`): your roots, client
    /// certificate or ALPN. Default `None`:
    /// [`tls::default_client_config`](crate::tls::default_client_config) (ring, Mozilla's
    /// roots), built when a `wss://` connection opens.
    #[cfg(feature = "rustls")]
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            connection: Config::default(),
            handshake: handshake::ClientConfig::default(),
            connect_timeout: Duration::from_secs(10),
            handshake_timeout: Some(DEFAULT_HANDSHAKE_TIMEOUT),
            read_timeout: Some(Duration::from_secs(30)),
            write_timeout: Some(Duration::from_secs(30)),
            nodelay: true,
            subprotocols: Vec::new(),
            headers: Vec::new(),
            origin: None,
            #[cfg(feature = "proxy")]
            proxy: Proxy::none(),
            #[cfg(feature = "rustls")]
            tls: None,
        }
    }
}

impl ClientConfig {
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
    /// The rustls configuration a `wss://` connection uses: `explicit`, else
    /// [`ClientConfig::tls`], else the default one.
    #[cfg(feature = "rustls")]
    #[cfg_attr(
        not(any(feature = "tokio-rustls", feature = "blocking")),
        allow(dead_code)
    )]
    pub(crate) fn tls_config(
        &self,
        explicit: Option<Arc<rustls::ClientConfig>>,
    ) -> Result<Arc<rustls::ClientConfig>, crate::tls::TlsConfigError> {
        match explicit.or_else(|| self.tls.clone()) {
            Some(t) => Ok(t),
            None => crate::tls::default_client_config(),
        }
    }

    /// The upgrade request for `host` (the `Host` header) and `path` (with query), with
    /// what this configuration adds: the subprotocols to offer, extra header fields and
    /// the `Origin`.
    pub fn request(&self, host: &str, path: &str) -> ClientRequest {
        let mut request = ClientRequest::new(host, path);
        for p in &self.subprotocols {
            request = request.subprotocol(p.as_str());
        }
        for (name, value) in &self.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        if let Some(origin) = &self.origin {
            request = request.origin(origin.as_str());
        }
        request
    }
}

setters! { ClientConfig {
    /// Sets the per-connection settings.
    with_connection(connection: Config) => connection;
    /// Sets [`ClientConfig::connect_timeout`].
    with_connect_timeout(t: Duration) => connect_timeout;
    /// Sets [`ClientConfig::handshake_timeout`].
    with_handshake_timeout(t: Option<Duration>) => handshake_timeout;
    /// Sets [`ClientConfig::read_timeout`] (the blocking client's socket read timeout).
    with_read_timeout(t: Option<Duration>) => read_timeout;
    /// Sets the `Origin` header to send.
    with_origin(origin: impl Into<String>) => origin = Some(origin.into());
    /// Sets [`ClientConfig::proxy`] (feature `proxy`).
    #[cfg(feature = "proxy")]
    with_proxy(proxy: Proxy) => proxy;
    /// Sets the rustls configuration [`ClientConfig::tls`] for `wss://` URLs (feature
    /// `rustls`); build it with [`crate::tls`] or with the re-exported
    /// [`crate::tls::rustls`], so its version matches.
    #[cfg(feature = "rustls")]
    with_tls(tls: Arc<rustls::ClientConfig>) => tls = Some(tls);
} }
