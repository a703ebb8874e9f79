//! A per-thread stock of empty receive buffers grown for large messages.
//!
//! A connection that receives large messages needs a large buffer while one arrives, and
//! none while it waits for the next. Kept per connection, those buffers would sit out of
//! cache: a server echoing 16 KiB messages on 1,000 connections would hold 49 MB of them
//! and work from main memory (`benches/RESULTS.md`, instruction counts). Given back when a
//! read finds nothing to read
//! ([`Connection::read_would_block`](super::Connection::read_would_block)) and taken by
//! the next connection on the same thread with something to read, a few buffers serve
//! them all, still in cache. Small buffers are not stocked: a connection keeps its own
//! (stocking them would cost more than their cache footprint saves).
//!
//! The stock is bounded in count and in the size of what it takes, so it holds at most
//! [`MAX_BUFFERS`] × [`MAX_BUFFER`] bytes per thread, however many connections there are.

use std::cell::RefCell;

use bytes::BytesMut;

/// Buffers kept per thread at most.
const MAX_BUFFERS: usize = 16;

/// Larger buffers are freed, not kept.
pub(super) const MAX_BUFFER: usize = 64 * 1024;

thread_local! {
    static STOCK: RefCell<Vec<BytesMut>> = const { RefCell::new(Vec::new()) };
}

/// An empty buffer of at least `min` bytes from the stock: the last one given back, if it
/// is large enough.
pub(super) fn take(min: usize) -> Option<BytesMut> {
    // `try_with`: the thread-local may be gone while the thread shuts down.
    STOCK
        .try_with(|s| {
            let mut s = s.borrow_mut();
            match s.last() {
                Some(b) if b.capacity() >= min => s.pop(),
                _ => None,
            }
        })
        .ok()
        .flatten()
}

/// Keeps `buf` for reuse if it is empty, owned by nobody else (a message split off it may
/// still be alive: then it is dropped, and the message frees the memory), at most
/// [`MAX_BUFFER`] counting its whole allocation, and the stock has room.
pub(super) fn give(mut buf: BytesMut) {
    if !buf.is_empty() {
        return;
    }
    // Rewind the empty view to the start of its allocation, so that what is kept (and
    // checked below) is the whole allocation. `try_reclaim` rewinds only storage that no
    // `Bytes` shares any more, and fails for a view that starts at its allocation already.
    let cap = buf.capacity();
    if !buf.try_reclaim(cap + 1) {
        // Shared, or never split: `try_into_mut` succeeds only for the latter.
        match buf.freeze().try_into_mut() {
            Ok(unique) => buf = unique,
            Err(_) => return,
        }
    }
    if buf.capacity() > MAX_BUFFER {
        return;
    }
    let _ = STOCK.try_with(|s| {
        let mut s = s.borrow_mut();
        if s.len() < MAX_BUFFERS {
            s.push(buf);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stock_len() -> usize {
        STOCK.with(|s| s.borrow().len())
    }

    #[test]
    fn an_empty_unshared_buffer_is_reused_whole() {
        let mut buf = BytesMut::with_capacity(32 * 1024);
        let ptr = buf.as_ptr();
        buf.extend_from_slice(&[1; 16 * 1024]);
        let message = buf.split_to(16 * 1024).freeze();
        drop(message);
        give(buf);
        let again = take(32 * 1024).expect("the buffer was stocked");
        assert_eq!(
            again.as_ptr(),
            ptr,
            "rewound to the start of its allocation"
        );
        assert!(again.capacity() >= 32 * 1024);
        assert!(again.is_empty());
    }

    #[test]
    fn a_buffer_shared_with_a_live_message_is_not_kept() {
        let before = stock_len();
        let mut buf = BytesMut::with_capacity(32 * 1024);
        buf.extend_from_slice(&[1; 100]);
        let message = buf.split_to(100).freeze();
        assert!(
            buf.capacity() > 16 * 1024,
            "plenty of spare room in the view"
        );
        give(buf);
        assert_eq!(stock_len(), before);
        assert_eq!(&message[..], &[1; 100][..]);
    }

    #[test]
    fn a_buffer_too_large_or_not_empty_is_not_kept() {
        let before = stock_len();
        give(BytesMut::with_capacity(MAX_BUFFER * 2));
        let mut full = BytesMut::with_capacity(1024);
        full.extend_from_slice(b"x");
        give(full);
        assert_eq!(stock_len(), before);
    }

    #[test]
    fn take_wants_a_large_enough_buffer_and_the_stock_is_bounded() {
        while take(0).is_some() {}
        give(BytesMut::with_capacity(1024));
        assert!(take(4096).is_none(), "too small for the read");
        assert!(take(1024).is_some());
        for _ in 0..MAX_BUFFERS * 2 {
            give(BytesMut::with_capacity(1024));
        }
        assert_eq!(stock_len(), MAX_BUFFERS);
        while take(0).is_some() {}
    }
}
