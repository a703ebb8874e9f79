//! [`WebSocket`]: a connection over any blocking `Read + Write`.

use std::fmt;
use std::io::{self, IoSlice};
use std::time::{Duration, Instant};

use bytes::BytesMut;

use crate::codec::{CloseCode, Role};
use crate::connection::{Batch, Config, Connection, SendError};
#[cfg(feature = "deflate")]
use crate::deflate::{DeflateConfig, DeflateParams};
use crate::error::Error;
use crate::message::{CloseFrame, Compression, Message};

use super::net::Transport;

mod on_drop;
use on_drop::{live, taken};

#[cfg(feature = "tracing")]
fn trace_open(role: Role) {
    tracing::debug!(target: "rapidws::blocking", ?role, "websocket open");
}
#[cfg(not(feature = "tracing"))]
fn trace_open(_: Role) {}

#[cfg(feature = "tracing")]
fn trace_end(role: Role, error: Option<&Error>, close: Option<&CloseFrame>) {
    match error {
        Some(e) => {
            tracing::debug!(target: "rapidws::blocking", ?role, error = %e, "websocket failed")
        }
        None => tracing::debug!(
            target: "rapidws::blocking",
            ?role,
            code = close.map(|c| c.code.0),
            "websocket closed"
        ),
    }
}
#[cfg(not(feature = "tracing"))]
fn trace_end(_: Role, _: Option<&Error>, _: Option<&CloseFrame>) {}

/// A WebSocket connection over a blocking stream.
///
/// [`read`](Self::read) returns the next message (pings are answered and closes echoed
/// as they are read); [`send`](Self::send) writes one message and flushes. Output the
/// connection produces on its own (pongs, the close echo) is written during `read`. A
/// socket dropped with its close echo still queued (a write ran out of the stream's own
/// write timeout) writes the queue once more, each write waiting at most that timeout.
pub struct WebSocket<S> {
    /// The stream: `None` only once [`into_inner`](Self::into_inner) took it (the `Drop`
    /// then finds nothing to do).
    stream: Option<S>,
    /// [`write_on_drop`](Self::write_on_drop) for `S`, for the `Drop` (which cannot name
    /// the bounds that writing needs).
    write_on_drop: fn(&mut Self),
    conn: Connection,
    /// Encoded output not yet written (kept across a write timeout).
    subprotocol: Option<String>,
    deflate: bool,
    /// The transport failed: the error to report once (the connection is done).
    io_error: Option<io::Error>,
    /// The end of the connection was reported.
    ended: bool,
    /// The read timeout the stream had before we shortened it to a deadline of the
    /// connection, when we did (`None` inside: it had none).
    user_read_timeout: Option<Option<Duration>>,
    /// The write timeout the stream had before we shortened it to the send timeout, when
    /// we did (see [`arm_send_timeout`](Self::arm_send_timeout)).
    user_write_timeout: Option<Option<Duration>>,
    /// The send timeout was looked at (and the write timeout shortened, if need be).
    send_timeout_armed: bool,
    /// How long the current `read` has waited for memory from the budget: past the
    /// socket's own read timeout it returns as a read that timed out would.
    budget_napped: Duration,
}

impl<S> fmt::Debug for WebSocket<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebSocket")
            .field("role", &self.conn.role())
            .field("connection", &self.conn)
            .finish_non_exhaustive()
    }
}

impl<S: Transport> WebSocket<S> {
    /// Wraps a stream on which the opening handshake already happened; `leftover` are
    /// bytes read after the handshake head, if any.
    pub fn from_raw(stream: S, role: Role, config: &Config, leftover: &[u8]) -> Self {
        let conn = Connection::new(role, config.clone(), Instant::now());
        Self::from_connection(stream, conn, leftover, None)
    }

    /// The connection for a finished opening handshake (either role), with the agreed
    /// permessage-deflate parameters and this end's deflate settings, if any.
    pub(super) fn open(
        stream: S,
        role: Role,
        config: &Config,
        now: Instant,
        #[cfg(feature = "deflate")] deflate: Option<(DeflateParams, &DeflateConfig)>,
        leftover: &[u8],
        subprotocol: Option<String>,
    ) -> Self {
        #[cfg(feature = "deflate")]
        let compressed = deflate.is_some();
        #[cfg(not(feature = "deflate"))]
        let compressed = false;
        let conn = Connection::open(
            role,
            std::sync::Arc::new(config.clone()),
            now,
            #[cfg(feature = "deflate")]
            deflate,
        );
        trace_open(role);
        let mut ws = Self::from_connection(stream, conn, leftover, subprotocol);
        ws.deflate = compressed;
        ws
    }

    fn from_connection(
        stream: S,
        mut conn: Connection,
        leftover: &[u8],
        subprotocol: Option<String>,
    ) -> Self {
        if !leftover.is_empty() {
            conn.handle_bytes(Instant::now(), leftover);
        }
        WebSocket {
            stream: Some(stream),
            write_on_drop: Self::write_on_drop,
            conn,
            subprotocol,
            deflate: false,
            io_error: None,
            ended: false,
            user_read_timeout: None,
            user_write_timeout: None,
            send_timeout_armed: false,
            budget_napped: Duration::ZERO,
        }
    }

    /// The subprotocol agreed in the handshake, if any.
    pub fn subprotocol(&self) -> Option<&str> {
        self.subprotocol.as_deref()
    }

    /// This end's role.
    pub fn role(&self) -> Role {
        self.conn.role()
    }

    /// Whether permessage-deflate (RFC 7692) was agreed in the handshake (the name every
    /// other layer uses: `tokio::WebSocket::is_deflate`, `handshake::Response::is_deflate`).
    pub fn is_deflate(&self) -> bool {
        self.deflate
    }

    /// Whether permessage-deflate was agreed; the older name of
    /// [`is_deflate`](Self::is_deflate).
    #[deprecated(note = "use `is_deflate`, the name the other layers use")]
    pub fn is_compressed(&self) -> bool {
        self.deflate
    }

    /// The peer's close frame, once received (code 1005 when it had none).
    pub fn close_frame(&self) -> Option<&CloseFrame> {
        self.conn.peer_close()
    }

    /// The underlying stream (to change its timeouts, for example).
    pub fn get_ref(&self) -> &S {
        match &self.stream {
            Some(stream) => stream,
            None => taken(),
        }
    }

    /// The underlying stream, mutably. Reading or writing it corrupts the connection.
    pub fn get_mut(&mut self) -> &mut S {
        live(&mut self.stream)
    }

    /// The sans-IO connection underneath, for inspection.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// The stream back (after a close, to shut it down), with its own timeouts.
    pub fn into_inner(mut self) -> S {
        self.restore_read_timeout();
        self.restore_write_timeout();
        match self.stream.take() {
            Some(stream) => stream,
            None => taken(),
        }
    }

    /// Writes all pending output and flushes the stream. After a write timeout the
    /// unwritten rest is kept and written by the next call.
    pub fn flush(&mut self) -> Result<(), Error> {
        self.write_out().map_err(|e| self.write_error(e))
    }

    /// What a failed write reports: the failure that closed the connection meanwhile (a
    /// send timeout), else the write's own error.
    fn write_error(&self, e: io::Error) -> Error {
        match self.conn.failure() {
            Some(f) if self.conn.is_closed() => Error::from(f.clone()),
            _ => Error::Io(e),
        }
    }

    /// Writes all pending output from the connection's queue, many frames per vectored
    /// write, and flushes the stream. After a write timeout what is left stays queued.
    ///
    /// A write that takes nothing for the send timeout
    /// ([`Config::send_timeout`](crate::Config::send_timeout)) fails the connection: the
    /// socket's write timeout is shortened to it (see
    /// [`arm_send_timeout`](Self::arm_send_timeout)), and when a write runs out of it the
    /// connection's timers decide.
    fn write_out(&mut self) -> io::Result<()> {
        if !self.send_timeout_armed {
            self.arm_send_timeout();
        }
        while self.conn.has_pending_output() {
            let mut slices = [IoSlice::new(&[]); Connection::WRITE_SLICES];
            let count = self.conn.io_slices(&mut slices);
            let start = Instant::now();
            match live(&mut self.stream).write_vectored(&slices[..count]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.conn.advance_output(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if is_would_block(&e) => {
                    let closing = self.conn.is_closed();
                    self.conn.write_would_block(start);
                    self.run_timers();
                    if self.conn.is_done() || !closing && self.conn.is_closed() {
                        // The send timer (or another) failed the connection, or the
                        // teardown is over: its error is the one to tell (not a timeout
                        // the caller may retry). A connection already closing (our
                        // answer to the peer's close queued) keeps its output for the
                        // next call, or the drop, as an open one does.
                        return Err(io::Error::other("the connection closed while writing"));
                    }
                    if self.user_write_timeout.is_none() {
                        // The stream's own timeout: the caller hears of it, and the next
                        // call writes the rest.
                        return Err(e);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        live(&mut self.stream).flush()
    }

    /// Shortens the stream's write timeout to the send timeout, once: a write to a peer
    /// that stopped reading then returns when the send timeout has passed without
    /// progress (a write that takes some bytes returns at once), and the connection's
    /// timers fail it. A stream whose own timeout is shorter keeps it.
    fn arm_send_timeout(&mut self) {
        self.send_timeout_armed = true;
        let Some(send) = self.conn.config().send_timeout else {
            return;
        };
        let Ok(own) = live(&mut self.stream).write_timeout() else {
            return;
        };
        if own.is_some_and(|own| own <= send) {
            return;
        }
        if live(&mut self.stream).set_write_timeout(Some(send)).is_ok() {
            self.user_write_timeout = Some(own);
        }
    }

    /// Puts the stream's own write timeout back after
    /// [`arm_send_timeout`](Self::arm_send_timeout) shortened it.
    fn restore_write_timeout(&mut self) {
        if let Some(own) = self.user_write_timeout.take() {
            let _ = live(&mut self.stream).set_write_timeout(own);
        }
    }

    /// Queues `msg` and writes it out. `Message::Close` starts the close handshake (then
    /// [`read`](Self::read) until `None`, or use [`close`](Self::close)).
    ///
    /// # Errors
    ///
    /// [`Error::Closed`] after the close handshake started or the connection failed;
    /// [`Error::Send`] for a control payload over 125 bytes or a close code that may not
    /// be sent; [`Error::Io`] when the write failed. After a write timeout the message
    /// stays queued and the next call (or [`flush`](Self::flush)) writes the rest.
    pub fn send(&mut self, msg: Message) -> Result<(), Error> {
        self.send_with(msg, Compression::Auto)
    }

    /// [`send`](Self::send) with the choice, for this message, of whether it is
    /// compressed on a connection that agreed permessage-deflate:
    /// [`Compression::Never`] sends it as it is (RSV1 clear), [`Compression::Always`]
    /// compresses it whatever its size or contents, [`Compression::Auto`] is `send`.
    /// Control messages are never compressed. The next compressed message still
    /// inflates at the peer, with or without context takeover. Fails like `send`.
    pub fn send_with(&mut self, msg: Message, compression: Compression) -> Result<(), Error> {
        let r = self.conn.send_message(msg, compression, Instant::now);
        r.map_err(Error::from_send)?;
        self.flush()
    }

    /// Sends a text message (copied); fails like [`send`](Self::send).
    pub fn send_text(&mut self, text: &str) -> Result<(), Error> {
        self.conn.send_text(text).map_err(Error::from_send)?;
        self.flush()
    }

    /// Sends a binary message (copied); fails like [`send`](Self::send).
    pub fn send_binary(&mut self, data: &[u8]) -> Result<(), Error> {
        self.conn.send_binary(data).map_err(Error::from_send)?;
        self.flush()
    }

    /// Sends a ping (payload at most 125 bytes).
    pub fn ping(&mut self, payload: &[u8]) -> Result<(), Error> {
        self.conn.ping(payload).map_err(Error::from_send)?;
        self.flush()
    }

    /// Closes: sends a close frame with `code` and `reason` (at most 123 bytes), then
    /// reads (discarding data) until the peer's close arrives and the teardown of RFC 6455
    /// 7.1.1 is over (the server shuts TCP down first; a client waits for that), all within
    /// the close timeout. `Err(Error::Timeout(Timeout::Close))` when the peer did not answer
    /// in time. The deadlines are kept by shortening the socket's read timeout when it
    /// would wait past them (see the [module docs](super#time)).
    pub fn close(&mut self, code: impl Into<CloseCode>, reason: &str) -> Result<(), Error> {
        match self.conn.close(Instant::now(), code.into(), reason) {
            Ok(()) | Err(SendError::Closed) => {}
            Err(e) => return Err(Error::Send(e)),
        }
        let _ = self.flush();
        loop {
            match self.read() {
                Ok(Some(_)) => {}
                Ok(None) => return Ok(()),
                // Our close went out; the peer closing TCP instead of answering ends it too.
                Err(e) if e.is_unexpected_eof() => return Ok(()),
                // The socket's own timeout passed: the connection's deadlines are kept
                // by the reads themselves, so keep waiting.
                Err(e) if e.is_would_block() => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads the next message: text, binary, a ping or pong (already answered), or the
    /// peer's close (already echoed). `Ok(None)` once the connection has closed cleanly
    /// (and after an error has been returned).
    ///
    /// After the close, `read` carries out the teardown the connection asks for before it
    /// returns `None` (RFC 6455 7.1.1: the server shuts its write half down first and waits
    /// for the client's, the client waits for the server's); after a failure, it writes
    /// our close frame, shuts down, and reads and drops what the peer still sends for a
    /// short while (`Config::linger_timeout`) so the peer reads our close code.
    ///
    /// # Errors
    ///
    /// A socket timeout ([`Error::is_would_block`]) loses nothing: call again.
    /// [`Error::Protocol`] or `Error::Deflate` when the peer broke the protocol (our close
    /// with its code was sent), [`Error::Timeout`] when a connection timer ran out,
    /// [`Error::Io`] of kind `UnexpectedEof` when the peer closed TCP without a close
    /// frame. These end the connection.
    pub fn read(&mut self) -> Result<Option<Message>, Error> {
        self.budget_napped = Duration::ZERO;
        loop {
            match self.conn.poll_message() {
                Some(Ok(msg)) => {
                    // A write timeout leaves the rest queued for the next call, as it does
                    // everywhere else: the message is delivered either way.
                    if self.conn.has_pending_output()
                        && let Err(e) = self.write_out()
                        && !is_would_block(&e)
                    {
                        self.transport_failed(e);
                    }
                    return Ok(Some(msg));
                }
                // The connection latched the error and started its teardown (our close
                // with its code is queued): it is reported once that is over.
                Some(Err(_)) => continue,
                None => {}
            }
            if let Some(end) = self.wait() {
                return end.map(|()| None);
            }
        }
    }

    /// One pass of a read's IO once the connection has nothing to hand over: the end,
    /// the timers, the queue written, the shutdown, a read. `None`: poll the connection
    /// again; `Some`: the read ends, `Ok` after a clean close.
    fn wait(&mut self) -> Option<Result<(), Error>> {
        if self.conn.is_done() {
            return Some(self.finish().map(|_| ()));
        }
        self.run_timers();
        if self.conn.has_pending_output()
            && let Err(e) = self.write_out()
        {
            if is_would_block(&e) {
                return Some(Err(Error::Io(e)));
            }
            self.transport_failed(e);
            return None;
        }
        if self.conn.wants_shutdown() {
            // A failed shutdown means the peer is gone already: the read below finds
            // its end.
            let _ = live(&mut self.stream).shutdown_write();
            self.conn.handle_shutdown(Instant::now());
            return None;
        }
        if self.conn.waits_for_budget() {
            return self.wait_for_budget();
        }
        match self.fill() {
            Ok(()) => {}
            Err(e) if is_would_block(&e) => {
                // Either a deadline of the connection (the read timeout was shortened
                // to it) or the socket's own timeout: run what is due; the caller
                // hears of the socket's own only.
                let ours = self.user_read_timeout.is_some();
                self.run_timers();
                if !ours && !self.conn.is_done() {
                    return Some(Err(Error::Io(e)));
                }
            }
            Err(e) => self.transport_failed(e),
        }
        None
    }

    /// Reads every whole message buffered at once: the next message and, when it arrived
    /// whole, the run of whole messages after it, lent from the receive buffer until the
    /// next call on this `WebSocket` (see [`Batch`]); [`read`](Self::read) otherwise.
    /// The messages after the first are decoded a round at a time by the batch kernel and
    /// lent with no allocation, copy or reference count per message. A batch dropped
    /// before its end leaves the rest to the next read.
    ///
    /// ```no_run
    /// # fn run(mut ws: rapidws::blocking::WebSocket<std::net::TcpStream>) -> Result<(), rapidws::Error> {
    /// let mut bytes = 0;
    /// while let Some(batch) = ws.read_batch()? {
    ///     for msg in batch {
    ///         bytes += msg.len();
    ///     }
    /// }
    /// # let _ = bytes; Ok(())
    /// # }
    /// ```
    pub fn read_batch(&mut self) -> Result<Option<Batch<'_>>, Error> {
        self.budget_napped = Duration::ZERO;
        let raw = loop {
            match self.conn.poll_raw(true) {
                Some(Ok(raw)) => {
                    if self.conn.has_pending_output()
                        && let Err(e) = self.write_out()
                    {
                        self.transport_failed(e);
                    }
                    break raw;
                }
                Some(Err(_)) => continue,
                None => {}
            }
            if let Some(end) = self.wait() {
                return end.map(|()| None);
            }
        };
        Ok(Some(self.conn.batch_of(raw)))
    }

    /// The connection waits for memory from its budget: no read (the peer meets TCP
    /// backpressure). Nothing can wake a blocked thread, so it sleeps a short while (from
    /// 1 ms, longer the longer it has waited, at most 20 ms, never past the connection's
    /// next deadline) before the connection is polled again; the wait's own deadline
    /// (`Config::budget_wait`) ends it with 1013 at the latest. A `read` that has waited
    /// as long as the socket's own read timeout returns `WouldBlock`, as a read that found
    /// nothing would, losing nothing: the next call goes on waiting.
    fn wait_for_budget(&mut self) -> Option<Result<(), Error>> {
        let own = match self.user_read_timeout {
            Some(own) => own,
            None => live(&mut self.stream).read_timeout().ok().flatten(),
        };
        if own.is_some_and(|own| self.budget_napped >= own) {
            return Some(Err(Error::Io(io::ErrorKind::WouldBlock.into())));
        }
        let now = Instant::now();
        let waited = self
            .conn
            .budget_waiting_since()
            .map_or(Duration::ZERO, |since| now.saturating_duration_since(since));
        let mut nap = (waited / 8).clamp(Duration::from_millis(1), Duration::from_millis(20));
        if let Some(deadline) = self.conn.poll_timeout() {
            nap = nap.min(deadline.saturating_duration_since(now));
        }
        if let Some(own) = own {
            nap = nap.min(own.saturating_sub(self.budget_napped));
        }
        std::thread::sleep(nap);
        self.budget_napped += nap;
        self.run_timers();
        None
    }

    fn run_timers(&mut self) {
        let now = Instant::now();
        if self.conn.poll_timeout().is_some_and(|t| t <= now) {
            self.conn.handle_timeout(now);
        }
    }

    /// The transport failed: nothing more can be written or read. What was received
    /// before is still delivered; then `e` is reported once, unless the peer's close had
    /// arrived (a peer that resets the connection after its close ended nothing that was
    /// still open, even when our echo could not be written).
    fn transport_failed(&mut self, e: io::Error) {
        self.io_error.get_or_insert(e);
        self.conn.handle_transport_error();
    }

    /// The connection is done: what to report, once (`Ok(None)` after a clean close, and
    /// on every call after the first).
    fn finish(&mut self) -> Result<Option<Message>, Error> {
        if !self.ended {
            self.ended = true;
            self.restore_read_timeout();
            self.restore_write_timeout();
            *self.conn.recv_buffer() = BytesMut::new();
        }
        let failure = self.conn.take_failure().map(Error::from);
        // The transport's failure is told unless the peer's close had arrived (see
        // `transport_failed`).
        let io_error = self.io_error.take().filter(|_| !self.conn.close_received());
        let result = match (failure, io_error) {
            // The connection's own failure, if any, came first and is the one to tell.
            (Some(e), _) => Err(e),
            (None, Some(e)) => Err(Error::Io(e)),
            (None, None) => Ok(None),
        };
        trace_end(
            self.conn.role(),
            result.as_ref().err(),
            self.conn.peer_close(),
        );
        result
    }

    /// Before a read: when the connection has a deadline sooner than the socket's read
    /// timeout would wake us, shortens the timeout to it (and remembers the socket's own).
    fn arm_read_deadline(&mut self) {
        let Some(deadline) = self.conn.poll_timeout() else {
            return self.restore_read_timeout();
        };
        let wait = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        let own = match self.user_read_timeout {
            Some(own) => own,
            None => match live(&mut self.stream).read_timeout() {
                Ok(own) => own,
                Err(_) => return,
            },
        };
        if own.is_some_and(|own| own <= wait) {
            // The socket wakes us first anyway.
            return self.restore_read_timeout();
        }
        if live(&mut self.stream).set_read_timeout(Some(wait)).is_ok() {
            self.user_read_timeout = Some(own);
        }
    }

    /// Puts the socket's own read timeout back after [`arm_read_deadline`] shortened it.
    ///
    /// [`arm_read_deadline`]: Self::arm_read_deadline
    fn restore_read_timeout(&mut self) {
        if let Some(own) = self.user_read_timeout.take() {
            let _ = live(&mut self.stream).set_read_timeout(own);
        }
    }

    /// Reads once into the connection's receive buffer.
    fn fill(&mut self) -> io::Result<()> {
        self.arm_read_deadline();
        if self.conn.recv_buffer_is_unallocated() {
            // Waiting with no buffer (idle, or just opened): read into the stack, so that
            // a blocked read holds no allocation; the buffer is made when bytes arrive.
            let mut stack = [0u8; 2048];
            let n = loop {
                match live(&mut self.stream).read(&mut stack) {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    r => break r?,
                }
            };
            if n == 0 {
                self.conn.handle_eof(Instant::now());
            } else {
                self.conn.handle_bytes(Instant::now(), &stack[..n]);
            }
            return Ok(());
        }
        // Room for the rest of a large frame is reserved in one step; the read fills at
        // most one read's worth of it, so the zeroing below never covers more than that.
        let want = {
            self.conn.reserve_read();
            self.conn.read_offer().max(1)
        };
        let buf = self.conn.recv_buffer();
        let start = buf.len();
        buf.resize(start + want, 0);
        let r = loop {
            match live(&mut self.stream).read(&mut buf[start..]) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => break r,
            }
        };
        match r {
            Ok(n) => {
                buf.truncate(start + n);
                if n == 0 {
                    if buf.is_empty() {
                        *buf = BytesMut::new();
                    }
                    self.conn.handle_eof(Instant::now());
                } else {
                    self.conn.handle_received(Instant::now());
                }
                Ok(())
            }
            Err(e) => {
                buf.truncate(start);
                Err(e)
            }
        }
    }
}

fn is_would_block(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}
