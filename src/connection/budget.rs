//! A memory budget shared by many connections: what one peer can make a connection hold
//! is bounded per connection by the size limits; what all peers together can make a
//! process hold is bounded here.
//!
//! A connection charges the bytes of the messages it is receiving (a single-frame
//! message arriving in place, the fragments of one being assembled, what the inflater has
//! produced of a compressed one) until the message is complete and handed over, and
//! releases them then, or when it fails, closes or is dropped.
//!
//! # A charge that does not fit waits
//!
//! A charge that would take the budget past its limit is not refused: the connection
//! *waits* for memory. It joins the budget's queue of waiters (first come, first served),
//! keeps what it holds, stops decoding and stops reading
//! ([`Connection::wants_read`](super::Connection::wants_read) is false), so TCP flow
//! control holds its peer back. Whenever memory is released (a message handed over, a
//! connection closed) the waiter at the head of the queue is woken (the IO layer
//! registered a [`Waker`]; the blocking layer polls) and tries again, with the waiters
//! behind it whose need fits in what is left (at most 8 woken per release). What the head
//! asked for is kept for it:
//! the others (waiters behind it, and connections that hold nothing yet, which join the
//! queue) may take only what fits and leaves the head's need free, so a large charge is
//! never starved by small ones, and a head that is slow to try again (a reading half no
//! one polls) does not hold up the rest. A connection that holds part of a message and
//! is not waiting may take what fits (finishing its message gives memory back). Once the
//! head's charge is granted it leaves the queue and wakes the next.
//!
//! A wait is bounded by [`Config::budget_wait`](super::Config::budget_wait) (10 s by
//! default), counted from the moment it began: a connection that cannot go on within it
//! fails with [`Error::OverBudget`] and closes with 1013 ("try again later"), and the
//! budget counts the refusal. A charge that could never fit, because this one connection
//! would then hold more than the whole limit, is refused at once.
//!
//! # No deadlock
//!
//! Waiters hold what they have charged while they wait, so waiting alone could deadlock:
//! N connections, each holding part of a message, all needing more, with every byte of
//! the budget held by them. No release can come, and without a rule they would all wait
//! until the bound and all fail. The rule: **when every byte charged is held by waiting
//! connections, the head of the queue is granted past the limit** (the *floor*), and may
//! keep growing until its message is complete (its charge back to 0), never past the
//! limit on its own. The argument:
//!
//! - A charge not held by a waiter belongs to a connection that is receiving: its message
//!   completes (and is released) or its own timers fail it (`message_timeout`,
//!   `idle_timeout`, the keepalive), which releases it. So while such a charge exists the
//!   head will see memory come back, or reach its bound.
//! - When no such charge exists, nothing can come back except through a waiter, and the
//!   head is let through: it becomes the floor, which is then not waiting. Its message
//!   completes or its timers fail it, and either way its charge goes back to 0, the floor
//!   is free, and the next head is woken. So the queue always moves, one message at a time
//!   in the worst case, and no cycle of waits can form.
//! - Only one connection at a time is the floor, and no one else takes memory while the
//!   bytes charged are past the limit (every other grant must fit under it), so they
//!   never pass the limit by more than one message (at most `limit` again, at most
//!   [`max_message_size`](super::Config::max_message_size)).
//!
//! And the bound remains: a wait that nothing ends within `budget_wait` (the memory is
//! held by connections that are receiving slowly, or by a floor that takes long) ends the
//! waiting connection with 1013, which releases what it held. So no connection waits
//! forever and no stall is silent: every wait ends with the memory granted or 1013.
//!
//! The hostile shapes stay bounded: inflated output is still granted before the inflater
//! allocates it (the inflater stops at the grant and goes on once more is granted, so a
//! compression bomb waits with what it was granted, or past `max_message_size` gets
//! 1009); never-completing fragments hold their memory until `message_timeout` (1008) as
//! before, while those waiting behind them get 1013 at `budget_wait`; a peer that never
//! reads holds nothing of the budget (send queues are not charged).
//!
//! [`Error::OverBudget`]: super::Error::OverBudget

use core::fmt;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::task::Waker;

/// Limit of the process-wide budget ([`Budget::shared`]), which every [`Config`] uses
/// unless told otherwise: 1 GiB.
///
/// [`Config`]: super::Config
pub const DEFAULT_BUDGET: usize = 1 << 30;

/// A limit on the bytes that the connections using it may hold in messages they are
/// receiving, together. Cheap to clone: clones share one set of counters.
///
/// Every [`Config`](super::Config) starts with [`Budget::shared`], one budget of
/// [`DEFAULT_BUDGET`] (1 GiB) for the whole process; give a server (or a client holding
/// many connections) its own with [`Config::with_budget`](super::Config::with_budget).
///
/// **When it is exhausted, connections wait.** A connection whose message needs more
/// than the budget has left stops reading (TCP flow control holds its peer back) and goes
/// on when memory is returned, in the order the connections began to wait. A wait lasts at
/// most [`Config::budget_wait`](super::Config::budget_wait) (10 s by default); a connection
/// that cannot go on within it is refused with [`Error::OverBudget`](super::Error::OverBudget)
/// and close code 1013 ("try again later"), counted in [`refused`](Self::refused). So a
/// legitimate load larger than the budget is slowed down, not refused; only memory held
/// longer than the wait (by slow or hostile peers) turns into refusals. When every byte
/// charged is held by waiting connections (each holds part of a message and needs more),
/// the oldest waiter is let past the limit to finish its message, so that the waits
/// cannot deadlock: the bytes charged can then pass the limit by one message (see the
/// module documentation of `connection::budget` for the argument).
///
/// **Sizing it.** Each connection can hold up to
/// [`max_message_size`](super::Config::max_message_size) on its own (16 MiB by
/// default); the budget bounds the sum. Choose the memory you can give to messages in
/// flight (what the machine has, less the application's own needs and the fixed cost of
/// each connection, about 2.4 KiB idle): with 10,000 connections and 16 MiB messages the
/// worst case would be 160 GiB, and the budget is what keeps it at 1 GiB. An
/// uncompressed message that arrives whole in one read is handed over at once and never
/// charged, a compressed one only while it inflates, so what counts is the large messages
/// in flight at once: size the budget for the number of those you expect times their
/// size, and watch [`waited`](Self::waited), [`refused`](Self::refused) and
/// [`peak`](Self::peak) in production. What the budget does not count: buffer capacity
/// reserved ahead of the bytes (at most
/// [`max_read_ahead`](super::Config::max_read_ahead), 1 MiB, per connection receiving a
/// large frame), bytes a read brought that a waiting connection has not been granted yet
/// (at most one read's worth, and it reads no more), the inflater's state (~49 KiB per
/// compressing connection) and the send queues.
///
/// ```
/// use rapidws::{Budget, Config};
///
/// // 256 MiB for every connection of one server, and 4 MiB messages at most.
/// let budget = Budget::new(256 << 20);
/// let config = Config::default()
///     .with_max_message_size(4 << 20)
///     .with_budget(Some(budget.clone()));
/// assert_eq!(budget.held(), 0);
/// assert_eq!(config.budget.as_ref().map(Budget::limit), Some(256 << 20));
/// ```
#[derive(Clone)]
pub struct Budget {
    inner: Arc<Counters>,
}

struct Counters {
    limit: usize,
    held: AtomicUsize,
    peak: AtomicUsize,
    refused: AtomicU64,
    /// Waits begun (a charge that did not fit and joined the queue).
    waited: AtomicU64,
    /// Charges in the queue now: while 0, every charge takes the lock-free path.
    queued: AtomicUsize,
    queue: Mutex<Queue>,
}

/// The waiters, oldest first, and the floor.
#[derive(Default)]
struct Queue {
    /// Sorted by ticket (tickets only grow).
    waiters: VecDeque<Waiter>,
    /// Bytes charged by the waiters.
    waiting_bytes: usize,
    /// The ticket of the charge let past the limit to finish its message, if any.
    floor: Option<u64>,
    next_ticket: u64,
}

struct Waiter {
    ticket: u64,
    /// What it had charged when it began to wait (unchanged while it waits).
    bytes: usize,
    /// What it asked for when it last tried: while it is the head, kept free for it.
    need: usize,
    waker: Option<Waker>,
    /// Woken since it last registered: it is to try again, waker or not.
    woken: bool,
}

impl Queue {
    fn find(&self, ticket: u64) -> Option<usize> {
        self.waiters
            .binary_search_by_key(&ticket, |w| w.ticket)
            .ok()
    }

    /// Removes the waiter `ticket`; when it was the head, the new head changes what the
    /// others must leave free, and those that may go on now (with `free` bytes free) are
    /// to be woken.
    fn remove(&mut self, ticket: u64, queued: &AtomicUsize, free: usize) -> Wakers {
        let Some(at) = self.find(ticket) else {
            return Wakers::default();
        };
        let Some(w) = self.waiters.remove(at) else {
            return Wakers::default();
        };
        self.waiting_bytes -= w.bytes;
        queued.fetch_sub(1, Ordering::SeqCst);
        if at == 0 {
            self.wake_fitting(free)
        } else {
            Wakers::default()
        }
    }

    /// Marks the head woken, and hands over its waker to be woken once the lock is let go.
    fn wake_head(&mut self) -> Wakers {
        let mut wakers = Wakers::default();
        if let Some(head) = self.waiters.front_mut() {
            head.woken = true;
            wakers.0[0] = head.waker.take();
        }
        wakers
    }

    /// Memory came back (`free` bytes are free): marks woken the head, and in order the
    /// waiters behind it whose need fits in what the ones before leave (at most [`WAKE`]
    /// in all, looking at most [`SCAN`] deep), and hands over their wakers. A waiter that
    /// could go on is never left asleep behind ones that cannot (woken only when it
    /// reached the first few, it could sleep until its wait ran out).
    fn wake_fitting(&mut self, free: usize) -> Wakers {
        let mut wakers = Wakers::default();
        let mut left = free;
        let mut n = 0;
        for (i, w) in self.waiters.iter_mut().take(SCAN).enumerate() {
            // The head always tries (it may become the floor); the others if they fit.
            if i > 0 && w.need > left {
                continue;
            }
            left = left.saturating_sub(w.need);
            w.woken = true;
            wakers.0[n] = w.waker.take();
            n += 1;
            if n == WAKE {
                break;
            }
        }
        wakers
    }
}

/// Wakers taken out under the queue's lock, to be woken once it is let go.
#[derive(Default)]
struct Wakers([Option<Waker>; WAKE]);

impl Wakers {
    fn wake(self) {
        for w in self.0.into_iter().flatten() {
            w.wake();
        }
    }
}

/// How many waiters one release wakes at most: the head, and those behind it whose need
/// fits in what the ones before them leave (one whose task is slow to try again, a
/// reading half no one reads, must not hold up the others until its wait runs out).
const WAKE: usize = 8;

/// How deep a release looks into the queue for waiters that fit.
const SCAN: usize = 256;

/// Why a charge was not granted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Short {
    /// It waits in the queue: try again when woken.
    Wait,
    /// It could never fit (this one holder would hold more than the limit): refused,
    /// and counted.
    Never,
}

impl Budget {
    /// A budget of `limit` bytes, shared by whatever holds a clone of it.
    pub fn new(limit: usize) -> Self {
        Budget {
            inner: Arc::new(Counters {
                limit,
                held: AtomicUsize::new(0),
                peak: AtomicUsize::new(0),
                refused: AtomicU64::new(0),
                waited: AtomicU64::new(0),
                queued: AtomicUsize::new(0),
                queue: Mutex::new(Queue::default()),
            }),
        }
    }

    /// The process-wide budget of [`DEFAULT_BUDGET`] (1 GiB) that every
    /// [`Config::default`](super::Config::default) uses: one set of counters for every
    /// connection, server or client, that keeps the default.
    pub fn shared() -> Self {
        static SHARED: OnceLock<Budget> = OnceLock::new();
        SHARED.get_or_init(|| Budget::new(DEFAULT_BUDGET)).clone()
    }

    /// The limit, in bytes.
    pub fn limit(&self) -> usize {
        self.inner.limit
    }

    /// Bytes charged now.
    pub fn held(&self) -> usize {
        self.inner.held.load(Ordering::Relaxed)
    }

    /// The most bytes charged at once so far: at most the limit, unless waiting
    /// connections held all of it and the oldest was let past it to finish its message
    /// (then by at most that message).
    pub fn peak(&self) -> usize {
        self.inner.peak.load(Ordering::Relaxed)
    }

    /// How many times a charge was refused: each one closed a connection with 1013 (its
    /// wait for memory outlasted [`Config::budget_wait`](super::Config::budget_wait), or
    /// the message could never fit).
    pub fn refused(&self) -> u64 {
        self.inner.refused.load(Ordering::Relaxed)
    }

    /// How many times a connection had to wait for memory (whether it then went on or was
    /// refused).
    pub fn waited(&self) -> u64 {
        self.inner.waited.load(Ordering::Relaxed)
    }

    /// Connections waiting for memory now.
    pub fn waiting(&self) -> usize {
        self.inner.queued.load(Ordering::Relaxed)
    }

    /// Whether `self` and `other` share their counters (one is a clone of the other).
    pub fn same_as(&self, other: &Budget) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        // Nothing panics while the lock is held; a poisoned queue is still consistent.
        self.inner
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Charges `n` bytes if they fit under the limit, all or nothing (`partial`: as many
    /// as fit, maybe none); the bytes charged.
    fn take(&self, n: usize, partial: bool) -> usize {
        self.take_leaving(n, partial, 0)
    }

    /// [`take`](Self::take), leaving `reserve` bytes under the limit free (the head's).
    fn take_leaving(&self, n: usize, partial: bool, reserve: usize) -> usize {
        let c = &self.inner;
        let mut granted = 0;
        let r = c
            .held
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |held| {
                let free = c.limit.saturating_sub(held).saturating_sub(reserve);
                granted = if partial {
                    n.min(free)
                } else if n <= free {
                    n
                } else {
                    0
                };
                (granted > 0).then_some(held + granted)
            });
        match r {
            Ok(before) => {
                self.note_peak(before + granted);
                granted
            }
            Err(_) => 0,
        }
    }

    /// Charges `n` bytes whatever the limit (the floor).
    fn take_past(&self, n: usize) {
        let before = self.inner.held.fetch_add(n, Ordering::SeqCst);
        self.note_peak(before + n);
    }

    #[inline]
    fn note_peak(&self, held: usize) {
        let peak = &self.inner.peak;
        if held > peak.load(Ordering::Relaxed) {
            peak.fetch_max(held, Ordering::Relaxed);
        }
    }

    /// Gives back `n` bytes charged earlier, and wakes the head of the queue, if any.
    fn release(&self, n: usize) {
        if n == 0 {
            return;
        }
        let before = self.inner.held.fetch_sub(n, Ordering::SeqCst);
        debug_assert!(before >= n, "released {n} of {before} charged bytes");
        // A waiter joins the queue (counted here) before it tries the charge, under the
        // lock: either its try sees these bytes back, or this sees it and wakes it.
        if self.inner.queued.load(Ordering::SeqCst) > 0 {
            let free = self.limit().saturating_sub(self.held());
            self.lock().wake_fitting(free).wake();
        }
    }

    /// Counts a refusal.
    pub(crate) fn note_refused(&self) {
        self.inner.refused.fetch_add(1, Ordering::Relaxed);
    }
}

impl fmt::Debug for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Budget")
            .field("limit", &self.limit())
            .field("held", &self.held())
            .field("peak", &self.peak())
            .field("refused", &self.refused())
            .field("waited", &self.waited())
            .field("waiting", &self.waiting())
            .finish()
    }
}

/// The bytes one holder (a connection's receive side) has charged to a budget, released
/// when it is dropped: however a connection ends, closed, failed or dropped mid-message,
/// what it charged goes back, and its place in the queue with it.
#[derive(Debug, Default)]
pub(crate) struct Charge {
    budget: Option<Budget>,
    bytes: usize,
    /// Its ticket in the budget's queue while it waits.
    waiting: Option<u64>,
    /// It is the floor: let past the limit until its charge is back to 0.
    floor: bool,
}

impl Charge {
    /// Charges against `budget`; `None` charges nothing and refuses nothing.
    pub(crate) fn new(budget: Option<&Budget>) -> Self {
        Charge {
            budget: budget.cloned(),
            bytes: 0,
            waiting: None,
            floor: false,
        }
    }

    /// Bytes charged now.
    #[inline]
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Charges or releases so that `bytes` are charged. When the budget cannot take the
    /// growth the charge is unchanged and the reason returned: it waits in the queue, or
    /// could never fit (counted as a refusal).
    #[inline]
    pub(crate) fn settle(&mut self, bytes: usize) -> Result<(), Short> {
        if bytes == self.bytes {
            return Ok(());
        }
        let Some(budget) = &self.budget else {
            return Ok(());
        };
        if bytes < self.bytes {
            self.shrink(bytes);
            return Ok(());
        }
        let n = bytes - self.bytes;
        if self.may_skip_queue(budget) && budget.take(n, false) == n {
            self.bytes = bytes;
            return Ok(());
        }
        self.grow_slow(n, false).map(|_| ())
    }

    /// Charges up to `n` bytes more, as much as may be granted now (maybe none, and then
    /// it waits in the queue); returns how many (all of `n` when there is no budget).
    /// `Err` when it could never grow (it holds the whole limit).
    #[cfg_attr(not(feature = "deflate"), allow(dead_code))]
    pub(crate) fn grow_up_to(&mut self, n: usize) -> Result<usize, Short> {
        let Some(budget) = &self.budget else {
            return Ok(n);
        };
        if n == 0 {
            return Ok(0);
        }
        if self.may_skip_queue(budget) {
            let granted = budget.take(n, true);
            if granted > 0 {
                self.bytes += granted;
                return Ok(granted);
            }
        }
        match self.grow_slow(n, true) {
            Ok(granted) => Ok(granted),
            Err(Short::Wait) => Ok(0),
            Err(Short::Never) => Err(Short::Never),
        }
    }

    /// Whether a charge may be taken without the queue's lock: when no one waits, or when
    /// this holder holds part of a message already (not waiting itself): finishing it
    /// gives memory back, where starting a new message while others wait would take it
    /// from them.
    #[inline]
    fn may_skip_queue(&self, budget: &Budget) -> bool {
        self.waiting.is_none()
            && !self.floor
            && (self.bytes > 0 || budget.inner.queued.load(Ordering::SeqCst) == 0)
    }

    /// Releases down to `bytes`; at 0 it leaves the queue and the floor.
    fn shrink(&mut self, bytes: usize) {
        let Some(budget) = &self.budget else {
            return;
        };
        let n = self.bytes - bytes;
        self.bytes = bytes;
        if self.waiting.is_some() || self.floor {
            let mut wake = Wakers::default();
            {
                let mut q = budget.lock();
                if let Some(ticket) = self.waiting {
                    if bytes == 0 {
                        self.waiting = None;
                        wake = q.remove(ticket, &budget.inner.queued, 0);
                    } else if let Some(at) = q.find(ticket) {
                        q.waiters[at].bytes -= n;
                        q.waiting_bytes -= n;
                    }
                }
                if self.floor && bytes == 0 {
                    self.floor = false;
                    q.floor = None;
                }
            }
            wake.wake();
        }
        budget.release(n);
    }

    /// The queue's rules for a growth of `n` (see the module documentation).
    fn grow_slow(&mut self, n: usize, partial: bool) -> Result<usize, Short> {
        let Some(budget) = self.budget.clone() else {
            return Ok(n);
        };
        let limit = budget.limit();
        // On its own this holder may never pass the limit.
        let room = limit.saturating_sub(self.bytes);
        let n = if partial { n.min(room) } else { n };
        if n == 0 || n > room {
            self.leave();
            budget.note_refused();
            return Err(Short::Never);
        }
        let mut wake = Wakers::default();
        let result = {
            let mut q = budget.lock();
            if self.floor {
                budget.take_past(n);
                Ok(n)
            } else {
                let new = self.waiting.is_none();
                let ticket = match self.waiting {
                    Some(t) => t,
                    None => {
                        // Joins (and is counted) before it tries: see `Budget::release`.
                        let t = q.next_ticket;
                        q.next_ticket += 1;
                        q.waiters.push_back(Waiter {
                            ticket: t,
                            bytes: self.bytes,
                            need: n,
                            waker: None,
                            woken: false,
                        });
                        q.waiting_bytes += self.bytes;
                        budget.inner.queued.fetch_add(1, Ordering::SeqCst);
                        self.waiting = Some(t);
                        t
                    }
                };
                if let Some(at) = q.find(ticket) {
                    q.waiters[at].need = n;
                }
                // The head may take what fits; the others what fits and leaves the head's
                // need free, so that it is never starved, nor anyone held up by a head that
                // is slow to try again.
                let (head, reserve) = match q.waiters.front() {
                    Some(w) if w.ticket == ticket => (true, 0),
                    Some(w) => (false, w.need),
                    None => (true, 0),
                };
                let granted = budget.take_leaving(n, partial, reserve);
                let free = limit.saturating_sub(budget.held());
                if granted > 0 {
                    self.waiting = None;
                    wake = q.remove(ticket, &budget.inner.queued, free);
                    Ok(granted)
                } else if head
                    && q.floor.is_none()
                    && budget.inner.held.load(Ordering::SeqCst) <= q.waiting_bytes
                {
                    // Every byte charged is held by a waiter: nothing comes back unless
                    // one goes on. The head does, past the limit, as the floor.
                    self.waiting = None;
                    wake = q.remove(ticket, &budget.inner.queued, 0);
                    q.floor = Some(ticket);
                    self.floor = true;
                    budget.take_past(n);
                    Ok(n)
                } else {
                    if new {
                        budget.inner.waited.fetch_add(1, Ordering::Relaxed);
                        // One more waiter may make every charge a waiter's: the head looks
                        // again.
                        if !head {
                            wake = q.wake_head();
                        }
                    }
                    Err(Short::Wait)
                }
            }
        };
        wake.wake();
        if let Ok(granted) = result {
            self.bytes += granted;
        }
        result
    }

    /// Releases everything and leaves the queue (the connection failed, closed or is
    /// dropped).
    pub(crate) fn reset(&mut self) {
        let _ = self.settle(0);
        self.leave();
    }

    /// Leaves the queue, if it waits there.
    pub(crate) fn leave(&mut self) {
        let (Some(budget), Some(ticket)) = (&self.budget, self.waiting.take()) else {
            return;
        };
        let free = budget.limit().saturating_sub(budget.held());
        budget
            .lock()
            .remove(ticket, &budget.inner.queued, free)
            .wake();
    }

    /// While it waits: says whether it is to try again now (it was woken since it last
    /// tried, or it no longer waits), and with `waker`, registers it to be woken when it
    /// is. Only `None` (the try itself) consumes the wake: an IO layer that registers
    /// and finds it woken polls again, and that poll's try must still see the wake (it
    /// was lost there once, and a head that did not try again never took the memory nor
    /// became the floor, so everyone behind it waited out `budget_wait`).
    pub(crate) fn poll_wait(&self, waker: Option<&Waker>) -> bool {
        let (Some(budget), Some(ticket)) = (&self.budget, self.waiting) else {
            return true;
        };
        let mut q = budget.lock();
        let Some(at) = q.find(ticket) else {
            return true;
        };
        let w = &mut q.waiters[at];
        match waker {
            None => std::mem::take(&mut w.woken),
            Some(_) if w.woken => true,
            Some(waker) => {
                if !w.waker.as_ref().is_some_and(|old| old.will_wake(waker)) {
                    w.waker = Some(waker.clone());
                }
                false
            }
        }
    }

    /// Counts a refusal.
    pub(crate) fn note_refused(&self) {
        if let Some(budget) = &self.budget {
            budget.note_refused();
        }
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.reset();
    }
}

#[cfg(test)]
mod tests;
