//! TCP plumbing: what the layer needs of a stream ([`Transport`]), resolving and
//! connecting with a timeout, and the one read helper every handshake uses.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::config::ClientConfig;
use crate::error::Error;

/// What the blocking layer needs of a stream besides `Read + Write`: shutting its write
/// half down (RFC 6455 7.1.1's teardown: a TCP FIN, with TLS a close_notify first), and
/// its read and write timeouts, which the layer shortens while a deadline of the
/// connection comes sooner (the keepalive, the close handshake, the teardown; for a write
/// the send timeout), so that these run within a blocking `read` or `send` as they do in
/// the tokio layer.
///
/// Implemented for `TcpStream`, `UnixStream`, rustls's `StreamOwned` over a transport
/// (feature `rustls`), and mutable references and boxes of them. For another stream,
/// say what it can do: one that cannot shut down or time out keeps the defaults, and the
/// connection's deadlines then run when a read returns.
pub trait Transport: Read + Write {
    /// Shuts the write half down. Default: nothing (the stream closes when dropped).
    fn shutdown_write(&mut self) -> io::Result<()> {
        Ok(())
    }
    /// The current read timeout. Default: `None`.
    fn read_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(None)
    }
    /// Sets the read timeout. Default: unsupported (an error, and the layer leaves it).
    fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        let _ = timeout;
        Err(io::ErrorKind::Unsupported.into())
    }
    /// The current write timeout. Default: `None`.
    fn write_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(None)
    }
    /// Sets the write timeout. Default: unsupported (an error, and the layer leaves it: a
    /// write to a peer that stopped reading then blocks until the transport gives up).
    fn set_write_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        let _ = timeout;
        Err(io::ErrorKind::Unsupported.into())
    }
}

impl Transport for TcpStream {
    fn shutdown_write(&mut self) -> io::Result<()> {
        self.shutdown(Shutdown::Write)
    }
    fn read_timeout(&self) -> io::Result<Option<Duration>> {
        TcpStream::read_timeout(self)
    }
    fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        TcpStream::set_read_timeout(self, timeout)
    }
    fn write_timeout(&self) -> io::Result<Option<Duration>> {
        TcpStream::write_timeout(self)
    }
    fn set_write_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        TcpStream::set_write_timeout(self, timeout)
    }
}

#[cfg(unix)]
impl Transport for std::os::unix::net::UnixStream {
    fn shutdown_write(&mut self) -> io::Result<()> {
        self.shutdown(Shutdown::Write)
    }
    fn read_timeout(&self) -> io::Result<Option<Duration>> {
        std::os::unix::net::UnixStream::read_timeout(self)
    }
    fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        std::os::unix::net::UnixStream::set_read_timeout(self, timeout)
    }
    fn write_timeout(&self) -> io::Result<Option<Duration>> {
        std::os::unix::net::UnixStream::write_timeout(self)
    }
    fn set_write_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        std::os::unix::net::UnixStream::set_write_timeout(self, timeout)
    }
}

/// Both rustls streams, client and server: the close_notify goes out before the FIN.
#[cfg(feature = "rustls")]
impl<C, S, T> Transport for rustls::StreamOwned<C, T>
where
    C: std::ops::DerefMut + std::ops::Deref<Target = rustls::ConnectionCommon<S>>,
    S: rustls::SideData,
    T: Transport,
{
    fn shutdown_write(&mut self) -> io::Result<()> {
        self.conn.send_close_notify();
        self.flush()?;
        self.sock.shutdown_write()
    }
    fn read_timeout(&self) -> io::Result<Option<Duration>> {
        self.sock.read_timeout()
    }
    fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.sock.set_read_timeout(timeout)
    }
    fn write_timeout(&self) -> io::Result<Option<Duration>> {
        self.sock.write_timeout()
    }
    fn set_write_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.sock.set_write_timeout(timeout)
    }
}

/// A transport through a pointer to one: each call goes to the transport pointed to.
macro_rules! transport_through {
    ($($pointer:ty),*) => {$(
        impl<T: Transport + ?Sized> Transport for $pointer {
            fn shutdown_write(&mut self) -> io::Result<()> {
                (**self).shutdown_write()
            }
            fn read_timeout(&self) -> io::Result<Option<Duration>> {
                (**self).read_timeout()
            }
            fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
                (**self).set_read_timeout(timeout)
            }
            fn write_timeout(&self) -> io::Result<Option<Duration>> {
                (**self).write_timeout()
            }
            fn set_write_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
                (**self).set_write_timeout(timeout)
            }
        }
    )*};
}

transport_through!(&mut T, Box<T>);

/// Bytes read from the socket per call while a handshake is in progress.
const HANDSHAKE_READ: usize = 2048;

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

/// Reads `stream` into a handshake's `feed` until it has a whole head: what it made of
/// it, or its error in the inner `Err` (for the caller to answer); the outer `Err` is
/// the stream's, an end of stream before the head is whole included.
pub(super) fn read_head<S: Read, T, E>(
    stream: &mut S,
    mut feed: impl FnMut(&[u8]) -> Result<Option<T>, E>,
) -> io::Result<Result<T, E>> {
    let mut buf = [0u8; HANDSHAKE_READ];
    loop {
        let n = read_some(stream, &mut buf)?;
        if let Some(head) = feed(&buf[..n]).transpose() {
            return Ok(head);
        }
    }
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
