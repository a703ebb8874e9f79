//! The split halves of a [`WebSocket`]: one connection behind a lock, woken through the
//! waker pair of `wakers.rs` so neither half loses a wake-up to the other.

use super::*;

// ---------------------------------------------------------------------------------------
// Split halves
// ---------------------------------------------------------------------------------------

pub(super) struct Inner<S> {
    pub(super) engine: Engine,
    pub(super) rd: tokio::io::ReadHalf<S>,
    pub(super) wr: tokio::io::WriteHalf<S>,
    /// The [`ReadHalf`] is alive. Once it is dropped, the writing half reads in its
    /// calls instead (answering pings, echoing the close, discarding data messages).
    pub(super) reader: bool,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Inner<S> {
    /// See [`Shared::write_on_drop`].
    pub(super) fn write_on_drop(&mut self) {
        self.engine.write_on_drop(Pin::new(&mut self.wr));
    }

    /// Runs `f` with the engine and the whole socket, its reads registering `read_waker`
    /// (the half that reads: the [`ReadHalf`], or the [`WriteHalf`] once it is gone).
    #[inline]
    fn with_reads<T>(
        &mut self,
        read_waker: &Waker,
        f: impl FnOnce(&mut Engine, &mut dyn Io) -> T,
    ) -> T {
        let mut io = PairIo {
            rd: &mut self.rd,
            wr: &mut self.wr,
        };
        let mut io = ReadsWaking {
            io: &mut io,
            waker: read_waker,
        };
        f(&mut self.engine, &mut io)
    }
}

pub(super) struct Shared<S> {
    pub(super) inner: Mutex<Inner<S>>,
    /// [`Inner::write_on_drop`], for the halves' `Drop` (which cannot name the bounds
    /// that writing needs): when a half is dropped with our close still queued (the
    /// answer to the peer's), one more write without waiting.
    pub(super) write_on_drop: fn(&mut Inner<S>),
    pub(super) wakers: Arc<WakerPair>,
    /// A waker for [`WakerPair`], made once.
    pub(super) combined: Waker,
    /// A [`ReadWaker`] of `wakers`, made once.
    pub(super) read_waker: Waker,
    /// The subprotocol agreed in the handshake, if any.
    pub(super) subprotocol: Option<String>,
}

impl<S> Shared<S> {
    pub(super) fn lock(&self) -> MutexGuard<'_, Inner<S>> {
        // A panic while holding the lock leaves consistent state behind (every
        // operation completes or returns before touching shared state); go on.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The receiving half of a split [`WebSocket`]. It also writes pongs and the close echo,
/// and drives the timers: keep polling it.
///
/// Dropping it while the [`WriteHalf`] lives hands the reading to the writing half: each
/// call on the `WriteHalf` (and each of its waits) then reads what the peer sent,
/// answers pings, echoes a close, runs the timers and discards data messages, which no
/// one is left to receive. Between the writing half's calls nothing reads, as with an
/// unsplit [`WebSocket`] that nobody polls.
pub struct ReadHalf<S> {
    pub(super) shared: Arc<Shared<S>>,
    /// The message `recv_ref` lends (copied out of the shared connection).
    pub(super) lent: Lent,
    /// The batch `recv_batch` lends (moved out of the shared connection).
    pub(super) batch: super::batch::HalfBatch,
}

/// What [`ReadHalf::recv_ref`] lends: a copy of the message in a buffer the half keeps.
#[derive(Default)]
pub(super) struct Lent {
    kind: LentKind,
    /// The payload (for a close frame: the reason).
    buf: Vec<u8>,
}

#[derive(Clone, Copy, Default)]
enum LentKind {
    Text,
    #[default]
    Binary,
    Ping,
    Pong,
    Close(Option<CloseCode>),
}

/// `recv_ref`'s copy buffer is kept for the next message up to this size.
const LENT_RETAIN: usize = 64 * 1024;

impl Lent {
    pub(super) fn store(&mut self, msg: MessageRef<'_>) {
        if self.buf.capacity() > LENT_RETAIN {
            self.buf = Vec::new();
        }
        self.buf.clear();
        self.buf.extend_from_slice(msg.as_bytes());
        self.kind = match msg {
            MessageRef::Text(_) => LentKind::Text,
            MessageRef::Binary(_) => LentKind::Binary,
            MessageRef::Ping(_) => LentKind::Ping,
            MessageRef::Pong(_) => LentKind::Pong,
            MessageRef::Close(c) => LentKind::Close(c.map(|(code, _)| code)),
        };
    }

    pub(super) fn get(&self) -> MessageRef<'_> {
        // Text and close reasons were validated as they arrived; checked again without
        // `unsafe`, with the SIMD kernels.
        let text = || crate::simd::utf8::from_utf8(&self.buf).unwrap_or_default();
        match self.kind {
            LentKind::Text => MessageRef::Text(text()),
            LentKind::Binary => MessageRef::Binary(&self.buf),
            LentKind::Ping => MessageRef::Ping(&self.buf),
            LentKind::Pong => MessageRef::Pong(&self.buf),
            LentKind::Close(code) => MessageRef::Close(code.map(|c| (c, text()))),
        }
    }
}

/// The sending half of a split [`WebSocket`].
pub struct WriteHalf<S> {
    pub(super) shared: Arc<Shared<S>>,
}

impl<S> std::fmt::Debug for ReadHalf<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadHalf").finish_non_exhaustive()
    }
}

impl<S> std::fmt::Debug for WriteHalf<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteHalf").finish_non_exhaustive()
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> ReadHalf<S> {
    /// Runs the poll `f` on the engine and the socket under the lock, this half's waker
    /// kept while it is pending (see [`WakerPair`]).
    pub(super) fn locked<T>(
        shared: &Shared<S>,
        cx: &mut Context<'_>,
        f: impl FnOnce(&mut Engine, &mut Context<'_>, &mut dyn Io) -> Poll<T>,
    ) -> Poll<T> {
        let mut inner = shared.lock();
        // The receive's poll: see `WebSocket::warm`.
        rapidws_simd::prefetch(&inner.engine);
        shared
            .wakers
            .poll(Task::Receiving, cx, &shared.combined, |cx| {
                inner.with_reads(&shared.read_waker, |engine, io| f(engine, cx, io))
            })
    }

    /// Polls for the next message.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Message>, Error>> {
        self.give_back();
        Self::locked(&self.shared, cx, |engine, cx, io| {
            engine.poll_recv_message(cx, io)
        })
    }

    /// Polls for the next message, borrowed; see [`recv_ref`](Self::recv_ref).
    pub fn poll_recv_ref(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<MessageRef<'_>>, Error>> {
        self.give_back();
        let lent = &mut self.lent;
        let got = Self::locked(&self.shared, cx, |engine, cx, io| {
            let raw = ready!(engine.poll_recv_raw(cx, io, true))?;
            let got = raw.map(|raw| lent.store(engine.conn.raw_ref(&raw)));
            Poll::Ready(Ok::<_, Error>(got.is_some()))
        });
        if !ready!(got)? {
            return Poll::Ready(Ok(None));
        }
        Poll::Ready(Ok(Some(self.lent.get())))
    }

    /// Receives the next message borrowed from this half, valid until the next call on
    /// it; `Ok(None)` after the connection closed. Cancel-safe.
    ///
    /// The connection is shared with the [`WriteHalf`] behind a lock that must not stay
    /// held while the message is in use, so the payload is copied once into a buffer
    /// this half keeps (up to 64 KiB of it is kept between messages): no allocation per
    /// message once that buffer has grown to the message size. [`WebSocket::recv_ref`]
    /// lends without the copy.
    pub async fn recv_ref(&mut self) -> Result<Option<MessageRef<'_>>, Error> {
        let got = poll_fn(|cx| self.poll_recv_ref(cx).map(|r| r.map(|m| m.is_some()))).await?;
        Ok(got.then(|| self.lent.get()))
    }

    /// Receives the next piece of a data message as it arrived, owned; see
    /// [`WebSocket::recv_chunk`], which this is for the reading half. Cancel-safe.
    ///
    /// The [`WriteHalf`] is free meanwhile: a message can be passed on a chunk at a time
    /// as it arrives ([`WriteHalf::begin_message`], then `send_chunk_bytes` for each chunk,
    /// which queues its bytes without a copy, and `finish_bytes` with the last), so that
    /// with [`Delivery::Chunks`](crate::connection::Delivery) neither side ever holds it
    /// whole. A streaming echo:
    ///
    /// ```no_run
    /// # async fn run(ws: rapidws::tokio::WebSocket<tokio::net::TcpStream>) -> Result<(), rapidws::tokio::Error> {
    /// let (mut rd, mut wr) = ws.into_split();
    /// while let Some(mut chunk) = rd.recv_chunk().await? {
    ///     let mut out = wr.begin_message(chunk.kind)?;
    ///     while !chunk.last {
    ///         // The chunk's bytes are queued as they are, sharing the receive buffer
    ///         // until written.
    ///         out.send_chunk_bytes(chunk.data).await?;
    ///         match rd.recv_chunk().await? {
    ///             Some(next) => chunk = next,
    ///             // Closed in the middle of the message: dropping `out` abandons ours.
    ///             None => return Ok(()),
    ///         }
    ///     }
    ///     out.finish_bytes(chunk.data).await?;
    /// }
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// (Server config: `config.connection.with_delivery(Delivery::Chunks)`.)
    pub async fn recv_chunk(&mut self) -> Result<Option<MessageChunk>, Error> {
        poll_fn(|cx| self.poll_recv_chunk(cx)).await
    }

    /// Polls for the next chunk of a data message; see [`recv_chunk`](Self::recv_chunk).
    pub fn poll_recv_chunk(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<MessageChunk>, Error>> {
        self.give_back();
        Self::locked(&self.shared, cx, MessageChunk::poll_next)
    }

    /// The peer's close frame, once received.
    pub fn close_frame(&self) -> Option<CloseFrame> {
        self.shared.lock().engine.conn.peer_close().cloned()
    }

    /// Whether `write` is the other half of the same [`WebSocket`].
    pub fn is_pair_of(&self, write: &WriteHalf<S>) -> bool {
        Arc::ptr_eq(&self.shared, &write.shared)
    }

    /// Puts the two halves of one [`WebSocket`] back together (as tokio's
    /// `ReadHalf::unsplit`, and `futures`' `SplitSink::reunite`): the connection goes on
    /// where the halves left it. [`ReuniteError`] hands both back when they are halves of
    /// different connections.
    pub fn reunite(mut self, write: WriteHalf<S>) -> Result<WebSocket<S>, ReuniteError<S>> {
        if !self.is_pair_of(&write) {
            return Err(ReuniteError(self, write));
        }
        // What a batch of this half did not hand out goes back to the connection first.
        self.give_back();
        let shared = self.shared.clone();
        drop(self);
        drop(write);
        match Arc::try_unwrap(shared) {
            Ok(shared) => {
                let inner = shared.inner.into_inner().unwrap_or_else(|e| e.into_inner());
                let io = inner.rd.unsplit(inner.wr);
                Ok(WebSocket::from_engine(io, inner.engine, shared.subprotocol))
            }
            // The two halves were the only owners; were there another, both are handed back
            // as they were.
            Err(shared) => {
                shared.lock().reader = true;
                shared.wakers.set_receiving(true);
                let read = ReadHalf {
                    shared: shared.clone(),
                    lent: Lent::default(),
                    batch: Default::default(),
                };
                Err(ReuniteError(read, WriteHalf { shared }))
            }
        }
    }

    /// The subprotocol agreed in the handshake, if any.
    pub fn subprotocol(&self) -> Option<&str> {
        self.shared.subprotocol.as_deref()
    }
}

/// [`ReadHalf::reunite`] was given the halves of two different connections: both, handed
/// back.
pub struct ReuniteError<S>(pub ReadHalf<S>, pub WriteHalf<S>);

impl<S> std::fmt::Debug for ReuniteError<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ReuniteError").finish_non_exhaustive()
    }
}

impl<S> std::fmt::Display for ReuniteError<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the halves are not of the same WebSocket")
    }
}

impl<S> std::error::Error for ReuniteError<S> {}

receiving!(ReadHalf, poll_recv);

impl<S> Drop for ReadHalf<S> {
    fn drop(&mut self) {
        let mut inner = self.shared.lock();
        inner.reader = false;
        // The writing half reads from now on: the socket's read wake-ups are its own.
        self.shared.wakers.set_receiving(false);
        // What a batch of this half did not hand out goes back to the connection.
        self.batch.give_back(&mut inner.engine.conn);
        (self.shared.write_on_drop)(&mut inner);
        drop(inner);
        // A writing half waiting for the socket now reads in that wait too.
        WakerPair::wake_slot(&self.shared.wakers.writer);
    }
}

impl<S> Drop for WriteHalf<S> {
    fn drop(&mut self) {
        let mut inner = self.shared.lock();
        (self.shared.write_on_drop)(&mut inner);
    }
}

/// For a writing half whose reading half is gone: reads what has arrived, so pings are
/// answered, a close is echoed and the timers run, and drops the data messages.
fn discard_received(engine: &mut Engine, cx: &mut Context<'_>, io: &mut dyn Io) {
    while let Poll::Ready(Ok(Some(event))) =
        engine.poll_recv_as(cx, io, false, Connection::raw_owned)
    {
        drop(event);
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> WriteHalf<S> {
    /// Runs the poll `f` with the engine and the write half (both halves, once the
    /// reading half is gone), this half's waker kept while it is pending (see
    /// [`WakerPair`]).
    fn with<T>(
        &self,
        cx: &mut Context<'_>,
        f: impl FnOnce(&mut Engine, &mut dyn Io, &mut Context<'_>) -> Poll<T>,
    ) -> Poll<T> {
        let mut inner = self.shared.lock();
        let inner = &mut *inner;
        let shared = &*self.shared;
        shared
            .wakers
            .poll(Task::Sending, cx, &shared.combined, |wcx| {
                if inner.reader {
                    return f(&mut inner.engine, &mut WriteOnly(&mut inner.wr), wcx);
                }
                inner.with_reads(&shared.read_waker, |engine, io| {
                    discard_received(engine, wcx, io);
                    f(engine, io, wcx)
                })
            })
    }

    fn queue(&self, msg: Message, compression: Compression) -> Result<(), Error> {
        let closing = matches!(msg, Message::Close(_));
        let r = self.shared.lock().engine.queue(msg, compression);
        if closing {
            // The reading half arms the close timeout.
            self.wake_pump();
        }
        r
    }

    send_methods!("WriteHalf", HalfMessageWriter, try_send(&));

    /// [`try_send`](Self::try_send) with the choice of whether this message is compressed
    /// (see [`send_with`](Self::send_with)). The task polling the [`ReadHalf`] is woken to
    /// write it, so a message queued from any task leaves at once, not at that task's next
    /// receive.
    pub fn try_send_with(
        &self,
        msg: Message,
        compression: Compression,
    ) -> Result<(), TrySendError> {
        if !self.shared.lock().engine.has_room(msg.len()) {
            return Err(TrySendError::QueueFull(msg));
        }
        self.queue(msg, compression).map_err(TrySendError::Failed)?;
        self.wake_pump();
        Ok(())
    }

    /// Queues a close frame with `code` and `reason` without waiting or doing IO, whatever
    /// the send queue holds (a close is small, and it ends the flow that filled the
    /// queue): the way to shed a consumer whose queue is full. The reading half writes it
    /// behind what is queued and finishes the close handshake within the close timeout.
    /// [`Error::Closed`] when a close was already sent.
    pub fn try_close(&self, code: impl Into<CloseCode>, reason: &str) -> Result<(), Error> {
        self.queue(
            Message::Close(Some(CloseFrame::new(code, reason))),
            Compression::Auto,
        )
    }

    /// Wakes the task polling the [`ReadHalf`]: it owns the socket's reads, and writes what
    /// is queued whenever it runs. Without this, frames queued by a task that does not
    /// flush would wait for the next frame from the peer or the next timer.
    fn wake_pump(&self) {
        WakerPair::wake_slot(&self.shared.wakers.reader);
    }

    /// A close was queued: the reading half arms the close timeout.
    fn close_queued(&self) {
        self.wake_pump();
    }

    /// Writes everything queued and flushes the stream.
    pub async fn flush(&mut self) -> Result<(), Error> {
        poll_fn(|cx| self.with(cx, |e, wr, wcx| e.poll_flush(wcx, wr))).await
    }

    /// Sends a close frame and flushes (within the close timeout, else
    /// `Err(Error::Timeout(Timeout::Close))`). The reading half then receives until the peer's
    /// close (within the close timeout) and returns `None`.
    pub async fn close(&mut self, code: impl Into<CloseCode>, reason: &str) -> Result<(), Error> {
        match self.queue(
            Message::Close(Some(CloseFrame::new(code, reason))),
            Compression::Auto,
        ) {
            Ok(()) | Err(Error::Closed) => {}
            Err(e) => return Err(e),
        }
        // A peer that never reads does not hold the flush forever: the close timeout runs
        // while it waits.
        self.flush().await
    }

    /// Bytes queued and not yet written.
    pub fn queued_bytes(&self) -> usize {
        self.shared.lock().engine.queued()
    }

    /// The subprotocol agreed in the handshake, if any.
    pub fn subprotocol(&self) -> Option<&str> {
        self.shared.subprotocol.as_deref()
    }

    /// [`begin_message`](Self::begin_message) with the choice of whether the message is
    /// compressed; see [`WebSocket::begin_message_with`].
    pub fn begin_message_with(
        &mut self,
        kind: MessageKind,
        compression: Compression,
    ) -> Result<HalfMessageWriter<'_, S>, Error> {
        self.shared
            .lock()
            .engine
            .send_with(|c| c.begin_message_with(kind, compression))?;
        Ok(HalfMessageWriter {
            half: self,
            finished: false,
        })
    }
}

/// A fragmented message being sent from a [`WriteHalf`] (see [`WriteHalf::begin_message`]).
/// Dropping it without [`finish`](Self::finish) abandons the message, as dropping a
/// [`MessageWriter`] does.
pub struct HalfMessageWriter<'a, S> {
    half: &'a mut WriteHalf<S>,
    finished: bool,
}

impl<S> Drop for HalfMessageWriter<'_, S> {
    fn drop(&mut self) {
        if !self.finished {
            let goes_on = self
                .half
                .shared
                .lock()
                .engine
                .conn
                .abort_message(crate::tokio::engine::now());
            if !goes_on {
                // The reading half writes our close and runs the teardown.
                WakerPair::wake_slot(&self.half.shared.wakers.reader);
            }
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> HalfMessageWriter<'_, S> {
    fragment_methods!("ReadHalf");

    /// Writes out what is queued and flushes, as [`WriteHalf::flush`] does: between
    /// chunks, so that the next is not read while this one waits for the peer (a
    /// streaming relay then holds at most one chunk per connection).
    pub async fn flush(&mut self) -> Result<(), Error> {
        self.half.flush().await
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> FragmentWriter for HalfMessageWriter<'_, S> {
    #[inline]
    fn poll_room(&mut self, cx: &mut Context<'_>, len: usize) -> Poll<Result<(), Error>> {
        self.half.with(cx, |e, wr, wcx| e.poll_room(wcx, wr, len))
    }

    #[inline]
    fn send_op(
        &mut self,
        f: impl FnOnce(&mut Connection) -> Result<(), crate::connection::SendError>,
    ) -> Result<(), Error> {
        self.half.shared.lock().engine.send_with(f)
    }

    fn set_finished(&mut self) {
        self.finished = true;
    }

    async fn flush_queue(&mut self) -> Result<(), Error> {
        self.half.flush().await
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Sink<Message> for WriteHalf<S> {
    type Error = Error;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.with(cx, |e, wr, wcx| e.poll_room(wcx, wr, 0))
    }

    fn start_send(self: Pin<&mut Self>, item: Message) -> Result<(), Error> {
        self.queue(item, Compression::Auto)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.with(cx, |e, wr, wcx| e.poll_flush(wcx, wr))
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        match self.queue(Message::Close(None), Compression::Auto) {
            Ok(()) | Err(Error::Closed) => {}
            Err(e) => return Poll::Ready(Err(e)),
        }
        self.with(cx, |e, wr, wcx| e.poll_flush(wcx, wr))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> WriteHalf<S> {
    /// [`WebSocket::try_send_prepared`] for the sending half; like
    /// [`try_send`](Self::try_send), it wakes the reading half to write the frame.
    pub fn try_send_prepared(&self, msg: &PreparedMessage) -> Result<(), TrySendError> {
        {
            let mut inner = self.shared.lock();
            if !inner.engine.has_room(msg.len()) {
                return Err(TrySendError::QueueFull(prepared_as_message(msg)));
            }
            inner
                .engine
                .send_with(|c| c.send_prepared(msg))
                .map_err(TrySendError::Failed)?;
        }
        self.wake_pump();
        Ok(())
    }

    /// [`WebSocket::feed_prepared`] for the sending half.
    pub async fn feed_prepared(&mut self, msg: &PreparedMessage) -> Result<(), Error> {
        let len = msg.len();
        poll_fn(|cx| self.with(cx, |e, wr, wcx| e.poll_room(wcx, wr, len))).await?;
        self.shared
            .lock()
            .engine
            .send_with(|c| c.send_prepared(msg))
    }

    /// [`WebSocket::send_prepared`] for the sending half.
    pub async fn send_prepared(&mut self, msg: &PreparedMessage) -> Result<(), Error> {
        self.feed_prepared(msg).await?;
        self.flush().await
    }
}
