//! The bounded send queue: encoded frames waiting for the socket.
//!
//! Each entry is a frame header (at most 14 bytes, kept inline) followed by a payload held
//! as [`Bytes`], so a payload the caller handed over as `Bytes` is never copied. Small
//! frames are instead copied into one contiguous "coalesce" chunk, so a burst of small
//! messages costs few iovecs. [`SendQueue::poll_drain`] writes everything queued with
//! `poll_write_vectored`, as many entries per call as fit in [`MAX_IOVECS`].
//!
//! The queue counts the bytes it holds; [`SendQueue::has_room`] compares that to a
//! high-water mark chosen by the caller, which is how `try_send` reports `QueueFull`.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::BytesMut;
use tokio::io::AsyncWrite;

use crate::connection::Transmit;
use crate::deque::Deque;

/// Frames whose payload is at most this many bytes are copied into the coalesce chunk
/// rather than queued as their own iovecs.
const COALESCE_PAYLOAD_MAX: usize = 512;

/// A new coalesce chunk holds at least this much: the default read size, so that chunks
/// and receive buffers in the thread's stock serve each other.
const CHUNK_MIN: usize = 4096;

/// A coalesce chunk stops growing past this size, so one chunk never pins much memory.
const COALESCE_CHUNK_MAX: usize = 16 * 1024;

/// iovecs handed to one `writev`. Linux allows 1024; 64 already amortises the syscall.
pub(crate) const MAX_IOVECS: usize = 64;

enum Entry {
    /// A frame from the connection: its header inline, its payload shared with the caller.
    Frame(Transmit),
    /// Whole small frames copied back to back.
    Copied(BytesMut),
}

impl Entry {
    fn len(&self) -> usize {
        match self {
            Entry::Frame(t) => t.len(),
            Entry::Copied(b) => b.len(),
        }
    }
}

/// Encoded frames waiting to be written, oldest first.
#[derive(Default)]
pub(crate) struct SendQueue {
    entries: Deque<Entry>,
    /// Bytes of the front entry already written.
    front_written: usize,
    /// Bytes queued and not yet written.
    len: usize,
}

impl SendQueue {
    /// Bytes queued and not yet written.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is waiting to be written.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `extra` more bytes fit under `high_water`. An empty queue always has room,
    /// so a single message larger than the mark can still be sent.
    pub(crate) fn has_room(&self, extra: usize, high_water: usize) -> bool {
        self.len == 0 || self.len.saturating_add(extra) <= high_water
    }

    /// Frees the entries' storage when nothing is queued (an idle connection keeps none).
    pub(crate) fn release_idle(&mut self) {
        self.entries.shrink_idle(0);
    }

    /// Queues one frame.
    pub(crate) fn push(&mut self, frame: Transmit) {
        self.len += frame.len();
        if frame.payload().len() <= COALESCE_PAYLOAD_MAX {
            self.copy_in(frame.header(), frame.payload());
            return;
        }
        self.entries.push_back(Entry::Frame(frame));
    }

    fn copy_in(&mut self, a: &[u8], b: &[u8]) {
        let n = a.len() + b.len();
        if let Some(Entry::Copied(chunk)) = self.entries.back_mut()
            && chunk.len() + n <= COALESCE_CHUNK_MAX
        {
            chunk.extend_from_slice(a);
            chunk.extend_from_slice(b);
            return;
        }
        // A buffer from the thread's stock when there is one (the chunk goes back to it
        // once written), so small messages one at a time allocate nothing.
        let mut chunk = super::pool::take(n.max(CHUNK_MIN));
        chunk.extend_from_slice(a);
        chunk.extend_from_slice(b);
        self.entries.push_back(Entry::Copied(chunk));
    }

    /// Fills `out` with the unwritten bytes, oldest first; returns how many slices were used.
    fn io_slices<'a>(&'a self, out: &mut [IoSlice<'a>]) -> usize {
        let mut n = 0;
        let mut skip = self.front_written;
        for entry in self.entries.iter() {
            let (first, second): (&[u8], &[u8]) = match entry {
                Entry::Frame(t) => (t.header(), t.payload()),
                Entry::Copied(b) => (b, &[]),
            };
            for part in [first, second] {
                if skip >= part.len() {
                    skip -= part.len();
                    continue;
                }
                if n == out.len() {
                    return n;
                }
                out[n] = IoSlice::new(&part[skip..]);
                skip = 0;
                n += 1;
            }
        }
        n
    }

    /// Marks `n` bytes as written, dropping finished entries.
    fn advance(&mut self, mut n: usize) {
        self.len -= n;
        while n > 0 {
            let Some(front) = self.entries.front() else {
                break;
            };
            let left = front.len() - self.front_written;
            if n < left {
                self.front_written += n;
                return;
            }
            n -= left;
            self.front_written = 0;
            if let Some(Entry::Copied(chunk)) = self.entries.pop_front() {
                // Only ever read through slices: never shared.
                super::pool::give_unshared(chunk);
            }
        }
        // Keep a small idle footprint: a long queue's ring buffer is released.
        self.entries.shrink_idle(16);
    }

    /// Writes queued bytes until the queue is empty or the writer is not ready.
    /// `Ready(Ok(()))` means everything queued was handed to `io` (not flushed).
    pub(crate) fn poll_drain<W: AsyncWrite + ?Sized>(
        &mut self,
        cx: &mut Context<'_>,
        mut io: Pin<&mut W>,
    ) -> Poll<io::Result<()>> {
        while !self.is_empty() {
            let n = if !io.is_write_vectored() {
                self.poll_write_some::<1, W>(cx, io.as_mut(), false)
            } else if self.entries.len() == 1 {
                // The common case, one frame: no need to set up a full iovec array.
                self.poll_write_some::<2, W>(cx, io.as_mut(), true)
            } else {
                self.poll_write_some::<MAX_IOVECS, W>(cx, io.as_mut(), true)
            };
            let n = std::task::ready!(n)?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.advance(n);
        }
        Poll::Ready(Ok(()))
    }
}

impl SendQueue {
    /// One write of up to `N` slices of what is queued (`vectored`: through
    /// `poll_write_vectored`, else `poll_write` of the first slice).
    fn poll_write_some<const N: usize, W: AsyncWrite + ?Sized>(
        &self,
        cx: &mut Context<'_>,
        io: Pin<&mut W>,
        vectored: bool,
    ) -> Poll<io::Result<usize>> {
        let mut slices = [IoSlice::new(&[]); N];
        let count = self.io_slices(&mut slices);
        if vectored {
            io.poll_write_vectored(cx, &slices[..count])
        } else {
            io.poll_write(cx, &slices[0])
        }
    }
}

impl std::fmt::Debug for SendQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendQueue")
            .field("entries", &self.entries.len())
            .field("len", &self.len)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that accepts at most `limit` bytes per call and records everything.
    struct Trickle {
        out: Vec<u8>,
        limit: usize,
        calls: usize,
    }

    impl AsyncWrite for Trickle {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let n = buf.len().min(self.limit);
            self.out.extend_from_slice(&buf[..n]);
            self.calls += 1;
            Poll::Ready(Ok(n))
        }
        fn poll_write_vectored(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            let mut left = self.limit;
            let mut n = 0;
            for b in bufs {
                let take = b.len().min(left);
                self.out.extend_from_slice(&b[..take]);
                left -= take;
                n += take;
            }
            self.calls += 1;
            Poll::Ready(Ok(n))
        }
        fn is_write_vectored(&self) -> bool {
            true
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    use bytes::Bytes;

    /// Queues `header` then `payload` as one frame (as the connection's prepared frames
    /// are: the whole encoding as payload).
    fn push_frame(q: &mut SendQueue, header: &[u8], payload: Bytes) {
        let mut frame = header.to_vec();
        frame.extend_from_slice(&payload);
        q.push(Transmit::raw(Bytes::from(frame)));
    }

    fn drain(q: &mut SendQueue, limit: usize) -> (Vec<u8>, usize) {
        let mut w = Trickle {
            out: Vec::new(),
            limit,
            calls: 0,
        };
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert!(matches!(
            q.poll_drain(&mut cx, Pin::new(&mut w)),
            Poll::Ready(Ok(()))
        ));
        (w.out, w.calls)
    }

    fn sample_queue() -> (SendQueue, Vec<u8>) {
        let mut q = SendQueue::default();
        let mut expect = Vec::new();
        for (i, size) in [0usize, 3, 600, 70_000, 10, 2000].into_iter().enumerate() {
            let header = vec![i as u8; 2 + i % 3];
            let payload: Vec<u8> = (0..size).map(|b| (b * 7 + i) as u8).collect();
            expect.extend_from_slice(&header);
            expect.extend_from_slice(&payload);
            push_frame(&mut q, &header, Bytes::from(payload));
        }
        push_frame(&mut q, &[], Bytes::from_static(b"tail"));
        expect.extend_from_slice(b"tail");
        (q, expect)
    }

    #[test]
    fn drain_writes_every_byte_in_order_whatever_the_write_size() {
        for limit in [1, 2, 13, 100, 4096, usize::MAX] {
            let (mut q, expect) = sample_queue();
            assert_eq!(q.len(), expect.len());
            let (out, _) = drain(&mut q, limit);
            assert_eq!(out, expect, "limit {limit}");
            assert!(q.is_empty());
        }
    }

    #[test]
    fn small_frames_share_one_write_call() {
        let mut q = SendQueue::default();
        for _ in 0..100 {
            push_frame(&mut q, &[0x82, 4], Bytes::from_static(b"ping"));
        }
        let (out, calls) = drain(&mut q, usize::MAX);
        assert_eq!(out.len(), 600);
        assert_eq!(calls, 1);
    }

    #[test]
    fn high_water_mark_refuses_only_a_non_empty_queue() {
        let mut q = SendQueue::default();
        assert!(
            q.has_room(1 << 30, 1024),
            "an empty queue takes any one message"
        );
        push_frame(&mut q, &[0x82, 126, 3, 232], Bytes::from(vec![0; 1000]));
        assert!(q.has_room(20, 1024));
        assert!(!q.has_room(21, 1024));
    }
}
