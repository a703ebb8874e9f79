//! Data frames other than the usual whole message in the receive buffer: fragments
//! assembled into the message buffer, chunks handed over as they arrive, compressed
//! payloads inflated (within the budget's grant), and the failures on the way.

use crate::codec::DataChunk;
#[cfg(feature = "deflate")]
use crate::codec::MessageKind;
#[cfg(feature = "deflate")]
use crate::codec::ProtocolError;
#[cfg(feature = "deflate")]
use crate::deflate::Inflated;

use super::stall::Stall;
use super::{Connection, Delivery, Error, Loc, Raw};

impl Connection {
    /// [`data`](Self::data) for every other chunk.
    pub(super) fn data_rest(
        &mut self,
        chunk: DataChunk,
        consumed: usize,
    ) -> Result<Option<Raw>, Error> {
        #[cfg(feature = "deflate")]
        if chunk.compressed {
            let r = self.inflate(chunk, consumed);
            if r.is_err()
                && let Some(d) = self.deflate.as_deref_mut()
            {
                // An unfinished chunk is never lent: it goes with the failure.
                d.scratch = Vec::new();
            }
            return r;
        }
        let kind = chunk.kind;
        match self.config.delivery {
            Delivery::Whole => {
                if chunk.first && !chunk.frame_end {
                    // The start of a message's first frame: keep it where it is, and the
                    // rest of the frame after it, so that a single-frame message is
                    // never copied (`reserve_recv` makes room for the rest up front).
                    self.held_start = chunk.payload.start - self.rx_read;
                    self.held = consumed;
                    // Bytes a read brought: when the budget cannot take them yet, the
                    // connection waits (reading no more) until it can.
                    if !self.charge_or_wait(0)? {
                        self.stall(Stall::Settle);
                    }
                    return Ok(None);
                }
                if self.held > 0 {
                    self.held += consumed;
                    let held = self.rx_read + self.held_start..chunk.payload.end;
                    if chunk.message_end {
                        // Complete: handed over, no longer charged.
                        self.held = 0;
                        self.rx_pending = chunk.payload.end - self.rx_read;
                        let _ = self.charge_partial(0);
                        return Ok(Some(Raw::whole(kind, Loc::Rx(held))));
                    }
                    if chunk.frame_end {
                        // The first frame of a fragmented message: its fragments are
                        // assembled in `msg`.
                        self.msg.extend_from_slice(&self.rx[held]);
                        self.consume_rx(self.held);
                        self.held = 0;
                    }
                    // What arrived is charged as it arrives; past the budget, the
                    // connection waits.
                    if !self.charge_or_wait(0)? {
                        self.stall(Stall::Settle);
                    }
                    return Ok(None);
                }
                // Charged before it is copied; past the budget, the chunk waits.
                if !self.charge_or_wait(chunk.payload.len())? {
                    self.stall_chunk(chunk, consumed);
                    return Ok(None);
                }
                self.msg.extend_from_slice(&self.rx[chunk.payload]);
                self.consume_rx(consumed);
                if chunk.message_end {
                    self.msg_delivered = true;
                    let _ = self.charge_partial(0);
                    return Ok(Some(Raw::whole(kind, Loc::Msg)));
                }
                Ok(None)
            }
            Delivery::Chunks => {
                if chunk.payload.is_empty() && !chunk.message_end {
                    self.consume_rx(consumed);
                    return Ok(None);
                }
                let first = self.chunk_first(chunk.message_end);
                self.rx_pending = consumed;
                Ok(Some(Raw::Data {
                    kind,
                    loc: Loc::Rx(chunk.payload),
                    first,
                    fin: chunk.message_end,
                }))
            }
        }
    }

    /// Inflates a compressed chunk; the size limit applies to the inflated bytes, and what
    /// they grow the message by is granted by the memory budget before inflating.
    #[cfg(feature = "deflate")]
    pub(super) fn inflate(
        &mut self,
        chunk: DataChunk,
        consumed: usize,
    ) -> Result<Option<Raw>, Error> {
        let max = self.config.max_message_size;
        let chunks = self.config.delivery == Delivery::Chunks;
        // The inflated bytes of the message so far; in chunk delivery the previous chunk
        // has been handed over and its charge goes back.
        let so_far = match self.deflate.as_deref_mut() {
            Some(d) if chunks => {
                d.scratch.clear();
                d.inflated
            }
            Some(_) => self.msg.len(),
            // The decoder refuses RSV1 unless deflate was set.
            None => return Err(Error::Protocol(ProtocolError::ReservedBits)),
        };
        let _ = self.charge_partial(0);
        // The budget grants what this chunk may add before the inflater allocates it: up
        // to the message limit (one byte past it proves a message too large), and no more
        // than the chunk can inflate to.
        let want = (max - so_far.min(max))
            .saturating_add(1)
            .min(inflate_bound(chunk.payload.len()));
        let granted = match self.charge.grow_up_to(want) {
            Ok(granted) => granted,
            // This connection alone would hold more than the whole budget.
            Err(_) => return Err(Error::OverBudget),
        };
        if granted == 0 {
            // Nothing granted now: the chunk waits, not inflated yet.
            if self.config.budget_wait.is_zero() {
                return Err(self.over_budget(super::budget::Short::Wait));
            }
            self.stall_chunk(chunk, consumed);
            return Ok(None);
        }
        // Memory was granted: a wait for it, if any, is over.
        self.timers.budget_since = None;
        // The inflater pauses at the grant (past the message limit only when the grant
        // reaches one byte past it, which proves the message too large), and the rest of
        // the chunk waits for more.
        let stop = so_far.saturating_add(granted);
        let Some(d) = self.deflate.as_deref_mut() else {
            return Err(Error::Protocol(ProtocolError::ReservedBits));
        };
        let pmd = &mut d.pmd;
        let input = &self.rx[chunk.payload.clone()];
        let fin = chunk.message_end;
        let (r, start) = if chunks {
            let r = pmd.decompress_within(
                input,
                fin,
                &mut d.scratch,
                max - so_far.min(max),
                stop.saturating_sub(so_far),
            );
            d.inflated += d.scratch.len();
            (r, 0)
        } else {
            let start = self.msg.len();
            (
                pmd.decompress_within(input, fin, &mut self.msg, max, stop),
                start,
            )
        };
        let paused = match r {
            // A failure gives everything back with the rest of the input.
            Err(e) => return Err(Error::Deflate(e)),
            Ok(Inflated::Done) => None,
            Ok(Inflated::Paused(took)) => Some(took),
        };
        if fin && !chunks && paused.is_none() {
            // Complete: handed over, no longer charged.
            self.msg_delivered = true;
        }
        // The unused part of the grant goes back.
        self.charge_partial(0)?;
        let Some(d) = self.deflate.as_deref_mut() else {
            return Err(Error::Protocol(ProtocolError::ReservedBits));
        };
        let out = if chunks { &d.scratch } else { &self.msg };
        if chunk.kind == MessageKind::Text {
            // RFC 7692 + RFC 6455 8.1: text is validated after inflation, failing fast.
            d.utf8
                .feed(&out[start..])
                .map_err(|_| Error::Protocol(ProtocolError::InvalidUtf8))?;
            if fin && paused.is_none() {
                d.utf8
                    .finish()
                    .map_err(|_| Error::Protocol(ProtocolError::InvalidUtf8))?;
            }
        }
        if let Some(took) = paused {
            // The rest of the chunk waits for more memory; in chunk delivery what was
            // inflated is handed over now (its charge goes back at the next call).
            let produced = !out.is_empty() && chunks;
            let mut rest = chunk;
            rest.payload.start += took;
            let kind = rest.kind;
            if self.config.budget_wait.is_zero() {
                return Err(self.over_budget(super::budget::Short::Wait));
            }
            self.stall_chunk(rest, consumed);
            if produced {
                let first = self.chunk_first(false);
                return Ok(Some(Raw::Data {
                    kind,
                    loc: Loc::Scratch,
                    first,
                    fin: false,
                }));
            }
            return Ok(None);
        }
        let produced = out.len() > start;
        self.consume_rx(consumed);
        let kind = chunk.kind;
        match self.config.delivery {
            Delivery::Whole => {
                if chunk.message_end {
                    return Ok(Some(Raw::whole(kind, Loc::Msg)));
                }
                Ok(None)
            }
            Delivery::Chunks => {
                if !produced && !chunk.message_end {
                    return Ok(None);
                }
                let first = self.chunk_first(chunk.message_end);
                if chunk.message_end
                    && let Some(d) = self.deflate.as_deref_mut()
                {
                    d.inflated = 0;
                }
                Ok(Some(Raw::Data {
                    kind,
                    loc: Loc::Scratch,
                    first,
                    fin: chunk.message_end,
                }))
            }
        }
    }

    /// Whether the next chunk delivered is its message's first; `end`: it is the last.
    #[inline]
    pub(super) fn chunk_first(&mut self, end: bool) -> bool {
        let first = !self.chunk_started;
        self.chunk_started = !end;
        first
    }

    /// [`fail`](Self::fail) with the error reported now, by the poll that met it.
    pub(super) fn fail_now(&mut self, e: Error) -> Error {
        self.fail(e.clone());
        self.failure_reported = true;
        e
    }
}

/// The most bytes `n` compressed bytes can inflate to, with some bytes of a previous
/// chunk's unfinished code: DEFLATE's largest ratio is 1032:1 (a 258-byte match coded in
/// two bits).
#[cfg(feature = "deflate")]
#[inline]
fn inflate_bound(n: usize) -> usize {
    n.saturating_add(64).saturating_mul(1032)
}
