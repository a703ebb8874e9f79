//! Server side: the opening handshake over any stream, and a TCP accept loop.

use std::future::Future;
use std::io;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::codec::Role;
use crate::config::ServerConfig;
use crate::connection::{Config, Connection};
#[cfg(feature = "deflate")]
use crate::deflate::{DeflateConfig, DeflateParams};
use crate::error::{Error, Timeout};
use crate::handshake::{Request, ServerHandshake};

use super::net::Acceptor;
use super::ws::WebSocket;

/// An application's refusal of an upgrade request (after routing or authentication).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reject {
    /// The HTTP status to answer with, 300..=599 (anything else becomes 500).
    pub status: u16,
    /// A plain-text body.
    pub body: String,
}

impl Reject {
    /// A refusal with `status` and `body`.
    pub fn new(status: u16, body: impl Into<String>) -> Self {
        Reject {
            status,
            body: body.into(),
        }
    }
}

/// Runs the server side of the opening handshake on `stream` within the configured
/// handshake timeout, accepting every valid request.
///
/// A request the handshake must refuse (malformed, wrong version, ...) is answered with
/// the matching HTTP error response before this returns [`Error::ServerHandshake`].
pub async fn accept<S>(stream: S, config: &ServerConfig) -> Result<WebSocket<S>, Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    accept_with(stream, config, |_| Ok(())).await
}

/// [`accept`], letting `check` inspect the request (path, headers, origin) first and
/// refuse it with an HTTP status; the refusal is sent and [`Error::Rejected`] returned.
pub async fn accept_with<S, F>(
    stream: S,
    config: &ServerConfig,
    check: F,
) -> Result<WebSocket<S>, Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
    F: FnOnce(&Request) -> Result<(), Reject>,
{
    accept_shared(stream, config, check, None).await
}

/// [`accept_with`], the connection's settings shared with others when given (an accept
/// loop's connections all run with the same).
async fn accept_shared<S, F>(
    stream: S,
    config: &ServerConfig,
    check: F,
    shared: Option<&Arc<Config>>,
) -> Result<WebSocket<S>, Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
    F: FnOnce(&Request) -> Result<(), Reject>,
{
    let handshake = handshake(stream, config, check, shared);
    match config.handshake_timeout {
        Some(t) => tokio::time::timeout(t, handshake)
            .await
            .map_err(|_| Error::Timeout(Timeout::Handshake))?,
        None => handshake.await,
    }
}

async fn handshake<S, F>(
    mut stream: S,
    config: &ServerConfig,
    check: F,
    shared: Option<&Arc<Config>>,
) -> Result<WebSocket<S>, Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
    F: FnOnce(&Request) -> Result<(), Reject>,
{
    let mut hs = ServerHandshake::new(&config.handshake);
    let mut buf = vec![0u8; 2048];
    let request = loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Err(Error::Io(io::ErrorKind::UnexpectedEof.into()));
        }
        match hs.feed(&buf[..n]) {
            Ok(None) => {}
            Ok(Some(request)) => break request,
            Err(e) => {
                refuse(&mut stream, &e.response()).await;
                return Err(Error::ServerHandshake(e));
            }
        }
    };
    drop(buf);
    if let Err(reject) = check(&request) {
        refuse(
            &mut stream,
            &request.reject(reject.status, &[], &reject.body),
        )
        .await;
        return Err(Error::Rejected(reject.status));
    }
    let accepted = match request.accept(&config.handshake) {
        Ok(a) => a,
        Err(e) => {
            refuse(&mut stream, &e.response()).await;
            return Err(Error::ServerHandshake(e));
        }
    };
    stream.write_all(&accepted.response).await?;
    stream.flush().await?;
    Ok(open_server(
        stream,
        shared.map_or_else(|| Arc::new(config.connection.clone()), Arc::clone),
        #[cfg(feature = "deflate")]
        accepted.deflate.zip(config.handshake.deflate.as_ref()),
        &accepted.leftover,
        accepted.subprotocol,
    ))
}

/// The server end of a connection whose handshake was accepted (by [`accept`] or by an
/// HTTP server such as hyper): the core connection with the agreed permessage-deflate
/// parameters and the server's deflate settings, wrapped for tokio.
pub(crate) fn open_server<S>(
    stream: S,
    connection: Arc<Config>,
    #[cfg(feature = "deflate")] deflate: Option<(DeflateParams, &DeflateConfig)>,
    leftover: &[u8],
    subprotocol: Option<String>,
) -> WebSocket<S>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let conn = Connection::open(
        Role::Server,
        connection,
        super::engine::now(),
        #[cfg(feature = "deflate")]
        deflate,
    );
    #[cfg(feature = "tracing")]
    tracing::debug!(
        target: "rapidws::tokio",
        role = "server",
        subprotocol = subprotocol.as_deref(),
        "websocket open"
    );
    WebSocket::from_connection(stream, conn, leftover, subprotocol)
}

/// Sends a refusal and closes; the peer may be gone already, which changes nothing.
async fn refuse<S: AsyncWrite + Unpin>(stream: &mut S, response: &[u8]) {
    let _ = stream.write_all(response).await;
    let _ = stream.shutdown().await;
}

/// Accepts TCP connections on `listener` forever, runs the handshake on each (within the
/// handshake timeout) and hands every opened connection to `handler` on its own task.
///
/// At most [`ServerConfig::max_connections`] connections (handshaking or open) are handled
/// at once; past that, new connections wait in the listen backlog. Refused handshakes get
/// their HTTP response and are dropped; use [`accept`] yourself to see those errors.
/// `TCP_NODELAY` is set on every connection (this layer batches its own writes). Errors
/// from `accept` that concern one connection are skipped; others (out of file
/// descriptors) pause the loop briefly.
pub async fn serve<F, Fut>(
    listener: TcpListener,
    config: ServerConfig,
    handler: F,
) -> io::Result<()>
where
    F: Fn(WebSocket<TcpStream>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let acceptor = Acceptor::new(listener, config.max_connections);
    let shared = Arc::new(config.connection.clone());
    let config = Arc::new(config);
    let handler = Arc::new(handler);
    loop {
        let (stream, _, permit) = acceptor.next().await?;
        let config = config.clone();
        let shared = shared.clone();
        let handler = handler.clone();
        tokio::spawn(async move {
            let _permit = permit;
            // Both futures are boxed so that the task itself stays small and neither is
            // stored twice: awaited inline, the handshake's state and the `WebSocket` it
            // returns would each take room in the task next to the handler's future
            // (which holds its own copy of the `WebSocket`) for the connection's whole
            // life. The handshake's box is freed once it is done.
            // (The `WebSocket` is moved into the handler's box in a statement of its own,
            // so no local holding it lives across an await.)
            let accepted = accept_shared(stream, &config, |_| Ok(()), Some(&shared));
            let run = match Box::pin(accepted).await {
                Ok(ws) => Box::pin(handler(ws)),
                Err(_) => return,
            };
            run.await;
        });
    }
}
