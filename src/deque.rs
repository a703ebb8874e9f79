//! [`Deque`]: a FIFO queue whose first element lives inline.
//!
//! The output queues of a connection hold one frame most of the time: a message is queued,
//! then written. A `VecDeque` allocates its ring on the first push and, to keep idle
//! connections small, the connection frees it again once empty, so request/response
//! traffic paid an allocation and a free per queue per message. With the first element
//! inline, a queue that never holds more than one element never allocates; a queue that
//! does (a burst) spills the rest into a `VecDeque` as before.

use std::collections::VecDeque;

/// A FIFO queue whose front element is stored inline while the queue is short.
///
/// Invariant: when `head` is empty, `rest` holds the whole queue; `push_back` only fills
/// `head` when the queue is empty, so the order is always `head` then `rest`.
#[derive(Debug)]
pub(crate) struct Deque<T> {
    head: Option<T>,
    rest: VecDeque<T>,
}

impl<T> Default for Deque<T> {
    fn default() -> Self {
        Deque {
            head: None,
            rest: VecDeque::new(),
        }
    }
}

impl<T> Deque<T> {
    /// Whether nothing is queued.
    pub(crate) fn is_empty(&self) -> bool {
        self.head.is_none() && self.rest.is_empty()
    }

    /// Appends `value` at the back.
    pub(crate) fn push_back(&mut self, value: T) {
        if self.is_empty() {
            self.head = Some(value);
        } else {
            self.rest.push_back(value);
        }
    }

    /// Removes the front element.
    pub(crate) fn pop_front(&mut self) -> Option<T> {
        self.head.take().or_else(|| self.rest.pop_front())
    }

    /// The front element.
    pub(crate) fn front(&self) -> Option<&T> {
        self.head.as_ref().or_else(|| self.rest.front())
    }

    /// The back element, mutably.
    pub(crate) fn back_mut(&mut self) -> Option<&mut T> {
        match self.rest.back_mut() {
            Some(back) => Some(back),
            None => self.head.as_mut(),
        }
    }

    /// The element, when there is exactly one and it is the inline one (a lone element
    /// left in the spill after a burst gives `None`).
    #[inline]
    pub(crate) fn single(&self) -> Option<&T> {
        match &self.head {
            Some(head) if self.rest.is_empty() => Some(head),
            _ => None,
        }
    }

    /// Removes the element when there is exactly one and it is the inline one, as
    /// [`single`](Self::single) finds it.
    #[inline]
    pub(crate) fn pop_single(&mut self) -> Option<T> {
        if self.rest.is_empty() {
            self.head.take()
        } else {
            None
        }
    }

    /// The elements, front to back.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.head.iter().chain(self.rest.iter())
    }

    /// Whether the spill holds storage that [`shrink_idle`](Self::shrink_idle) would free:
    /// none in use. (Storage in use is no idle memory: counting it kept a connection's
    /// memory timer due while its queue waited for a peer that did not read, and the timer
    /// fired on every poll.)
    #[inline]
    pub(crate) fn spills(&self) -> bool {
        self.rest.is_empty() && self.rest.capacity() > 0
    }

    /// Frees the spill storage when it is empty and holds more than `keep` elements' room.
    pub(crate) fn shrink_idle(&mut self, keep: usize) {
        if self.rest.is_empty() && self.rest.capacity() > keep {
            self.rest = VecDeque::new();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_fifo_order_through_any_mix_of_pushes_and_pops() {
        // Every sequence of 12 operations (push = 1, pop = 0) against a VecDeque.
        for ops in 0u32..(1 << 12) {
            let mut ours = Deque::default();
            let mut model = VecDeque::new();
            for (i, bit) in (0..12).map(|b| (ops >> b) & 1).enumerate() {
                if bit == 1 {
                    ours.push_back(i);
                    model.push_back(i);
                } else {
                    assert_eq!(ours.pop_front(), model.pop_front());
                }
                assert_eq!(ours.is_empty(), model.is_empty());
                assert_eq!(ours.front(), model.front());
                assert!(ours.iter().eq(model.iter()));
                assert_eq!(ours.back_mut().copied(), model.back_mut().copied());
                // A lone element may sit in the spill (after a burst): then `None`, and
                // the caller takes the general path.
                if let Some(one) = ours.single() {
                    assert_eq!((model.len(), model.front()), (1, Some(one)));
                }
                if i % 3 == 0
                    && let Some(one) = ours.pop_single()
                {
                    assert_eq!(model.pop_front(), Some(one));
                    assert!(model.is_empty() && ours.is_empty());
                }
            }
        }
    }

    #[test]
    fn one_element_at_a_time_never_allocates_the_spill() {
        let mut q = Deque::default();
        for i in 0..100 {
            q.push_back(i);
            assert_eq!(q.pop_front(), Some(i));
        }
        assert_eq!(q.rest.capacity(), 0);
    }

    #[test]
    fn shrink_idle_frees_only_an_empty_spill_above_the_limit() {
        let mut q = Deque::default();
        for i in 0..40 {
            q.push_back(i);
        }
        q.shrink_idle(0);
        assert!(q.rest.capacity() > 0, "not empty: kept");
        while q.pop_front().is_some() {}
        q.shrink_idle(64);
        assert!(q.rest.capacity() > 0, "under the limit: kept");
        q.shrink_idle(0);
        assert_eq!(q.rest.capacity(), 0);
    }
}
