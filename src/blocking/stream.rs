//! [`MaybeTlsStream`]: the one stream type of a client connection, `ws://` or `wss://`.

use std::io::{self, IoSlice, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use super::net::Transport;

/// The stream under a client connection that [`connect`](super::connect) opened: plain TCP
/// for `ws://`, rustls over TCP for `wss://` (feature `rustls`). One type for both
/// schemes, as the tokio layer's `MaybeTlsStream`.
///
/// The TLS stream is boxed: a plain connection does not carry the size of a TLS session.
#[derive(Debug)]
#[non_exhaustive]
pub enum MaybeTlsStream {
    /// A `ws://` connection.
    Plain(TcpStream),
    /// A `wss://` connection over rustls.
    #[cfg(feature = "rustls")]
    Rustls(Box<super::TlsStream>),
}

impl MaybeTlsStream {
    /// Whether the connection runs over TLS.
    pub fn is_tls(&self) -> bool {
        !matches!(self, MaybeTlsStream::Plain(_))
    }

    /// The TCP stream (under TLS for `wss://`): its addresses, its timeouts.
    pub fn get_ref(&self) -> &TcpStream {
        match self {
            MaybeTlsStream::Plain(s) => s,
            #[cfg(feature = "rustls")]
            MaybeTlsStream::Rustls(s) => &s.sock,
        }
    }

    /// Sets the TCP socket's read timeout (see [`TcpStream::set_read_timeout`]): how long
    /// a blocking read waits for the peer.
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.get_ref().set_read_timeout(timeout)
    }

    /// Sets the TCP socket's write timeout (see [`TcpStream::set_write_timeout`]).
    pub fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.get_ref().set_write_timeout(timeout)
    }

    /// The TLS session (negotiated ALPN protocol, the peer's certificates, ...), for a
    /// `wss://` connection.
    #[cfg(feature = "rustls")]
    pub fn tls(&self) -> Option<&rustls::ClientConnection> {
        match self {
            MaybeTlsStream::Plain(_) => None,
            MaybeTlsStream::Rustls(s) => Some(&s.conn),
        }
    }
}

impl Read for MaybeTlsStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            MaybeTlsStream::Plain(s) => s.read(buf),
            #[cfg(feature = "rustls")]
            MaybeTlsStream::Rustls(s) => s.read(buf),
        }
    }
}

impl Write for MaybeTlsStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            MaybeTlsStream::Plain(s) => s.write(buf),
            #[cfg(feature = "rustls")]
            MaybeTlsStream::Rustls(s) => s.write(buf),
        }
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        match self {
            MaybeTlsStream::Plain(s) => s.write_vectored(bufs),
            #[cfg(feature = "rustls")]
            MaybeTlsStream::Rustls(s) => s.write_vectored(bufs),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            MaybeTlsStream::Plain(s) => s.flush(),
            #[cfg(feature = "rustls")]
            MaybeTlsStream::Rustls(s) => s.flush(),
        }
    }
}

impl Transport for MaybeTlsStream {
    fn shutdown_write(&mut self) -> io::Result<()> {
        match self {
            MaybeTlsStream::Plain(s) => s.shutdown_write(),
            #[cfg(feature = "rustls")]
            MaybeTlsStream::Rustls(s) => s.shutdown_write(),
        }
    }

    fn read_timeout(&self) -> io::Result<Option<Duration>> {
        self.get_ref().read_timeout()
    }

    fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.get_ref().set_read_timeout(timeout)
    }

    fn write_timeout(&self) -> io::Result<Option<Duration>> {
        self.get_ref().write_timeout()
    }

    fn set_write_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.get_ref().set_write_timeout(timeout)
    }
}
