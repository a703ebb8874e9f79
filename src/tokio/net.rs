//! TCP plumbing for the client and server helpers: resolve, connect, accept with a limit.

use std::io;
use std::time::Duration;

use tokio::net::{TcpStream, lookup_host};

use super::url::WsUrl;

/// Resolves `url`'s host and connects to the first address that answers, all within
/// `timeout`; sets `TCP_NODELAY` when asked.
pub(crate) async fn connect_tcp(
    url: &WsUrl,
    timeout: Duration,
    nodelay: bool,
) -> io::Result<TcpStream> {
    let attempt = async {
        let mut last_err = None;
        for addr in lookup_host((url.host.as_str(), url.port)).await? {
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
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))??;
    if nodelay {
        stream.set_nodelay(true)?;
    }
    Ok(stream)
}

/// Whether an `accept` error concerns only the one connection (the listener is fine).
pub(crate) fn is_transient_accept_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    )
}

/// Pause after an `accept` error that is not per-connection (out of file descriptors or
/// memory), so the loop does not spin while the condition lasts.
pub(crate) const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
