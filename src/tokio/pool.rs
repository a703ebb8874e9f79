//! A per-thread stock of empty receive buffers.
//!
//! An idle connection gives its receive buffer back (see `Engine::poll_fill`), so that
//! many idle connections hold none. Request/response traffic makes every connection go
//! "idle" between two messages, though, and freeing a 4 KiB buffer only to allocate one
//! again for the next message was a tenth of the user-space instructions of a 1 KiB
//! echo (callgrind, `benches/RESULTS.md`). The buffers go to this small stock instead, and
//! the next connection with something to read on the same thread takes one back: the
//! allocation is reused while it is still in cache, and no connection keeps a buffer of
//! its own while idle.
//!
//! The stock is bounded in count and in the size of what it takes, so it holds at most
//! [`MAX_BUFFERS`] × [`MAX_BUFFER`] bytes per thread however many connections there are.

use std::cell::RefCell;

use bytes::BytesMut;

/// Buffers kept per thread at most.
const MAX_BUFFERS: usize = 32;

/// Larger buffers (grown for a large message) are freed, not kept.
const MAX_BUFFER: usize = 32 * 1024;

thread_local! {
    static STOCK: RefCell<Vec<BytesMut>> = const { RefCell::new(Vec::new()) };
}

/// An empty buffer of at least `min` bytes: the last one given back if it is large
/// enough, else a new one.
pub(crate) fn take(min: usize) -> BytesMut {
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
        .unwrap_or_else(|| BytesMut::with_capacity(min))
}

/// Keeps `buf` for reuse if it is empty, owned by nobody else (a message split off it may
/// still be alive), holds at least `min` bytes and at most [`MAX_BUFFER`] (counting the
/// whole allocation behind it), and the stock has room; otherwise drops it.
pub(crate) fn give(mut buf: BytesMut, min: usize) {
    if !buf.is_empty() {
        return;
    }
    // Rewind the empty view to the start of its allocation, so that the size checked
    // below is the allocation's: a few bytes left at the end of a large message's buffer
    // must not keep all of it in the stock. `try_reclaim` rewinds only storage that no
    // `Bytes` shares any more, and fails for a view that starts at its allocation already.
    let cap = buf.capacity();
    if !buf.try_reclaim(cap + 1) {
        // Shared, or never split: `try_into_mut` succeeds only for the latter.
        // (`try_reclaim(min)` would not tell them apart: it succeeds without looking when
        // the view has `min` bytes spare.)
        match buf.freeze().try_into_mut() {
            Ok(unique) => buf = unique,
            Err(_) => return,
        }
    }
    if buf.capacity() < min {
        return;
    }
    keep(buf);
}

/// Keeps `buf`, emptied, for reuse: for a buffer that was never split or frozen (so
/// nothing shares it and its capacity is its allocation's), such as a send-queue chunk.
pub(crate) fn give_unshared(mut buf: BytesMut) {
    buf.clear();
    keep(buf);
}

/// Puts `buf` in the stock if it is not too large and the stock has room.
fn keep(buf: BytesMut) {
    if buf.capacity() > MAX_BUFFER {
        return;
    }
    // `try_with`: the thread-local may be gone while the thread shuts down.
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
    fn an_empty_unshared_buffer_is_reused() {
        let mut buf = BytesMut::with_capacity(4096);
        let ptr = buf.as_ptr();
        buf.extend_from_slice(b"hello");
        buf.clear();
        give(buf, 4096);
        let again = take(4096);
        assert_eq!(again.as_ptr(), ptr);
        assert!(again.capacity() >= 4096);
    }

    #[test]
    fn a_buffer_shared_with_a_live_message_is_not_kept() {
        let before = stock_len();
        let mut buf = BytesMut::with_capacity(4096);
        buf.extend_from_slice(&[1; 100]);
        let message = buf.split_to(100).freeze();
        give(buf, 4096);
        assert_eq!(stock_len(), before);
        drop(message);
    }

    #[test]
    fn a_view_shared_with_a_live_message_is_not_kept_even_with_room_to_spare() {
        let before = stock_len();
        let mut buf = BytesMut::with_capacity(16 * 1024);
        buf.extend_from_slice(&[1; 100]);
        let message = buf.split_to(100).freeze();
        assert!(buf.capacity() > 8192, "plenty of spare room in the view");
        give(buf, 4096);
        assert_eq!(stock_len(), before);
        drop(message);
    }

    #[test]
    fn a_small_view_into_a_large_allocation_is_not_kept() {
        let before = stock_len();
        let mut buf = BytesMut::with_capacity(MAX_BUFFER * 4);
        buf.resize(MAX_BUFFER * 4 - 100, 1);
        drop(buf.split_to(MAX_BUFFER * 4 - 100).freeze());
        // A few bytes of capacity showing, the whole allocation behind them.
        assert!(buf.is_empty() && buf.capacity() <= 4096);
        give(buf, 64);
        assert_eq!(stock_len(), before);
    }

    #[test]
    fn a_buffer_rewound_after_its_message_is_gone_is_kept() {
        let before = stock_len();
        let mut buf = BytesMut::with_capacity(4096);
        buf.extend_from_slice(&[1; 100]);
        let message = buf.split_to(100).freeze();
        drop(message);
        give(buf, 4096);
        assert_eq!(stock_len(), before + 1);
        let again = take(1024);
        assert!(again.is_empty() && again.capacity() >= 4096);
    }

    #[test]
    fn a_buffer_too_small_for_the_request_stays_in_the_stock() {
        give(BytesMut::with_capacity(1024), 1024);
        let before = stock_len();
        let big = take(8192);
        assert!(big.capacity() >= 8192);
        assert_eq!(stock_len(), before, "the small buffer is still there");
    }

    #[test]
    fn large_or_non_empty_buffers_are_dropped_and_the_stock_is_bounded() {
        let before = stock_len();
        give(BytesMut::with_capacity(MAX_BUFFER * 2), 4096);
        let mut full = BytesMut::with_capacity(4096);
        full.extend_from_slice(b"x");
        give(full, 4096);
        assert_eq!(stock_len(), before);
        for _ in 0..MAX_BUFFERS * 2 {
            give(BytesMut::with_capacity(4096), 4096);
        }
        assert_eq!(stock_len(), MAX_BUFFERS);
    }
}
