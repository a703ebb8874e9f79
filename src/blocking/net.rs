//! TCP plumbing for the client: resolve, connect with a timeout, set the socket options;
//! and the one read helper every handshake uses.

use std::io::{self, Read};
use std::net::{TcpStream, ToSocketAddrs};

use crate::config::ClientConfig;
use crate::error::Error;

/// Bytes read from the socket per call while a handshake is in progress.
pub(super) const HANDSHAKE_READ: usize = 2048;

/// TCP to `host:port`, each resolved address in turn, with the socket options set.
pub(super) fn connect_tcp(
    host: &str,
    port: u16,
    config: &ClientConfig,
) -> Result<TcpStream, Error> {
    let mut last = None;
    let mut stream = None;
    for addr in (host, port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, config.connect_timeout) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let stream = match stream {
        Some(s) => s,
        None => {
            return Err(Error::Io(last.unwrap_or_else(|| {
                io::Error::new(io::ErrorKind::NotFound, "host name resolved to no address")
            })));
        }
    };
    stream.set_read_timeout(config.read_timeout)?;
    stream.set_write_timeout(config.write_timeout)?;
    stream.set_nodelay(config.nodelay)?;
    Ok(stream)
}

/// Reads at least one byte; end of stream is `UnexpectedEof`.
pub(super) fn read_some<S: Read>(stream: &mut S, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match stream.read(buf) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}
