//! Client side: URL, DNS, TCP connect and the opening handshake.

use std::io;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::codec::Role;
use crate::config::ClientConfig;
use crate::connection::Connection;
use crate::error::{Error, Timeout};
use crate::handshake::ClientHandshake;
use crate::url::{UrlError, WsUrl};

use super::net::connect_tcp;
use super::ws::WebSocket;

/// Connects to a `ws://host[:port]/path` URL: resolves the host, connects over TCP (within
/// [`ClientConfig::connect_timeout`], trying each address), sets `TCP_NODELAY`, and runs
/// the opening handshake (within the handshake timeout), offering the configured
/// subprotocols and permessage-deflate. With feature `proxy`, the connection goes
/// through the proxy its configuration names for the host, if any.
///
/// A server's refusal comes back as [`Error::ClientHandshake`] holding
/// [`ClientError::Status`](crate::handshake::ClientError::Status) with the response.
/// For `wss://`, connect your own TLS stream and call [`client_handshake`].
pub async fn connect(url: &str, config: &ClientConfig) -> Result<WebSocket<TcpStream>, Error> {
    let url = WsUrl::parse(url)?;
    if url.secure {
        return Err(Error::Url(UrlError::TlsUnavailable));
    }
    let stream = open_stream(&url.host, url.port, false, config).await?;
    client_handshake(stream, &url.host_header(), &url.resource, config).await
}

/// Opens the byte stream to `host:port` for a client: directly, or through the proxy the
/// configuration names for it (feature `proxy`; `secure` tells which environment
/// variable applies). Everything up to a usable stream happens within the connect
/// timeout.
pub(crate) async fn open_stream(
    host: &str,
    port: u16,
    secure: bool,
    config: &ClientConfig,
) -> Result<TcpStream, Error> {
    #[cfg(not(feature = "proxy"))]
    let _ = secure;
    #[cfg(feature = "proxy")]
    if let Some(server) = config.proxy.for_target(host, secure)? {
        let max_head = config.proxy.max_response_head();
        let attempt = async {
            let mut stream = connect_tcp(
                server.host(),
                server.port(),
                config.connect_timeout,
                config.nodelay,
            )
            .await?;
            super::proxy::open_tunnel(&mut stream, &server, host, port, max_head).await?;
            Ok::<_, Error>(stream)
        };
        return tokio::time::timeout(config.connect_timeout, attempt)
            .await
            .map_err(|_| Error::Timeout(Timeout::Connect))?;
    }
    connect_tcp(host, port, config.connect_timeout, config.nodelay).await
}

/// Runs the client side of the opening handshake on an already connected `stream`, for
/// `host` (the `Host` header) and `path` (with query), within the handshake timeout.
pub async fn client_handshake<S>(
    stream: S,
    host: &str,
    path: &str,
    config: &ClientConfig,
) -> Result<WebSocket<S>, Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let handshake = handshake(stream, host, path, config);
    match config.handshake_timeout {
        Some(t) => tokio::time::timeout(t, handshake)
            .await
            .map_err(|_| Error::Timeout(Timeout::Handshake))?,
        None => handshake.await,
    }
}

async fn handshake<S>(
    mut stream: S,
    host: &str,
    path: &str,
    config: &ClientConfig,
) -> Result<WebSocket<S>, Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let request = config.request(host, path);
    let (mut hs, bytes) =
        ClientHandshake::new(&request, config.handshake.clone()).map_err(Error::ClientHandshake)?;
    stream.write_all(&bytes).await?;
    stream.flush().await?;
    let mut buf = vec![0u8; 2048];
    let upgraded = loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Err(Error::Io(io::ErrorKind::UnexpectedEof.into()));
        }
        match hs.feed(&buf[..n]) {
            Ok(None) => {}
            Ok(Some(u)) => break u,
            Err(e) => return Err(Error::ClientHandshake(e)),
        }
    };
    drop(buf);
    let conn = Connection::open(
        Role::Client,
        Arc::new(config.connection.clone()),
        super::engine::now(),
        #[cfg(feature = "deflate")]
        upgraded.deflate.zip(config.handshake.deflate.as_ref()),
    );
    #[cfg(feature = "tracing")]
    tracing::debug!(
        target: "rapidws::tokio",
        role = "client",
        subprotocol = upgraded.subprotocol.as_deref(),
        "websocket open"
    );
    Ok(WebSocket::from_connection(
        stream,
        conn,
        &upgraded.leftover,
        upgraded.subprotocol,
    ))
}
