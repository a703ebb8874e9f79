//! The blocking [`WebSocket`]: tungstenite's, on `rapidws::blocking`.

use std::io::Read;

use rapidws::blocking::Transport;

use super::{CloseFrame, Message, Role, WebSocketConfig, close_for_rapidws, unsendable_frame};
use crate::convert::conn_error;
use crate::handshake::{Accepted, ClientSide, Decision, ServerSide, decide};
use crate::tungstenite::error::{Error, ProtocolError, Result};
use crate::tungstenite::handshake::HandshakeError;
use crate::tungstenite::handshake::client::{ClientHandshake, Response};
use crate::tungstenite::handshake::server::Callback;

/// A blocking WebSocket connection over `S`, as tungstenite's: [`read`](Self::read),
/// [`send`](Self::send) (or [`write`](Self::write) then [`flush`](Self::flush)),
/// [`close`](Self::close), on a `rapidws::blocking::WebSocket`.
///
/// `S` is a [`Transport`] (`TcpStream`, `UnixStream`, this crate's `MaybeTlsStream`,
/// rustls's `StreamOwned`; implement it for another `Read + Write` in two lines): the
/// close handshake shuts the stream's write half down, as RFC 6455 7.1.1 asks.
#[derive(Debug)]
pub struct WebSocket<S> {
    inner: rapidws::blocking::WebSocket<S>,
    config: WebSocketConfig,
    /// `ConnectionClosed` (or an error) was returned: from now on `AlreadyClosed`.
    terminated: bool,
    /// A close frame was sent or received: sends are refused.
    closing: bool,
    /// The peer's close was received: nothing more is read.
    peer_closed: bool,
}

impl<S: Transport> WebSocket<S> {
    /// A connection over `stream`, on which the opening handshake has already happened.
    pub fn from_raw_socket(stream: S, role: Role, config: Option<WebSocketConfig>) -> Self {
        Self::from_partially_read(stream, Vec::new(), role, config)
    }

    /// [`from_raw_socket`](Self::from_raw_socket), with `part`: bytes already read after
    /// the handshake.
    pub fn from_partially_read(
        stream: S,
        part: Vec<u8>,
        role: Role,
        config: Option<WebSocketConfig>,
    ) -> Self {
        let config = config.unwrap_or_default();
        let inner = rapidws::blocking::WebSocket::from_raw(
            stream,
            role.into(),
            &config.to_rapidws(),
            &part,
        );
        Self::wrap(inner, config)
    }

    fn open(stream: S, role: Role, config: Option<WebSocketConfig>, a: Accepted) -> Self {
        let config = config.unwrap_or_default();
        let inner = rapidws::blocking::from_handshake(
            stream,
            role.into(),
            &config.to_rapidws(),
            a.negotiated,
            &a.leftover,
        );
        Self::wrap(inner, config)
    }
}

impl<S> WebSocket<S> {
    /// Wraps a rapidws connection opened with any of rapidws's settings.
    pub fn from_rapidws(inner: rapidws::blocking::WebSocket<S>) -> Self {
        Self::wrap(inner, WebSocketConfig::default())
    }

    fn wrap(inner: rapidws::blocking::WebSocket<S>, config: WebSocketConfig) -> Self {
        WebSocket {
            inner,
            config,
            terminated: false,
            closing: false,
            peer_closed: false,
        }
    }

    /// The settings this connection was opened with.
    pub fn get_config(&self) -> &WebSocketConfig {
        &self.config
    }

    /// Changes the settings kept here; the limits of an open rapidws connection stay
    /// those it was opened with.
    pub fn set_config(&mut self, set_func: impl FnOnce(&mut WebSocketConfig)) {
        set_func(&mut self.config);
    }

    /// Whether messages may still be read (until the peer's close).
    pub fn can_read(&self) -> bool {
        !self.peer_closed && !self.terminated
    }

    /// Whether messages may still be sent (until a close is sent or received).
    pub fn can_write(&self) -> bool {
        !self.closing && !self.terminated
    }
}

impl<S: Transport> WebSocket<S> {
    /// The stream underneath.
    pub fn get_ref(&self) -> &S {
        self.inner.get_ref()
    }

    /// The stream underneath, to change.
    pub fn get_mut(&mut self) -> &mut S {
        self.inner.get_mut()
    }

    /// The stream underneath, consumed.
    pub fn into_inner(self) -> S {
        self.inner.into_inner()
    }

    /// Reads the next message: text, binary, a ping or pong (pings are answered), the
    /// peer's close (echoed). Once the close handshake is over,
    /// [`Error::ConnectionClosed`], then [`Error::AlreadyClosed`].
    pub fn read(&mut self) -> Result<Message> {
        if self.terminated {
            return Err(Error::AlreadyClosed);
        }
        if self.peer_closed && self.inner.role() == rapidws::Role::Server {
            // Both closes are exchanged: a server is done once ours is written, as
            // tungstenite's is, without waiting for the client to close TCP.
            return match self.inner.flush() {
                Ok(()) | Err(rapidws::Error::Closed) => {
                    self.terminated = true;
                    Err(Error::ConnectionClosed)
                }
                Err(e) if e.is_would_block() => Err(conn_error(e, &self.config)),
                Err(e) => {
                    self.terminated = true;
                    Err(conn_error(e, &self.config))
                }
            };
        }
        match self.inner.read() {
            Ok(Some(m)) => {
                if let rapidws::Message::Close(frame) = &m {
                    self.closing = true;
                    self.peer_closed = true;
                    // The same frame back, as tungstenite answers; refused when ours went
                    // first. The next read writes it out.
                    let _ = self.inner.send(close_for_rapidws(frame.clone()));
                }
                Ok(m.into())
            }
            Ok(None) => {
                self.terminated = true;
                Err(Error::ConnectionClosed)
            }
            Err(e) if e.is_would_block() => Err(conn_error(e, &self.config)),
            Err(e) => {
                self.terminated = true;
                Err(conn_error(e, &self.config))
            }
        }
    }

    /// Sends a message and flushes it.
    pub fn send(&mut self, message: Message) -> Result<()> {
        self.write(message)?;
        self.flush()
    }

    /// Sends a message (rapidws writes it out at once, as [`send`](Self::send)).
    pub fn write(&mut self, message: Message) -> Result<()> {
        if self.terminated {
            return Err(Error::AlreadyClosed);
        }
        let msg = message.into_rapidws().ok_or_else(unsendable_frame)?;
        let close = msg.is_close();
        match self.inner.send(msg) {
            Ok(()) => {
                self.closing |= close;
                Ok(())
            }
            Err(rapidws::Error::Closed) => Err(Error::Protocol(ProtocolError::SendAfterClosing)),
            Err(e) => Err(conn_error(e, &self.config)),
        }
    }

    /// Writes out what is queued.
    pub fn flush(&mut self) -> Result<()> {
        if self.terminated {
            return Err(Error::AlreadyClosed);
        }
        match self.inner.flush() {
            Ok(()) | Err(rapidws::Error::Closed) => Ok(()),
            Err(e) => Err(conn_error(e, &self.config)),
        }
    }

    /// Sends a close frame (`None`: one without a status code) and flushes it; keep
    /// reading until [`Error::ConnectionClosed`] to finish the close handshake.
    pub fn close(&mut self, code: Option<CloseFrame>) -> Result<()> {
        if self.closing {
            return self.flush();
        }
        self.send(Message::Close(code))
    }
}

/// Reads `stream` until `feed` has a whole head, at most 4 KiB per read.
fn read_head<S: Read, T>(
    stream: &mut S,
    mut feed: impl FnMut(&[u8]) -> Result<Option<T>>,
) -> Result<T> {
    let mut buf = [0u8; 4096];
    loop {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Err(Error::Protocol(ProtocolError::HandshakeIncomplete));
        }
        if let Some(t) = feed(&buf[..n])? {
            return Ok(t);
        }
    }
}

pub(crate) fn client_handshake<S: Transport>(
    mut stream: S,
    mut side: ClientSide,
    request: Vec<u8>,
    config: Option<WebSocketConfig>,
) -> std::result::Result<(WebSocket<S>, Response), HandshakeError<ClientHandshake<S>>> {
    stream.write_all(&request).map_err(Error::Io)?;
    stream.flush().map_err(Error::Io)?;
    let (response, accepted) = read_head(&mut stream, |b| side.feed(b))?;
    Ok((
        WebSocket::open(stream, Role::Client, config, accepted),
        response,
    ))
}

pub(crate) fn server_handshake<S: Transport, C: Callback>(
    mut stream: S,
    callback: C,
    config: Option<WebSocketConfig>,
) -> Result<WebSocket<S>> {
    let mut side = ServerSide::new();
    let mut refused = None;
    let request = read_head(&mut stream, |b| {
        side.feed(b).map_err(|(bytes, e)| {
            refused = Some(bytes);
            e
        })
    });
    let request = match request {
        Ok(r) => r,
        Err(e) => {
            if let Some(bytes) = refused {
                let _ = stream.write_all(&bytes);
                let _ = stream.flush();
            }
            return Err(e);
        }
    };
    match decide(request, callback) {
        Decision::Accept(bytes, accepted) => {
            stream.write_all(&bytes)?;
            stream.flush()?;
            Ok(WebSocket::open(stream, Role::Server, config, accepted))
        }
        Decision::Refuse(bytes, e) => {
            let _ = stream.write_all(&bytes);
            let _ = stream.flush();
            Err(e)
        }
    }
}
