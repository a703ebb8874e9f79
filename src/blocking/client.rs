//! Client side: URL, TCP connect (direct or through a proxy) and the opening handshake.

use std::net::TcpStream;
use std::time::Instant;

use crate::codec::Role;
use crate::config::ClientConfig;
use crate::error::Error;
use crate::handshake::{ClientHandshake, ClientRequest};
use crate::url::{UrlError, WsUrl};

use super::net::{HANDSHAKE_READ, Transport, connect_tcp, read_some};
use super::ws::WebSocket;

/// Connects to a `ws://host[:port]/path` URL over TCP (each resolved address in turn,
/// within [`ClientConfig::connect_timeout`] each), sets the socket options and runs the
/// opening handshake. For `wss://` use `connect_tls` (feature `rustls`). With feature
/// `proxy`, the connection goes through the `ClientConfig::proxy` named for the host.
pub fn connect(url: &str, config: &ClientConfig) -> Result<WebSocket<TcpStream>, Error> {
    let url = WsUrl::parse(url)?;
    if url.secure {
        return Err(Error::Url(UrlError::TlsUnavailable));
    }
    let stream = open_stream(&url.host, url.port, false, config)?;
    run_client_handshake(stream, &url.host_header(), &url.resource, config)
}

/// The TCP stream to `host:port` for a client: direct, or a tunnel through the proxy the
/// configuration names for it (feature `proxy`; `secure`: a `wss://` URL).
pub(super) fn open_stream(
    host: &str,
    port: u16,
    secure: bool,
    config: &ClientConfig,
) -> Result<TcpStream, Error> {
    #[cfg(feature = "proxy")]
    if let Some(server) = config
        .proxy
        .for_target(host, secure)
        .map_err(Error::Proxy)?
    {
        let mut stream = connect_tcp(server.host(), server.port(), config)?;
        super::proxy::proxy_tunnel(&mut stream, &server, host, port, config)?;
        return Ok(stream);
    }
    #[cfg(not(feature = "proxy"))]
    let _ = secure;
    connect_tcp(host, port, config)
}

/// Runs the client side of the opening handshake on a connected `stream` (TLS or other),
/// for `host` (the `Host` header) and `path` (with query).
pub fn client_handshake<S: Transport>(
    stream: S,
    host: &str,
    path: &str,
    config: &ClientConfig,
) -> Result<WebSocket<S>, Error> {
    run_client_handshake(stream, host, path, config)
}

/// The client handshake on `stream` for `host` and `path`, with what `config` adds to the
/// request.
pub(super) fn run_client_handshake<S: Transport>(
    mut stream: S,
    host: &str,
    path: &str,
    config: &ClientConfig,
) -> Result<WebSocket<S>, Error> {
    let request: ClientRequest = config.request(host, path);
    let (mut hs, bytes) =
        ClientHandshake::new(&request, config.handshake.clone()).map_err(Error::ClientHandshake)?;
    stream.write_all(&bytes)?;
    stream.flush()?;
    let mut buf = [0u8; HANDSHAKE_READ];
    let upgraded = loop {
        let n = read_some(&mut stream, &mut buf)?;
        match hs.feed(&buf[..n]) {
            Ok(None) => {}
            Ok(Some(u)) => break u,
            Err(e) => return Err(Error::ClientHandshake(e)),
        }
    };
    Ok(WebSocket::open(
        stream,
        Role::Client,
        &config.connection,
        Instant::now(),
        #[cfg(feature = "deflate")]
        upgraded.deflate.zip(config.handshake.deflate.as_ref()),
        &upgraded.leftover,
        upgraded.subprotocol,
    ))
}
