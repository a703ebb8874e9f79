//! Server side: the opening handshake over any stream, and a TCP accept loop.

use std::future::Future;
use std::io;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::codec::Role;
use crate::config::ServerConfig;
use crate::connection::Config;
use crate::error::Error;
use crate::handshake::{Negotiated, Reject, Request, ResponseHeaders, ServerHandshake};

use super::net::Acceptor;
use super::ws::WebSocket;

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

/// [`accept`], letting `check` inspect the request (path, headers, origin, offered
/// subprotocols) first. It refuses with an HTTP status ([`Reject`]): the refusal is sent
/// and [`Error::Rejected`] returned; or it accepts, returning `()` or header fields to add
/// to the 101 response ([`ResponseHeaders`]).
///
/// ```no_run
/// use rapidws::tokio::{Reject, ServerConfig, accept_with};
///
/// # async fn run(stream: tokio::net::TcpStream) -> Result<(), rapidws::Error> {
/// let ws = accept_with(stream, &ServerConfig::default(), |request| {
///     if request.header("authorization") != Some(&b"Bearer t0ken"[..]) {
///         return Err(Reject::new(401, "who are you?"));
///     }
///     Ok(vec![("Set-Cookie", "session=42")])
/// })
/// .await?;
/// # Ok(())
/// # }
/// ```
pub async fn accept_with<S, F, H>(
    stream: S,
    config: &ServerConfig,
    check: F,
) -> Result<WebSocket<S>, Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
    F: FnOnce(&Request) -> Result<H, Reject>,
    H: ResponseHeaders,
{
    accept_shared(async { Ok(stream) }, config, check, None).await
}

/// [`accept_with`] on the stream `open` gives (after a TLS handshake, say), the two within
/// the handshake timeout; the connection's settings are shared with others when given
/// (an accept loop's connections all run with the same).
async fn accept_shared<S, O, F, H>(
    open: O,
    config: &ServerConfig,
    check: F,
    shared: Option<&Arc<Config>>,
) -> Result<WebSocket<S>, Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
    O: Future<Output = Result<S, Error>>,
    F: FnOnce(&Request) -> Result<H, Reject>,
    H: ResponseHeaders,
{
    super::net::within(config.handshake_timeout, async {
        let mut stream = open.await?;
        let mut hs = ServerHandshake::new(&config.handshake);
        let request = match super::net::read_head(&mut stream, |b| hs.feed(b)).await? {
            Ok(request) => request,
            Err(e) => {
                refuse(&mut stream, &e.response()).await;
                return Err(Error::ServerHandshake(e));
            }
        };
        let accepted = match request.decide(&config.handshake, check) {
            Ok(a) => a,
            Err(r) => {
                refuse(&mut stream, &r.response).await;
                return Err(r.reason.into());
            }
        };
        stream.write_all(&accepted.response).await?;
        stream.flush().await?;
        let negotiated = accepted.negotiated(&config.handshake);
        let settings = shared.map_or_else(|| Arc::new(config.connection.clone()), Arc::clone);
        Ok(super::net::open_after_handshake(
            stream,
            Role::Server,
            settings,
            negotiated,
            &accepted.leftover,
        ))
    })
    .await
}

/// Opens a connection over `io` whose opening handshake ran elsewhere (your own HTTP
/// server or client, a proxy): `role` is this end's, `config` the connection's settings,
/// `negotiated` what the handshake agreed (subprotocol, permessage-deflate parameters with
/// this end's deflate settings), `leftover` the bytes read after the handshake head (the
/// first frames), if any.
///
/// [`WebSocket::from_raw`] is the same with nothing negotiated.
///
/// ```
/// use rapidws::handshake::Negotiated;
/// use rapidws::tokio::{Config, from_handshake};
/// use rapidws::Role;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let (ours, _theirs) = tokio::io::duplex(4096);
/// let negotiated = Negotiated::new().with_subprotocol("chat.v2");
/// let ws = from_handshake(ours, Role::Server, &Config::default(), negotiated, &[]);
/// assert_eq!(ws.subprotocol(), Some("chat.v2"));
/// # }
/// ```
pub fn from_handshake<S>(
    io: S,
    role: Role,
    config: &Config,
    negotiated: Negotiated,
    leftover: &[u8],
) -> WebSocket<S>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    super::ws::open_with(io, role, Arc::new(config.clone()), negotiated, leftover)
}

/// The server end of a connection whose handshake was accepted by an HTTP server such as
/// hyper: the core connection with the agreed permessage-deflate parameters and the
/// server's deflate settings, wrapped for tokio.
#[cfg(feature = "hyper")]
pub(crate) fn open_server<S>(stream: S, connection: &Config, negotiated: Negotiated) -> WebSocket<S>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    #[cfg(feature = "tracing")]
    tracing::debug!(
        target: "rapidws::tokio",
        role = "server",
        subprotocol = negotiated.subprotocol(),
        deflate = negotiated.is_deflate(),
        "websocket open"
    );
    from_handshake(stream, Role::Server, connection, negotiated, &[])
}

/// Sends a refusal and closes; the peer may be gone already, which changes nothing.
async fn refuse<S: AsyncWrite + Unpin>(stream: &mut S, response: &[u8]) {
    let _ = stream.write_all(response).await;
    let _ = stream.shutdown().await;
}

/// Accepts TCP connections on `listener`, runs the handshake on each (within the
/// handshake timeout) and hands every opened connection to `handler` on its own task.
///
/// At most [`ServerConfig::max_connections`] connections (handshaking or open) are handled
/// at once; past that, new connections wait in the listen backlog. Refused handshakes get
/// their HTTP response and are dropped; use [`accept`] yourself to see those errors.
/// `TCP_NODELAY` is set on every connection (this layer batches its own writes). Errors
/// from `accept` that concern one connection are skipped; others (out of file
/// descriptors) pause the loop briefly.
///
/// It runs forever, unless the configuration has a shutdown signal
/// ([`ServerConfig::with_shutdown`]). Once that is given, the listener is dropped (nothing
/// more is accepted), every connection goes away (what it has queued is sent, then a
/// close with 1001, "going away"; the peer's close is awaited within
/// [`Config::close_timeout`]), and `serve` returns `Ok(())` when every handler has
/// returned: within twice the close timeout after the signal (the output's flush and the
/// peer's close within the first, the transport's close within the second), when the
/// handlers' tasks are aborted with their connections. Dropping the future returned by
/// `serve` aborts them too.
///
/// ```no_run
/// use rapidws::tokio::{ServerConfig, Shutdown, WebSocket, serve};
/// use tokio::net::{TcpListener, TcpStream};
///
/// async fn echo(mut ws: WebSocket<TcpStream>) {
///     // At the signal `recv` sends what `send` left queued and the close, and returns
///     // `Ok(None)` once the client has answered.
///     while let Ok(Some(msg)) = ws.recv().await {
///         if msg.is_data() && ws.send(msg).await.is_err() {
///             return;
///         }
///     }
/// }
///
/// # async fn run() -> std::io::Result<()> {
/// let shutdown = Shutdown::new();
/// let listener = TcpListener::bind("127.0.0.1:9001").await?;
/// let config = ServerConfig::default().with_shutdown(&shutdown);
/// let server = tokio::spawn(serve(listener, config, echo));
/// tokio::signal::ctrl_c().await?;
/// shutdown.trigger();
/// server.await??; // every client got its messages and a 1001 close
/// # Ok(())
/// # }
/// ```
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
    let (shutdown, limit) = config.shutdown_limit();
    acceptor
        .run(shutdown.as_ref(), limit, move |stream, _, permit| {
            let config = config.clone();
            let shared = shared.clone();
            let handler = handler.clone();
            async move {
                let _permit = permit;
                // Both futures are boxed so that the task itself stays small and neither
                // is stored twice: awaited inline, the handshake's state and the
                // `WebSocket` it returns would each take room in the task next to the
                // handler's future (which holds its own copy of the `WebSocket`) for the
                // connection's whole life. The handshake's box is freed once it is done.
                // (The `WebSocket` is moved into the handler's box in a statement of its
                // own, so no local holding it lives across an await.)
                let accepted =
                    accept_shared(async { Ok(stream) }, &config, |_| Ok(()), Some(&shared));
                let run = match Box::pin(accepted).await {
                    Ok(ws) => Box::pin(handler(ws)),
                    Err(_) => return,
                };
                run.await;
            }
        })
        .await
}

/// Accepts a `wss://` connection on `stream` (a freshly accepted TCP stream, or any
/// byte stream): the TLS handshake with `acceptor`, then the WebSocket opening handshake
/// (see [`accept`](super::accept)), the two together within
/// [`ServerConfig::handshake_timeout`].
#[cfg(feature = "tokio-rustls")]
pub async fn accept_tls<S>(
    acceptor: &super::TlsAcceptor,
    stream: S,
    config: &ServerConfig,
) -> Result<WebSocket<super::ServerTlsStream<S>>, Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    accept_tls_with(acceptor, stream, config, |_| Ok(())).await
}

/// [`accept_tls`], letting `check` inspect the request (path, headers, origin; the TLS
/// session is established by then) and refuse it with an HTTP status, or accept it adding
/// response headers, as [`accept_with`](super::accept_with) does.
#[cfg(feature = "tokio-rustls")]
pub async fn accept_tls_with<S, F, H>(
    acceptor: &super::TlsAcceptor,
    stream: S,
    config: &ServerConfig,
    check: F,
) -> Result<WebSocket<super::ServerTlsStream<S>>, Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
    F: FnOnce(&Request) -> Result<H, Reject>,
    H: crate::handshake::ResponseHeaders,
{
    let tls = async { Ok(acceptor.accept(stream).await?) };
    accept_shared(tls, config, check, None).await
}
