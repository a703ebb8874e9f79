//! The receiving direction: a bounded inflater.

use zlib_rs::{Inflate, InflateFlush, Status};

use super::{DeflateError, TRAILER, grow_zeroed};

/// The most output one inflate call may write; also bounds the zeroed slack per frame.
const MAX_STEP: usize = 64 * 1024;
/// The least output room offered to one inflate call.
const MIN_STEP: usize = 1024;

/// The inflater always uses a 15-bit window: it decodes any agreed window (zlib-based peers
/// compress an agreed 8 with 9 bits, which a smaller inflater would refuse), and zlib-rs 0.6
/// allocates a 32 KiB window whatever the window bits, so a smaller one would save nothing.
const WINDOW_BITS: u8 = 15;

pub(crate) struct Receiver {
    /// Created on the first compressed message.
    inflate: Option<Inflate>,
    /// Bytes of the trailer inflated when a message's last frame paused in it.
    trailer: u8,
}

/// How far a bounded inflate got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Inflated {
    /// All the input is inflated.
    Done,
    /// Paused at the pause point, having taken this many bytes of the input.
    Paused(usize),
}

impl core::fmt::Debug for Receiver {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Receiver")
            .field("created", &self.inflate.is_some())
            .finish()
    }
}

impl Receiver {
    pub(crate) fn new() -> Self {
        Receiver {
            inflate: None,
            trailer: 0,
        }
    }

    /// Inflates `input` (and the trailer when `fin`) onto `out`, failing past `max_len`,
    /// pausing when `out` holds `stop` bytes (when `stop` ≤ `max_len`).
    pub(crate) fn decompress(
        &mut self,
        input: &[u8],
        fin: bool,
        out: &mut Vec<u8>,
        max_len: usize,
        stop: usize,
    ) -> Result<Inflated, DeflateError> {
        // Paused in the trailer: the input was all taken before it.
        if self.trailer == 0
            && let Some(took) = self
                .inflate_all(input, out, max_len, stop)
                .map_err(|e| self.failed(e))?
        {
            return Ok(Inflated::Paused(took));
        }
        if !fin {
            return Ok(Inflated::Done);
        }
        // RFC 7692 7.2.2: append 00 00 ff ff to the message's payload, then inflate.
        let fed = usize::from(self.trailer).min(TRAILER.len());
        match self
            .inflate_all(&TRAILER[fed..], out, max_len, stop)
            .map_err(|e| self.failed(e))?
        {
            Some(took) => {
                self.trailer = (fed + took) as u8;
                Ok(Inflated::Paused(input.len()))
            }
            None => {
                self.trailer = 0;
                Ok(Inflated::Done)
            }
        }
    }

    /// An inflate failed: the stream is mid-message or broken; start afresh should the
    /// caller go on.
    #[cold]
    fn failed(&mut self, e: DeflateError) -> DeflateError {
        self.restart();
        self.trailer = 0;
        e
    }

    fn restart(&mut self) {
        if let Some(inflate) = &mut self.inflate {
            // Raw DEFLATE again, with zlib's default (15-bit) window.
            inflate.reset(false);
        }
    }

    /// Inflates `input` onto `out`: `None` once all of it is inflated, `Some` with how
    /// much it took when it paused at `stop`.
    fn inflate_all(
        &mut self,
        mut input: &[u8],
        out: &mut Vec<u8>,
        max_len: usize,
        stop: usize,
    ) -> Result<Option<usize>, DeflateError> {
        let total = input.len();
        // One past the limit: producing that byte proves the message too large. A pause
        // point before it caps the output (and the capacity) there.
        let cap_limit = max_len.saturating_add(1).min(stop);
        loop {
            let room = cap_limit.saturating_sub(out.len());
            if room == 0 {
                if stop <= max_len {
                    return Ok(Some(total - input.len()));
                }
                return Err(DeflateError::TooLarge);
            }
            let step = input
                .len()
                .saturating_mul(4)
                .clamp(MIN_STEP, MAX_STEP)
                .min(room);
            let start = out.len();
            grow_zeroed(out, step, cap_limit);
            let inflate = self
                .inflate
                .get_or_insert_with(|| Inflate::new(false, WINDOW_BITS));
            let (in0, out0) = (inflate.total_in(), inflate.total_out());
            let status = inflate.decompress(input, &mut out[start..], InflateFlush::SyncFlush);
            let consumed = (inflate.total_in() - in0) as usize;
            let produced = (inflate.total_out() - out0) as usize;
            out.truncate(start + produced);
            input = &input[consumed..];
            if out.len() > max_len {
                return Err(DeflateError::TooLarge);
            }
            match status {
                Err(_) => return Err(DeflateError::Corrupt),
                Ok(Status::StreamEnd) => {
                    // RFC 7692 7.2.3.4: a block with BFINAL set ends zlib's stream. The
                    // rest of the message (at least the header of the empty stored block
                    // that the trailer completes) is inflated as a new stream.
                    self.restart();
                    if input.is_empty() {
                        return Ok(None);
                    }
                    continue;
                }
                Ok(Status::Ok | Status::BufError) => {}
            }
            if input.is_empty() && produced < step {
                return Ok(None);
            }
            if consumed == 0 && produced == 0 {
                // No progress with both input and output room: cannot happen with valid
                // zlib state; refuse rather than spin.
                return Err(DeflateError::Corrupt);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::Role;
    use crate::deflate::{DeflateConfig, DeflateParams, PerMessageDeflate};

    /// Mixed text that compresses about 10 to 1, with runs that inflate far past a step.
    fn message(len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| {
                if (i / 5000) % 3 == 0 {
                    0
                } else {
                    b"pause and go on "[i % 16]
                }
            })
            .collect()
    }

    fn compressed(pmd: &mut PerMessageDeflate, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        assert!(pmd.compress(data, &mut out).unwrap());
        out
    }

    /// Inflates `wire` (split into frames of `frame` bytes) pausing every `grant` bytes
    /// of output, going on with what each pause left of the input.
    fn inflate_in_grants(r: &mut Receiver, wire: &[u8], frame: usize, grant: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let frames: Vec<&[u8]> = wire.chunks(frame).collect();
        for (i, f) in frames.iter().enumerate() {
            let fin = i + 1 == frames.len();
            let mut input = *f;
            loop {
                let stop = out.len() + grant;
                match r.decompress(input, fin, &mut out, 1 << 30, stop).unwrap() {
                    Inflated::Done => break,
                    Inflated::Paused(took) => {
                        assert_eq!(out.len(), stop, "paused at the grant");
                        assert!(out.capacity() <= stop.max(1024), "grown past the grant");
                        input = &input[took..];
                    }
                }
            }
        }
        out
    }

    #[test]
    fn an_inflate_paused_at_every_grant_goes_on_where_it_stopped() {
        let mut sender = PerMessageDeflate::new(
            Role::Client,
            DeflateParams::default(),
            &DeflateConfig::new().min_size(0),
        );
        let mut r = Receiver::new();
        for (len, frame, grant) in [
            (300_000, usize::MAX, 1),
            (300_000, 7, 4096),
            (1_000_000, 1000, 65_537),
            (10, usize::MAX, 3),
        ] {
            let data = message(len);
            let wire = compressed(&mut sender, &data);
            let frame = frame.min(wire.len().max(1));
            // The same inflater throughout: its window carries over, as on a connection.
            let got = inflate_in_grants(&mut r, &wire, frame, grant);
            assert!(
                got == data,
                "{len} bytes, frames of {frame}, grants of {grant}"
            );
        }
    }
}
