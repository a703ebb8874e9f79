//! Client side: URL, DNS, TCP connect, TLS for `wss://`, and the opening handshake.

use std::future::Future;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::codec::Role;
use crate::config::ClientConfig;
use crate::error::Error;
use crate::handshake::{ClientHandshake, ClientRequest, Response};
use crate::url::UrlError;
use crate::url::WsUrl;

use super::net::{connect_tcp, open_after_handshake, within};
use super::stream::MaybeTlsStream;
use super::ws::WebSocket;

/// Connects to a `ws://` or `wss://` URL: resolves the host, connects over TCP (within
/// [`ClientConfig::connect_timeout`], trying each address), sets `TCP_NODELAY`, for
/// `wss://` runs TLS (feature `tokio-rustls`, with `ClientConfig::tls` or the default
/// roots; the certificate is checked against the URL's host), and runs the opening
/// handshake (TLS and handshake within the handshake timeout), offering the configured
/// subprotocols and permessage-deflate. With feature `proxy`, the connection goes through
/// the proxy its configuration names for the host, if any.
///
/// A server's refusal comes back as [`Error::ClientHandshake`] holding
/// [`ClientError::Status`](crate::handshake::ClientError::Status) with the response. A
/// `wss://` URL in a build without feature `tokio-rustls` is
/// [`UrlError::TlsUnavailable`](crate::url::UrlError::TlsUnavailable), which says what to
/// enable. [`connect_with_response`] also returns the server's response.
pub async fn connect(
    url: impl AsRef<str>,
    config: &ClientConfig,
) -> Result<WebSocket<MaybeTlsStream<TcpStream>>, Error> {
    connect_with_response(url, config).await.map(|(ws, _)| ws)
}

/// [`connect`], returning the server's `101 Switching Protocols` response too: its
/// headers (cookies, the server's own fields) and what was agreed (the subprotocol, the
/// permessage-deflate parameters: [`Response::is_deflate`]).
pub async fn connect_with_response(
    url: impl AsRef<str>,
    config: &ClientConfig,
) -> Result<(WebSocket<MaybeTlsStream<TcpStream>>, Response), Error> {
    let url = WsUrl::parse(url.as_ref())?;
    connect_url(&url, config).await
}

/// Connects to a parsed URL, either scheme.
pub(crate) async fn connect_url(
    url: &WsUrl,
    config: &ClientConfig,
) -> Result<(WebSocket<MaybeTlsStream<TcpStream>>, Response), Error> {
    if url.secure {
        #[cfg(feature = "tokio-rustls")]
        {
            let (tls, name) = super::tls::prepare(url, config, None)?;
            let tcp = open_stream(&url.host, url.port, true, config).await?;
            let tls = async {
                let stream = super::tls::tls_handshake(tls, name, tcp).await?;
                Ok(MaybeTlsStream::Rustls(Box::new(stream)))
            };
            let request = config.request(&url.host_header(), &url.resource);
            return handshake(tls, request, config).await;
        }
        #[cfg(not(feature = "tokio-rustls"))]
        return Err(Error::Url(UrlError::TlsUnavailable));
    }
    let tcp = open_stream(&url.host, url.port, false, config).await?;
    let plain = MaybeTlsStream::Plain(tcp);
    client_handshake_with_response(plain, &url.host_header(), &url.resource, config).await
}

/// Opens the byte stream to `host:port` for a client: directly, or through the proxy the
/// configuration names for it (feature `proxy`; `secure` tells which environment
/// variable applies). Everything up to a usable stream happens within the connect
/// timeout.
pub(crate) async fn open_stream(
    host: &str,
    port: u16,
    secure: bool,
    config: &ClientConfig,
) -> Result<TcpStream, Error> {
    #[cfg(not(feature = "proxy"))]
    let _ = secure;
    #[cfg(feature = "proxy")]
    if let Some(server) = config.proxy.for_target(host, secure)? {
        let max_head = config.proxy.max_response_head();
        let attempt = async {
            let mut stream = connect_tcp(
                server.host(),
                server.port(),
                config.connect_timeout,
                config.nodelay,
            )
            .await?;
            super::proxy::open_tunnel(&mut stream, &server, host, port, max_head).await?;
            Ok::<_, Error>(stream)
        };
        return tokio::time::timeout(config.connect_timeout, attempt)
            .await
            .map_err(|_| Error::Timeout(crate::error::Timeout::Connect))?;
    }
    connect_tcp(host, port, config.connect_timeout, config.nodelay).await
}

/// Runs the client side of the opening handshake on an already connected `stream` (TLS
/// you opened yourself, a Unix socket, ...), for `host` (the `Host` header) and `path`
/// (with query), within the handshake timeout.
pub async fn client_handshake<S>(
    stream: S,
    host: &str,
    path: &str,
    config: &ClientConfig,
) -> Result<WebSocket<S>, Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    client_handshake_with_response(stream, host, path, config)
        .await
        .map(|(ws, _)| ws)
}

/// [`client_handshake`], returning the server's response too (see
/// [`connect_with_response`]).
pub async fn client_handshake_with_response<S>(
    stream: S,
    host: &str,
    path: &str,
    config: &ClientConfig,
) -> Result<(WebSocket<S>, Response), Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    handshake(async { Ok(stream) }, config.request(host, path), config).await
}

/// What a client handshake ends with: the connection and the server's response.
type Handshaken<S> = Result<(WebSocket<S>, Response), Error>;

/// Sends `request` on the stream `open` gives (after a TLS handshake, say) and reads the
/// answer, the two within the handshake timeout.
async fn handshake<S, O>(open: O, request: ClientRequest, config: &ClientConfig) -> Handshaken<S>
where
    S: AsyncRead + AsyncWrite + Unpin,
    O: Future<Output = Result<S, Error>>,
{
    within(config.handshake_timeout, async {
        let mut stream = open.await?;
        let (mut hs, bytes) = ClientHandshake::new(&request, config.handshake.clone())
            .map_err(Error::ClientHandshake)?;
        stream.write_all(&bytes).await?;
        stream.flush().await?;
        let upgraded = super::net::read_head(&mut stream, |b| hs.feed(b))
            .await?
            .map_err(Error::ClientHandshake)?;
        let negotiated = upgraded.negotiated(&config.handshake);
        let (response, leftover) = upgraded.into_response();
        let settings = std::sync::Arc::new(config.connection.clone());
        let ws = open_after_handshake(stream, Role::Client, settings, negotiated, &leftover);
        Ok((ws, response))
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
#[cfg(feature = "tokio-rustls")]
pub async fn connect_tls(
    url: impl AsRef<str>,
    config: &ClientConfig,
    tls: Option<std::sync::Arc<tokio_rustls::rustls::ClientConfig>>,
) -> Result<WebSocket<super::TlsStream<TcpStream>>, Error> {
    connect_tls_with_response(url, config, tls)
        .await
        .map(|(ws, _)| ws)
}

/// [`connect_tls`], returning the server's response too (see
/// [`connect_with_response`](super::connect_with_response)).
#[cfg(feature = "tokio-rustls")]
pub async fn connect_tls_with_response(
    url: impl AsRef<str>,
    config: &ClientConfig,
    tls: Option<std::sync::Arc<tokio_rustls::rustls::ClientConfig>>,
) -> Result<(WebSocket<super::TlsStream<TcpStream>>, Response), Error> {
    let url = WsUrl::parse(url.as_ref())?;
    if !url.secure {
        return Err(Error::Url(UrlError::NotSecure));
    }
    let (tls, name) = super::tls::prepare(&url, config, tls)?;
    let tcp = open_stream(&url.host, url.port, true, config).await?;
    let tls = super::tls::tls_handshake(tls, name, tcp);
    let request = config.request(&url.host_header(), &url.resource);
    handshake(tls, request, config).await
}
