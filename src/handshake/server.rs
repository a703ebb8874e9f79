//! The server side: parse and validate the upgrade request, then accept or refuse it.

use core::fmt;
use core::ops::Range;
use std::sync::Arc;

use base64::Engine as _;

use super::http::{self, Fill, HeadBuffer};
use super::{DEFAULT_MAX_HEAD_SIZE, DEFAULT_MAX_HEADERS};

#[cfg(feature = "deflate")]
use crate::deflate::DeflateConfig;

mod h2;
mod response;

pub(crate) use response::Refused;
pub use response::{Accepted, Agreement, Reject, ResponseHeaders};

/// Decides whether a request's `Origin` is allowed: `Some(origin)` when the request has one
/// header, `None` when it has none. Returning `false` refuses the handshake with 403.
pub type OriginCheck = Arc<dyn Fn(Option<&str>) -> bool + Send + Sync>;

settings! {
    /// Server handshake settings.
    #[derive(Clone)]
    pub struct ServerConfig {
        /// Largest request head accepted, in bytes, terminator included (default 16 KiB).
        /// A longer head is refused with 431 and never buffered past this size.
        pub max_request_size: usize = DEFAULT_MAX_HEAD_SIZE,
        /// Most header fields accepted (default 100); more are refused with 431.
        pub max_headers: usize = DEFAULT_MAX_HEADERS,
        /// Subprotocols this server speaks, most preferred first. The first one the client
        /// offered is selected; none is selected when the lists do not meet.
        pub subprotocols: Vec<String> = Vec::new(),
        /// Checks the `Origin` header (RFC 6455 4.2.2 / 10.2); `None` allows every origin.
        pub origin_check: Option<OriginCheck> = None,
        /// permessage-deflate settings: `Some` accepts a client's offer the config can honour,
        /// `None` (the default) ignores offers.
        #[cfg(feature = "deflate")]
        pub deflate: Option<DeflateConfig> = None,
    }
}

impl ServerConfig {
    /// Sets the subprotocols this server speaks, most preferred first.
    pub fn with_subprotocols<I, S>(mut self, protocols: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.subprotocols = protocols.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the origin check; see [`OriginCheck`].
    pub fn with_origin_check(
        mut self,
        check: impl Fn(Option<&str>) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.origin_check = Some(Arc::new(check));
        self
    }

    /// Turns permessage-deflate on (`Some`) or off (`None`).
    #[cfg(feature = "deflate")]
    pub fn with_deflate(mut self, deflate: Option<DeflateConfig>) -> Self {
        self.deflate = deflate;
        self
    }
}

impl fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("ServerConfig");
        d.field("max_request_size", &self.max_request_size)
            .field("max_headers", &self.max_headers)
            .field("subprotocols", &self.subprotocols)
            .field("origin_check", &self.origin_check.as_ref().map(|_| "<fn>"));
        #[cfg(feature = "deflate")]
        d.field("deflate", &self.deflate);
        d.finish()
    }
}

/// Why a server refused a handshake. Each maps to an HTTP status ([`ServerError::status`]);
/// [`ServerError::response`] is the complete response to send before closing.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerError {
    /// The request head passed [`ServerConfig::max_request_size`] (431).
    RequestTooLarge,
    /// The request had more than [`ServerConfig::max_headers`] header fields (431).
    TooManyHeaders,
    /// Not a well-formed HTTP/1.1 request head, or an HTTP/2 extended CONNECT without a
    /// valid `:scheme`, `:path` or `:authority`, or with a header HTTP/2 forbids (400).
    Malformed,
    /// The method was not GET (405). RFC 6455 4.1: "The method of the request MUST be GET".
    MethodNotAllowed,
    /// The request was not HTTP/1.1 or higher (400).
    HttpVersion,
    /// The request announced a body (`Content-Length` other than 0, or
    /// `Transfer-Encoding`), which an upgrade request cannot carry (400).
    RequestBody,
    /// No `Host` header, or more than one (400).
    Host,
    /// `Upgrade` does not name `websocket` (400).
    Upgrade,
    /// `Connection` has no `upgrade` token (400).
    Connection,
    /// `Sec-WebSocket-Version` is missing or not 13 (426, with `Sec-WebSocket-Version: 13`).
    Version,
    /// `Sec-WebSocket-Key` is missing, repeated, or not base64 of 16 bytes (400).
    Key,
    /// The origin check refused the request's `Origin` (403).
    Origin,
    /// A response header the caller supplied is invalid or one the handshake sets itself
    /// (500).
    ResponseHeader,
    /// An HTTP/2 request other than CONNECT (405, with `Allow: CONNECT`). RFC 8441 4: over
    /// HTTP/2 a WebSocket opens with an extended CONNECT, never with GET.
    ConnectRequired,
    /// An HTTP/2 CONNECT whose `:protocol` is missing (a plain tunnel request) or names a
    /// protocol other than `websocket` (501).
    ConnectProtocol,
    /// `sec-websocket-version` of an HTTP/2 request is missing or not 13 (400, with
    /// `Sec-WebSocket-Version: 13`; HTTP/2 has no `Upgrade`, so no 426).
    Http2Version,
    /// The client opened with a TLS handshake record (a `wss://` client on a plain `ws://`
    /// port), refused at its first byte (400): the client's TLS library then reports
    /// the plain-text answer at once instead of waiting out its handshake timeout.
    TlsOnPlainPort,
}

impl ServerError {
    /// The HTTP status this refusal is answered with.
    pub fn status(&self) -> u16 {
        match self {
            ServerError::RequestTooLarge | ServerError::TooManyHeaders => 431,
            ServerError::MethodNotAllowed | ServerError::ConnectRequired => 405,
            ServerError::Version => 426,
            ServerError::ConnectProtocol => 501,
            ServerError::Origin => 403,
            ServerError::ResponseHeader => 500,
            ServerError::Malformed
            | ServerError::HttpVersion
            | ServerError::RequestBody
            | ServerError::Host
            | ServerError::Upgrade
            | ServerError::Connection
            | ServerError::Key
            | ServerError::Http2Version
            | ServerError::TlsOnPlainPort => 400,
        }
    }

    /// The header fields this refusal's status calls for, besides `Connection` and the
    /// content headers: `Sec-WebSocket-Version` and `Upgrade` for a 426, `Allow` for a 405,
    /// `Sec-WebSocket-Version` alone for [`ServerError::Http2Version`].
    pub fn response_headers(&self) -> &'static [(&'static str, &'static str)] {
        match self {
            // RFC 6455 4.2.2: "the server MUST ... respond with an appropriate HTTP error
            // code (such as 426 Upgrade Required) and a |Sec-WebSocket-Version| header
            // field indicating the version(s) the server is capable of understanding."
            ServerError::Version => &[("Sec-WebSocket-Version", "13"), ("Upgrade", "websocket")],
            ServerError::MethodNotAllowed => &[("Allow", "GET")],
            ServerError::ConnectRequired => &[("Allow", "CONNECT")],
            ServerError::Http2Version => &[("Sec-WebSocket-Version", "13")],
            _ => &[],
        }
    }

    /// The full HTTP response refusing the handshake: status, `Connection: close`, the
    /// headers the status calls for, and the reason as a plain-text body.
    pub fn response(&self) -> Vec<u8> {
        let reason = self.to_string();
        write_refusal(self.status(), self.response_headers(), reason.as_bytes())
    }
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ServerError::RequestTooLarge => "request head too large",
            ServerError::TooManyHeaders => "too many request headers",
            ServerError::Malformed => "malformed HTTP request",
            ServerError::MethodNotAllowed => "a WebSocket upgrade must use GET",
            ServerError::HttpVersion => "a WebSocket upgrade requires HTTP/1.1",
            ServerError::RequestBody => "a WebSocket upgrade request cannot have a body",
            ServerError::Host => "exactly one Host header is required",
            ServerError::Upgrade => "Upgrade header must name websocket",
            ServerError::Connection => "Connection header must contain upgrade",
            ServerError::Version => "unsupported Sec-WebSocket-Version, 13 is required",
            ServerError::Key => "Sec-WebSocket-Key must be base64 of 16 bytes",
            ServerError::Origin => "origin not allowed",
            ServerError::ResponseHeader => "invalid response header",
            ServerError::ConnectRequired => {
                "over HTTP/2 a WebSocket opens with an extended CONNECT (RFC 8441)"
            }
            ServerError::ConnectProtocol => "the extended CONNECT's :protocol is not websocket",
            ServerError::Http2Version => "unsupported sec-websocket-version, 13 is required",
            ServerError::TlsOnPlainPort => {
                "a TLS handshake on a plain ws:// port: connect with ws://, or serve wss://"
            }
        })
    }
}

impl std::error::Error for ServerError {}

impl From<http::Over> for ServerError {
    fn from(over: http::Over) -> Self {
        match over {
            http::Over::Fields => ServerError::TooManyHeaders,
            http::Over::Size => ServerError::RequestTooLarge,
        }
    }
}

/// Writes a complete refusal: status line, the given headers, `Connection: close`
/// (with `Upgrade` for a 426, RFC 9110 7.8), content headers and the body.
fn write_refusal(status: u16, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(128 + body.len());
    http::put_status_line(&mut out, status);
    let upgrade = headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("upgrade"));
    for (name, value) in headers {
        http::put_header(&mut out, name, value.as_bytes());
    }
    let connection: &[u8] = if upgrade { b"Upgrade, close" } else { b"close" };
    http::put_header(&mut out, "Connection", connection);
    http::put_header(&mut out, "Content-Type", b"text/plain; charset=utf-8");
    http::put_header(
        &mut out,
        "Content-Length",
        body.len().to_string().as_bytes(),
    );
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out
}

/// Checks caller-supplied response headers: names are tokens, values cannot break lines,
/// and none of the names in `reserved` (which the handshake writes itself) appears.
fn check_headers(headers: &[(&str, &str)], reserved: &[&str]) -> Result<(), ServerError> {
    for (name, value) in headers {
        if !http::is_token(name.as_bytes())
            || !http::is_field_value(value.as_bytes())
            || reserved.iter().any(|r| r.eq_ignore_ascii_case(name))
        {
            return Err(ServerError::ResponseHeader);
        }
    }
    Ok(())
}

/// Incremental parser for the client's upgrade request.
///
/// Feed it bytes as they arrive; it returns the validated [`Request`] once the head is
/// complete. Memory is bounded by [`ServerConfig::max_request_size`] and the work is linear
/// in the bytes fed. After it returns a request or an error it is empty again.
///
/// ```
/// use rapidws::handshake::{ServerConfig, ServerHandshake};
///
/// let config = ServerConfig::default();
/// let mut handshake = ServerHandshake::new(&config);
/// let request = handshake
///     .feed(b"GET /chat HTTP/1.1\r\nHost: example.com\r\nUpgrade: websocket\r\n\
///             Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
///             Sec-WebSocket-Version: 13\r\n\r\n")
///     .unwrap()
///     .expect("complete request");
/// assert_eq!(request.path(), "/chat");
/// let accepted = request.accept(&config).unwrap();
/// assert!(accepted.response.starts_with(b"HTTP/1.1 101 Switching Protocols\r\n"));
/// ```
#[derive(Debug)]
pub struct ServerHandshake {
    head: HeadBuffer,
    max_headers: usize,
}

impl ServerHandshake {
    /// A parser with the limits of `config`.
    pub fn new(config: &ServerConfig) -> Self {
        ServerHandshake {
            head: HeadBuffer::new(config.max_request_size),
            max_headers: config.max_headers,
        }
    }

    /// Adds received bytes. `Ok(None)`: the head is not complete yet, feed more.
    /// `Ok(Some(request))`: a valid upgrade request; bytes after its head are in
    /// [`Request::leftover`]. `Err(e)`: refuse with [`ServerError::response`] and close.
    ///
    /// Once it returns `Some`, the handshake is over: bytes read later belong to the codec
    /// (after the leftover), not to this parser, which has been emptied and would read them
    /// as a new request.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Option<Request>, ServerError> {
        // RFC 8446 5.1: a TLS connection opens with a handshake record, content type 22
        // (0x16), which no HTTP request line starts with (RFC 9112 3: a method is a token).
        if self.head.len() == 0 && bytes.first() == Some(&0x16) {
            return Err(ServerError::TlsOnPlainPort);
        }
        match self.head.push(bytes) {
            Fill::Partial => Ok(None),
            Fill::TooLarge => Err(ServerError::RequestTooLarge),
            Fill::Complete { head, rest } => Request::parse(head, rest, self.max_headers).map(Some),
        }
    }

    /// How many bytes of an incomplete head are buffered.
    pub fn buffered(&self) -> usize {
        self.head.len()
    }
}

/// A parsed, valid WebSocket opening request: an HTTP/1.1 upgrade (RFC 6455 4.2.1) or an
/// HTTP/2 extended CONNECT (RFC 8441 4-5, [`Request::from_http2_parts`]).
///
/// Inspect it to route and authenticate, then [`accept`](Request::accept) it or answer
/// with [`reject`](Request::reject).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    head: Vec<u8>,
    path: Range<usize>,
    headers: Vec<Field>,
    key: Range<usize>,
    /// `:authority` of an HTTP/2 request; `None` for HTTP/1.1, whose `Host` header says it.
    authority: Option<Range<usize>>,
    leftover: Vec<u8>,
}

impl Request {
    fn parse(head: Vec<u8>, leftover: Vec<u8>, max_headers: usize) -> Result<Self, ServerError> {
        let mut slots = vec![httparse::EMPTY_HEADER; max_headers];
        let mut req = httparse::Request::new(&mut slots);
        let consumed = match req.parse(&head) {
            Ok(httparse::Status::Complete(n)) => n,
            // The head ends in CRLF CRLF, so an incomplete parse means it is malformed.
            Ok(httparse::Status::Partial) => return Err(ServerError::Malformed),
            Err(httparse::Error::TooManyHeaders) => return Err(ServerError::TooManyHeaders),
            Err(_) => return Err(ServerError::Malformed),
        };
        // httparse also ends a head at a bare LF LF; whatever follows it is not part of
        // the head and would be misread as frames, so such a request is refused.
        if consumed != head.len() {
            return Err(ServerError::Malformed);
        }
        check_request_line(req.method.unwrap_or_default(), req.version == Some(1))?;
        let Some(path) = req.path else {
            return Err(ServerError::Malformed);
        };
        let path = http::range_in(&head, path.as_bytes());
        let headers: Vec<_> = req
            .headers
            .iter()
            .map(|h| {
                (
                    http::range_in(&head, h.name.as_bytes()),
                    http::range_in(&head, h.value),
                )
            })
            .collect();
        drop(slots);
        let mut request = Request {
            path,
            headers,
            key: 0..0,
            authority: None,
            leftover,
            head,
        };
        request.key = request.validate()?;
        Ok(request)
    }

    /// Validates a request whose head another HTTP implementation (hyper, for example)
    /// has already parsed: the same checks, in the same order, as [`ServerHandshake::feed`]
    /// runs on bytes, and the same [`Request`] to [`accept`](Request::accept) or refuse.
    ///
    /// `version` is the HTTP version as (major, minor); only `(1, 1)` can carry this
    /// upgrade (HTTP/2 opens WebSockets with an extended CONNECT instead:
    /// [`Request::from_http2_parts`]).
    /// `target` is the request target (path and query) and `headers` every header field
    /// in order. [`ServerConfig::max_headers`] and [`ServerConfig::max_request_size`]
    /// (counted over the method, target, names and values) apply, as for bytes. The
    /// request has no [`leftover`](Request::leftover): the HTTP server keeps what it read
    /// past the head.
    ///
    /// ```
    /// use rapidws::handshake::{Request, ServerConfig, ServerError};
    ///
    /// let config = ServerConfig::default();
    /// let headers: [(&str, &[u8]); 5] = [
    ///     ("host", b"example.com"),
    ///     ("upgrade", b"websocket"),
    ///     ("connection", b"Upgrade"),
    ///     ("sec-websocket-key", b"dGhlIHNhbXBsZSBub25jZQ=="),
    ///     ("sec-websocket-version", b"8"),
    /// ];
    /// let refused = Request::from_parts("GET", (1, 1), "/chat", headers, &config);
    /// assert_eq!(refused, Err(ServerError::Version));
    /// ```
    pub fn from_parts<'h, I>(
        method: &str,
        version: (u8, u8),
        target: &str,
        headers: I,
        config: &ServerConfig,
    ) -> Result<Self, ServerError>
    where
        I: IntoIterator<Item = (&'h str, &'h [u8])>,
    {
        check_request_line(method, version == (1, 1))?;
        let mut head = Vec::with_capacity(256);
        head.extend_from_slice(target.as_bytes());
        let path = 0..head.len();
        let ranges = collect_fields(&mut head, method.len() + target.len(), headers, config)?;
        let mut request = Request {
            path,
            headers: ranges,
            key: 0..0,
            authority: None,
            leftover: Vec::new(),
            head,
        };
        request.key = request.validate()?;
        Ok(request)
    }

    /// Checks the WebSocket requirements of RFC 6455 4.2.1; returns the key's range.
    fn validate(&self) -> Result<Range<usize>, ServerError> {
        // A body would sit between the head and the first frame; refusing it keeps the
        // leftover bytes unambiguous (and request smuggling out).
        if self.header_values("transfer-encoding").next().is_some()
            || self
                .header_values("content-length")
                .any(|v| v.trim_ascii() != b"0")
        {
            return Err(ServerError::RequestBody);
        }
        // RFC 6455 4.2.1 item 2: "A |Host| header field containing the server's authority."
        // RFC 9112 3.2: a request with more than one Host is answered with 400.
        let mut hosts = self.header_values("host");
        match (hosts.next(), hosts.next()) {
            (Some(h), None) if !h.trim_ascii().is_empty() => {}
            _ => return Err(ServerError::Host),
        }
        // RFC 6455 4.2.1 item 3: "An |Upgrade| header field containing the value
        // "websocket", treated as an ASCII case-insensitive value."
        if !http::lists_contain(self.header_values("upgrade"), b"websocket") {
            return Err(ServerError::Upgrade);
        }
        // Item 4: "A |Connection| header field that includes the token "Upgrade", treated
        // as an ASCII case-insensitive value."
        if !http::lists_contain(self.header_values("connection"), b"upgrade") {
            return Err(ServerError::Connection);
        }
        // Item 6: "A |Sec-WebSocket-Version| header field, with a value of 13." 4.2.2: any
        // other version is answered with 426 naming the supported one.
        let mut versions = self.header_values("sec-websocket-version");
        match (versions.next(), versions.next()) {
            (Some(v), None) if v.trim_ascii() == b"13" => {}
            _ => return Err(ServerError::Version),
        }
        // Item 5: "A |Sec-WebSocket-Key| header field with a base64-encoded value that,
        // when decoded, is 16 bytes in length."
        let mut keys = self
            .headers
            .iter()
            .filter(|(n, _)| self.head[n.clone()].eq_ignore_ascii_case(b"sec-websocket-key"));
        let (Some((_, key)), None) = (keys.next(), keys.next()) else {
            return Err(ServerError::Key);
        };
        let raw = &self.head[key.clone()];
        if !is_valid_key(raw) {
            return Err(ServerError::Key);
        }
        let trimmed = raw.trim_ascii();
        let start = key.start + http::range_in(raw, trimmed).start;
        Ok(start..start + trimmed.len())
    }

    /// The request target, as sent (path and query).
    pub fn path(&self) -> &str {
        // httparse only accepts visible ASCII in the target.
        core::str::from_utf8(&self.head[self.path.clone()]).unwrap_or_default()
    }

    /// Every header field in order, as (name, value).
    pub fn headers(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.headers.iter().map(|(n, v)| {
            (
                core::str::from_utf8(&self.head[n.clone()]).unwrap_or_default(),
                &self.head[v.clone()],
            )
        })
    }

    /// The value of the first header named `name` (ASCII case-insensitive).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.header_values(name).next()
    }

    /// The values of every header named `name` (ASCII case-insensitive), in order.
    pub fn header_values<'a, 'n>(
        &'a self,
        name: &'n str,
    ) -> impl Iterator<Item = &'a [u8]> + use<'a, 'n> {
        self.headers
            .iter()
            .filter(move |(n, _)| self.head[n.clone()].eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| &self.head[v.clone()])
    }

    /// The `Host` header's value; for an HTTP/2 request, its `:authority`.
    pub fn host(&self) -> &[u8] {
        match &self.authority {
            Some(authority) => &self.head[authority.clone()],
            None => self.header("host").unwrap_or_default(),
        }
    }

    /// The `Origin` header's value, if the request has one.
    pub fn origin(&self) -> Option<&[u8]> {
        self.header("origin")
    }

    /// The `Sec-WebSocket-Key` value (validated); empty for an HTTP/2 request, which has
    /// none.
    pub fn key(&self) -> &[u8] {
        &self.head[self.key.clone()]
    }

    /// The subprotocols the client offered, in its order.
    pub fn subprotocols(&self) -> impl Iterator<Item = &str> {
        self.header_values("sec-websocket-protocol")
            .flat_map(http::list_items)
            .filter_map(|p| core::str::from_utf8(p).ok())
    }

    /// Bytes that arrived after the request head: the first frames, for the codec.
    pub fn leftover(&self) -> &[u8] {
        &self.leftover
    }
}

/// A header field's name and value, as ranges of a [`Request`]'s head.
type Field = (Range<usize>, Range<usize>);

/// Copies header fields into `head` as (name, value) ranges, under the limits of `config`:
/// at most [`ServerConfig::max_headers`] fields and [`ServerConfig::max_request_size`]
/// bytes counted over names and values plus `size` (what came before them). The limits
/// are checked before each field is copied.
fn collect_fields<'h, I>(
    head: &mut Vec<u8>,
    size: usize,
    headers: I,
    config: &ServerConfig,
) -> Result<Vec<Field>, ServerError>
where
    I: IntoIterator<Item = (&'h str, &'h [u8])>,
{
    let mut room = http::FieldRoom::new(config.max_headers, config.max_request_size, size)?;
    let mut ranges = Vec::new();
    for (name, value) in headers {
        room.take(name, value)?;
        let start = head.len();
        head.extend_from_slice(name.as_bytes());
        let middle = head.len();
        head.extend_from_slice(value);
        ranges.push((start..middle, middle..head.len()));
    }
    Ok(ranges)
}

/// RFC 6455 4.1: "The method of the request MUST be GET, and the HTTP version MUST be at
/// least 1.1." (HTTP/1.1 is the one version this upgrade exists in.)
fn check_request_line(method: &str, http_1_1: bool) -> Result<(), ServerError> {
    if !http_1_1 {
        return Err(ServerError::HttpVersion);
    }
    if method != "GET" {
        return Err(ServerError::MethodNotAllowed);
    }
    Ok(())
}

/// Checks `key` the way [`Request`] does; for callers with their own HTTP parser.
pub fn is_valid_key(key: &[u8]) -> bool {
    let key = key.trim_ascii();
    let mut decoded = [0u8; 18];
    key.len() == 24
        && matches!(
            base64::engine::general_purpose::STANDARD.decode_slice(key, &mut decoded),
            Ok(16)
        )
}
