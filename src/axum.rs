//! An [axum](https://docs.rs/axum) 0.8 extractor for WebSocket upgrades (feature `axum`),
//! in the shape of axum's own `ws` module.
//!
//! Everything a route needs is here, named as in axum's own `extract::ws`:
//! [`WebSocketUpgrade`], the [`WebSocket`] it hands over (the server end over hyper's
//! connection, [`HyperWebSocket`]), [`Message`], [`CloseFrame`], [`CloseCode`] and
//! [`Utf8Bytes`].
//!
//! ```no_run
//! use axum::Router;
//! use axum::response::IntoResponse;
//! use axum::routing::any;
//! use rapidws::axum::{Message, WebSocket, WebSocketUpgrade};
//!
//! async fn route(ws: WebSocketUpgrade) -> impl IntoResponse {
//!     ws.protocols(["chat"]).on_upgrade(echo)
//! }
//!
//! async fn echo(mut ws: WebSocket) {
//!     while let Ok(Some(msg)) = ws.recv().await {
//!         let reply = match msg {
//!             Message::Text(text) => Message::from(format!("you said: {text}")),
//!             Message::Binary(data) => Message::Binary(data),
//!             _ => continue, // pings are answered, the close echoed, by the library
//!         };
//!         if ws.send(reply).await.is_err() {
//!             break;
//!         }
//!     }
//! }
//!
//! // `any`, not `get`: browsers on HTTP/2 open WebSockets with CONNECT (RFC 8441).
//! let app: Router = Router::new().route("/ws", any(route));
//! ```
//!
//! Extraction validates the request with the core handshake (see [`crate::hyper`]); a
//! request that is not a valid upgrade is rejected with the matching HTTP response
//! ([`WebSocketUpgradeRejection`]: 400, 405, 426 with `Sec-WebSocket-Version: 13`, ...).
//!
//! Over HTTP/2 (RFC 8441) the same extractor takes the extended CONNECT browsers send on an
//! HTTP/2 connection whose server advertised `SETTINGS_ENABLE_CONNECT_PROTOCOL`, which
//! `axum::serve` does when axum's `http2` feature is on; it is answered with 200 and the
//! callback gets the same [`HyperWebSocket`], running on that stream. Such a request's
//! method is CONNECT, so route it with `any` (or `get(..).connect(..)`) rather than
//! `get` alone. [`crate::hyper`] says what differs on a stream.
//! The builder methods then set what the connection uses, and
//! [`on_upgrade`](WebSocketUpgrade::on_upgrade) answers with the 101 response and runs
//! the callback on its own task once the connection is handed over.

use std::fmt;
use std::future::Future;

use ::hyper::upgrade::OnUpgrade;
use axum_core::body::Body;
use axum_core::extract::FromRequestParts;
use axum_core::response::{IntoResponse, Response};
use http::request::Parts;
use http::{HeaderMap, Uri};

#[cfg(feature = "deflate")]
use crate::deflate::DeflateConfig;
use crate::handshake;
use crate::hyper::Refusal;
use crate::tokio::{Error, ServerConfig, Shutdown};

pub use crate::codec::CloseCode;
pub use crate::hyper::HyperWebSocket;
pub use crate::message::{CloseFrame, Message, Utf8Bytes};

/// The WebSocket [`WebSocketUpgrade::on_upgrade`] hands over: the server end over hyper's
/// upgraded connection (the same type as [`HyperWebSocket`]).
pub type WebSocket = HyperWebSocket;

/// Why a request could not be extracted as a [`WebSocketUpgrade`]; as a response, the
/// HTTP refusal ([`Refusal::response`]).
pub type WebSocketUpgradeRejection = Refusal;

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        self.response().map(Body::from)
    }
}

type FailedUpgrade = Box<dyn FnOnce(Error) + Send>;

/// Extractor for a WebSocket upgrade request; answer it with
/// [`on_upgrade`](WebSocketUpgrade::on_upgrade).
///
/// The request was validated when extracted (method, HTTP/1.1, `Upgrade`, `Connection`,
/// `Sec-WebSocket-Version: 13`, the key; over HTTP/2, CONNECT with `:protocol` websocket
/// and `sec-websocket-version: 13`; with the default head limits of
/// [`handshake::ServerConfig`]). Its URI and headers stay readable as `http` types
/// ([`uri`](Self::uri), [`headers`](Self::headers)) for routing and authentication.
///
/// The connection settings, subprotocols, origin check and permessage-deflate come from
/// a [`ServerConfig`] ([`config`](Self::config); [`ServerConfig::default`] unless set,
/// which has permessage-deflate off) and the finer setters
/// ([`protocols`](Self::protocols), [`deflate`](Self::deflate),
/// [`max_message_size`](Self::max_message_size), [`max_frame_size`](Self::max_frame_size)),
/// which win over the same fields of the configuration in whatever order they are
/// called.
///
/// ```no_run
/// use axum::http::HeaderValue;
/// use axum::response::IntoResponse;
/// use rapidws::axum::WebSocketUpgrade;
/// use rapidws::deflate::DeflateConfig;
/// use rapidws::tokio::ServerConfig;
///
/// async fn route(ws: WebSocketUpgrade) -> impl IntoResponse {
///     let user = ws.headers().get("x-user").cloned();
///     let mut response = ws
///         .max_message_size(1 << 20)
///         .deflate(Some(DeflateConfig::default()))
///         // Set before or after, the two settings above stay.
///         .config(ServerConfig::default().with_max_connections(100))
///         .on_upgrade(|mut ws| async move {
///             let _ = ws.send_text("welcome").await;
///         });
///     // The 101 response is the handler's own: add headers to it.
///     if let Some(user) = user {
///         response.headers_mut().insert("x-hello", user);
///     }
///     response.headers_mut().insert("x-server", HeaderValue::from_static("rapidws"));
///     response
/// }
/// ```
pub struct WebSocketUpgrade {
    request: handshake::Request,
    uri: Uri,
    headers: HeaderMap,
    on_upgrade: OnUpgrade,
    config: ServerConfig,
    overrides: Overrides,
    on_failed_upgrade: Option<FailedUpgrade>,
}

/// What the finer setters chose, applied over the configuration when the upgrade is
/// accepted, so that they hold whichever order the builder calls come in.
#[derive(Debug, Default)]
struct Overrides {
    protocols: Option<Vec<String>>,
    #[cfg(feature = "deflate")]
    deflate: Option<Option<DeflateConfig>>,
    max_message_size: Option<usize>,
    max_frame_size: Option<usize>,
    shutdown: Option<Shutdown>,
}

impl Overrides {
    fn apply(self, mut config: ServerConfig) -> ServerConfig {
        if let Some(p) = self.protocols {
            config.handshake.subprotocols = p;
        }
        #[cfg(feature = "deflate")]
        if let Some(d) = self.deflate {
            config.handshake.deflate = d;
        }
        if let Some(n) = self.max_message_size {
            config.connection.max_message_size = n;
        }
        if let Some(n) = self.max_frame_size {
            config.connection.max_frame_size = n;
        }
        if let Some(s) = self.shutdown {
            config.connection.shutdown = Some(s);
        }
        config
    }
}

impl fmt::Debug for WebSocketUpgrade {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebSocketUpgrade")
            .field("uri", &self.uri)
            .field("config", &self.config)
            .field("overrides", &self.overrides)
            .finish_non_exhaustive()
    }
}

impl<S: Send + Sync> FromRequestParts<S> for WebSocketUpgrade {
    type Rejection = WebSocketUpgradeRejection;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let config = ServerConfig::default();
        let request = crate::hyper::validate(
            &parts.method,
            parts.version,
            &parts.uri,
            &parts.headers,
            &parts.extensions,
            &config.handshake,
        )?;
        let on_upgrade = crate::hyper::take_on_upgrade(&mut parts.extensions)?;
        Ok(WebSocketUpgrade {
            request,
            uri: parts.uri.clone(),
            headers: parts.headers.clone(),
            on_upgrade,
            config,
            overrides: Overrides::default(),
            on_failed_upgrade: None,
        })
    }
}

/// A size limit given to a setter: `0` stands for `default`, not "refuse everything".
fn zero_is_default(bytes: usize, default: usize) -> usize {
    if bytes == 0 { default } else { bytes }
}

impl WebSocketUpgrade {
    /// Sets the server configuration (connection settings, subprotocols, origin check,
    /// permessage-deflate). The finer setters ([`protocols`](Self::protocols),
    /// [`deflate`](Self::deflate), [`max_message_size`](Self::max_message_size),
    /// [`max_frame_size`](Self::max_frame_size)) win over the same fields, whether they are
    /// called before this or after.
    pub fn config(mut self, config: ServerConfig) -> Self {
        self.config = config;
        self
    }

    /// Sets the subprotocols this endpoint speaks, most preferred first: the first one the
    /// client offered is selected ([`WebSocket::subprotocol`](crate::tokio::WebSocket::subprotocol)).
    pub fn protocols<I, P>(mut self, protocols: I) -> Self
    where
        I: IntoIterator<Item = P>,
        P: Into<String>,
    {
        self.overrides.protocols = Some(protocols.into_iter().map(Into::into).collect());
        self
    }

    /// Accepts the client's permessage-deflate offer with these settings (`None`: decline).
    #[cfg(feature = "deflate")]
    pub fn deflate(mut self, deflate: Option<DeflateConfig>) -> Self {
        self.overrides.deflate = Some(deflate);
        self
    }

    /// Sets the largest message accepted (inflated size when compressed); a larger one
    /// closes the connection with 1009. `0` means the default,
    /// [`DEFAULT_MAX_MESSAGE_SIZE`](crate::codec::DEFAULT_MAX_MESSAGE_SIZE) (16 MiB), not
    /// "refuse every message".
    pub fn max_message_size(mut self, bytes: usize) -> Self {
        self.overrides.max_message_size = Some(zero_is_default(
            bytes,
            crate::codec::DEFAULT_MAX_MESSAGE_SIZE,
        ));
        self
    }

    /// Sets the largest frame accepted; `0` means the default,
    /// [`DEFAULT_MAX_FRAME_SIZE`](crate::codec::DEFAULT_MAX_FRAME_SIZE).
    pub fn max_frame_size(mut self, bytes: usize) -> Self {
        self.overrides.max_frame_size =
            Some(zero_is_default(bytes, crate::codec::DEFAULT_MAX_FRAME_SIZE));
        self
    }

    /// Puts the connection under `shutdown`: it goes away when the signal is given (its
    /// queued messages, then a close with 1001), as the connections of
    /// [`tokio::serve`](crate::tokio::serve) do. axum's own graceful shutdown does not
    /// reach the WebSockets its routes handed over (they are off its HTTP connections
    /// then); this does. [`ServerConfig::with_shutdown`] in [`config`](Self::config)
    /// does the same.
    ///
    /// ```no_run
    /// use axum::Router;
    /// use axum::routing::any;
    /// use rapidws::axum::{WebSocket, WebSocketUpgrade};
    /// use rapidws::tokio::Shutdown;
    ///
    /// async fn echo(mut ws: WebSocket) {
    ///     while let Ok(Some(msg)) = ws.recv().await {
    ///         if msg.is_data() && ws.send(msg).await.is_err() {
    ///             return;
    ///         }
    ///     }
    /// }
    ///
    /// # async fn run() -> std::io::Result<()> {
    /// let shutdown = Shutdown::new();
    /// let route = {
    ///     let shutdown = shutdown.clone();
    ///     any(move |ws: WebSocketUpgrade| async move { ws.shutdown(&shutdown).on_upgrade(echo) })
    /// };
    /// let app = Router::new().route("/ws", route);
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    /// let signal = {
    ///     let shutdown = shutdown.clone();
    ///     async move {
    ///         let _ = tokio::signal::ctrl_c().await;
    ///         shutdown.trigger();
    ///     }
    /// };
    /// // axum stops accepting and finishes its HTTP requests; the signal sent every
    /// // WebSocket its 1001 meanwhile. Then wait for them, bounded: twice the close
    /// // timeout (5 s) is what they take at most, unless a route awaits something else.
    /// axum::serve(listener, app).with_graceful_shutdown(signal).await?;
    /// let _ = tokio::time::timeout(std::time::Duration::from_secs(10), shutdown.drained()).await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn shutdown(mut self, shutdown: &Shutdown) -> Self {
        self.overrides.shutdown = Some(shutdown.clone());
        self
    }

    /// Calls `callback` with the error when hyper fails to hand the connection over after
    /// the 101 response (the client went away first); by default such failures are
    /// dropped.
    pub fn on_failed_upgrade<C>(mut self, callback: C) -> Self
    where
        C: FnOnce(Error) + Send + 'static,
    {
        self.on_failed_upgrade = Some(Box::new(callback));
        self
    }

    /// The validated upgrade request (path, headers, origin, offered subprotocols).
    pub fn request(&self) -> &handshake::Request {
        &self.request
    }

    /// The request's URI (path and query; over HTTP/2 also scheme and authority).
    pub fn uri(&self) -> &Uri {
        &self.uri
    }

    /// The request's header fields, as `http` types.
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// Accepts the upgrade: returns the 101 response (200 over HTTP/2) for the handler to
    /// return (add headers to it with `headers_mut()`), and runs `callback` with the
    /// [`HyperWebSocket`] on a new tokio task once hyper has sent the response and handed
    /// the connection (or stream) over.
    ///
    /// When accepting fails (the configured origin check refuses the request, or a
    /// configured subprotocol is not a valid header value), the refusal is returned
    /// instead and `callback` never runs.
    pub fn on_upgrade<C, Fut>(self, callback: C) -> Response
    where
        C: FnOnce(HyperWebSocket) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let config = self.overrides.apply(self.config);
        let (response, upgrade) =
            match crate::hyper::switch(&self.request, self.on_upgrade, &config) {
                Ok(accepted) => accepted,
                Err(refusal) => return refusal.into_response(),
            };
        let on_failed_upgrade = self.on_failed_upgrade;
        tokio::spawn(async move {
            match upgrade.await {
                Ok(ws) => callback(ws).await,
                Err(e) => {
                    if let Some(report) = on_failed_upgrade {
                        report(e);
                    }
                }
            }
        });
        response.map(Body::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finer_setters_win_over_the_config_in_either_order() {
        let config = ServerConfig::default()
            .with_subprotocols(["from-config"])
            .with_connection(
                crate::Config::default()
                    .with_max_message_size(5)
                    .with_max_frame_size(5),
            );
        let overrides = Overrides {
            protocols: Some(vec!["chat".to_owned()]),
            #[cfg(feature = "deflate")]
            deflate: Some(Some(DeflateConfig::default())),
            max_message_size: Some(1000),
            max_frame_size: None,
            shutdown: None,
        };
        let applied = overrides.apply(config);
        assert_eq!(applied.handshake.subprotocols, ["chat"]);
        #[cfg(feature = "deflate")]
        assert!(applied.handshake.deflate.is_some());
        assert_eq!(applied.connection.max_message_size, 1000);
        // Not overridden: the configuration's own value stays.
        assert_eq!(applied.connection.max_frame_size, 5);
        // Nothing overridden: the configuration as given.
        let plain = Overrides::default().apply(ServerConfig::default());
        assert_eq!(
            plain.connection.max_message_size,
            crate::codec::DEFAULT_MAX_MESSAGE_SIZE
        );
    }
}
