//! Many messages at once: every whole message buffered, lent together ([`Batch`]), the
//! ones after the first decoded by the batch kernel (`rapidws_simd::frame::run`).

use core::ops::Range;

use bytes::BytesMut;
use rapidws_simd::frame::{self, Data, End, Run};

use crate::codec::MessageKind;
use crate::message::MessageRef;

use super::{Connection, Delivery, Error, Loc, Raw};

/// The messages a batch receive lends at once: the next message, and when it is a whole
/// message in the receive buffer, every whole message buffered after it, in order, all
/// borrowed from the receive buffer until the next call on the connection (or on the
/// socket it was received from). An iterator of [`MessageRef`]s.
///
/// The messages after the first are found, unmasked and validated a round of up to 64
/// at a time by the batch kernel of `rapidws-simd` as the iteration reaches them, and
/// lent with no allocation, copy or reference count per message. A control frame, a
/// fragmented or compressed message or a partial frame ends the batch: the next receive
/// hands it over the usual way. A batch dropped before its end leaves the messages it has
/// not handed out to the next receive, as they arrived; so does a batch leaked with
/// `std::mem::forget` (the connection, not the batch's drop, keeps what it decoded).
///
/// ```
/// use std::time::Instant;
/// use rapidws::connection::{Config, Connection};
/// use rapidws::{MessageRef, Role};
///
/// let now = Instant::now();
/// let mut client = Connection::new(Role::Client, Config::default(), now);
/// let mut server = Connection::new(Role::Server, Config::default(), now);
/// for i in 0..100 {
///     client.send_text(&format!("message {i}"))?;
/// }
/// let mut wire = Vec::new();
/// client.write_pending(&mut wire);
/// server.handle_bytes(now, &wire);
///
/// let mut seen = 0;
/// while let Some(batch) = server.poll_batch() {
///     for msg in batch? {
///         assert_eq!(msg, MessageRef::Text(&format!("message {seen}")));
///         seen += 1;
///     }
/// }
/// assert_eq!(seen, 100);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Batch<'a> {
    first: Option<MessageRef<'a>>,
    run: Option<Run<'a>>,
    /// Where the connection (or the split half) counts the bytes handed out: `base`
    /// plus what the run has handed out.
    pending: Option<&'a mut usize>,
    /// Where it counts the bytes the run decoded (unmasked in place), handed out or
    /// not, from the same `base`: kept as the iteration goes, not when the batch is
    /// dropped, so that a batch leaked with `mem::forget` (safe code) leaves the owner
    /// knowing which messages to put back as they arrived ([`frame::remask`]) rather
    /// than unmasking them a second time.
    decoded: Option<&'a mut usize>,
    base: usize,
}

impl<'a> Batch<'a> {
    /// A batch of one message.
    pub(crate) fn one(msg: MessageRef<'a>) -> Batch<'a> {
        Batch {
            first: Some(msg),
            run: None,
            pending: None,
            decoded: None,
            base: 0,
        }
    }

    /// `first`, then the whole messages at the front of `rest`; what the run hands out is
    /// counted in `*pending`, and what it decoded in `*decoded`, from `base` (`*pending`
    /// now) on. The owner puts the messages decoded and not handed out back
    /// ([`frame::remask`]) at its next call.
    pub(crate) fn with_run(
        first: MessageRef<'a>,
        rest: &'a mut [u8],
        rules: frame::Rules,
        pending: &'a mut usize,
        decoded: &'a mut usize,
    ) -> Batch<'a> {
        let base = *pending;
        *decoded = base;
        // Fewer than two bytes hold no frame: no run to start (one message a read, as
        // an echo's, costs no call of the kernel).
        let run = (rest.len() >= 2).then(|| {
            let mut run = frame::run(rest, rules);
            run.keep_decoded();
            run
        });
        Batch {
            first: Some(first),
            run,
            pending: Some(pending),
            decoded: Some(decoded),
            base,
        }
    }
}

impl<'a> Iterator for Batch<'a> {
    type Item = MessageRef<'a>;

    #[inline]
    fn next(&mut self) -> Option<MessageRef<'a>> {
        if let Some(first) = self.first.take() {
            return Some(first);
        }
        let run = self.run.as_mut()?;
        let data = run.next()?;
        if let Some(p) = self.pending.as_deref_mut() {
            *p = self.base + run.consumed();
        }
        if let Some(d) = self.decoded.as_deref_mut() {
            *d = self.base + run.decoded();
        }
        Some(match data {
            Data::Text(t) => MessageRef::Text(t),
            Data::Binary(b) => MessageRef::Binary(b),
        })
    }
}

impl core::fmt::Debug for Batch<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Batch")
            .field("first", &self.first)
            .field("run", &self.run)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// The next message and every whole message buffered after it, lent at once (see
    /// [`Batch`]): what [`poll_message_ref`](Self::poll_message_ref) would lend one call
    /// after another, until the first message that is not whole in the receive buffer.
    /// `None` when more bytes are needed or nothing more will come. An error is returned
    /// once, and closes the connection; an error in a message after the first ends the
    /// batch before it, and the next call reports it.
    pub fn poll_batch(&mut self) -> Option<Result<Batch<'_>, Error>> {
        Some(match self.next_whole()? {
            Ok(raw) => Ok(self.batch_of(raw)),
            Err(e) => Err(e),
        })
    }

    /// Whether the whole messages after one lent from the receive buffer may be decoded
    /// and lent with it: no frame held or message open, whole delivery, the connection
    /// still delivering.
    #[inline]
    pub(crate) fn runs(&self) -> bool {
        self.held == 0
            && self.config.delivery == Delivery::Whole
            && !self.close_queued
            && self.failure.is_none()
            && !self.input_done()
            && !self.decoder.in_message()
            && self.decoder.frame_remaining().is_none()
    }

    /// The event `raw` (from [`poll_raw`](Self::poll_raw)) as a batch: a whole message
    /// lent from the receive buffer with the run of whole messages after it, anything
    /// else alone.
    pub(crate) fn batch_of(&mut self, raw: Raw) -> Batch<'_> {
        if let Raw::Data {
            kind,
            loc: Loc::Rx(at),
            first: true,
            fin: true,
        } = &raw
            && self.runs()
        {
            let (kind, at) = (*kind, at.clone());
            self.note_frame();
            let rules = self.decoder.batch_rules();
            let start = self.rx_read + self.rx_pending;
            let (front, rest) = self.rx.split_at_mut(start);
            let first = MessageRef::from_data(kind, &front[at]);
            return Batch::with_run(
                first,
                rest,
                rules,
                &mut self.rx_pending,
                &mut self.rx_decoded,
            );
        }
        Batch::one(self.raw_ref(&raw))
    }

    /// Masks again, as they arrived, the whole messages at the front of `frames` that a
    /// batch of this connection decoded in place and did not hand out (a split half's
    /// batch, moved out of the connection: [`frame::remask`] with this connection's rules).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn remask(&self, frames: &mut [u8]) {
        frame::remask(frames, &self.decoder.batch_rules());
    }

    /// At the call after a batch: the messages its run decoded (unmasked in place) and
    /// did not hand out, `rx_pending..rx_decoded`, go back to how they arrived, so that
    /// the next receive decodes them once, as if the batch had never reached them; the
    /// batch's own drop is not needed for this (it may have been leaked).
    #[cold]
    pub(super) fn remask_decoded(&mut self) {
        let end = (self.rx_read + self.rx_decoded).min(self.rx.len());
        let start = (self.rx_read + self.rx_pending).min(end);
        self.rx_decoded = 0;
        let rules = self.decoder.batch_rules();
        frame::remask(&mut self.rx[start..end], &rules);
    }

    /// [`poll_short_next`](Self::poll_short_next) as an event, for a receive that lends
    /// what it finds.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    #[inline(always)]
    pub(crate) fn lend_next(&mut self) -> Option<Raw> {
        let (kind, at) = self.poll_short_next()?;
        Some(Raw::whole(kind, Loc::Rx(at)))
    }
}

/// A batch moved out of a connection ([`Connection::detach_run`]): the first message's
/// kind and place, and where the run after it lies, in the buffer it went to.
#[cfg_attr(not(feature = "tokio"), allow(dead_code))]
pub(crate) struct Detached {
    pub(crate) kind: MessageKind,
    pub(crate) first: Range<usize>,
    pub(crate) run: Range<usize>,
    pub(crate) rules: frame::Rules,
}

/// Bytes past a detached run that the connection keeps by copying them into its next
/// buffer: at most this many, or as many as the run and its first message take.
#[cfg_attr(not(feature = "tokio"), allow(dead_code))]
const DETACH_TAIL: usize = 4096;

#[cfg_attr(not(feature = "tokio"), allow(dead_code))]
impl Connection {
    /// For a receiver that must not hold the connection while it reads a batch (the
    /// split halves' reading half, behind their lock): when `raw` is a whole message lent
    /// from the receive buffer, moves it and the run of whole messages after it (found
    /// by their headers; decoded as they are read) out of the connection, with no copy
    /// of them: the receive buffer goes to `into`, and the connection goes on in the
    /// buffer `into` held, with the bytes that followed the run copied into it (a partial
    /// frame, a control frame: at most [`DETACH_TAIL`] bytes, or as many as the batch).
    /// `None` (and nothing moved) otherwise.
    pub(crate) fn detach_run(&mut self, raw: &Raw, into: &mut BytesMut) -> Option<Detached> {
        let Raw::Data {
            kind,
            loc: Loc::Rx(first),
            first: true,
            fin: true,
        } = raw
        else {
            return None;
        };
        if !self.runs() {
            return None;
        }
        let rules = self.decoder.batch_rules();
        let start = self.rx_read + self.rx_pending;
        let end = start + run_extent(&self.rx[start..], &rules);
        let tail = self.rx.len() - end;
        if tail > DETACH_TAIL.max(end - self.rx_read) {
            return None;
        }
        let mut next = core::mem::take(into);
        next.clear();
        next.extend_from_slice(&self.rx[end..]);
        *into = core::mem::replace(&mut self.rx, next);
        into.truncate(end);
        self.last_frame = (end - self.rx_read).min(u32::MAX as usize) as u32;
        self.rx_read = 0;
        self.rx_pending = 0;
        self.rx_mark = self.rx.len();
        self.note_frame();
        Some(Detached {
            kind: *kind,
            first: first.clone(),
            run: start..end,
            rules,
        })
    }

    /// Puts back, in front of what is buffered, whole messages that a detached batch did
    /// not hand out (as they arrived: masked again), so that the next receive delivers
    /// (or refuses) them in their place in the stream.
    pub(crate) fn unread(&mut self, frames: &[u8]) {
        if frames.is_empty() || self.input_done() {
            return;
        }
        self.release();
        let rest = &self.rx[self.rx_read..];
        let mut buf = BytesMut::with_capacity(frames.len() + rest.len());
        buf.extend_from_slice(frames);
        buf.extend_from_slice(rest);
        self.rx = buf;
        self.rx_read = 0;
        self.rx_mark = self.rx.len();
    }
}

/// The bytes the whole messages at the front of `buf` take, by their headers.
fn run_extent(buf: &[u8], rules: &frame::Rules) -> usize {
    let mut out = [frame::Frame::default(); 32];
    let mut at = 0;
    loop {
        let s = frame::scan_batch(&buf[at..], rules, &mut out);
        at += s.consumed;
        if s.end != End::Full {
            return at;
        }
    }
}
