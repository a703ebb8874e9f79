//! [`WebSocket`]: a connection over any blocking `Read + Write`.

use std::fmt;
use std::io::{self, Read, Write};
use std::time::Instant;

use bytes::BytesMut;

use crate::codec::{CloseCode, MessageKind, Role};
use crate::connection::{Config, Connection, SendError};
#[cfg(feature = "deflate")]
use crate::deflate::{DeflateConfig, DeflateParams};
use crate::error::Error;
use crate::message::{CloseFrame, Message, Utf8Bytes};

/// Largest read asked of the socket while a large message streams in.
const MAX_READ_CHUNK: usize = 256 * 1024;

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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Open,
    /// Closed or failed: nothing more is read.
    Done,
}

/// A WebSocket connection over a blocking stream.
///
/// [`read`](Self::read) returns the next message (pings are answered and closes echoed
/// as they are read); [`send`](Self::send) writes one message and flushes. Output the
/// connection produces on its own (pongs, the close echo) is written during `read`.
pub struct WebSocket<S> {
    stream: S,
    conn: Connection,
    /// Encoded output not yet written (kept across a write timeout).
    out: Vec<u8>,
    out_pos: usize,
    subprotocol: Option<String>,
    deflate: bool,
    read_buffer_size: usize,
    read_size: usize,
    eof: bool,
    state: State,
    peer_close: Option<CloseFrame>,
}

impl<S> fmt::Debug for WebSocket<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebSocket")
            .field("role", &self.conn.role())
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl<S: Read + Write> WebSocket<S> {
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
            config,
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
        let read_buffer_size = conn.config().read_buffer_size.max(256);
        WebSocket {
            stream,
            conn,
            out: Vec::new(),
            out_pos: 0,
            subprotocol,
            deflate: false,
            read_buffer_size,
            read_size: read_buffer_size,
            eof: false,
            state: State::Open,
            peer_close: None,
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

    /// Whether permessage-deflate (RFC 7692) was agreed in the handshake.
    pub fn is_compressed(&self) -> bool {
        self.deflate
    }

    /// The peer's close frame, once received (code 1005 when it had none).
    pub fn close_frame(&self) -> Option<&CloseFrame> {
        self.peer_close.as_ref()
    }

    /// The underlying stream (to change its timeouts, for example).
    pub fn get_ref(&self) -> &S {
        &self.stream
    }

    /// The underlying stream, mutably. Reading or writing it corrupts the connection.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.stream
    }

    /// The sans-IO connection underneath, for inspection.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// The stream back (after a close, to shut it down).
    pub fn into_inner(self) -> S {
        self.stream
    }

    /// Writes all pending output and flushes the stream. After a write timeout the
    /// unwritten rest is kept and written by the next call.
    pub fn flush(&mut self) -> Result<(), Error> {
        if self.out_pos == self.out.len() {
            self.out.clear();
            self.out_pos = 0;
        }
        self.conn.write_pending(&mut self.out);
        while self.out_pos < self.out.len() {
            match self.stream.write(&self.out[self.out_pos..]) {
                Ok(0) => return Err(Error::Io(io::ErrorKind::WriteZero.into())),
                Ok(n) => self.out_pos += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::Io(e)),
            }
        }
        self.out.clear();
        self.out_pos = 0;
        if self.out.capacity() > MAX_READ_CHUNK {
            self.out = Vec::new();
        }
        self.stream.flush()?;
        Ok(())
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
        let r = match msg {
            Message::Text(t) => self.conn.send_bytes(MessageKind::Text, t.into_bytes()),
            Message::Binary(b) => self.conn.send_bytes(MessageKind::Binary, b),
            Message::Ping(p) => self.conn.ping(&p),
            Message::Pong(p) => self.conn.pong(&p),
            Message::Close(c) => {
                let (code, reason) = c.map_or((CloseCode::NORMAL, Utf8Bytes::default()), |c| {
                    (c.code, c.reason)
                });
                self.conn.close(Instant::now(), code, reason.as_str())
            }
        };
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
    /// reads (discarding data) until the peer's close arrives. With a socket read timeout
    /// shorter than the close timeout, a silent peer ends the wait with
    /// [`Error::Timeout`] when the close timeout passes. A client then waits for the
    /// server to close TCP (RFC 6455 7.1.1); a server returns and the stream is closed
    /// when dropped.
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
                Err(e) if matches!(&e, Error::Io(io) if io.kind() == io::ErrorKind::UnexpectedEof) =>
                {
                    return Ok(());
                }
                // A socket timeout: keep waiting while the close timer (run at each
                // timed-out read) has not failed the connection.
                Err(e) if e.is_would_block() && self.conn.config().close_timeout.is_some() => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads the next message: text, binary, a ping or pong (already answered), or the
    /// peer's close (already echoed). `Ok(None)` once the connection has closed cleanly
    /// (and after an error has been returned).
    ///
    /// # Errors
    ///
    /// A socket timeout ([`Error::is_would_block`]) loses nothing: call again.
    /// [`Error::Protocol`] or `Error::Deflate` when the peer broke the protocol (our close
    /// with its code was sent), [`Error::Timeout`] when a connection timer ran out,
    /// [`Error::Io`] of kind `UnexpectedEof` when the peer closed TCP without a close
    /// frame. These end the connection.
    pub fn read(&mut self) -> Result<Option<Message>, Error> {
        loop {
            if self.state == State::Done {
                return Ok(None);
            }
            match self.conn.poll_message() {
                Some(Ok(msg)) => {
                    if let Message::Close(c) = &msg {
                        self.peer_close = Some(match c {
                            Some(frame) => frame.clone(),
                            None => CloseFrame::new(CloseCode(1005), ""),
                        });
                    }
                    if self.conn.has_pending_output() {
                        self.flush()?;
                    }
                    if self.conn.is_closed() {
                        self.finish();
                    }
                    return Ok(Some(msg));
                }
                Some(Err(e)) => {
                    // The close frame for the error is queued: send it, then stop.
                    let e = Error::from(e);
                    let _ = self.flush();
                    trace_end(self.conn.role(), Some(&e), None);
                    self.state = State::Done;
                    return Err(e);
                }
                None => {}
            }
            if self.conn.is_closed() {
                self.flush()?;
                self.finish();
                continue;
            }
            if self.eof {
                // RFC 6455 7.1.5: TCP closed without a close frame (status 1006).
                self.state = State::Done;
                let e = Error::Io(io::ErrorKind::UnexpectedEof.into());
                trace_end(self.conn.role(), Some(&e), None);
                return Err(e);
            }
            self.run_timers();
            if self.conn.has_pending_output() {
                self.flush()?;
            }
            if let Err(e) = self.fill() {
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) {
                    // A socket timeout: due timers may now fail the connection (reported
                    // by the next loop) or queue a keepalive ping.
                    self.run_timers();
                    if self.conn.is_closed() {
                        continue;
                    }
                    if self.conn.has_pending_output() {
                        self.flush()?;
                    }
                }
                return Err(Error::Io(e));
            }
        }
    }

    fn run_timers(&mut self) {
        let now = Instant::now();
        if self.conn.poll_timeout().is_some_and(|t| t <= now) {
            self.conn.handle_timeout(now);
        }
    }

    /// The connection ended cleanly: a client waits (within the socket's read timeout)
    /// for the server to close TCP first (RFC 6455 7.1.1).
    fn finish(&mut self) {
        if self.state == State::Done {
            return;
        }
        self.state = State::Done;
        trace_end(self.conn.role(), None, self.peer_close.as_ref());
        if self.conn.role() == Role::Client && !self.eof {
            let mut buf = [0u8; 512];
            for _ in 0..64 {
                match self.stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
        }
        *self.conn.recv_buffer() = BytesMut::new();
    }

    /// Reads once into the connection's receive buffer.
    fn fill(&mut self) -> io::Result<()> {
        // Room for the rest of a large frame is reserved in one step; the read fills at
        // most `read_size` of it, so the zeroing below never covers more than one read.
        let buf = self.conn.reserve_recv(self.read_size);
        let start = buf.len();
        let want = self.read_size.min(buf.capacity() - start).max(1);
        buf.resize(start + want, 0);
        let r = loop {
            match self.stream.read(&mut buf[start..]) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => break r,
            }
        };
        match r {
            Ok(n) => {
                buf.truncate(start + n);
                if n == 0 {
                    self.eof = true;
                    if buf.is_empty() {
                        *buf = BytesMut::new();
                    }
                } else {
                    self.conn.handle_received(Instant::now());
                    self.read_size = if n == want {
                        (self.read_size * 2).min(MAX_READ_CHUNK)
                    } else {
                        self.read_buffer_size
                    };
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
