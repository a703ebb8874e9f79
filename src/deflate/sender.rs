//! The sending direction: our compressor and the sender policy.

use std::sync::Arc;

use super::compressor::{Compressor, Key};
use super::pool::CompressorPool;
use super::predict::{Predictor, Verdict};
use super::{CompressorPolicy, DeflateConfig, DeflateError};
use crate::message::Compression;

/// Where the compressor comes from.
enum Engine {
    /// Ours for the connection's life, created on first use.
    Attached(Option<Compressor>),
    /// Borrowed from the pool for one message (held across `compress_chunk` calls).
    Pooled {
        pool: Arc<CompressorPool>,
        borrowed: Option<Compressor>,
    },
    /// The agreed window is 8 bits, which zlib cannot compress with: whole messages go
    /// uncompressed and fragmented ones as stored blocks, which reference no window.
    Stored,
}

pub(crate) struct Sender {
    engine: Engine,
    key: Key,
    /// Reset after every message: no context takeover for our direction, or pooled.
    reset_each_message: bool,
    min_size: usize,
    skip_if_not_smaller: bool,
    /// [`DeflateConfig::predict_incompressible`]: the probe schedule, when on.
    predictor: Option<Predictor>,
    /// `compress_chunk` fed input to zlib since the last flush.
    unflushed: bool,
    /// Hook for prepared messages (`super::prepared`): the uncompressed payload of the last
    /// prepared message sent compressed, whose tail primes the compressor before our next
    /// own message.
    prime: Option<bytes::Bytes>,
}

impl core::fmt::Debug for Sender {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let engine = match &self.engine {
            Engine::Attached(d) => {
                if d.is_some() {
                    "attached"
                } else {
                    "attached (not created)"
                }
            }
            Engine::Pooled { .. } => "pooled",
            Engine::Stored => "stored only (8-bit window)",
        };
        f.debug_struct("Sender")
            .field("engine", &engine)
            .field("window_bits", &self.key.window_bits)
            .field("reset_each_message", &self.reset_each_message)
            .finish()
    }
}

impl Sender {
    pub(crate) fn new(no_context_takeover: bool, window_bits: u8, config: &DeflateConfig) -> Self {
        let key = Key {
            window_bits: window_bits.clamp(9, 15),
            level: config.level.clamp(0, 9),
            mem_level: config.mem_level.clamp(1, 9),
        };
        let (engine, pooled) = if window_bits < 9 {
            (Engine::Stored, false)
        } else {
            match &config.policy {
                CompressorPolicy::Attached => (Engine::Attached(None), false),
                CompressorPolicy::Pooled(pool) => (
                    Engine::Pooled {
                        pool: Arc::clone(pool),
                        borrowed: None,
                    },
                    true,
                ),
            }
        };
        Sender {
            engine,
            key,
            reset_each_message: no_context_takeover || pooled,
            min_size: config.min_size,
            skip_if_not_smaller: config.skip_if_not_smaller,
            predictor: config.predict_incompressible.then(Predictor::new),
            unflushed: false,
            prime: None,
        }
    }

    pub(crate) fn should_compress(&self, len: usize) -> bool {
        !matches!(self.engine, Engine::Stored) && len >= self.min_size
    }

    /// Runs the current message's compressor over `input` (see [`Compressor::compress`]).
    fn run(&mut self, input: &[u8], fin: bool, out: &mut Vec<u8>) -> Result<(), DeflateError> {
        let key = self.key;
        match &mut self.engine {
            Engine::Attached(c) => {
                let c = c.get_or_insert_with(|| Compressor::new(key));
                if let Some(prime) = self.prime.take() {
                    c.prime(&prime, key.window_bits);
                }
                c.compress(input, fin, out)
            }
            Engine::Pooled { pool, borrowed } => {
                let c = borrowed.get_or_insert_with(|| pool.take(key));
                c.compress(input, fin, out)
            }
            Engine::Stored => unreachable!("the stored engine has no compressor"),
        }
    }

    /// Ends a message: resets or returns the compressor as the policy says. `force_reset`
    /// resets even with context takeover (the message went out uncompressed).
    fn finish_message(&mut self, force_reset: bool) {
        self.unflushed = false;
        let key = self.key;
        match &mut self.engine {
            Engine::Attached(Some(d)) if self.reset_each_message || force_reset => d.reset(),
            Engine::Pooled { pool, borrowed } => {
                if let Some(d) = borrowed.take() {
                    pool.put(key, d);
                }
            }
            _ => {}
        }
    }

    /// Compresses a whole message as `compression` says; `Ok(false)` when it goes
    /// uncompressed, with our compressor's history then as the peer's will be.
    pub(crate) fn compress(
        &mut self,
        payload: &[u8],
        out: &mut Vec<u8>,
        compression: Compression,
    ) -> Result<bool, DeflateError> {
        // `Always` overrides the settings' heuristics, not what the agreement allows.
        let forced = match compression {
            // Never reaches the compressor: its history (and a pending prime) stays as
            // the peer's inflater has it.
            Compression::Never => return Ok(false),
            Compression::Always => true,
            Compression::Auto => false,
        };
        if matches!(self.engine, Engine::Stored) || (!forced && payload.len() < self.min_size) {
            return Ok(false);
        }
        let skip_if_not_smaller = self.skip_if_not_smaller && !forced;
        let start = out.len();
        if payload.is_empty() && skip_if_not_smaller {
            // One byte compressed is not smaller than nothing.
            return Ok(false);
        }
        if payload.is_empty() {
            // RFC 7692 7.2.3.6: an empty message is one empty stored block with its
            // LEN/NLEN removed; the compressor is byte aligned between messages and does
            // not need to see it.
            out.push(0x00);
            return Ok(true);
        }
        // Decided before the compressor sees the message: a message sent uncompressed
        // never enters the peer's window (RFC 7692 6.1 lets any message go uncompressed),
        // so skipping it here keeps both histories equal with no reset.
        let verdict = match &mut self.predictor {
            Some(p) if !forced => p.verdict(payload),
            _ => Verdict::Compress,
        };
        match verdict {
            Verdict::Compress => {}
            Verdict::Skip => return Ok(false),
            Verdict::Probe => {
                // Measured on a scratch compressor: ours never sees the message unless
                // the probe says to compress it.
                let size = super::predict::probe(payload, self.key, out);
                let compress = self
                    .predictor
                    .as_mut()
                    .is_some_and(|p| p.probed(payload.len(), size));
                if !compress {
                    return Ok(false);
                }
            }
        }
        let result = self.run(payload, true, out);
        if let Err(e) = result {
            out.truncate(start);
            self.finish_message(true);
            return Err(e);
        }
        if skip_if_not_smaller && out.len() - start >= payload.len() {
            // The compressor's window now holds `payload`, which the peer will receive
            // uncompressed and not in its inflater's window: reset, so that no later
            // message refers back to it.
            out.truncate(start);
            self.finish_message(true);
            return Ok(false);
        }
        self.finish_message(false);
        Ok(true)
    }

    pub(crate) fn compress_chunk(
        &mut self,
        chunk: &[u8],
        fin: bool,
        out: &mut Vec<u8>,
    ) -> Result<(), DeflateError> {
        if matches!(self.engine, Engine::Stored) {
            write_stored(chunk, fin, out);
            return Ok(());
        }
        let start = out.len();
        let result = if fin {
            if chunk.is_empty() && !self.unflushed {
                // Nothing since the last flush: zlib would make no progress (and emit no
                // trailer); the empty stored block's header is all the message needs.
                out.push(0x00);
                Ok(())
            } else {
                self.run(chunk, true, out)
            }
        } else if chunk.is_empty() {
            Ok(())
        } else {
            self.unflushed = true;
            self.run(chunk, false, out)
        };
        if let Err(e) = result {
            out.truncate(start);
            self.finish_message(true);
            return Err(e);
        }
        if fin {
            self.finish_message(false);
        }
        Ok(())
    }
}

// ----- prepared messages (see `PerMessageDeflate::prepared_sent`) -----

impl Sender {
    /// The window bits our compressor uses; `None` when we cannot compress (8-bit window).
    pub(super) fn prepared_window_bits(&self) -> Option<u8> {
        match self.engine {
            Engine::Stored => None,
            _ => Some(self.key.window_bits),
        }
    }

    /// A prepared message went out compressed (against an empty history): with context
    /// takeover the peer's window now ends with `payload`, so our compressor, which
    /// still holds the history before it, is reset and primed with `payload` before our
    /// next own message. Nothing to do when we reset after every message anyway.
    pub(super) fn prepared_sent(&mut self, payload: bytes::Bytes) {
        if !self.reset_each_message && matches!(self.engine, Engine::Attached(_)) {
            self.prime = Some(payload);
        }
    }
}

/// Writes `chunk` as DEFLATE blocks with no compression (RFC 1951 3.2.4); with `fin`, adds
/// the header byte of the final empty block whose LEN/NLEN the trailer supplies.
fn write_stored(chunk: &[u8], fin: bool, out: &mut Vec<u8>) {
    for block in chunk.chunks(usize::from(u16::MAX)) {
        let len = block.len() as u16;
        // BFINAL = 0, BTYPE = 00, padded to the byte boundary.
        out.push(0x00);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(block);
    }
    if fin {
        out.push(0x00);
    }
}
