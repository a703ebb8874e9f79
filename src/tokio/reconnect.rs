//! [`Reconnect`]: a client that reconnects, with backoff, limits and hooks.

use std::fmt;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::config::ClientConfig;
use crate::error::{Error, Timeout};
use crate::url::WsUrl;

use super::client::connect_url;
use super::stream::MaybeTlsStream;
use super::ws::WebSocket;

/// The connections [`Reconnect`] yields.
pub type ReconnectingWebSocket = WebSocket<MaybeTlsStream<TcpStream>>;

/// Exponential backoff with full jitter: the wait before the `n`-th retry in a row is
/// uniformly random in `0..=min(max, initial * 2^n)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// The cap of the first wait. Default 100 ms.
    pub initial: Duration,
    /// The cap no wait exceeds. Default 30 s.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(30),
        }
    }
}

impl Backoff {
    /// Waits capped by `initial * 2^n`, and never above `max` (`max` is raised to
    /// `initial` if it is smaller).
    pub fn new(initial: Duration, max: Duration) -> Self {
        Backoff {
            initial,
            max: max.max(initial),
        }
    }

    /// The cap of the wait before retry `n` (0-based): `min(max, initial * 2^n)`.
    pub fn cap(&self, n: u32) -> Duration {
        let factor = 1u32.checked_shl(n.min(31)).unwrap_or(u32::MAX);
        self.initial.saturating_mul(factor).min(self.max)
    }

    /// The wait before retry `n` for a uniform random `unit` in `0.0..=1.0`.
    pub fn delay(&self, n: u32, unit: f64) -> Duration {
        self.cap(n).mul_f64(unit.clamp(0.0, 1.0))
    }
}

/// One failed attempt, as [`Reconnect::on_failure`] sees it.
#[derive(Debug)]
#[non_exhaustive]
pub struct Failure<'a> {
    /// Failures in a row so far, this one included (1 for the first).
    pub attempt: u32,
    /// Why it failed: the connect, the TLS or opening handshake, or the
    /// [`on_connect`](Reconnect::on_connect) hook.
    pub error: &'a Error,
    /// How long the client waits before the next attempt; `None` when it gives up.
    pub retry_in: Option<Duration>,
}

/// The hook type of a [`Reconnect`] without an [`on_connect`](Reconnect::on_connect)
/// hook.
pub type NoHook = fn(&mut ReconnectingWebSocket) -> std::future::Ready<Result<(), Error>>;

type FailureHook = Box<dyn FnMut(&Failure<'_>) + Send>;

/// A client that reconnects: [`next`](Self::next) yields a connection each time the
/// previous one is lost, with exponential backoff and full jitter between attempts, a
/// bounded number of attempts and/or a deadline, a hook run on each new connection (to
/// log in and resubscribe), and the reason each attempt failed.
///
/// ```no_run
/// use std::time::Duration;
///
/// use rapidws::tokio::{Backoff, ClientConfig, Reconnect};
///
/// # async fn run() -> Result<(), rapidws::Error> {
/// let mut feed = Reconnect::new("wss://example.com/ticker", ClientConfig::default())?
///     .with_backoff(Backoff::new(Duration::from_millis(100), Duration::from_secs(10)))
///     .with_deadline(Some(Duration::from_secs(60)))
///     .on_failure(|failure| eprintln!("attempt {} failed: {}", failure.attempt, failure.error))
///     // Run on every new connection before it is handed out: log in, resubscribe.
///     .on_connect(async |ws| ws.send_text(r#"{"subscribe":"BTC-USD"}"#).await);
///
/// while let Some(mut ws) = feed.next().await {
///     while let Ok(Some(msg)) = ws.recv().await {
///         // ... handle the message; when the connection is lost, the loop reconnects.
/// #       let _ = msg;
///     }
/// }
/// // Given up: no connection within a minute of losing the last one.
/// if let Some(e) = feed.last_error() {
///     eprintln!("giving up: {e}");
/// }
/// # Ok(())
/// # }
/// ```
///
/// `wss://` URLs need feature `tokio-rustls` (TLS settings: `ClientConfig::with_tls`);
/// a proxy set on the configuration (feature `proxy`) is used for every attempt. Every
/// connection is a `WebSocket<MaybeTlsStream<TcpStream>>`, whatever the scheme.
///
/// # Backoff
///
/// The `n`-th wait (from 0) is a random time between zero and `min(max, initial * 2^n)`
/// ("full jitter"), so that many clients cut off at once by a server restart do not
/// come back in step. The first connection is attempted at once; every attempt after a
/// failure, and the first after a connection was lost, waits. The waits start again
/// from `n = 0` only when a lost connection had lived at least
/// [`Reconnect::with_stable_after`] (default 10 s): a server that accepts and drops
/// every connection is retried with growing waits, not in a tight loop.
pub struct Reconnect<H = NoHook> {
    url: WsUrl,
    config: ClientConfig,
    backoff: Backoff,
    max_attempts: Option<u32>,
    deadline: Option<Duration>,
    stable_after: Duration,
    on_connect: H,
    on_failure: Option<FailureHook>,
    /// Failed attempts in a row since the last connection was handed out.
    failures: u32,
    /// The exponent of the next wait: waits since the backoff last started afresh.
    level: u32,
    /// When the last connection was handed out; `None` before the first.
    connected_at: Option<Instant>,
    last_error: Option<Error>,
    done: bool,
    rng: u64,
}

impl<H> fmt::Debug for Reconnect<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reconnect")
            .field("url", &self.url)
            .field("backoff", &self.backoff)
            .field("max_attempts", &self.max_attempts)
            .field("deadline", &self.deadline)
            .field("failures", &self.failures)
            .field("last_error", &self.last_error)
            .finish_non_exhaustive()
    }
}

fn no_hook(_: &mut ReconnectingWebSocket) -> std::future::Ready<Result<(), Error>> {
    std::future::ready(Ok(()))
}

impl Reconnect<NoHook> {
    /// A reconnecting client for `url` (`ws://`, or `wss://` with feature
    /// `tokio-rustls`) with `config`; the URL is checked here. Defaults: [`Backoff`]'s,
    /// unlimited attempts, no deadline, no hooks.
    pub fn new(url: impl AsRef<str>, config: ClientConfig) -> Result<Self, Error> {
        let url = WsUrl::parse(url.as_ref())?;
        #[cfg(not(feature = "tokio-rustls"))]
        if url.secure {
            return Err(Error::Url(crate::url::UrlError::TlsUnavailable));
        }
        Ok(Reconnect {
            url,
            config,
            backoff: Backoff::default(),
            max_attempts: None,
            deadline: None,
            stable_after: Duration::from_secs(10),
            on_connect: no_hook,
            on_failure: None,
            failures: 0,
            level: 0,
            connected_at: None,
            last_error: None,
            done: false,
            rng: seed(),
        })
    }
}

impl<H> Reconnect<H> {
    /// Sets the backoff between attempts.
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Gives up after this many failed attempts in a row (`None`: never; `Some(0)` is
    /// taken as 1).
    pub fn with_max_attempts(mut self, attempts: Option<u32>) -> Self {
        self.max_attempts = attempts.map(|n| n.max(1));
        self
    }

    /// Gives up when no connection could be made within this time of the call to
    /// [`next`](Self::next) that started trying (`None`: never). No attempt starts past
    /// it, and one in progress when it passes is abandoned
    /// ([`Error::Timeout`]`(`[`Timeout::Connect`]`)`).
    pub fn with_deadline(mut self, deadline: Option<Duration>) -> Self {
        self.deadline = deadline;
        self
    }

    /// How long a connection must have lived for its loss to start the backoff afresh
    /// (default 10 s). A shorter-lived one counts as one more failure in a row.
    pub fn with_stable_after(mut self, stable_after: Duration) -> Self {
        self.stable_after = stable_after;
        self
    }

    /// Calls `hook` with each failed attempt: its number in a row, the error, and the wait
    /// before the next one.
    pub fn on_failure<F>(mut self, hook: F) -> Self
    where
        F: FnMut(&Failure<'_>) + Send + 'static,
    {
        self.on_failure = Some(Box::new(hook));
        self
    }

    /// Runs `hook` on every new connection before [`next`](Self::next) hands it out: log
    /// in, resubscribe. An error from it counts as a failed attempt (the connection is
    /// dropped and the client backs off).
    pub fn on_connect<H2>(self, hook: H2) -> Reconnect<H2>
    where
        H2: AsyncFnMut(&mut ReconnectingWebSocket) -> Result<(), Error>,
    {
        Reconnect {
            url: self.url,
            config: self.config,
            backoff: self.backoff,
            max_attempts: self.max_attempts,
            deadline: self.deadline,
            stable_after: self.stable_after,
            on_connect: hook,
            on_failure: self.on_failure,
            failures: self.failures,
            level: self.level,
            connected_at: self.connected_at,
            last_error: self.last_error,
            done: self.done,
            rng: self.rng,
        }
    }

    /// The error of the last failed attempt; after [`next`](Self::next) returned `None`,
    /// why the client gave up.
    pub fn last_error(&self) -> Option<&Error> {
        self.last_error.as_ref()
    }

    /// Takes the error of the last failed attempt.
    pub fn take_last_error(&mut self) -> Option<Error> {
        self.last_error.take()
    }

    /// Failed attempts in a row since the last connection was handed out.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// The URL connected to.
    pub fn url(&self) -> &WsUrl {
        &self.url
    }

    /// A uniform random number in `0.0..=1.0` (xorshift64*, seeded from the OS).
    fn unit(&mut self) -> f64 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let x = self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d);
        (x >> 11) as f64 / ((1u64 << 53) - 1) as f64
    }
}

impl<H> Reconnect<H>
where
    H: AsyncFnMut(&mut ReconnectingWebSocket) -> Result<(), Error>,
{
    /// The next connection: at once the first time, then after the backoff; `None` once
    /// the attempts or the deadline have run out ([`last_error`](Self::last_error) says
    /// why), and from then on.
    ///
    /// Dropping the future (in `tokio::select!`, say) abandons the attempt in progress;
    /// the count of failures is kept.
    pub async fn next(&mut self) -> Option<ReconnectingWebSocket> {
        if self.done {
            return None;
        }
        let started = Instant::now();
        let give_up_at = self.deadline.map(|d| started + d);
        let mut wait = match self.connected_at.take() {
            None => None,
            Some(at) => {
                if started.duration_since(at) >= self.stable_after {
                    self.level = 0;
                }
                Some(self.next_wait())
            }
        };
        loop {
            if let Some(wait) = wait {
                if give_up_at.is_some_and(|end| Instant::now() + wait > end) {
                    // The next attempt would start past the deadline.
                    return self.give_up();
                }
                tokio::time::sleep(wait).await;
                if give_up_at.is_some_and(|end| Instant::now() >= end) {
                    return self.give_up();
                }
            }
            let attempt = async {
                let (mut ws, _) = connect_url(&self.url, &self.config).await?;
                (self.on_connect)(&mut ws).await?;
                Ok::<_, Error>(ws)
            };
            let result = match give_up_at {
                Some(end) => tokio::time::timeout_at(end, attempt)
                    .await
                    .unwrap_or(Err(Error::Timeout(Timeout::Connect))),
                None => attempt.await,
            };
            match result {
                Ok(ws) => {
                    self.connected_at = Some(Instant::now());
                    self.failures = 0;
                    self.last_error = None;
                    return Some(ws);
                }
                Err(error) => {
                    self.failures = self.failures.saturating_add(1);
                    let out_of_attempts = self.max_attempts.is_some_and(|m| self.failures >= m);
                    let out_of_time = give_up_at.is_some_and(|end| Instant::now() >= end);
                    let retry_in = if out_of_attempts || out_of_time {
                        None
                    } else {
                        Some(self.next_wait())
                    };
                    if let Some(hook) = &mut self.on_failure {
                        hook(&Failure {
                            attempt: self.failures,
                            error: &error,
                            retry_in,
                        });
                    }
                    self.last_error = Some(error);
                    match retry_in {
                        None => return self.give_up(),
                        Some(d) => wait = Some(d),
                    }
                }
            }
        }
    }

    /// The wait before the next attempt, one step up the backoff.
    fn next_wait(&mut self) -> Duration {
        let unit = self.unit();
        let wait = self.backoff.delay(self.level, unit);
        self.level = self.level.saturating_add(1);
        wait
    }

    fn give_up(&mut self) -> Option<ReconnectingWebSocket> {
        self.done = true;
        None
    }
}

/// A nonzero seed for the jitter, from the OS's random source (a fixed one if it fails:
/// jitter needs spread, not secrecy).
fn seed() -> u64 {
    let mut bytes = [0u8; 8];
    let _ = getrandom::fill(&mut bytes);
    u64::from_le_bytes(bytes) | 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_double_from_initial_up_to_max() {
        let b = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        let caps: Vec<u64> = (0..6).map(|n| b.cap(n).as_millis() as u64).collect();
        assert_eq!(caps, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(b.cap(u32::MAX), Duration::from_secs(1));
        assert_eq!(b.delay(3, 0.0), Duration::ZERO);
        assert_eq!(b.delay(3, 1.0), Duration::from_millis(800));
        assert_eq!(b.delay(3, 7.0), Duration::from_millis(800));
        // max below initial is raised to it.
        let b = Backoff::new(Duration::from_secs(2), Duration::from_secs(1));
        assert_eq!(b.cap(5), Duration::from_secs(2));
    }

    #[test]
    fn jitter_spreads_over_the_whole_range() {
        let mut r = Reconnect::new("ws://127.0.0.1:1/", ClientConfig::default()).unwrap();
        let draws: Vec<f64> = (0..10_000).map(|_| r.unit()).collect();
        assert!(draws.iter().all(|u| (0.0..=1.0).contains(u)));
        // Each tenth of the range gets roughly a tenth of the draws.
        for decile in 0..10 {
            let lo = decile as f64 / 10.0;
            let n = draws.iter().filter(|&&u| u >= lo && u < lo + 0.1).count();
            assert!((700..1300).contains(&n), "decile {decile}: {n}");
        }
    }
}
