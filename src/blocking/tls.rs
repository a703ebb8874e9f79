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

use super::client::{open_stream, run_client_handshake};
use super::ws::WebSocket;

/// A blocking `wss://` stream: rustls's own blocking TLS stream over TCP (feature
/// `rustls`).
pub type TlsStream = StreamOwned<ClientConnection, TcpStream>;

/// Connects to a `wss://host[:port]/path` URL (feature `rustls`): TCP as
/// [`connect`](super::connect) does (the socket's read and write timeouts bound the TLS
/// handshake too), TLS with `tls` (or
/// [`tls::default_client_config`](crate::tls::default_client_config): ring provider,
/// Mozilla's roots), then the opening handshake. The certificate is checked against the
/// URL's host; a failed check is [`Error::Io`] (kind `InvalidData`) naming the
/// certificate problem.
pub fn connect_tls(
    url: &str,
    config: &ClientConfig,
    tls: Option<Arc<rustls::ClientConfig>>,
) -> Result<WebSocket<TlsStream>, Error> {
    let url = WsUrl::parse(url)?;
    if !url.secure {
        return Err(Error::Url(UrlError::NotSecure));
    }
    let tls = match tls {
        Some(t) => t,
        None => crate::tls::default_client_config().map_err(|e| Error::Io(io::Error::other(e)))?,
    };
    let name = ServerName::try_from(url.host.clone()).map_err(|_| Error::Url(UrlError::BadHost))?;
    let conn = ClientConnection::new(tls, name).map_err(|e| Error::Io(io::Error::other(e)))?;
    let tcp = open_stream(&url.host, url.port, true, config)?;
    let mut stream = StreamOwned::new(conn, tcp);
    // Finish the TLS handshake here, so a certificate problem is reported as such rather
    // than as a failed write of the upgrade request.
    while stream.conn.is_handshaking() {
        stream.conn.complete_io(&mut stream.sock)?;
    }
    run_client_handshake(stream, &url.host_header(), &url.resource, config)
}
