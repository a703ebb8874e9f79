//! Replying while a received message is lent: the send side of a connection borrowed
//! apart from its receive buffer ([`Connection::batch_with_replies`]), so that the
//! handler API's borrowed callback can answer the messages of a [`Batch`] straight into
//! the output queue while they borrow the buffer they arrived in.

use crate::codec::{MAX_CONTROL_PAYLOAD, MessageKind, OpCode};
use crate::message::{Compression, MessageRef};

use super::send::Tx;
use super::{Batch, Connection, Loc, Raw, SendError};

/// The send side of a connection while a batch is lent: whole messages and the
/// application's pings and pongs, framed into the output queue as
/// [`Connection::send_with`], [`Connection::ping`] and [`Connection::pong`] frame them.
/// A close is not sent from here (the handler API sends it once the batch is done).
pub(crate) struct Replies<'a> {
    tx: TxParts<'a>,
    #[cfg(feature = "deflate")]
    deflate: Option<&'a mut crate::deflate::PerMessageDeflate>,
    /// Our close was sent, or the connection failed: every send is refused.
    closed: bool,
    /// A fragmented message is being sent: whole messages are refused.
    in_progress: bool,
    /// The message lent, and where it lies in the receive buffer, when it is the only one
    /// (nothing more buffered, nothing queued, a server without permessage-deflate): a
    /// reply that is this very message is held ([`held`](Self::held)) to be written
    /// straight from the receive buffer, as `send` writes an owned message, instead of
    /// being copied into the queue. Only while the sends are not refused, and until the
    /// first send (which may make it `held`).
    lone: Option<(&'a [u8], core::ops::Range<usize>)>,
    held: Option<(MessageKind, &'a [u8], core::ops::Range<usize>)>,
    /// [`Config::send_queue_high_water`](super::Config::send_queue_high_water).
    high_water: usize,
}

/// [`Tx`]'s borrows, kept to make a `Tx` per frame.
struct TxParts<'a> {
    role: crate::codec::Role,
    encoder: &'a mut crate::codec::Encoder,
    out: &'a mut super::queue::OutQueue,
    wbuf: &'a mut bytes::BytesMut,
}

impl TxParts<'_> {
    fn tx(&mut self) -> Tx<'_> {
        Tx {
            role: self.role,
            encoder: self.encoder,
            out: self.out,
            wbuf: self.wbuf,
        }
    }
}

impl Replies<'_> {
    /// Queues a whole message, refused and compressed as
    /// [`Connection::send_with`] would.
    #[inline]
    pub(crate) fn send(
        &mut self,
        kind: MessageKind,
        payload: &[u8],
        compression: Compression,
    ) -> Result<(), SendError> {
        // `lone` is there only for the first send of a connection that takes it (open,
        // no message in progress).
        if let Some((lent, _)) = &self.lone
            && compression != Compression::Always
            && core::ptr::eq(payload, *lent)
            && let Some((lent, at)) = self.lone.take()
        {
            // The first reply, and it is the message lent: held.
            self.held = Some((kind, lent, at));
            return Ok(());
        }
        self.queue(kind, payload, compression)
    }

    /// [`send`](Self::send) but for a reply held: refused, or the held reply and then this
    /// message to the queue.
    #[inline(never)]
    fn queue(
        &mut self,
        kind: MessageKind,
        payload: &[u8],
        compression: Compression,
    ) -> Result<(), SendError> {
        if self.closed {
            return Err(SendError::Closed);
        }
        if self.in_progress {
            return Err(SendError::MessageInProgress);
        }
        self.queue_held();
        #[cfg(feature = "deflate")]
        if let Some(pmd) = self.deflate.as_deref_mut() {
            let mut out = Vec::new();
            if pmd
                .compress_with(payload, &mut out, compression)
                .map_err(SendError::Deflate)?
            {
                return self
                    .tx
                    .tx()
                    .queue_owned(true, true, kind.opcode(), out.into());
            }
        }
        #[cfg(not(feature = "deflate"))]
        let _ = compression;
        self.tx
            .tx()
            .queue_slice(true, false, kind.opcode(), payload)
    }

    /// Queues a ping or a pong, in order with the messages, as [`Connection::ping`] does.
    pub(crate) fn control(&mut self, opcode: OpCode, payload: &[u8]) -> Result<(), SendError> {
        if self.closed {
            return Err(SendError::Closed);
        }
        if payload.len() > MAX_CONTROL_PAYLOAD {
            return Err(SendError::ControlTooLong);
        }
        self.queue_held();
        self.tx.tx().queue_slice(true, false, opcode, payload)
    }

    /// From now on every send is refused, as after [`Connection::close`].
    pub(crate) fn refuse(&mut self) {
        self.closed = true;
        self.queue_held();
    }

    /// A held reply goes to the queue (copied), ahead of what follows it; no reply is
    /// held from then on.
    fn queue_held(&mut self) {
        if let Some((kind, lent, _)) = self.held.take() {
            // Copying into the queue cannot fail for a server (no masking key to draw).
            let _ = self.tx.tx().queue_slice(true, false, kind.opcode(), lent);
        }
        self.lone = None;
    }

    /// Whether the output queue is under its high-water mark: the batch lends no more
    /// messages once it is not (the rest stay buffered for the receive that follows the
    /// wait for room), as the owned handler receives no more.
    #[inline]
    pub(crate) fn has_room(&self) -> bool {
        self.tx.out.has_room(0, self.high_water)
    }

    /// The reply held to be written from the receive buffer, if there is one: its kind and
    /// where it lies ([`Connection::lone_header`], then the bytes at that range).
    #[inline]
    pub(crate) fn held(&self) -> Option<(MessageKind, core::ops::Range<usize>)> {
        self.held.as_ref().map(|(kind, _, at)| (*kind, at.clone()))
    }
}

impl Connection {
    /// Runs `one` with the event `raw` (from [`poll_raw`](Self::poll_raw)), lent, and the
    /// send side to reply on while it is lent, when it is a message alone (nothing after it
    /// to run on); `many` with it as a [`Batch`] (see [`batch_of`](Self::batch_of)) with
    /// the run after it otherwise (both made in place, not returned: they are a few hundred
    /// bytes). Each is given `cx`. `None` for a control frame, and for a message inflated
    /// into the scratch buffer of chunk delivery, which the compressor's state shares.
    #[inline(always)]
    pub(crate) fn batch_with_replies<C, R>(
        &mut self,
        raw: &Raw,
        cx: C,
        one: impl FnOnce(C, MessageRef<'_>, Replies<'_>) -> R,
        many: impl FnOnce(C, Batch<'_>, Replies<'_>) -> R,
    ) -> Option<R> {
        #[cfg(feature = "deflate")]
        if matches!(
            raw,
            Raw::Data {
                loc: Loc::Scratch,
                ..
            }
        ) {
            return None;
        }
        let Raw::Data { kind, loc, .. } = raw else {
            // Control frames are handed over owned; nothing to lend.
            return None;
        };
        let closed = self.check_open().is_err();
        let in_progress = self.sending.is_some();
        let start = self.rx_read + self.rx_pending;
        // A run needs a frame's first two bytes after the message.
        let runs = start + 2 <= self.rx.len() && self.runs();
        if runs {
            self.note_frame();
        }
        // A reply that is the message itself may be written from the receive buffer when
        // it is the only message and nothing waits to be written before it.
        let lone_ok = !runs
            && !closed
            && !in_progress
            && self.role == crate::codec::Role::Server
            && self.out.is_empty()
            && !self.is_deflate();
        let mut replies = Replies {
            tx: TxParts {
                role: self.role,
                encoder: &mut self.encoder,
                out: &mut self.out,
                wbuf: &mut self.wbuf,
            },
            #[cfg(feature = "deflate")]
            deflate: self.deflate.as_deref_mut().map(|d| &mut d.pmd),
            closed,
            in_progress,
            lone: None,
            held: None,
            high_water: self.config.send_queue_high_water,
        };
        let (front, rest) = self.rx.split_at_mut(start);
        // One call of each of `one` and `many`, so that both are inlined here.
        let payload: &[u8] = match loc {
            Loc::Rx(at) => {
                if runs
                    && matches!(
                        raw,
                        Raw::Data {
                            first: true,
                            fin: true,
                            ..
                        }
                    )
                {
                    let msg = MessageRef::from_data(*kind, &front[at.clone()]);
                    let rules = self.decoder.batch_rules();
                    let batch = Batch::with_run(
                        msg,
                        rest,
                        rules,
                        &mut self.rx_pending,
                        &mut self.rx_decoded,
                    );
                    return Some(many(cx, batch, replies));
                }
                let payload = &front[at.clone()];
                if lone_ok {
                    replies.lone = Some((payload, at.clone()));
                }
                payload
            }
            Loc::Msg => &self.msg,
            #[cfg(feature = "deflate")]
            Loc::Scratch => return None,
        };
        Some(one(cx, MessageRef::from_data(*kind, payload), replies))
    }
}

impl Connection {
    /// The frame header of a reply held to be written from the receive buffer
    /// ([`Replies::held`]), `len` bytes of `kind`. It is written before anything else is
    /// done on the connection, which is then as it was when the reply was held (open,
    /// nothing queued or in progress, a server without permessage-deflate): what
    /// [`lone_header`](Self::lone_header) checks holds, and is not checked again.
    #[inline]
    pub(crate) fn lent_header(&self, kind: MessageKind, len: usize) -> crate::codec::HeaderBuf {
        debug_assert!(self.lone_header(kind, len).is_some());
        crate::codec::encode_header(true, false, kind.opcode(), None, len as u64)
    }

    /// The bytes at `at` in the receive buffer: a message lent and held as its own reply
    /// ([`Replies::held`]), for the IO layer to write straight from the buffer.
    #[inline]
    pub(crate) fn lent_bytes(&self, at: core::ops::Range<usize>) -> &[u8] {
        &self.rx[at]
    }

    /// Queues what a direct write of the held reply `header` + the bytes at `at` left:
    /// its first `written` bytes went out (copied: the receive buffer moves on).
    pub(crate) fn lent_unwritten(
        &mut self,
        header: &crate::codec::HeaderBuf,
        at: core::ops::Range<usize>,
        written: usize,
    ) {
        let payload = bytes::Bytes::copy_from_slice(&self.rx[at]);
        self.out.push_rest(header.as_slice(), payload, written);
    }

    /// Queues the held reply at `at` (copied) when it cannot be written directly.
    pub(crate) fn send_lent(
        &mut self,
        kind: MessageKind,
        at: core::ops::Range<usize>,
    ) -> Result<(), SendError> {
        let (tx, rx) = self.tx_with_rx();
        tx.queue_slice(true, false, kind.opcode(), &rx[at])
    }
}
