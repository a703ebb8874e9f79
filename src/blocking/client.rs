//! Client side: URL, TCP connect (direct or through a proxy) and the opening handshake.

use std::net::TcpStream;
use std::time::Instant;

use crate::codec::Role;
use crate::config::ClientConfig;
use crate::connection::Config;
use crate::error::Error;
use crate::handshake::{ClientHandshake, ClientRequest, Negotiated, Response};
use crate::url::UrlError;
use crate::url::WsUrl;

use super::net::{Transport, connect_tcp, read_head};
use super::stream::MaybeTlsStream;
use super::ws::WebSocket;

/// Connects to a `ws://` or `wss://` URL over TCP (each resolved address in turn, within
/// [`ClientConfig::connect_timeout`] each), sets the socket options, for `wss://` runs
/// TLS (feature `rustls`, with `ClientConfig::tls` or the default roots; the socket's
/// timeouts bound it), and runs the opening handshake. With feature `proxy`, the
/// connection goes through the `ClientConfig::proxy` named for the host. A `wss://` URL
/// in a build without feature `rustls` is
/// [`UrlError::TlsUnavailable`](crate::url::UrlError::TlsUnavailable).
pub fn connect(
    url: impl AsRef<str>,
    config: &ClientConfig,
) -> Result<WebSocket<MaybeTlsStream>, Error> {
    connect_with_response(url, config).map(|(ws, _)| ws)
}

/// [`connect`], returning the server's `101 Switching Protocols` response too: its
/// headers and what was agreed ([`Response::is_deflate`], the subprotocol).
pub fn connect_with_response(
    url: impl AsRef<str>,
    config: &ClientConfig,
) -> Result<(WebSocket<MaybeTlsStream>, Response), Error> {
    let url = WsUrl::parse(url.as_ref())?;
    if url.secure {
        #[cfg(feature = "rustls")]
        {
            let tcp = open_stream(&url.host, url.port, true, config)?;
            let tls = super::tls::open_tls(&url, config, None, tcp)?;
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
    let upgraded = read_head(&mut stream, |b| hs.feed(b))?.map_err(Error::ClientHandshake)?;
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
#[cfg(feature = "rustls")]
pub fn connect_tls(
    url: impl AsRef<str>,
    config: &ClientConfig,
    tls: Option<std::sync::Arc<rustls::ClientConfig>>,
) -> Result<WebSocket<super::TlsStream>, Error> {
    let url = WsUrl::parse(url.as_ref())?;
    if !url.secure {
        return Err(Error::Url(UrlError::NotSecure));
    }
    let tcp = open_stream(&url.host, url.port, true, config)?;
    let stream = super::tls::open_tls(&url, config, tls, tcp)?;
    handshake(stream, &url.host_header(), &url.resource, config).map(|(ws, _)| ws)
}
