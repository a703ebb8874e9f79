//! The connection's one output queue: encoded frames waiting for the transport.
//!
//! Control frames (pings, pongs) go out at the next frame boundary, ahead of queued data
//! frames (RFC 6455 5.4: "Control frames MAY be injected in the middle of a fragmented
//! message", and never inside a frame); data frames and the close keep their order. A
//! frame with a payload of up to 1.5 KiB is copied, header and payload back to back, into
//! one contiguous chunk shared with the frames around it, so a burst of messages is a few
//! slices for one vectored write (the kernel charges a gathered write per slice); a larger
//! payload stays where the caller put it (a shared [`Bytes`]), next to its header. The IO
//! layers write with [`io_slices`](OutQueue::io_slices) and report what the transport took
//! with [`advance`](OutQueue::advance).

use std::collections::VecDeque;
use std::io::IoSlice;

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::codec::{HeaderBuf, MAX_CONTROL_PAYLOAD, MAX_HEADER_LEN};
use crate::deque::Deque;

use super::Transmit;

/// Payloads up to this size are copied into the coalesce chunk. The kernel charges a
/// vectored write for every slice it gathers (`writev_cost` in `benches/load`: about
/// 100 ns a slice on a VM without fast `rep movsb`, against 300 ns for a whole 1 KiB frame
/// sent in one slice), and below this size the copy costs less than the slice it saves:
/// 64 pipelined echoes of 1 KiB cost 13-15 % less server CPU copied than gathered, of
/// 1.5 KiB 8 % less, of 2 KiB the same.
pub(super) const COALESCE_PAYLOAD_MAX: usize = 1536;

/// The first coalesce chunk holds at least this much: small, so that a lone message or
/// close frame costs little.
const CHUNK_MIN: usize = 1024;

/// Each chunk started behind a full one is twice its size, up to this: a burst is a few
/// slices, no chunk is ever reallocated (a frame that does not fit starts the next one),
/// and one chunk never pins much memory. The largest chunk written out is kept for the
/// next burst, so a steady pipeline fills one chunk per write.
const CHUNK_MAX: usize = 64 * 1024;

/// Frames' room kept in the data queue's spill when a write empties it: a pipelining peer
/// (HttpArena's 16 in flight, or 64) refills it at once, and freeing it after every write
/// cost four reallocations per batch of 64 as it grew back. 64 entries are about 3 KiB;
/// the memory timer frees them on a quiet connection.
const SPILL_KEEP: usize = 64;

/// One queued data frame (or the close).
#[derive(Debug)]
enum Entry {
    /// A header and a payload held apart (a prepared frame: no header, its whole encoding
    /// as payload).
    Frame {
        header: [u8; MAX_HEADER_LEN],
        header_len: u8,
        payload: Bytes,
    },
    /// Whole small frames copied back to back.
    Copied(BytesMut),
}

impl Entry {
    fn parts(&self) -> (&[u8], &[u8]) {
        match self {
            Entry::Frame {
                header,
                header_len,
                payload,
            } => (&header[..usize::from(*header_len)], payload),
            Entry::Copied(b) => (b, &[]),
        }
    }

    fn len(&self) -> usize {
        let (a, b) = self.parts();
        a.len() + b.len()
    }
}

/// One control frame: at most 2 header bytes, a mask key and 125 payload bytes.
#[derive(Clone, Debug)]
struct Control {
    bytes: [u8; 2 + 4 + MAX_CONTROL_PAYLOAD],
    header_len: u8,
    len: u8,
}

/// The output queue.
#[derive(Debug, Default)]
pub(crate) struct OutQueue {
    /// Control frames, oldest first.
    control: VecDeque<Control>,
    /// Data frames and the close, oldest first.
    data: Deque<Entry>,
    /// Bytes of the front frame already written: of `data`'s front when
    /// `data_in_progress`, else of `control`'s front.
    written: usize,
    /// The front data frame is partly written: it finishes before any control frame.
    data_in_progress: bool,
    /// Bytes queued and not yet written.
    len: usize,
    /// An empty chunk kept for the next small frames (the last one written out).
    spare: Option<BytesMut>,
}

impl OutQueue {
    /// Bytes queued and not yet written.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is waiting.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Control frames waiting (the backpressure on reading: see
    /// [`Config::control_queue_capacity`](super::Config::control_queue_capacity)).
    #[inline]
    pub(crate) fn control_frames(&self) -> usize {
        self.control.len()
    }

    /// Whether `extra` more bytes fit under `high_water`. An empty queue always has room,
    /// so a single message larger than the mark can still be sent.
    #[inline]
    pub(crate) fn has_room(&self, extra: usize, high_water: usize) -> bool {
        self.len == 0 || self.len.saturating_add(extra) <= high_water
    }

    /// Queues a control frame (header and payload, already masked for a client).
    pub(crate) fn push_control(&mut self, header: &[u8], payload: &[u8]) {
        let mut c = Control {
            bytes: [0; 2 + 4 + MAX_CONTROL_PAYLOAD],
            header_len: header.len() as u8,
            len: 0,
        };
        let n = header.len() + payload.len();
        c.bytes[..header.len()].copy_from_slice(header);
        c.bytes[header.len()..n].copy_from_slice(payload);
        c.len = n as u8;
        self.len += n;
        self.control.push_back(c);
    }

    /// Queues a data frame (or the close) with its payload held as is; a small payload is
    /// copied into the coalesce chunk instead. The payload is already masked for a client.
    pub(crate) fn push_frame(&mut self, header: HeaderBuf, payload: Bytes) {
        if payload.len() <= COALESCE_PAYLOAD_MAX {
            return self.push_copied(header.len(), || header, &payload, None);
        }
        let (header, header_len) = header.into_parts();
        self.len += usize::from(header_len) + payload.len();
        self.data.push_back(Entry::Frame {
            header,
            header_len,
            payload,
        });
    }

    /// Queues a whole encoded frame (a prepared message's), shared as is.
    pub(crate) fn push_encoded(&mut self, frame: Bytes) {
        self.len += frame.len();
        self.data.push_back(Entry::Frame {
            header: [0; MAX_HEADER_LEN],
            header_len: 0,
            payload: frame,
        });
    }

    /// Queues what a direct write left of a lone frame, `header` then `payload`, of which
    /// the first `written` bytes went out; the queue was empty. A frame already started is
    /// the front frame in progress: it finishes before any control frame.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn push_rest(&mut self, header: &[u8], mut payload: Bytes, written: usize) {
        debug_assert!(self.is_empty());
        let header = match header.get(written..) {
            Some(rest) => rest,
            None => {
                payload.advance(written - header.len());
                &[]
            }
        };
        let mut bytes = [0; MAX_HEADER_LEN];
        bytes[..header.len()].copy_from_slice(header);
        self.len += header.len() + payload.len();
        self.data.push_back(Entry::Frame {
            header: bytes,
            header_len: header.len() as u8,
            payload,
        });
        self.written = 0;
        self.data_in_progress = written > 0;
    }

    /// Copies a small frame into the tail chunk: the header of `header_len` bytes that
    /// `header` makes, then `payload`, masked with `mask` (a client's key) as it is
    /// copied. One pass over the bytes. The header is made where it is written (see
    /// `copy_frame`).
    #[inline]
    pub(crate) fn push_copied(
        &mut self,
        header_len: usize,
        header: impl FnOnce() -> HeaderBuf,
        payload: &[u8],
        mask: Option<[u8; 4]>,
    ) {
        let room = header_len + payload.len();
        // Into the tail chunk when it has room, else into a new one (the spare, when
        // there is one), filled before it is queued.
        let mut want = CHUNK_MIN;
        if let Some(Entry::Copied(tail)) = self.data.back_mut() {
            if tail.capacity() - tail.len() >= room {
                self.len += copy_frame(tail, header(), payload, mask);
                return;
            }
            want = (tail.capacity() * 2).min(CHUNK_MAX);
        }
        let mut chunk = match self.spare.take() {
            Some(spare) if spare.capacity() >= room => spare,
            _ => super::stock::take(super::stock::Shelf::Send, room.max(want))
                .unwrap_or_else(|| BytesMut::with_capacity(room.max(want))),
        };
        self.len += copy_frame(&mut chunk, header(), payload, mask);
        self.data.push_back(Entry::Copied(chunk));
    }

    /// Fills `out` with the unwritten bytes in the order they go out; returns how many
    /// slices were used (0 when nothing waits).
    #[inline]
    pub(crate) fn io_slices<'a>(&'a self, out: &mut [IoSlice<'a>]) -> usize {
        // Most of the time one frame waits, not yet started: its parts as they are.
        if self.written == 0
            && self.control.is_empty()
            && let Some(entry) = self.data.single()
        {
            let mut n = 0;
            let (a, b) = entry.parts();
            for part in [a, b] {
                if !part.is_empty() && n < out.len() {
                    out[n] = IoSlice::new(part);
                    n += 1;
                }
            }
            return n;
        }
        let mut n = 0;
        let mut skip = self.written;
        let mut put = |part: &'a [u8], n: &mut usize| -> bool {
            if skip >= part.len() {
                skip -= part.len();
                return true;
            }
            if *n == out.len() {
                return false;
            }
            out[*n] = IoSlice::new(&part[skip..]);
            skip = 0;
            *n += 1;
            true
        };
        let mut data = self.data.iter();
        if self.data_in_progress
            && let Some(front) = data.next()
        {
            let (a, b) = front.parts();
            if !put(a, &mut n) || !put(b, &mut n) {
                return n;
            }
        }
        for c in &self.control {
            if !put(&c.bytes[..usize::from(c.len)], &mut n) {
                return n;
            }
        }
        for entry in data {
            let (a, b) = entry.parts();
            if !put(a, &mut n) || !put(b, &mut n) {
                return n;
            }
        }
        n
    }

    /// Marks `n` bytes as written (in [`io_slices`](Self::io_slices) order), dropping the
    /// frames that are done.
    #[inline]
    pub(crate) fn advance(&mut self, mut n: usize) {
        debug_assert!(n <= self.len);
        if n >= self.len {
            // Everything went out (the usual case): no frame-by-frame accounting.
            self.len = 0;
            self.written = 0;
            self.data_in_progress = false;
            self.control.clear();
            match self.data.pop_single() {
                Some(entry) => self.recycle(entry),
                None => {
                    while let Some(entry) = self.data.pop_front() {
                        self.recycle(entry);
                    }
                }
            }
            self.data.shrink_idle(SPILL_KEEP);
            return;
        }
        self.len -= n;
        while n > 0 {
            if !self.data_in_progress
                && let Some(c) = self.control.front()
            {
                let left = usize::from(c.len) - self.written;
                if n < left {
                    self.written += n;
                    return;
                }
                n -= left;
                self.written = 0;
                self.control.pop_front();
                continue;
            }
            let Some(front) = self.data_front_len() else {
                break;
            };
            let left = front - self.written;
            if n < left {
                self.written += n;
                self.data_in_progress = true;
                return;
            }
            n -= left;
            self.written = 0;
            self.data_in_progress = false;
            if let Some(entry) = self.data.pop_front() {
                self.recycle(entry);
            }
        }
    }

    /// A written frame leaves the queue; the largest coalesce chunk is kept for the next
    /// small frames, so one message at a time allocates nothing, nor does a steady burst.
    #[inline]
    fn recycle(&mut self, entry: Entry) {
        if let Entry::Copied(mut chunk) = entry
            && chunk.capacity() <= CHUNK_MAX
            && self
                .spare
                .as_ref()
                .is_none_or(|s| s.capacity() < chunk.capacity())
        {
            // Only ever read through slices: never shared.
            chunk.clear();
            self.spare = Some(chunk);
        }
    }

    fn data_front_len(&self) -> Option<usize> {
        self.data.front().map(Entry::len)
    }

    /// The next frame to write, taken out of the queue whole (for callers that write frame
    /// by frame: [`Connection::poll_transmit`](super::Connection::poll_transmit)). A
    /// partly written front frame comes first, with what is left of it.
    pub(crate) fn pop(&mut self) -> Option<Transmit> {
        if self.data_in_progress || self.control.is_empty() {
            let entry = self.data.pop_front()?;
            let skip = std::mem::take(&mut self.written);
            self.data_in_progress = false;
            let mut t = match entry {
                Entry::Frame {
                    header,
                    header_len,
                    payload,
                } => Transmit::from_parts(header, header_len, payload),
                Entry::Copied(chunk) => Transmit::raw(chunk.freeze()),
            };
            t.advance(skip);
            self.len -= t.len();
            return Some(t);
        }
        let c = self.control.pop_front()?;
        let skip = std::mem::take(&mut self.written);
        let mut header = [0; MAX_HEADER_LEN];
        let h = usize::from(c.header_len);
        header[..h].copy_from_slice(&c.bytes[..h]);
        let payload = Bytes::copy_from_slice(&c.bytes[h..usize::from(c.len)]);
        let mut t = Transmit::from_parts(header, c.header_len, payload);
        t.advance(skip);
        self.len -= t.len();
        Some(t)
    }

    /// Whether an empty chunk, or room for a burst, is kept for the next frames.
    #[inline]
    pub(crate) fn holds_spare(&self) -> bool {
        self.spare.is_some() || self.data.spills()
    }

    /// The connection waits for its peer: the empty chunk goes to the thread's stock (the
    /// next small frame on the thread takes it back), and the control queue's storage,
    /// grown only by pings and pongs, is freed when nothing waits in it.
    #[inline]
    pub(crate) fn stock_spare(&mut self) {
        if let Some(chunk) = self.spare.take() {
            // Only ever read through slices: never shared.
            super::stock::give_unshared(super::stock::Shelf::Send, chunk, CHUNK_MIN);
        }
        if self.control.is_empty() && self.control.capacity() > 0 {
            self.control = VecDeque::new();
        }
    }

    /// Frees what an idle queue keeps: the spare chunk and the queues' storage.
    pub(crate) fn release_idle(&mut self) {
        self.spare = None;
        if self.control.is_empty() {
            self.control = VecDeque::new();
        }
        self.data.shrink_idle(0);
    }
}

/// Appends a whole small frame to `chunk`, which has room for it: `header`, then
/// `payload`, masked with `mask` (a client's key) as it is copied; returns the frame's
/// length.
///
/// The header goes in as at most three writes of 8, 4 and 2 bytes from a register
/// ([`HeaderBuf::pieces`]), not as a copy of its length in bytes: that was a call of
/// `memcpy` per frame, which needs the header in memory. And it is made here, not before
/// the chunk is chosen: kept across that choice, it went to the stack in two 8-byte
/// stores and came back in one 16-byte load, which the processor cannot forward from them
/// (a store-forwarding stall per frame, the most of queueing a reply in the pipelined
/// echo's `perf annotate`).
#[inline(always)]
fn copy_frame(
    chunk: &mut BytesMut,
    header: HeaderBuf,
    payload: &[u8],
    mask: Option<[u8; 4]>,
) -> usize {
    let len = header.len();
    debug_assert!(len.is_multiple_of(2) && chunk.capacity() - chunk.len() >= len + payload.len());
    header.pieces(|piece, width| chunk.put_slice(&piece.to_le_bytes()[..width]));
    let start = chunk.len();
    chunk.extend_from_slice(payload);
    if let Some(mut key) = mask {
        rapidws_simd::mask::apply(&mut chunk[start..], &mut key);
    }
    len + payload.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{OpCode, encode_header};

    fn header(len: usize) -> HeaderBuf {
        encode_header(true, false, OpCode::Binary, None, len as u64)
    }

    /// Writes everything, at most `limit` bytes and `slices` slices per write.
    fn drain(q: &mut OutQueue, limit: usize, slices: usize) -> (Vec<u8>, usize) {
        let mut out = Vec::new();
        let mut writes = 0;
        while !q.is_empty() {
            let mut io = vec![IoSlice::new(&[]); slices];
            let n = q.io_slices(&mut io);
            assert!(n > 0);
            let mut left = limit;
            let mut took = 0;
            for s in &io[..n] {
                let k = s.len().min(left);
                out.extend_from_slice(&s[..k]);
                left -= k;
                took += k;
            }
            writes += 1;
            q.advance(took);
        }
        (out, writes)
    }

    fn frame(len: usize, byte: u8) -> (HeaderBuf, Bytes, Vec<u8>) {
        let h = header(len);
        let p = Bytes::from(vec![byte; len]);
        let mut wire = h.as_slice().to_vec();
        wire.extend_from_slice(&p);
        (h, p, wire)
    }

    #[test]
    fn every_byte_goes_out_in_order_whatever_the_write_size() {
        for limit in [1, 2, 7, 13, 100, 600, 4096, usize::MAX] {
            for slices in [1, 2, 3, 64] {
                let mut q = OutQueue::default();
                let mut expect = Vec::new();
                for (i, len) in [0usize, 3, 600, 70_000, 10, 2000, 512, 513]
                    .iter()
                    .enumerate()
                {
                    let (h, p, wire) = frame(*len, i as u8);
                    q.push_frame(h, p);
                    expect.extend_from_slice(&wire);
                }
                q.push_encoded(Bytes::from_static(b"tail"));
                expect.extend_from_slice(b"tail");
                assert_eq!(q.len(), expect.len());
                let (out, _) = drain(&mut q, limit, slices);
                assert_eq!(out, expect, "limit {limit}, slices {slices}");
                assert!(q.is_empty() && q.io_slices(&mut [IoSlice::new(&[])]) == 0);
            }
        }
    }

    #[test]
    fn control_frames_pass_data_at_the_next_frame_boundary_only() {
        let mut q = OutQueue::default();
        let (h, p, big) = frame(2000, 7);
        q.push_frame(h, p);
        let (h, p, small) = frame(5, 8);
        q.push_frame(h, p);
        // Half of the big frame goes out, then a pong is queued: it must wait for the end
        // of the big frame, and pass the small one.
        let mut io = [IoSlice::new(&[]); 4];
        let n = q.io_slices(&mut io);
        assert!(n >= 2);
        q.advance(500);
        q.push_control(&[0x8a, 0x01], b"x");
        let (out, _) = drain(&mut q, usize::MAX, 64);
        let mut expect = big[500..].to_vec();
        expect.extend_from_slice(&[0x8a, 0x01, b'x']);
        expect.extend_from_slice(&small);
        assert_eq!(out, expect);
    }

    #[test]
    fn a_control_frame_queued_between_frames_goes_first() {
        let mut q = OutQueue::default();
        let (h, p, data) = frame(100, 1);
        q.push_frame(h, p);
        q.push_control(&[0x89, 0x00], &[]);
        let (out, _) = drain(&mut q, usize::MAX, 64);
        let mut expect = vec![0x89, 0x00];
        expect.extend_from_slice(&data);
        assert_eq!(out, expect);
    }

    #[test]
    fn small_frames_share_one_slice_and_one_write() {
        let mut q = OutQueue::default();
        for _ in 0..100 {
            let (h, p, _) = frame(4, 9);
            q.push_frame(h, p);
        }
        let mut io = [IoSlice::new(&[]); 64];
        assert_eq!(q.io_slices(&mut io), 1, "one chunk");
        let (out, writes) = drain(&mut q, usize::MAX, 64);
        assert_eq!((out.len(), writes), (600, 1));
    }

    #[test]
    fn a_payload_up_to_the_coalesce_size_is_copied_next_to_its_header() {
        for (len, slices) in [(COALESCE_PAYLOAD_MAX, 1), (COALESCE_PAYLOAD_MAX + 1, 2)] {
            let mut q = OutQueue::default();
            let (h, p, wire) = frame(len, 3);
            q.push_frame(h, p);
            let mut io = [IoSlice::new(&[]); 4];
            assert_eq!(q.io_slices(&mut io), slices, "{len} B");
            assert_eq!(drain(&mut q, usize::MAX, 4).0, wire);
        }
    }

    #[test]
    fn a_burst_of_kilobyte_frames_is_a_few_slices_and_the_next_burst_one() {
        // Where each slice starts.
        fn starts(q: &OutQueue) -> Vec<usize> {
            let mut io = [IoSlice::new(&[]); 64];
            let n = q.io_slices(&mut io);
            io[..n].iter().map(|s| s.as_ptr() as usize).collect()
        }
        let mut q = OutQueue::default();
        let mut expect = Vec::new();
        for i in 0..60 {
            let (h, p, wire) = frame(1024, i);
            q.push_frame(h, p);
            expect.extend_from_slice(&wire);
        }
        // Chunks of 1, 2, 4, 8, 16 and 32 KiB (room for 63 frames), each started behind
        // a full one.
        let before = starts(&q);
        assert_eq!(before.len(), 6);
        for i in 0..5 {
            let (h, p, wire) = frame(1024, 100 + i);
            q.push_frame(h, p);
            expect.extend_from_slice(&wire);
        }
        // A chunk grown in place would have moved the frames already in it.
        let after = starts(&q);
        assert_eq!(
            (after.len(), &after[..6]),
            (7, &before[..]),
            "no chunk moves"
        );
        assert_eq!(drain(&mut q, usize::MAX, 64), (expect, 1));
        // The largest chunk (64 KiB) was kept: the next burst is one slice.
        for i in 0..60 {
            let (h, p, _) = frame(1024, i);
            q.push_frame(h, p);
        }
        assert_eq!(starts(&q), vec![after[6]]);
    }

    #[test]
    fn one_small_message_at_a_time_reuses_its_chunk() {
        let mut q = OutQueue::default();
        let (h, p, _) = frame(16, 1);
        q.push_frame(h, p);
        drain(&mut q, usize::MAX, 2);
        let spare = q.spare.as_ref().map(|s| s.as_ptr());
        assert!(spare.is_some());
        let (h, p, _) = frame(16, 2);
        q.push_frame(h, p);
        let mut io = [IoSlice::new(&[]); 2];
        assert_eq!(q.io_slices(&mut io), 1);
        assert_eq!(Some(io[0].as_ptr()), spare, "the same allocation");
    }

    #[test]
    fn frames_taken_one_by_one_match_the_vectored_order() {
        let mut q = OutQueue::default();
        let mut expect = Vec::new();
        for (i, len) in [1700usize, 3, 2500].iter().enumerate() {
            let (h, p, wire) = frame(*len, i as u8);
            q.push_frame(h, p);
            expect.extend_from_slice(&wire);
        }
        q.advance(100);
        q.push_control(&[0x89, 0x00], &[]);
        let mut out = Vec::new();
        while let Some(t) = q.pop() {
            out.extend_from_slice(t.header());
            out.extend_from_slice(t.payload());
        }
        let mut want = expect[100..1700 + 4].to_vec();
        want.extend_from_slice(&[0x89, 0x00]);
        want.extend_from_slice(&expect[1704..]);
        assert_eq!(out, want);
        assert!(q.is_empty());
    }

    #[test]
    fn the_high_water_mark_refuses_only_a_non_empty_queue() {
        let mut q = OutQueue::default();
        assert!(
            q.has_room(1 << 30, 1024),
            "an empty queue takes any one message"
        );
        let (h, p, _) = frame(1000, 0);
        q.push_frame(h, p);
        assert!(q.has_room(20, 1024));
        assert!(!q.has_room(21, 1024));
    }
}
