//! UTF-8 validation: one-shot and streaming (across WebSocket fragments), fail-fast.

#[cfg(all(
    target_arch = "x86_64",
    target_feature = "sse2",
    any(feature = "avx2", feature = "avx512")
))]
use crate::generic::ASCII_INLINE_MAX;
use crate::{Backend, dispatch, scalar};

/// Where validation failed, with the same meaning as [`core::str::Utf8Error`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Utf8Error {
    valid_up_to: usize,
    error_len: Option<u8>,
}

impl Utf8Error {
    /// Bytes of the input (for the streaming validator: of the whole message so far)
    /// that were valid before the error.
    pub fn valid_up_to(&self) -> usize {
        self.valid_up_to
    }
    /// Length of the invalid sequence, or `None` when the input ended inside a code point.
    pub fn error_len(&self) -> Option<usize> {
        self.error_len.map(usize::from)
    }
}

impl core::fmt::Display for Utf8Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.error_len {
            Some(n) => write!(
                f,
                "invalid UTF-8 sequence of {n} bytes from index {}",
                self.valid_up_to
            ),
            None => write!(
                f,
                "incomplete UTF-8 byte sequence from index {}",
                self.valid_up_to
            ),
        }
    }
}

impl core::error::Error for Utf8Error {}

fn from_core(e: core::str::Utf8Error) -> Utf8Error {
    Utf8Error {
        valid_up_to: e.valid_up_to(),
        error_len: e.error_len().map(|n| n as u8),
    }
}

/// Below this many bytes no kernel is called: ASCII is tested inline
/// ([`is_ascii_short`]), anything else goes to `core::str::from_utf8`.
const SMALL: usize = 16;

/// Whether `buf` (shorter than [`SMALL`]) is ASCII: two overlapping words of 8 or 4 bytes,
/// or up to three bytes, and one test of their high bits. `core::str::from_utf8` costs
/// 70-80 instructions on a 5-byte string (its setup for long inputs), this a dozen.
#[inline(always)]
fn is_ascii_short(buf: &[u8]) -> bool {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let n = buf.len();
    let word = |at: usize| -> u64 {
        let mut w = [0u8; 8];
        w.copy_from_slice(&buf[at..at + 8]);
        u64::from_ne_bytes(w)
    };
    let half = |at: usize| -> u64 {
        let mut w = [0u8; 4];
        w.copy_from_slice(&buf[at..at + 4]);
        u64::from(u32::from_ne_bytes(w))
    };
    let bits = match n {
        8.. => word(0) | word(n - 8),
        4..=7 => half(0) | half(n - 4),
        _ => buf.iter().fold(0u64, |a, &b| a | u64::from(b)),
    };
    bits & HIGH == 0
}

/// [`validate`] of an input shorter than [`SMALL`]: the ASCII test inline, the rest
/// ([`locate_error`]: std's check, and the error if there is one) out of line, so that
/// `validate` stays small enough to inline.
#[inline(always)]
fn validate_short(buf: &[u8]) -> Result<(), Utf8Error> {
    if is_ascii_short(buf) {
        return Ok(());
    }
    locate_error(buf)
}

/// Validates a complete UTF-8 string.
///
/// The vector kernels only answer "valid or not"; the error position is computed (by
/// `core::str::from_utf8`) only when the input is invalid.
///
/// Always inlined: the short-input and ASCII tests are a few instructions, and as a call
/// it returned its result through memory (a WebSocket client lending 64-byte text
/// messages, which validates each twice, spent 30 of its 209 instructions a message on
/// the two calls: `benches/callgrind.sh firehose rapidws-ref 64`).
#[inline(always)]
pub fn validate(buf: &[u8]) -> Result<(), Utf8Error> {
    if buf.len() < SMALL {
        return validate_short(buf);
    }
    if ascii_inline(buf) || validate_dispatched(buf) {
        Ok(())
    } else {
        locate_error(buf)
    }
}

/// `buf` as text: [`validate`], then the same `&str` that `core::str::from_utf8` gives,
/// at the kernels' speed. For callers that forbid `unsafe` and hold bytes they know (or
/// want to know) are UTF-8.
#[inline]
pub fn from_utf8(buf: &[u8]) -> Result<&str, Utf8Error> {
    validate(buf)?;
    // SAFETY: `validate` accepted `buf`: it is UTF-8 (the kernels are tested against
    // `core::str::from_utf8` on every backend).
    Ok(unsafe { core::str::from_utf8_unchecked(buf) })
}

/// Whether `buf` is short ASCII, checked inline: a chat line or a JSON key is, and then
/// no kernel needs to be called. Non-ASCII or longer input says `false` and goes to the
/// kernel.
#[inline(always)]
fn ascii_inline(buf: &[u8]) -> bool {
    #[cfg(all(
        target_arch = "x86_64",
        target_feature = "sse2",
        any(feature = "avx2", feature = "avx512")
    ))]
    {
        use crate::x86_64::sse2::{is_ascii_16_64, is_ascii_65_128};
        if buf.len() <= 64 {
            return is_ascii_16_64(buf);
        }
        if buf.len() <= ASCII_INLINE_MAX {
            return is_ascii_65_128(buf);
        }
    }
    let _ = buf;
    false
}

/// Whether `buf` is valid and ends on a code point boundary: [`validate`]'s fast paths,
/// `false` for anything else (invalid, or ending inside a code point, which a streaming
/// caller carries).
#[inline(always)]
fn whole_valid(buf: &[u8]) -> bool {
    if buf.len() < SMALL {
        return validate_short(buf).is_ok();
    }
    if ascii_inline(buf) {
        return true;
    }
    if buf.len() <= OPEN_TAIL_FROM {
        // The kernel refuses a code point left open, so a short chunk that ends in one
        // takes the slow path and is checked twice: cheaper than the test below, whose
        // branch on the last byte mispredicts on non-ASCII text.
        return validate_dispatched(buf);
    }
    // Text most often ends in ASCII, where no code point can be open.
    let open = match buf.last() {
        Some(&b) if b >= 0x80 => scalar::incomplete_tail_start(buf.len(), |i| buf[i]) != buf.len(),
        _ => false,
    };
    !open && validate_dispatched(buf)
}

/// Up to this many bytes a streamed chunk is not first tested for a code point left open
/// at its end (see [`whole_valid`]).
const OPEN_TAIL_FROM: usize = 256;

/// Whether `buf` is valid, complete UTF-8, on the cached kernel for its size.
#[inline(always)]
fn validate_dispatched(buf: &[u8]) -> bool {
    if buf.len() < dispatch::VALIDATE_SHORT {
        dispatch::validate_short_auto(buf)
    } else {
        dispatch::validate_auto(buf)
    }
}

/// The exact error of an input a kernel found invalid.
#[cold]
#[inline(never)]
fn locate_error(buf: &[u8]) -> Result<(), Utf8Error> {
    core::str::from_utf8(buf).map(|_| ()).map_err(from_core)
}

/// [`validate`] with a chosen backend; `None` when the CPU or build lacks it.
pub fn validate_with(backend: Backend, buf: &[u8]) -> Option<Result<(), Utf8Error>> {
    if !backend.is_available() {
        return None;
    }
    // SAFETY: availability checked just above.
    if unsafe { dispatch::validate(backend, buf) } {
        Some(Ok(()))
    } else {
        Some(locate_error(buf))
    }
}

/// Length of the sequence a lead byte starts (1 for ASCII and for invalid bytes).
#[inline]
fn sequence_len(lead: u8) -> usize {
    match lead {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

/// Streaming validator for a message that arrives in chunks.
///
/// Carries up to 3 bytes of an incomplete code point between chunks. An invalid sequence is
/// reported in the chunk where it first becomes certain (a prefix that can never complete,
/// such as `F4 90` or `ED A0`, is an error at once, as Autobahn case 6.4 demands);
/// [`Validator::finish`] reports a code point left incomplete at the end.
///
/// After an error the validator's state is unspecified until [`Validator::reset`] or
/// [`Validator::finish`].
#[derive(Clone, Debug, Default)]
pub struct Validator {
    partial: [u8; 4],
    partial_len: u8,
    consumed: usize,
}

impl Validator {
    /// A validator at the start of a message.
    pub const fn new() -> Self {
        Validator {
            partial: [0; 4],
            partial_len: 0,
            consumed: 0,
        }
    }

    /// Forgets all state; ready for the next message.
    #[inline]
    pub fn reset(&mut self) {
        *self = Self::new();
    }

    /// True when no code point is left incomplete.
    #[inline]
    pub fn is_complete(&self) -> bool {
        self.partial_len == 0
    }

    /// Validates the next chunk of the message. An error's
    /// [`valid_up_to`](Utf8Error::valid_up_to) counts from the start of the message; an
    /// incomplete code point at the end of the chunk is carried, not an error, until
    /// [`finish`](Self::finish).
    #[inline(always)]
    pub fn feed(&mut self, chunk: &[u8]) -> Result<(), Utf8Error> {
        // A chunk at a code point boundary that ends on one, as a frame that arrived whole
        // does, is one-shot validation (the same inline paths and cached kernel as
        // `validate`) and a counter; all else is out of line, so the validator can stay
        // in registers and nothing is returned through memory on this path.
        if self.partial_len == 0 && whole_valid(chunk) {
            self.consumed += chunk.len();
            return Ok(());
        }
        // The fields by value, not `self` by reference: a validator whose address never
        // escapes stays in registers on the fast path, instead of being stored to memory
        // when it is created.
        let (state, r) =
            Self::feed_out_of_line(self.partial, self.partial_len, self.consumed, chunk);
        *self = state;
        r
    }

    /// [`Validator::feed_rest`] out of line, on a validator passed by its fields.
    #[inline(never)]
    fn feed_out_of_line(
        partial: [u8; 4],
        partial_len: u8,
        consumed: usize,
        chunk: &[u8],
    ) -> (Self, Result<(), Utf8Error>) {
        let mut v = Validator {
            partial,
            partial_len,
            consumed,
        };
        let r = v.feed_rest(chunk);
        (v, r)
    }

    /// [`Validator::feed`] of a chunk that continues a code point, ends inside one or is
    /// invalid.
    fn feed_rest(&mut self, chunk: &[u8]) -> Result<(), Utf8Error> {
        if self.partial_len != 0 {
            return self.feed_backend(Backend::best(), chunk);
        }
        if chunk.len() < SMALL {
            return self.settle(chunk);
        }
        self.feed_at_boundary(chunk, validate_dispatched)
    }

    /// [`Validator::feed`] with a chosen backend; `None` when the CPU or build lacks it.
    pub fn feed_with(&mut self, backend: Backend, chunk: &[u8]) -> Option<Result<(), Utf8Error>> {
        if !backend.is_available() {
            return None;
        }
        Some(self.feed_backend(backend, chunk))
    }

    /// Bytes needed to complete the carried code point (0 when none is carried).
    fn needed(&self) -> usize {
        if self.partial_len == 0 {
            0
        } else {
            sequence_len(self.partial[0]) - usize::from(self.partial_len)
        }
    }

    /// Feeds `bytes` (at most [`Self::needed`]) to the carried code point.
    fn complete_partial(&mut self, bytes: &[u8]) -> Result<(), Utf8Error> {
        for &b in bytes {
            self.partial[usize::from(self.partial_len)] = b;
            self.partial_len += 1;
            match core::str::from_utf8(&self.partial[..usize::from(self.partial_len)]) {
                Ok(_) => {
                    self.consumed += usize::from(self.partial_len);
                    self.partial_len = 0;
                }
                Err(e) if e.error_len().is_some() => {
                    return Err(Utf8Error {
                        valid_up_to: self.consumed,
                        error_len: e.error_len().map(|n| n as u8),
                    });
                }
                Err(_) => {}
            }
        }
        Ok(())
    }

    /// Scalar validation of a chunk that starts at a code point boundary: an incomplete
    /// but still completable sequence at its end is carried.
    fn settle(&mut self, chunk: &[u8]) -> Result<(), Utf8Error> {
        match core::str::from_utf8(chunk) {
            Ok(_) => {
                self.consumed += chunk.len();
                Ok(())
            }
            Err(e) => match e.error_len() {
                Some(n) => Err(Utf8Error {
                    valid_up_to: self.consumed + e.valid_up_to(),
                    error_len: Some(n as u8),
                }),
                None => {
                    let tail = &chunk[e.valid_up_to()..];
                    self.partial[..tail.len()].copy_from_slice(tail);
                    self.partial_len = tail.len() as u8;
                    self.consumed += e.valid_up_to();
                    Ok(())
                }
            },
        }
    }

    /// `feed` on an available backend.
    fn feed_backend(&mut self, backend: Backend, chunk: &[u8]) -> Result<(), Utf8Error> {
        let need = self.needed().min(chunk.len());
        let (head, rest) = chunk.split_at(need);
        self.complete_partial(head)?;
        if self.partial_len != 0 {
            // The whole chunk went into a code point that is still open.
            return Ok(());
        }
        self.feed_at_boundary(rest, |body| {
            if body.len() < SMALL {
                core::str::from_utf8(body).is_ok()
            } else {
                // SAFETY: the caller checked that `backend` is available.
                unsafe { dispatch::validate(backend, body) }
            }
        })
    }

    /// Feeds `rest`, which starts at a code point boundary: `valid` checks all of it but
    /// an incomplete code point at its end, which is carried.
    #[inline(always)]
    fn feed_at_boundary(
        &mut self,
        rest: &[u8],
        valid: impl FnOnce(&[u8]) -> bool,
    ) -> Result<(), Utf8Error> {
        // Text most often ends in ASCII, where no code point can be open.
        let cut = match rest.last() {
            Some(&b) if b >= 0x80 => scalar::incomplete_tail_start(rest.len(), |i| rest[i]),
            _ => rest.len(),
        };
        let (body, tail) = rest.split_at(cut);
        if !valid(body) {
            // Cold: an error in `body` is certain; let the scalar path locate it.
            return self.settle_cold(rest);
        }
        self.consumed += body.len();
        if tail.is_empty() {
            Ok(())
        } else {
            self.settle_cold(tail)
        }
    }

    /// [`Self::settle`] out of the hot path: an error to locate or a code point to carry.
    #[cold]
    #[inline(never)]
    fn settle_cold(&mut self, chunk: &[u8]) -> Result<(), Utf8Error> {
        self.settle(chunk)
    }

    /// Ends the message: an incomplete code point left over is an error. Resets the validator.
    #[inline]
    pub fn finish(&mut self) -> Result<(), Utf8Error> {
        let r = if self.partial_len == 0 {
            Ok(())
        } else {
            Err(Utf8Error {
                valid_up_to: self.consumed,
                error_len: None,
            })
        };
        self.reset();
        r
    }
}

/// Unmasks `buf` in place with `key` (advanced as in [`crate::mask::apply`]) and feeds the
/// result to `validator`.
///
/// This is [`crate::mask::apply`] followed by [`Validator::feed`], two passes over
/// `buf`. Both single-pass alternatives measured slower (`integration/benches/kernels.rs`,
/// `unmask_validate` groups; see `benches/RESULTS.md`, Kernels): a kernel that validated
/// the unmasked vectors in registers needs the shuffles for the bytes before each vector
/// that the validator instead loads from memory, and alternating the two passes over
/// L1-sized chunks lost 5% at 256 KiB and 10-25% at 1 MiB to the passes over the whole
/// buffer.
///
/// The whole of `buf` is unmasked and `key` advanced by `buf.len()` even when an error is
/// returned.
#[inline]
pub fn unmask_validate(
    buf: &mut [u8],
    key: &mut [u8; 4],
    validator: &mut Validator,
) -> Result<(), Utf8Error> {
    crate::mask::apply(buf, key);
    validator.feed(buf)
}

/// [`unmask_validate`] with a chosen backend; `None` when the CPU or build lacks it.
pub fn unmask_validate_with(
    backend: Backend,
    buf: &mut [u8],
    key: &mut [u8; 4],
    validator: &mut Validator,
) -> Option<Result<(), Utf8Error>> {
    crate::mask::apply_with(backend, buf, key)?;
    validator.feed_with(backend, buf)
}
