//! The opening handshake, on rapidws's sans-IO parsers: what the async and the blocking
//! functions share (building the request, reading the answer, running the callback).
//! They only move the bytes.

use std::io;

use http::{HeaderValue, StatusCode};
use rapidws::handshake as rh;

use crate::tungstenite::error::{
    CapacityError, Error, ProtocolError, Result, SubProtocolError, UrlError,
};
use crate::tungstenite::handshake::client::{Request, Response};
use crate::tungstenite::handshake::server::{self, Callback, ErrorResponse};

/// The client side: the request's bytes are sent, then the answer is fed in.
pub(crate) struct ClientSide {
    hs: rh::ClientHandshake,
    /// What was offered in `Sec-WebSocket-Protocol`, as tungstenite checks the answer.
    offered: Option<Vec<String>>,
}

const KEY_HEADERS: [&str; 5] = [
    "host",
    "connection",
    "upgrade",
    "sec-websocket-version",
    "sec-websocket-key",
];

fn invalid_header(name: &str) -> Error {
    match http::HeaderName::from_bytes(name.as_bytes()) {
        Ok(h) => Error::Protocol(ProtocolError::InvalidHeader(Box::new(h))),
        Err(e) => Error::HttpFormat(e.into()),
    }
}

impl ClientSide {
    /// Checks `request` as tungstenite does (the five handshake headers present once each:
    /// `IntoClientRequest` adds them), and makes rapidws's request of it: the same target,
    /// `Host`, subprotocols, `Origin` and other headers, with rapidws's own key.
    pub(crate) fn start(request: &Request) -> Result<(Self, Vec<u8>)> {
        let path = request
            .uri()
            .path_and_query()
            .ok_or(Error::Url(UrlError::NoPathOrQuery))?
            .as_str();
        let path = if path.is_empty() { "/" } else { path };
        let headers = request.headers();
        for name in KEY_HEADERS {
            if headers.get_all(name).iter().count() != 1 {
                return Err(invalid_header(name));
            }
        }
        let host = header_str(headers, "host")?.unwrap_or_default();
        let mut rq = rh::ClientRequest::new(host, path);
        let mut offered = None;
        for (name, value) in headers {
            let n = name.as_str();
            if KEY_HEADERS.contains(&n) {
                continue;
            }
            let v = value_str(name, value)?;
            match n {
                "sec-websocket-protocol" => {
                    let list: Vec<String> = v.split(',').map(|s| s.trim().to_owned()).collect();
                    for p in &list {
                        rq = rq.subprotocol(p.as_str());
                    }
                    offered.get_or_insert_with(Vec::new).extend(list);
                }
                "origin" => rq = rq.origin(v),
                _ => rq = rq.header(n, v),
            }
        }
        let (hs, bytes) =
            rh::ClientHandshake::new(&rq, rh::ClientConfig::default()).map_err(client_error)?;
        Ok((ClientSide { hs, offered }, bytes))
    }

    /// Feeds the server's answer: `None` until its head is complete, then the response
    /// and the bytes after it (the first frames).
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Result<Option<(Response, Accepted)>> {
        let Some(up) = self.hs.feed(bytes).map_err(client_error)? else {
            return Ok(None);
        };
        match (&self.offered, &up.subprotocol) {
            (Some(_), None) => {
                return Err(ProtocolError::SecWebSocketSubProtocolError(
                    SubProtocolError::NoSubProtocol,
                )
                .into());
            }
            (None, Some(_)) => {
                return Err(ProtocolError::SecWebSocketSubProtocolError(
                    SubProtocolError::ServerSentSubProtocolNoneRequested,
                )
                .into());
            }
            _ => {}
        }
        let mut response = http::Response::new(None);
        *response.status_mut() = StatusCode::from_u16(up.status)?;
        for (name, value) in &up.headers {
            let name = http::HeaderName::from_bytes(name.as_bytes())?;
            response
                .headers_mut()
                .append(name, HeaderValue::from_bytes(value)?);
        }
        let accepted = Accepted {
            negotiated: up.negotiated(&rh::ClientConfig::default()),
            leftover: up.leftover,
        };
        Ok(Some((response, accepted)))
    }
}

/// What the connection opens with after a handshake.
pub(crate) struct Accepted {
    pub(crate) negotiated: rh::Negotiated,
    pub(crate) leftover: Vec<u8>,
}

fn header_str<'a>(headers: &'a http::HeaderMap, name: &str) -> Result<Option<&'a str>> {
    match headers.get(name) {
        Some(v) => Ok(Some(v.to_str()?)),
        None => Ok(None),
    }
}

fn value_str<'a>(name: &http::HeaderName, value: &'a HeaderValue) -> Result<&'a str> {
    value.to_str().map_err(|e| {
        Error::Utf8(format!(
            "{e} for header name '{name}' with value: {value:?}"
        ))
    })
}

/// A refused or failed client handshake, as tungstenite reports it.
pub(crate) fn client_error(e: rh::ClientError) -> Error {
    use rh::ClientError as C;
    match e {
        C::Status(r) => {
            let mut response = http::Response::new(Some(r.body.clone()));
            if let Ok(s) = StatusCode::from_u16(r.status) {
                *response.status_mut() = s;
            }
            for (name, value) in &r.headers {
                if let (Ok(n), Ok(v)) = (
                    http::HeaderName::from_bytes(name.as_bytes()),
                    HeaderValue::from_bytes(value),
                ) {
                    response.headers_mut().append(n, v);
                }
            }
            Error::Http(Box::new(response))
        }
        C::TooManyHeaders => Error::Capacity(CapacityError::TooManyHeaders),
        C::Malformed => Error::Protocol(ProtocolError::HttparseError(httparse::Error::Status)),
        C::Upgrade => Error::Protocol(ProtocolError::MissingUpgradeWebSocketHeader),
        C::Connection => Error::Protocol(ProtocolError::MissingConnectionUpgradeHeader),
        C::Accept => Error::Protocol(ProtocolError::SecWebSocketAcceptKeyMismatch),
        C::Subprotocol => Error::Protocol(ProtocolError::SecWebSocketSubProtocolError(
            SubProtocolError::InvalidSubProtocol,
        )),
        other => Error::Io(io::Error::other(other)),
    }
}

/// A request rapidws refused before the callback, as tungstenite reports it.
pub(crate) fn server_error(e: rh::ServerError) -> Error {
    use rh::ServerError as S;
    match e {
        S::TooManyHeaders => Error::Capacity(CapacityError::TooManyHeaders),
        S::Malformed => Error::Protocol(ProtocolError::HttparseError(httparse::Error::Token)),
        S::MethodNotAllowed => Error::Protocol(ProtocolError::WrongHttpMethod),
        S::HttpVersion => Error::Protocol(ProtocolError::WrongHttpVersion),
        S::Upgrade => Error::Protocol(ProtocolError::MissingUpgradeWebSocketHeader),
        S::Connection => Error::Protocol(ProtocolError::MissingConnectionUpgradeHeader),
        S::Version => Error::Protocol(ProtocolError::MissingSecWebSocketVersionHeader),
        S::Key => Error::Protocol(ProtocolError::InvalidSecWebSocketKey),
        S::Host => invalid_header("host"),
        other => Error::Io(io::Error::other(other)),
    }
}

/// The server side: the request is fed in, then [`decide`] says what to answer.
pub(crate) struct ServerSide {
    hs: rh::ServerHandshake,
}

/// What the server answers.
pub(crate) enum Decision {
    /// The 101 to write, then the connection.
    Accept(Vec<u8>, Accepted),
    /// The refusal to write, then the error to return.
    Refuse(Vec<u8>, Error),
}

impl ServerSide {
    pub(crate) fn new() -> Self {
        ServerSide {
            hs: rh::ServerHandshake::new(&rh::ServerConfig::default()),
        }
    }

    /// Feeds the client's bytes: `None` until the request head is complete.
    /// A request rapidws refuses is `Err`: the refusal to write and the error to return.
    pub(crate) fn feed(
        &mut self,
        bytes: &[u8],
    ) -> std::result::Result<Option<rh::Request>, (Vec<u8>, Error)> {
        self.hs
            .feed(bytes)
            .map_err(|e| (e.response(), server_error(e)))
    }
}

/// Runs `callback` on the request with the 101 tungstenite would send, and writes what it
/// returns: the response it made (its headers as they are, a `Sec-WebSocket-Protocol`
/// among them), or its error response with the body.
pub(crate) fn decide<C: Callback>(request: rh::Request, callback: C) -> Decision {
    match decide_inner(request, callback) {
        Ok(d) => d,
        Err(e) => Decision::Refuse(Vec::new(), e),
    }
}

fn decide_inner<C: Callback>(request: rh::Request, callback: C) -> Result<Decision> {
    let mut req = server::Request::new(());
    *req.uri_mut() = request.path().parse()?;
    *req.version_mut() = http::Version::HTTP_11;
    for (name, value) in request.headers() {
        req.headers_mut().append(
            http::HeaderName::from_bytes(name.as_bytes())?,
            HeaderValue::from_bytes(value)?,
        );
    }
    let mut response = server::Response::new(());
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    *response.version_mut() = http::Version::HTTP_11;
    let h = response.headers_mut();
    h.insert(
        http::header::CONNECTION,
        HeaderValue::from_static("Upgrade"),
    );
    h.insert(http::header::UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(
        http::header::SEC_WEBSOCKET_ACCEPT,
        HeaderValue::from_str(&rh::accept_key(request.key()))?,
    );
    match callback.on_request(&req, response) {
        Ok(response) => {
            let mut out = head(response.status(), response.headers());
            out.extend_from_slice(b"\r\n");
            let mut negotiated = rh::Negotiated::new();
            if let Some(p) = response.headers().get(http::header::SEC_WEBSOCKET_PROTOCOL) {
                negotiated = negotiated.with_subprotocol(p.to_str()?);
            }
            let leftover = request.leftover().to_vec();
            Ok(Decision::Accept(
                out,
                Accepted {
                    negotiated,
                    leftover,
                },
            ))
        }
        Err(refusal) => refuse(refusal),
    }
}

fn refuse(refusal: ErrorResponse) -> Result<Decision> {
    if refusal.status().is_success() {
        return Err(Error::Protocol(ProtocolError::CustomResponseSuccessful));
    }
    let mut out = head(refusal.status(), refusal.headers());
    out.extend_from_slice(b"\r\n");
    if let Some(body) = refusal.body() {
        out.extend_from_slice(body.as_bytes());
    }
    let (parts, body) = refusal.into_parts();
    let response = http::Response::from_parts(parts, body.map(String::into_bytes));
    Ok(Decision::Refuse(out, Error::Http(Box::new(response))))
}

/// A response head without its final CRLF.
fn head(status: StatusCode, headers: &http::HeaderMap) -> Vec<u8> {
    let mut out = Vec::with_capacity(160);
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in headers {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out
}
