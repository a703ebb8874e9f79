//! [`WebSocket`]: a connection over any `AsyncRead + AsyncWrite + Unpin`, and its halves.

use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker, ready};

use bytes::Bytes;
use futures_core::Stream;
use futures_sink::Sink;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

use crate::codec::{CloseCode, MessageKind, Role};
use crate::connection::{Batch, Config, Connection, OwnedEvent, PreparedMessage, Raw};
use crate::error::{Error, TrySendError};
use crate::handshake::Negotiated;
use crate::message::{CloseFrame, Compression, Message, MessageRef, Utf8Bytes};

use super::engine::{Engine, Io, PairIo, Polled, Put, WriteOnly};

/// `recv` and the [`Stream`] impl of [`WebSocket`] and [`ReadHalf`], written once over each
/// type's `poll_recv` (and `$next`, the `Stream`'s poll).
macro_rules! receiving {
    ($ty:ident, $next:ident) => {
        impl<S: AsyncRead + AsyncWrite + Unpin> $ty<S> {
            /// Receives the next message: text, binary, a ping or pong (already answered),
            /// or the peer's close (already echoed). `Ok(None)` once the connection has
            /// closed, and on every call after that. Cancel-safe: a message is never lost to
            /// a dropped future.
            ///
            /// Receiving also writes: pongs and the close echo go out as the frames arrive,
            /// and messages queued with `feed` or `try_send` are written when the receive
            /// would otherwise wait. The peer's close is handed over only after its answer
            /// (and what was queued before it) was written and flushed as far as the socket
            /// takes it without waiting, so a program that stops at the `Close` and drops
            /// the socket has sent the answer; a socket that was full then leaves the rest
            /// queued, and the socket (whole or split) tries once more, without waiting,
            /// when it is dropped. The keepalive, idle and close timers run here too, so
            /// keep a receive pending on an open connection.
            ///
            /// # Errors
            ///
            /// [`Error::Protocol`] or `Error::Deflate` when the peer broke the protocol (our
            /// close with its code was sent), [`Error::Timeout`] when a timer of
            /// [`Config`](super::Config) ran out, [`Error::Io`] when the socket failed (the
            /// peer vanishing without a close is `UnexpectedEof`). An error is returned
            /// once; later calls return `Ok(None)`.
            pub fn recv(&mut self) -> impl Future<Output = Result<Option<Message>, Error>> + '_ {
                poll_fn(move |cx| self.poll_recv(cx))
            }
        }

        impl<S: AsyncRead + AsyncWrite + Unpin> Stream for $ty<S> {
            type Item = Result<Message, Error>;

            fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
                self.get_mut().$next(cx).map(Result::transpose)
            }
        }
    };
}

/// The send methods [`WebSocket`] and [`WriteHalf`] share, written once over what each
/// type provides: `with` (the engine and the socket), `close_queued`, `try_send_with`
/// and `begin_message_with`. `$ty` names the type in the example, `$writer` is its
/// fragmented-message writer, and `try_send(&mut)` or `try_send(&)` is the receiver of
/// `try_send`.
macro_rules! send_methods {
    ($ty:literal, $writer:ident, try_send(&$($try:tt)?)) => {
        /// Queues `msg` without waiting or doing IO; [`TrySendError::QueueFull`] past the
        /// high-water mark.
        pub fn try_send(&$($try)? self, msg: Message) -> Result<(), TrySendError> {
            self.try_send_with(msg, Compression::Auto)
        }

        /// Waits for room in the send queue, then queues `msg` (no flush).
        pub fn feed(&mut self, msg: Message) -> impl Future<Output = Result<(), Error>> + '_ {
            self.feed_with(msg, Compression::Auto)
        }

        /// [`feed`](Self::feed) with the choice of whether this message is compressed (see
        /// [`send_with`](Self::send_with)).
        pub async fn feed_with(
            &mut self,
            msg: Message,
            compression: Compression,
        ) -> Result<(), Error> {
            self.put(msg, compression, Put::Feed).await
        }

        /// Sends `msg`: waits for room in the send queue, queues it and writes the queue
        /// out. A `Close` message starts the closing handshake (then receive until `None`,
        /// or use `close`).
        ///
        /// # Errors
        ///
        /// [`Error::Closed`] after the close handshake started or the connection failed;
        /// [`Error::Send`] for a control payload over 125 bytes, a close code that may not
        /// be sent, or a message while [`begin_message`](Self::begin_message) is open;
        /// [`Error::Io`] when the socket failed.
        ///
        /// The message leaves on the first poll when the socket takes it (the usual case:
        /// it is written straight from `msg`, header and payload in one vectored write,
        /// when nothing else is queued); what the socket does not take is queued then, and
        /// the future finishes writing the queue. A future dropped after its first poll
        /// leaves the rest in the queue, written by the next receive or flush.
        pub fn send(&mut self, msg: Message) -> impl Future<Output = Result<(), Error>> + '_ {
            // Not an `async fn` around `send_with`'s future, which would hold a second
            // copy of `msg`: this future lives inside every handler's.
            self.send_with(msg, Compression::Auto)
        }

        /// [`send`](Self::send) with the choice, for this message, of whether it is
        /// compressed on a connection that agreed permessage-deflate:
        /// [`Compression::Never`] sends it as it is (RSV1 clear), for payloads that are
        /// already compressed or small and urgent; [`Compression::Always`] compresses it
        /// whatever its size or contents; [`Compression::Auto`] is `send`. Control
        /// messages are never compressed. The next compressed message still inflates at
        /// the peer, with or without context takeover. Fails like `send`.
        ///
        /// ```no_run
        #[doc = concat!("# async fn run(mut ws: rapidws::tokio::", $ty, "<tokio::net::TcpStream>, png: bytes::Bytes) -> Result<(), rapidws::tokio::Error> {")]
        /// use rapidws::tokio::{Compression, Message};
        /// ws.send_with(Message::Binary(png), Compression::Never).await?;
        /// # Ok(())
        /// # }
        /// ```
        pub fn send_with(
            &mut self,
            msg: Message,
            compression: Compression,
        ) -> impl Future<Output = Result<(), Error>> + '_ {
            self.put(msg, compression, Put::Send)
        }

        /// `send`, `feed` and the handler's reply: one poll function holds the whole of it
        /// (room, the frame, the flush), with no nested futures and one copy of `msg`.
        fn put(
            &mut self,
            msg: Message,
            compression: Compression,
            put: Put,
        ) -> impl Future<Output = Result<(), Error>> + '_ {
            let mut msg = Some(msg);
            poll_fn(move |cx| {
                let closing = matches!(msg, Some(Message::Close(_)));
                let r = self.with(cx, |e, io, cx| {
                    e.poll_message(cx, io, &mut msg, compression, put)
                });
                if closing && msg.is_none() {
                    self.close_queued();
                }
                r
            })
        }

        /// Sends a text message.
        pub async fn send_text(&mut self, text: impl Into<Utf8Bytes>) -> Result<(), Error> {
            self.send(Message::Text(text.into())).await
        }

        /// Sends a binary message.
        pub async fn send_binary(&mut self, data: impl Into<Bytes>) -> Result<(), Error> {
            self.send(Message::Binary(data.into())).await
        }

        /// Sends a ping (payload at most 125 bytes, else [`Error::Send`]). The pong arrives
        /// as a [`Message::Pong`] from the receiving side's `recv`. The keepalive in
        /// [`Config`](super::Config) pings on its own.
        pub async fn ping(&mut self, payload: impl Into<Bytes>) -> Result<(), Error> {
            self.send(Message::Ping(payload.into())).await
        }

        #[doc = concat!(
            "Starts a message of unknown length, sent as fragments: write chunks with [`",
            stringify!($writer),
            "::send_chunk`] (or through its [`AsyncWrite`] impl), end with [`",
            stringify!($writer),
            "::finish`]. Control frames (pongs) may go out between fragments."
        )]
        pub fn begin_message(&mut self, kind: MessageKind) -> Result<$writer<'_, S>, Error> {
            self.begin_message_with(kind, Compression::Auto)
        }

        /// Sends everything `reader` yields as one fragmented message, in chunks of up to
        /// `chunk_size` bytes; returns the payload length sent. Memory stays at one chunk.
        pub async fn send_from<R: AsyncRead + Unpin>(
            &mut self,
            kind: MessageKind,
            reader: R,
            chunk_size: usize,
        ) -> Result<u64, Error> {
            self.send_from_with(kind, reader, chunk_size, Compression::Auto)
                .await
        }

        /// [`send_from`](Self::send_from) with the choice of whether the message is
        /// compressed (see [`begin_message_with`](Self::begin_message_with)).
        pub async fn send_from_with<R: AsyncRead + Unpin>(
            &mut self,
            kind: MessageKind,
            reader: R,
            chunk_size: usize,
            compression: Compression,
        ) -> Result<u64, Error> {
            let w = self.begin_message_with(kind, compression)?;
            copy_fragments(w, reader, chunk_size).await
        }
    };
}

mod batch;
#[macro_use]
mod fragments;
mod link;
mod recv;
mod sink;
mod split;
#[cfg(test)]
mod tests;
mod view;
mod wakers;

use fragments::{FragmentWriter, copy_fragments};
pub use fragments::{IncomingMessage, MessageChunk, MessageWriter};
use link::{Link, taken};
use sink::prepared_as_message;
pub use split::{HalfMessageWriter, ReadHalf, ReuniteError, WriteHalf};
use split::{Inner, Lent, Shared};
pub(crate) use view::read_chunk;
use wakers::{ReadWaker, ReadsWaking, Task, WakerPair};

/// A WebSocket connection over `S`, after the opening handshake, in either role.
///
/// # Receiving
///
/// [`recv`](Self::recv) (or the [`Stream`] impl) yields whole messages as [`Message`]s. A
/// message that arrived as one frame is handed over without a copy: its payload is split
/// off the receive buffer, and shares that buffer's allocation (a few KiB) until it is
/// dropped. To keep many small messages for a long time, keep copies
/// (`Bytes::copy_from_slice`) so that each holds only its own bytes. Pings are answered and the peer's close is echoed while you
/// receive, whether or not you ever send. After the close handshake `recv` returns
/// `Ok(None)`; after an error it returns the error once and `Ok(None)` from then on.
///
/// Receiving is cancel-safe: dropping a `recv` future (for example in `tokio::select!`)
/// loses nothing; the next call picks up where it stopped.
///
/// [`recv_ref`](Self::recv_ref) lends each message instead ([`MessageRef`]), borrowed from
/// the receive buffer until the next call: no allocation per message.
///
/// For messages larger than memory, configure [`Delivery::Chunks`](crate::connection::Delivery)
/// and take each message a read at a time with [`recv_chunk`](Self::recv_chunk) (on the
/// [`ReadHalf`] while the [`WriteHalf`] passes the chunks on), or read it as an
/// [`AsyncRead`] with [`recv_stream`](Self::recv_stream).
///
/// # Sending and flushing
///
/// Frames go into a bounded send queue and leave in vectored writes, many frames per
/// write.
/// - [`send`](Self::send) waits for room, queues, and writes the queue out (flushes):
///   when it returns, the message has been handed to the socket.
/// - [`feed`](Self::feed) waits for room and queues without flushing, to batch many
///   messages into few writes; finish with [`flush`](Self::flush).
/// - [`try_send`](Self::try_send) never waits and never does IO: it queues, or returns
///   [`TrySendError::QueueFull`] when the queue is past its high-water mark
///   ([`Config::send_queue_high_water`]).
/// - Queued bytes are also written whenever a receive call finds no message ready and
///   is about to wait for the socket. So an echo loop that answers with `feed` writes
///   the answers to a burst of messages in one vectored write, just before it waits for
///   the next burst.
///
/// `send` does not defer its write even when more messages are already buffered: between
/// a `send` and the next `recv` the application may await anything (a database, a
/// timer, another socket), and a deferred reply would wait with it. A loop whose next
/// call is always a receive can use `feed` for the same batching; the
/// [`handler`](crate::handler) API does that for every callback (one write for the
/// replies to all the messages of one read).
///
/// # Closing
///
/// [`close`](Self::close) sends a close frame and waits (within the close timeout) for the
/// peer's; then the TCP connection is shut down. When the peer closes first, `recv`
/// returns its [`Message::Close`], echoes it, and then `Ok(None)`. A socket dropped with
/// its close echo still queued (the peer was not reading when the `Close` was handed
/// over) writes the queue once more as it goes, without waiting.
pub struct WebSocket<S> {
    /// The stream and the engine: `None` only once [`into_inner`](Self::into_inner) or
    /// [`into_split`](Self::into_split) took them, which consume the socket (its `Drop`
    /// then finds nothing to do).
    link: Option<Link<S>>,
    /// [`Link::write_on_drop`] for `S`, for the `Drop` of the socket (which cannot name
    /// the bounds that writing needs), as the halves keep theirs.
    write_on_drop: fn(&mut Link<S>),
    subprotocol: Option<String>,
    /// Made when the socket is first polled as a [`Stream`] or a [`Sink`]: from then on a
    /// receiving task and a sending task may poll it in turn (`futures`'
    /// `StreamExt::split` puts it behind a lock shared by the two), and the waits of its
    /// `Stream` and `Sink` polls register a waker that wakes both for the writes and the
    /// timer, and one that wakes the reading task for the reads (see [`WakerPair`]).
    /// The inherent methods need `&mut self` across their awaits, so one task at a time
    /// polls them: they keep their own waker, at no cost.
    tasks: Option<Box<TwoTasks>>,
}

/// The wakers of the two tasks of a [`WebSocket`] polled as a `Stream` and a `Sink`.
struct TwoTasks {
    wakers: Arc<WakerPair>,
    /// A waker for `wakers`, made once.
    combined: Waker,
    /// A [`ReadWaker`] of `wakers`, made once: the socket's reads register it, so that
    /// input wakes the task that reads, not a sending task waiting for room.
    read_waker: Waker,
    /// The receiving task's waker as it is in `wakers` (only this socket's polls change
    /// it): a receive that polls with the same one again takes no lock.
    receiving: Option<Waker>,
}

impl<S> std::fmt::Debug for WebSocket<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebSocket")
            .field("role", &self.engine().conn.role())
            .field("queued", &self.engine().queued())
            .finish_non_exhaustive()
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> WebSocket<S> {
    /// Wraps a stream on which the opening handshake has already happened. `leftover`
    /// are bytes read after the handshake head (the first frames), if any.
    ///
    /// Use this with your own handshake or transport (TLS, a Unix socket); the
    /// [`accept`](super::accept) and [`connect`](super::connect) functions call it.
    pub fn from_raw(io: S, role: Role, config: &Config, leftover: &[u8]) -> Self {
        let conn = Connection::new(role, config.clone(), super::engine::now());
        Self::from_connection(io, conn, leftover, None)
    }

    pub(crate) fn from_connection(
        io: S,
        conn: Connection,
        leftover: &[u8],
        subprotocol: Option<String>,
    ) -> Self {
        Self::from_engine(io, Engine::new(conn, leftover), subprotocol)
    }

    fn from_engine(io: S, engine: Engine, subprotocol: Option<String>) -> Self {
        WebSocket {
            link: Some(Link { io, engine }),
            write_on_drop: Link::write_on_drop,
            subprotocol,
            tasks: None,
        }
    }

    /// The subprotocol agreed in the handshake, if any.
    pub fn subprotocol(&self) -> Option<&str> {
        self.subprotocol.as_deref()
    }

    /// Whether permessage-deflate (RFC 7692) was agreed in the handshake, in either role.
    pub fn is_deflate(&self) -> bool {
        self.engine().conn.is_deflate()
    }

    /// The role of this end.
    pub fn role(&self) -> Role {
        self.engine().conn.role()
    }

    /// The peer's close frame, once received (code 1005 when it carried none).
    pub fn close_frame(&self) -> Option<&CloseFrame> {
        self.engine().conn.peer_close()
    }

    /// The underlying stream.
    pub fn get_ref(&self) -> &S {
        match &self.link {
            Some(link) => &link.io,
            None => taken(),
        }
    }

    /// The underlying stream, mutably: for its own settings (a socket option, the TLS
    /// session). Do not read from it or write to it: those bytes belong to the
    /// connection's frames.
    pub fn get_mut(&mut self) -> &mut S {
        &mut Link::of(&mut self.link).io
    }

    /// The underlying stream, ending the WebSocket: what was received and not yet
    /// delivered, and what was queued and not yet written, are dropped. Close first
    /// ([`close`](Self::close)) to end the connection as the protocol asks.
    pub fn into_inner(mut self) -> S {
        match self.link.take() {
            Some(link) => link.io,
            None => taken(),
        }
    }

    /// Bytes queued and not yet written.
    pub fn queued_bytes(&self) -> usize {
        self.engine().queued()
    }

    /// The core connection, for what this layer does not expose.
    pub fn connection(&self) -> &Connection {
        &self.engine().conn
    }

    fn with_room(&mut self, cx: &mut Context<'_>, extra: usize) -> Poll<Result<(), Error>> {
        let (engine, io) = self.parts();
        engine.poll_room(cx, io, extra)
    }

    /// Polls the queue empty and flushes the stream.
    pub fn poll_flush_queue(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        let (engine, io) = self.parts();
        engine.poll_flush(cx, io)
    }

    /// The poll behind [`send`](Self::send), for layers that hold the message themselves
    /// (a `Sink` whose `start_send` keeps it for the flush): takes the message out of
    /// `msg` once the queue has room (writing it straight from the message, in one write,
    /// when nothing else is queued), then writes the queue out and flushes. Poll until
    /// ready; `msg` is `None` once taken. Fails like `send`.
    pub fn poll_send(
        &mut self,
        cx: &mut Context<'_>,
        msg: &mut Option<Message>,
    ) -> Poll<Result<(), Error>> {
        let (engine, io) = self.parts();
        engine.poll_message(cx, io, msg, Compression::Auto, Put::Send)
    }

    /// The poll behind [`feed`](Self::feed): takes the message out of `msg` and queues it
    /// once the queue has room (no flush). Fails like `feed`.
    pub fn poll_feed(
        &mut self,
        cx: &mut Context<'_>,
        msg: &mut Option<Message>,
    ) -> Poll<Result<(), Error>> {
        let (engine, io) = self.parts();
        engine.poll_message(cx, io, msg, Compression::Auto, Put::Feed)
    }

    send_methods!("WebSocket", MessageWriter, try_send(&mut));

    /// [`try_send`](Self::try_send) with the choice of whether this message is compressed
    /// (see [`send_with`](Self::send_with)).
    pub fn try_send_with(
        &mut self,
        msg: Message,
        compression: Compression,
    ) -> Result<(), TrySendError> {
        if !self.engine().has_room(msg.len()) {
            return Err(TrySendError::QueueFull(msg));
        }
        self.engine_mut()
            .queue(msg, compression)
            .map_err(TrySendError::Failed)
    }

    /// For the handler API, a callback's only reply when nothing more is buffered to
    /// receive: written at once (see [`Put::Alone`]).
    pub(crate) fn reply_alone(
        &mut self,
        msg: Message,
        compression: Compression,
    ) -> impl Future<Output = Result<(), Error>> + '_ {
        self.put(msg, compression, Put::Alone)
    }

    /// For [`recv_batch`](Self::recv_batch): the next event as positions in the
    /// connection's buffers, to lend with the run after it ([`Connection::batch_of`]) or
    /// take. The handler API's borrowed callbacks receive with
    /// [`recv_raw_after`](Self::recv_raw_after).
    pub(crate) fn recv_raw(&mut self) -> impl Future<Output = Result<Option<Raw>, Error>> + '_ {
        poll_fn(move |cx| {
            let (engine, io) = self.receiving_parts();
            engine.poll_recv_with(cx, io, true, Connection::lend_next)
        })
    }

    /// For the handler API's borrowed callback: [`recv_raw`](Self::recv_raw) after its
    /// only reply (if `lent` holds one), the message lent at `lent` itself, was written
    /// straight from the receive buffer ([`Engine::poll_write_lent`], on the first poll,
    /// before anything is read): one future for the reply and the next receive. An error
    /// of that write is returned as the receive's; `Closed` (nothing written) is not, the
    /// receive reporting how the connection ended.
    pub(crate) fn recv_raw_after(
        &mut self,
        mut lent: Option<(MessageKind, std::ops::Range<usize>)>,
    ) -> impl Future<Output = Result<Option<Raw>, Error>> + '_ {
        poll_fn(move |cx| {
            if let Some((kind, at)) = lent.take() {
                let (engine, io) = self.parts();
                match engine.poll_write_lent(cx, io, kind, at) {
                    Ok(()) | Err(Error::Closed) => {}
                    Err(e) => return Poll::Ready(Err(e)),
                }
            }
            let (engine, io) = self.receiving_parts();
            engine.poll_recv_with(cx, io, true, Connection::lend_next)
        })
    }

    /// For the handler API's borrowed callback: its only reply, the message lent at `at`
    /// itself, written straight from the receive buffer (see
    /// [`Engine::poll_write_lent`]).
    pub(crate) fn reply_lent(
        &mut self,
        kind: MessageKind,
        at: std::ops::Range<usize>,
    ) -> impl Future<Output = Result<(), Error>> + '_ {
        let mut at = Some(at);
        poll_fn(move |cx| {
            Poll::Ready(match at.take() {
                Some(at) => {
                    let (engine, io) = self.parts();
                    engine.poll_write_lent(cx, io, kind, at)
                }
                None => Ok(()),
            })
        })
    }

    /// For the handler API: the event `raw` (from [`recv_raw`](Self::recv_raw)), taken.
    pub(crate) fn take_raw(&mut self, raw: Raw) -> Message {
        self.engine_mut().conn.take_message(raw)
    }

    /// For the handler API: the connection, for a callback to queue its replies on, and
    /// the subprotocol.
    pub(crate) fn handler_parts(&mut self) -> (&mut Connection, Option<&str>) {
        let Self {
            link, subprotocol, ..
        } = self;
        (&mut Link::of(link).engine.conn, subprotocol.as_deref())
    }

    /// For the handler API: whether the send queue is under its high-water mark.
    pub(crate) fn has_room(&self) -> bool {
        self.engine().has_room(0)
    }

    /// For the handler API: waits until the send queue is back under its high-water mark
    /// (a callback may queue past it).
    pub(crate) fn room(&mut self) -> impl Future<Output = Result<(), Error>> + '_ {
        poll_fn(move |cx| self.with(cx, |e, io, cx| e.poll_room(cx, io, 0)))
    }

    /// Runs the sending poll `f` with the engine, the socket and `cx`, as [`WriteHalf`]
    /// does under its lock.
    #[inline(always)]
    fn with<T>(
        &mut self,
        cx: &mut Context<'_>,
        f: impl FnOnce(&mut Engine, &mut dyn Io, &mut Context<'_>) -> Poll<T>,
    ) -> Poll<T> {
        let (engine, io) = self.parts();
        f(engine, io, cx)
    }

    /// Nothing to do when a close has been queued: this connection's own receive arms the
    /// close timeout.
    #[inline(always)]
    fn close_queued(&self) {}

    /// Writes everything queued and flushes the stream.
    pub async fn flush(&mut self) -> Result<(), Error> {
        poll_fn(|cx| self.poll_flush_queue(cx)).await
    }

    /// [`begin_message`](Self::begin_message) with the choice of whether the message is
    /// compressed: [`Compression::Never`] sends its fragments as they are (RSV1 clear);
    /// `Auto` and `Always` compress them when permessage-deflate was agreed (see
    /// [`Connection::begin_message_with`]).
    pub fn begin_message_with(
        &mut self,
        kind: MessageKind,
        compression: Compression,
    ) -> Result<MessageWriter<'_, S>, Error> {
        self.engine_mut()
            .send_with(|c| c.begin_message_with(kind, compression))?;
        Ok(MessageWriter {
            ws: self,
            finished: false,
        })
    }

    /// Closes the connection: sends a close frame with `code` and `reason` (at most 123
    /// bytes), then receives (discarding data messages) until the peer's close arrives and
    /// the TCP connection is shut down, within the close timeout. Returns
    /// `Err(Error::Timeout(Timeout::Close))` when the peer did not answer in time.
    pub async fn close(&mut self, code: impl Into<CloseCode>, reason: &str) -> Result<(), Error> {
        let code = code.into();
        match self
            .engine_mut()
            .send_with(|c| c.close(super::engine::now(), code, reason))
        {
            Ok(()) | Err(Error::Closed) => {}
            Err(e) => return Err(e),
        }
        // The receive loop below writes the close frame too; this flush only gets it out
        // early (and through buffering transports). A peer that never reads does not hold
        // it forever: the close timeout runs while it waits, as in every wait.
        let _ = self.flush().await;
        loop {
            match self.recv().await {
                Ok(Some(_)) => {}
                Ok(None) => return Ok(()),
                // Our close went out; the peer closing the transport instead of answering
                // ends the handshake too.
                Err(e) if e.is_unexpected_eof() => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    }

    /// Splits into a receiving half and a sending half, usable from different tasks:
    /// `(read, write)`, in the order of tokio's `TcpStream::into_split`.
    ///
    /// The name is not `split` on purpose: `futures::StreamExt::split` (this type is a
    /// `Stream` and a `Sink`) returns `(sink, stream)`, the other order, with halves that
    /// share one lock; code written for it keeps working here and means what it meant.
    /// These halves are the cheaper ones: they share the connection behind a mutex that
    /// is held only inside a poll (never across an await), and a waker pair so neither
    /// half loses the socket's write wake-up to the other. The receiving half keeps
    /// answering pings while the sending half is idle, and drives the timers: keep
    /// polling it (or drop it: the sending half then reads in its waits, see
    /// [`ReadHalf`]).
    pub fn into_split(mut self) -> (ReadHalf<S>, WriteHalf<S>) {
        let Some(Link { io, engine }) = self.link.take() else {
            taken()
        };
        let (rd, wr) = tokio::io::split(io);
        let wakers = Arc::new(WakerPair::default());
        wakers.set_receiving(true);
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner {
                engine,
                rd,
                wr,
                reader: true,
            }),
            write_on_drop: Inner::write_on_drop,
            combined: Waker::from(wakers.clone()),
            read_waker: Waker::from(Arc::new(ReadWaker(wakers.clone()))),
            wakers,
            subprotocol: self.subprotocol.take(),
        });
        (
            ReadHalf {
                shared: shared.clone(),
                lent: Lent::default(),
                batch: Default::default(),
            },
            WriteHalf { shared },
        )
    }
}

/// A connection over `io` after a handshake that agreed `negotiated` (see
/// [`from_handshake`](super::from_handshake)), with settings that may be shared with other connections.
pub(crate) fn open_with<S>(
    io: S,
    role: Role,
    config: Arc<Config>,
    negotiated: Negotiated,
    leftover: &[u8],
) -> WebSocket<S>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let conn = negotiated.open(role, config, super::engine::now());
    WebSocket::from_connection(io, conn, leftover, negotiated.subprotocol)
}
