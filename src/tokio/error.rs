//! The tokio layer's error type.

use std::fmt;
use std::io;

use crate::codec::ProtocolError;
use crate::connection::{self, SendError};
#[cfg(feature = "deflate")]
use crate::deflate::DeflateError;
use crate::handshake::{ClientError, ServerError};

use crate::url::UrlError;

/// Which deadline passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Timeout {
    /// DNS resolution plus TCP connect, and opening the proxy tunnel when there is one
    /// ([`ClientConfig::connect_timeout`](super::ClientConfig)).
    Connect,
    /// The opening handshake ([`Config::handshake_timeout`](super::Config)).
    Handshake,
    /// No pong answered our keepalive ping in time ([`Config::pong_timeout`](super::Config)).
    Pong,
    /// Nothing was received for [`Config::idle_timeout`](super::Config).
    Idle,
    /// The peer did not answer our close frame within [`Config::close_timeout`](super::Config).
    Close,
}

impl fmt::Display for Timeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Timeout::Connect => "connect timed out",
            Timeout::Handshake => "opening handshake timed out",
            Timeout::Pong => "no pong received for the keepalive ping",
            Timeout::Idle => "connection idle for too long",
            Timeout::Close => "peer did not answer the close frame in time",
        })
    }
}

/// Everything that can go wrong on a connection. A normal close is not an error: the
/// receive calls return `None` after it.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The socket failed (this includes the peer vanishing without a close frame, as
    /// `UnexpectedEof`).
    Io(io::Error),
    /// The peer broke RFC 6455; a close frame with [`ProtocolError::close_code`] was sent.
    Protocol(ProtocolError),
    /// The peer's compressed data was invalid or inflated past the message limit; a close
    /// frame with [`DeflateError::close_code`] was sent.
    #[cfg(feature = "deflate")]
    Deflate(DeflateError),
    /// The server refused or botched the opening handshake (client side). A refusal's
    /// HTTP status is in [`ClientError::Status`].
    ClientHandshake(ClientError),
    /// The client's upgrade request was invalid (server side); the refusal was sent.
    ServerHandshake(ServerError),
    /// The application refused the upgrade request with this HTTP status (server side,
    /// [`accept_with`](super::accept_with)); the refusal was sent.
    Rejected(u16),
    /// A deadline from the configuration passed.
    Timeout(Timeout),
    /// The URL given to [`connect`](super::connect) cannot be used.
    Url(UrlError),
    /// The connection is closed (the close handshake finished or the connection failed);
    /// nothing more can be sent.
    Closed,
    /// A send was refused for another reason: a control payload over 125 bytes, a close
    /// code that may not be sent, a message while a fragmented one is open, ...
    Send(SendError),
    /// The proxy refused or botched opening the tunnel, or its URL is unusable
    /// (feature `proxy`).
    #[cfg(feature = "proxy")]
    Proxy(crate::proxy::ProxyError),
}

crate::layer::layer_error!(Error, |f| {
    Error::Timeout(t) => t.fmt(f), None;
    Error::Url(e) => e.fmt(f), Some(e);
});

impl From<ProtocolError> for Error {
    fn from(e: ProtocolError) -> Self {
        Error::Protocol(e)
    }
}

impl Error {
    pub(crate) fn from_connection(e: connection::Error) -> Self {
        match e {
            connection::Error::Protocol(p) => Error::Protocol(p),
            #[cfg(feature = "deflate")]
            connection::Error::Deflate(d) => Error::Deflate(d),
            connection::Error::Timeout(connection::Timeout::Pong) => Error::Timeout(Timeout::Pong),
            connection::Error::Timeout(connection::Timeout::Close) => {
                Error::Timeout(Timeout::Close)
            }
            connection::Error::Timeout(connection::Timeout::Idle) => Error::Timeout(Timeout::Idle),
        }
    }

    /// Whether this is an IO error of kind `UnexpectedEof`: the peer went away without a
    /// close frame.
    pub fn is_unexpected_eof(&self) -> bool {
        matches!(self, Error::Io(e) if e.kind() == io::ErrorKind::UnexpectedEof)
    }
}

impl From<UrlError> for Error {
    fn from(e: UrlError) -> Self {
        Error::Url(e)
    }
}

/// Why [`try_send`](super::WebSocket::try_send) did not queue a message. The message is
/// handed back.
#[derive(Debug)]
#[non_exhaustive]
pub enum TrySendError {
    /// The send queue is past its high-water mark; try again after
    /// [`flush`](super::WebSocket::flush) or use the awaiting `send`.
    QueueFull(super::Message),
    /// The message could not be sent at all.
    Failed(Error),
}

impl fmt::Display for TrySendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::QueueFull(_) => f.write_str("send queue full"),
            TrySendError::Failed(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for TrySendError {}

impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        match e {
            Error::Io(e) => e,
            other => io::Error::other(other),
        }
    }
}
