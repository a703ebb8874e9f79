//! The client side: build the upgrade request, then validate the server's response.

use base64::Engine as _;

use super::http::{self, Fill, HeadBuffer};
use super::{DEFAULT_MAX_HEAD_SIZE, DEFAULT_MAX_HEADERS, accept_key};
use crate::url::{UrlError, WsUrl};

#[cfg(feature = "deflate")]
use crate::deflate::{DeflateConfig, DeflateParams, NegotiationError};

mod h2;

pub use h2::Http2ClientHandshake;

settings! {
    /// Client handshake settings.
    #[derive(Clone, Debug)]
    pub struct ClientConfig {
        /// Largest response head accepted, in bytes, terminator included (default 16 KiB).
        pub max_response_size: usize = DEFAULT_MAX_HEAD_SIZE,
        /// Most header fields accepted in the response (default 100).
        pub max_headers: usize = DEFAULT_MAX_HEADERS,
        /// permessage-deflate settings: `Some` offers the extension, `None` (the default) does
        /// not, and then any extension in the response fails the handshake.
        #[cfg(feature = "deflate")]
        pub deflate: Option<DeflateConfig> = None,
    }
}

impl ClientConfig {
    /// Offers permessage-deflate (`Some`) or not (`None`).
    #[cfg(feature = "deflate")]
    pub fn with_deflate(mut self, deflate: Option<DeflateConfig>) -> Self {
        self.deflate = deflate;
        self
    }
}

/// What the client asks for: the target and the optional parts of the request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientRequest {
    host: String,
    path: String,
    origin: Option<String>,
    subprotocols: Vec<String>,
    headers: Vec<(String, String)>,
}

impl ClientRequest {
    /// A request for `path` (starting with `/`, query included) on `host` (the `Host`
    /// header: the host name, with `:port` when the port is not the scheme's default).
    pub fn new(host: impl Into<String>, path: impl Into<String>) -> Self {
        ClientRequest {
            host: host.into(),
            path: path.into(),
            origin: None,
            subprotocols: Vec::new(),
            headers: Vec::new(),
        }
    }

    /// A request for a `ws://` or `wss://` URL (RFC 6455 3), with the parsed URL (where to
    /// connect).
    ///
    /// The `Host` header carries the port only when it is not the scheme's default (80 for
    /// `ws`, 443 for `wss`), as RFC 6455 4.1 asks. User information (`user@`) is refused,
    /// and so is a fragment: "Fragment identifiers ... MUST NOT be used on these URIs".
    ///
    /// ```
    /// use rapidws::handshake::ClientRequest;
    ///
    /// let (request, url) = ClientRequest::from_url("wss://[::1]:9443/chat?room=1").unwrap();
    /// assert!(url.secure);
    /// assert_eq!((url.host.as_str(), url.port), ("::1", 9443));
    /// assert_eq!(request, ClientRequest::new("[::1]:9443", "/chat?room=1"));
    /// ```
    pub fn from_url(url: &str) -> Result<(ClientRequest, WsUrl), UrlError> {
        let url = WsUrl::parse(url)?;
        Ok((
            ClientRequest::new(url.host_header(), url.resource.clone()),
            url,
        ))
    }

    /// The `Host` header value.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The request target: path and query, starting with `/`.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Sends an `Origin` header (browsers always do; other clients may).
    pub fn origin(mut self, origin: impl Into<String>) -> Self {
        self.origin = Some(origin.into());
        self
    }

    /// Offers a subprotocol; offers keep the order they were added in.
    pub fn subprotocol(mut self, protocol: impl Into<String>) -> Self {
        self.subprotocols.push(protocol.into());
        self
    }

    /// Adds a header (for example `Authorization`). Headers the handshake writes itself
    /// are refused by [`ClientHandshake::new`].
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    fn validate(&self) -> Result<(), ClientError> {
        let visible = |s: &str| s.bytes().all(|b| (b'!'..=b'~').contains(&b));
        if self.host.is_empty() || !visible(&self.host) || self.host.contains(['/', '?', '#', '@'])
        {
            return Err(ClientError::InvalidRequest("invalid host"));
        }
        if !self.path.starts_with('/') || !visible(&self.path) || self.path.contains('#') {
            return Err(ClientError::InvalidRequest("invalid path"));
        }
        if let Some(origin) = &self.origin
            && !http::is_field_value(origin.as_bytes())
        {
            return Err(ClientError::InvalidRequest("invalid origin"));
        }
        // RFC 6455 4.1: subprotocol values "MUST all be unique strings" of token characters.
        for (i, p) in self.subprotocols.iter().enumerate() {
            if !http::is_token(p.as_bytes()) || self.subprotocols[..i].contains(p) {
                return Err(ClientError::InvalidRequest(
                    "invalid or repeated subprotocol",
                ));
            }
        }
        const RESERVED: [&str; 8] = [
            "host",
            "upgrade",
            "connection",
            "sec-websocket-key",
            "sec-websocket-version",
            "sec-websocket-protocol",
            "sec-websocket-extensions",
            "origin",
        ];
        for (name, value) in &self.headers {
            if !http::is_token(name.as_bytes())
                || !http::is_field_value(value.as_bytes())
                || RESERVED.iter().any(|r| r.eq_ignore_ascii_case(name))
            {
                return Err(ClientError::InvalidRequest("invalid or reserved header"));
            }
        }
        Ok(())
    }
}

/// Why a client handshake failed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientError {
    /// The [`ClientRequest`] cannot be sent: the text says which part is wrong.
    InvalidRequest(&'static str),
    /// The operating system's random source failed while making the key.
    Random(getrandom::Error),
    /// The response head passed [`ClientConfig::max_response_size`].
    ResponseTooLarge,
    /// The response had more than [`ClientConfig::max_headers`] header fields.
    TooManyHeaders,
    /// Not a well-formed HTTP/1.1 response head.
    Malformed,
    /// The server answered with a status other than 101.
    Status(Box<ErrorResponse>),
    /// `Upgrade` is missing or not `websocket`.
    Upgrade,
    /// `Connection` has no `upgrade` token.
    Connection,
    /// `Sec-WebSocket-Accept` is missing, repeated, or not the hash of our key.
    Accept,
    /// The server selected a subprotocol that was not offered, or more than one.
    Subprotocol,
    /// The server accepted an extension that was not offered.
    Extension,
    /// The server's permessage-deflate answer is invalid.
    #[cfg(feature = "deflate")]
    Deflate(NegotiationError),
}

display! { ClientError {
    ClientError::InvalidRequest(what) => "invalid handshake request: {what}";
    ClientError::Random(e) => "no random key: {e}";
    ClientError::ResponseTooLarge => "response head too large";
    ClientError::TooManyHeaders => "too many response headers";
    ClientError::Malformed => "malformed HTTP response";
    ClientError::Status(r) => "server answered {} {}", r.status, r.reason;
    ClientError::Upgrade => "response Upgrade header is not websocket";
    ClientError::Connection => "response Connection header lacks upgrade";
    ClientError::Accept => "wrong Sec-WebSocket-Accept";
    ClientError::Subprotocol => "server selected a subprotocol not offered";
    ClientError::Extension => "server accepted an extension not offered";
    #[cfg(feature = "deflate")]
    ClientError::Deflate(e) => "permessage-deflate: {e}";
} }

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            #[cfg(feature = "deflate")]
            ClientError::Deflate(e) => Some(e),
            _ => None,
        }
    }
}

impl From<http::Over> for ClientError {
    fn from(over: http::Over) -> Self {
        match over {
            http::Over::Fields => ClientError::TooManyHeaders,
            http::Over::Size => ClientError::ResponseTooLarge,
        }
    }
}

/// A response other than 101: what the server said instead of upgrading.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ErrorResponse {
    /// The status code.
    pub status: u16,
    /// The reason phrase.
    pub reason: String,
    /// The header fields, in order.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The bytes after the head that had arrived with it (the start of the body).
    pub body: Vec<u8>,
}

impl ErrorResponse {
    /// The value of the first header named `name` (ASCII case-insensitive).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        find_header(&self.headers, name)
    }
}

/// A handshake the server accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Upgraded {
    /// The response's status: 101 Switching Protocols (200 for an HTTP/2 extended
    /// CONNECT, RFC 8441 5).
    pub status: u16,
    /// The subprotocol the server selected, if any.
    pub subprotocol: Option<String>,
    /// The agreed permessage-deflate parameters, if the server accepted the offer.
    #[cfg(feature = "deflate")]
    pub deflate: Option<DeflateParams>,
    /// The response's header fields, in order.
    pub headers: Vec<(String, Vec<u8>)>,
    /// Bytes that arrived after the response head: the first frames, for the codec.
    pub leftover: Vec<u8>,
}

impl Upgraded {
    /// The value of the first response header named `name` (ASCII case-insensitive).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        find_header(&self.headers, name)
    }

    /// What this handshake agreed, with this end's deflate settings from `config` (the
    /// configuration the handshake ran with), for `tokio::from_handshake`.
    pub fn negotiated(&self, config: &ClientConfig) -> super::Negotiated {
        let _ = config;
        super::Negotiated {
            subprotocol: self.subprotocol.clone(),
            #[cfg(feature = "deflate")]
            deflate: self.deflate.zip(config.deflate.clone()),
        }
    }

    /// Splits off what the application keeps (the [`Response`]) from the bytes the codec
    /// takes ([`leftover`](Self::leftover)).
    pub fn into_response(self) -> (Response, Vec<u8>) {
        let response = Response {
            status: self.status,
            headers: self.headers,
            subprotocol: self.subprotocol,
            #[cfg(feature = "deflate")]
            deflate: self.deflate,
        };
        (response, self.leftover)
    }
}

/// The server's answer that opened a client connection: its status and header fields
/// (cookies, a server's own headers), and what they agreed, as the IO layers' clients
/// return it (`tokio::connect_with_response`, `blocking::connect_with_response`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Response {
    /// 101 Switching Protocols (200 for an HTTP/2 extended CONNECT).
    pub status: u16,
    /// The response's header fields, in order, as received.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The subprotocol the server selected, if any.
    pub subprotocol: Option<String>,
    /// The agreed permessage-deflate parameters; `None` when the server declined the offer
    /// (or none was made), and messages then travel uncompressed.
    #[cfg(feature = "deflate")]
    pub deflate: Option<DeflateParams>,
}

impl Response {
    /// The value of the first header named `name` (ASCII case-insensitive).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        find_header(&self.headers, name)
    }

    /// Every value of the headers named `name` (ASCII case-insensitive), in order: for
    /// repeated fields such as `Set-Cookie`.
    pub fn header_values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.headers
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
    }

    /// The subprotocol the server selected, if any.
    pub fn subprotocol(&self) -> Option<&str> {
        self.subprotocol.as_deref()
    }

    deflate_agreed!();
}

/// The response as an `http` type (features `hyper` or `axum`), headers that are not
/// valid `http` names or values left out.
#[cfg(feature = "hyper")]
impl From<Response> for ::http::Response<()> {
    fn from(r: Response) -> Self {
        let mut response = ::http::Response::new(());
        if let Ok(status) = ::http::StatusCode::from_u16(r.status) {
            *response.status_mut() = status;
        }
        let headers = response.headers_mut();
        for (name, value) in r.headers {
            if let (Ok(name), Ok(value)) = (
                ::http::HeaderName::from_bytes(name.as_bytes()),
                ::http::HeaderValue::from_bytes(&value),
            ) {
                headers.append(name, value);
            }
        }
        response
    }
}

fn find_header<'a>(headers: &'a [(String, Vec<u8>)], name: &str) -> Option<&'a [u8]> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_slice())
}

/// The client end of a handshake: made with the request to send, then fed the response.
///
/// ```
/// use rapidws::handshake::{ClientConfig, ClientHandshake, ClientRequest};
///
/// let request = ClientRequest::new("example.com", "/chat").subprotocol("chat.v1");
/// let (mut handshake, bytes) = ClientHandshake::new(&request, ClientConfig::default()).unwrap();
/// assert!(bytes.starts_with(b"GET /chat HTTP/1.1\r\n"));
/// // ... send `bytes`, then feed what the server answers:
/// assert_eq!(handshake.feed(b"HTTP/1.1 101 Switching Protocols\r\n").unwrap(), None);
/// ```
#[derive(Debug)]
pub struct ClientHandshake {
    head: HeadBuffer,
    max_headers: usize,
    expected_accept: String,
    agreed: Offer,
}

impl ClientHandshake {
    /// Validates `request`, draws a random `Sec-WebSocket-Key`, and returns the handshake
    /// with the request bytes to send.
    pub fn new(
        request: &ClientRequest,
        config: ClientConfig,
    ) -> Result<(Self, Vec<u8>), ClientError> {
        // RFC 6455 4.1: the nonce "MUST be selected randomly for each connection".
        let mut key = [0u8; 16];
        getrandom::fill(&mut key).map_err(ClientError::Random)?;
        Self::with_key(request, config, key)
    }

    /// [`new`](ClientHandshake::new) with a given key, for reproducible tests. Real
    /// clients must use a fresh random key for every connection (RFC 6455 4.1).
    pub fn with_key(
        request: &ClientRequest,
        config: ClientConfig,
        key: [u8; 16],
    ) -> Result<(Self, Vec<u8>), ClientError> {
        request.validate()?;
        let key = base64::engine::general_purpose::STANDARD.encode(key);

        let mut out = Vec::with_capacity(256);
        out.extend_from_slice(b"GET ");
        out.extend_from_slice(request.path.as_bytes());
        out.extend_from_slice(b" HTTP/1.1\r\n");
        http::put_header(&mut out, "Host", request.host.as_bytes());
        http::put_header(&mut out, "Upgrade", b"websocket");
        http::put_header(&mut out, "Connection", b"Upgrade");
        http::put_header(&mut out, "Sec-WebSocket-Key", key.as_bytes());
        http::put_header(&mut out, "Sec-WebSocket-Version", b"13");
        if let Some(origin) = &request.origin {
            http::put_header(&mut out, "Origin", origin.as_bytes());
        }
        if !request.subprotocols.is_empty() {
            let list = request.subprotocols.join(", ");
            http::put_header(&mut out, "Sec-WebSocket-Protocol", list.as_bytes());
        }
        #[cfg(feature = "deflate")]
        if let Some(deflate) = &config.deflate {
            let offer = crate::deflate::negotiate::client_offer(deflate);
            http::put_header(&mut out, "Sec-WebSocket-Extensions", offer.as_bytes());
        }
        for (name, value) in &request.headers {
            http::put_header(&mut out, name, value.as_bytes());
        }
        out.extend_from_slice(b"\r\n");

        let handshake = ClientHandshake {
            head: HeadBuffer::new(config.max_response_size),
            max_headers: config.max_headers,
            expected_accept: accept_key(key.as_bytes()),
            agreed: Offer {
                subprotocols: request.subprotocols.clone(),
                #[cfg(feature = "deflate")]
                deflate: config.deflate,
            },
        };
        Ok((handshake, out))
    }

    /// Adds received response bytes. `Ok(None)`: the head is not complete yet, feed more.
    /// `Ok(Some(upgraded))`: the server accepted; bytes after the head are in
    /// [`Upgraded::leftover`]. `Err(e)`: the handshake failed; close the connection.
    ///
    /// Once it returns `Some`, the handshake is over: bytes read later belong to the codec
    /// (after the leftover), not to this parser, which has been emptied and would read them
    /// as a new response.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Option<Upgraded>, ClientError> {
        match self.head.push(bytes) {
            Fill::Partial => Ok(None),
            Fill::TooLarge => Err(ClientError::ResponseTooLarge),
            Fill::Complete { head, rest } => self.parse(&head, rest).map(Some),
        }
    }

    /// How many bytes of an incomplete response head are buffered.
    pub fn buffered(&self) -> usize {
        self.head.len()
    }

    fn parse(&self, head: &[u8], rest: Vec<u8>) -> Result<Upgraded, ClientError> {
        let mut slots = vec![httparse::EMPTY_HEADER; self.max_headers];
        let mut resp = httparse::Response::new(&mut slots);
        match resp.parse(head) {
            Ok(httparse::Status::Complete(n)) if n == head.len() => {}
            Err(httparse::Error::TooManyHeaders) => return Err(ClientError::TooManyHeaders),
            _ => return Err(ClientError::Malformed),
        }
        if resp.version != Some(1) {
            return Err(ClientError::Malformed);
        }
        let status = resp.code.unwrap_or_default();
        let headers: Vec<(String, Vec<u8>)> = resp
            .headers
            .iter()
            .map(|h| (h.name.to_owned(), h.value.to_vec()))
            .collect();
        let values = |name: &'static str| {
            headers
                .iter()
                .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_slice())
        };

        // RFC 6455 4.1: "If the status code received from the server is not 101, the
        // client handles the response per HTTP [RFC2616] procedures."
        if status != 101 {
            return Err(ClientError::Status(Box::new(ErrorResponse {
                status,
                reason: resp.reason.unwrap_or_default().to_owned(),
                headers,
                body: rest,
            })));
        }
        // RFC 6455 4.1: "If the response lacks an |Upgrade| header field or the |Upgrade|
        // header field contains a value that is not an ASCII case-insensitive match for
        // the value "websocket", the client MUST _Fail the WebSocket Connection_."
        let upgrade: Vec<&[u8]> = values("upgrade").flat_map(http::list_items).collect();
        if !matches!(upgrade[..], [u] if u.eq_ignore_ascii_case(b"websocket")) {
            return Err(ClientError::Upgrade);
        }
        // "If the response lacks a |Connection| header field or the |Connection| header
        // field doesn't contain a token that is an ASCII case-insensitive match for the
        // value "Upgrade", the client MUST _Fail the WebSocket Connection_."
        if !http::lists_contain(values("connection"), b"upgrade") {
            return Err(ClientError::Connection);
        }
        // "If the response lacks a |Sec-WebSocket-Accept| header field or the
        // |Sec-WebSocket-Accept| contains a value other than the base64-encoded SHA-1 of
        // the concatenation of the |Sec-WebSocket-Key| (as a string, not base64-decoded)
        // with the string "258EAFA5-E914-47DA-95CA-C5AB0DC85B11" ... the client MUST
        // _Fail the WebSocket Connection_."
        let accepts: Vec<&[u8]> = values("sec-websocket-accept").collect();
        if !matches!(accepts[..], [a] if a.trim_ascii() == self.expected_accept.as_bytes()) {
            return Err(ClientError::Accept);
        }
        #[cfg_attr(not(feature = "deflate"), allow(unused_variables))]
        let (subprotocol, deflate) = self.agreed.check(values)?;
        Ok(Upgraded {
            status: 101,
            subprotocol,
            #[cfg(feature = "deflate")]
            deflate,
            headers,
            leftover: rest,
        })
    }
}

/// What a client offered that the server's answer must stay within: the subprotocols and
/// the permessage-deflate settings. One check for both forms of the handshake.
#[derive(Debug)]
struct Offer {
    subprotocols: Vec<String>,
    #[cfg(feature = "deflate")]
    deflate: Option<DeflateConfig>,
}

/// The agreed permessage-deflate parameters, or nothing without the feature.
#[cfg(feature = "deflate")]
type AgreedDeflate = Option<DeflateParams>;
#[cfg(not(feature = "deflate"))]
type AgreedDeflate = ();

impl Offer {
    /// Checks the extensions and subprotocol a server answered with; `values(name)` gives
    /// the values of the response's fields named `name`.
    fn check<'a, V, I>(&self, values: V) -> Result<(Option<String>, AgreedDeflate), ClientError>
    where
        V: Fn(&'static str) -> I,
        I: Iterator<Item = &'a [u8]>,
    {
        // RFC 6455 4.1: "If the response includes a |Sec-WebSocket-Extensions| header field
        // and this header field indicates the use of an extension that was not present in
        // the client's handshake ..., the client MUST _Fail the WebSocket Connection_."
        let extensions: Vec<&[u8]> = values("sec-websocket-extensions").collect();
        let any_extension = extensions
            .iter()
            .any(|e| http::list_items(e).next().is_some());
        #[cfg(feature = "deflate")]
        let deflate = match &self.deflate {
            Some(config) if !extensions.is_empty() => {
                crate::deflate::negotiate::client_accept(config, &extensions)
                    .map_err(ClientError::Deflate)?
            }
            _ if any_extension => return Err(ClientError::Extension),
            _ => None,
        };
        #[cfg(not(feature = "deflate"))]
        if any_extension {
            return Err(ClientError::Extension);
        }
        // "If the response includes a |Sec-WebSocket-Protocol| header field and this header
        // field indicates the use of a subprotocol that was not present in the client's
        // handshake ..., the client MUST _Fail the WebSocket Connection_."
        let protocols: Vec<&[u8]> = values("sec-websocket-protocol").collect();
        let subprotocol = match protocols[..] {
            [] => None,
            [p] => {
                let p = p.trim_ascii();
                match self.subprotocols.iter().find(|ours| ours.as_bytes() == p) {
                    Some(ours) => Some(ours.clone()),
                    None => return Err(ClientError::Subprotocol),
                }
            }
            _ => return Err(ClientError::Subprotocol),
        };
        #[cfg(feature = "deflate")]
        return Ok((subprotocol, deflate));
        #[cfg(not(feature = "deflate"))]
        Ok((subprotocol, ()))
    }
}
