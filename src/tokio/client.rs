//! Client side: URL, DNS, TCP connect and the opening handshake.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::codec::Role;
use crate::handshake::{ClientHandshake, ClientRequest};
use crate::layer::{open_connection, with_client_options};

use super::config::ClientConfig;
use super::error::{Error, Timeout};
use super::net::open_stream;
use super::ws::WebSocket;
use crate::url::{UrlError, WsUrl};

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
    match config.connection.handshake_timeout {
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
    let request = with_client_options(
        ClientRequest::new(host, path),
        &config.subprotocols,
        &config.headers,
        config.origin.as_deref(),
    );
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
    let conn = open_connection(
        Role::Client,
        &config.connection.protocol,
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
        &config.connection,
        &upgraded.leftover,
        upgraded.subprotocol,
    ))
}
