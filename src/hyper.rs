//! WebSocket upgrades served by [hyper](https://docs.rs/hyper) 1.x (feature `hyper`).
//!
//! hyper parses the HTTP request; [`upgrade`] validates it with the same handshake code as
//! [`tokio::accept`](crate::tokio::accept) (method, version, `Upgrade`/`Connection`,
//! `Sec-WebSocket-Version: 13`, the key, then the origin check, the subprotocol and
//! permessage-deflate negotiation), and returns the `101 Switching Protocols` response to
//! send plus an [`UpgradeFuture`]. Once hyper has written the response and handed the
//! connection over, that future yields a [`HyperWebSocket`]. A request that cannot be
//! upgraded gets a [`Refusal`], whose [`response`](Refusal::response) is the matching HTTP
//! error (400, 403, 405, 426 with `Sec-WebSocket-Version: 13`, ...).
//!
//! The connection must be served with upgrades on (`serve_connection(..).with_upgrades()`
//! for hyper's HTTP/1 server; axum's `serve` does so).
//!
//! # HTTP/2 (RFC 8441)
//!
//! The same [`upgrade`] takes the HTTP/2 form too, with nothing to change in the service:
//! an extended CONNECT with `:protocol = websocket` (hyper hands the `:protocol` over as a
//! [`hyper::ext::Protocol`] extension) is validated with the same
//! limits, origin check, subprotocol and permessage-deflate negotiation, answered with
//! `200 OK` instead of 101, and the WebSocket runs on that one stream. Browsers open
//! WebSockets this way on an HTTP/2 connection whose server advertised
//! `SETTINGS_ENABLE_CONNECT_PROTOCOL`: turn it on with `enable_connect_protocol()` on
//! hyper's (or hyper-util's `auto`) HTTP/2 builder; axum's `serve` does so when axum's
//! `http2` feature is on. Other HTTP/2 requests get the fitting refusal: 405 for a
//! method other than CONNECT, 501 for a CONNECT whose `:protocol` is missing or not
//! `websocket`, 400 for a malformed one.
//!
//! What differs on a stream (RFC 8441 6): nothing in the frames (clients still mask);
//! the close handshake ends with the stream's END_STREAM in each direction instead of a
//! TCP close; a stream reset by the peer (RST_STREAM) reaches the application as
//! [`Error::Io`], the abnormal closure that RFC 6455 7.1.5 numbers 1006 (a reset with
//! `CANCEL` or `NO_ERROR` reads as `UnexpectedEof`, others as hyper's error). HTTP/2 flow
//! control is what the send queue waits on: when the peer's stream or connection window
//! is spent, writes stall, the queue fills to
//! [`Config::send_queue_high_water`](crate::Config::send_queue_high_water), and
//! `send` waits while `try_send` answers `QueueFull`, as on a slow TCP socket.
//!
//! What to expect: every stream of a connection shares one TCP connection, so a lost
//! packet or a full TCP send buffer delays every WebSocket on it (head-of-line blocking),
//! and one stream's large message shares the connection window with the others (hyper
//! interleaves DATA frames, so small messages still pass between its chunks). Memory per
//! stream: the WebSocket's own state (the same as over HTTP/1.1, with buffers released
//! when idle) plus hyper's and h2's per-stream state and whatever the peer has sent that
//! is not read yet, which h2 buffers up to the stream window (hyper's server default:
//! 1 MiB; `initial_stream_window_size` sets it). `benches/RESULTS.md` has the figures.
//!
//! ```no_run
//! use std::convert::Infallible;
//! use std::sync::Arc;
//!
//! use hyper::body::Incoming;
//! use hyper::{Request, Response};
//! use rapidws::tokio::ServerConfig;
//!
//! async fn handle(
//!     mut request: Request<Incoming>,
//!     config: Arc<ServerConfig>,
//! ) -> Result<Response<String>, Infallible> {
//!     // Route and authenticate on hyper's request, as `http` types.
//!     if request.headers().get("authorization").is_none() {
//!         let mut refusal = Response::new("who are you?".to_owned());
//!         *refusal.status_mut() = hyper::StatusCode::UNAUTHORIZED;
//!         return Ok(refusal);
//!     }
//!     match rapidws::hyper::upgrade(&mut request, &config) {
//!         Ok((mut response, websocket)) => {
//!             // The 101 response is yours: add headers (cookies, ...) to it.
//!             let cookie = hyper::header::HeaderValue::from_static("session=1");
//!             response.headers_mut().insert(hyper::header::SET_COOKIE, cookie);
//!             tokio::spawn(async move {
//!                 let Ok(mut ws) = websocket.await else { return };
//!                 while let Ok(Some(msg)) = ws.recv().await {
//!                     if msg.is_data() && ws.send(msg).await.is_err() {
//!                         break;
//!                     }
//!                 }
//!             });
//!             Ok(response)
//!         }
//!         Err(refusal) => Ok(refusal.response()),
//!     }
//! }
//! ```
//!
//! The responses have a `String` body, which hyper serves as it is; use
//! `response.map(Into::into)` for another body type.
//!
//! # Shutdown
//!
//! A WebSocket is no longer hyper's once the connection (or stream) is handed over, so
//! hyper's graceful shutdown does not reach it. Give `config` a shutdown signal
//! ([`ServerConfig::with_shutdown`]): every WebSocket it upgrades goes away when the
//! signal is given (its queued messages, then a close with 1001), and
//! [`Shutdown::drained`](crate::tokio::Shutdown::drained) waits until they are gone.

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use ::hyper::upgrade::{OnUpgrade, Upgraded};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Extensions, Method, Response, StatusCode, Uri, Version};
use hyper_util::rt::TokioIo;

#[cfg(feature = "deflate")]
use crate::deflate::DeflateParams;
use crate::handshake::{self, Negotiated, ServerError};
use crate::tokio::{Config, Error, ServerConfig, WebSocket};

/// The WebSocket an [`UpgradeFuture`] yields: the server end over hyper's upgraded
/// connection.
pub type HyperWebSocket = WebSocket<TokioIo<Upgraded>>;

/// Validates `request` as a WebSocket upgrade and accepts it under `config`.
///
/// On success, send the returned `101 Switching Protocols` response from your service and
/// await (or spawn) the [`UpgradeFuture`]: it resolves once hyper has sent the response and
/// released the connection. The connection uses `config.connection`; permessage-deflate is
/// on when `config.handshake.deflate` accepted the client's offer.
///
/// The request's upgrade handle is taken out of its extensions, so call this once per
/// request. On a [`Refusal`], send [`Refusal::response`].
pub fn upgrade<B>(
    request: &mut http::Request<B>,
    config: &ServerConfig,
) -> Result<(Response<String>, UpgradeFuture), Refusal> {
    let validated = validate(
        request.method(),
        request.version(),
        request.uri(),
        request.headers(),
        request.extensions(),
        &config.handshake,
    )?;
    let on_upgrade = take_on_upgrade(request.extensions_mut())?;
    switch(&validated, on_upgrade, config)
}

/// Runs the core's request checks on a request that hyper parsed: the HTTP/1.1 upgrade
/// ([`handshake::Request::from_parts`]) or, for an HTTP/2 request, the extended CONNECT
/// ([`handshake::Request::from_http2_parts`]).
pub(crate) fn validate(
    method: &Method,
    version: Version,
    uri: &Uri,
    headers: &HeaderMap,
    extensions: &Extensions,
    config: &handshake::ServerConfig,
) -> Result<handshake::Request, Refusal> {
    let fields = headers
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_bytes()));
    if version == Version::HTTP_2 {
        let protocol = extensions
            .get::<::hyper::ext::Protocol>()
            .map(::hyper::ext::Protocol::as_str);
        return handshake::Request::from_http2_parts(
            method.as_str(),
            protocol,
            uri.scheme_str(),
            uri.authority().map(|a| a.as_str()),
            uri.path_and_query().map_or("", |p| p.as_str()),
            fields,
            config,
        )
        .map_err(Refusal::from);
    }
    let version = if version == Version::HTTP_11 {
        (1, 1)
    } else if version == Version::HTTP_10 {
        (1, 0)
    } else if version == Version::HTTP_09 {
        (0, 9)
    } else {
        (3, 0)
    };
    let target = uri.path_and_query().map_or("/", |p| p.as_str());
    handshake::Request::from_parts(method.as_str(), version, target, fields, config)
        .map_err(Refusal::from)
}

/// Takes hyper's upgrade handle out of a request's extensions.
pub(crate) fn take_on_upgrade(extensions: &mut Extensions) -> Result<OnUpgrade, Refusal> {
    extensions
        .remove::<OnUpgrade>()
        .ok_or(Refusal::NotUpgradable)
}

/// Accepts a validated request: the 101 response (200 over HTTP/2) and the future of the
/// connection.
pub(crate) fn switch(
    request: &handshake::Request,
    on_upgrade: OnUpgrade,
    config: &ServerConfig,
) -> Result<(Response<String>, UpgradeFuture), Refusal> {
    let agreement = request.agreement(&config.handshake)?;
    let mut response = Response::new(String::new());
    // The core says 101 or 200; both convert.
    *response.status_mut() =
        StatusCode::from_u16(agreement.status).map_err(|_| ServerError::ResponseHeader)?;
    let headers = response.headers_mut();
    for (name, value) in agreement.headers {
        // A configured subprotocol that is not a valid header value is the server's
        // fault: 500.
        let name =
            HeaderName::from_bytes(name.as_bytes()).map_err(|_| ServerError::ResponseHeader)?;
        headers.insert(name, header_value(value)?);
    }
    let mut negotiated = Negotiated::new();
    if let Some(p) = agreement.subprotocol {
        negotiated = negotiated.with_subprotocol(p);
    }
    #[cfg(feature = "deflate")]
    if let Some((params, settings)) = agreement.deflate.zip(config.handshake.deflate.clone()) {
        negotiated = negotiated.with_deflate(params, settings);
    }
    Ok((
        response,
        UpgradeFuture {
            on_upgrade,
            connection: config.connection.clone(),
            negotiated: Some(negotiated),
        },
    ))
}

fn header_value(value: String) -> Result<HeaderValue, ServerError> {
    HeaderValue::try_from(value).map_err(|_| ServerError::ResponseHeader)
}

/// Resolves to the [`HyperWebSocket`] once hyper has sent the 101 response and handed the
/// connection over. Returned by [`upgrade`].
///
/// It fails with [`Error::Io`] (holding hyper's error) when hyper could not upgrade: the
/// client went away first, the response sent was not the 101, or the connection is not
/// served with upgrades on. Bytes the client sent right after its request (its first
/// frames) are not lost: hyper's upgraded connection reads them first.
#[must_use = "the WebSocket exists only once this future is awaited"]
pub struct UpgradeFuture {
    on_upgrade: OnUpgrade,
    connection: Config,
    /// Taken when the connection opens.
    negotiated: Option<Negotiated>,
}

impl UpgradeFuture {
    /// The subprotocol selected for this connection, if any.
    pub fn subprotocol(&self) -> Option<&str> {
        self.negotiated.as_ref().and_then(Negotiated::subprotocol)
    }

    /// The agreed permessage-deflate parameters, when the extension was negotiated.
    #[cfg(feature = "deflate")]
    pub fn deflate(&self) -> Option<&DeflateParams> {
        self.negotiated.as_ref().and_then(Negotiated::deflate)
    }

    /// Whether permessage-deflate was negotiated (never without feature `deflate`).
    pub fn is_deflate(&self) -> bool {
        self.negotiated.as_ref().is_some_and(Negotiated::is_deflate)
    }
}

impl fmt::Debug for UpgradeFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpgradeFuture")
            .field("negotiated", &self.negotiated)
            .finish_non_exhaustive()
    }
}

impl Future for UpgradeFuture {
    type Output = Result<HyperWebSocket, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let upgraded = ready!(Pin::new(&mut this.on_upgrade).poll(cx))
            .map_err(|e| Error::Io(io::Error::other(e)))?;
        // hyper's Upgraded replays whatever it read past the request head, so there are
        // no leftover bytes to hand over.
        Poll::Ready(Ok(crate::tokio::open_server(
            TokioIo::new(upgraded),
            &this.connection,
            this.negotiated.take().unwrap_or_default(),
        )))
    }
}

/// Why a request was not upgraded. [`response`](Refusal::response) is the HTTP answer.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// The request is not a valid WebSocket upgrade, or accepting it failed (the origin
    /// check refused it; a configured subprotocol is not a valid header value). The status
    /// is [`ServerError::status`]: a request without `Upgrade: websocket` gets 400, one
    /// that is not GET 405, a `Sec-WebSocket-Version` other than 13 gets 426.
    Handshake(ServerError),
    /// The request is a valid upgrade but hyper attached no upgrade handle to it: the
    /// connection is not served with upgrades on (500).
    NotUpgradable,
}

impl From<ServerError> for Refusal {
    fn from(e: ServerError) -> Self {
        Refusal::Handshake(e)
    }
}

impl Refusal {
    /// The HTTP status of the refusal.
    pub fn status(&self) -> StatusCode {
        match self {
            Refusal::Handshake(e) => {
                StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
            }
            Refusal::NotUpgradable => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The response refusing the request: the status, the headers it calls for (a 426
    /// names `Sec-WebSocket-Version: 13`, RFC 6455 4.2.2; a 405 says `Allow: GET`), and the
    /// reason as a plain-text body.
    pub fn response(&self) -> Response<String> {
        let mut response = Response::new(self.to_string());
        *response.status_mut() = self.status();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        if let Refusal::Handshake(e) = self {
            for (name, value) in e.response_headers() {
                // The core's names and values are constants that always convert.
                if let (Ok(name), Ok(value)) = (
                    HeaderName::from_bytes(name.as_bytes()),
                    HeaderValue::from_str(value),
                ) {
                    headers.insert(name, value);
                }
            }
            // RFC 9110 7.8: a server that sends Upgrade (426) lists it in Connection too.
            if headers.contains_key(header::UPGRADE) {
                headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
            }
        }
        response
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Handshake(e) => fmt::Display::fmt(e, f),
            Refusal::NotUpgradable => {
                f.write_str("the connection cannot be upgraded (serve it with upgrades on)")
            }
        }
    }
}

impl std::error::Error for Refusal {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Refusal::Handshake(e) => Some(e),
            Refusal::NotUpgradable => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid_request() -> http::Request<()> {
        http::Request::builder()
            .uri("/chat")
            .header("host", "example.com")
            .header("upgrade", "websocket")
            .header("connection", "Upgrade")
            .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
            .header("sec-websocket-version", "13")
            .body(())
            .unwrap()
    }

    #[test]
    fn valid_request_without_upgrade_handle_is_refused_with_500() {
        let mut request = valid_request();
        let refusal = upgrade(&mut request, &ServerConfig::default()).unwrap_err();
        assert_eq!(refusal, Refusal::NotUpgradable);
        assert_eq!(refusal.response().status(), 500);
    }

    #[test]
    fn invalid_request_is_refused_before_the_upgrade_handle_is_looked_at() {
        let mut request = valid_request();
        request
            .headers_mut()
            .insert("sec-websocket-version", HeaderValue::from_static("8"));
        let refusal = upgrade(&mut request, &ServerConfig::default()).unwrap_err();
        assert_eq!(refusal, Refusal::Handshake(ServerError::Version));
    }

    #[test]
    fn version_refusal_names_version_13_and_upgrade() {
        let response = Refusal::Handshake(ServerError::Version).response();
        assert_eq!(response.status(), 426);
        let headers = response.headers();
        assert_eq!(headers["sec-websocket-version"], "13");
        assert_eq!(headers["upgrade"], "websocket");
        assert_eq!(headers["connection"], "upgrade");
        assert_eq!(
            response.body(),
            "unsupported Sec-WebSocket-Version, 13 is required"
        );
    }

    #[test]
    fn method_refusal_allows_get() {
        let response = Refusal::Handshake(ServerError::MethodNotAllowed).response();
        assert_eq!(response.status(), 405);
        assert_eq!(response.headers()["allow"], "GET");
        assert!(!response.headers().contains_key(header::CONNECTION));
    }

    #[test]
    fn http2_get_is_refused_with_405_allowing_connect() {
        let mut request = valid_request();
        *request.version_mut() = Version::HTTP_2;
        let refusal = upgrade(&mut request, &ServerConfig::default()).unwrap_err();
        assert_eq!(refusal, Refusal::Handshake(ServerError::ConnectRequired));
        let response = refusal.response();
        assert_eq!(response.status(), 405);
        assert_eq!(response.headers()["allow"], "CONNECT");
    }

    fn extended_connect(protocol: Option<&'static str>) -> http::Request<()> {
        let mut request = http::Request::builder()
            .method(Method::CONNECT)
            .version(Version::HTTP_2)
            .uri("https://example.com/chat")
            .header("sec-websocket-version", "13")
            .body(())
            .unwrap();
        if let Some(p) = protocol {
            request
                .extensions_mut()
                .insert(::hyper::ext::Protocol::from_static(p));
        }
        request
    }

    #[test]
    fn valid_extended_connect_without_upgrade_handle_is_refused_with_500() {
        let mut request = extended_connect(Some("websocket"));
        let refusal = upgrade(&mut request, &ServerConfig::default()).unwrap_err();
        assert_eq!(refusal, Refusal::NotUpgradable);
    }

    #[test]
    fn extended_connect_for_another_protocol_is_refused_with_501() {
        for protocol in [Some("chat"), None] {
            let mut request = extended_connect(protocol);
            let refusal = upgrade(&mut request, &ServerConfig::default()).unwrap_err();
            assert_eq!(refusal, Refusal::Handshake(ServerError::ConnectProtocol));
            assert_eq!(refusal.status(), 501);
        }
    }

    #[test]
    fn extended_connect_with_version_8_is_refused_with_400_naming_13_without_upgrade() {
        let mut request = extended_connect(Some("websocket"));
        request
            .headers_mut()
            .insert("sec-websocket-version", HeaderValue::from_static("8"));
        let response = upgrade(&mut request, &ServerConfig::default())
            .unwrap_err()
            .response();
        assert_eq!(response.status(), 400);
        assert_eq!(response.headers()["sec-websocket-version"], "13");
        assert!(!response.headers().contains_key(header::UPGRADE));
        assert!(!response.headers().contains_key(header::CONNECTION));
    }
}
