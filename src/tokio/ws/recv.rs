//! [`WebSocket`]'s receives: the next message owned, lent, as a batch, as a stream or a
//! chunk at a time, and the polls behind them (one task, or a second one polling the
//! same socket through the waker pair).

use std::future::poll_fn;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite};

use super::*;

impl<S: AsyncRead + AsyncWrite + Unpin> WebSocket<S> {
    /// Runs the poll `f` of the receiving or the sending `task` on the engine and the
    /// socket: with `cx` itself, or once a second task may poll ([`TwoTasks`]), with the
    /// waker of both.
    #[inline(always)]
    pub(super) fn poll_as<T>(
        &mut self,
        task: Task,
        cx: &mut Context<'_>,
        f: impl FnOnce(&mut Engine, &mut dyn Io, &mut Context<'_>) -> Poll<T>,
    ) -> Poll<T> {
        // One call of `f`, so that it is inlined here (the usual case, one task, pays one
        // test).
        let (waker, read_waker) = match self.tasks.as_deref_mut() {
            None => (cx.waker(), None),
            // The receiving task usually polls again at once, so its waker stays in the
            // pair when its poll is ready (a `next()` loop in one task then takes no lock
            // per message); the sending task's leaves, so a sender busy elsewhere is not
            // woken for the receiver's sake.
            Some(t) if task == Task::Receiving => {
                if !t
                    .receiving
                    .as_ref()
                    .is_some_and(|w| w.will_wake(cx.waker()))
                {
                    t.wakers.enter(task, cx.waker());
                    t.wakers.set_receiving(true);
                    t.receiving = Some(cx.waker().clone());
                }
                (&t.combined, Some(&t.read_waker))
            }
            Some(t) => {
                t.wakers.enter(task, cx.waker());
                (&t.combined, Some(&t.read_waker))
            }
        };
        let cx = &mut Context::from_waker(waker);
        let Link { io, engine } = Link::of(&mut self.link);
        let r = match read_waker {
            None => f(engine, io, cx),
            Some(read_waker) => {
                let mut io = ReadsWaking {
                    io,
                    waker: read_waker,
                };
                f(engine, &mut io, cx)
            }
        };
        if task == Task::Sending
            && r.is_ready()
            && let Some(t) = &self.tasks
        {
            t.wakers.leave(task);
        }
        r
    }

    /// The socket is polled as a [`Stream`] or a [`Sink`], which `futures`'
    /// `StreamExt::split` may hand to two tasks: from now on the waits of those polls
    /// register the waker pair's waker. From the first poll of either, not only of the
    /// `Sink`: a receiving task whose poll went pending with its own waker, before the
    /// sending task made the pair, was never woken again once the sending task's
    /// registrations (made with the pair's waker, which knew nothing of it) replaced its
    /// own.
    pub(super) fn two_tasks(&mut self) -> &mut Self {
        if self.tasks.is_none() {
            let wakers = Arc::new(WakerPair::default());
            self.tasks = Some(Box::new(TwoTasks {
                combined: Waker::from(wakers.clone()),
                read_waker: Waker::from(Arc::new(ReadWaker(wakers.clone()))),
                wakers,
                receiving: None,
            }));
        }
        self
    }

    pub(super) fn poll_event(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<OwnedEvent>, Error>> {
        let (engine, io) = self.receiving_parts();
        engine.poll_recv_as(cx, io, false, Connection::raw_owned)
    }

    /// Polls for the next message ([`recv`](Self::recv) uses this).
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Message>, Error>> {
        let (engine, io) = self.receiving_parts();
        engine.poll_recv_message(cx, io)
    }

    /// The [`Stream`] impl's poll: [`poll_recv`](Self::poll_recv) as the receiving one of
    /// two tasks (see [`two_tasks`](Self::two_tasks)).
    pub(super) fn poll_next_message(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Message>, Error>> {
        self.warm();
        self.two_tasks()
            .poll_as(Task::Receiving, cx, |engine, io, cx| {
                engine.poll_recv_message(cx, io)
            })
    }

    /// The next whole message as positions, for the borrowing receives. A call of its own:
    /// the lending path measures fewer instructions with the receive poll kept out of line
    /// than inlined as the owning receive has it (callgrind, `firehose rapidws-ref`).
    ///
    /// `first`: what [`Engine::try_recv_raw`] left, for the first poll.
    #[inline(never)]
    pub(super) fn poll_whole_raw(
        &mut self,
        cx: &mut Context<'_>,
        first: Option<Polled>,
    ) -> Poll<Result<Option<Raw>, Error>> {
        let (engine, io) = self.receiving_parts();
        match first {
            Some(first) => engine.poll_recv_from(first, cx, io, true),
            None => engine.poll_recv_raw(cx, io, true),
        }
    }

    /// Polls for the next message, borrowed; see [`recv_ref`](Self::recv_ref).
    pub fn poll_recv_ref(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<MessageRef<'_>>, Error>> {
        if let Some((kind, at)) = self.engine_mut().conn.poll_short() {
            return Poll::Ready(Ok(Some(self.engine_mut().conn.lent(kind, at))));
        }
        let raw = match self.engine_mut().try_recv_raw(true) {
            Ok(raw) => raw,
            Err(first) => match ready!(self.poll_whole_raw(cx, Some(first)))? {
                Some(raw) => raw,
                None => return Poll::Ready(Ok(None)),
            },
        };
        Poll::Ready(Ok(Some(self.engine_mut().conn.raw_ref(&raw))))
    }

    /// Receives the next message borrowed from the connection's receive buffer, valid
    /// until the next call on this `WebSocket`; `Ok(None)` after the connection closed.
    /// Cancel-safe, like [`recv`](Self::recv).
    ///
    /// A message that arrived in one frame is lent in place: no copy and, once the
    /// receive buffer has been allocated, no allocation per message. A fragmented
    /// message is assembled in a buffer of the connection first (as `recv` does), and a
    /// compressed one is inflated into it; that buffer is reused from message to message
    /// (up to 64 KiB of it is kept while messages keep coming). Use
    /// [`MessageRef::to_message`] to keep a message past the next call.
    ///
    /// ```no_run
    /// # async fn run(mut ws: rapidws::tokio::WebSocket<tokio::net::TcpStream>) -> Result<(), rapidws::tokio::Error> {
    /// use rapidws::tokio::MessageRef;
    /// let mut total = 0;
    /// while let Some(msg) = ws.recv_ref().await? {
    ///     if let MessageRef::Binary(data) = msg {
    ///         total += data.len();
    ///     }
    /// }
    /// # let _ = total; Ok(())
    /// # }
    /// ```
    pub async fn recv_ref(&mut self) -> Result<Option<MessageRef<'_>>, Error> {
        // Most calls find a whole message buffered: lent without a future, and without
        // the general event.
        if let Some((kind, at)) = self.engine_mut().conn.poll_short() {
            return Ok(Some(self.engine_mut().conn.lent(kind, at)));
        }
        let raw = match self.engine_mut().try_recv_raw(true) {
            Ok(raw) => raw,
            Err(first) => {
                let mut first = Some(first);
                match poll_fn(|cx| self.poll_whole_raw(cx, first.take())).await? {
                    Some(raw) => raw,
                    None => return Ok(None),
                }
            }
        };
        Ok(Some(self.engine_mut().conn.raw_ref(&raw)))
    }

    /// Receives every whole message buffered at once: the next message and, when it
    /// arrived whole, the run of whole messages after it, lent from the receive buffer
    /// until the next call on this `WebSocket` (see [`Batch`]). `Ok(None)` after the
    /// connection closed. Cancel-safe, like [`recv`](Self::recv); a batch dropped before
    /// its end leaves the rest to the next receive.
    ///
    /// The messages after the first are decoded a round at a time by the batch kernel
    /// (`rapidws_simd::frame::run`: the headers of up to 64 frames checked, their payloads
    /// unmasked and their text validated in one call) and lent with no allocation, copy,
    /// reference count or receive call per message: the way to read a stream of small
    /// messages, such as market data.
    ///
    /// ```no_run
    /// # async fn run(mut ws: rapidws::tokio::WebSocket<tokio::net::TcpStream>) -> Result<(), rapidws::tokio::Error> {
    /// use rapidws::tokio::MessageRef;
    /// let mut quotes = 0;
    /// while let Some(batch) = ws.recv_batch().await? {
    ///     for msg in batch {
    ///         if let MessageRef::Text(json) = msg {
    ///             quotes += json.len();
    ///         }
    ///     }
    /// }
    /// # let _ = quotes; Ok(())
    /// # }
    /// ```
    pub async fn recv_batch(&mut self) -> Result<Option<Batch<'_>>, Error> {
        let Some(raw) = self.recv_raw().await? else {
            return Ok(None);
        };
        Ok(Some(self.engine_mut().conn.batch_of(raw)))
    }

    /// Receives the next data message as an [`AsyncRead`] that yields its payload as the
    /// frames arrive (inflated, when compressed). Pings and pongs met on the way are
    /// handled (answered) and skipped; `Ok(None)` when the connection closed instead (see
    /// [`close_frame`](Self::close_frame)).
    ///
    /// With [`Delivery::Chunks`](crate::connection::Delivery) memory stays bounded
    /// whatever the message size; with the default whole delivery the message is
    /// assembled first and then read from memory.
    ///
    /// Read the message to its end before the next receive call: dropping the reader
    /// early leaves the rest of the message to be skipped by the next `recv_stream`.
    /// The reader borrows this `WebSocket` until then, so nothing can be sent meanwhile:
    /// to pass a message on as it arrives, use [`recv_chunk`](Self::recv_chunk) on the
    /// split halves.
    pub async fn recv_stream(&mut self) -> Result<Option<IncomingMessage<'_, S>>, Error> {
        loop {
            let ev = poll_fn(|cx| self.poll_event(cx)).await?;
            let Some(ev) = ev else { return Ok(None) };
            match ev {
                OwnedEvent::Message { kind, data } => {
                    return Ok(Some(IncomingMessage {
                        ws: self,
                        kind,
                        chunk: data,
                        fin: true,
                    }));
                }
                OwnedEvent::Chunk {
                    kind,
                    data,
                    first,
                    fin,
                } => {
                    // A reader dropped early leaves the rest of its message: skip it.
                    if !first {
                        continue;
                    }
                    return Ok(Some(IncomingMessage {
                        ws: self,
                        kind,
                        chunk: data,
                        fin,
                    }));
                }
                OwnedEvent::Close(_) => {}
                _ => {}
            }
        }
    }

    /// Receives the next piece of a data message as it arrived ([`MessageChunk`]: its
    /// kind, its bytes, whether it is the first and the last of its message), owned and
    /// cut from the receive buffer without a copy. Pings and pongs met on the way are
    /// handled (answered) and skipped; `Ok(None)` once the connection has closed (see
    /// [`close_frame`](Self::close_frame)), and on every call after that. Cancel-safe: a
    /// chunk is never lost to a dropped future.
    ///
    /// This is the way to pass a large message on without holding it: nothing borrows the
    /// connection between chunks, so a [`ReadHalf`] receives chunks while its
    /// [`WriteHalf`] sends them on as fragments (see [`ReadHalf::recv_chunk`] for an
    /// echo). With [`Delivery::Chunks`](crate::connection::Delivery) (set it with
    /// [`Config::with_delivery`]) a chunk is what one read brought, and the connection
    /// holds no more of a message than one read, whatever its size; with the default
    /// whole delivery each message is assembled first and comes as one chunk (`first` and
    /// `last` both set).
    ///
    /// Every limit holds as with [`recv`](Self::recv): [`Config::max_message_size`]
    /// counts all the chunks of a message (1009 once they pass it, the chunks before
    /// already handed over), text is checked to be UTF-8 across chunks (1007 at the first
    /// bad byte), [`Config::message_timeout`] runs from the end of a message's first
    /// frame to its last, pings are answered between chunks, and the peer's close is
    /// echoed. A message cut short by the connection's end is never completed: the
    /// receive reports the error (or `Ok(None)`) instead of a last chunk.
    ///
    /// # Errors
    ///
    /// As [`recv`](Self::recv).
    ///
    /// ```no_run
    /// # async fn run(mut ws: rapidws::tokio::WebSocket<tokio::net::TcpStream>, mut file: tokio::fs::File) -> Result<(), rapidws::tokio::Error> {
    /// use tokio::io::AsyncWriteExt;
    /// // Each message goes to the file as it arrives, a read's worth at a time.
    /// while let Some(chunk) = ws.recv_chunk().await? {
    ///     file.write_all(&chunk.data).await?;
    ///     if chunk.last {
    ///         file.flush().await?;
    ///     }
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn recv_chunk(&mut self) -> Result<Option<MessageChunk>, Error> {
        poll_fn(|cx| self.poll_recv_chunk(cx)).await
    }

    /// Polls for the next chunk of a data message; see [`recv_chunk`](Self::recv_chunk).
    pub fn poll_recv_chunk(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<MessageChunk>, Error>> {
        let (engine, io) = self.receiving_parts();
        MessageChunk::poll_next(engine, cx, io)
    }
}
