//! tokio-tungstenite's API on rapidws: a program written for tokio-tungstenite 0.30
//! switches with one line in its Cargo.toml and no line of code,
//!
//! ```toml
//! tokio-tungstenite = { package = "rapidws-tungstenite", version = "0.1" }
//! ```
//!
//! and runs on [rapidws] underneath: its codec, SIMD masking and UTF-8
//! validation, limits and timers. Nothing of tungstenite is used.
//!
//! The same names do the same things: [`accept_async`], [`accept_hdr_async`],
//! [`client_async`], [`connect_async`] and their `_with_config` forms, a
//! [`WebSocketStream`] that is a `Stream` of [`Message`](tungstenite::Message)s and a
//! `Sink` for them, [`MaybeTlsStream`], and the [`tungstenite`] module with the
//! message, error, close-frame, configuration and handshake types and the blocking
//! [`WebSocket`](tungstenite::WebSocket), [`connect`](tungstenite::connect) and
//! [`accept`](tungstenite::accept).
//!
//! ```no_run
//! use futures_util::{SinkExt, StreamExt};
//! use tokio_tungstenite::{accept_async, tungstenite::Message};
//! # extern crate rapidws_tungstenite as tokio_tungstenite;
//!
//! # async fn run(listener: tokio::net::TcpListener) -> Result<(), tokio_tungstenite::tungstenite::Error> {
//! let (tcp, _) = listener.accept().await?;
//! let mut ws = accept_async(tcp).await?;
//! while let Some(msg) = ws.next().await {
//!     let msg = msg?;
//!     if msg.is_text() || msg.is_binary() {
//!         ws.send(msg).await?;
//!     }
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # What differs
//!
//! Where rapidws is stricter by design, programs see it only when a peer misbehaves:
//!
//! - Text is checked as it arrives: a text message that is not UTF-8 closes the connection
//!   with 1007 and yields [`Error::Utf8`], as tungstenite's does
//!   (tungstenite closes without a code).
//! - A peer's invalid close code (or a 1-byte close payload) is a protocol error
//!   ([`ProtocolError::InvalidCloseSequence`],
//!   close 1002); tungstenite answers 1002 and yields the close frame.
//! - Memory is bounded: past the size limits of
//!   [`WebSocketConfig`] (64 MiB a message, 16 MiB
//!   a frame, tungstenite's) the connection closes with 1009 and yields
//!   [`Error::Capacity`]; all connections share a memory
//!   budget for messages being received (1 GiB; past it 1013); pongs and close echoes
//!   waiting for a peer that does not read stop the reading.
//! - Timers: the opening handshake must finish within 10 s, a fragmented message within
//!   30 s, a peer that stopped reading fails a send after 30 s, and after our close the
//!   peer's is awaited 5 s. tungstenite has none of these; there is no keepalive and no
//!   idle timeout, as in tungstenite. Those rapidws-specific failures arrive as
//!   [`Error::Io`] of kind `TimedOut`.
//! - A send waits for room in the send queue instead of failing with
//!   `WriteBufferFull`; `write_buffer_size` and `read_buffer_size` are hints rapidws
//!   does without; `accept_unmasked_frames` is not supported.
//! - A ping or pong over 125 bytes is refused at the send
//!   ([`ProtocolError::ControlFrameTooBig`]); tungstenite sends it and the peer fails.
//! - `Message::Frame` is sent only for a whole message, a ping, a pong or a close.
//! - TLS is rustls: the `native-tls` features stand for rustls with the operating
//!   system's roots (there is no `Connector::NativeTls`).
//!
//! To set any of rapidws's settings (keepalive, idle timeout, permessage-deflate, the
//! budget, a shutdown signal), open the connection with rapidws ([`rapidws::tokio`]) and
//! wrap it with [`WebSocketStream::from_rapidws`].

#![forbid(unsafe_code)]
#![deny(missing_docs)]
// The error types are tungstenite's API (a callback's `ErrorResponse`, `Error` with its
// `http::Response`), large as they are.
#![allow(clippy::result_large_err)]

pub mod tungstenite;

// Always built: the `connect` and `stream` features are there to be named (the
// dependencies they would add are always in).
mod connect;
mod convert;
mod handshake;
mod stream;
#[cfg(feature = "__rustls-tls")]
mod tls;

pub use rapidws;

pub use connect::{Connector, MaybeTlsStream, connect_async, connect_async_with_config};
#[cfg(feature = "__rustls-tls")]
pub use connect::{client_async_tls, client_async_tls_with_config, connect_async_tls_with_config};
pub use stream::WebSocketStream;

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::handshake::{Accepted, ClientSide, Decision, ServerSide, decide};
use tungstenite::client::IntoClientRequest;
use tungstenite::error::{Error, ProtocolError};
use tungstenite::handshake::client::Response;
use tungstenite::handshake::server::{Callback, NoCallback};
use tungstenite::protocol::{Role, WebSocketConfig};

/// Time allowed for the opening handshake: rapidws's default.
const HANDSHAKE_TIMEOUT: Duration = rapidws::config::DEFAULT_HANDSHAKE_TIMEOUT;

/// The handshake future `f` within [`HANDSHAKE_TIMEOUT`].
async fn within<T>(f: impl Future<Output = Result<T, Error>>) -> Result<T, Error> {
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, f).await {
        Ok(r) => r,
        Err(_) => Err(Error::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "the opening handshake took longer than 10 s",
        ))),
    }
}

/// Reads `stream` until `feed` has a whole head.
async fn read_head<S: AsyncRead + Unpin, T>(
    stream: &mut S,
    mut feed: impl FnMut(&[u8]) -> Result<Option<T>, Error>,
) -> Result<T, Error> {
    let mut buf = [0u8; 4096];
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Err(Error::Protocol(ProtocolError::HandshakeIncomplete));
        }
        if let Some(t) = feed(&buf[..n])? {
            return Ok(t);
        }
    }
}

fn open<S: AsyncRead + AsyncWrite + Unpin>(
    stream: S,
    role: Role,
    config: Option<WebSocketConfig>,
    a: Accepted,
) -> WebSocketStream<S> {
    let config = config.unwrap_or_default();
    let ws = rapidws::tokio::from_handshake(
        stream,
        role.into(),
        &config.to_rapidws(),
        a.negotiated,
        &a.leftover,
    );
    WebSocketStream::with_config(ws, config)
}

/// The client side of the handshake on a connected `stream` (TLS you opened, a Unix
/// socket...).
pub async fn client_async<R, S>(
    request: R,
    stream: S,
) -> Result<(WebSocketStream<S>, Response), Error>
where
    R: IntoClientRequest + Unpin,
    S: AsyncRead + AsyncWrite + Unpin,
{
    client_async_with_config(request, stream, None).await
}

/// [`client_async`] with settings.
pub async fn client_async_with_config<R, S>(
    request: R,
    mut stream: S,
    config: Option<WebSocketConfig>,
) -> Result<(WebSocketStream<S>, Response), Error>
where
    R: IntoClientRequest + Unpin,
    S: AsyncRead + AsyncWrite + Unpin,
{
    let request = request.into_client_request()?;
    let (mut side, bytes) = ClientSide::start(&request)?;
    let (response, accepted) = within(async {
        stream.write_all(&bytes).await?;
        stream.flush().await?;
        read_head(&mut stream, |b| side.feed(b)).await
    })
    .await?;
    Ok((open(stream, Role::Client, config, accepted), response))
}

/// The server side of the handshake on `stream`.
pub async fn accept_async<S>(stream: S) -> Result<WebSocketStream<S>, Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    accept_hdr_async_with_config(stream, NoCallback, None).await
}

/// [`accept_async`] with settings.
pub async fn accept_async_with_config<S>(
    stream: S,
    config: Option<WebSocketConfig>,
) -> Result<WebSocketStream<S>, Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    accept_hdr_async_with_config(stream, NoCallback, config).await
}

/// [`accept_async`] with a [`Callback`] that sees the request (its path, headers) and
/// may add headers to the response or refuse with an error response.
pub async fn accept_hdr_async<S, C>(stream: S, callback: C) -> Result<WebSocketStream<S>, Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
    C: Callback + Unpin,
{
    accept_hdr_async_with_config(stream, callback, None).await
}

/// [`accept_hdr_async`] with settings.
pub async fn accept_hdr_async_with_config<S, C>(
    mut stream: S,
    callback: C,
    config: Option<WebSocketConfig>,
) -> Result<WebSocketStream<S>, Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
    C: Callback + Unpin,
{
    let accepted = within(async {
        let mut side = ServerSide::new();
        let mut refusal = None;
        let read = read_head(&mut stream, |b| {
            side.feed(b).map_err(|(bytes, e)| {
                refusal = Some(bytes);
                e
            })
        })
        .await;
        let decision = match read {
            Ok(request) => decide(request, callback),
            Err(e) => Decision::Refuse(refusal.unwrap_or_default(), e),
        };
        match decision {
            Decision::Accept(bytes, accepted) => {
                stream.write_all(&bytes).await?;
                stream.flush().await?;
                Ok(accepted)
            }
            Decision::Refuse(bytes, e) => {
                if !bytes.is_empty() {
                    let _ = stream.write_all(&bytes).await;
                    let _ = stream.flush().await;
                }
                Err(e)
            }
        }
    })
    .await?;
    Ok(open(stream, Role::Server, config, accepted))
}
