//! The client side: [`IntoClientRequest`] (what `connect_async` and [`connect`] take),
//! [`ClientRequestBuilder`], and the blocking [`connect`] and [`client`].

use std::net::{TcpStream, ToSocketAddrs};

use http::{HeaderName, Uri};

use super::error::{Error, Result, UrlError};
use super::handshake::HandshakeError;
use super::handshake::client::{ClientHandshake, Request, Response};
use super::protocol::{WebSocket, WebSocketConfig};
use super::stream::MaybeTlsStream;
use crate::handshake::ClientSide;

/// Something a client request can be made of: a URL (`&str`, `String`, [`Uri`]), an
/// `http::Request<()>` (sent as it is, with the handshake headers
/// [`IntoClientRequest`] adds: `Host`, `Connection`, `Upgrade`, `Sec-WebSocket-Version`
/// and `Sec-WebSocket-Key`), or a [`ClientRequestBuilder`].
pub trait IntoClientRequest {
    /// The request.
    fn into_client_request(self) -> Result<Request>;
}

impl IntoClientRequest for &str {
    fn into_client_request(self) -> Result<Request> {
        self.parse::<Uri>()?.into_client_request()
    }
}

impl IntoClientRequest for &String {
    fn into_client_request(self) -> Result<Request> {
        self.as_str().into_client_request()
    }
}

impl IntoClientRequest for String {
    fn into_client_request(self) -> Result<Request> {
        self.as_str().into_client_request()
    }
}

impl IntoClientRequest for &Uri {
    fn into_client_request(self) -> Result<Request> {
        self.clone().into_client_request()
    }
}

impl IntoClientRequest for Uri {
    fn into_client_request(self) -> Result<Request> {
        let authority = self
            .authority()
            .ok_or(Error::Url(UrlError::NoHostName))?
            .as_str();
        // Without user information: `user:pass@host` sends `Host: host`.
        let host = authority.rsplit('@').next().unwrap_or(authority);
        if host.is_empty() {
            return Err(Error::Url(UrlError::EmptyHostName));
        }
        Ok(Request::builder()
            .method("GET")
            .header("Host", host)
            .header("Connection", "Upgrade")
            .header("Upgrade", "websocket")
            .header("Sec-WebSocket-Version", "13")
            .header("Sec-WebSocket-Key", generate_key())
            .uri(self)
            .body(())?)
    }
}

#[cfg(feature = "url")]
impl IntoClientRequest for &url::Url {
    fn into_client_request(self) -> Result<Request> {
        self.as_str().into_client_request()
    }
}

#[cfg(feature = "url")]
impl IntoClientRequest for url::Url {
    fn into_client_request(self) -> Result<Request> {
        self.as_str().into_client_request()
    }
}

impl IntoClientRequest for Request {
    fn into_client_request(self) -> Result<Request> {
        Ok(self)
    }
}

/// A random `Sec-WebSocket-Key` for a request built by hand. rapidws sends a key of its
/// own, from the operating system's random source, whatever the request holds.
pub fn generate_key() -> String {
    use std::hash::{BuildHasher, Hasher};
    // std's hasher keys are random per process and per `RandomState`: two draws make the
    // 16 bytes of a nonce that is only a placeholder (see above).
    let mut bytes = [0u8; 16];
    for (i, half) in bytes.chunks_mut(8).enumerate() {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_usize(i);
        half.copy_from_slice(&h.finish().to_le_bytes());
    }
    base64(&bytes)
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = u32::from_be_bytes([0, b[0], b[1], b[2]]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ABC[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A client request from a URL with extra headers and subprotocols.
#[derive(Debug, Clone)]
pub struct ClientRequestBuilder {
    uri: Uri,
    headers: Vec<(String, String)>,
    subprotocols: Vec<String>,
}

impl ClientRequestBuilder {
    /// A request for `uri`.
    #[must_use]
    pub const fn new(uri: Uri) -> Self {
        ClientRequestBuilder {
            uri,
            headers: Vec::new(),
            subprotocols: Vec::new(),
        }
    }

    /// Adds a header.
    pub fn with_header<K: Into<String>, V: Into<String>>(mut self, key: K, value: V) -> Self {
        self.headers.push((key.into(), value.into()));
        self
    }

    /// Offers a subprotocol.
    pub fn with_sub_protocol<P: Into<String>>(mut self, protocol: P) -> Self {
        self.subprotocols.push(protocol.into());
        self
    }
}

impl IntoClientRequest for ClientRequestBuilder {
    fn into_client_request(self) -> Result<Request> {
        let mut request = self.uri.into_client_request()?;
        let headers = request.headers_mut();
        for (k, v) in self.headers {
            headers.append(HeaderName::try_from(k)?, v.parse()?);
        }
        if !self.subprotocols.is_empty() {
            headers.append(
                http::header::SEC_WEBSOCKET_PROTOCOL,
                self.subprotocols.join(", ").parse()?,
            );
        }
        Ok(request)
    }
}

/// Whether a URL is `ws://` (plain) or `wss://` (TLS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `ws://`.
    Plain,
    /// `wss://`.
    Tls,
}

/// The [`Mode`] of `uri`, [`UrlError::UnsupportedUrlScheme`] for another scheme.
pub fn uri_mode(uri: &Uri) -> Result<Mode> {
    match uri.scheme_str() {
        Some("ws") => Ok(Mode::Plain),
        Some("wss") => Ok(Mode::Tls),
        _ => Err(Error::Url(UrlError::UnsupportedUrlScheme)),
    }
}

/// The host and port to connect to for `uri` (IPv6 literals without their brackets).
pub(crate) fn host_port(uri: &Uri) -> Result<(String, u16)> {
    let mode = uri_mode(uri)?;
    let host = uri.host().ok_or(Error::Url(UrlError::NoHostName))?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if host.is_empty() {
        return Err(Error::Url(UrlError::EmptyHostName));
    }
    let port = uri.port_u16().unwrap_or(match mode {
        Mode::Plain => 80,
        Mode::Tls => 443,
    });
    Ok((host.to_owned(), port))
}

/// Connects to a `ws://` URL (`wss://` with a `rustls-tls-*` feature): TCP, then the
/// handshake, blocking. Redirects are not followed (tungstenite follows up to 3): a
/// redirect is [`Error::Http`] with its status.
pub fn connect<Req: IntoClientRequest>(
    request: Req,
) -> Result<(WebSocket<MaybeTlsStream<TcpStream>>, Response)> {
    connect_with_config(request, None, 3)
}

/// [`connect`] with settings. `max_redirects` is ignored (see [`connect`]).
pub fn connect_with_config<Req: IntoClientRequest>(
    request: Req,
    config: Option<WebSocketConfig>,
    max_redirects: u8,
) -> Result<(WebSocket<MaybeTlsStream<TcpStream>>, Response)> {
    let _ = max_redirects;
    let request = request.into_client_request()?;
    let mode = uri_mode(request.uri())?;
    let (host, port) = host_port(request.uri())?;
    let addrs = (host.as_str(), port).to_socket_addrs()?;
    let tcp = addrs
        .into_iter()
        .find_map(|a| TcpStream::connect(a).ok())
        .ok_or_else(|| Error::Url(UrlError::UnableToConnect(request.uri().to_string())))?;
    tcp.set_nodelay(true)?;
    let stream = match mode {
        Mode::Plain => MaybeTlsStream::Plain(tcp),
        Mode::Tls => super::stream::wrap_tls(tcp, &host)?,
    };
    client_with_config(request, stream, config).map_err(|e| match e {
        HandshakeError::Failure(e) => e,
        HandshakeError::Interrupted(_) => Error::Io(std::io::ErrorKind::WouldBlock.into()),
    })
}

/// The client side of the handshake on a connected `stream`, blocking.
pub fn client_with_config<S, Req>(
    request: Req,
    stream: S,
    config: Option<WebSocketConfig>,
) -> std::result::Result<(WebSocket<S>, Response), HandshakeError<ClientHandshake<S>>>
where
    S: rapidws::blocking::Transport,
    Req: IntoClientRequest,
{
    let request = request.into_client_request()?;
    let (side, bytes) = ClientSide::start(&request)?;
    super::protocol::websocket::client_handshake(stream, side, bytes, config)
}

/// [`client_with_config`] with the default settings.
pub fn client<S, Req>(
    request: Req,
    stream: S,
) -> std::result::Result<(WebSocket<S>, Response), HandshakeError<ClientHandshake<S>>>
where
    S: rapidws::blocking::Transport,
    Req: IntoClientRequest,
{
    client_with_config(request, stream, None)
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_matches_the_rfc_examples() {
        // RFC 4648 10.
        for (input, out) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(super::base64(input.as_bytes()), out);
        }
        assert_eq!(super::generate_key().len(), 24);
    }
}
