//! Positions in a topic's history, and the bounded ring that keeps it on one node.
//!
//! A topic with history numbers its publications 1, 2, 3, ... within an *epoch*: a value
//! that names one unbroken run of that numbering. The epoch changes whenever the
//! numbering cannot be trusted to be complete any more (the store that held it was lost,
//! or the node missed publications while its broker was away), so a client that kept its
//! last [`Position`] can ask for exactly what it missed, and is told when that is no
//! longer possible.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::Bytes;

/// Where a publication stands in its topic's history.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Position {
    /// 1 for the first publication of the epoch, then one more for each.
    pub offset: u64,
    /// Names the unbroken run of offsets this one belongs to.
    pub epoch: u64,
}

/// What [`Member::subscribe_from`](super::Member::subscribe_from) found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Recovery {
    /// Every publication after the given position was queued to the connection, in
    /// order, before any newer one; nothing was lost. `position` is the topic's latest.
    Recovered {
        /// Publications replayed from history.
        replayed: usize,
        /// The topic's latest position when the replay was taken (offset 0: none yet).
        position: Position,
    },
    /// The topic's epoch is not the one given: the history the client refers to is gone
    /// (the broker lost its data, or this node missed publications). The client must
    /// resynchronise; new publications follow, from `position` on.
    EpochChanged {
        /// The topic's latest position.
        position: Position,
    },
    /// The epoch is the same but the history no longer reaches back to the given
    /// offset (it keeps the latest [`HistoryConfig::capacity`] publications): the client
    /// must resynchronise; new publications follow.
    Trimmed {
        /// The topic's latest position.
        position: Position,
    },
}

/// How much history each topic keeps.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct HistoryConfig {
    /// Publications kept per topic (the newest ones). Default 1,000.
    pub capacity: usize,
    /// How long a topic's history is kept after its last publication. Default 5 minutes.
    pub ttl: Duration,
    /// At most this many publications are replayed by one recovery. Default 10,000.
    pub max_replay: usize,
}

impl Default for HistoryConfig {
    fn default() -> Self {
        HistoryConfig {
            capacity: 1000,
            ttl: Duration::from_secs(300),
            max_replay: 10_000,
        }
    }
}

setters! { HistoryConfig {
    /// Sets [`capacity`](Self::capacity) (at least 1).
    with_capacity(n: usize) => capacity = n.max(1);
    /// Sets [`ttl`](Self::ttl).
    with_ttl(ttl: Duration) => ttl;
} }

/// A page of history from a broker or a ring: the topic's epoch and latest offset, and the
/// entries after the asked-for offset (each an envelope with its position), oldest first.
#[derive(Debug, Default)]
pub struct HistoryPage {
    /// The topic's current epoch and latest offset (offset 0 when nothing was published).
    pub top: Option<Position>,
    /// `(offset, envelope)` pairs, oldest first, all in `top`'s epoch.
    pub entries: Vec<(u64, Bytes)>,
}

/// A fresh epoch: random, so that two runs of one node never reuse one.
pub(crate) fn new_epoch() -> u64 {
    let mut b = [0u8; 8];
    if getrandom::fill(&mut b).is_err() {
        // No OS randomness: the clock still tells runs apart.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        return t.as_nanos() as u64 | 1;
    }
    // Kept below 2^53 so it round-trips through JSON numbers in browsers.
    (u64::from_le_bytes(b) >> 11).max(1)
}

/// One topic's history on one node: the newest `capacity` envelopes.
#[derive(Debug)]
pub(crate) struct Ring {
    epoch: u64,
    /// Offset of the newest entry (0: none yet).
    last: u64,
    entries: VecDeque<Bytes>,
    capacity: usize,
    pub(crate) touched: Instant,
}

impl Ring {
    pub(crate) fn new(capacity: usize, now: Instant) -> Ring {
        Ring {
            epoch: new_epoch(),
            last: 0,
            entries: VecDeque::new(),
            capacity: capacity.max(1),
            touched: now,
        }
    }

    /// The position the next publication gets.
    pub(crate) fn next_position(&self) -> Position {
        Position {
            offset: self.last + 1,
            epoch: self.epoch,
        }
    }

    /// Keeps `envelope` as the publication at [`next_position`](Self::next_position).
    pub(crate) fn push(&mut self, envelope: Bytes, now: Instant) {
        if self.entries.len() == self.capacity {
            self.entries.pop_front();
        }
        self.entries.push_back(envelope);
        self.last += 1;
        self.touched = now;
    }

    pub(crate) fn top(&self) -> Position {
        Position {
            offset: self.last,
            epoch: self.epoch,
        }
    }

    /// Starts a new epoch: the node may have missed publications.
    pub(crate) fn break_epoch(&mut self) {
        self.epoch = new_epoch();
        self.last = 0;
        self.entries.clear();
    }

    /// The entries after `offset`, at most `limit` of them.
    pub(crate) fn since(&self, offset: u64, limit: usize) -> HistoryPage {
        let first = self.last + 1 - self.entries.len() as u64;
        let skip = offset.saturating_add(1).saturating_sub(first) as usize;
        HistoryPage {
            top: Some(self.top()),
            entries: self
                .entries
                .iter()
                .enumerate()
                .skip(skip)
                .take(limit)
                .map(|(i, e)| (first + i as u64, e.clone()))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_keeps_the_newest_and_numbers_them_from_one() {
        let now = Instant::now();
        let mut r = Ring::new(3, now);
        assert_eq!(r.next_position().offset, 1);
        for i in 1..=5u8 {
            r.push(Bytes::from(vec![i]), now);
        }
        assert_eq!(r.top().offset, 5);
        let page = r.since(0, 10);
        let got: Vec<_> = page.entries.iter().map(|(o, e)| (*o, e[0])).collect();
        assert_eq!(got, [(3, 3), (4, 4), (5, 5)]);
        assert_eq!(r.since(4, 10).entries.len(), 1);
        assert!(r.since(5, 10).entries.is_empty());
        assert_eq!(r.since(0, 2).entries.len(), 2);
        let epoch = r.top().epoch;
        r.break_epoch();
        assert_ne!(r.top().epoch, epoch);
        assert_eq!(r.next_position().offset, 1);
    }
}
