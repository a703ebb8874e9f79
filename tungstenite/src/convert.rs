//! rapidws's errors as tungstenite names them.

use std::io;

use rapidws::ProtocolError as P;
use rapidws::connection::SendError;

use crate::tungstenite::error::{CapacityError, Error, ProtocolError};
use crate::tungstenite::protocol::WebSocketConfig;
use crate::tungstenite::protocol::frame::coding::Data;

/// An error of an open connection, as tungstenite reports the same situation. `Closed`
/// becomes [`Error::AlreadyClosed`]; the callers that know better say
/// [`ProtocolError::SendAfterClosing`] instead.
pub(crate) fn conn_error(e: rapidws::Error, config: &WebSocketConfig) -> Error {
    match e {
        rapidws::Error::Io(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
            Error::Protocol(ProtocolError::ResetWithoutClosingHandshake)
        }
        rapidws::Error::Io(e) => Error::Io(e),
        rapidws::Error::Protocol(p) => protocol_error(p, config),
        rapidws::Error::Closed => Error::AlreadyClosed,
        rapidws::Error::Timeout(t) => Error::Io(io::Error::new(
            io::ErrorKind::TimedOut,
            rapidws::Error::Timeout(t),
        )),
        rapidws::Error::Send(SendError::ControlTooLong) => {
            Error::Protocol(ProtocolError::ControlFrameTooBig)
        }
        rapidws::Error::Send(SendError::InvalidCloseCode(_)) => {
            Error::Protocol(ProtocolError::InvalidCloseSequence)
        }
        rapidws::Error::Url(u) => Error::Io(io::Error::new(io::ErrorKind::InvalidInput, u)),
        other => Error::Io(io::Error::other(other)),
    }
}

fn protocol_error(p: P, config: &WebSocketConfig) -> Error {
    let too_long = |max: Option<usize>| {
        let max_size = max.unwrap_or(usize::MAX);
        Error::Capacity(CapacityError::MessageTooLong {
            size: max_size.saturating_add(1),
            max_size,
        })
    };
    let p = match p {
        P::ReservedBits => ProtocolError::NonZeroReservedBits,
        P::UnknownOpcode(op) if op < 8 => ProtocolError::UnknownDataFrameType(op),
        P::UnknownOpcode(op) => ProtocolError::UnknownControlFrameType(op),
        P::ControlFrameTooLong => ProtocolError::ControlFrameTooBig,
        P::FragmentedControlFrame => ProtocolError::FragmentedControlFrame,
        P::UnexpectedContinuation => ProtocolError::UnexpectedContinueFrame,
        // rapidws does not say which kind of frame came; text is the likelier.
        P::ExpectedContinuation => ProtocolError::ExpectedFragment(Data::Text),
        P::UnmaskedFrame => ProtocolError::UnmaskedFrameFromClient,
        P::MaskedFrame => ProtocolError::MaskedFrameFromServer,
        P::InvalidClosePayload | P::InvalidCloseCode(_) => ProtocolError::InvalidCloseSequence,
        P::InvalidUtf8 => return Error::Utf8("invalid UTF-8 in a text message".into()),
        P::FrameTooLarge => return too_long(config.max_frame_size),
        P::MessageTooLarge => return too_long(config.max_message_size),
        other => return Error::Io(io::Error::new(io::ErrorKind::InvalidData, other)),
    };
    Error::Protocol(p)
}
