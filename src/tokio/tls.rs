//! `wss://` on tokio (feature `tokio-rustls`): a client ([`connect_tls`]) and a server
//! helper ([`accept_tls`]) over tokio-rustls, with the rustls configurations of
//! [`crate::tls`].
//!
//! ```no_run
//! use rapidws::tokio::{ClientConfig, Message, connect_tls};
//!
//! # async fn run() -> Result<(), rapidws::Error> {
//! let mut ws = connect_tls("wss://example.com/chat", &ClientConfig::default(), None).await?;
//! ws.send(Message::text("hello")).await?;
//! # Ok(())
//! # }
//! ```
//!
//! A server builds a [`TlsAcceptor`] once (for example with
//! [`server_config_from_pem`](crate::tls::server_config_from_pem)) and hands each accepted
//! TCP stream to [`accept_tls`]:
//!
//! ```no_run
//! use rapidws::tls::server_config_from_pem;
//! use rapidws::tokio::{ServerConfig, TlsAcceptor, accept_tls};
//!
//! # async fn run(cert_pem: &[u8], key_pem: &[u8]) -> Result<(), Box<dyn std::error::Error>> {
//! let acceptor = TlsAcceptor::from(server_config_from_pem(cert_pem, key_pem)?);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:9443").await?;
//! let (tcp, _) = listener.accept().await?;
//! let mut ws = accept_tls(&acceptor, tcp, &ServerConfig::default()).await?;
//! # Ok(())
//! # }
//! ```

use std::io;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::ServerName;

use crate::config::{ClientConfig, ServerConfig};
use crate::error::{Error, Timeout};
use crate::tls::default_client_config;
use crate::url::{UrlError, WsUrl};

use super::client::{client_handshake, open_stream};
use super::ws::WebSocket;

pub use tokio_rustls::TlsAcceptor;
pub use tokio_rustls::client::TlsStream;
/// The server side of a TLS stream, as [`accept_tls`] returns it.
pub use tokio_rustls::server::TlsStream as ServerTlsStream;

/// Accepts a `wss://` connection on `stream` (a freshly accepted TCP stream, or any
/// byte stream): the TLS handshake with `acceptor`, then the WebSocket opening handshake
/// (see [`accept`](super::accept)), the two together within
/// [`ServerConfig::handshake_timeout`].
pub async fn accept_tls<S>(
    acceptor: &TlsAcceptor,
    stream: S,
    config: &ServerConfig,
) -> Result<WebSocket<ServerTlsStream<S>>, Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let both = async {
        let tls = acceptor.accept(stream).await?;
        super::accept(tls, config).await
    };
    match config.handshake_timeout {
        Some(t) => tokio::time::timeout(t, both)
            .await
            .map_err(|_| Error::Timeout(Timeout::Handshake))?,
        None => both.await,
    }
}

/// Connects to a `wss://host[:port]/path` URL: TCP (directly, or through the
/// configured proxy with feature `proxy`; within [`ClientConfig::connect_timeout`]),
/// TLS with `tls` (or [`default_client_config`]) and the opening handshake (the two
/// within the handshake timeout). The certificate is checked against the URL's host.
pub async fn connect_tls(
    url: &str,
    config: &ClientConfig,
    tls: Option<Arc<rustls::ClientConfig>>,
) -> Result<WebSocket<TlsStream<TcpStream>>, Error> {
    let url = WsUrl::parse(url)?;
    if !url.secure {
        return Err(Error::Url(UrlError::NotSecure));
    }
    let tls = match tls {
        Some(t) => t,
        None => default_client_config().map_err(|e| Error::Io(io::Error::other(e)))?,
    };
    let name = ServerName::try_from(url.host.clone()).map_err(|_| Error::Url(UrlError::BadHost))?;
    let tcp = open_stream(&url.host, url.port, true, config).await?;
    let both = async {
        let stream = TlsConnector::from(tls).connect(name, tcp).await?;
        client_handshake(stream, &url.host_header(), &url.resource, config).await
    };
    // `client_handshake` bounds its own part; this bounds the TLS handshake too.
    match config.handshake_timeout {
        Some(t) => tokio::time::timeout(t, both)
            .await
            .map_err(|_| Error::Timeout(Timeout::Handshake))?,
        None => both.await,
    }
}
