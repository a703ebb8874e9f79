//! Every timer of a connection, as one table with one [`Connection::poll_timeout`]: the
//! IO layer arms one deadline, whatever the application is waiting in, and calls
//! [`Connection::handle_timeout`] when it passes.
//!
//! | timer | runs while | from | fires after | then |
//! |---|---|---|---|---|
//! | keepalive | open, no ping out | the last bytes received | `keepalive_interval` | a ping is queued |
//! | pong | a keepalive ping is out | the ping | `pong_timeout` | fail, `Timeout::Pong`, close 1001 |
//! | idle | open | the last progress: a complete frame, or 64 KiB of one | `idle_timeout` | fail, `Timeout::Idle`, close 1001 |
//! | message | a fragmented message is arriving | its first frame | `message_timeout` | fail, `Timeout::Message`, close 1008 |
//! | budget | the connection waits for memory from its budget (`budget.rs`) | the first charge that did not fit | `budget_wait` | fail, `Error::OverBudget`, close 1013 |
//! | send | output waits for the socket | the write that found it full, or the last write that made progress | `send_timeout` | fail, `Timeout::Send`, close 1008 |
//! | close | our close is out | the `close` call | `close_timeout` | fail, `Timeout::Close` |
//! | teardown | the teardown | its start | `close_timeout` (clean) / `linger_timeout` (failed) | done |
//! | memory | buffers are held | the last bytes received | 250 ms | the empty buffers are given back |
//! | going away | open, the shutdown signal given (`Config::shutdown`) | the signal | at once | close 1001 queued behind the output |
//!
//! A busy connection keeps its receive buffer and output chunk from one message to the
//! next (no allocation per message), and the memory timer gives them back once it has been
//! quiet for a moment, so an idle connection holds only its fixed state. A connection
//! whose bytes come after a quiet spell of [`QUIET_GAP`] or more (one that sends now and
//! then, as most of a server's many connections do) never arms that timer: under an IO
//! layer that reports reads that would block
//! ([`Connection::read_would_block`]), it gives its buffers to the thread's stock as soon
//! as it has nothing more to read, and the next read takes one from there. Arming the
//! timer, having it fire and freeing the buffers, then allocating them again, cost such a
//! connection more than all the rest of an echo (callgrind).
//!
//! Keepalive and pong count any received byte as a sign of life, so a peer sending one
//! large frame over a slow link is not taken for dead (the IO layers read while a send
//! waits, so a pong is seen then too); a peer that neither reads nor sends is dropped a
//! keepalive interval plus a pong timeout after it went quiet, whatever the application
//! is waiting in. The idle timer counts progress only, so a peer trickling a byte now and
//! then cannot hold a connection forever.
//!
//! The send timer needs to know when a write found the socket full, which only the IO
//! layer sees: it says so with [`Connection::write_would_block`]. Any write that makes
//! progress restarts the wait, so a peer that reads slowly but steadily is never taken for
//! one that stopped reading.

use std::time::{Duration, Instant};

use crate::codec::OpCode;

use super::lifecycle::Phase;
use super::{Connection, Error, Timeout};

/// Payload bytes that count as progress for the idle timer when no frame completes.
pub(super) const PROGRESS_BYTES: usize = 64 * 1024;

/// A connection quiet this long gives its empty buffers back.
pub(super) const IDLE_RELEASE: Duration = Duration::from_millis(250);

/// Bytes that arrive this long or longer after the ones before come to a quiet connection:
/// it gives its buffers to the thread's stock as soon as a read finds nothing more
/// ([`Connection::read_would_block`]), rather than keeping them for a next message that
/// is not coming soon. Well under [`IDLE_RELEASE`], so that a connection sending a few
/// messages a second never arms the memory timer; well over the gaps of a busy one, which
/// keeps its buffers from one message to the next.
pub(super) const QUIET_GAP: Duration = Duration::from_millis(20);

/// The timers' state: when things last happened.
#[derive(Clone, Debug)]
pub(super) struct Timers {
    /// The last time bytes arrived.
    pub(super) last_rx: Instant,
    /// Those bytes came [`QUIET_GAP`] or more after the ones before.
    pub(super) after_quiet: bool,
    /// The last progress (a complete frame, or `PROGRESS_BYTES` of input).
    pub(super) last_progress: Instant,
    /// Bytes received since the last progress.
    pub(super) since_progress: usize,
    /// Our keepalive ping is out since then.
    pub(super) ping_sent_at: Option<Instant>,
    /// A fragmented message has been arriving since then.
    pub(super) message_since: Option<Instant>,
    /// Output has waited for the socket since then (a write found it full).
    pub(super) write_blocked: Option<Instant>,
    /// The connection has waited for memory from its budget since then.
    pub(super) budget_since: Option<Instant>,
    /// Some output was written since `write_blocked` was last set.
    pub(super) write_progress: bool,
}

impl Timers {
    pub(super) fn new(now: Instant) -> Self {
        Timers {
            last_rx: now,
            after_quiet: true,
            last_progress: now,
            since_progress: 0,
            ping_sent_at: None,
            message_since: None,
            write_blocked: None,
            write_progress: false,
            budget_since: None,
        }
    }
}

impl Connection {
    /// When [`handle_timeout`](Self::handle_timeout) should next be called, if ever.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let c = &self.config;
        let t = &self.timers;
        let mut next: Option<Instant> = None;
        let mut add = |at: Option<Instant>| {
            if let Some(at) = at {
                next = Some(next.map_or(at, |n| n.min(at)));
            }
        };
        match &self.phase {
            Phase::Done => return None,
            Phase::Teardown(_) => return self.teardown_deadline(),
            Phase::CloseSent { since } => {
                add(c.close_timeout.map(|d| *since + d));
                return next;
            }
            Phase::Open | Phase::CloseReceived => {}
        }
        if self.going_away_due() {
            return Some(self.now);
        }
        match t.ping_sent_at {
            Some(at) => add(c.pong_timeout.map(|d| at + d)),
            None => add(c.keepalive_interval.map(|d| t.last_rx + d)),
        }
        add(c.idle_timeout.map(|d| t.last_progress + d));
        add(t.message_since.zip(c.message_timeout).map(|(at, d)| at + d));
        add(t.write_blocked.zip(c.send_timeout).map(|(at, d)| at + d));
        add(t.budget_since.map(|at| at + c.budget_wait));
        if self.holds_idle_memory() {
            add(Some(t.last_rx + IDLE_RELEASE));
        }
        next
    }

    /// Which timers run, in a few bits: while this stays the same, no deadline moved
    /// earlier than [`poll_timeout`](Self::poll_timeout) last said, because each running
    /// timer's deadline only ever moves later (bytes and frames arrive later, the rest are
    /// fixed while they run). An IO layer that armed that deadline need not ask again
    /// until this changes or its timer fires.
    #[inline]
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn timer_state(&self) -> u8 {
        let phase = match &self.phase {
            Phase::Open => 0,
            Phase::CloseSent { .. } => 1,
            Phase::CloseReceived => 2,
            Phase::Teardown(_) => 3,
            Phase::Done => 4,
        };
        phase
            | u8::from(self.timers.ping_sent_at.is_some()) << 3
            | u8::from(self.timers.message_since.is_some()) << 4
            | u8::from(self.holds_idle_memory()) << 5
            | u8::from(self.timers.write_blocked.is_some()) << 6
            | u8::from(self.timers.budget_since.is_some()) << 7
    }

    /// Runs the timers due at `now`: a keepalive ping is queued, a timeout fails the
    /// connection (reported by the next [`poll_event`](Self::poll_event), its close frame
    /// queued), or the teardown ends.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = now;
        if self.holds_idle_memory() && self.timers.last_rx + IDLE_RELEASE <= now {
            self.release_idle_memory();
        }
        let c = &self.config;
        let t = &self.timers;
        let due = |at: Option<Instant>| at.is_some_and(|at| at <= now);
        match &self.phase {
            Phase::Done => return,
            Phase::Teardown(_) => return self.advance_teardown(now),
            Phase::CloseSent { since } => {
                if due(c.close_timeout.map(|d| *since + d)) {
                    self.fail(Error::Timeout(Timeout::Close));
                }
                return;
            }
            Phase::Open | Phase::CloseReceived => {}
        }
        if self.going_away_due() {
            return self.go_away(now);
        }
        if due(c.idle_timeout.map(|d| t.last_progress + d)) {
            return self.fail(Error::Timeout(Timeout::Idle));
        }
        if due(t.message_since.zip(c.message_timeout).map(|(at, d)| at + d)) {
            return self.fail(Error::Timeout(Timeout::Message));
        }
        if due(t.budget_since.map(|at| at + c.budget_wait)) {
            // No memory came within the bound: refused, as a charge that does not fit
            // once was before waiting existed.
            self.charge.note_refused();
            return self.fail(Error::OverBudget);
        }
        if due(t.write_blocked.zip(c.send_timeout).map(|(at, d)| at + d)) {
            if !t.write_progress {
                return self.fail(Error::Timeout(Timeout::Send));
            }
            // Some of it went out meanwhile: the wait starts again from now.
            self.timers.write_blocked = Some(now);
            self.timers.write_progress = false;
        }
        let t = &self.timers;
        match t.ping_sent_at {
            Some(at) => {
                if due(c.pong_timeout.map(|d| at + d)) {
                    self.fail(Error::Timeout(Timeout::Pong));
                }
            }
            None => {
                if due(c.keepalive_interval.map(|d| t.last_rx + d))
                    && self.queue_control(OpCode::Ping, &[]).is_ok()
                {
                    self.timers.ping_sent_at = Some(now);
                }
            }
        }
    }

    /// Bytes arrived at `now`: the peer is alive (the keepalive ping has done its job),
    /// and enough of them count as progress.
    #[inline]
    pub(super) fn note_bytes(&mut self, now: Instant, n: usize) {
        self.now = now;
        let t = &mut self.timers;
        t.after_quiet = now >= t.last_rx + QUIET_GAP;
        t.last_rx = now;
        t.ping_sent_at = None;
        t.since_progress += n;
        if t.since_progress >= PROGRESS_BYTES {
            t.last_progress = now;
            t.since_progress = 0;
        }
    }

    /// Notes that a write found the socket full at `now` (the write started then): what is
    /// queued now waits for the peer, and the send timer
    /// ([`Config::send_timeout`](super::Config::send_timeout)) runs until a write makes
    /// progress. IO layers call it whenever a write would block.
    #[inline]
    pub fn write_would_block(&mut self, now: Instant) {
        let t = &mut self.timers;
        if t.write_blocked.is_none() || t.write_progress {
            t.write_blocked = Some(now);
            t.write_progress = false;
        }
    }

    /// `n` bytes of output were written: progress for the send timer, which stops once
    /// nothing waits.
    #[inline]
    pub(super) fn note_written(&mut self, n: usize) {
        if self.timers.write_blocked.is_some() && n > 0 {
            if self.out.is_empty() {
                self.timers.write_blocked = None;
            } else {
                self.timers.write_progress = true;
            }
        }
    }

    /// A frame was received whole: progress for the idle timer.
    #[inline]
    pub(super) fn note_frame(&mut self) {
        self.timers.last_progress = self.now;
        self.timers.since_progress = 0;
    }
}
