//! `wss://` on tokio (feature `tokio-rustls`): [`connect`](super::connect) takes `wss://`
//! URLs, [`connect_tls`] is the explicit client, and [`accept_tls`] the server helper,
//! over tokio-rustls with the rustls configurations of [`crate::tls`].
//!
//! ```no_run
//! use rapidws::tokio::{ClientConfig, Message, connect};
//!
//! # async fn run() -> Result<(), rapidws::Error> {
//! // ws:// or wss://, one call and one stream type (`MaybeTlsStream`).
//! let mut ws = connect("wss://example.com/chat", &ClientConfig::default()).await?;
//! ws.send(Message::text("hello")).await?;
//! # Ok(())
//! # }
//! ```
//!
//! Private roots, a client certificate or ALPN go in a rustls configuration set with
//! [`ClientConfig::with_tls`]; build it with the re-exported
//! [`rapidws::tls::rustls`](crate::tls::rustls) so the versions match.
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
use crate::error::Error;
use crate::handshake::{Request, Response};
use crate::url::{UrlError, WsUrl};

use super::client::{handshake, open_stream, within};
use super::ws::WebSocket;
use crate::handshake::Reject;

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
    accept_tls_with(acceptor, stream, config, |_| Ok(())).await
}

/// [`accept_tls`], letting `check` inspect the request (path, headers, origin; the TLS
/// session is established by then) and refuse it with an HTTP status, or accept it adding
/// response headers, as [`accept_with`](super::accept_with) does.
pub async fn accept_tls_with<S, F, H>(
    acceptor: &TlsAcceptor,
    stream: S,
    config: &ServerConfig,
    check: F,
) -> Result<WebSocket<ServerTlsStream<S>>, Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
    F: FnOnce(&Request) -> Result<H, Reject>,
    H: crate::handshake::ResponseHeaders,
{
    within(config.handshake_timeout, async {
        let tls = acceptor.accept(stream).await?;
        super::server::handshake(tls, config, check, None).await
    })
    .await
}

/// Connects to a `wss://host[:port]/path` URL: TCP (directly, or through the
/// configured proxy with feature `proxy`; within [`ClientConfig::connect_timeout`]),
/// TLS with `tls` (else [`ClientConfig::tls`], else
/// [`default_client_config`](crate::tls::default_client_config)) and the opening
/// handshake (the two within the handshake timeout). The certificate is checked against
/// the URL's host.
///
/// [`connect`](super::connect) takes `wss://` URLs too and returns one stream type for
/// both schemes; this is the explicit form, returning the TLS stream itself.
pub async fn connect_tls(
    url: &str,
    config: &ClientConfig,
    tls: Option<Arc<rustls::ClientConfig>>,
) -> Result<WebSocket<TlsStream<TcpStream>>, Error> {
    connect_tls_with_response(url, config, tls)
        .await
        .map(|(ws, _)| ws)
}

/// [`connect_tls`], returning the server's response too (see
/// [`connect_with_response`](super::connect_with_response)).
pub async fn connect_tls_with_response(
    url: &str,
    config: &ClientConfig,
    tls: Option<Arc<rustls::ClientConfig>>,
) -> Result<(WebSocket<TlsStream<TcpStream>>, Response), Error> {
    let url = WsUrl::parse(url)?;
    if !url.secure {
        return Err(Error::Url(UrlError::NotSecure));
    }
    let (tls, name) = prepare(&url, config, tls)?;
    let tcp = open_stream(&url.host, url.port, true, config).await?;
    within(config.handshake_timeout, async {
        let stream = tls_handshake(tls, name, tcp).await?;
        handshake(stream, &url.host_header(), &url.resource, config).await
    })
    .await
}

/// The rustls configuration and the name the certificate must carry, checked before any
/// connection is opened.
pub(crate) fn prepare(
    url: &WsUrl,
    config: &ClientConfig,
    tls: Option<Arc<rustls::ClientConfig>>,
) -> Result<(Arc<rustls::ClientConfig>, ServerName<'static>), Error> {
    let tls = config
        .tls_config(tls)
        .map_err(|e| Error::Io(io::Error::other(e)))?;
    let name = ServerName::try_from(url.host.clone()).map_err(|_| Error::Url(UrlError::BadHost))?;
    Ok((tls, name))
}

/// The client's TLS handshake over `tcp`. A server that answers in plain text (a `ws://`
/// or HTTP server) fails here at once, with an error saying it did not answer TLS.
pub(crate) async fn tls_handshake(
    tls: Arc<rustls::ClientConfig>,
    name: ServerName<'static>,
    tcp: TcpStream,
) -> Result<TlsStream<TcpStream>, Error> {
    TlsConnector::from(tls)
        .connect(name, tcp)
        .await
        .map_err(|e| Error::Io(crate::tls::explain_handshake_error(e)))
}
