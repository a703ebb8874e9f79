//! The stream a blocking client connects over: plain TCP, or TLS with a `rustls-tls-*`
//! feature.

use std::io::{self, Read, Write};
use std::net::TcpStream;

use rapidws::blocking::Transport;

use super::error::{Error, Result};

pub use super::client::Mode;

/// A plain or TLS stream.
#[derive(Debug)]
#[non_exhaustive]
// The variants are tungstenite's: a TLS stream held as it is, not boxed.
#[allow(clippy::large_enum_variant)]
pub enum MaybeTlsStream<S: Read + Write> {
    /// Plain.
    Plain(S),
    /// TLS with rustls (features `rustls-tls-*`).
    #[cfg(feature = "__rustls-tls")]
    Rustls(tokio_rustls::rustls::StreamOwned<tokio_rustls::rustls::ClientConnection, S>),
}

impl<S: Read + Write> MaybeTlsStream<S> {
    /// The stream under TLS.
    pub fn get_ref(&self) -> &S {
        match self {
            MaybeTlsStream::Plain(s) => s,
            #[cfg(feature = "__rustls-tls")]
            MaybeTlsStream::Rustls(s) => s.get_ref(),
        }
    }

    /// The stream under TLS, to change.
    pub fn get_mut(&mut self) -> &mut S {
        match self {
            MaybeTlsStream::Plain(s) => s,
            #[cfg(feature = "__rustls-tls")]
            MaybeTlsStream::Rustls(s) => s.get_mut(),
        }
    }
}

impl<S: Read + Write> Read for MaybeTlsStream<S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            MaybeTlsStream::Plain(s) => s.read(buf),
            #[cfg(feature = "__rustls-tls")]
            MaybeTlsStream::Rustls(s) => s.read(buf),
        }
    }
}

impl<S: Read + Write> Write for MaybeTlsStream<S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            MaybeTlsStream::Plain(s) => s.write(buf),
            #[cfg(feature = "__rustls-tls")]
            MaybeTlsStream::Rustls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            MaybeTlsStream::Plain(s) => s.flush(),
            #[cfg(feature = "__rustls-tls")]
            MaybeTlsStream::Rustls(s) => s.flush(),
        }
    }
}

/// Shutdown and timeouts reach the stream under TLS, so the close handshake's teardown
/// and rapidws's deadlines work as on a bare stream.
impl<S: Transport> Transport for MaybeTlsStream<S> {
    fn shutdown_write(&mut self) -> io::Result<()> {
        match self {
            MaybeTlsStream::Plain(s) => s.shutdown_write(),
            #[cfg(feature = "__rustls-tls")]
            MaybeTlsStream::Rustls(s) => {
                s.conn.send_close_notify();
                let _ = s.flush();
                s.sock.shutdown_write()
            }
        }
    }
    fn read_timeout(&self) -> io::Result<Option<std::time::Duration>> {
        self.get_ref().read_timeout()
    }
    fn set_read_timeout(&mut self, t: Option<std::time::Duration>) -> io::Result<()> {
        self.get_mut().set_read_timeout(t)
    }
    fn write_timeout(&self) -> io::Result<Option<std::time::Duration>> {
        self.get_ref().write_timeout()
    }
    fn set_write_timeout(&mut self, t: Option<std::time::Duration>) -> io::Result<()> {
        self.get_mut().set_write_timeout(t)
    }
}

/// TLS over `tcp` for `host`, with the roots the feature chose.
#[cfg(feature = "__rustls-tls")]
pub(crate) fn wrap_tls(tcp: TcpStream, host: &str) -> Result<MaybeTlsStream<TcpStream>> {
    use tokio_rustls::rustls;
    let config = crate::tls::client_config()?;
    let name = rustls::pki_types::ServerName::try_from(host.to_owned())
        .map_err(|_| Error::Tls(super::error::TlsError::InvalidDnsName))?;
    let conn = rustls::ClientConnection::new(config, name).map_err(|e| Error::Tls(e.into()))?;
    Ok(MaybeTlsStream::Rustls(rustls::StreamOwned::new(conn, tcp)))
}

/// Without a TLS feature, `wss://` is refused.
#[cfg(not(feature = "__rustls-tls"))]
pub(crate) fn wrap_tls(_tcp: TcpStream, _host: &str) -> Result<MaybeTlsStream<TcpStream>> {
    Err(Error::Url(super::error::UrlError::TlsFeatureNotEnabled))
}
