//! The one error type of the IO layers (tokio, blocking, TLS, hyper/axum) and everything
//! built on them: what can go wrong from the connect or accept to the close.

use std::io;

use crate::codec::ProtocolError;
use crate::connection::{self, SendError};
#[cfg(feature = "deflate")]
use crate::deflate::DeflateError;
use crate::handshake::{ClientError, ServerError};
use crate::message::Message;
#[cfg(feature = "proxy")]
use crate::proxy::ProxyError;
use crate::url::UrlError;

pub use crate::connection::Timeout;

/// Everything that can go wrong on a connection. A normal close is not an error: the
/// receive calls return `None` after it.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The socket failed (this includes the peer vanishing without a close frame, as
    /// `UnexpectedEof`), or a blocking socket timed out ([`Error::is_would_block`]).
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
    /// The application refused the upgrade request with this HTTP status (server side);
    /// the refusal was sent.
    Rejected(u16),
    /// A deadline passed: one of the connection's timers, the connect or the handshake.
    Timeout(Timeout),
    /// A message being received was refused because the memory budget shared with other
    /// connections ([`Config::budget`](crate::Config::budget)) stayed exhausted for
    /// [`Config::budget_wait`](crate::Config::budget_wait) while the connection waited
    /// (or the message could never fit); a close frame with 1013 ("try again later") was
    /// sent.
    OverBudget,
    /// A fragmented message this side was sending was abandoned part way (a
    /// `MessageWriter` dropped or a `send_from` cancelled after some of it was queued):
    /// the connection was closed with 1011 rather than end that message short.
    Abandoned,
    /// The URL given to a client cannot be used.
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
    Proxy(ProxyError),
}

display! { Error {
    Error::Io(e) => "IO error: {e}";
    Error::Protocol(e) => "protocol error: {e}";
    #[cfg(feature = "deflate")]
    Error::Deflate(e) => "permessage-deflate error: {e}";
    Error::ClientHandshake(e) => "handshake failed: {e}";
    Error::ServerHandshake(e) => "handshake refused: {e}";
    Error::Rejected(status) => "upgrade refused with status {status}";
    Error::Timeout(t) => "{t}";
    Error::OverBudget => "{}", connection::Error::OverBudget;
    Error::Abandoned => "{}", connection::Error::Abandoned;
    Error::Url(e) => "{e}";
    Error::Closed => "connection closed";
    Error::Send(e) => "send refused: {e}";
    #[cfg(feature = "proxy")]
    Error::Proxy(e) => "{e}";
} }

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) => Some(e),
            Error::Protocol(e) => Some(e),
            #[cfg(feature = "deflate")]
            Error::Deflate(e) => Some(e),
            Error::ClientHandshake(e) => Some(e),
            Error::ServerHandshake(e) => Some(e),
            Error::Url(e) => Some(e),
            Error::Send(e) => Some(e),
            #[cfg(feature = "proxy")]
            Error::Proxy(e) => Some(e),
            Error::Rejected(_)
            | Error::Timeout(_)
            | Error::OverBudget
            | Error::Abandoned
            | Error::Closed => None,
        }
    }
}

impl Error {
    /// Whether this is an IO error of kind `UnexpectedEof`: the peer went away without a
    /// close frame (RFC 6455 7.1.5: status 1006).
    pub fn is_unexpected_eof(&self) -> bool {
        matches!(self, Error::Io(e) if e.kind() == io::ErrorKind::UnexpectedEof)
    }

    /// Whether this is a blocking socket's own read or write timeout (`WouldBlock` or
    /// `TimedOut`): nothing was lost and the call may be repeated.
    pub fn is_would_block(&self) -> bool {
        matches!(self, Error::Io(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut))
    }

    /// A send the core refused: `Closed` once the connection is closed, `Send` for
    /// anything else.
    #[cfg_attr(not(any(feature = "tokio", feature = "blocking")), allow(dead_code))]
    pub(crate) fn from_send(e: SendError) -> Self {
        match e {
            SendError::Closed => Error::Closed,
            other => Error::Send(other),
        }
    }
}

/// `From` for the errors [`Error`] holds as they are, each in its variant.
macro_rules! wrap_errors {
    ($($(#[$attr:meta])* $source:ty => $variant:ident,)*) => {$(
        $(#[$attr])*
        impl From<$source> for Error {
            fn from(e: $source) -> Self {
                Error::$variant(e)
            }
        }
    )*};
}

wrap_errors! {
    io::Error => Io,
    ProtocolError => Protocol,
    UrlError => Url,
    #[cfg(feature = "proxy")]
    ProxyError => Proxy,
}

impl From<crate::handshake::Refused> for Error {
    fn from(r: crate::handshake::Refused) -> Self {
        match r {
            crate::handshake::Refused::Rejected(status) => Error::Rejected(status),
            crate::handshake::Refused::Invalid(e) => Error::ServerHandshake(e),
        }
    }
}

impl From<connection::Error> for Error {
    fn from(e: connection::Error) -> Self {
        match e {
            connection::Error::Protocol(p) => Error::Protocol(p),
            #[cfg(feature = "deflate")]
            connection::Error::Deflate(d) => Error::Deflate(d),
            connection::Error::Timeout(t) => Error::Timeout(t),
            connection::Error::Eof => Error::Io(io::ErrorKind::UnexpectedEof.into()),
            connection::Error::OverBudget => Error::OverBudget,
            connection::Error::Abandoned => Error::Abandoned,
        }
    }
}

impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        match e {
            Error::Io(e) => e,
            other => io::Error::other(other),
        }
    }
}

/// Why a send that does not wait (`try_send`) did not queue a message. The message is
/// handed back.
#[derive(Debug)]
#[non_exhaustive]
pub enum TrySendError {
    /// The send queue is past its high-water mark
    /// ([`Config::send_queue_high_water`](crate::Config::send_queue_high_water)); try again
    /// after a flush, or use the waiting `send`.
    QueueFull(Message),
    /// The message could not be sent at all.
    Failed(Error),
}

display! { TrySendError {
    TrySendError::QueueFull(_) => "send queue full";
    TrySendError::Failed(e) => "{e}";
} }

impl std::error::Error for TrySendError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TrySendError::QueueFull(_) => None,
            TrySendError::Failed(e) => Some(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn errors_read_the_same_whatever_layer_raised_them() {
        let io = Error::from(io::Error::other("gone"));
        assert_eq!(io.to_string(), "IO error: gone");
        assert!(io.source().is_some());
        assert_eq!(
            Error::Rejected(403).to_string(),
            "upgrade refused with status 403"
        );
        assert_eq!(
            Error::from_send(SendError::Closed).to_string(),
            "connection closed"
        );
        let send = Error::from_send(SendError::ControlTooLong);
        assert!(send.to_string().starts_with("send refused: ") && send.source().is_some());
        let pong = Error::from(connection::Error::Timeout(Timeout::Pong));
        assert!(matches!(pong, Error::Timeout(Timeout::Pong)));
        assert_eq!(pong.to_string(), "no pong received for the keepalive ping");
        assert!(pong.source().is_none());
        assert_eq!(
            Error::Url(UrlError::TlsUnavailable).to_string(),
            UrlError::TlsUnavailable.to_string()
        );
    }

    #[test]
    fn a_socket_timeout_is_told_apart_from_a_connection_timer() {
        let would_block = Error::from(io::Error::from(io::ErrorKind::WouldBlock));
        assert!(would_block.is_would_block());
        assert!(!Error::Timeout(Timeout::Idle).is_would_block());
        assert!(Error::from(io::Error::from(io::ErrorKind::UnexpectedEof)).is_unexpected_eof());
    }
}
