//! `wss://` for the blocking client over rustls (feature `rustls`): rustls's own blocking
//! stream, no async runtime.

use std::io;
use std::net::TcpStream;
use std::sync::Arc;

use rustls::pki_types::ServerName;
use rustls::{ClientConnection, StreamOwned};

use crate::config::ClientConfig;
use crate::error::Error;
use crate::url::{UrlError, WsUrl};

use super::client::{handshake, open_stream};
use super::ws::WebSocket;

/// A blocking `wss://` stream: rustls's own blocking TLS stream over TCP (feature
/// `rustls`).
pub type TlsStream = StreamOwned<ClientConnection, TcpStream>;

/// Connects to a `wss://host[:port]/path` URL (feature `rustls`): TCP as
/// [`connect`](super::connect) does (the socket's read and write timeouts bound the TLS
/// handshake too), TLS with `tls` (else [`ClientConfig::tls`], else
/// [`tls::default_client_config`](crate::tls::default_client_config): ring provider,
/// Mozilla's roots), then the opening handshake. The certificate is checked against the
/// URL's host; a failed check is [`Error::Io`] (kind `InvalidData`) naming the
/// certificate problem, and a server that answers in plain text says "server did not
/// answer TLS".
///
/// [`connect`](super::connect) takes `wss://` URLs too, with one stream type for both
/// schemes; this is the explicit form, returning the TLS stream itself.
pub fn connect_tls(
    url: &str,
    config: &ClientConfig,
    tls: Option<Arc<rustls::ClientConfig>>,
) -> Result<WebSocket<TlsStream>, Error> {
    let url = WsUrl::parse(url)?;
    if !url.secure {
        return Err(Error::Url(UrlError::NotSecure));
    }
    let stream = open_tls(&url, config, tls)?;
    handshake(stream, &url.host_header(), &url.resource, config).map(|(ws, _)| ws)
}

/// TCP and the TLS handshake to a `wss://` URL's host.
pub(super) fn open_tls(
    url: &WsUrl,
    config: &ClientConfig,
    tls: Option<Arc<rustls::ClientConfig>>,
) -> Result<TlsStream, Error> {
    let tls = config
        .tls_config(tls)
        .map_err(|e| Error::Io(io::Error::other(e)))?;
    let name = ServerName::try_from(url.host.clone()).map_err(|_| Error::Url(UrlError::BadHost))?;
    let conn = ClientConnection::new(tls, name).map_err(|e| Error::Io(io::Error::other(e)))?;
    let tcp = open_stream(&url.host, url.port, true, config)?;
    let mut stream = StreamOwned::new(conn, tcp);
    // Finish the TLS handshake here, so a certificate problem (or a server that does not
    // speak TLS) is reported as such rather than as a failed write of the upgrade request.
    while stream.conn.is_handshaking() {
        stream
            .conn
            .complete_io(&mut stream.sock)
            .map_err(crate::tls::explain_handshake_error)?;
    }
    Ok(stream)
}
