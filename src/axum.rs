//! An [axum](https://docs.rs/axum) 0.8 extractor for WebSocket upgrades (feature `axum`),
//! in the shape of axum's own `ws` module.
//!
//! ```no_run
//! use axum::Router;
//! use axum::response::IntoResponse;
//! use axum::routing::get;
//! use rapidws::axum::WebSocketUpgrade;
//!
//! async fn echo(ws: WebSocketUpgrade) -> impl IntoResponse {
//!     ws.protocols(["chat"]).on_upgrade(|mut ws| async move {
//!         while let Ok(Some(msg)) = ws.recv().await {
//!             if msg.is_data() && ws.send(msg).await.is_err() {
//!                 break;
//!             }
//!         }
//!     })
//! }
//!
//! let app: Router = Router::new().route("/ws", get(echo));
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

#[cfg(feature = "deflate")]
use crate::deflate::DeflateConfig;
use crate::handshake;
use crate::hyper::{HyperWebSocket, Refusal};
use crate::tokio::{Error, ServerConfig};

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
/// [`handshake::ServerConfig`]). The connection settings, subprotocols, origin check and
/// permessage-deflate come from the [`ServerConfig`] set with the builder methods:
/// [`ServerConfig::default`] unless changed, which has permessage-deflate off.
pub struct WebSocketUpgrade {
    request: handshake::Request,
    on_upgrade: OnUpgrade,
    config: ServerConfig,
    on_failed_upgrade: Option<FailedUpgrade>,
}

impl fmt::Debug for WebSocketUpgrade {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebSocketUpgrade")
            .field("path", &self.request.path())
            .field("config", &self.config)
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
            on_upgrade,
            config,
            on_failed_upgrade: None,
        })
    }
}

impl WebSocketUpgrade {
    /// Replaces the whole server configuration (connection settings, subprotocols, origin
    /// check, permessage-deflate). Call it before the finer setters below, which change
    /// the configuration in place.
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
        self.config.handshake.subprotocols = protocols.into_iter().map(Into::into).collect();
        self
    }

    /// Accepts the client's permessage-deflate offer with these settings (`None`: decline).
    #[cfg(feature = "deflate")]
    pub fn deflate(mut self, deflate: Option<DeflateConfig>) -> Self {
        self.config.handshake.deflate = deflate;
        self
    }

    /// Sets the largest message accepted (inflated size when compressed).
    pub fn max_message_size(mut self, bytes: usize) -> Self {
        self.config.connection.max_message_size = bytes;
        self
    }

    /// Sets the largest frame accepted.
    pub fn max_frame_size(mut self, bytes: usize) -> Self {
        self.config.connection.max_frame_size = bytes;
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

    /// Accepts the upgrade: returns the 101 response (200 over HTTP/2) for the handler to
    /// return, and runs `callback` with the [`HyperWebSocket`] on a new tokio task once
    /// hyper has sent the response and handed the connection (or stream) over.
    ///
    /// When accepting fails (the configured origin check refuses the request, or a
    /// configured subprotocol is not a valid header value), the refusal is returned
    /// instead and `callback` never runs.
    pub fn on_upgrade<C, Fut>(self, callback: C) -> Response
    where
        C: FnOnce(HyperWebSocket) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let (response, upgrade) =
            match crate::hyper::switch(&self.request, self.on_upgrade, &self.config) {
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
