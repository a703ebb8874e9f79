//! TCP plumbing for the client and server helpers: resolve, connect, accept with a limit.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream, lookup_host};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use crate::codec::Role;
use crate::connection::{Config, Shutdown};
use crate::error::{Error, Timeout};
use crate::handshake::Negotiated;

use super::ws::WebSocket;

/// Resolves `host` and connects to the first address that answers, all within
/// `timeout` (else [`Timeout::Connect`]); sets `TCP_NODELAY` when asked.
pub(crate) async fn connect_tcp(
    host: &str,
    port: u16,
    timeout: Duration,
    nodelay: bool,
) -> Result<TcpStream, Error> {
    let attempt = async {
        let mut last_err = None;
        for addr in lookup_host((host, port)).await? {
            match TcpStream::connect(addr).await {
                Ok(stream) => return Ok(stream),
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.unwrap_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, "host name resolved to no address")
        }))
    };
    let stream = tokio::time::timeout(timeout, attempt)
        .await
        .map_err(|_| Error::Timeout(Timeout::Connect))??;
    if nodelay {
        stream.set_nodelay(true)?;
    }
    Ok(stream)
}

/// A TCP listener that lets at most a given number of connections in at once: the accept
/// loop of [`serve`](super::serve) and of [`serve_handler`](crate::handler::serve_handler).
pub(crate) struct Acceptor {
    listener: TcpListener,
    slots: Arc<Semaphore>,
}

impl Acceptor {
    /// Accepts on `listener`, `max_connections` (at least 1) at once.
    pub(crate) fn new(listener: TcpListener, max_connections: usize) -> Self {
        Acceptor {
            listener,
            slots: Arc::new(Semaphore::new(max_connections.max(1))),
        }
    }

    /// Waits for a free slot, then for the next connection; the slot is held until the
    /// permit is dropped. Past the limit, new connections wait in the listen backlog.
    /// `TCP_NODELAY` is set (this layer batches its own writes). Errors from `accept` that
    /// concern one connection are skipped; others (out of file descriptors) pause the loop
    /// for [`ACCEPT_BACKOFF`].
    pub(crate) async fn next(&self) -> io::Result<(TcpStream, SocketAddr, OwnedSemaphorePermit)> {
        let permit = self
            .slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| io::Error::other("connection limit closed"))?;
        loop {
            match self.listener.accept().await {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    return Ok((stream, peer, permit));
                }
                Err(e) if is_transient_accept_error(&e) => {}
                Err(_) => tokio::time::sleep(ACCEPT_BACKOFF).await,
            }
        }
    }

    /// The accept loop of both servers: `open` makes the task of each accepted
    /// connection (from its stream, its peer's address and its slot), spawned on its own.
    ///
    /// Without a shutdown signal it runs forever, its tasks detached. With one
    /// ([`Config::shutdown`](crate::connection::Config::shutdown)) it runs until the signal
    /// is given: then the listener is dropped (nothing more is accepted; what waits in the
    /// backlog is refused) and the loop returns once every task has ended, the
    /// connections having gone away, or `limit` after the signal, the tasks left then
    /// aborted (their connections dropped).
    pub(crate) async fn run<T>(
        self,
        shutdown: Option<&Shutdown>,
        limit: Option<Duration>,
        mut open: impl FnMut(TcpStream, SocketAddr, OwnedSemaphorePermit) -> T,
    ) -> io::Result<()>
    where
        T: Future<Output = ()> + Send + 'static,
    {
        let Some(shutdown) = shutdown else {
            loop {
                let (stream, peer, permit) = self.next().await?;
                tokio::spawn(open(stream, peer, permit));
            }
        };
        // Held to be reaped as they end (the set holds one entry per live connection),
        // waited for at the signal, and aborted if the loop is dropped.
        let mut tasks = JoinSet::new();
        let mut signal = shutdown.triggered();
        loop {
            tokio::select! {
                biased;
                () = &mut signal => break,
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
                accepted = self.next() => {
                    let (stream, peer, permit) = accepted?;
                    // Accepted while the signal was being given: refused (dropped) too.
                    if shutdown.is_triggered() {
                        break;
                    }
                    tasks.spawn(open(stream, peer, permit));
                }
            }
        }
        drop(self);
        let ended = async { while tasks.join_next().await.is_some() {} };
        match limit {
            Some(limit) => {
                if tokio::time::timeout(limit, ended).await.is_err() {
                    tasks.shutdown().await;
                }
            }
            None => ended.await,
        }
        Ok(())
    }
}

/// Whether an `accept` error concerns only the one connection (the listener is fine).
fn is_transient_accept_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    )
}

/// Reads `stream` into a handshake's `feed` until it has a whole head: what it made of
/// it, or its error in the inner `Err` (for the caller to answer); the outer `Err` is
/// the stream's, an end of stream before the head is whole included.
pub(crate) async fn read_head<S, T, E>(
    stream: &mut S,
    mut feed: impl FnMut(&[u8]) -> Result<Option<T>, E>,
) -> io::Result<Result<T, E>>
where
    S: tokio::io::AsyncRead + Unpin,
{
    use tokio::io::AsyncReadExt;
    // On the heap, so that a handshake's future stays small.
    let mut buf = vec![0u8; 2048];
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        if let Some(head) = feed(&buf[..n]).transpose() {
            return Ok(head);
        }
    }
}

/// Opens the connection once this layer's opening handshake has agreed `negotiated`,
/// logging it (feature `tracing`).
pub(crate) fn open_after_handshake<S>(
    stream: S,
    role: Role,
    settings: Arc<Config>,
    negotiated: Negotiated,
    leftover: &[u8],
) -> WebSocket<S>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    #[cfg(feature = "tracing")]
    tracing::debug!(
        target: "rapidws::tokio",
        role = match role {
            Role::Client => "client",
            Role::Server => "server",
        },
        subprotocol = negotiated.subprotocol(),
        deflate = negotiated.is_deflate(),
        "websocket open"
    );
    super::ws::open_with(stream, role, settings, negotiated, leftover)
}

/// Pause after an `accept` error that is not per-connection (out of file descriptors or
/// memory), so the loop does not spin while the condition lasts.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Runs `work` within `limit` (no limit: `None`); past it, the handshake timed out.
pub(crate) async fn within<T>(
    limit: Option<Duration>,
    work: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    match limit {
        Some(t) => tokio::time::timeout(t, work)
            .await
            .map_err(|_| Error::Timeout(Timeout::Handshake))?,
        None => work.await,
    }
}
