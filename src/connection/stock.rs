//! A per-thread stock of empty buffers: receive buffers and output chunks of connections
//! that have gone quiet.
//!
//! A connection needs a receive buffer while bytes arrive and an output chunk while small
//! frames wait for the socket, and neither while it waits for its peer. Kept per
//! connection, those buffers would pin memory on every idle connection (10,000 of them at 8
//! KiB is 80 MB) and sit out of cache; handed back to the allocator whenever a connection
//! went quiet, they cost an allocation, a free and, for the larger ones, page faults per
//! message on a server whose connections each send now and then. So a connection gives
//! its empty buffers to this thread's stock when a read finds nothing to read
//! ([`Connection::read_would_block`](super::Connection::read_would_block)), and the next
//! connection on the same thread with something to read or write takes one from there: a
//! few buffers, still warm in cache, serve all the connections of a thread, and the steady
//! state allocates nothing.
//!
//! The stock is bounded in count and in the size of what it takes, so it holds at most
//! [`MAX_BUFFERS`] × [`MAX_BUFFER`] bytes per thread, however many connections there are.

use std::cell::RefCell;

use bytes::BytesMut;

/// Buffers kept per thread and shelf at most.
const MAX_BUFFERS: usize = 16;

/// Larger buffers are freed, not kept.
pub(super) const MAX_BUFFER: usize = 64 * 1024;

/// Which kind of buffer: each has its own shelf, so that a read never takes the output
/// chunk a burst of replies then has to allocate again, nor the other way round (their
/// sizes follow different rules).
#[derive(Clone, Copy)]
pub(super) enum Shelf {
    /// Receive buffers.
    Recv = 0,
    /// Output chunks (small frames copied back to back).
    Send = 1,
}

thread_local! {
    static STOCK: RefCell<[Vec<BytesMut>; 2]> = const { RefCell::new([Vec::new(), Vec::new()]) };
}

/// An empty buffer of at least `min` bytes from `shelf`: the one given back last of those
/// large enough.
#[inline]
pub(super) fn take(shelf: Shelf, min: usize) -> Option<BytesMut> {
    // `try_with`: the thread-local may be gone while the thread shuts down.
    STOCK
        .try_with(|s| {
            let s = &mut s.borrow_mut()[shelf as usize];
            let at = s.iter().rposition(|b| b.capacity() >= min)?;
            Some(s.swap_remove(at))
        })
        .ok()
        .flatten()
}

/// Keeps `buf` for reuse if it is empty, owned by nobody else (a message split off it may
/// still be alive: then it is dropped, and the message frees the memory), of `least` to
/// [`MAX_BUFFER`] bytes counting its whole allocation, and the stock has room.
pub(super) fn give(shelf: Shelf, mut buf: BytesMut, least: usize) {
    if !buf.is_empty() || buf.capacity() == 0 {
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
    keep(shelf, buf, least);
}

/// [`give`] for a buffer the caller knows no `Bytes` shares (nothing was ever split off
/// it, or only what [`give`] would have rewound over): no check, and no round trip through
/// a shared handle, which for a view at the start of its allocation costs an allocation
/// and a free.
#[inline]
pub(super) fn give_unshared(shelf: Shelf, mut buf: BytesMut, least: usize) {
    if !buf.is_empty() || buf.capacity() == 0 {
        return;
    }
    // A view past the start of its allocation (bytes consumed from its front) is rewound;
    // one at the start already stays as it is.
    let cap = buf.capacity();
    let _ = buf.try_reclaim(cap + 1);
    keep(shelf, buf, least);
}

/// Puts a whole, empty, unshared buffer in the stock, if it holds at least `least` bytes
/// (a smaller one would only take a place no taker wants), at most [`MAX_BUFFER`], and the
/// stock has room.
#[inline]
fn keep(shelf: Shelf, buf: BytesMut, least: usize) {
    if buf.capacity() < least || buf.capacity() > MAX_BUFFER {
        return;
    }
    let _ = STOCK.try_with(|s| {
        let s = &mut s.borrow_mut()[shelf as usize];
        if s.len() < MAX_BUFFERS {
            s.push(buf);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stock_len() -> usize {
        STOCK.with(|s| s.borrow()[Shelf::Recv as usize].len())
    }

    #[test]
    fn an_empty_unshared_buffer_is_reused_whole() {
        let mut buf = BytesMut::with_capacity(32 * 1024);
        let ptr = buf.as_ptr();
        buf.extend_from_slice(&[1; 16 * 1024]);
        let message = buf.split_to(16 * 1024).freeze();
        drop(message);
        give(Shelf::Recv, buf, 0);
        let again = take(Shelf::Recv, 32 * 1024).expect("the buffer was stocked");
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
        give(Shelf::Recv, buf, 0);
        assert_eq!(stock_len(), before);
        assert_eq!(&message[..], &[1; 100][..]);
    }

    #[test]
    fn a_buffer_too_large_or_not_empty_is_not_kept() {
        let before = stock_len();
        give(Shelf::Recv, BytesMut::with_capacity(MAX_BUFFER * 2), 0);
        let mut full = BytesMut::with_capacity(1024);
        full.extend_from_slice(b"x");
        give(Shelf::Recv, full, 0);
        assert_eq!(stock_len(), before);
    }

    #[test]
    fn take_wants_a_large_enough_buffer_and_the_stock_is_bounded() {
        while take(Shelf::Recv, 0).is_some() {}
        give(Shelf::Recv, BytesMut::with_capacity(1024), 0);
        assert!(take(Shelf::Recv, 4096).is_none(), "too small for the read");
        assert!(take(Shelf::Recv, 1024).is_some());
        for _ in 0..MAX_BUFFERS * 2 {
            give(Shelf::Recv, BytesMut::with_capacity(1024), 0);
        }
        assert_eq!(stock_len(), MAX_BUFFERS);
        while take(Shelf::Recv, 0).is_some() {}
    }

    #[test]
    fn a_buffer_too_small_for_its_takers_is_not_kept() {
        let before = stock_len();
        give(Shelf::Recv, BytesMut::with_capacity(200), 4096);
        give_unshared(Shelf::Recv, BytesMut::with_capacity(200), 4096);
        assert_eq!(stock_len(), before, "no read of 4 KiB would take them");
        give_unshared(Shelf::Recv, BytesMut::with_capacity(4096), 4096);
        assert_eq!(stock_len(), before + 1);
        while take(Shelf::Recv, 0).is_some() {}
    }
}
