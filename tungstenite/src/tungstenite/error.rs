//! Errors, with tungstenite's names and variants.

use std::{fmt, io, str, string};

use http::{Response, header::HeaderName};

use crate::tungstenite::protocol::Message;
use crate::tungstenite::protocol::frame::coding::Data;

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong on a connection, as tungstenite names it.
///
/// The variants a program matches on come up in the same situations as with tungstenite:
/// [`ConnectionClosed`](Error::ConnectionClosed) once the close handshake is over,
/// [`AlreadyClosed`](Error::AlreadyClosed) when the connection is used after that,
/// [`Protocol`](Error::Protocol) when the peer broke RFC 6455 (with
/// [`ProtocolError::ResetWithoutClosingHandshake`] when it went away without a close
/// frame), [`Capacity`](Error::Capacity) past the size limits, [`Utf8`](Error::Utf8) for
/// text that is not UTF-8, [`Http`](Error::Http) when the server refused the upgrade.
///
/// What rapidws adds that tungstenite has no name for (its timers, its shared memory
/// budget) arrives as [`Io`](Error::Io) with the rapidws error inside
/// (`io::Error::get_ref`), of kind `TimedOut` for a timer.
#[derive(Debug)]
pub enum Error {
    /// The connection was closed normally: the close handshake is over. Not an error as
    /// such; the streams end with it.
    ConnectionClosed,
    /// The connection is used after [`ConnectionClosed`](Error::ConnectionClosed) (or an
    /// error) was returned: a program error.
    AlreadyClosed,
    /// The socket failed.
    Io(io::Error),
    /// TLS failed.
    Tls(TlsError),
    /// A message or the handshake passed a size limit.
    Capacity(CapacityError),
    /// The peer broke the protocol.
    Protocol(ProtocolError),
    /// The write buffer is full (kept for tungstenite's API: rapidws waits for room
    /// instead, so this is never returned).
    WriteBufferFull(Box<Message>),
    /// Text that is not UTF-8.
    Utf8(String),
    /// Kept for tungstenite's API; never returned.
    AttackAttempt,
    /// The URL cannot be used.
    Url(UrlError),
    /// The server answered the upgrade with another status than 101 (client), or the
    /// callback refused the request (server); the response is inside.
    Http(Box<Response<Option<Vec<u8>>>>),
    /// An `http` type could not be built.
    HttpFormat(http::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::ConnectionClosed => f.write_str("Connection closed normally"),
            Error::AlreadyClosed => f.write_str("Trying to work with closed connection"),
            Error::Io(e) => write!(f, "IO error: {e}"),
            Error::Tls(e) => write!(f, "TLS error: {e}"),
            Error::Capacity(e) => write!(f, "Space limit exceeded: {e}"),
            Error::Protocol(e) => write!(f, "WebSocket protocol error: {e}"),
            Error::WriteBufferFull(_) => f.write_str("Write buffer is full"),
            Error::Utf8(e) => write!(f, "UTF-8 encoding error: {e}"),
            Error::AttackAttempt => f.write_str("Attack attempt detected"),
            Error::Url(e) => write!(f, "URL error: {e}"),
            Error::Http(r) => write!(f, "HTTP error: {}", r.status()),
            Error::HttpFormat(e) => write!(f, "HTTP format error: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) => Some(e),
            Error::Tls(e) => Some(e),
            Error::Capacity(e) => Some(e),
            Error::Protocol(e) => Some(e),
            Error::Url(e) => Some(e),
            Error::HttpFormat(e) => Some(e),
            _ => None,
        }
    }
}

/// `From` for the errors [`Error`] holds as they are.
macro_rules! wrap {
    ($($source:ty => $variant:ident,)*) => {$(
        impl From<$source> for Error {
            fn from(e: $source) -> Self {
                Error::$variant(e)
            }
        }
    )*};
}

wrap! {
    io::Error => Io,
    TlsError => Tls,
    CapacityError => Capacity,
    ProtocolError => Protocol,
    UrlError => Url,
    http::Error => HttpFormat,
}

impl From<str::Utf8Error> for Error {
    fn from(e: str::Utf8Error) -> Self {
        Error::Utf8(e.to_string())
    }
}

impl From<string::FromUtf8Error> for Error {
    fn from(e: string::FromUtf8Error) -> Self {
        Error::Utf8(e.to_string())
    }
}

impl From<http::header::InvalidHeaderValue> for Error {
    fn from(e: http::header::InvalidHeaderValue) -> Self {
        Error::HttpFormat(e.into())
    }
}

impl From<http::header::InvalidHeaderName> for Error {
    fn from(e: http::header::InvalidHeaderName) -> Self {
        Error::HttpFormat(e.into())
    }
}

impl From<http::header::ToStrError> for Error {
    fn from(e: http::header::ToStrError) -> Self {
        Error::Utf8(e.to_string())
    }
}

impl From<http::uri::InvalidUri> for Error {
    fn from(e: http::uri::InvalidUri) -> Self {
        Error::HttpFormat(e.into())
    }
}

impl From<http::status::InvalidStatusCode> for Error {
    fn from(e: http::status::InvalidStatusCode) -> Self {
        Error::HttpFormat(e.into())
    }
}

impl From<httparse::Error> for Error {
    fn from(e: httparse::Error) -> Self {
        match e {
            httparse::Error::TooManyHeaders => Error::Capacity(CapacityError::TooManyHeaders),
            e => Error::Protocol(ProtocolError::HttparseError(e)),
        }
    }
}

/// A size limit was passed.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum CapacityError {
    /// The handshake had too many header fields.
    TooManyHeaders,
    /// A received message (or frame) was larger than allowed.
    MessageTooLong {
        /// Its size, or the limit plus one where the size was not known yet (a frame
        /// refused at its header, a message refused at the fragment that passed the
        /// limit).
        size: usize,
        /// The limit.
        max_size: usize,
    },
}

impl fmt::Display for CapacityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CapacityError::TooManyHeaders => f.write_str("Too many headers"),
            CapacityError::MessageTooLong { size, max_size } => {
                write!(f, "Message too long: {size} > {max_size}")
            }
        }
    }
}

impl std::error::Error for CapacityError {}

/// The server's subprotocol answer was wrong.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum SubProtocolError {
    /// The server selected a subprotocol though none was offered.
    ServerSentSubProtocolNoneRequested,
    /// The server selected a subprotocol that was not offered.
    InvalidSubProtocol,
    /// The server selected none of the offered subprotocols.
    NoSubProtocol,
}

impl fmt::Display for SubProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SubProtocolError::ServerSentSubProtocolNoneRequested => {
                "Server sent a subprotocol but none was requested"
            }
            SubProtocolError::InvalidSubProtocol => "Server sent an invalid subprotocol",
            SubProtocolError::NoSubProtocol => "Server sent no subprotocol",
        })
    }
}

impl std::error::Error for SubProtocolError {}

/// How the peer broke the protocol (RFC 6455), or the handshake went wrong.
#[derive(Debug, PartialEq, Eq, Clone)]
pub enum ProtocolError {
    /// The upgrade request's method is not GET.
    WrongHttpMethod,
    /// The upgrade request is not HTTP/1.1 or later.
    WrongHttpVersion,
    /// No `Connection: upgrade`.
    MissingConnectionUpgradeHeader,
    /// No `Upgrade: websocket`.
    MissingUpgradeWebSocketHeader,
    /// No `Sec-WebSocket-Version: 13`.
    MissingSecWebSocketVersionHeader,
    /// No `Sec-WebSocket-Key`.
    MissingSecWebSocketKey,
    /// An invalid `Sec-WebSocket-Key`.
    InvalidSecWebSocketKey,
    /// The server's `Sec-WebSocket-Accept` does not match the key.
    SecWebSocketAcceptKeyMismatch,
    /// The subprotocol answer was wrong.
    SecWebSocketSubProtocolError(SubProtocolError),
    /// Bytes after the client's request that are not frames.
    JunkAfterRequest,
    /// A callback's error response was a success status.
    CustomResponseSuccessful,
    /// A header is missing, repeated or wrong.
    InvalidHeader(Box<HeaderName>),
    /// The handshake did not finish.
    HandshakeIncomplete,
    /// The HTTP head could not be parsed.
    HttparseError(httparse::Error),
    /// A message was sent after the close frame.
    SendAfterClosing,
    /// The peer sent a frame after its close frame.
    ReceivedAfterClosing,
    /// Reserved bits were set.
    NonZeroReservedBits,
    /// A client's frame was not masked.
    UnmaskedFrameFromClient,
    /// A server's frame was masked.
    MaskedFrameFromServer,
    /// A control frame was fragmented.
    FragmentedControlFrame,
    /// A control frame's payload was over 125 bytes.
    ControlFrameTooBig,
    /// A reserved control opcode.
    UnknownControlFrameType(u8),
    /// A reserved data opcode.
    UnknownDataFrameType(u8),
    /// A continuation frame without a message to continue.
    UnexpectedContinueFrame,
    /// A new data frame inside a fragmented message.
    ExpectedFragment(Data),
    /// The connection ended without a close frame.
    ResetWithoutClosingHandshake,
    /// An invalid opcode.
    InvalidOpcode(u8),
    /// An invalid close frame (a 1-byte payload, a code that may not be sent).
    InvalidCloseSequence,
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtocolError::WrongHttpMethod => {
                f.write_str("Unsupported HTTP method used - only GET is allowed")
            }
            ProtocolError::WrongHttpVersion => f.write_str("HTTP version must be 1.1 or higher"),
            ProtocolError::MissingConnectionUpgradeHeader => {
                f.write_str("No \"Connection: upgrade\" header")
            }
            ProtocolError::MissingUpgradeWebSocketHeader => {
                f.write_str("No \"Upgrade: websocket\" header")
            }
            ProtocolError::MissingSecWebSocketVersionHeader => {
                f.write_str("No \"Sec-WebSocket-Version: 13\" header")
            }
            ProtocolError::MissingSecWebSocketKey => f.write_str("No \"Sec-WebSocket-Key\" header"),
            ProtocolError::InvalidSecWebSocketKey => {
                f.write_str("Invalid \"Sec-WebSocket-Key\" header value")
            }
            ProtocolError::SecWebSocketAcceptKeyMismatch => {
                f.write_str("Key mismatch in \"Sec-WebSocket-Accept\" header")
            }
            ProtocolError::SecWebSocketSubProtocolError(e) => write!(f, "SubProtocol error: {e}"),
            ProtocolError::JunkAfterRequest => f.write_str("Junk after client request"),
            ProtocolError::CustomResponseSuccessful => {
                f.write_str("Custom response must not be successful")
            }
            ProtocolError::InvalidHeader(h) => {
                write!(f, "Missing, duplicated or incorrect header {h}")
            }
            ProtocolError::HandshakeIncomplete => f.write_str("Handshake not finished"),
            ProtocolError::HttparseError(e) => write!(f, "httparse error: {e}"),
            ProtocolError::SendAfterClosing => f.write_str("Sending after closing is not allowed"),
            ProtocolError::ReceivedAfterClosing => f.write_str("Remote sent after having closed"),
            ProtocolError::NonZeroReservedBits => f.write_str("Reserved bits are non-zero"),
            ProtocolError::UnmaskedFrameFromClient => {
                f.write_str("Received an unmasked frame from client")
            }
            ProtocolError::MaskedFrameFromServer => {
                f.write_str("Received a masked frame from server")
            }
            ProtocolError::FragmentedControlFrame => f.write_str("Fragmented control frame"),
            ProtocolError::ControlFrameTooBig => {
                f.write_str("Control frame too big (payload must be 125 bytes or less)")
            }
            ProtocolError::UnknownControlFrameType(op) => {
                write!(f, "Unknown control frame type: {op}")
            }
            ProtocolError::UnknownDataFrameType(op) => write!(f, "Unknown data frame type: {op}"),
            ProtocolError::UnexpectedContinueFrame => {
                f.write_str("Continue frame but nothing to continue")
            }
            ProtocolError::ExpectedFragment(d) => {
                write!(f, "While waiting for more fragments received: {d}")
            }
            ProtocolError::ResetWithoutClosingHandshake => {
                f.write_str("Connection reset without closing handshake")
            }
            ProtocolError::InvalidOpcode(op) => write!(f, "Encountered invalid opcode: {op}"),
            ProtocolError::InvalidCloseSequence => f.write_str("Invalid close sequence"),
        }
    }
}

impl std::error::Error for ProtocolError {}

impl From<httparse::Error> for ProtocolError {
    fn from(e: httparse::Error) -> Self {
        ProtocolError::HttparseError(e)
    }
}

/// The URL cannot be used.
#[derive(Debug, PartialEq, Eq)]
pub enum UrlError {
    /// `wss://` without a TLS feature.
    TlsFeatureNotEnabled,
    /// No host.
    NoHostName,
    /// No address of the host could be connected to.
    UnableToConnect(String),
    /// Not `ws://` or `wss://`.
    UnsupportedUrlScheme,
    /// An empty host.
    EmptyHostName,
    /// No path.
    NoPathOrQuery,
}

impl fmt::Display for UrlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UrlError::TlsFeatureNotEnabled => f.write_str("TLS support not compiled in"),
            UrlError::NoHostName => f.write_str("No host name in the URL"),
            UrlError::UnableToConnect(u) => write!(f, "Unable to connect to {u}"),
            UrlError::UnsupportedUrlScheme => f.write_str("URL scheme not supported"),
            UrlError::EmptyHostName => f.write_str("URL contains empty host name"),
            UrlError::NoPathOrQuery => f.write_str("No path/query in URL"),
        }
    }
}

impl std::error::Error for UrlError {}

/// TLS failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum TlsError {
    /// rustls failed (features `rustls-tls-*`).
    #[cfg(feature = "__rustls-tls")]
    Rustls(Box<tokio_rustls::rustls::Error>),
    /// The host is not a valid DNS name (features `rustls-tls-*`).
    #[cfg(feature = "__rustls-tls")]
    InvalidDnsName,
}

impl fmt::Display for TlsError {
    fn fmt(&self, _f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            #[cfg(feature = "__rustls-tls")]
            TlsError::Rustls(ref e) => write!(_f, "rustls error: {e}"),
            #[cfg(feature = "__rustls-tls")]
            TlsError::InvalidDnsName => _f.write_str("Invalid DNS name"),
        }
    }
}

impl std::error::Error for TlsError {}

#[cfg(feature = "__rustls-tls")]
impl From<tokio_rustls::rustls::Error> for TlsError {
    fn from(e: tokio_rustls::rustls::Error) -> Self {
        TlsError::Rustls(e.into())
    }
}
