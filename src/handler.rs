//! An event-handler API on the tokio layer, in the shape gws and ews users know: one
//! [`Handler`] value per connection (its fields are the per-connection state) whose
//! `on_*` methods are called as things happen, and a [`Socket`] to send from inside them.
//!
//! ```
//! use rapidws::handler::{Handler, Socket, dial_handler, serve_handler};
//! use rapidws::tokio::{ClientConfig, Message, ServerConfig};
//!
//! /// The server side: echoes every message. Its fields are per-connection state.
//! struct Echo {
//!     count: u64,
//! }
//!
//! impl Handler for Echo {
//!     fn on_message(&mut self, socket: &mut Socket, msg: Message) {
//!         self.count += 1;
//!         socket.send(msg);
//!     }
//! }
//!
//! /// The client side: says hello, and closes once the echo is back.
//! struct Hello {
//!     echo: Option<Message>,
//! }
//!
//! impl Handler for Hello {
//!     fn on_open(&mut self, socket: &mut Socket) {
//!         socket.send_text("hello");
//!     }
//!     fn on_message(&mut self, socket: &mut Socket, msg: Message) {
//!         self.echo = Some(msg);
//!         socket.close(1000, "done");
//!     }
//! }
//!
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! #   std::thread::spawn(|| {
//! #       std::thread::sleep(std::time::Duration::from_secs(30));
//! #       eprintln!("doctest timed out");
//! #       std::process::exit(1);
//! #   });
//!     let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//!     let url = format!("ws://{}/", listener.local_addr()?);
//!     tokio::spawn(serve_handler(listener, ServerConfig::default(), |_peer| Echo { count: 0 }));
//!
//!     let mut client = Hello { echo: None };
//!     // Returns once the connection has closed: `Ok(())` after a clean close.
//!     dial_handler(&url, &ClientConfig::default(), &mut client).await?;
//!     assert_eq!(client.echo, Some(Message::text("hello")));
//!     Ok(())
//! }
//! ```
//!
//! Callbacks are plain functions: they run on the connection's task and must not block.
//! What they send goes onto the connection's send queue and leaves before the connection
//! next waits for the peer; the next message is received once that queue is under its
//! high-water mark.
//! A panic in a callback is caught: that connection is closed with 1011 (internal error),
//! after what the callback sent before it panicked, and no further callbacks run on it;
//! other connections are not affected.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;

use crate::codec::{MessageKind, OpCode};
use crate::connection::{Batch, Connection, Raw, Replies, SendError};
use crate::tokio::{
    self as ws, Acceptor, ClientConfig, CloseCode, CloseFrame, Compression, Message, MessageRef,
    ServerConfig, WebSocket,
};

/// Sends from inside a callback, onto the connection's own send queue. What a callback
/// sends leaves before the connection next waits for the peer: the replies to every
/// message that arrived in one read go out together in one vectored write, once no
/// further whole message is buffered (callbacks are synchronous, so nothing else runs in
/// between). A callback's only reply, when nothing more is buffered, is written as soon as
/// the callback returns, straight from the message. A [`close`](Self::close) writes
/// everything queued first.
///
/// A callback may queue past the send queue's high-water mark
/// ([`Config::send_queue_high_water`](crate::tokio::Config::send_queue_high_water)):
/// the next message is then received once the queue is back under it.
pub struct Socket<'a> {
    sink: Sink<'a>,
    subprotocol: Option<&'a str>,
    sent: &'a mut Sent,
}

/// Where a [`Socket`] sends: the connection, or (in [`Handler::on_message_ref`], while
/// the message borrows the connection's receive buffer) its send side alone.
enum Sink<'a> {
    Conn(&'a mut Connection),
    Replies(Replies<'a>),
}

impl fmt::Debug for Socket<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Socket")
            .field("subprotocol", &self.subprotocol)
            .finish_non_exhaustive()
    }
}

/// What a callback did with its [`Socket`], for the connection's task to finish.
#[derive(Debug, Default)]
struct Sent {
    /// The first message, held while it is the only one and nothing more is buffered to
    /// receive: it is then written straight from the message ([`WebSocket::reply_alone`]).
    first: Option<(Message, Compression)>,
    /// Messages went to the connection's queue (the first with them).
    queued: bool,
    /// A borrowed callback's only reply, the message it was lent: written straight from
    /// the receive buffer, where it lies at this range ([`WebSocket::reply_lent`]).
    lent: Option<(MessageKind, std::ops::Range<usize>)>,
    /// Why a send failed (the sends after it were dropped).
    error: Option<SendError>,
    close: Option<(CloseCode, String)>,
}

impl Sent {
    /// Whether what the callback did needs nothing from the connection's task: no reply
    /// held to be written alone, no error or close to act on, and room left in the send
    /// queue after what it queued (`has_room` is asked only then). The receive that
    /// follows writes the queue. Most callbacks end here; [`deliver`] finishes the rest.
    #[inline]
    fn settled(&mut self, has_room: impl FnOnce() -> bool) -> bool {
        let settled = self.first.is_none()
            && self.lent.is_none()
            && self.error.is_none()
            && self.close.is_none()
            && (!self.queued || has_room());
        if settled {
            self.queued = false;
        }
        settled
    }
}

impl Socket<'_> {
    /// Queues a message (text, binary, ping or pong; a `Close` starts the close handshake).
    pub fn send(&mut self, msg: Message) {
        self.send_with(msg, Compression::Auto);
    }

    /// Queues a message with the choice of whether it is compressed (see
    /// [`WebSocket::send_with`]): [`Compression::Never`] sends it as it is,
    /// [`Compression::Always`] compresses it however short, when permessage-deflate was
    /// agreed.
    pub fn send_with(&mut self, msg: Message, compression: Compression) {
        let conn = match &mut self.sink {
            Sink::Conn(conn) => conn,
            Sink::Replies(_) => return self.send_ref_with(msg.as_message_ref(), compression),
        };
        let sent = &mut *self.sent;
        // Held only while it may be written alone: with more input buffered it would be
        // queued for the write after the next messages anyway, so it is queued now.
        if !sent.queued && sent.first.is_none() && conn.buffered_input() == 0 {
            sent.first = Some((msg, compression));
            return;
        }
        if let Some((first, c)) = sent.first.take() {
            self.queue(first, c);
        }
        self.queue(msg, compression);
    }

    fn queue(&mut self, msg: Message, compression: Compression) {
        self.sent.queued = true;
        if self.sent.error.is_some() {
            return;
        }
        let r = match &mut self.sink {
            Sink::Conn(conn) => conn.send_message(msg, compression, ws::now),
            Sink::Replies(_) => return self.send_ref_with(msg.as_message_ref(), compression),
        };
        if let Err(e) = r {
            self.sent.error = Some(e);
        }
    }

    /// Queues a copy of a borrowed message (a message lent to
    /// [`Handler::on_message_ref`], or anything else): framed straight into the
    /// connection's output queue, the payload copied once (as [`Connection::send`] does),
    /// with no allocation for small messages. A `Close` starts the close handshake.
    #[inline]
    pub fn send_ref(&mut self, msg: MessageRef<'_>) {
        self.send_ref_with(msg, Compression::Auto);
    }

    /// [`send_ref`](Self::send_ref) with the choice of whether it is compressed (see
    /// [`send_with`](Self::send_with)).
    #[inline]
    pub fn send_ref_with(&mut self, msg: MessageRef<'_>, compression: Compression) {
        // The usual reply, a data message from a borrowed callback, inline.
        if let Sink::Replies(replies) = &mut self.sink
            && self.sent.error.is_none()
            && let Some((kind, payload)) = match msg {
                MessageRef::Text(t) => Some((MessageKind::Text, t.as_bytes())),
                MessageRef::Binary(b) => Some((MessageKind::Binary, b)),
                _ => None,
            }
        {
            self.sent.queued = true;
            if let Err(e) = replies.send(kind, payload, compression) {
                self.sent.error = Some(e);
            }
            return;
        }
        self.send_ref_other(msg, compression);
    }

    /// [`send_ref_with`](Self::send_ref_with) for all but a data message from a borrowed
    /// callback.
    #[inline(never)]
    fn send_ref_other(&mut self, msg: MessageRef<'_>, compression: Compression) {
        if self.sent.error.is_some() {
            return;
        }
        let r = match &mut self.sink {
            Sink::Conn(conn) => {
                if let Some((first, c)) = self.sent.first.take() {
                    self.sent.queued = true;
                    if let Err(e) = conn.send_message(first, c, ws::now) {
                        self.sent.error = Some(e);
                        return;
                    }
                }
                match msg {
                    MessageRef::Text(t) => {
                        conn.send_with(MessageKind::Text, t.as_bytes(), compression)
                    }
                    MessageRef::Binary(b) => conn.send_with(MessageKind::Binary, b, compression),
                    MessageRef::Ping(p) => conn.ping(p),
                    MessageRef::Pong(p) => conn.pong(p),
                    MessageRef::Close(c) => {
                        let (code, reason) = c.unwrap_or((CloseCode::NORMAL, ""));
                        conn.close(ws::now(), code, reason)
                    }
                }
            }
            Sink::Replies(replies) => match msg {
                MessageRef::Text(t) => replies.send(MessageKind::Text, t.as_bytes(), compression),
                MessageRef::Binary(b) => replies.send(MessageKind::Binary, b, compression),
                MessageRef::Ping(p) => replies.control(OpCode::Ping, p),
                MessageRef::Pong(p) => replies.control(OpCode::Pong, p),
                MessageRef::Close(c) => {
                    // The close handshake starts once the callback returns, after what it
                    // sent before; what it sends after is refused, as after a close.
                    let (code, reason) = c.unwrap_or((CloseCode::NORMAL, ""));
                    if self.sent.close.is_none() {
                        self.sent.close = Some((code, reason.to_owned()));
                    }
                    replies.refuse();
                    Ok(())
                }
            },
        };
        self.sent.queued = true;
        if let Err(e) = r {
            self.sent.error = Some(e);
        }
    }

    /// Queues a text message.
    pub fn send_text(&mut self, text: impl Into<crate::tokio::Utf8Bytes>) {
        self.send(Message::Text(text.into()));
    }

    /// Queues a binary message.
    pub fn send_binary(&mut self, data: impl Into<Bytes>) {
        self.send(Message::Binary(data.into()));
    }

    /// Closes the connection with `code` and `reason` once the queued messages are out;
    /// [`Handler::on_close`] follows when the peer has answered.
    /// `code` is a [`CloseCode`] or its number.
    pub fn close(&mut self, code: impl Into<CloseCode>, reason: impl Into<String>) {
        self.sent.close = Some((code.into(), reason.into()));
    }

    /// The subprotocol agreed in the handshake, if any.
    pub fn subprotocol(&self) -> Option<&str> {
        self.subprotocol
    }
}

/// The callbacks of one connection. Every method has a default that does nothing, so a
/// handler implements only what it needs. Pings are answered and closes echoed by the
/// library before the callbacks see them.
pub trait Handler: Send + 'static {
    /// The connection is open.
    fn on_open(&mut self, socket: &mut Socket<'_>) {
        let _ = socket;
    }
    /// A text or binary message arrived.
    fn on_message(&mut self, socket: &mut Socket<'_>, msg: Message) {
        let _ = (socket, msg);
    }
    /// Whether text and binary messages come to
    /// [`on_message_ref`](Self::on_message_ref), lent, instead of to
    /// [`on_message`](Self::on_message). `false` by default.
    const BORROWED: bool = false;
    /// With [`BORROWED`](Self::BORROWED) set, a text or binary message arrived, lent from
    /// the connection's receive buffer for the length of the call: no allocation, copy or
    /// reference count per message. The whole messages of one read are decoded together
    /// by the batch kernel and lent one call after another; replies sent with
    /// [`Socket::send_ref`] (or any send) are framed straight into the output queue, and
    /// leave together once nothing more is buffered. A callback after which the send queue
    /// is past its high-water mark ends the run: the rest of the read's messages are lent
    /// once the queue is back under it, as owned messages are received. The default makes
    /// a [`Message`] of it (a copy) for [`on_message`](Self::on_message).
    ///
    /// ```
    /// use rapidws::handler::{Handler, Socket};
    /// use rapidws::tokio::MessageRef;
    ///
    /// /// Echoes every message without taking ownership of it.
    /// struct Echo;
    ///
    /// impl Handler for Echo {
    ///     const BORROWED: bool = true;
    ///     fn on_message_ref(&mut self, socket: &mut Socket<'_>, msg: MessageRef<'_>) {
    ///         socket.send_ref(msg);
    ///     }
    /// }
    /// ```
    fn on_message_ref(&mut self, socket: &mut Socket<'_>, msg: MessageRef<'_>) {
        self.on_message(socket, msg.to_message());
    }
    /// A ping arrived (the pong is already on its way).
    fn on_ping(&mut self, socket: &mut Socket<'_>, payload: Bytes) {
        let _ = (socket, payload);
    }
    /// A pong arrived.
    fn on_pong(&mut self, socket: &mut Socket<'_>, payload: Bytes) {
        let _ = (socket, payload);
    }
    /// The connection ended: `frame` is the peer's close frame if one came, `error` why
    /// it failed (`None` for a clean close). Called once, last.
    fn on_close(&mut self, frame: Option<&CloseFrame>, error: Option<&ws::Error>) {
        let _ = (frame, error);
    }
}

/// How a handled connection ended badly.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The connection failed (or could not be opened); `on_close` saw the same error.
    Ws(ws::Error),
    /// A callback panicked; the connection was closed with 1011 and `on_close` was not
    /// called.
    Panicked,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Ws(e) => e.fmt(f),
            Error::Panicked => f.write_str("a handler callback panicked"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Ws(e) => Some(e),
            Error::Panicked => None,
        }
    }
}

impl From<ws::Error> for Error {
    fn from(e: ws::Error) -> Self {
        Error::Ws(e)
    }
}

/// Runs one callback with panics caught, with a [`Socket`] on the connection that notes
/// in `sent` what it sent.
fn call<S: AsyncRead + AsyncWrite + Unpin, H: Handler>(
    ws: &mut WebSocket<S>,
    sent: &mut Sent,
    handler: &mut H,
    f: impl FnOnce(&mut H, &mut Socket<'_>),
) -> Result<(), Error> {
    let (conn, subprotocol) = ws.handler_parts();
    let mut socket = Socket {
        sink: Sink::Conn(conn),
        subprotocol,
        sent,
    };
    catch_unwind(AssertUnwindSafe(|| f(handler, &mut socket))).map_err(|_| Error::Panicked)
}

/// Lends the data message `raw` and every whole message buffered after it to
/// [`Handler::on_message_ref`], one call after another, with panics caught; the batch
/// stops at the first callback that closes, whose send failed, or after which the send
/// queue is past its high-water mark (the messages not lent stay buffered: the next
/// is received once the queue is back under the mark, as with owned messages). Messages
/// that cannot be lent (chunk delivery's inflated scratch) go to it owned.
///
/// Inlined into [`run`], a message alone (an echo's) with it; a batch is lent out of line
/// ([`lend_batch`]).
#[inline(always)]
fn call_batch<S: AsyncRead + AsyncWrite + Unpin, H: Handler>(
    ws: &mut WebSocket<S>,
    sent: &mut Sent,
    handler: &mut H,
    raw: Raw,
) -> Result<(), Error> {
    let (conn, subprotocol) = ws.handler_parts();
    let lent = conn.batch_with_replies(
        &raw,
        (&mut *handler, &mut *sent),
        // A message alone: one call.
        |(handler, sent), msg, replies| {
            let mut socket = Socket {
                sink: Sink::Replies(replies),
                subprotocol,
                sent,
            };
            let r = catch_unwind(AssertUnwindSafe(|| {
                handler.on_message_ref(&mut socket, msg);
            }));
            if let Sink::Replies(replies) = &socket.sink {
                socket.sent.lent = replies.held();
            }
            r.map_err(|_| Error::Panicked)
        },
        |(handler, sent), batch, replies| lend_batch(handler, sent, subprotocol, batch, replies),
    );
    match lent {
        Some(r) => r,
        None => call_owned(ws, sent, handler, raw),
    }
}

/// [`call_batch`] for a batch of messages.
#[inline(never)]
fn lend_batch<H: Handler>(
    handler: &mut H,
    sent: &mut Sent,
    subprotocol: Option<&str>,
    batch: Batch<'_>,
    replies: Replies<'_>,
) -> Result<(), Error> {
    let mut socket = Socket {
        sink: Sink::Replies(replies),
        subprotocol,
        sent,
    };
    let r = catch_unwind(AssertUnwindSafe(|| {
        for msg in batch {
            handler.on_message_ref(&mut socket, msg);
            if socket.sent.close.is_some() || socket.sent.error.is_some() {
                break;
            }
            if let Sink::Replies(replies) = &socket.sink
                && !replies.has_room()
            {
                break;
            }
        }
    }));
    if let Sink::Replies(replies) = &socket.sink {
        socket.sent.lent = replies.held();
    }
    r.map_err(|_| Error::Panicked)
}

/// [`call_batch`] for a message that cannot be lent: taken, and lent from the copy.
#[inline(never)]
fn call_owned<S: AsyncRead + AsyncWrite + Unpin, H: Handler>(
    ws: &mut WebSocket<S>,
    sent: &mut Sent,
    handler: &mut H,
    raw: Raw,
) -> Result<(), Error> {
    let msg = ws.take_raw(raw);
    call(ws, sent, handler, |h, s| {
        h.on_message_ref(s, msg.as_message_ref())
    })
}

/// Finishes what a callback sent (waiting for room in the send queue, not for the
/// socket); true when it asked to close.
///
/// No flush here: the receive that follows writes the queue before it reads or waits,
/// so the replies to a burst of messages share one `writev` (as uWS corks a socket while
/// its handler runs). The plain `recv`/`send` loop cannot defer like this: between its
/// `send` and its next `recv` the application may await anything.
async fn deliver<S: AsyncRead + AsyncWrite + Unpin>(
    ws: &mut WebSocket<S>,
    sent: &mut Sent,
) -> Result<bool, ws::Error> {
    let queued = std::mem::take(&mut sent.queued);
    if let Some(e) = sent.error.take() {
        return Err(ws::Error::from_send(e));
    }
    if let Some((msg, compression)) = sent.first.take() {
        ws.reply_alone(msg, compression).await?;
    } else if let Some((kind, at)) = sent.lent.take() {
        ws.reply_lent(kind, at).await?;
    } else if queued && !ws.has_room() {
        ws.room().await?;
    }
    Ok(sent.close.is_some())
}

/// Runs `handler` on an open connection until it ends. `Ok(())` after a clean close;
/// otherwise the error [`Handler::on_close`] saw, or [`Error::Panicked`].
pub async fn run<S, H>(mut ws: WebSocket<S>, handler: &mut H) -> Result<(), Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
    H: Handler,
{
    let mut sent = Sent::default();
    let mut result = call(&mut ws, &mut sent, handler, |h, s| h.on_open(s));
    loop {
        if let Err(Error::Panicked) = result {
            // What the callback sent before it panicked is on the connection already.
            let _ = deliver(&mut ws, &mut sent).await;
            let _ = ws.close(CloseCode::INTERNAL, "").await;
            return Err(Error::Panicked);
        }
        // A borrowed callback's only reply, written straight from the receive buffer, is
        // written by the receive that follows (one future for both), unless the callback
        // also closed or a send failed. Nothing is queued while a reply is held: with it
        // taken, nothing else is left to deliver unless an owned reply is held too.
        let mut settled = false;
        let mut lent = None;
        if H::BORROWED && sent.lent.is_some() && sent.close.is_none() && sent.error.is_none() {
            sent.queued = false;
            lent = sent.lent.take();
            settled = sent.first.is_none();
        }
        let delivered = if settled || sent.settled(|| ws.has_room()) {
            Ok(false)
        } else {
            deliver(&mut ws, &mut sent).await
        };
        match delivered {
            Ok(false) => {}
            Ok(true) => {
                let (code, reason) = sent
                    .close
                    .take()
                    .unwrap_or((CloseCode::NORMAL, String::new()));
                let r = ws.close(code, &reason).await;
                return finish(handler, ws.close_frame().cloned(), r.err());
            }
            // Closed: the receive side reports how it ended.
            Err(ws::Error::Closed) => {}
            Err(e) => return finish(handler, ws.close_frame().cloned(), Some(e)),
        }
        if H::BORROWED {
            let raw = match ws.recv_raw_after(lent).await {
                Ok(Some(raw)) => raw,
                Ok(None) => return finish(handler, ws.close_frame().cloned(), None),
                Err(e) => return finish(handler, ws.close_frame().cloned(), Some(e)),
            };
            if matches!(raw, Raw::Data { .. }) {
                result = call_batch(&mut ws, &mut sent, handler, raw);
                continue;
            }
            let sent = &mut sent;
            result = match ws.take_raw(raw) {
                Message::Ping(p) => call(&mut ws, sent, handler, |h, s| h.on_ping(s, p)),
                Message::Pong(p) => call(&mut ws, sent, handler, |h, s| h.on_pong(s, p)),
                _ => Ok(()),
            };
            continue;
        }
        let msg = match ws.recv().await {
            Ok(Some(m)) => m,
            Ok(None) => return finish(handler, ws.close_frame().cloned(), None),
            Err(e) => return finish(handler, ws.close_frame().cloned(), Some(e)),
        };
        let sent = &mut sent;
        result = match msg {
            Message::Ping(p) => call(&mut ws, sent, handler, |h, s| h.on_ping(s, p)),
            Message::Pong(p) => call(&mut ws, sent, handler, |h, s| h.on_pong(s, p)),
            // The close echo is sent by the library; `recv` returns `None` next.
            Message::Close(_) => Ok(()),
            data => call(&mut ws, sent, handler, |h, s| h.on_message(s, data)),
        };
    }
}

fn finish<H: Handler>(
    handler: &mut H,
    frame: Option<CloseFrame>,
    error: Option<ws::Error>,
) -> Result<(), Error> {
    trace_end(frame.as_ref(), error.as_ref());
    catch_unwind(AssertUnwindSafe(|| {
        handler.on_close(frame.as_ref(), error.as_ref())
    }))
    .map_err(|_| Error::Panicked)?;
    match error {
        Some(e) => Err(Error::Ws(e)),
        None => Ok(()),
    }
}

#[cfg(feature = "tracing")]
fn trace_end(frame: Option<&CloseFrame>, error: Option<&ws::Error>) {
    match error {
        Some(e) => tracing::debug!(target: "rapidws::handler", error = %e, "connection failed"),
        None => tracing::debug!(
            target: "rapidws::handler",
            code = frame.map(|c| c.code.0),
            "connection closed"
        ),
    }
}
#[cfg(not(feature = "tracing"))]
fn trace_end(_: Option<&CloseFrame>, _: Option<&ws::Error>) {}

/// Accepts connections on `listener`; for each, calls `factory` with the peer's address
/// to make its handler, runs the handshake and then the handler, each connection on its
/// own task. At most [`ServerConfig::max_connections`] at once. A panicking handler ends
/// its own connection only.
///
/// It runs forever, unless the configuration has a shutdown signal
/// ([`ServerConfig::with_shutdown`]): once that is given, nothing more is accepted, every
/// connection sends what its callbacks queued and then a close with 1001 ("going away"),
/// [`Handler::on_close`] runs when the peer has answered (or the close timeout has
/// passed), and `serve_handler` returns, as [`tokio::serve`](crate::tokio::serve) does.
pub async fn serve_handler<H, F>(
    listener: TcpListener,
    config: ServerConfig,
    factory: F,
) -> io::Result<()>
where
    H: Handler,
    F: Fn(SocketAddr) -> H + Send + Sync + 'static,
{
    let acceptor = Acceptor::new(listener, config.max_connections);
    let (shutdown, limit) = config.shutdown_limit();
    let config = Arc::new(config);
    acceptor
        .run(shutdown.as_ref(), limit, move |stream, peer, permit| {
            let config = config.clone();
            let handler = catch_unwind(AssertUnwindSafe(|| factory(peer)));
            async move {
                let _permit = permit;
                let Ok(mut handler) = handler else { return };
                if let Ok(ws) = ws::accept(stream, &config).await {
                    let _ = run(ws, &mut handler).await;
                }
            }
        })
        .await
}

/// Connects to `url` and runs `handler` until the connection ends. Returns `Ok(())`
/// after a clean close, otherwise the error (connect failure, or what `on_close` saw),
/// so a reconnect loop is a loop:
///
/// ```no_run
/// # use rapidws::handler::{Handler, dial_handler};
/// # use rapidws::tokio::ClientConfig;
/// # struct H; impl Handler for H {}
/// # async fn f() {
/// let mut h = H;
/// for _attempt in 0..5 {
///     match dial_handler("ws://127.0.0.1:9004/", &ClientConfig::default(), &mut h).await {
///         Ok(()) => break,
///         Err(e) => eprintln!("reconnecting after: {e}"),
///     }
///     tokio::time::sleep(std::time::Duration::from_secs(1)).await;
/// }
/// # }
/// ```
pub async fn dial_handler<H: Handler>(
    url: impl AsRef<str>,
    config: &ClientConfig,
    handler: &mut H,
) -> Result<(), Error> {
    let ws = ws::connect(url, config).await?;
    run(ws, handler).await
}
