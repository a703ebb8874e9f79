//! Waiting for memory from the budget (budget.rs): a charge that does not fit makes the
//! connection wait instead of failing. It keeps what it has, decodes nothing more, asks
//! for no more reads ([`Connection::wants_read`]), and tries again when the budget wakes
//! it, until [`Config::budget_wait`](super::Config::budget_wait) (the budget timer in
//! `timers.rs`) ends the wait with 1013.

use std::task::Waker;
use std::time::Instant;

use crate::codec::DataChunk;

use super::budget::Short;
use super::{Connection, Error, Raw};

/// What a connection waiting for memory does again once the budget may grant it.
#[derive(Debug)]
pub(super) enum Stall {
    /// Charges what it holds already (a frame held in place that a read grew, fragments
    /// moved to the message buffer), then decodes on.
    Settle,
    /// Takes a decoded chunk that was not taken yet (to be copied into the message
    /// buffer, or inflated): `chunk`'s payload counts from `rx_read`, its frame's
    /// `consumed` bytes are still unread.
    Chunk { chunk: DataChunk, consumed: usize },
}

impl Connection {
    /// Whether the connection waits for memory from its budget: it reads nothing and
    /// decodes nothing until the budget grants it (the IO layer is woken through
    /// [`register_budget_waker`](Self::register_budget_waker), or polls), or until
    /// [`Config::budget_wait`](super::Config::budget_wait) has passed, when
    /// [`handle_timeout`](Self::handle_timeout) fails it with [`Error::OverBudget`]
    /// (1013). [`poll_timeout`](Self::poll_timeout) includes that deadline.
    #[inline]
    pub fn waits_for_budget(&self) -> bool {
        self.stall.is_some()
    }

    /// While the connection [waits for budget](Self::waits_for_budget): registers `waker`
    /// to be woken when it is to try again (memory was returned, or its turn came), and
    /// returns true; false when it is to be polled again at once (it was woken meanwhile,
    /// or does not wait). Nothing is lost between a poll that found the budget short and
    /// this call.
    pub fn register_budget_waker(&self, waker: &Waker) -> bool {
        self.stall.is_some() && !self.charge.poll_wait(Some(waker))
    }

    /// When the connection began to wait for budget, if it waits.
    #[cfg_attr(not(feature = "blocking"), allow(dead_code))]
    pub(crate) fn budget_waiting_since(&self) -> Option<Instant> {
        self.timers.budget_since
    }

    /// Brings the budget charge to what the message being received holds plus `more`:
    /// `Ok(true)` once charged, `Ok(false)` when the connection is to wait (the caller
    /// records what to do again, [`stall`](Self::stall)), `OverBudget` when it may not wait
    /// (the charge could never fit, or `budget_wait` is zero).
    pub(super) fn charge_or_wait(&mut self, more: usize) -> Result<bool, Error> {
        match self.charge.settle(self.partial_bytes() + more) {
            Ok(()) => Ok(true),
            Err(Short::Wait) if !self.config.budget_wait.is_zero() => Ok(false),
            Err(short) => Err(self.over_budget(short)),
        }
    }

    /// A charge that fell short is refused: the connection leaves the budget's queue, and
    /// the refusal is counted (a `Never` was counted by the budget).
    pub(super) fn over_budget(&mut self, short: Short) -> Error {
        if short == Short::Wait {
            self.charge.leave();
            self.charge.note_refused();
        }
        Error::OverBudget
    }

    /// Waits for memory, to do `what` again when granted: the wait's deadline runs from
    /// its first stall.
    pub(super) fn stall(&mut self, what: Stall) {
        self.stall = Some(Box::new(what));
        self.timers.budget_since.get_or_insert(self.now);
    }

    /// [`stall`](Self::stall) on `chunk` (positions in `rx`), decoded and not taken.
    pub(super) fn stall_chunk(&mut self, mut chunk: DataChunk, consumed: usize) {
        chunk.payload = chunk.payload.start - self.rx_read..chunk.payload.end - self.rx_read;
        self.stall(Stall::Chunk { chunk, consumed });
    }

    /// For `next_raw` while the connection waits: tries again when the budget says to.
    /// `None` when the wait is over and decoding goes on; `Some` with what `next_raw`
    /// returns (`Some(None)`: it still waits).
    #[cold]
    pub(super) fn resume(&mut self) -> Option<Option<Result<Raw, Error>>> {
        // Tries while the budget says to: it woke this connection, or the connection is
        // not queued (an inflate that paused at its grant goes on at once while it is
        // granted more).
        while self.charge.poll_wait(None) {
            let what = self.stall.take()?;
            match *what {
                Stall::Settle => match self.charge_or_wait(0) {
                    Ok(true) => {}
                    Ok(false) => {
                        self.stall = Some(what);
                        continue;
                    }
                    Err(e) => return Some(Some(Err(self.fail_now(e)))),
                },
                Stall::Chunk {
                    mut chunk,
                    consumed,
                } => {
                    chunk.payload =
                        chunk.payload.start + self.rx_read..chunk.payload.end + self.rx_read;
                    match self.data_rest(chunk, consumed) {
                        Ok(Some(raw)) => {
                            if self.stall.is_none() {
                                self.timers.budget_since = None;
                            }
                            return Some(Some(Ok(raw)));
                        }
                        // Waits again (the budget granted part of what it needs).
                        Ok(None) if self.stall.is_some() => continue,
                        Ok(None) => {}
                        Err(e) => return Some(Some(Err(self.fail_now(e)))),
                    }
                }
            }
            self.timers.budget_since = None;
            return None;
        }
        Some(None)
    }
}
