//! Server side: the opening handshake over any blocking stream.

use std::time::Instant;

use crate::codec::Role;
use crate::config::ServerConfig;
use crate::error::Error;
use crate::handshake::{Request, ServerHandshake};

use super::net::{HANDSHAKE_READ, Transport, read_some};
use super::ws::WebSocket;

/// Runs the server side of the opening handshake on `stream`, accepting every valid
/// request. An invalid request is answered with its HTTP error response before
/// [`Error::ServerHandshake`] is returned. Bound the wait with the socket's read timeout.
pub fn accept<S: Transport>(stream: S, config: &ServerConfig) -> Result<WebSocket<S>, Error> {
    accept_with(stream, config, |_| Ok(()))
}

/// [`accept`], letting `check` inspect the request first (path, headers, origin) and
/// refuse it with an HTTP status and body; the refusal is sent and [`Error::Rejected`]
/// returned.
pub fn accept_with<S, F>(
    mut stream: S,
    config: &ServerConfig,
    check: F,
) -> Result<WebSocket<S>, Error>
where
    S: Transport,
    F: FnOnce(&Request) -> Result<(), (u16, String)>,
{
    let mut hs = ServerHandshake::new(&config.handshake);
    let mut buf = [0u8; HANDSHAKE_READ];
    let request = loop {
        let n = read_some(&mut stream, &mut buf)?;
        match hs.feed(&buf[..n]) {
            Ok(None) => {}
            Ok(Some(r)) => break r,
            Err(e) => {
                let _ = stream.write_all(&e.response());
                let _ = stream.flush();
                return Err(Error::ServerHandshake(e));
            }
        }
    };
    if let Err((status, body)) = check(&request) {
        let _ = stream.write_all(&request.reject(status, &[], &body));
        let _ = stream.flush();
        return Err(Error::Rejected(status));
    }
    let accepted = match request.accept(&config.handshake) {
        Ok(a) => a,
        Err(e) => {
            let _ = stream.write_all(&e.response());
            let _ = stream.flush();
            return Err(Error::ServerHandshake(e));
        }
    };
    stream.write_all(&accepted.response)?;
    stream.flush()?;
    Ok(WebSocket::open(
        stream,
        Role::Server,
        &config.connection,
        Instant::now(),
        #[cfg(feature = "deflate")]
        accepted.deflate.zip(config.handshake.deflate.as_ref()),
        &accepted.leftover,
        accepted.subprotocol,
    ))
}
