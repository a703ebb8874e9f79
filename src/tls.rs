//! `wss://` clients over rustls (feature `rustls`).
//!
//! The crypto provider (ring) is chosen when the rustls configuration is built, so no
//! process-wide `CryptoProvider` has to be installed first. [`default_client_config`]
//! trusts Mozilla's roots (webpki-roots); pass your own configuration to
//! [`connect_tls`] for private roots or client certificates.
//!
//! ```no_run
//! use rapidws::tokio::{ClientConfig, Message};
//!
//! # async fn run() -> Result<(), rapidws::tokio::Error> {
//! let mut ws = rapidws::tls::connect_tls("wss://example.com/chat", &ClientConfig::default(), None).await?;
//! ws.send(Message::text("hello")).await?;
//! # Ok(())
//! # }
//! ```

use std::io;
use std::sync::Arc;

use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::ServerName;

use crate::handshake::ClientRequest;
use crate::tokio::{ClientConfig, Error, Timeout, UrlError, WebSocket, client_handshake};

pub use tokio_rustls::client::TlsStream;

/// A rustls client configuration on the ring provider that trusts Mozilla's roots.
pub fn default_client_config() -> Result<Arc<rustls::ClientConfig>, Error> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    client_config_with_roots(roots)
}

/// A rustls client configuration on the ring provider that trusts `roots` only.
pub fn client_config_with_roots(
    roots: rustls::RootCertStore,
) -> Result<Arc<rustls::ClientConfig>, Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Io(io::Error::other(e)))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Connects to a `wss://host[:port]/path` URL: TCP (within
/// [`ClientConfig::connect_timeout`]), TLS with `tls` (or [`default_client_config`]),
/// then the opening handshake. The certificate is checked against the URL's host.
pub async fn connect_tls(
    url: &str,
    config: &ClientConfig,
    tls: Option<Arc<rustls::ClientConfig>>,
) -> Result<WebSocket<TlsStream<TcpStream>>, Error> {
    let (_, target) = ClientRequest::from_url(url).map_err(Error::ClientHandshake)?;
    if !target.secure {
        return Err(Error::Url(UrlError::UnsupportedScheme));
    }
    let tls = match tls {
        Some(t) => t,
        None => default_client_config()?,
    };
    let name =
        ServerName::try_from(target.host.clone()).map_err(|_| Error::Url(UrlError::BadHost))?;
    let tcp = tokio::time::timeout(
        config.connect_timeout,
        TcpStream::connect((target.host.as_str(), target.port)),
    )
    .await
    .map_err(|_| Error::Timeout(Timeout::Connect))??;
    if config.nodelay {
        tcp.set_nodelay(true)?;
    }
    let stream = TlsConnector::from(tls).connect(name, tcp).await?;
    // `from_url` validated the URL; the Host header and resource come from it as written.
    let rest = &url["wss://".len()..];
    let split = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, resource) = rest.split_at(split);
    let resource = match resource {
        "" => "/".to_owned(),
        r if r.starts_with('?') => format!("/{r}"),
        r => r.to_owned(),
    };
    let host = match authority.strip_suffix(":443") {
        Some(h) => h,
        None => authority,
    };
    client_handshake(stream, host, &resource, config).await
}
