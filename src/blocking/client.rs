//! Client side: URL, TCP connect (direct or through a proxy) and the opening handshake.

use std::net::TcpStream;
use std::time::Instant;

use crate::codec::Role;
use crate::config::ClientConfig;
use crate::connection::Config;
use crate::error::Error;
use crate::handshake::{ClientHandshake, ClientRequest, Negotiated, Response};
#[cfg(not(feature = "rustls"))]
use crate::url::UrlError;
use crate::url::WsUrl;

use super::net::{HANDSHAKE_READ, Transport, connect_tcp, read_some};
use super::stream::MaybeTlsStream;
use super::ws::WebSocket;

/// Connects to a `ws://` or `wss://` URL over TCP (each resolved address in turn, within
/// [`ClientConfig::connect_timeout`] each), sets the socket options, for `wss://` runs
/// TLS (feature `rustls`, with `ClientConfig::tls` or the default roots; the socket's
/// timeouts bound it), and runs the opening handshake. With feature `proxy`, the
/// connection goes through the `ClientConfig::proxy` named for the host. A `wss://` URL
/// in a build without feature `rustls` is
/// [`UrlError::TlsUnavailable`](crate::url::UrlError::TlsUnavailable).
pub fn connect(url: &str, config: &ClientConfig) -> Result<WebSocket<MaybeTlsStream>, Error> {
    connect_with_response(url, config).map(|(ws, _)| ws)
}

/// [`connect`], returning the server's `101 Switching Protocols` response too: its
/// headers and what was agreed ([`Response::is_deflate`], the subprotocol).
pub fn connect_with_response(
    url: &str,
    config: &ClientConfig,
) -> Result<(WebSocket<MaybeTlsStream>, Response), Error> {
    let url = WsUrl::parse(url)?;
    if url.secure {
        #[cfg(feature = "rustls")]
        {
            let tls = super::tls::open_tls(&url, config, None)?;
            return handshake(
                MaybeTlsStream::Rustls(Box::new(tls)),
                &url.host_header(),
                &url.resource,
                config,
            );
        }
        #[cfg(not(feature = "rustls"))]
        return Err(Error::Url(UrlError::TlsUnavailable));
    }
    let stream = open_stream(&url.host, url.port, false, config)?;
    handshake(
        MaybeTlsStream::Plain(stream),
        &url.host_header(),
        &url.resource,
        config,
    )
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
    handshake(stream, host, path, config).map(|(ws, _)| ws)
}

/// [`client_handshake`], returning the server's response too.
pub fn client_handshake_with_response<S: Transport>(
    stream: S,
    host: &str,
    path: &str,
    config: &ClientConfig,
) -> Result<(WebSocket<S>, Response), Error> {
    handshake(stream, host, path, config)
}

/// The client handshake on `stream` for `host` and `path`, with what `config` adds to the
/// request.
pub(super) fn handshake<S: Transport>(
    mut stream: S,
    host: &str,
    path: &str,
    config: &ClientConfig,
) -> Result<(WebSocket<S>, Response), Error> {
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
    let negotiated = upgraded.negotiated(&config.handshake);
    let (response, leftover) = upgraded.into_response();
    let ws = from_handshake(
        stream,
        Role::Client,
        &config.connection,
        negotiated,
        &leftover,
    );
    Ok((ws, response))
}

/// Opens a connection over `stream` whose opening handshake ran elsewhere: `role` is this
/// end's, `config` the connection's settings, `negotiated` what the handshake agreed
/// (subprotocol, permessage-deflate with this end's settings), `leftover` the bytes read
/// after the handshake head, if any. [`WebSocket::from_raw`] is the same with nothing
/// negotiated.
pub fn from_handshake<S: Transport>(
    stream: S,
    role: Role,
    config: &Config,
    negotiated: Negotiated,
    leftover: &[u8],
) -> WebSocket<S> {
    WebSocket::open(
        stream,
        role,
        config,
        Instant::now(),
        #[cfg(feature = "deflate")]
        negotiated
            .deflate
            .as_ref()
            .map(|(params, settings)| (*params, settings)),
        leftover,
        negotiated.subprotocol,
    )
}
