//! The compressors: ours at level 1, zlib-rs at the other levels, and the raw DEFLATE
//! steps every sender uses (one message, a chunk of one, a prepared message compressed
//! against an empty history, priming a compressor with a window).

use zlib_rs::{Deflate, DeflateFlush};

use super::fast::FastDeflate;
use super::{DeflateError, TRAILER, grow_zeroed};

/// What a compressor was built with; only a compressor with the same key is reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Key {
    pub(crate) window_bits: u8,
    pub(crate) level: i32,
    pub(crate) mem_level: u8,
}

impl Key {
    /// A new compressor for this key: raw DEFLATE (negative window bits).
    pub(crate) fn build(self) -> Deflate {
        Deflate::new_with_config(zlib_rs::DeflateConfig {
            level: self.level,
            window_bits: -i32::from(self.window_bits),
            mem_level: i32::from(self.mem_level),
            ..zlib_rs::DeflateConfig::default()
        })
    }
}

/// A compressor: ours at level 1 ([`FastDeflate`]), zlib-rs otherwise.
pub(crate) enum Compressor {
    Fast(Box<FastDeflate>),
    Zlib(Deflate),
}

impl Compressor {
    pub(crate) fn new(key: Key) -> Self {
        if key.level == 1 {
            Compressor::Fast(Box::new(FastDeflate::new(key.window_bits)))
        } else {
            Compressor::Zlib(key.build())
        }
    }

    /// Compresses `input` as the next part of a message, appending to `out`; `fin` ends
    /// the message (sync flush, RFC 7692 7.2.1 trailer removed).
    pub(crate) fn compress(
        &mut self,
        input: &[u8],
        fin: bool,
        out: &mut Vec<u8>,
    ) -> Result<(), DeflateError> {
        match self {
            Compressor::Fast(f) => {
                f.compress(input, fin, out);
                Ok(())
            }
            Compressor::Zlib(d) => compress_zlib(d, input, fin, out),
        }
    }

    pub(crate) fn reset(&mut self) {
        match self {
            Compressor::Fast(f) => f.reset(),
            Compressor::Zlib(d) => d.reset(),
        }
    }

    /// Resets and makes the last window of `payload` the history (a prepared message the
    /// peer received, see `super::prepared`).
    pub(crate) fn prime(&mut self, payload: &[u8], window_bits: u8) {
        match self {
            Compressor::Fast(f) => f.set_dictionary(payload),
            Compressor::Zlib(d) => prime(d, payload, window_bits),
        }
    }
}

/// One zlib-rs compression step: `fin` sync-flushes and removes the trailer.
pub(crate) fn compress_zlib(
    deflate: &mut Deflate,
    input: &[u8],
    fin: bool,
    out: &mut Vec<u8>,
) -> Result<(), DeflateError> {
    let start = out.len();
    if fin {
        deflate_into(deflate, input, DeflateFlush::SyncFlush, out)?;
        strip_trailer(out, start)
    } else {
        deflate_into(deflate, input, DeflateFlush::NoFlush, out)
    }
}

/// Runs `deflate` over all of `input` with `flush`, appending its output to `out`.
pub(crate) fn deflate_into(
    deflate: &mut Deflate,
    mut input: &[u8],
    flush: DeflateFlush,
    out: &mut Vec<u8>,
) -> Result<(), DeflateError> {
    loop {
        // Enough for incompressible input plus block and flush overhead in most cases;
        // the loop goes on with more room if not.
        let step = (input.len() + input.len() / 16 + 64).min(256 * 1024);
        let start = out.len();
        grow_zeroed(out, step, usize::MAX);
        let (in0, out0) = (deflate.total_in(), deflate.total_out());
        let status = deflate.compress(input, &mut out[start..], flush);
        let consumed = (deflate.total_in() - in0) as usize;
        let produced = (deflate.total_out() - out0) as usize;
        out.truncate(start + produced);
        input = &input[consumed..];
        status.map_err(|_| DeflateError::Internal)?;
        // zlib: done when all input is taken and the output was not filled.
        if input.is_empty() && produced < step {
            return Ok(());
        }
        if consumed == 0 && produced == 0 {
            return Err(DeflateError::Internal);
        }
    }
}

/// RFC 7692 7.2.1: removes the 4 octets `00 00 ff ff` that end a sync flush.
pub(crate) fn strip_trailer(out: &mut Vec<u8>, start: usize) -> Result<(), DeflateError> {
    if out.len() >= start + TRAILER.len() && out.ends_with(&TRAILER) {
        out.truncate(out.len() - TRAILER.len());
        Ok(())
    } else {
        Err(DeflateError::Internal)
    }
}

/// Resets `deflate` and makes the last `2^window_bits` bytes of `payload` its history.
pub(crate) fn prime(deflate: &mut Deflate, payload: &[u8], window_bits: u8) {
    deflate.reset();
    let window = 1usize << window_bits;
    let tail = &payload[payload.len().saturating_sub(window)..];
    if deflate.set_dictionary(tail).is_err() {
        // A reset compressor with no history refers to nothing: still consistent.
        deflate.reset();
    }
}

/// Deflates `payload` as a whole RFC 7692 message against an empty history (fresh raw
/// compressor with a `window_bits` window, sync flush, trailer removed), appending it to
/// `out`. Level 1 uses our own compressor (`super::fast`), other levels zlib-rs.
pub(crate) fn compress_standalone(
    payload: &[u8],
    window_bits: u8,
    level: i32,
    mem_level: u8,
    out: &mut Vec<u8>,
) -> Result<(), DeflateError> {
    if payload.is_empty() {
        // RFC 7692 7.2.3.6: the empty message is one empty stored block, LEN/NLEN removed.
        out.push(0x00);
        return Ok(());
    }
    let key = Key {
        window_bits: window_bits.clamp(9, 15),
        level: level.clamp(0, 9),
        mem_level: mem_level.clamp(1, 9),
    };
    if key.level == 1 {
        // Our own level-1 compressor, as connections use (and far less to set up than a
        // zlib-rs compressor).
        FastDeflate::new(key.window_bits).compress(payload, true, out);
        return Ok(());
    }
    let mut deflate = key.build();
    let start = out.len();
    deflate_into(&mut deflate, payload, DeflateFlush::SyncFlush, out)?;
    strip_trailer(out, start)
}
