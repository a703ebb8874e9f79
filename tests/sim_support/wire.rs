//! The simulated transport: two byte pipes of bounded capacity between the application's
//! stream and the scripted peer, whose reads and writes move random parts of what they
//! could, return `Pending` at random (waking the task later, so that tasks interleave),
//! and end with a FIN, a close or a reset where the peer's script says.
//!
//! [`SimStream`] is the application's end for the tokio layer (`AsyncRead + AsyncWrite`);
//! [`SimStd`] the blocking layer's (`Read + Write + Transport`), which runs the peer
//! itself whenever the application would wait, so the two layers share one design.
//!
//! The pipes behave as a TCP connection does where the IO layers can tell:
//! - one waker per direction, as a socket's readiness has: a second task polling the
//!   same direction replaces the first one's registration (the source of lost wake-ups
//!   when two tasks share one connection);
//! - a FIN ends reads once the bytes before it are read; writes still go through;
//! - a write to a peer that has closed its socket is answered by a reset: the write fails
//!   with `BrokenPipe`, and whatever the application had not read yet is destroyed
//!   (the reason servers linger before closing); every later call fails with
//!   `ConnectionReset`;
//! - a reset by the peer destroys what was in flight both ways.

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::rng::Rng;

/// More transport calls than any run needs: a task that polls in a loop without waiting
/// (a livelock, invisible to the virtual clock) fails here instead of spinning forever.
const CALL_LIMIT: u64 = 3_000_000;

/// How hostile the transport is, chosen per run.
#[derive(Clone, Copy, Debug)]
pub struct Chaos {
    /// One call in this many returns `Pending` although it could go on (0: never); on
    /// the blocking stream, one read in this many fails with `WouldBlock` (a socket
    /// timeout) or `Interrupted`.
    pub pending_den: u64,
    /// Reads and writes move a random part of what they could, not all of it.
    pub partial: bool,
    /// Whether the application's stream takes vectored writes (the IO layers have a path
    /// for each).
    pub vectored: bool,
    /// A spurious `Pending` wakes its task at once, behind the other ready tasks, or (half
    /// the time, when this is not zero) after this long: tokio's timer, paused or not,
    /// ticks in milliseconds.
    pub max_delay: Duration,
    /// Capacity of the application-to-peer pipe and of the peer-to-application pipe.
    pub up_cap: usize,
    pub down_cap: usize,
}

impl Chaos {
    pub fn generate(rng: &mut Rng) -> Chaos {
        let caps = [1, 7, 100, 1500, 16 << 10, 256 << 10];
        Chaos {
            pending_den: rng.pick(&[0, 2, 4, 16]),
            partial: rng.chance(3, 4),
            vectored: rng.chance(1, 2),
            max_delay: Duration::from_millis(rng.pick(&[0, 1, 1])),
            up_cap: rng.pick(&caps),
            down_cap: rng.pick(&caps),
        }
    }
}

/// One direction of the connection.
#[derive(Debug, Default)]
pub struct Pipe {
    buf: VecDeque<u8>,
    cap: usize,
    /// The writing end shut down: reads see the end once `buf` is read.
    pub fin: bool,
    /// A reset: reads and writes fail.
    pub rst: bool,
    /// The reading end closed its socket: a write is answered by a reset.
    pub reader_gone: bool,
    read_waker: Option<Waker>,
    write_waker: Option<Waker>,
    /// Bytes written into this pipe in all.
    pub moved: u64,
}

impl Pipe {
    fn new(cap: usize) -> Self {
        Pipe {
            cap,
            ..Pipe::default()
        }
    }

    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    fn wake_both(&mut self) {
        wake(&mut self.read_waker);
        wake(&mut self.write_waker);
    }
}

fn wake(slot: &mut Option<Waker>) {
    if let Some(w) = slot.take() {
        w.wake();
    }
}

/// What a read of the peer found.
pub enum PeerRead {
    Data(Vec<u8>),
    Eof,
    Reset,
    Nothing,
}

/// Both pipes and the transport's own choices.
pub struct Net {
    /// Application to peer.
    pub up: Pipe,
    /// Peer to application.
    pub down: Pipe,
    rng: Rng,
    pub chaos: Chaos,
    calls: u64,
    /// The peer's task, woken whenever the application moved bytes or ended its end.
    pub peer_waker: Option<Waker>,
    /// A reset happened (by the peer, or answering a write to its closed socket): bytes
    /// in flight may have been destroyed, so the peer's messages are owed as a prefix only.
    pub reset: bool,
    /// The application shut its write half down (`poll_shutdown`, `shutdown_write`), which
    /// the IO layers do only once everything queued was written.
    pub app_shutdown: bool,
    /// The application's stream was dropped.
    pub app_dropped: bool,
    /// The application wrote after shutting its write half down.
    pub write_after_shutdown: bool,
    /// When bytes last moved (tokio runs only): a run in which nothing moves for long is
    /// stuck, however long it has run.
    pub progress: Option<Arc<Progress>>,
}

/// The virtual time of the last progress of a tokio run: bytes moved either way, a call
/// of the application begun or finished, an action of the peer.
pub struct Progress {
    start: tokio::time::Instant,
    last_micros: std::sync::atomic::AtomicU64,
}

impl Progress {
    pub fn new(start: tokio::time::Instant) -> Arc<Progress> {
        Arc::new(Progress {
            start,
            last_micros: 0.into(),
        })
    }

    pub fn touch(&self) {
        let now = self.start.elapsed().as_micros() as u64;
        self.last_micros
            .store(now, std::sync::atomic::Ordering::Relaxed);
    }

    /// How long ago the last progress was.
    pub fn idle(&self) -> Duration {
        let last = self.last_micros.load(std::sync::atomic::Ordering::Relaxed);
        self.start
            .elapsed()
            .saturating_sub(Duration::from_micros(last))
    }
}

impl Net {
    pub fn new(chaos: Chaos, rng: Rng) -> Self {
        Net {
            up: Pipe::new(chaos.up_cap),
            down: Pipe::new(chaos.down_cap),
            rng,
            chaos,
            calls: 0,
            peer_waker: None,
            reset: false,
            app_shutdown: false,
            app_dropped: false,
            write_after_shutdown: false,
            progress: None,
        }
    }

    pub fn calls(&self) -> u64 {
        self.calls
    }

    /// Something moved: bytes, an action of the peer (see [`Progress`]).
    pub fn moved(&self) {
        if let Some(p) = &self.progress {
            p.touch();
        }
    }

    fn tick(&mut self) {
        self.calls += 1;
        assert!(
            self.calls <= CALL_LIMIT,
            "livelock: {CALL_LIMIT} transport calls without the run ending"
        );
    }

    /// A call of the blocking views: counted, and now and then a spurious `WouldBlock`
    /// or `Interrupted`, which a blocking transport may return and the layer retries.
    fn blocking_call(&mut self) -> Option<io::Error> {
        self.tick();
        if !self.spurious() {
            return None;
        }
        Some(if self.rng.chance(1, 2) {
            io::ErrorKind::WouldBlock.into()
        } else {
            io::ErrorKind::Interrupted.into()
        })
    }

    /// Whether this call returns `Pending` (or `WouldBlock`) although it could go on.
    fn spurious(&mut self) -> bool {
        self.chaos.pending_den > 0 && self.rng.chance(1, self.chaos.pending_den)
    }

    /// How much of `max` bytes a call moves.
    fn amount(&mut self, max: usize) -> usize {
        if max <= 1 || !self.chaos.partial || self.rng.chance(1, 2) {
            max
        } else {
            self.rng.range(1, max)
        }
    }

    /// Wakes `w` later: at once behind the other ready tasks, or after a while of virtual
    /// time.
    fn later(&mut self, w: &Waker) {
        let d = self.chaos.max_delay;
        if d.is_zero() || self.rng.chance(1, 2) {
            w.wake_by_ref();
        } else {
            let w = w.clone();
            tokio::spawn(async move {
                tokio::time::sleep(d).await;
                w.wake();
            });
        }
    }

    fn wake_peer(&mut self) {
        wake(&mut self.peer_waker);
    }

    // ----- the application's end ------------------------------------------------------

    /// Reads into `dst`: `Ok(Some(n))`, `Ok(None)` when nothing is there yet.
    fn app_read(&mut self, dst: &mut [u8]) -> io::Result<Option<usize>> {
        if self.down.rst {
            return Err(io::ErrorKind::ConnectionReset.into());
        }
        if dst.is_empty() {
            return Ok(Some(0));
        }
        let avail = self.down.buf.len();
        if avail == 0 {
            return if self.down.fin { Ok(Some(0)) } else { Ok(None) };
        }
        let n = self.amount(avail.min(dst.len()));
        for (d, s) in dst.iter_mut().zip(self.down.buf.drain(..n)) {
            *d = s;
        }
        self.moved();
        wake(&mut self.down.write_waker);
        self.wake_peer();
        Ok(Some(n))
    }

    /// Writes from `src`: `Ok(Some(n))`, `Ok(None)` when the pipe is full.
    fn app_write(&mut self, src: &[IoSlice<'_>]) -> io::Result<Option<usize>> {
        if self.up.rst {
            return Err(io::ErrorKind::ConnectionReset.into());
        }
        if self.up.reader_gone {
            // The peer's kernel answers with a reset, which destroys what we had not read.
            self.reset_both();
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        if self.up.fin {
            self.write_after_shutdown = true;
            return Err(io::Error::other("write after shutdown"));
        }
        let total: usize = src.iter().map(|s| s.len()).sum();
        if total == 0 {
            return Ok(Some(0));
        }
        let room = self.up.cap - self.up.buf.len();
        if room == 0 {
            return Ok(None);
        }
        let n = self.amount(room.min(total));
        let mut left = n;
        for s in src {
            let take = left.min(s.len());
            self.up.buf.extend(&s[..take]);
            left -= take;
            if left == 0 {
                break;
            }
        }
        self.up.moved += n as u64;
        self.moved();
        super::trace(|| format!("      app wrote {n} of {total} B"));
        wake(&mut self.up.read_waker);
        self.wake_peer();
        Ok(Some(n))
    }

    fn app_shutdown(&mut self) -> io::Result<()> {
        if self.up.rst {
            return Err(io::ErrorKind::NotConnected.into());
        }
        self.up.fin = true;
        self.app_shutdown = true;
        self.wake_peer();
        Ok(())
    }

    pub fn app_drop(&mut self) {
        self.app_dropped = true;
        self.up.fin = true;
        self.down.reader_gone = true;
        self.wake_peer();
    }

    // ----- the peer's end -------------------------------------------------------------

    /// Reads up to `max` bytes for the peer.
    pub fn peer_read(&mut self, max: usize) -> PeerRead {
        if self.up.rst {
            return PeerRead::Reset;
        }
        let avail = self.up.buf.len();
        if avail == 0 {
            return if self.up.fin {
                PeerRead::Eof
            } else {
                PeerRead::Nothing
            };
        }
        let n = self.amount(avail.min(max.max(1)));
        let data: Vec<u8> = self.up.buf.drain(..n).collect();
        self.moved();
        super::trace(|| {
            let w = self.up.write_waker.is_some();
            format!("      peer read {n} B (a writer to wake: {w})")
        });
        wake(&mut self.up.write_waker);
        PeerRead::Data(data)
    }

    /// Writes for the peer; `Err` once the application's end is gone or reset.
    pub fn peer_write(&mut self, src: &VecDeque<u8>) -> Result<usize, ()> {
        if self.down.rst || self.down.reader_gone {
            return Err(());
        }
        let room = self.down.cap - self.down.buf.len();
        let n = self.amount(room.min(src.len()));
        if n == 0 {
            return Ok(0);
        }
        self.down.buf.extend(src.range(..n));
        self.down.moved += n as u64;
        self.moved();
        wake(&mut self.down.read_waker);
        Ok(n)
    }

    /// The peer shuts its write half down (a FIN).
    pub fn peer_fin(&mut self) {
        self.down.fin = true;
        wake(&mut self.down.read_waker);
    }

    /// The peer closes its socket: a FIN, and its reads are over.
    pub fn peer_close(&mut self) {
        self.down.fin = true;
        self.up.reader_gone = true;
        self.up.wake_both();
        self.down.wake_both();
    }

    /// A reset: what is in flight both ways is lost, every later call fails.
    pub fn reset_both(&mut self) {
        self.reset = true;
        self.up.rst = true;
        self.down.rst = true;
        self.up.buf.clear();
        self.down.buf.clear();
        self.up.wake_both();
        self.down.wake_both();
        self.wake_peer();
    }

    /// One line on the state of the pipes, for a failure's report.
    pub fn describe(&self) -> String {
        format!(
            "up: {} B buffered of {}, moved {}, fin {}, rst {}, reader gone {}; down: {} B \
             buffered of {}, moved {}, fin {}, rst {}, reader gone {}; app shut down {}, \
             dropped {}; {} calls",
            self.up.buf.len(),
            self.up.cap,
            self.up.moved,
            self.up.fin,
            self.up.rst,
            self.up.reader_gone,
            self.down.buf.len(),
            self.down.cap,
            self.down.moved,
            self.down.fin,
            self.down.rst,
            self.down.reader_gone,
            self.app_shutdown,
            self.app_dropped,
            self.calls,
        )
    }
}

/// The pipes, shared by the application's stream and the peer's task.
pub type SharedNet = Arc<Mutex<Net>>;

/// Locks `m`; a panic elsewhere while it was held leaves nothing half-done here.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

// ----- tokio -----------------------------------------------------------------------------

/// The application's end of the connection, for the tokio layer.
pub struct SimStream {
    net: SharedNet,
    vectored: bool,
}

impl SimStream {
    pub fn new(net: SharedNet) -> Self {
        let vectored = lock(&net).chaos.vectored;
        SimStream { net, vectored }
    }
}

impl Drop for SimStream {
    fn drop(&mut self) {
        lock(&self.net).app_drop();
    }
}

impl AsyncRead for SimStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let mut net = lock(&self.net);
        net.tick();
        if !net.down.rst && net.spurious() {
            super::trace(|| "      app read: spurious Pending".into());
            net.later(cx.waker());
            return Poll::Pending;
        }
        let dst = buf.initialize_unfilled();
        let r = net.app_read(dst);
        super::trace(|| format!("      app read: {r:?}"));
        match r? {
            Some(n) => {
                buf.advance(n);
                Poll::Ready(Ok(()))
            }
            None => {
                net.down.read_waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl SimStream {
    fn write_slices(&self, cx: &mut Context<'_>, src: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
        let mut net = lock(&self.net);
        net.tick();
        if !net.up.rst && !net.up.reader_gone && net.spurious() {
            super::trace(|| "      app write: spurious Pending".into());
            net.later(cx.waker());
            return Poll::Pending;
        }
        match net.app_write(src)? {
            Some(n) => Poll::Ready(Ok(n)),
            None => {
                super::trace(|| "      app write: Pending (full)".into());
                net.up.write_waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl AsyncWrite for SimStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.write_slices(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.write_slices(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.vectored
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut net = lock(&self.net);
        net.tick();
        super::trace(|| "      app flush".into());
        if net.spurious() {
            net.later(cx.waker());
            return Poll::Pending;
        }
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut net = lock(&self.net);
        net.tick();
        super::trace(|| "      app shutdown".into());
        if net.spurious() {
            net.later(cx.waker());
            return Poll::Pending;
        }
        Poll::Ready(net.app_shutdown())
    }
}

// ----- blocking --------------------------------------------------------------------------

/// What runs the peer for [`SimStd`] while the application would wait: one step of its
/// machine at the virtual time given (true when it did something), and when it next has
/// something to do on its own.
pub trait Stepper {
    fn step(&mut self, net: &mut Net, now: Duration) -> bool;
    fn next_at(&self) -> Option<Duration>;
}

/// The application's end of the connection for the blocking layer. A blocking call that
/// would wait runs the peer instead (advancing the virtual clock to its next scheduled
/// action when it has nothing to do now); a call that would wait on a peer that is itself
/// waiting for the application is a deadlock, and fails the run.
pub struct SimStd<P> {
    pub net: Net,
    pub peer: P,
    pub now: Duration,
}

impl<P: Stepper> SimStd<P> {
    /// Lets the peer run until `ready` holds; panics on a deadlock.
    fn wait_until(&mut self, what: &str, mut ready: impl FnMut(&Net) -> bool) {
        let mut idle = 0;
        while !ready(&self.net) {
            if self.peer.step(&mut self.net, self.now) {
                idle = 0;
                continue;
            }
            match self.peer.next_at() {
                Some(at) if at > self.now => self.now = at,
                Some(_) => {
                    idle += 1;
                    assert!(
                        idle < 1000,
                        "the peer makes no progress at its own deadline"
                    );
                }
                None => panic!(
                    "deadlock: a blocking {what} waits for a peer that waits for it ({})",
                    self.net.describe()
                ),
            }
        }
    }
}

impl<P: Stepper> io::Read for SimStd<P> {
    fn read(&mut self, dst: &mut [u8]) -> io::Result<usize> {
        if let Some(e) = self.net.blocking_call() {
            return Err(e);
        }
        self.wait_until("read", |n| {
            n.down.rst || n.down.fin || !n.down.buf.is_empty()
        });
        Ok(self.net.app_read(dst)?.unwrap_or(0))
    }
}

impl<P: Stepper> io::Write for SimStd<P> {
    fn write(&mut self, src: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[IoSlice::new(src)])
    }

    fn write_vectored(&mut self, src: &[IoSlice<'_>]) -> io::Result<usize> {
        if let Some(e) = self.net.blocking_call() {
            return Err(e);
        }
        self.wait_until("write", |n| {
            n.up.rst || n.up.reader_gone || n.up.fin || n.up.buf.len() < n.up.cap
        });
        Ok(self.net.app_write(src)?.unwrap_or(0))
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<P: Stepper> rapidws::blocking::Transport for SimStd<P> {
    fn shutdown_write(&mut self) -> io::Result<()> {
        self.net.app_shutdown()
    }
}
