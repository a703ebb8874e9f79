//! Drives a sans-IO [`Connection`] over tokio IO: reads into its receive buffer, writes
//! its output queue with vectored writes, carries out its teardown, and arms its one
//! deadline on a tokio `Sleep`.
//!
//! The same engine serves the whole [`WebSocket`](super::WebSocket) and, behind a mutex,
//! its split halves. Reading answers pings and echoes closes (the connection queues them;
//! the engine writes them), so an application that never writes still follows the
//! protocol. While more than `control_queue_capacity` control frames wait for the socket,
//! the engine stops reading: a ping flood meets TCP backpressure, not a growing queue.

use std::future::Future;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll, Waker, ready};

use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::time::Sleep;

use crate::codec::{HeaderBuf, MessageKind};
use crate::connection::{self, Connection, Raw};
use crate::error::Error;
use crate::message::{Compression, Message};

mod write;

/// The socket as the reading side sees it: read and write ends, used one at a time.
pub(crate) trait Io {
    fn rd(&mut self) -> Pin<&mut (dyn AsyncRead + Unpin + '_)>;
    fn wr(&mut self) -> Pin<&mut (dyn AsyncWrite + Unpin + '_)>;
    /// Whether `rd` may be used: false for the writing half of a split connection.
    fn reads(&self) -> bool {
        true
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Io for S {
    fn rd(&mut self) -> Pin<&mut (dyn AsyncRead + Unpin + '_)> {
        Pin::new(self)
    }
    fn wr(&mut self) -> Pin<&mut (dyn AsyncWrite + Unpin + '_)> {
        Pin::new(self)
    }
}

/// A read end and a write end held apart (split halves).
pub(crate) struct PairIo<'a, R, W> {
    pub(crate) rd: &'a mut R,
    pub(crate) wr: &'a mut W,
}

impl<R: AsyncRead + Unpin, W: AsyncWrite + Unpin> Io for PairIo<'_, R, W> {
    fn rd(&mut self) -> Pin<&mut (dyn AsyncRead + Unpin + '_)> {
        Pin::new(&mut *self.rd)
    }
    fn wr(&mut self) -> Pin<&mut (dyn AsyncWrite + Unpin + '_)> {
        Pin::new(&mut *self.wr)
    }
}

/// The write end alone (the writing half of a split connection, whose reading half reads):
/// a write wait does not read aside.
pub(crate) struct WriteOnly<'a, W>(pub(crate) &'a mut W);

impl<W: AsyncWrite + Unpin> Io for WriteOnly<'_, W> {
    fn rd(&mut self) -> Pin<&mut (dyn AsyncRead + Unpin + '_)> {
        Pin::new(self)
    }
    fn wr(&mut self) -> Pin<&mut (dyn AsyncWrite + Unpin + '_)> {
        Pin::new(&mut *self.0)
    }
    fn reads(&self) -> bool {
        false
    }
}

impl<W> AsyncRead for WriteOnly<'_, W> {
    /// Never called (`reads` is false); nothing to read here.
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        _: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Poll::Pending
    }
}

/// Bytes read into the stack by a connection that holds no receive buffer.
const IDLE_READ: usize = 2048;

/// Not a [`Connection::timer_state`]: the deadline is to be asked for again.
const NO_TIMER_STATE: u8 = u8::MAX;

/// How [`Engine::poll_message`] finishes with a message.
#[derive(Clone, Copy)]
pub(crate) enum Put {
    /// `send`: written at once (as a lone frame when the connection allows it), then the
    /// queue is written out and flushed.
    Send,
    /// `feed`: queued, to leave with the next write.
    Feed,
    /// The handler API's only reply to a read that left nothing more to receive (with
    /// more buffered its callback queues the reply instead): written at once as a lone
    /// frame when the connection allows it, as `send` writes it, without the flush (the
    /// receive that follows would have written it before waiting anyway; this saves the
    /// queue).
    Alone,
}

/// What a connection's poll gave that [`Engine::try_recv_raw`] leaves to
/// [`Engine::poll_recv_from`].
pub(crate) struct Polled(pub(crate) Option<Result<Raw, connection::Error>>);

/// The per-connection pump.
pub(crate) struct Engine {
    pub(crate) conn: Connection,
    sleep: Option<Pin<Box<Sleep>>>,
    armed: Option<tokio::time::Instant>,
    /// The waker the `Sleep` was last polled with since it was set: it wakes that one.
    timer_waker: Option<Waker>,
    /// The connection's [`timer_state`](Connection::timer_state) when its deadline was
    /// last asked for (`NO_TIMER_STATE`: ask again).
    timer_state: u8,
    /// The transport failed: the error to report once (the connection is done).
    io_error: Option<io::Error>,
    /// The end of the connection was reported (its buffers released, its close traced).
    ended: bool,
    /// A send or flush is waiting for the socket (for one cancelled, the next takes its
    /// place): see [`closed_error`](Self::closed_error).
    write_waited: bool,
    /// The connection's failure once taken to be reported (see
    /// [`closed_error`](Self::closed_error)).
    reported_failure: Option<connection::Error>,
}

/// The current time as the connection's clock wants it. tokio's clock is used so that a
/// paused test clock drives the timers too.
pub(crate) fn now() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
}

impl Engine {
    pub(crate) fn new(conn: Connection, leftover: &[u8]) -> Self {
        let mut engine = Engine {
            conn,
            sleep: None,
            armed: None,
            timer_waker: None,
            timer_state: NO_TIMER_STATE,
            io_error: None,
            ended: false,
            write_waited: false,
            reported_failure: None,
        };
        if !leftover.is_empty() {
            engine.conn.handle_bytes(now(), leftover);
        }
        engine
    }

    /// Arms the timer for the connection's next deadline; true when it has fired (and
    /// `handle_timeout` ran).
    #[inline(always)]
    fn poll_timer(&mut self, cx: &mut Context<'_>) -> bool {
        // The deadline is asked for only when the set of running timers changed: while it
        // stays, every deadline only moves later, and the armed one still comes first.
        // Asking on every wait was a tenth of a small echo's instructions (callgrind).
        let state = self.conn.timer_state();
        if state != self.timer_state {
            self.timer_state = state;
            if !self.arm() {
                return false;
            }
        }
        let Some(sleep) = self.sleep.as_mut() else {
            return false;
        };
        // Polling the `Sleep` on every pass was a tenth of a small echo's instructions
        // (callgrind). Once it has been polled with this task's waker since it was last
        // set, the timer wakes that waker when it fires, and it fires only once the clock
        // has reached the armed deadline: until then there is nothing to poll for. The
        // clock, not `Sleep::is_elapsed`: the `Sleep` lives in its own allocation, which a
        // connection that sends now and then finds out of cache on every wait (a tenth of
        // the server's user-space time at 10,000 connections x 2.5 msg/s, `perf record`),
        // where reading the clock is a few nanoseconds.
        if self
            .timer_waker
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
            && self
                .armed
                .is_some_and(|at| tokio::time::Instant::now() < at)
        {
            return false;
        }
        // Out of coop budget, the poll returns `Pending` without registering the waker.
        let registers = tokio::task::coop::has_budget_remaining();
        let fired = sleep.as_mut().poll(cx).is_ready();
        if !fired && registers {
            self.timer_waker = Some(cx.waker().clone());
        }
        if fired {
            self.timer_waker = None;
            self.armed = None;
            self.timer_state = NO_TIMER_STATE;
            self.conn.handle_timeout(now());
        }
        fired
    }

    /// Arms the `Sleep` for the connection's next deadline; false when it has none.
    fn arm(&mut self) -> bool {
        let deadline = self.conn.poll_timeout().map(tokio::time::Instant::from_std);
        let Some(at) = deadline else {
            self.sleep = None;
            self.armed = None;
            self.timer_waker = None;
            return false;
        };
        // Re-arm only for an earlier deadline. Each received message moves the keepalive
        // and idle deadlines later; resetting the `Sleep` for that on every message was
        // a profiled hot spot. A timer left at the earlier time fires early: the
        // connection's `handle_timeout` finds nothing due, and the next pass arms the
        // then-current deadline.
        if self.armed.is_none_or(|armed| at < armed) {
            self.armed = Some(at);
            self.timer_waker = None;
            match self.sleep.as_mut() {
                Some(s) => s.as_mut().reset(at),
                None => self.sleep = Some(Box::pin(tokio::time::sleep_until(at))),
            }
        }
        true
    }

    /// The transport failed: nothing more can be written or read. What was received
    /// before is still delivered; then `e` is reported once, unless the peer's close had
    /// arrived (a peer that resets the connection after its close, as many do, ended
    /// nothing that was still open, even when our echo could not be written).
    fn transport_failed(&mut self, e: io::Error) {
        self.io_error.get_or_insert(e);
        self.conn.handle_transport_error();
    }

    /// A write of a send failed: the transport is gone for the receive too, as when one
    /// of its own writes fails (see [`transport_failed`](Self::transport_failed)). The
    /// sender gets the error; the receive delivers what arrived before, then reports a
    /// copy. Left unsaid, the connection went on as if open: a fragmented message whose
    /// writer the failed send dropped then failed it with `Abandoned`, which dropped what
    /// had arrived and took the transport's error's place.
    fn send_failed(&mut self, e: io::Error) -> Error {
        self.transport_failed(io::Error::new(e.kind(), e.to_string()));
        Error::Io(e)
    }

    /// The next event from the peer, handed over by `hand` (the connection's `raw_owned`
    /// for an owned event, `take_message` for a message); whole messages only when
    /// `whole`. `Ok(None)` once the connection has closed cleanly (and after an error has
    /// been returned).
    #[inline]
    pub(crate) fn poll_recv_as<T>(
        &mut self,
        cx: &mut Context<'_>,
        io: &mut dyn Io,
        whole: bool,
        hand: impl FnOnce(&mut Connection, Raw) -> T,
    ) -> Poll<Result<Option<T>, Error>> {
        let raw = ready!(self.poll_recv_raw(cx, io, whole))?;
        Poll::Ready(Ok(raw.map(|raw| hand(&mut self.conn, raw))))
    }

    /// The next event from the peer as positions in the connection's buffers, to borrow
    /// or take before the next call: whole messages (`whole`: chunks gathered, see
    /// [`Connection::poll_message`]) or every event as it comes. `Ok(None)` once the
    /// connection has closed cleanly (and after an error has been returned).
    #[inline(always)]
    pub(crate) fn poll_recv_raw(
        &mut self,
        cx: &mut Context<'_>,
        io: &mut dyn Io,
        whole: bool,
    ) -> Poll<Result<Option<Raw>, Error>> {
        self.poll_recv_with(cx, io, whole, |_| None)
    }

    /// [`poll_recv_raw`](Self::poll_recv_raw), the usual message first looked for by
    /// `short` before every poll (after a read as well): `None` when it is not there. A
    /// receive that lends passes [`Connection::lend_next`] (the handler API's borrowed
    /// callback).
    #[inline(always)]
    pub(crate) fn poll_recv_with(
        &mut self,
        cx: &mut Context<'_>,
        io: &mut dyn Io,
        whole: bool,
        mut short: impl FnMut(&mut Connection) -> Option<Raw>,
    ) -> Poll<Result<Option<Raw>, Error>> {
        loop {
            if let Some(raw) = short(&mut self.conn) {
                return Poll::Ready(Ok(Some(raw)));
            }
            match self.conn.poll_raw(whole) {
                Some(Ok(ev)) => return self.hand_over(ev, cx, io),
                // The connection latched the error and started its teardown (our close
                // with the error's code is queued): it is reported once that is over.
                Some(Err(e)) => {
                    self.note_failure(&e);
                    continue;
                }
                None => {}
            }
            if let Some(done) = self.poll_io(cx, io) {
                return done;
            }
        }
    }

    /// The owning receive of whole messages ([`poll_recv_as`](Self::poll_recv_as) with
    /// [`Connection::take_message`]), the usual message taken on the connection's short
    /// path ([`Connection::take_short`]) before every poll, after a read as well.
    #[inline(always)]
    pub(crate) fn poll_recv_message(
        &mut self,
        cx: &mut Context<'_>,
        io: &mut dyn Io,
    ) -> Poll<Result<Option<Message>, Error>> {
        loop {
            if let Some(msg) = self.conn.take_short() {
                return Poll::Ready(Ok(Some(msg)));
            }
            match self.conn.poll_raw(true) {
                Some(Ok(ev)) => {
                    let raw = ready!(self.hand_over(ev, cx, io))?;
                    return Poll::Ready(Ok(raw.map(|raw| self.conn.take_message(raw))));
                }
                Some(Err(e)) => {
                    self.note_failure(&e);
                    continue;
                }
                None => {}
            }
            if let Some(done) = self.poll_io(cx, io) {
                let raw = ready!(done)?;
                return Poll::Ready(Ok(raw.map(|raw| self.conn.take_message(raw))));
            }
        }
    }

    /// One pass of a receive's IO once the connection has nothing to hand over: the end,
    /// the queue written, the shutdown, a read, the timer. `None`: poll the connection
    /// again; `Some`: what the receive returns.
    #[inline(always)]
    fn poll_io(
        &mut self,
        cx: &mut Context<'_>,
        io: &mut dyn Io,
    ) -> Option<Poll<Result<Option<Raw>, Error>>> {
        if self.conn.is_done() {
            return Some(Poll::Ready(self.finish()));
        }
        // Before reading on, write what is queued (answers queued with `feed` leave
        // together here). Checked first: most passes have nothing to write.
        if self.conn.has_pending_output()
            && let Poll::Ready(Err(e)) = self.poll_drain(cx, io.wr())
        {
            self.transport_failed(e);
            return None;
        }
        if self.conn.wants_shutdown() {
            let r = (|| -> Poll<io::Result<()>> {
                let mut wr = io.wr();
                ready!(wr.as_mut().poll_flush(cx))?;
                wr.poll_shutdown(cx)
            })();
            if let Poll::Ready(r) = r {
                // A failed shutdown means the peer is gone already: the teardown's
                // wait for its FIN ends with the read that finds it.
                let _ = r;
                self.conn.handle_shutdown(now());
                return None;
            }
        }
        // The connection says whether to read: not while too many control frames wait
        // for the socket (the drain above registered for write readiness; the timers
        // still run).
        if self.conn.wants_read() {
            match self.poll_fill(cx, io) {
                Poll::Ready(Ok(())) => return None,
                Poll::Ready(Err(e)) => {
                    self.transport_failed(e);
                    return None;
                }
                Poll::Pending => {}
            }
        } else if self.conn.waits_for_budget() && !self.conn.register_budget_waker(cx.waker()) {
            // Waiting for memory from the budget, and woken since the poll that found it
            // short: poll again. Otherwise the budget wakes this task when memory comes
            // back; the timer below bounds the wait.
            return None;
        }
        // About to wait: the shutdown signal is to wake this wait (going away queues our
        // close, to be written on the next pass), and the connection's next deadline is
        // armed. A timer that fired may have queued a ping, failed the connection or
        // ended its teardown.
        if self.conn.poll_going_away(cx.waker(), now) || self.poll_timer(cx) {
            return None;
        }
        Some(Poll::Pending)
    }

    /// The usual receive, without IO: the event the connection has buffered, when there
    /// is nothing to write before it is handed over; else what the connection said, for
    /// [`poll_recv_from`](Self::poll_recv_from).
    #[inline(always)]
    pub(crate) fn try_recv_raw(&mut self, whole: bool) -> Result<Raw, Polled> {
        match self.conn.poll_raw(whole) {
            Some(Ok(ev)) if !self.conn.has_control_output() && !matches!(ev, Raw::Close(_)) => {
                Ok(ev)
            }
            polled => Err(Polled(polled)),
        }
    }

    /// [`poll_recv_raw`](Self::poll_recv_raw) after [`try_recv_raw`](Self::try_recv_raw)
    /// left `first`, what the connection's poll gave.
    #[inline(always)]
    pub(crate) fn poll_recv_from(
        &mut self,
        Polled(first): Polled,
        cx: &mut Context<'_>,
        io: &mut dyn Io,
        whole: bool,
    ) -> Poll<Result<Option<Raw>, Error>> {
        match first {
            Some(Ok(ev)) => return self.hand_over(ev, cx, io),
            Some(Err(e)) => self.note_failure(&e),
            None => {}
        }
        self.poll_recv_raw(cx, io, whole)
    }

    /// Hands over an event: pongs and the close echo leave first if the socket takes them,
    /// with the data queued with them (messages queued with `feed` otherwise wait for the
    /// receive that would block, to share one vectored write).
    ///
    /// The peer's close is handed over only after its answer was written (and flushed)
    /// as far as the socket takes it now: the close echo is queued in order with the
    /// data, not as a control frame, and an application that stops at the `Close` and
    /// drops the socket would otherwise never send it.
    #[inline(always)]
    fn hand_over(
        &mut self,
        ev: Raw,
        cx: &mut Context<'_>,
        io: &mut dyn Io,
    ) -> Poll<Result<Option<Raw>, Error>> {
        if self.conn.has_control_output()
            && let Poll::Ready(Err(e)) = self.poll_drain(cx, io.wr())
        {
            self.transport_failed(e);
        }
        if let Raw::Close(_) = ev {
            self.write_close_answer(cx, io);
        }
        Poll::Ready(Ok(Some(ev)))
    }

    /// Writes what is queued up to and with the close answer, and flushes, as far as the
    /// socket takes it without waiting (a pending write registers `cx` as every write
    /// does; the next receive or flush writes the rest).
    #[cold]
    fn write_close_answer(&mut self, cx: &mut Context<'_>, io: &mut dyn Io) {
        if !self.conn.has_pending_output() {
            return;
        }
        match self.poll_drain(cx, io.wr()) {
            Poll::Ready(Ok(())) => {
                if let Poll::Ready(Err(e)) = io.wr().poll_flush(cx) {
                    self.transport_failed(e);
                }
            }
            Poll::Ready(Err(e)) => self.transport_failed(e),
            Poll::Pending => {}
        }
    }

    /// For the drop of a socket: when our close (the answer to the peer's, or our own) is
    /// still queued, one more write of the queue, without waiting (a socket still full
    /// takes nothing, and nothing waits for it), then a flush the same way.
    pub(crate) fn write_on_drop(&mut self, mut wr: Pin<&mut (dyn AsyncWrite + Unpin + '_)>) {
        if !self.conn.close_sent() || !self.conn.has_pending_output() || self.conn.is_done() {
            return;
        }
        let mut cx = Context::from_waker(Waker::noop());
        if let Poll::Ready(Ok(())) = self.poll_write_queue(&mut cx, wr.as_mut()) {
            let _ = wr.poll_flush(&mut cx);
        }
    }

    /// A failure the connection reported (it is returned once its teardown is over).
    #[inline(always)]
    fn note_failure(&self, e: &connection::Error) {
        #[cfg(feature = "tracing")]
        tracing::debug!(
            target: "rapidws::tokio",
            role = ?self.conn.role(),
            error = %e,
            close_code = e.close_code().map(|c| c.0),
            "websocket failed"
        );
        #[cfg(not(feature = "tracing"))]
        let _ = e;
    }

    /// The connection is done: what to report, once (`Ok(None)` after a clean close, and
    /// on every call after the first).
    fn finish(&mut self) -> Result<Option<Raw>, Error> {
        if !self.ended {
            self.ended = true;
            self.sleep = None;
            self.timer_waker = None;
            self.armed = None;
            self.timer_state = NO_TIMER_STATE;
            *self.conn.recv_buffer() = BytesMut::new();
            #[cfg(feature = "tracing")]
            tracing::debug!(
                target: "rapidws::tokio",
                role = ?self.conn.role(),
                peer_code = self.conn.peer_close().map(|c| c.code.0),
                failed = self.io_error.is_some() || self.conn.failure().is_some(),
                "websocket closed"
            );
        }
        // The transport's failure is told unless the peer's close had arrived (see
        // `transport_failed`).
        let io_error = self.io_error.take().filter(|_| !self.conn.close_received());
        if let Some(e) = io_error {
            // The connection's own failure, if any, came first and is the one to tell.
            return Err(self.take_failure().map_or(Error::Io(e), Error::from));
        }
        match self.take_failure() {
            Some(e) => Err(Error::from(e)),
            None => Ok(None),
        }
    }

    /// Reads once into the connection's receive buffer.
    #[inline(always)]
    fn poll_fill(&mut self, cx: &mut Context<'_>, io: &mut dyn Io) -> Poll<io::Result<()>> {
        if self.conn.recv_buffer_is_unallocated() {
            return self.poll_fill_idle(cx, io);
        }
        // Room for the next read, and for the rest of a large frame in one step. A busy
        // connection keeps its buffer between messages (the memory timer gives it back
        // when it goes quiet), one that sends now and then (and one reading large
        // messages) gives it to the thread's stock whenever the read finds nothing and
        // takes one back here: request/response traffic does not allocate per message,
        // and an idle connection holds none.
        let limit = self.conn.read_limit();
        let buf = self.conn.reserve_read();
        let mut rd = io.rd();
        let read = if limit < buf.capacity() - buf.len() {
            poll_read_buf(&mut rd, cx, &mut buf.limit(limit))
        } else {
            poll_read_buf(&mut rd, cx, buf)
        };
        match read {
            Poll::Ready(Ok(0)) => {
                self.conn.handle_eof(now());
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Ok(_)) => {
                self.conn.handle_received(now());
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => {
                self.conn.read_would_block();
                Poll::Pending
            }
        }
    }

    /// [`poll_fill`](Self::poll_fill) for a connection that holds no receive buffer (idle,
    /// or just opened): reads into the stack, so that waiting for the peer allocates
    /// nothing; the buffer is made when bytes arrive.
    fn poll_fill_idle(&mut self, cx: &mut Context<'_>, io: &mut dyn Io) -> Poll<io::Result<()>> {
        let mut stack = [const { std::mem::MaybeUninit::<u8>::uninit() }; IDLE_READ];
        let mut rb = tokio::io::ReadBuf::uninit(&mut stack);
        ready!(io.rd().poll_read(cx, &mut rb))?;
        if rb.filled().is_empty() {
            self.conn.handle_eof(now());
        } else {
            self.conn.handle_bytes(now(), rb.filled());
        }
        Poll::Ready(Ok(()))
    }
}

/// One poll of a read into `buf`'s spare room (as much of it as `buf` offers).
#[inline(always)]
fn poll_read_buf<B: BufMut>(
    rd: &mut Pin<&mut (dyn AsyncRead + Unpin + '_)>,
    cx: &mut Context<'_>,
    buf: &mut B,
) -> Poll<io::Result<usize>> {
    std::pin::pin!(rd.read_buf(buf)).poll(cx)
}
