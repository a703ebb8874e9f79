//! [`WebSocket`] as a futures `Stream` and `Sink` (the `StreamExt`/`SinkExt` idioms
//! programs bring from tokio-tungstenite), and its sends of prepared messages.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures_sink::Sink;
use tokio::io::{AsyncRead, AsyncWrite};

use super::*;

receiving!(WebSocket, poll_next_message);

impl<S: AsyncRead + AsyncWrite + Unpin> Sink<Message> for WebSocket<S> {
    type Error = Error;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.get_mut()
            .two_tasks()
            .poll_as(Task::Sending, cx, |engine, io, cx| {
                engine.poll_room(cx, io, 0)
            })
    }

    fn start_send(self: Pin<&mut Self>, item: Message) -> Result<(), Error> {
        self.get_mut().engine_mut().queue(item, Compression::Auto)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.get_mut()
            .two_tasks()
            .poll_as(Task::Sending, cx, |engine, io, cx| {
                engine.poll_flush(cx, io)
            })
    }

    /// Sends a normal close (1000) unless one was sent, and flushes. Keep receiving to
    /// see the peer's close.
    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        let this = self.get_mut().two_tasks();
        match this
            .engine_mut()
            .send_with(|c| c.close(super::super::engine::now(), CloseCode::NORMAL, ""))
        {
            Ok(()) | Err(Error::Closed) => {}
            Err(e) => return Poll::Ready(Err(e)),
        }
        this.poll_as(Task::Sending, cx, |engine, io, cx| {
            engine.poll_flush(cx, io)
        })
    }
}

// ----- prepared messages (broadcast; see `crate::connection::PreparedMessage`) -----

/// The message a prepared one carries, for [`TrySendError::QueueFull`] (no copy).
pub(super) fn prepared_as_message(msg: &PreparedMessage) -> Message {
    match msg.kind() {
        MessageKind::Text => Message::Text(Utf8Bytes::from_validated(msg.payload())),
        MessageKind::Binary => Message::Binary(msg.payload()),
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> WebSocket<S> {
    /// Queues a prepared message without waiting or doing IO: on a server a shared
    /// [`Bytes`] clone of its frame, no copy or allocation (see
    /// [`Connection::send_prepared`]). [`TrySendError::QueueFull`] (carrying the
    /// message's payload) past the high-water mark: the way a broadcaster drops a slow
    /// consumer rather than waiting for it.
    pub fn try_send_prepared(&mut self, msg: &PreparedMessage) -> Result<(), TrySendError> {
        if !self.engine().has_room(msg.len()) {
            return Err(TrySendError::QueueFull(prepared_as_message(msg)));
        }
        self.engine_mut()
            .send_with(|c| c.send_prepared(msg))
            .map_err(TrySendError::Failed)
    }

    /// Waits for room in the send queue, then queues a prepared message (no flush).
    pub async fn feed_prepared(&mut self, msg: &PreparedMessage) -> Result<(), Error> {
        let len = msg.len();
        poll_fn(|cx| self.with_room(cx, len)).await?;
        self.engine_mut().send_with(|c| c.send_prepared(msg))
    }

    /// Sends a prepared message: waits for room, queues it and writes the queue out.
    pub async fn send_prepared(&mut self, msg: &PreparedMessage) -> Result<(), Error> {
        self.feed_prepared(msg).await?;
        self.flush().await
    }
}
