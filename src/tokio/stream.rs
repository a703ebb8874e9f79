//! [`MaybeTlsStream`]: the one stream type of a client connection, `ws://` or `wss://`.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The stream under a client connection that [`connect`](super::connect) opened: plain for
/// `ws://`, TLS for `wss://` (feature `tokio-rustls`). One type for both schemes, so a
/// client that takes either URL (from configuration, or reconnecting with
/// [`Reconnect`](super::Reconnect)) holds one `WebSocket<MaybeTlsStream<TcpStream>>`.
///
/// The TLS stream is boxed: a plain connection does not carry the size of a TLS session.
#[derive(Debug)]
#[non_exhaustive]
pub enum MaybeTlsStream<S> {
    /// A `ws://` connection.
    Plain(S),
    /// A `wss://` connection over rustls.
    #[cfg(feature = "tokio-rustls")]
    Rustls(Box<tokio_rustls::client::TlsStream<S>>),
}

impl<S> MaybeTlsStream<S> {
    /// Whether the connection runs over TLS.
    pub fn is_tls(&self) -> bool {
        !matches!(self, MaybeTlsStream::Plain(_))
    }

    /// The transport under TLS, or the plain stream (for its addresses, say).
    pub fn get_ref(&self) -> &S {
        match self {
            MaybeTlsStream::Plain(s) => s,
            #[cfg(feature = "tokio-rustls")]
            MaybeTlsStream::Rustls(s) => s.get_ref().0,
        }
    }

    /// The transport under TLS, or the plain stream, mutably: for its socket options.
    /// Reading from it or writing to it directly would cut into the connection's bytes.
    pub fn get_mut(&mut self) -> &mut S {
        match self {
            MaybeTlsStream::Plain(s) => s,
            #[cfg(feature = "tokio-rustls")]
            MaybeTlsStream::Rustls(s) => s.get_mut().0,
        }
    }

    /// The TLS session (negotiated ALPN protocol, the peer's certificates, ...), for a
    /// `wss://` connection.
    #[cfg(feature = "tokio-rustls")]
    pub fn tls(&self) -> Option<&tokio_rustls::rustls::ClientConnection> {
        match self {
            MaybeTlsStream::Plain(_) => None,
            MaybeTlsStream::Rustls(s) => Some(s.get_ref().1),
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for MaybeTlsStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTlsStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            #[cfg(feature = "tokio-rustls")]
            MaybeTlsStream::Rustls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for MaybeTlsStream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            MaybeTlsStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            #[cfg(feature = "tokio-rustls")]
            MaybeTlsStream::Rustls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            MaybeTlsStream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            #[cfg(feature = "tokio-rustls")]
            MaybeTlsStream::Rustls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            MaybeTlsStream::Plain(s) => s.is_write_vectored(),
            #[cfg(feature = "tokio-rustls")]
            MaybeTlsStream::Rustls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTlsStream::Plain(s) => Pin::new(s).poll_flush(cx),
            #[cfg(feature = "tokio-rustls")]
            MaybeTlsStream::Rustls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTlsStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            #[cfg(feature = "tokio-rustls")]
            MaybeTlsStream::Rustls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
