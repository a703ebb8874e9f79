//! Connecting: [`connect_async`] and its forms, [`MaybeTlsStream`], [`Connector`].

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::WebSocketStream;
use crate::tungstenite::client::{IntoClientRequest, Mode, host_port, uri_mode};
use crate::tungstenite::error::Error;
use crate::tungstenite::handshake::client::Response;
use crate::tungstenite::protocol::WebSocketConfig;

/// A plain or TLS stream, as tokio-tungstenite's.
#[non_exhaustive]
#[derive(Debug)]
// The variants are tokio-tungstenite's: a TLS stream held as it is, not boxed.
#[allow(clippy::large_enum_variant)]
pub enum MaybeTlsStream<S> {
    /// Plain.
    Plain(S),
    /// TLS with rustls (features `rustls-tls-*`).
    #[cfg(feature = "__rustls-tls")]
    Rustls(tokio_rustls::client::TlsStream<S>),
}

impl<S> MaybeTlsStream<S> {
    /// The stream under TLS.
    pub fn get_ref(&self) -> &S {
        match self {
            MaybeTlsStream::Plain(s) => s,
            #[cfg(feature = "__rustls-tls")]
            MaybeTlsStream::Rustls(s) => s.get_ref().0,
        }
    }

    /// The stream under TLS, to change.
    pub fn get_mut(&mut self) -> &mut S {
        match self {
            MaybeTlsStream::Plain(s) => s,
            #[cfg(feature = "__rustls-tls")]
            MaybeTlsStream::Rustls(s) => s.get_mut().0,
        }
    }
}

/// Calls the same method on whichever stream this is.
macro_rules! each {
    ($self:ident, $s:ident => $e:expr) => {
        match $self.get_mut() {
            MaybeTlsStream::Plain($s) => $e,
            #[cfg(feature = "__rustls-tls")]
            MaybeTlsStream::Rustls($s) => $e,
        }
    };
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for MaybeTlsStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        each!(self, s => Pin::new(s).poll_read(cx, buf))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for MaybeTlsStream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        each!(self, s => Pin::new(s).poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        each!(self, s => Pin::new(s).poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            MaybeTlsStream::Plain(s) => s.is_write_vectored(),
            #[cfg(feature = "__rustls-tls")]
            MaybeTlsStream::Rustls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        each!(self, s => Pin::new(s).poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        each!(self, s => Pin::new(s).poll_shutdown(cx))
    }
}

/// How a client opens TLS, as tokio-tungstenite's.
#[non_exhaustive]
#[derive(Clone)]
pub enum Connector {
    /// No TLS: `wss://` URLs are refused.
    Plain,
    /// rustls with this configuration (features `rustls-tls-*`).
    #[cfg(feature = "__rustls-tls")]
    Rustls(std::sync::Arc<tokio_rustls::rustls::ClientConfig>),
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Connector::Plain => f.write_str("Plain"),
            #[cfg(feature = "__rustls-tls")]
            Connector::Rustls(_) => f.write_str("Rustls(..)"),
        }
    }
}

/// Connects to a `ws://` URL (`wss://` with a `rustls-tls-*` feature): TCP, TLS, then the
/// handshake.
pub async fn connect_async<R>(
    request: R,
) -> Result<(WebSocketStream<MaybeTlsStream<TcpStream>>, Response), Error>
where
    R: IntoClientRequest + Unpin,
{
    connect_async_with_config(request, None, false).await
}

/// [`connect_async`] with settings, and `TCP_NODELAY` when `disable_nagle`.
pub async fn connect_async_with_config<R>(
    request: R,
    config: Option<WebSocketConfig>,
    disable_nagle: bool,
) -> Result<(WebSocketStream<MaybeTlsStream<TcpStream>>, Response), Error>
where
    R: IntoClientRequest + Unpin,
{
    connect(request.into_client_request()?, config, disable_nagle, None).await
}

/// [`connect_async_with_config`] with a [`Connector`] for `wss://`.
#[cfg(feature = "__rustls-tls")]
pub async fn connect_async_tls_with_config<R>(
    request: R,
    config: Option<WebSocketConfig>,
    disable_nagle: bool,
    connector: Option<Connector>,
) -> Result<(WebSocketStream<MaybeTlsStream<TcpStream>>, Response), Error>
where
    R: IntoClientRequest + Unpin,
{
    connect(
        request.into_client_request()?,
        config,
        disable_nagle,
        connector,
    )
    .await
}

async fn connect(
    request: crate::tungstenite::handshake::client::Request,
    config: Option<WebSocketConfig>,
    disable_nagle: bool,
    connector: Option<Connector>,
) -> Result<(WebSocketStream<MaybeTlsStream<TcpStream>>, Response), Error> {
    let (host, port) = host_port(request.uri())?;
    let tcp = TcpStream::connect((host.as_str(), port)).await?;
    if disable_nagle {
        tcp.set_nodelay(true)?;
    }
    tls_then_handshake(request, tcp, config, connector).await
}

async fn tls_then_handshake<S>(
    request: crate::tungstenite::handshake::client::Request,
    stream: S,
    config: Option<WebSocketConfig>,
    connector: Option<Connector>,
) -> Result<(WebSocketStream<MaybeTlsStream<S>>, Response), Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let stream = match (uri_mode(request.uri())?, connector) {
        (Mode::Plain, _) => MaybeTlsStream::Plain(stream),
        (Mode::Tls, Some(Connector::Plain)) => MaybeTlsStream::Plain(stream),
        #[cfg(feature = "__rustls-tls")]
        (Mode::Tls, connector) => {
            let config = match connector {
                Some(Connector::Rustls(c)) => c,
                _ => crate::tls::client_config()?,
            };
            let (host, _) = host_port(request.uri())?;
            MaybeTlsStream::Rustls(crate::tls::wrap(stream, &host, config).await?)
        }
        #[cfg(not(feature = "__rustls-tls"))]
        (Mode::Tls, None) => {
            return Err(Error::Url(
                crate::tungstenite::error::UrlError::TlsFeatureNotEnabled,
            ));
        }
    };
    crate::client_async_with_config(request, stream, config).await
}

/// [`client_async`](crate::client_async) on `stream`, with TLS first for `wss://`.
#[cfg(feature = "__rustls-tls")]
pub async fn client_async_tls<R, S>(
    request: R,
    stream: S,
) -> Result<(WebSocketStream<MaybeTlsStream<S>>, Response), Error>
where
    R: IntoClientRequest + Unpin,
    S: AsyncRead + AsyncWrite + Unpin,
{
    client_async_tls_with_config(request, stream, None, None).await
}

/// [`client_async_tls`] with settings and a [`Connector`].
#[cfg(feature = "__rustls-tls")]
pub async fn client_async_tls_with_config<R, S>(
    request: R,
    stream: S,
    config: Option<WebSocketConfig>,
    connector: Option<Connector>,
) -> Result<(WebSocketStream<MaybeTlsStream<S>>, Response), Error>
where
    R: IntoClientRequest + Unpin,
    S: AsyncRead + AsyncWrite + Unpin,
{
    tls_then_handshake(request.into_client_request()?, stream, config, connector).await
}
