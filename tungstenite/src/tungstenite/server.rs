//! The blocking server functions.

use rapidws::blocking::Transport;

use super::handshake::HandshakeError;
use super::handshake::server::{Callback, NoCallback, ServerHandshake};
use super::protocol::{WebSocket, WebSocketConfig};

/// The server side of the handshake on `stream`, blocking.
pub fn accept<S: Transport>(
    stream: S,
) -> Result<WebSocket<S>, HandshakeError<ServerHandshake<S, NoCallback>>> {
    accept_hdr_with_config(stream, NoCallback, None)
}

/// [`accept`] with settings.
pub fn accept_with_config<S: Transport>(
    stream: S,
    config: Option<WebSocketConfig>,
) -> Result<WebSocket<S>, HandshakeError<ServerHandshake<S, NoCallback>>> {
    accept_hdr_with_config(stream, NoCallback, config)
}

/// [`accept`] with a [`Callback`] that sees the request and may add to the response or
/// refuse it.
pub fn accept_hdr<S: Transport, C: Callback>(
    stream: S,
    callback: C,
) -> Result<WebSocket<S>, HandshakeError<ServerHandshake<S, C>>> {
    accept_hdr_with_config(stream, callback, None)
}

/// [`accept_hdr`] with settings.
pub fn accept_hdr_with_config<S: Transport, C: Callback>(
    stream: S,
    callback: C,
    config: Option<WebSocketConfig>,
) -> Result<WebSocket<S>, HandshakeError<ServerHandshake<S, C>>> {
    super::protocol::websocket::server_handshake(stream, callback, config)
        .map_err(HandshakeError::Failure)
}
