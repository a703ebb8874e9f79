//! [`WebSocketStream`]: tokio-tungstenite's stream and sink, on a rapidws connection.

use std::future::poll_fn;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures_core::{FusedStream, Stream};
use futures_sink::Sink;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::convert::conn_error;
use crate::tungstenite::error::{Error, ProtocolError};
use crate::tungstenite::protocol::{
    CloseFrame, Message, Role, WebSocketConfig, close_for_rapidws, unsendable_frame,
};

/// A WebSocket connection over `S`: a [`Stream`] of received [`Message`]s and a [`Sink`]
/// for messages to send, as tokio-tungstenite's, with a rapidws connection underneath
/// (its codec, SIMD masking and UTF-8 validation, limits and timers).
///
/// The stream yields text, binary, pings and pongs (pings are answered by the
/// connection), the peer's close frame (echoed by the connection), then ends once the
/// close handshake is over; an error is yielded once, then the stream ends. The sink's
/// `close` sends a close frame and flushes it; keep reading to see the peer's answer.
#[derive(Debug)]
pub struct WebSocketStream<S> {
    inner: rapidws::tokio::WebSocket<S>,
    config: WebSocketConfig,
    /// The stream has ended: the close handshake is over, or an error was yielded.
    ended: bool,
    /// `poll_close` has queued our close frame.
    closing: bool,
    /// The peer's close frame has been yielded.
    peer_closed: bool,
}

impl<S> WebSocketStream<S> {
    /// Wraps a rapidws connection, opened with any of rapidws's settings (keepalive, idle
    /// timeout, permessage-deflate, subprotocols, a shutdown signal...), for code written
    /// against tokio-tungstenite.
    pub fn from_rapidws(ws: rapidws::tokio::WebSocket<S>) -> Self {
        Self::with_config(ws, WebSocketConfig::default())
    }

    pub(crate) fn with_config(
        inner: rapidws::tokio::WebSocket<S>,
        config: WebSocketConfig,
    ) -> Self {
        WebSocketStream {
            inner,
            config,
            ended: false,
            closing: false,
            peer_closed: false,
        }
    }

    /// The rapidws connection underneath.
    pub fn into_rapidws(self) -> rapidws::tokio::WebSocket<S> {
        self.inner
    }

    /// The rapidws connection underneath, borrowed (for its subprotocol, its close frame,
    /// the bytes it has queued).
    pub fn rapidws(&self) -> &rapidws::tokio::WebSocket<S> {
        &self.inner
    }

    /// The settings this connection was opened with.
    pub fn get_config(&self) -> &WebSocketConfig {
        &self.config
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> WebSocketStream<S> {
    /// A connection over `stream`, on which the opening handshake has already happened.
    pub async fn from_raw_socket(stream: S, role: Role, config: Option<WebSocketConfig>) -> Self {
        Self::from_partially_read(stream, Vec::new(), role, config).await
    }

    /// [`from_raw_socket`](Self::from_raw_socket), with `part`: bytes already read after
    /// the handshake (the first frames).
    pub async fn from_partially_read(
        stream: S,
        part: Vec<u8>,
        role: Role,
        config: Option<WebSocketConfig>,
    ) -> Self {
        let config = config.unwrap_or_default();
        let ws =
            rapidws::tokio::WebSocket::from_raw(stream, role.into(), &config.to_rapidws(), &part);
        Self::with_config(ws, config)
    }

    /// The stream underneath, consumed (what was buffered is dropped: close first).
    pub fn into_inner(self) -> S {
        self.inner.into_inner()
    }

    /// The stream underneath.
    pub fn get_ref(&self) -> &S {
        self.inner.get_ref()
    }

    /// The stream underneath, to change (reading or writing it breaks the connection).
    pub fn get_mut(&mut self) -> &mut S {
        self.inner.get_mut()
    }

    /// Sends a close frame (`None`: one without a status code) and flushes it. Keep
    /// reading to see the peer's close and the end of the stream.
    pub async fn close(&mut self, msg: Option<CloseFrame>) -> Result<(), Error> {
        let mut this = Pin::new(self);
        poll_fn(|cx| this.as_mut().poll_ready(cx)).await?;
        this.as_mut().start_send(Message::Close(msg))?;
        poll_fn(|cx| this.as_mut().poll_flush(cx)).await
    }

    /// A send refused because the connection is closing or closed: tungstenite's
    /// `SendAfterClosing` while the stream has not ended, `AlreadyClosed` after.
    fn send_error(&self, e: rapidws::Error) -> Error {
        match e {
            rapidws::Error::Closed if !self.ended => {
                Error::Protocol(ProtocolError::SendAfterClosing)
            }
            e => conn_error(e, &self.config),
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Stream for WebSocketStream<S> {
    type Item = Result<Message, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.ended {
            return Poll::Ready(None);
        }
        if self.peer_closed && self.inner.role() == rapidws::Role::Server {
            // Both closes are exchanged: a server's stream ends once ours is written, as
            // tungstenite's does, without waiting for the client to close TCP (dropping
            // the stream closes it).
            let r = ready!(Pin::new(&mut self.inner).poll_flush(cx));
            self.ended = true;
            return match r {
                Ok(()) | Err(rapidws::Error::Closed) => Poll::Ready(None),
                Err(e) => match conn_error(e, &self.config) {
                    Error::ConnectionClosed | Error::AlreadyClosed => Poll::Ready(None),
                    e => Poll::Ready(Some(Err(e))),
                },
            };
        }
        match ready!(Pin::new(&mut self.inner).poll_next(cx)) {
            Some(Ok(m)) => {
                if let rapidws::Message::Close(frame) = &m {
                    self.peer_closed = true;
                    // tungstenite's answer to the peer's close: the same frame back. When
                    // ours went first (or rapidws echoed), the connection refuses it.
                    let echo = close_for_rapidws(frame.clone());
                    let _ = Pin::new(&mut self.inner).start_send(echo);
                }
                Poll::Ready(Some(Ok(m.into())))
            }
            None => {
                self.ended = true;
                Poll::Ready(None)
            }
            Some(Err(e)) => {
                self.ended = true;
                match conn_error(e, &self.config) {
                    Error::ConnectionClosed | Error::AlreadyClosed => Poll::Ready(None),
                    e => Poll::Ready(Some(Err(e))),
                }
            }
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> FusedStream for WebSocketStream<S> {
    fn is_terminated(&self) -> bool {
        self.ended
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Sink<Message> for WebSocketStream<S> {
    type Error = Error;

    fn poll_ready(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        match ready!(Pin::new(&mut self.inner).poll_ready(cx)) {
            Ok(()) => Poll::Ready(Ok(())),
            // A closed connection takes nothing: `start_send` says so, as tungstenite's.
            Err(rapidws::Error::Closed) => Poll::Ready(Ok(())),
            Err(e) => Poll::Ready(Err(self.send_error(e))),
        }
    }

    fn start_send(mut self: Pin<&mut Self>, item: Message) -> Result<(), Error> {
        let msg = item.into_rapidws().ok_or_else(unsendable_frame)?;
        Pin::new(&mut self.inner)
            .start_send(msg)
            .map_err(|e| self.send_error(e))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        match ready!(Pin::new(&mut self.inner).poll_flush(cx)) {
            Ok(()) | Err(rapidws::Error::Closed) => Poll::Ready(Ok(())),
            Err(e) => Poll::Ready(Err(conn_error(e, &self.config))),
        }
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        if !self.closing {
            self.closing = true;
            match Pin::new(&mut self.inner).start_send(close_for_rapidws(None)) {
                Ok(()) | Err(rapidws::Error::Closed) => {}
                Err(e) => return Poll::Ready(Err(conn_error(e, &self.config))),
            }
        }
        self.poll_flush(cx)
    }
}
