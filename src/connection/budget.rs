//! A memory budget shared by many connections: what one peer can make a connection hold
//! is bounded per connection by the size limits; what all peers together can make a
//! process hold is bounded here.
//!
//! A connection charges the bytes of the messages it is receiving (a single-frame
//! message arriving in place, the fragments of one being assembled, what the inflater has
//! produced of a compressed one) until the message is complete and handed over, and
//! releases them then, or when it fails, closes or is dropped. A charge that would pass
//! the limit is refused: the connection fails with [`Error::OverBudget`] and closes with
//! 1013 ("try again later"), and the budget counts the refusal.
//!
//! [`Error::OverBudget`]: super::Error::OverBudget

use core::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

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
/// **Sizing it.** Each connection can hold up to
/// [`max_message_size`](super::Config::max_message_size) on its own (16 MiB by
/// default); the budget bounds the sum. Choose the memory you can give to messages in
/// flight (what the machine has, less the application's own needs and the fixed cost of
/// each connection, about 2.4 KiB idle): with 10,000 connections and 16 MiB messages the
/// worst case would be 160 GiB, and the budget is what keeps it at 1 GiB. An
/// uncompressed message that arrives whole in one read is handed over at once and never
/// charged, a compressed one only while it inflates, so what counts is the large messages
/// in flight at once: size the budget for the number of those you expect times their
/// size, and watch [`refused`](Self::refused) and [`peak`](Self::peak) in production.
/// What the budget does not count: buffer capacity reserved ahead of the bytes (at most
/// [`max_read_ahead`](super::Config::max_read_ahead), 1 MiB, per connection receiving a
/// large frame), the inflater's state (~49 KiB per compressing connection) and the send
/// queues.
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

    /// The most bytes charged at once so far (never more than the limit).
    pub fn peak(&self) -> usize {
        self.inner.peak.load(Ordering::Relaxed)
    }

    /// How many times a charge was refused: each one closed a connection with 1013
    /// (or refused what another holder asked for).
    pub fn refused(&self) -> u64 {
        self.inner.refused.load(Ordering::Relaxed)
    }

    /// Whether `self` and `other` share their counters (one is a clone of the other).
    pub fn same_as(&self, other: &Budget) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Charges `n` bytes if they fit under the limit, all or nothing; a refusal is
    /// counted. Every `true` must be matched by a [`release`](Self::release) of the
    /// same bytes ([`Charge`] does it on drop).
    pub(crate) fn charge(&self, n: usize) -> bool {
        let c = &self.inner;
        let r = c
            .held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                held.checked_add(n).filter(|&total| total <= c.limit)
            });
        match r {
            Ok(before) => {
                self.note_peak(before + n);
                true
            }
            Err(_) => {
                self.note_refused();
                false
            }
        }
    }

    /// Charges as much of `n` as fits (maybe nothing) and returns that; a shortfall is
    /// not counted as a refusal.
    #[cfg_attr(not(feature = "deflate"), allow(dead_code))]
    pub(crate) fn charge_up_to(&self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        let c = &self.inner;
        let mut granted = 0;
        let r = c
            .held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                granted = n.min(c.limit.saturating_sub(held));
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

    #[inline]
    fn note_peak(&self, held: usize) {
        let peak = &self.inner.peak;
        if held > peak.load(Ordering::Relaxed) {
            peak.fetch_max(held, Ordering::Relaxed);
        }
    }

    /// Gives back `n` bytes charged earlier.
    pub(crate) fn release(&self, n: usize) {
        if n > 0 {
            let before = self.inner.held.fetch_sub(n, Ordering::Relaxed);
            debug_assert!(before >= n, "released {n} of {before} charged bytes");
        }
    }

    /// Counts a refusal made on a charge that [`charge_up_to`](Self::charge_up_to) cut
    /// short.
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
            .finish()
    }
}

/// The bytes one holder (a connection's receive side; a send queue) has charged to a
/// budget, released when it is dropped: however a connection ends, closed, failed or
/// dropped mid-message, what it charged goes back.
#[derive(Debug, Default)]
pub(crate) struct Charge {
    budget: Option<Budget>,
    bytes: usize,
}

impl Charge {
    /// Charges against `budget`; `None` charges nothing and refuses nothing.
    pub(crate) fn new(budget: Option<&Budget>) -> Self {
        Charge {
            budget: budget.cloned(),
            bytes: 0,
        }
    }

    /// Bytes charged now.
    #[inline]
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Charges or releases so that `bytes` are charged: false, with the charge
    /// unchanged, when the budget cannot take the growth (the refusal is counted).
    #[inline]
    pub(crate) fn settle(&mut self, bytes: usize) -> bool {
        if bytes == self.bytes {
            return true;
        }
        let Some(budget) = &self.budget else {
            return true;
        };
        if bytes > self.bytes {
            if !budget.charge(bytes - self.bytes) {
                return false;
            }
        } else {
            budget.release(self.bytes - bytes);
        }
        self.bytes = bytes;
        true
    }

    /// Charges up to `n` bytes more, as much as fits; returns how many (all of `n` when
    /// there is no budget).
    #[cfg_attr(not(feature = "deflate"), allow(dead_code))]
    pub(crate) fn grow_up_to(&mut self, n: usize) -> usize {
        let granted = match &self.budget {
            Some(budget) => budget.charge_up_to(n),
            None => n,
        };
        if self.budget.is_some() {
            self.bytes += granted;
        }
        granted
    }

    /// Counts a refusal of what [`grow_up_to`](Self::grow_up_to) could not grant.
    #[cfg_attr(not(feature = "deflate"), allow(dead_code))]
    pub(crate) fn note_refused(&self) {
        if let Some(budget) = &self.budget {
            budget.note_refused();
        }
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.settle(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_fit_under_the_limit_and_refusals_are_counted() {
        let b = Budget::new(100);
        assert!(b.charge(60));
        assert!(!b.charge(41));
        assert_eq!((b.held(), b.refused()), (60, 1));
        assert_eq!(b.charge_up_to(100), 40);
        assert_eq!(b.charge_up_to(1), 0);
        assert_eq!((b.held(), b.peak(), b.refused()), (100, 100, 1));
        b.release(100);
        assert_eq!((b.held(), b.peak()), (0, 100));
    }

    #[test]
    fn a_charge_settles_up_and_down_and_gives_everything_back_when_dropped() {
        let b = Budget::new(1000);
        let mut c = Charge::new(Some(&b));
        assert!(c.settle(300));
        assert!(c.settle(200));
        assert_eq!(b.held(), 200);
        assert!(!c.settle(2000), "past the limit");
        assert_eq!((c.bytes(), b.held(), b.refused()), (200, 200, 1));
        assert_eq!(c.grow_up_to(5000), 800);
        assert_eq!(b.held(), 1000);
        drop(c);
        assert_eq!(b.held(), 0);
    }

    #[test]
    fn without_a_budget_nothing_is_charged_or_refused() {
        let mut c = Charge::new(None);
        assert!(c.settle(usize::MAX));
        assert_eq!(c.grow_up_to(7), 7);
        assert_eq!(c.bytes(), 0);
    }

    #[test]
    fn the_shared_budget_is_one_for_the_process() {
        assert!(Budget::shared().same_as(&Budget::shared()));
        assert_eq!(Budget::shared().limit(), DEFAULT_BUDGET);
        assert!(!Budget::new(1).same_as(&Budget::new(1)));
    }
}
