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

/// A blocking `wss://` stream: rustls's own blocking TLS stream over TCP (feature
/// `rustls`).
pub type TlsStream = StreamOwned<ClientConnection, TcpStream>;

/// The TLS handshake to a `wss://` URL's host over `tcp`, already connected (directly or
/// through a proxy).
pub(super) fn open_tls(
    url: &WsUrl,
    config: &ClientConfig,
    tls: Option<Arc<rustls::ClientConfig>>,
    tcp: TcpStream,
) -> Result<TlsStream, Error> {
    let tls = config
        .tls_config(tls)
        .map_err(|e| Error::Io(io::Error::other(e)))?;
    let name = ServerName::try_from(url.host.clone()).map_err(|_| Error::Url(UrlError::BadHost))?;
    let conn = ClientConnection::new(tls, name).map_err(|e| Error::Io(io::Error::other(e)))?;
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
