//! The server side: parse and validate the upgrade request, then accept or refuse it.

use core::fmt;
use core::ops::Range;
use std::sync::Arc;

use base64::Engine as _;

use super::http::{self, Fill, HeadBuffer};
use super::{DEFAULT_MAX_HEAD_SIZE, DEFAULT_MAX_HEADERS, accept_key};

#[cfg(feature = "deflate")]
use crate::deflate::{DeflateConfig, DeflateParams};

/// Decides whether a request's `Origin` is allowed: `Some(origin)` when the request has one
/// header, `None` when it has none. Returning `false` refuses the handshake with 403.
pub type OriginCheck = Arc<dyn Fn(Option<&str>) -> bool + Send + Sync>;

/// Server handshake settings.
#[derive(Clone)]
#[non_exhaustive]
pub struct ServerConfig {
    /// Largest request head accepted, in bytes, terminator included (default 16 KiB).
    /// A longer head is refused with 431 and never buffered past this size.
    pub max_request_size: usize,
    /// Most header fields accepted (default 100); more are refused with 431.
    pub max_headers: usize,
    /// Subprotocols this server speaks, most preferred first. The first one the client
    /// offered is selected; none is selected when the lists do not meet.
    pub subprotocols: Vec<String>,
    /// Checks the `Origin` header (RFC 6455 4.2.2 / 10.2); `None` allows every origin.
    pub origin_check: Option<OriginCheck>,
    /// permessage-deflate settings: `Some` accepts a client's offer the config can honour,
    /// `None` (the default) ignores offers.
    #[cfg(feature = "deflate")]
    pub deflate: Option<DeflateConfig>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_request_size: DEFAULT_MAX_HEAD_SIZE,
            max_headers: DEFAULT_MAX_HEADERS,
            subprotocols: Vec::new(),
            origin_check: None,
            #[cfg(feature = "deflate")]
            deflate: None,
        }
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
    /// Not a well-formed HTTP/1.1 request head (400).
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
}

impl ServerError {
    /// The HTTP status this refusal is answered with.
    pub fn status(&self) -> u16 {
        match self {
            ServerError::RequestTooLarge | ServerError::TooManyHeaders => 431,
            ServerError::MethodNotAllowed => 405,
            ServerError::Version => 426,
            ServerError::Origin => 403,
            ServerError::ResponseHeader => 500,
            ServerError::Malformed
            | ServerError::HttpVersion
            | ServerError::RequestBody
            | ServerError::Host
            | ServerError::Upgrade
            | ServerError::Connection
            | ServerError::Key => 400,
        }
    }

    /// The header fields this refusal's status calls for, besides `Connection` and the
    /// content headers: `Sec-WebSocket-Version` and `Upgrade` for a 426, `Allow` for a 405.
    pub fn response_headers(&self) -> &'static [(&'static str, &'static str)] {
        match self {
            // RFC 6455 4.2.2: "the server MUST ... respond with an appropriate HTTP error
            // code (such as 426 Upgrade Required) and a |Sec-WebSocket-Version| header
            // field indicating the version(s) the server is capable of understanding."
            ServerError::Version => &[("Sec-WebSocket-Version", "13"), ("Upgrade", "websocket")],
            ServerError::MethodNotAllowed => &[("Allow", "GET")],
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
        })
    }
}

impl std::error::Error for ServerError {}

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

/// A parsed, valid WebSocket upgrade request (RFC 6455 4.2.1).
///
/// Inspect it to route and authenticate, then [`accept`](Request::accept) it or answer
/// with [`reject`](Request::reject).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    head: Vec<u8>,
    path: Range<usize>,
    headers: Vec<(Range<usize>, Range<usize>)>,
    key: Range<usize>,
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
    /// upgrade (HTTP/2 uses extended CONNECT, RFC 8441, which this does not implement).
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
        let mut size = method.len() + target.len();
        let mut head = Vec::with_capacity(256);
        head.extend_from_slice(target.as_bytes());
        let path = 0..head.len();
        let mut ranges = Vec::new();
        for (name, value) in headers {
            size += name.len() + value.len();
            if ranges.len() == config.max_headers {
                return Err(ServerError::TooManyHeaders);
            }
            if size > config.max_request_size {
                return Err(ServerError::RequestTooLarge);
            }
            let start = head.len();
            head.extend_from_slice(name.as_bytes());
            let middle = head.len();
            head.extend_from_slice(value);
            ranges.push((start..middle, middle..head.len()));
        }
        if size > config.max_request_size {
            return Err(ServerError::RequestTooLarge);
        }
        let mut request = Request {
            path,
            headers: ranges,
            key: 0..0,
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

    /// The `Host` header's value.
    pub fn host(&self) -> &[u8] {
        self.header("host").unwrap_or_default()
    }

    /// The `Origin` header's value, if the request has one.
    pub fn origin(&self) -> Option<&[u8]> {
        self.header("origin")
    }

    /// The `Sec-WebSocket-Key` value (validated).
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

    /// Accepts the upgrade: runs the origin check, selects a subprotocol, negotiates
    /// extensions and writes the 101 response.
    pub fn accept(self, config: &ServerConfig) -> Result<Accepted, ServerError> {
        self.accept_with_headers(config, &[])
    }

    /// [`accept`](Request::accept), adding `headers` (for example `Set-Cookie`) to the
    /// 101 response. Headers the handshake writes itself are refused with
    /// [`ServerError::ResponseHeader`], as are invalid names and values.
    pub fn accept_with_headers(
        self,
        config: &ServerConfig,
        headers: &[(&str, &str)],
    ) -> Result<Accepted, ServerError> {
        check_headers(
            headers,
            &[
                "upgrade",
                "connection",
                "sec-websocket-accept",
                "sec-websocket-protocol",
                "sec-websocket-extensions",
                "content-length",
                "transfer-encoding",
            ],
        )?;
        let agreement = self.agree(config)?;

        let mut response = Vec::with_capacity(160);
        http::put_status_line(&mut response, 101);
        http::put_header(&mut response, "Upgrade", b"websocket");
        http::put_header(&mut response, "Connection", b"Upgrade");
        http::put_header(
            &mut response,
            "Sec-WebSocket-Accept",
            agreement.accept.as_bytes(),
        );
        if let Some(p) = &agreement.subprotocol {
            http::put_header(&mut response, "Sec-WebSocket-Protocol", p.as_bytes());
        }
        #[cfg(feature = "deflate")]
        if let Some((_, value)) = &agreement.deflate {
            http::put_header(&mut response, "Sec-WebSocket-Extensions", value.as_bytes());
        }
        for (name, value) in headers {
            http::put_header(&mut response, name, value.as_bytes());
        }
        response.extend_from_slice(b"\r\n");

        Ok(Accepted {
            response,
            subprotocol: agreement.subprotocol,
            #[cfg(feature = "deflate")]
            deflate: agreement.deflate.map(|(params, _)| params),
            leftover: self.leftover,
        })
    }

    /// Everything accepting decides, before it is written as a response: runs the origin
    /// check, selects a subprotocol and negotiates extensions. [`accept`](Request::accept)
    /// writes it as bytes; the hyper layer as an `http::Response`.
    pub(crate) fn agree(&self, config: &ServerConfig) -> Result<Agreement, ServerError> {
        if let Some(check) = &config.origin_check {
            let mut origins = self.header_values("origin");
            let origin = match (origins.next(), origins.next()) {
                (None, _) => None,
                (Some(o), None) => {
                    Some(core::str::from_utf8(o.trim_ascii()).map_err(|_| ServerError::Origin)?)
                }
                (Some(_), Some(_)) => return Err(ServerError::Origin),
            };
            if !check(origin) {
                return Err(ServerError::Origin);
            }
        }
        // RFC 6455 4.2.2: the server selects "one or none of the acceptable protocols" from
        // the client's list and echoes it in |Sec-WebSocket-Protocol|.
        let subprotocol = config
            .subprotocols
            .iter()
            .find(|ours| self.subprotocols().any(|theirs| theirs == ours.as_str()))
            .cloned();

        #[cfg(feature = "deflate")]
        let negotiated = match &config.deflate {
            Some(deflate) => {
                let offers: Vec<&[u8]> = self.header_values("sec-websocket-extensions").collect();
                if offers.is_empty() {
                    None
                } else {
                    crate::deflate::negotiate::server_negotiate(deflate, &offers)
                }
            }
            None => None,
        };

        Ok(Agreement {
            accept: accept_key(self.key()),
            subprotocol,
            #[cfg(feature = "deflate")]
            deflate: negotiated,
        })
    }

    /// A complete response refusing this request with `status` (for example 401 or 404
    /// after routing or authentication), `headers` and a plain-text `body`.
    /// A status outside 300..=599 becomes 500, as do invalid headers.
    pub fn reject(&self, status: u16, headers: &[(&str, &str)], body: &str) -> Vec<u8> {
        let reserved = [
            "connection",
            "content-length",
            "content-type",
            "transfer-encoding",
        ];
        match check_headers(headers, &reserved) {
            Ok(()) if (300..=599).contains(&status) => {
                write_refusal(status, headers, body.as_bytes())
            }
            _ => write_refusal(500, &[], b"internal server error"),
        }
    }
}

/// What accepting a request decided ([`Request::agree`]), before it is written out.
pub(crate) struct Agreement {
    /// The `Sec-WebSocket-Accept` value.
    pub(crate) accept: String,
    /// The selected subprotocol, if any.
    pub(crate) subprotocol: Option<String>,
    /// The agreed permessage-deflate parameters and the `Sec-WebSocket-Extensions` value.
    #[cfg(feature = "deflate")]
    pub(crate) deflate: Option<(DeflateParams, String)>,
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

/// A handshake the server accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Accepted {
    /// The 101 response to send.
    pub response: Vec<u8>,
    /// The selected subprotocol, if any.
    pub subprotocol: Option<String>,
    /// The agreed permessage-deflate parameters, if the extension was negotiated.
    #[cfg(feature = "deflate")]
    pub deflate: Option<DeflateParams>,
    /// Bytes that arrived after the request head: the first frames, for the codec.
    pub leftover: Vec<u8>,
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
