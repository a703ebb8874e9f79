//! `wss://` on tokio (feature `tokio-rustls`): [`connect`](super::connect) takes `wss://`
//! URLs, [`connect_tls`](super::connect_tls) is the explicit client, and [`accept_tls`](super::accept_tls) the server helper,
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

use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::ServerName;

use crate::config::ClientConfig;
use crate::error::Error;
use crate::url::{UrlError, WsUrl};

pub use tokio_rustls::TlsAcceptor;
pub use tokio_rustls::client::TlsStream;
/// The server side of a TLS stream, as [`accept_tls`](super::accept_tls) returns it.
pub use tokio_rustls::server::TlsStream as ServerTlsStream;

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
