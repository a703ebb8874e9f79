//! The batch decoder's kernel, written once: the whole messages at the front of one read
//! found and checked (a scan pass over the headers), unmasked with the ASCII test of
//! their text in one pass over the payloads, and the text that is not ASCII validated,
//! all in one call per backend ([`decode`]), so that nothing is dispatched, called or
//! set up per frame.
//!
//! Each header's position depends on the length in the one before it, so the scan pass
//! hops from header to header in scalar code on every backend; the payload passes run
//! the backend's vectors ([`Payload`]).

use crate::header::{End, Frame, FrameHeader, Rules, Scanned, Violation, parse_header};
use crate::scalar;

/// Frames per round of a [`crate::frame::Run`]: decoded in one call while their payloads
/// stay in L1, then lent.
pub(crate) const CHUNK: usize = 64;

/// A whole unfragmented, uncompressed text or binary message found by the scan pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Simple {
    pub(crate) header_len: usize,
    pub(crate) payload_len: usize,
    /// The masking key (zero when the frame is not masked).
    pub(crate) key: [u8; 4],
    pub(crate) text: bool,
}

/// The frame at the start of `buf` when it is a whole message the batch takes (FIN, no
/// RSV bit, text or binary, masked as `rules` say, payload within the limit, all of it
/// in `buf`); otherwise why the batch ends there.
///
/// The first two bytes decide the usual frame (`0x81` or `0x82`, the right MASK bit);
/// anything else goes to [`classify`] out of line.
#[inline(always)]
pub(crate) fn simple_at(buf: &[u8], rules: &Rules) -> Result<Simple, End> {
    let (Some(&b0), Some(&b1)) = (buf.first(), buf.get(1)) else {
        return Err(End::Incomplete);
    };
    let mask_bit = if rules.masked { 0x80 } else { 0 };
    if b0.wrapping_sub(0x81) > 1 || b1 & 0x80 != mask_bit {
        return Err(classify(buf, rules));
    }
    let code = b1 & 0x7F;
    let (len, at) = if code < 126 {
        (u64::from(code), 2)
    } else if code == 126 {
        let Some(e) = buf.get(2..4) else {
            return Err(End::Incomplete);
        };
        (u64::from(u16::from_be_bytes([e[0], e[1]])), 4)
    } else {
        let Some(e) = buf.get(2..10) else {
            return Err(End::Incomplete);
        };
        let mut w = [0u8; 8];
        w.copy_from_slice(e);
        (u64::from_be_bytes(w), 10)
    };
    let header_len = at + if rules.masked { 4 } else { 0 };
    // The whole header first, as `parse_header` wants it, then its length.
    let Some(key) = buf.get(at..header_len) else {
        return Err(End::Incomplete);
    };
    if len >> 63 != 0 {
        return Err(End::Invalid(Violation::LengthOverflow));
    }
    if len > rules.max_payload {
        return Err(End::Invalid(Violation::TooLarge));
    }
    if len > (buf.len() - header_len) as u64 {
        return Err(End::Incomplete);
    }
    let mut k = [0u8; 4];
    if rules.masked {
        k.copy_from_slice(key);
    }
    Ok(Simple {
        header_len,
        payload_len: len as usize,
        key: k,
        text: b0 == 0x81,
    })
}

/// Why the batch ends at a frame whose first two bytes are not those of a whole text or
/// binary message masked as the rules say: the header parsed, then every rule that one
/// header decides, in the order the decoder checks them.
#[cold]
#[inline(never)]
pub(crate) fn classify(buf: &[u8], rules: &Rules) -> End {
    let h = match parse_header(buf) {
        Ok(Some(h)) => h,
        Ok(None) => return End::Incomplete,
        Err(_) => return End::Invalid(Violation::LengthOverflow),
    };
    judge(&h, rules)
}

/// The rules of RFC 6455 5.2-5.5 that one header decides, for a frame that is not a
/// simple message or is one that breaks them: `Other` when it breaks none.
pub(crate) fn judge(h: &FrameHeader, rules: &Rules) -> End {
    let op = h.opcode;
    let control = op >= 8;
    if !matches!(op, 0x0..=0x2 | 0x8..=0xA) {
        return End::Invalid(Violation::UnknownOpcode(op));
    }
    let rsv1 = h.rsv & 0b100 != 0;
    if h.rsv & 0b011 != 0 || (rsv1 && !(rules.rsv1 && matches!(op, 0x1 | 0x2))) {
        return End::Invalid(Violation::ReservedBits);
    }
    match (rules.masked, h.mask.is_some()) {
        (true, false) => return End::Invalid(Violation::Unmasked),
        (false, true) => return End::Invalid(Violation::Masked),
        _ => {}
    }
    if control {
        if h.payload_len > 125 {
            return End::Invalid(Violation::ControlTooLong);
        }
        if !h.fin {
            return End::Invalid(Violation::FragmentedControl);
        }
        return End::Other;
    }
    if h.fin && h.rsv == 0 && op != 0 {
        // A simple message after all (reached through `classify` only when its first
        // bytes were not the usual ones, which they are for every such header): its
        // limit and completeness.
        if h.payload_len > rules.max_payload {
            return End::Invalid(Violation::TooLarge);
        }
        return End::Incomplete;
    }
    // A fragment, a continuation or a compressed message: the decoder's state decides.
    End::Other
}

/// What the payload passes need of a backend, each always inlined into the backend's
/// kernel.
pub(crate) trait Payload {
    /// Unmasks `buf` in place with `key` at phase 0; whether the unmasked bytes are all
    /// ASCII.
    /// # Safety
    /// The backend must be available.
    unsafe fn unmask_ascii(buf: &mut [u8], key: [u8; 4]) -> bool;
    /// Whether `buf` is all ASCII.
    /// # Safety
    /// The backend must be available.
    unsafe fn ascii(buf: &[u8]) -> bool;
    /// What [`check`](Self::check) sets up once for a whole batch (the vector checker's
    /// tables).
    type Checker;
    /// The UTF-8 errors found so far, tested once at the end of a batch.
    type Errors: Copy;
    /// # Safety
    /// The backend must be available.
    unsafe fn checker() -> (Self::Checker, Self::Errors);
    /// Checks `buf`, text that is not all ASCII, as one complete UTF-8 string, and adds
    /// what it finds to `errors`.
    /// # Safety
    /// The backend must be available.
    unsafe fn check(checker: &Self::Checker, buf: &[u8], errors: &mut Self::Errors);
    /// Whether `errors` holds any.
    /// # Safety
    /// The backend must be available.
    unsafe fn any(errors: Self::Errors) -> bool;
}

/// The portable payload passes: word-at-a-time unmasking and ASCII tests, std's UTF-8
/// check.
pub(crate) struct Scalar;

impl Payload for Scalar {
    #[inline(always)]
    unsafe fn unmask_ascii(buf: &mut [u8], key: [u8; 4]) -> bool {
        unmask_ascii_words(buf, key)
    }
    #[inline(always)]
    unsafe fn ascii(buf: &[u8]) -> bool {
        ascii_words(buf)
    }
    type Checker = ();
    type Errors = bool;

    #[inline(always)]
    unsafe fn checker() -> ((), bool) {
        ((), false)
    }

    #[inline(always)]
    unsafe fn check(_: &(), buf: &[u8], errors: &mut bool) {
        *errors |= core::str::from_utf8(buf).is_err();
    }

    #[inline(always)]
    unsafe fn any(errors: bool) -> bool {
        errors
    }
}

const HIGH: u64 = 0x8080_8080_8080_8080;

#[inline(always)]
fn read8(b: &[u8], i: usize) -> u64 {
    u64::from_ne_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]))
}

#[inline(always)]
fn read4(b: &[u8], i: usize) -> u32 {
    u32::from_ne_bytes(b[i..i + 4].try_into().unwrap_or([0; 4]))
}

/// [`scalar::mask`] that also tells whether the unmasked bytes are ASCII.
#[inline(always)]
pub(crate) fn unmask_ascii_words(buf: &mut [u8], key: [u8; 4]) -> bool {
    let n = buf.len();
    if n >= 8 {
        let last = n - 8;
        let k8 = |k: [u8; 4]| {
            let w = u64::from(u32::from_ne_bytes(k));
            w | (w << 32)
        };
        let tail = read8(buf, last) ^ k8(scalar::rotated(key, last));
        let k = k8(key);
        let mut acc = tail;
        let mut i = 0;
        while i + 8 <= n {
            let w = read8(buf, i) ^ k;
            buf[i..i + 8].copy_from_slice(&w.to_ne_bytes());
            acc |= w;
            i += 8;
        }
        buf[last..].copy_from_slice(&tail.to_ne_bytes());
        acc & HIGH == 0
    } else if n >= 4 {
        let last = n - 4;
        let tail = read4(buf, last) ^ u32::from_ne_bytes(scalar::rotated(key, last));
        let head = read4(buf, 0) ^ u32::from_ne_bytes(key);
        buf[..4].copy_from_slice(&head.to_ne_bytes());
        buf[last..].copy_from_slice(&tail.to_ne_bytes());
        (head | tail) & 0x8080_8080 == 0
    } else {
        let mut acc = 0;
        for (b, k) in buf.iter_mut().zip(key) {
            *b ^= k;
            acc |= *b;
        }
        acc < 0x80
    }
}

/// Whether `buf` is ASCII, a word at a time (the last word overlapping).
#[inline(always)]
pub(crate) fn ascii_words(buf: &[u8]) -> bool {
    let n = buf.len();
    if n >= 8 {
        let mut acc = read8(buf, n - 8);
        let mut i = 0;
        while i + 8 <= n {
            acc |= read8(buf, i);
            i += 8;
        }
        acc & HIGH == 0
    } else if n >= 4 {
        (read4(buf, 0) | read4(buf, n - 4)) & 0x8080_8080 == 0
    } else {
        buf.iter().fold(0, |a, &b| a | b) < 0x80
    }
}

/// Decodes the whole messages at the front of `buf`, at most `max_frames` of them, in
/// place (see [`crate::frame::decode`]), in one loop specialized for the role: each
/// header checked, then its payload unmasked (a server's) with the ASCII test of text in
/// the same pass, and text that is not ASCII checked at once, its error bits gathered
/// with the others' and tested once, at the end ([`first_invalid`] finds the message).
/// # Safety
/// `P`'s backend must be available.
#[inline(always)]
pub(crate) unsafe fn decode<P: Payload>(
    buf: &mut [u8],
    rules: &Rules,
    max_frames: usize,
) -> Scanned {
    // SAFETY: the caller guarantees the backend.
    unsafe {
        let (s, errors) = if rules.masked {
            decode_role::<P, true>(buf, rules, max_frames)
        } else {
            decode_role::<P, false>(buf, rules, max_frames)
        };
        if P::any(errors) {
            return first_invalid(buf, rules, s.frames);
        }
        s
    }
}

/// [`decode`]'s loop for frames that must be masked (`MASKED`) or must not be: what it
/// found, and the UTF-8 errors of the text.
///
/// The usual header (a 7-bit length, the first two bytes those of a whole text or
/// binary message) is read as one 16-bit word and judged in one comparison; every other
/// header goes through [`simple_at`].
/// # Safety
/// `P`'s backend must be available.
#[inline(always)]
unsafe fn decode_role<P: Payload, const MASKED: bool>(
    buf: &mut [u8],
    rules: &Rules,
    max_frames: usize,
) -> (Scanned, P::Errors) {
    // The largest 7-bit length taken here; longer ones (or a lower limit) go through
    // `simple_at`.
    let short_max = rules.max_payload.min(125) as u8;
    let max = usize::try_from(rules.max_payload).unwrap_or(usize::MAX);
    // `b0 | b1 << 8` of a whole message's first bytes, less the opcode's low bit: FIN,
    // opcode 1 (0x81) or 2 (0x82), the MASK bit as the role wants it.
    let expect: u16 = 0x81 | if MASKED { 0x8000 } else { 0 };
    let mut pos = 0;
    let mut frames = 0;
    // SAFETY: the caller guarantees the backend.
    let (checker, mut errors) = unsafe { P::checker() };
    let end = loop {
        if frames == max_frames {
            break End::Full;
        }
        let (start, len, key, text) = match header::<MASKED>(buf, pos, expect, short_max, max) {
            Some(h) => h,
            None => match simple_at(&buf[pos..], rules) {
                Ok(s) => (pos + s.header_len, s.payload_len, s.key, s.text),
                Err(end) => break end,
            },
        };
        let Some(p) = buf.get_mut(start..start + len) else {
            break End::Incomplete;
        };
        // SAFETY: the caller guarantees the backend.
        unsafe {
            let ascii = if MASKED {
                P::unmask_ascii(p, key)
            } else {
                !text || P::ascii(p)
            };
            if text && !ascii {
                P::check(&checker, p, &mut errors);
            }
        }
        frames += 1;
        pos = start + len;
    };
    let s = Scanned {
        frames,
        consumed: pos,
        end,
    };
    (s, errors)
}

/// The usual header at `pos` in `buf`, read and judged in a few comparisons: the first
/// two bytes those of a whole text or binary message (`expect`), a 7-bit length up to
/// `short_max` or a 16-bit one up to `max`, the whole header in `buf`. Where the payload
/// starts, its length and key, and whether it is text; `None` for everything else, which
/// [`simple_at`] decides.
#[inline(always)]
fn header<const MASKED: bool>(
    buf: &[u8],
    pos: usize,
    expect: u16,
    short_max: u8,
    max: usize,
) -> Option<(usize, usize, [u8; 4], bool)> {
    let mask_len = if MASKED { 4 } else { 0 };
    let h = buf.get(pos..pos + 2 + mask_len)?;
    let w = u16::from_le_bytes([h[0], h[1]]);
    if (w & 0x80FF).wrapping_sub(expect) > 1 {
        return None;
    }
    let text = h[0] == 0x81;
    let code = h[1] & 0x7F;
    let mut key = [0u8; 4];
    if code <= short_max {
        if MASKED {
            key.copy_from_slice(&h[2..6]);
        }
        return Some((pos + 2 + mask_len, usize::from(code), key, text));
    }
    if code != 126 {
        return None;
    }
    let h = buf.get(pos..pos + 4 + mask_len)?;
    let len = usize::from(u16::from_be_bytes([h[2], h[3]]));
    if len > max {
        return None;
    }
    if MASKED {
        key.copy_from_slice(&h[4..8]);
    }
    Some((pos + 4 + mask_len, len, key, text))
}

/// After [`decode`] found text that is not UTF-8 among the first `frames` messages of
/// `buf`: the batch up to the first message with such text, that message and the ones
/// after it masked again as they arrived.
#[cold]
#[inline(never)]
fn first_invalid(buf: &mut [u8], rules: &Rules, frames: usize) -> Scanned {
    let mut pos = 0;
    let mut bad = None;
    for i in 0..frames {
        let Ok(s) = simple_at(&buf[pos..], rules) else {
            break;
        };
        let start = pos + s.header_len;
        let p = &mut buf[start..start + s.payload_len];
        if bad.is_none() && s.text && core::str::from_utf8(p).is_err() {
            bad = Some((i, pos));
        }
        if bad.is_some() && rules.masked {
            scalar::mask(p, s.key);
        }
        pos = start + s.payload_len;
    }
    let (frames, consumed) = bad.unwrap_or((frames, pos));
    Scanned {
        frames,
        consumed,
        end: End::Invalid(Violation::InvalidUtf8),
    }
}

/// The scan alone (see [`crate::frame::scan_batch`]): the header of every whole message
/// at the front of `buf` into `out`.
pub(crate) fn scan(buf: &[u8], rules: &Rules, out: &mut [Frame]) -> Scanned {
    let mut pos = 0;
    let mut n = 0;
    while n < out.len() {
        match simple_at(&buf[pos..], rules) {
            Ok(s) => {
                out[n] = Frame {
                    at: pos,
                    header: FrameHeader {
                        fin: true,
                        rsv: 0,
                        opcode: if s.text { 0x1 } else { 0x2 },
                        mask: rules.masked.then_some(s.key),
                        header_len: s.header_len as u8,
                        payload_len: s.payload_len as u64,
                    },
                };
                n += 1;
                pos += s.header_len + s.payload_len;
            }
            Err(end) => {
                return Scanned {
                    frames: n,
                    consumed: pos,
                    end,
                };
            }
        }
    }
    Scanned {
        frames: n,
        consumed: pos,
        end: End::Full,
    }
}
