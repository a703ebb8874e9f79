//! What the byte-stream views of a [`WebSocket`] share ([`IncomingMessage`] and
//! [`MessageWriter`], one message read or written as a stream, and the tunnel, a stream
//! of messages): reads handing out what fits of the payload at hand; writes queued
//! straight from the caller's buffer once there is room, refused once the view's stream
//! has ended; a shutdown that ends it once, then flushes; errors as `io::Error`.

use bytes::Buf;

use super::*;

impl<S: AsyncRead + AsyncWrite + Unpin> WebSocket<S> {
    /// [`poll_flush_queue`](Self::poll_flush_queue) for the views: the error as an
    /// `io::Error`.
    pub(crate) fn poll_flush_io(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_flush_queue(cx).map_err(io::Error::from)
    }

    /// Waits until the send queue has room for `len` more bytes (writing it out
    /// meanwhile), then queues what `send` sends, straight from the caller's buffer.
    pub(crate) fn poll_send_io(
        &mut self,
        cx: &mut Context<'_>,
        len: usize,
        send: impl FnOnce(&mut Connection) -> Result<(), crate::connection::SendError>,
    ) -> Poll<io::Result<()>> {
        ready!(self.with_room(cx, len)).map_err(io::Error::from)?;
        Poll::Ready(self.engine_mut().send_with(send).map_err(io::Error::from))
    }

    /// A view's `poll_write`: `BrokenPipe` once its stream has `ended`, else
    /// [`poll_send_io`](Self::poll_send_io) of the `len` bytes `send` queues, and `len`.
    #[inline]
    pub(crate) fn poll_write_io(
        &mut self,
        cx: &mut Context<'_>,
        ended: bool,
        len: usize,
        send: impl FnOnce(&mut Connection) -> Result<(), crate::connection::SendError>,
    ) -> Poll<io::Result<usize>> {
        if ended {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        ready!(self.poll_send_io(cx, len, send))?;
        Poll::Ready(Ok(len))
    }

    /// A view's `poll_shutdown`: unless its stream has `ended`, polls `end` (what ends
    /// it) and marks it ended; then flushes.
    pub(crate) fn poll_shutdown_io(
        &mut self,
        cx: &mut Context<'_>,
        ended: &mut bool,
        end: impl FnOnce(&mut Self, &mut Context<'_>) -> Poll<io::Result<()>>,
    ) -> Poll<io::Result<()>> {
        if !*ended {
            ready!(end(self, cx))?;
            *ended = true;
        }
        self.poll_flush_io(cx)
    }
}

/// A view's read: as much of `chunk` (the payload at hand) as `buf` has room for moves
/// into it.
#[inline]
pub(crate) fn read_chunk(chunk: &mut Bytes, buf: &mut ReadBuf<'_>) {
    let n = chunk.len().min(buf.remaining());
    buf.put_slice(&chunk[..n]);
    // Not `split_to`, whose handle for the part read may cost an atomic count (or, for
    // a `Bytes` made from a `Vec`, an allocation).
    chunk.advance(n);
}
