//! Replying while a received message is lent: the send side of a connection borrowed
//! apart from its receive buffer ([`Connection::batch_with_replies`]), so that the
//! handler API's borrowed callback can answer the messages of a [`Batch`] straight into
//! the output queue while they borrow the buffer they arrived in.

use crate::codec::{MAX_CONTROL_PAYLOAD, MessageKind, OpCode};
use crate::message::Compression;

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
        if self.closed {
            return Err(SendError::Closed);
        }
        if self.in_progress {
            return Err(SendError::MessageInProgress);
        }
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
        self.tx.tx().queue_slice(true, false, opcode, payload)
    }

    /// From now on every send is refused, as after [`Connection::close`].
    pub(crate) fn refuse(&mut self) {
        self.closed = true;
    }
}

impl Connection {
    /// The event `raw` (from [`poll_raw`](Self::poll_raw)) as a [`Batch`] (see
    /// [`batch_of`](Self::batch_of)), with the send side to reply on while it is lent.
    /// `None` for a message inflated into the scratch buffer of chunk delivery, which the
    /// compressor's state shares.
    pub(crate) fn batch_with_replies(&mut self, raw: &Raw) -> Option<(Batch<'_>, Replies<'_>)> {
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
        let closed = self.check_open().is_err();
        let in_progress = self.sending.is_some();
        let runs = self.runs();
        if runs {
            self.note_frame();
        }
        let rules = self.decoder.batch_rules();
        let (first, rest) = self.rx.split_at_mut(self.rx_read + self.rx_pending);
        let batch = match raw {
            Raw::Data {
                kind,
                loc: Loc::Rx(at),
                first: true,
                fin: true,
            } if runs => {
                let msg = crate::message::MessageRef::from_data(*kind, &first[at.clone()]);
                Batch::with_run(msg, rest, rules, &mut self.rx_pending)
            }
            Raw::Data {
                kind,
                loc: Loc::Rx(at),
                ..
            } => Batch::one(crate::message::MessageRef::from_data(
                *kind,
                &first[at.clone()],
            )),
            Raw::Data {
                kind,
                loc: Loc::Msg,
                ..
            } => Batch::one(crate::message::MessageRef::from_data(*kind, &self.msg)),
            // Control frames are handed over owned; nothing to lend.
            _ => return None,
        };
        let replies = Replies {
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
        };
        Some((batch, replies))
    }
}
