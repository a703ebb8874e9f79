//! Server side: the opening handshake over any blocking stream.

use crate::codec::Role;
use crate::config::ServerConfig;
use crate::error::Error;
use crate::handshake::{Reject, Request, ResponseHeaders, ServerHandshake};

use super::net::{Transport, read_head};
use super::ws::WebSocket;

/// Runs the server side of the opening handshake on `stream`, accepting every valid
/// request. An invalid request is answered with its HTTP error response before
/// [`Error::ServerHandshake`] is returned. Bound the wait with the socket's read timeout.
pub fn accept<S: Transport>(stream: S, config: &ServerConfig) -> Result<WebSocket<S>, Error> {
    accept_with(stream, config, |_| Ok(()))
}

/// [`accept`], letting `check` inspect the request first (path, headers, origin,
/// offered subprotocols), as the tokio layer's `accept_with` does: it refuses with an
/// HTTP status ([`Reject`]), which is sent before [`Error::Rejected`] is returned, or it
/// accepts, returning `()` or header fields to add to the 101 response
/// ([`ResponseHeaders`]).
pub fn accept_with<S, F, H>(
    mut stream: S,
    config: &ServerConfig,
    check: F,
) -> Result<WebSocket<S>, Error>
where
    S: Transport,
    F: FnOnce(&Request) -> Result<H, Reject>,
    H: ResponseHeaders,
{
    let mut hs = ServerHandshake::new(&config.handshake);
    let request = match read_head(&mut stream, |b| hs.feed(b))? {
        Ok(r) => r,
        Err(e) => {
            let _ = stream.write_all(&e.response());
            let _ = stream.flush();
            return Err(Error::ServerHandshake(e));
        }
    };
    let accepted = match request.decide(&config.handshake, check) {
        Ok(a) => a,
        Err(r) => {
            let _ = stream.write_all(&r.response);
            let _ = stream.flush();
            return Err(r.reason.into());
        }
    };
    stream.write_all(&accepted.response)?;
    stream.flush()?;
    let negotiated = accepted.negotiated(&config.handshake);
    Ok(super::from_handshake(
        stream,
        Role::Server,
        &config.connection,
        negotiated,
        &accepted.leftover,
    ))
}
