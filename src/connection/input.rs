//! The receive buffer: bytes in, read sizing, what a message being received holds
//! (charged to the budget) and giving memory back when idle.

use std::time::Instant;

use bytes::{Buf, BytesMut};

use super::stock::{self, Shelf};
use super::{Connection, Error, MAX_READ_CHUNK, RETAIN_CAPACITY};

impl Connection {
    /// Appends received bytes. `now` is the time they arrived.
    pub fn handle_bytes(&mut self, now: Instant, data: &[u8]) {
        self.release();
        self.drop_read();
        if data.is_empty() {
            return;
        }
        if self.input_done() {
            self.now = now;
            return self.discard_received(data.len());
        }
        if self.rx.capacity() == 0 {
            // A buffer for this read and the next ones (it is kept while the connection is
            // busy), not just for these bytes; but on the first read since the buffer was
            // given back, exactly these bytes: a connection that gets a message now and
            // then (most of many idle ones) holds no more than that, and its next read
            // makes the buffer of a busy one.
            let size = if self.rx_cold {
                data.len()
            } else {
                data.len().max(self.read_room(self.read_size as usize))
            };
            self.rx_cold = false;
            self.rx.reserve(size);
        }
        self.rx.extend_from_slice(data);
        self.note_bytes(now, data.len());
    }

    /// The receive buffer, for reading into it without a copy: reserve, append (never
    /// change what is already there), then call [`handle_received`](Self::handle_received).
    pub fn recv_buffer(&mut self) -> &mut BytesMut {
        self.release();
        self.drop_read();
        self.rx_mark = self.rx.len();
        &mut self.rx
    }

    /// [`recv_buffer`](Self::recv_buffer) with room for the next read: at least
    /// `read_size` spare bytes when less than half of that is spare, and while a
    /// single-frame message is arriving, room for the rest of its frame (and `read_size`
    /// more), so that it is read straight into place with no reallocation on the way. That room is bounded by
    /// [`Config::max_read_ahead`](super::Config::max_read_ahead), or by what the frame has delivered so far when that is
    /// more: a peer that announces a large frame and sends little gets little reserved.
    #[inline]
    pub fn reserve_recv(&mut self, read_size: usize) -> &mut BytesMut {
        self.release();
        let spare = self.rx.capacity() - self.rx.len();
        // Most reads find room and no frame held.
        if self.held != 0 || spare < read_size / 2 {
            self.make_room(read_size, spare);
        }
        self.rx_mark = self.rx.len();
        &mut self.rx
    }

    /// [`reserve_recv`](Self::reserve_recv)'s reservation, for a held frame or a buffer
    /// short of room.
    fn make_room(&mut self, read_size: usize, spare: usize) {
        // Bytes already read go first; a read appends after them, so only making room
        // needs them gone.
        self.drop_read();
        // Only a held frame reserves for its rest; between frames (the usual read) the
        // decoder is not asked.
        let rest = match self.held {
            0 => 0,
            held => match self.decoder.frame_remaining() {
                Some(rest) => {
                    let arrived = held - self.held_start;
                    let bound = self.config.max_read_ahead.max(arrived);
                    usize::try_from(rest).map_or(bound, |r| r.min(bound))
                }
                None => 0,
            },
        };
        if rest > 0 {
            // The frame's rest and one read more, in one step: the read that completes
            // the frame then leaves room unused, which tells the IO layer the socket is
            // drained (an exactly filled buffer costs one more read that would block).
            // Never more when there is room for the rest: growing a buffer that holds most
            // of a large message for a read past its end would copy the message.
            if rest > spare {
                self.grow_rx(rest.saturating_add(read_size));
            }
        } else if spare < read_size / 2 {
            // A stocked buffer that offers a whole read will do: one given back at the
            // room's exact size would miss by a few bytes whenever the read size grew.
            let room = self.read_room(read_size);
            if self.rx.capacity() == 0
                && let Some(buf) = stock::take(Shelf::Recv, read_size)
            {
                self.rx = buf;
            } else {
                self.grow_rx(room);
            }
        }
    }

    /// Room for `additional` more bytes in the receive buffer: in place when it can take
    /// them (room at its end, or its unread bytes moved to its front), else a new buffer
    /// holding the unread bytes when they are few (at most an eighth of `additional`: the
    /// start of a frame after a burst). `reserve` would reallocate a buffer no
    /// other handle shares, which copies the bytes already read before them too: a whole
    /// pipelined burst before the start of the next frame, when the allocator cannot
    /// grow the buffer in place. A large unread part (most of a message) is left to
    /// `reserve`, which the allocator may grow without copying it.
    fn grow_rx(&mut self, additional: usize) {
        if self.rx.try_reclaim(additional) {
            return;
        }
        if self.rx.len() <= additional / 8 {
            let mut fresh = BytesMut::with_capacity(self.rx.len() + additional);
            fresh.extend_from_slice(&self.rx);
            self.rx = fresh;
        } else {
            self.rx.reserve(additional);
        }
    }

    /// [`reserve_recv`](Self::reserve_recv) with the connection's own read size, which
    /// the IO layers read through: [`Config::read_buffer_size`](super::Config) at first,
    /// doubling (up to 256 KiB) while reads fill what they were offered (a large message
    /// streaming in); when a read leaves room, twice what it or the last frame brought (at
    /// most 64 KiB, at least the configured size).
    #[inline]
    pub fn reserve_read(&mut self) -> &mut BytesMut {
        let size = self.read_size as usize;
        self.reserve_recv(size);
        let spare = self.rx.capacity() - self.rx.len();
        self.read_offer = spare.min(size) as u32;
        &mut self.rx
    }

    /// The most one read asks for: 256 KiB; in chunk delivery
    /// [`CHUNK_READ_SIZE`] or the configured read size when larger. A chunk is what one
    /// read brought, and a chunk passed on waits whole in the send queue (sharing its
    /// receive buffer) while the peer's socket is full: reads grown to 256 KiB for a large
    /// message made each connection streaming one hold that much (a streaming echo of
    /// 10,000 connections x 256 KiB peaked at 1.5 GB).
    #[inline]
    fn max_read_size(&self) -> u32 {
        match self.config.delivery {
            super::Delivery::Whole => MAX_READ_CHUNK,
            _ => (self.config.read_buffer_size as u32).clamp(CHUNK_READ_SIZE, MAX_READ_CHUNK),
        }
    }

    /// The room a receive buffer is given for reads of `read_size`: two of them (see
    /// [`room_for_reads`]); one in chunk delivery, where each read leaves as a chunk
    /// that shares the buffer until it is dropped, so a second read's room would only
    /// be held longer.
    #[inline]
    fn read_room(&self, read_size: usize) -> usize {
        match self.config.delivery {
            super::Delivery::Whole => room_for_reads(read_size),
            _ => read_size,
        }
    }

    /// How many bytes the read after [`reserve_read`](Self::reserve_read) should ask for
    /// at most (a transport that reads into initialized memory zeroes no more than this).
    pub fn read_offer(&self) -> usize {
        self.read_offer as usize
    }

    /// The most the next read (through [`reserve_read`](Self::reserve_read)) must take,
    /// whatever room the buffer has: in chunk delivery the read size
    /// ([`read_offer`](Self::read_offer) or more room), since each read is handed over as
    /// a chunk, and one that filled a buffer's whole room (a stocked buffer may be larger
    /// than asked for) would hold more than the read sizing allows; otherwise no limit,
    /// the buffer's whole room (a larger read only saves a later one).
    #[inline]
    pub fn read_limit(&self) -> usize {
        match self.config.delivery {
            super::Delivery::Whole => usize::MAX,
            _ => self.read_size as usize,
        }
    }

    /// Notes that bytes were appended to [`recv_buffer`](Self::recv_buffer) at `now`.
    #[inline]
    pub fn handle_received(&mut self, now: Instant) {
        let n = self.rx.len().saturating_sub(self.rx_mark);
        self.rx_mark = self.rx.len();
        if self.read_offer > 0 {
            let least = self.config.read_buffer_size.max(256) as u32;
            self.read_size = if n >= self.read_offer as usize {
                (self.read_size * 2).min(self.max_read_size())
            } else {
                // Twice what this read or the last frame brought: a buffer is given room
                // when less than half a read size is spare, so a message of that size
                // then always fits whole, and arrives in one read. Falling back to the
                // configured size instead let a 16 KiB message stream read every other
                // message in part at the end of the room, to be moved to the front of the
                // buffer before its rest fitted. At most what is kept between messages,
                // never below the configured size.
                (n as u32)
                    .max(self.last_frame)
                    .saturating_mul(2)
                    .min(RETAIN_CAPACITY as u32)
                    .min(self.max_read_size())
                    .max(least)
            };
            self.read_offer = 0;
        }
        if self.input_done() {
            // During the teardown what arrives is read and dropped, one read at a time.
            self.now = now;
            self.rx.clear();
            self.rx_read = 0;
            self.held = 0;
            self.rx_mark = 0;
            return self.discard_received(n);
        }
        self.note_bytes(now, n);
    }

    /// Whether the receive buffer holds no allocation (an idle connection's, or one whose
    /// exactly-sized first buffer went with its message): an IO layer then reads into
    /// memory of its own and hands the bytes over with
    /// [`handle_bytes`](Self::handle_bytes), so that waiting allocates nothing.
    /// A buffer given to the thread's stock ([`read_would_block`](Self::read_would_block))
    /// does not count: the next read takes one from the stock.
    #[inline]
    pub fn recv_buffer_is_unallocated(&self) -> bool {
        self.rx.capacity() == 0 && !self.rx_stocked
    }

    /// Received bytes not yet delivered.
    #[inline]
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn buffered_input(&self) -> usize {
        self.rx.len() - self.rx_read
    }

    /// Bytes this connection has charged to its memory budget
    /// ([`Config::budget`](super::Config::budget)) now: what the message being received
    /// holds. 0 between messages, and after the connection failed or closed.
    pub fn budget_charge(&self) -> usize {
        self.charge.bytes()
    }

    /// Bytes of the message being received that the connection holds, as charged to the
    /// budget: a single-frame message arriving in place, the fragments assembled so far,
    /// the inflated output, until the message (or, with chunk delivery, the inflated
    /// chunk) is handed over.
    #[inline]
    pub(super) fn partial_bytes(&self) -> usize {
        let msg = if self.msg_delivered {
            0
        } else {
            self.msg.len()
        };
        #[cfg(feature = "deflate")]
        let scratch = self.deflate.as_deref().map_or(0, |d| d.scratch.len());
        #[cfg(not(feature = "deflate"))]
        let scratch = 0;
        self.held + msg + scratch
    }

    /// Brings the budget charge to what the message being received holds plus `more`
    /// bytes about to be added; `OverBudget` (nothing more charged) when the budget
    /// cannot take the growth now, without waiting (see `charge_or_wait`). Giving back
    /// never fails.
    #[inline]
    pub(super) fn charge_partial(&mut self, more: usize) -> Result<(), Error> {
        match self.charge.settle(self.partial_bytes() + more) {
            Ok(()) => Ok(()),
            Err(short) => Err(self.over_budget(short)),
        }
    }

    /// Nothing received from now on is delivered: the peer closed, or we failed.
    #[inline]
    pub(super) fn input_done(&self) -> bool {
        self.close_in || self.is_closed()
    }

    /// Drops everything received and not yet delivered (the connection failed or ended).
    ///
    /// What the last event lent stays where it is until the next call releases it: the
    /// IO layer may meet the end of the transport (a write that fails, a timer) between
    /// the poll that lent an event and its hand-over, and the event must still be whole
    /// when it is taken (a ping's payload, the message in the receive buffer or in the
    /// message buffer, an inflated chunk).
    pub(super) fn clear_input(&mut self) {
        let lent = self.rx_read + self.rx_pending;
        if lent == 0 {
            self.rx = BytesMut::new();
        } else {
            self.rx.truncate(lent);
        }
        self.rx_mark = self.rx.len();
        self.held = 0;
        if !self.msg_delivered {
            self.msg = Vec::new();
        }
        #[cfg(feature = "deflate")]
        if let Some(d) = self.deflate.as_deref_mut()
            && self.config.delivery == super::Delivery::Whole
        {
            // In chunk delivery the scratch buffer holds the chunk lent last, if any (an
            // unfinished one is cleared where inflating it failed).
            d.scratch = Vec::new();
        }
        self.timers.message_since = None;
        self.stall = None;
        self.timers.budget_since = None;
        self.charge.reset();
    }

    /// Drops what the previous event borrowed.
    #[inline]
    pub(super) fn release(&mut self) {
        // Called on every entry. The usual work, a frame lent from the receive buffer, is
        // a few additions here; the rest is rare.
        if self.rx_pending > 0 {
            if self.rx_decoded != 0 {
                self.remask_decoded();
            }
            self.last_frame = self.rx_pending.min(u32::MAX as usize) as u32;
            self.consume_rx(self.rx_pending);
            self.rx_pending = 0;
        }
        if self.msg_delivered || (self.rx.is_empty() && self.rx.capacity() > RETAIN_CAPACITY) {
            self.release_slow();
        }
    }

    fn release_slow(&mut self) {
        if self.msg_delivered {
            self.msg_delivered = false;
            if self.msg.capacity() > RETAIN_CAPACITY {
                self.msg = Vec::new();
            } else {
                self.msg.clear();
            }
        }
        // An idle connection keeps little memory: a buffer grown for one large message is
        // given back once it is empty.
        if self.rx.is_empty() && self.rx.capacity() > RETAIN_CAPACITY {
            self.rx = BytesMut::new();
        }
    }

    /// Marks `n` more unread bytes as read (delivered or dropped). When that reads the
    /// whole buffer it is emptied in place: its room is reused from the start, with no
    /// `advance` at all.
    #[inline]
    pub(super) fn consume_rx(&mut self, n: usize) {
        self.rx_read += n;
        if self.rx_read >= self.rx.len() {
            self.rx.clear();
            self.rx_read = 0;
        }
    }

    /// Drops the bytes already read from the front of the receive buffer, before it is
    /// grown or handed out (positions kept across reads count from the unread start, so
    /// none moves).
    #[inline]
    fn drop_read(&mut self) {
        if self.rx_read > 0 {
            self.rx.advance(self.rx_read);
            self.rx_read = 0;
        }
    }

    /// After a frame of `len` bytes was handed over from the front of the receive buffer
    /// (a lent one is released through [`consume_rx`](Self::consume_rx) instead): when it
    /// was a large message and nothing is left, start the next message in a new buffer.
    /// The empty rest would be a small view into the large allocation and keep all of it
    /// alive with only its own few bytes of capacity showing; the message's own handle now
    /// frees it.
    pub(super) fn detach_after_large(&mut self, len: usize) {
        if len > RETAIN_CAPACITY && self.rx.is_empty() {
            self.rx = BytesMut::new();
        }
    }

    /// Notes that a read found nothing to read: the IO layer now waits for the peer. A
    /// connection whose last bytes came after a quiet spell (it sends now and then; see
    /// `timers.rs`) gives the buffers it keeps between messages to this thread's stock
    /// (see `stock.rs`): the receive buffer when it holds nothing, and the output queue's
    /// empty chunk. The next read or small frame on the thread, of this
    /// connection or another, takes one from there. A connection waiting for its peer then
    /// holds none of them, and one that sends now and then neither allocates nor frees per
    /// message, nor arms a timer to give them back. So does a busy one whose reads are
    /// large (16 KiB or more): the buffers in use then stay few and in cache however many
    /// connections wait (the stock keeps at most 16 buffers of at most 64 KiB a kind).
    #[inline]
    pub fn read_would_block(&mut self) {
        if !self.timers.after_quiet
            && (self.read_size as usize) < STOCK_READ_SIZE
            && self.config.delivery == super::Delivery::Whole
        {
            // Busy with small messages: the buffers are kept for the next one, which
            // comes soon. Not in chunk delivery: a chunk leaves the buffer as soon as it
            // is read, so the buffer is empty whenever the connection waits, and a
            // connection streaming a large message waits between its reads (10,000
            // streaming echoes each kept one while their reads were still small).
            return;
        }
        if self.rx.is_empty() && self.rx.capacity() > 0 {
            self.rx_stocked = true;
            let rx = std::mem::take(&mut self.rx);
            // One too small for a read of this connection's (the exactly-sized first
            // buffer of a new one) is freed: no read would take it from the stock, where
            // it would only hold a place.
            let least = self.read_size as usize;
            if std::mem::take(&mut self.rx_shared) {
                stock::give(Shelf::Recv, rx, least);
            } else {
                stock::give_unshared(Shelf::Recv, rx, least);
            }
        }
        self.out.stock_spare();
        // The send arena's last allocation, shared with the large frame split off it last
        // (already written, or still queued): the arena's handle alone would keep it alive
        // until the memory timer. A connection streaming large chunks through it
        // (`send_chunk` of a streaming echo) held one per connection between messages.
        if self.wbuf.is_empty() {
            self.wbuf = BytesMut::new();
        }
    }

    /// Whether buffers kept for the next message are held that only the memory timer
    /// gives back: all of them under an IO layer that does not report reads that would
    /// block (the blocking one); else only the rarer ones (a fragmented or inflated
    /// message's, the data queue's spill).
    #[inline]
    pub(super) fn holds_idle_memory(&self) -> bool {
        (self.rx.capacity() > 0 && self.rx.is_empty())
            || (self.msg.capacity() > 0 && self.msg.is_empty())
            || self.wbuf.capacity() > 0
            || self.out.holds_spare()
            || self.inflate_scratch_held()
    }

    /// Whether the inflater's output buffer holds memory between messages.
    #[inline]
    fn inflate_scratch_held(&self) -> bool {
        #[cfg(feature = "deflate")]
        return self
            .deflate
            .as_deref()
            .is_some_and(|d| d.scratch.capacity() > 0 && d.scratch.is_empty());
        #[cfg(not(feature = "deflate"))]
        false
    }

    /// Gives back the memory kept for reuse between messages: the receive buffer and the
    /// message assembly buffer when they are empty, the output queues' storage when all
    /// output has been taken, the send arena. Nothing observable changes; the next
    /// message allocates again.
    ///
    /// The connection's memory timer calls it once nothing has arrived for a moment (see
    /// [`poll_timeout`](Self::poll_timeout)), so that many idle connections hold only
    /// their fixed state; call it yourself to give the memory back earlier.
    pub fn release_idle_memory(&mut self) {
        self.release();
        if self.rx.is_empty() && self.rx.capacity() > 0 {
            self.rx = BytesMut::new();
        }
        if self.rx.capacity() == 0 {
            self.rx_cold = true;
            self.rx_stocked = false;
        }
        if self.msg.is_empty() && self.msg.capacity() > 0 {
            self.msg = Vec::new();
        }
        #[cfg(feature = "deflate")]
        if let Some(d) = self.deflate.as_deref_mut() {
            d.scratch = Vec::new();
        }
        // Only gives back (the last inflated chunk), never grows.
        let _ = self.charge_partial(0);
        self.out.release_idle();
        if self.wbuf.capacity() > 0 {
            // Payloads split off earlier keep their own handles; this only drops ours.
            self.wbuf = BytesMut::new();
        }
    }
}

/// The room a receive buffer is given for reads of `read_size`: two of them (within half of
/// what is kept between messages), so that small messages make room every few reads rather
/// than every other one.
#[inline]
fn room_for_reads(read_size: usize) -> usize {
    (2 * read_size).min(read_size.max(RETAIN_CAPACITY / 2))
}

/// The most a read asks for in chunk delivery, unless [`Config::read_buffer_size`] is
/// larger (see [`Connection::max_read_size`]).
///
/// [`Config::read_buffer_size`]: super::Config::read_buffer_size
const CHUNK_READ_SIZE: u32 = 16 * 1024;

/// Reads of at least this size give their empty buffer to the thread's stock whenever the
/// connection waits ([`Connection::read_would_block`]), busy or not.
const STOCK_READ_SIZE: usize = 16 * 1024;
