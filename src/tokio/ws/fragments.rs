//! A message as a byte stream: [`IncomingMessage`] reads one being received,
//! [`MessageChunk`] is one piece of it as it arrived, [`MessageWriter`] writes one as
//! fragments.

use super::*;

use crate::connection::SendError;

/// The fragment methods of [`MessageWriter`] and [`HalfMessageWriter`], written once over
/// [`FragmentWriter`]. `$recv` names the type whose `recv_chunk` the docs link to.
macro_rules! fragment_methods {
    ($recv:literal) => {
        /// Sends one fragment, waiting for room in the send queue first (no flush).
        pub async fn send_chunk(&mut self, data: &[u8]) -> Result<(), Error> {
            self.fragment(data.len(), |c| c.send_chunk(data)).await
        }

        /// [`send_chunk`](Self::send_chunk) with a payload given away: a server queues a
        /// large one as it is, never copied, so a chunk passed on from
        #[doc = concat!("[`", $recv, "::recv_chunk`] shares its receive buffer until it is written (see")]
        /// [`Connection::send_chunk_bytes`]).
        pub async fn send_chunk_bytes(&mut self, data: Bytes) -> Result<(), Error> {
            let len = data.len();
            self.fragment(len, |c| c.send_chunk_bytes(data)).await
        }

        /// Sends the final fragment (possibly empty) and flushes.
        pub async fn finish(self, data: &[u8]) -> Result<(), Error> {
            self.end_with(data.len(), |c| c.end_message(data)).await
        }

        /// [`finish`](Self::finish) with a payload given away (see
        /// [`send_chunk_bytes`](Self::send_chunk_bytes)).
        pub async fn finish_bytes(self, data: Bytes) -> Result<(), Error> {
            let len = data.len();
            self.end_with(len, |c| c.end_message_bytes(data)).await
        }
    };
}

/// A piece of a data message, owned, as [`WebSocket::recv_chunk`] and
/// [`ReadHalf::recv_chunk`] hand it over: what one read brought of the message (the
/// payload of one frame, or of the part of it that has arrived), cut from the receive
/// buffer without a copy (inflated, when the message is compressed).
///
/// The chunks of one message come in order, the first with `first` set and the last with
/// `last` (a message in one chunk has both); the next chunk after the last starts the next
/// message. A chunk may be empty (an empty message, or the empty last frame of a
/// fragmented one).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MessageChunk {
    /// Text or binary: the kind of the message this chunk belongs to. For text, the
    /// chunks of a message together are valid UTF-8 (checked as they arrive); one chunk
    /// may end inside a code point.
    pub kind: MessageKind,
    /// The payload bytes.
    pub data: Bytes,
    /// The first chunk of its message.
    pub first: bool,
    /// The last chunk of its message.
    pub last: bool,
}

impl MessageChunk {
    /// The next data chunk `engine` receives, the control events between them (handled
    /// already: pings answered, the close echoed) passed over: `recv_chunk` of
    /// [`WebSocket`] and of [`ReadHalf`].
    pub(super) fn poll_next(
        engine: &mut Engine,
        cx: &mut Context<'_>,
        io: &mut dyn Io,
    ) -> Poll<Result<Option<MessageChunk>, Error>> {
        loop {
            let Some(ev) = ready!(engine.poll_recv_as(cx, io, false, Connection::raw_owned))?
            else {
                return Poll::Ready(Ok(None));
            };
            if let Some(chunk) = MessageChunk::of(ev) {
                return Poll::Ready(Ok(Some(chunk)));
            }
        }
    }

    /// The data chunk `ev` carries (a whole message is one chunk); `None` for the
    /// control events, which the receive has handled already.
    fn of(ev: OwnedEvent) -> Option<MessageChunk> {
        match ev {
            OwnedEvent::Message { kind, data } => Some(MessageChunk {
                kind,
                data,
                first: true,
                last: true,
            }),
            OwnedEvent::Chunk {
                kind,
                data,
                first,
                fin,
            } => Some(MessageChunk {
                kind,
                data,
                first,
                last: fin,
            }),
            _ => None,
        }
    }
}

/// A data message being received, as an [`AsyncRead`] of its payload (see
/// [`WebSocket::recv_stream`]). Reading returns 0 at the end of the message.
pub struct IncomingMessage<'a, S> {
    pub(super) ws: &'a mut WebSocket<S>,
    pub(super) kind: MessageKind,
    pub(super) chunk: Bytes,
    pub(super) fin: bool,
}

impl<S> IncomingMessage<'_, S> {
    /// Text or binary. For text, the whole payload is valid UTF-8 (a read may end inside a
    /// code point).
    pub fn kind(&self) -> MessageKind {
        self.kind
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for IncomingMessage<'_, S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if !this.chunk.is_empty() {
                read_chunk(&mut this.chunk, buf);
                return Poll::Ready(Ok(()));
            }
            if this.fin {
                return Poll::Ready(Ok(()));
            }
            let ev = ready!(this.ws.poll_event(cx)).map_err(io::Error::from)?;
            match ev {
                Some(OwnedEvent::Chunk { data, fin, .. }) => {
                    this.chunk = data;
                    this.fin = fin;
                }
                Some(OwnedEvent::Message { data, .. }) => {
                    this.chunk = data;
                    this.fin = true;
                }
                Some(OwnedEvent::Ping(_) | OwnedEvent::Pong(_)) => {}
                Some(_) | None => {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "connection closed in the middle of a message",
                    )));
                }
            }
        }
    }
}

/// A fragmented message being sent (see [`WebSocket::begin_message`]).
///
/// Each chunk becomes one frame. Dropping the writer without [`finish`](Self::finish)
/// (or cancelling the `send_from` that holds it) abandons the message: when none of it
/// was queued nothing reaches the peer and the connection goes on; otherwise the
/// connection is closed with 1011 and the next receive reports [`Error::Abandoned`]
/// (see [`Connection::abort_message`]).
pub struct MessageWriter<'a, S> {
    pub(super) ws: &'a mut WebSocket<S>,
    pub(super) finished: bool,
}

impl<S> Drop for MessageWriter<'_, S> {
    fn drop(&mut self) {
        if !self.finished {
            self.ws
                .engine_mut()
                .conn
                .abort_message(crate::tokio::engine::now());
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> MessageWriter<'_, S> {
    fragment_methods!("WebSocket");
}

impl<S: AsyncRead + AsyncWrite + Unpin> FragmentWriter for MessageWriter<'_, S> {
    #[inline]
    fn poll_room(&mut self, cx: &mut Context<'_>, len: usize) -> Poll<Result<(), Error>> {
        self.ws.with_room(cx, len)
    }

    #[inline]
    fn send_op(
        &mut self,
        f: impl FnOnce(&mut Connection) -> Result<(), SendError>,
    ) -> Result<(), Error> {
        self.ws.engine_mut().send_with(f)
    }

    fn set_finished(&mut self) {
        self.finished = true;
    }

    async fn flush_queue(&mut self) -> Result<(), Error> {
        self.ws.flush().await
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for MessageWriter<'_, S> {
    /// Queues `buf` as one fragment once the send queue has room.
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.ws
            .poll_write_io(cx, this.finished, buf.len(), |c| c.send_chunk(buf))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().ws.poll_flush_io(cx)
    }

    /// Ends the message with an empty final fragment, then flushes.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.ws.poll_shutdown_io(cx, &mut this.finished, |ws, _| {
            // Queued at once, without waiting for room: the flush writes it out.
            let r = ws.engine_mut().send_with(|c| c.end_message(&[]));
            Poll::Ready(r.map_err(io::Error::from))
        })
    }
}

/// The two fragmented-message writers ([`MessageWriter`], [`HalfMessageWriter`]): what
/// each does on its own connection (wait for room, queue, flush), so that their fragment
/// methods (`fragment_methods!`) and `send_from` ([`copy_fragments`]) have one body.
pub(super) trait FragmentWriter: Sized {
    /// Waits until the send queue has room for `len` more bytes, writing it out meanwhile.
    fn poll_room(&mut self, cx: &mut Context<'_>, len: usize) -> Poll<Result<(), Error>>;

    /// Runs a send operation on the connection (its frames join the send queue).
    fn send_op(
        &mut self,
        f: impl FnOnce(&mut Connection) -> Result<(), SendError>,
    ) -> Result<(), Error>;

    /// The message is ended: dropping the writer no longer abandons it.
    fn set_finished(&mut self);

    /// Writes everything queued and flushes the stream.
    async fn flush_queue(&mut self) -> Result<(), Error>;

    /// A fragment of `len` bytes, queued by `send` once the queue has room (no flush).
    async fn fragment(
        &mut self,
        len: usize,
        send: impl FnOnce(&mut Connection) -> Result<(), SendError>,
    ) -> Result<(), Error> {
        poll_fn(|cx| self.poll_room(cx, len)).await?;
        self.send_op(send)
    }

    /// The final fragment, of `len` bytes, queued by `end` once the queue has room; then
    /// the flush.
    async fn end_with(
        mut self,
        len: usize,
        end: impl FnOnce(&mut Connection) -> Result<(), SendError>,
    ) -> Result<(), Error> {
        poll_fn(|cx| self.poll_room(cx, len)).await?;
        self.set_finished();
        self.send_op(end)?;
        self.flush_queue().await
    }
}

/// Reads `reader` to its end in pieces of at most `chunk_size` bytes, each sent as one
/// fragment through `w`, then ends the message; returns the bytes sent.
pub(super) async fn copy_fragments<W: FragmentWriter, R: AsyncRead + Unpin>(
    mut w: W,
    mut reader: R,
    chunk_size: usize,
) -> Result<u64, Error> {
    let mut buf = vec![0u8; chunk_size.max(1)];
    let mut total = 0u64;
    loop {
        let n = reader.read(&mut buf).await?;
        if n == 0 {
            w.end_with(0, |c| c.end_message(&[])).await?;
            return Ok(total);
        }
        total += n as u64;
        w.fragment(n, |c| c.send_chunk(&buf[..n])).await?;
    }
}
