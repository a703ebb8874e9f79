//! The engine's writing side: the output queue written out (one plain write for one
//! slice, vectored for more), the lone frame written straight from a message or from the
//! receive buffer, and the waits for room and for the socket that bound every send.

use super::*;

/// A lone frame of at most this many bytes is copied, header and payload, into one buffer
/// and written with a plain write rather than gathered from its two parts: the kernel
/// charges a gathered write more than a plain one (`vfs_writev` and `import_iovec` against
/// `sendto`, perf profile of a server answering 10,000 quiet connections), and below this
/// size the copy costs less than that difference (the output queue copies small frames for
/// the same reason, `COALESCE_PAYLOAD_MAX`).
const LONE_COPY_MAX: usize = 1536 + 4;

thread_local! {
    /// Where a small lone frame is put together for its one write (see [`LONE_COPY_MAX`]).
    static LONE_FRAME: std::cell::RefCell<[u8; LONE_COPY_MAX]> =
        const { std::cell::RefCell::new([0; LONE_COPY_MAX]) };
}

/// Writes one frame given as its header and its payload: copied into one slice when small
/// (see [`LONE_COPY_MAX`]), else gathered.
#[inline(always)]
fn poll_write_frame(
    cx: &mut Context<'_>,
    io: &mut dyn Io,
    header: &HeaderBuf,
    payload: &[u8],
) -> Poll<io::Result<usize>> {
    let total = header.len() + payload.len();
    if total <= LONE_COPY_MAX {
        // A transport that is itself a WebSocket (a tunnel) writes its own frames here
        // while this one is borrowed: it gathers instead.
        let copied = LONE_FRAME.try_with(|frame| {
            let mut frame = frame.try_borrow_mut().ok()?;
            // The header from a register (see `HeaderBuf::write_into`): a copy of its 2 to
            // 14 bytes was a call of `memcpy`.
            header.write_into(&mut frame[..]);
            frame[header.len()..total].copy_from_slice(payload);
            Some(io.wr().poll_write(cx, &frame[..total]))
        });
        if let Ok(Some(written)) = copied {
            return written;
        }
    }
    let parts = [IoSlice::new(header.as_slice()), IoSlice::new(payload)];
    io.wr().poll_write_vectored(cx, &parts)
}

impl Engine {
    /// Bytes waiting to be written.
    pub(crate) fn queued(&self) -> usize {
        self.conn.pending_output_len()
    }

    /// Writes the connection's output queue out, many frames per vectored write;
    /// `Ready(Ok)` when it is empty. A write that finds the socket full starts the
    /// connection's send timer ([`Connection::write_would_block`]).
    #[inline]
    pub(crate) fn poll_drain(
        &mut self,
        cx: &mut Context<'_>,
        wr: Pin<&mut (dyn AsyncWrite + Unpin + '_)>,
    ) -> Poll<io::Result<()>> {
        let r = self.poll_write_queue(cx, wr);
        if r.is_pending() {
            self.conn.write_would_block(now());
        }
        r
    }

    #[inline(always)]
    pub(super) fn poll_write_queue(
        &mut self,
        cx: &mut Context<'_>,
        mut wr: Pin<&mut (dyn AsyncWrite + Unpin + '_)>,
    ) -> Poll<io::Result<()>> {
        while self.conn.has_pending_output() {
            let n = if !wr.is_write_vectored() {
                let mut one = [IoSlice::new(&[])];
                self.conn.io_slices(&mut one);
                ready!(wr.as_mut().poll_write(cx, &one[0]))?
            } else {
                // Most writes are one frame (a header and a payload, or one chunk of
                // small frames): no need to set up a full iovec array for them.
                let mut few = [IoSlice::new(&[]); 4];
                let count = self.conn.io_slices(&mut few);
                if count == 1 {
                    // One slice (a chunk of small frames, or one frame copied whole): a
                    // plain write, which the kernel serves for a fifth of what it
                    // charges a gathered one (`send` against `writev`, perf profile of a
                    // server answering 10,000 quiet connections).
                    ready!(wr.as_mut().poll_write(cx, &few[0]))?
                } else if count < few.len() {
                    ready!(wr.as_mut().poll_write_vectored(cx, &few[..count]))?
                } else {
                    let mut many = [IoSlice::new(&[]); Connection::WRITE_SLICES];
                    let count = self.conn.io_slices(&mut many);
                    ready!(wr.as_mut().poll_write_vectored(cx, &many[..count]))?
                }
            };
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.conn.advance_output(n);
        }
        Poll::Ready(Ok(()))
    }

    /// A write side wait (`send`, `flush`, room in the queue) would wait: arms the
    /// connection's deadline like every wait does. `Ready` with the error when a timer
    /// failed the connection meanwhile (a peer that stopped reading: no pong, nothing
    /// taken), so that no send waits forever on a peer.
    pub(super) fn poll_write_wait(
        &mut self,
        cx: &mut Context<'_>,
        io: &mut dyn Io,
    ) -> Poll<Result<(), Error>> {
        let waited = std::mem::take(&mut self.write_waited);
        // The connection is over (a timer ended its teardown, the receiving side
        // reported it): what is queued is never written, and no timer is left to end
        // the wait.
        if self.conn.is_done() {
            return Poll::Ready(Err(self.closed_error(waited)));
        }
        // Read what the peer sends meanwhile, while the connection holds little unread
        // input: a pong to our keepalive is then seen even though the application is not
        // receiving. The rest waits for the next receive.
        if io.reads() {
            while self.conn.wants_read()
                && self.conn.buffered_input() < self.conn.config().read_buffer_size
            {
                match self.poll_fill(cx, io) {
                    Poll::Ready(Ok(())) => {}
                    Poll::Ready(Err(e)) => {
                        self.transport_failed(e);
                        return Poll::Ready(Err(self.closed_error(waited)));
                    }
                    Poll::Pending => break,
                }
            }
            if self.conn.is_closed() {
                return Poll::Ready(Err(self.closed_error(waited)));
            }
        }
        // The shutdown signal wakes this wait; going away queues our close behind the
        // output this wait writes, and the close timer it starts is armed below.
        self.conn.poll_going_away(cx.waker(), now);
        while self.poll_timer(cx) {
            if self.conn.is_closed() {
                return Poll::Ready(Err(self.closed_error(waited)));
            }
        }
        self.write_waited = true;
        Poll::Pending
    }

    /// What a send on a closed connection reports: the failure that closed it, else
    /// `Closed`. A send or flush that `waited` when the connection failed reports the
    /// failure even after the receive reported it and the connection let it go (the
    /// receiving task of a split connection may meet the failure first); one made after
    /// the end reports `Closed`.
    pub(super) fn closed_error(&self, waited: bool) -> Error {
        let failure = match self.conn.failure() {
            Some(e) => Some(e),
            None if waited => self.reported_failure.as_ref(),
            None => None,
        };
        match failure {
            Some(e) => Error::from(e.clone()),
            None => Error::Closed,
        }
    }

    /// Drains, then flushes the IO object.
    pub(crate) fn poll_flush(
        &mut self,
        cx: &mut Context<'_>,
        io: &mut dyn Io,
    ) -> Poll<Result<(), Error>> {
        match self.poll_drain(cx, io.wr()) {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(e)) => return Poll::Ready(Err(self.send_failed(e))),
            Poll::Pending => return self.poll_write_wait(cx, io),
        }
        self.write_waited = false;
        if let Err(e) = ready!(io.wr().poll_flush(cx)) {
            return Poll::Ready(Err(self.send_failed(e)));
        }
        Poll::Ready(Ok(()))
    }

    /// Waits until the queue has room for `extra` bytes, writing to make room.
    pub(crate) fn poll_room(
        &mut self,
        cx: &mut Context<'_>,
        io: &mut dyn Io,
        extra: usize,
    ) -> Poll<Result<(), Error>> {
        loop {
            // A connection that takes no more sends has room enough: the send fails at
            // once (`Closed`) instead of waiting for room it does not need.
            if self.conn.has_room(extra) || self.conn.close_sent() || self.conn.is_closed() {
                if self.write_waited {
                    return Poll::Ready(self.room_wait_over());
                }
                return Poll::Ready(Ok(()));
            }
            match self.poll_drain(cx, io.wr()) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => {
                    self.write_waited = false;
                    return Poll::Ready(Err(self.send_failed(e)));
                }
                // The socket is full, but what it took may have made room enough.
                Poll::Pending if self.conn.has_room(extra) => {}
                Poll::Pending => return self.poll_write_wait(cx, io),
            }
        }
    }

    /// A wait for room is over. When the connection failed meanwhile (the task receiving
    /// on it met the send timeout first, say), the send that waited fails with that
    /// error, as it would had it met the failure itself, not with a bare `Closed`.
    #[cold]
    pub(super) fn room_wait_over(&mut self) -> Result<(), Error> {
        self.write_waited = false;
        if self.conn.is_closed() {
            return Err(self.closed_error(true));
        }
        Ok(())
    }

    /// Takes the connection's failure to report it at the end, keeping a copy for the
    /// sends still waiting.
    #[cold]
    pub(super) fn take_failure(&mut self) -> Option<connection::Error> {
        let e = self.conn.take_failure()?;
        self.reported_failure = Some(e.clone());
        Some(e)
    }

    /// Whether `extra` more bytes fit under the high-water mark right now.
    #[inline]
    pub(crate) fn has_room(&self, extra: usize) -> bool {
        self.conn.has_room(extra)
    }

    /// Queues `msg` on the connection (no IO).
    pub(crate) fn queue(&mut self, msg: Message, compression: Compression) -> Result<(), Error> {
        self.send_with(|c| c.send_message(msg, compression, now))
    }

    /// Puts the message in `msg` on its way (taken on the call that finds room for it) and
    /// finishes as `put` says: [`Put::Send`] then writes the queue out and flushes
    /// (`send`'s whole work, one poll at a time); [`Put::Feed`] and [`Put::Alone`] finish
    /// once it is written or queued, without waiting for the socket.
    ///
    /// When the connection allows it ([`Connection::lone_header`]: nothing queued ahead, a
    /// server's uncompressed message) a send's frame is written straight from the message,
    /// with no queue entry; what the socket does not take is queued before this returns,
    /// so a send dropped after its first poll leaves the message to the connection either
    /// way.
    #[inline]
    pub(crate) fn poll_message(
        &mut self,
        cx: &mut Context<'_>,
        io: &mut dyn Io,
        msg: &mut Option<Message>,
        compression: Compression,
        put: Put,
    ) -> Poll<Result<(), Error>> {
        // Whether it went out whole; `msg` is `None` once an earlier poll took it (and
        // queued it, or what the socket did not take of it).
        let mut whole = false;
        if let Some(len) = msg.as_ref().map(Message::len) {
            if !self.has_room(len) || self.write_waited {
                ready!(self.poll_room(cx, io, len))?;
            }
            let lone = !matches!(put, Put::Feed);
            let kind = match msg {
                Some(Message::Text(_)) => Some(MessageKind::Text),
                Some(Message::Binary(_)) => Some(MessageKind::Binary),
                _ => None,
            };
            let header = kind
                .filter(|_| lone && io.wr().is_write_vectored())
                .and_then(|kind| self.conn.lone_header(kind, len));
            match (msg.take(), header) {
                (Some(msg), Some(header)) => {
                    whole = self.poll_write_lone(cx, io, &header, msg.into_data())?;
                }
                (Some(msg), None) => self.queue(msg, compression)?,
                (None, _) => {}
            }
        }
        match put {
            // It went out whole: nothing else is queued.
            Put::Send if whole => io.wr().poll_flush(cx).map_err(|e| self.send_failed(e)),
            Put::Send => self.poll_flush(cx, io),
            Put::Feed | Put::Alone => Poll::Ready(Ok(())),
        }
    }

    /// Writes a lone frame (see [`poll_message`](Self::poll_message)): `Ok(true)` when it went
    /// out whole, `Ok(false)` when what the socket did not take was queued.
    #[inline(always)]
    pub(super) fn poll_write_lone(
        &mut self,
        cx: &mut Context<'_>,
        io: &mut dyn Io,
        header: &HeaderBuf,
        payload: Bytes,
    ) -> Result<bool, Error> {
        self.poll_write_alone(cx, io, header, payload, |c, payload, written| {
            c.lone_unwritten(header, payload, written)
        })
    }

    /// The handler API's borrowed reply that is the message lent at `at` in the receive
    /// buffer (`Replies::held`): written once straight from the buffer, header and
    /// payload in one vectored write, as [`poll_write_lone`](Self::poll_write_lone) writes
    /// an owned message; what the socket does not take is queued (copied), and the poll is
    /// done. A failed write ends the transport as it does there.
    #[inline(always)]
    pub(crate) fn poll_write_lent(
        &mut self,
        cx: &mut Context<'_>,
        io: &mut dyn Io,
        kind: MessageKind,
        at: std::ops::Range<usize>,
    ) -> Result<(), Error> {
        if !io.wr().is_write_vectored() {
            return self.send_with(|c| c.send_lent(kind, at));
        }
        let header = self.conn.lent_header(kind, at.len());
        self.poll_write_alone(cx, io, &header, at, |c, at, written| {
            c.lent_unwritten(&header, at, written)
        })
        .map(drop)
    }

    /// Writes one frame, `header` and then `payload`'s bytes, once: `Ok(true)` when it went
    /// out whole; otherwise `queue_rest` queues what the socket did not take (given the
    /// payload back and how many bytes of the frame went out). A failed write ends the
    /// transport ([`send_failed`](Self::send_failed)): the error is returned, and the
    /// receive reports it too.
    #[inline(always)]
    fn poll_write_alone<P: LonePayload>(
        &mut self,
        cx: &mut Context<'_>,
        io: &mut dyn Io,
        header: &HeaderBuf,
        payload: P,
        queue_rest: impl FnOnce(&mut Connection, P, usize),
    ) -> Result<bool, Error> {
        let bytes = payload.bytes(&self.conn);
        let total = header.len() + bytes.len();
        let written = match poll_write_frame(cx, io, header, bytes) {
            Poll::Ready(Ok(n)) if n == total => return Ok(true),
            Poll::Ready(Ok(0)) => return Err(self.send_failed(io::ErrorKind::WriteZero.into())),
            Poll::Ready(Ok(n)) => n.min(total),
            Poll::Ready(Err(e)) => return Err(self.send_failed(e)),
            Poll::Pending => 0,
        };
        queue_rest(&mut self.conn, payload, written);
        Ok(false)
    }

    /// Runs a send operation on the connection (its frames join the output queue).
    #[inline]
    pub(crate) fn send_with(
        &mut self,
        f: impl FnOnce(&mut Connection) -> Result<(), connection::SendError>,
    ) -> Result<(), Error> {
        f(&mut self.conn).map_err(Error::from_send)
    }
}

/// Where the payload of a frame written alone ([`Engine::poll_write_alone`]) lies: in a
/// message of the caller's, or at a range of the connection's receive buffer (a borrowed
/// handler's reply, the message it was lent).
trait LonePayload {
    fn bytes<'a>(&'a self, conn: &'a Connection) -> &'a [u8];
}

impl LonePayload for Bytes {
    #[inline(always)]
    fn bytes<'a>(&'a self, _: &'a Connection) -> &'a [u8] {
        self
    }
}

impl LonePayload for std::ops::Range<usize> {
    #[inline(always)]
    fn bytes<'a>(&'a self, conn: &'a Connection) -> &'a [u8] {
        conn.lent_bytes(self.clone())
    }
}
