//! Frame header parsing and batch scanning of many frames in one buffer (RFC 6455 5.2).
//!
//! These functions decode header fields only; protocol rules (reserved bits, opcode
//! validity, control frame limits, masking direction) are the caller's to enforce.

use crate::Backend;

/// A parsed frame header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameHeader {
    /// FIN bit.
    pub fin: bool,
    /// RSV1..RSV3 as the low three bits (RSV1 = 0b100).
    pub rsv: u8,
    /// The 4-bit opcode.
    pub opcode: u8,
    /// The masking key, when the MASK bit is set.
    pub mask: Option<[u8; 4]>,
    /// Header length in bytes (2 to 14).
    pub header_len: u8,
    /// Payload length as announced (may exceed what is buffered).
    pub payload_len: u64,
}

/// Why a header could not be parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeaderError {
    /// A 64-bit length with the most significant bit set (RFC 6455 5.2).
    LengthOverflow,
}

/// Parses one header at the start of `buf`. `Ok(None)` means more bytes are needed.
///
/// Only the wire format is checked ([`HeaderError`]); opcodes, RSV bits, masking and
/// length limits are the caller's rules.
#[inline]
pub fn parse_header(buf: &[u8]) -> Result<Option<FrameHeader>, HeaderError> {
    parse(buf)
}

/// [`parse_header`], always inlined: into [`scan`]'s loop, where a call per frame costs
/// as much as the parse of a small frame's header.
#[inline(always)]
fn parse(buf: &[u8]) -> Result<Option<FrameHeader>, HeaderError> {
    if buf.len() < 2 {
        return Ok(None);
    }
    let b0 = buf[0];
    let b1 = buf[1];
    let masked = b1 & 0x80 != 0;
    let len7 = b1 & 0x7f;
    let ext = match len7 {
        126 => 2,
        127 => 8,
        _ => 0,
    };
    let hlen = 2 + ext + if masked { 4 } else { 0 };
    if buf.len() < hlen {
        return Ok(None);
    }
    let payload_len = match len7 {
        126 => u16::from_be_bytes([buf[2], buf[3]]) as u64,
        127 => {
            let mut b = [0u8; 8];
            b.copy_from_slice(&buf[2..10]);
            let n = u64::from_be_bytes(b);
            if n >> 63 != 0 {
                return Err(HeaderError::LengthOverflow);
            }
            n
        }
        n => n as u64,
    };
    let mask = if masked {
        let k = 2 + ext;
        Some([buf[k], buf[k + 1], buf[k + 2], buf[k + 3]])
    } else {
        None
    };
    Ok(Some(FrameHeader {
        fin: b0 & 0x80 != 0,
        rsv: (b0 >> 4) & 0x7,
        opcode: b0 & 0x0f,
        mask,
        header_len: hlen as u8,
        payload_len,
    }))
}

/// The outcome of [`scan`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scan {
    /// Number of complete frames written to the output slice.
    pub frames: usize,
    /// Bytes of the buffer covered by those frames (headers and payloads).
    pub consumed: usize,
    /// Set when the frame after the last complete one has an invalid header.
    pub error: Option<HeaderError>,
}

/// Parses the headers of consecutive complete frames (header and whole payload buffered)
/// at the start of `buf` into `out`, stopping at a partial frame, an invalid header, or
/// when `out` is full. The payload of frame `i` starts at the sum of the earlier frames'
/// sizes plus `out[i].header_len`.
///
/// ```
/// use rapidws_simd::frame::{FrameHeader, scan};
///
/// // Two unmasked server frames, "hi" (text) and a 3-byte binary, then half a header.
/// let buf = [0x81, 2, b'h', b'i', 0x82, 3, 1, 2, 3, 0x81];
/// let mut headers = [FrameHeader::default(); 8];
/// let s = scan(&buf, &mut headers);
/// assert_eq!((s.frames, s.consumed, s.error), (2, 9, None));
/// assert_eq!((headers[0].opcode, headers[0].payload_len), (0x1, 2));
/// assert_eq!((headers[1].opcode, headers[1].header_len), (0x2, 2));
/// ```
pub fn scan(buf: &[u8], out: &mut [FrameHeader]) -> Scan {
    crate::dispatch::scan_auto(buf, out)
}

/// [`scan`] with a chosen backend; `None` when the CPU or build lacks it.
pub fn scan_with(backend: Backend, buf: &[u8], out: &mut [FrameHeader]) -> Option<Scan> {
    if !backend.is_available() {
        return None;
    }
    // SAFETY: availability checked just above.
    Some(unsafe { crate::dispatch::scan(backend, buf, out) })
}

/// A 16-byte vector holding the first bytes of a frame, decoded by a byte shuffle.
///
/// # Safety
/// Every method may only run on a CPU that supports the implementing type's ISA.
pub(crate) trait HeaderVector: Copy {
    /// # Safety
    /// The ISA must be available; `p..p+16` must be readable.
    unsafe fn load16(p: *const u8) -> Self;
    /// The header's bytes rearranged by `table` (a byte index per output byte, `0x80`
    /// for zero): returns output bytes 0..8 and 8..12 as little-endian integers.
    /// # Safety
    /// The ISA must be available.
    unsafe fn decode(self, table: &[u8; 16]) -> (u64, u32);
}

/// Zero, in a shuffle table (SSSE3 `pshufb` and NEON `tbl` both give 0 for it).
const Z: u8 = 0x80;

/// Per length class (7-bit, 16-bit, 64-bit length), where each byte of the decoded
/// vector comes from: bytes 0..8 are the payload length, little-endian (the extended
/// length is big-endian on the wire, so it is reversed), bytes 8..12 the masking key,
/// which follows the length.
static CLASS_SHUFFLE: [[u8; 16]; 3] = [
    [1, Z, Z, Z, Z, Z, Z, Z, 2, 3, 4, 5, Z, Z, Z, Z],
    [3, 2, Z, Z, Z, Z, Z, Z, 4, 5, 6, 7, Z, Z, Z, Z],
    [9, 8, 7, 6, 5, 4, 3, 2, 10, 11, 12, 13, Z, Z, Z, Z],
];

/// The bits of the decoded length that belong to it, per class (the 7-bit length
/// shares its byte with the MASK bit).
static CLASS_LEN_MASK: [u64; 3] = [0x7f, 0xffff, u64::MAX];

/// [`scan`] with one vector load per header and a shuffle chosen by the length class:
/// no branch on the length class or the MASK bit, only on whether the frame is complete
/// (and on a 64-bit length with its top bit set). Headers within 16 bytes of the end of
/// `buf` go through the scalar parser.
/// # Safety
/// The ISA of `V` must be available.
#[inline(always)]
pub(crate) unsafe fn scan_vector<V: HeaderVector>(buf: &[u8], out: &mut [FrameHeader]) -> Scan {
    let mut pos = 0usize;
    let mut n = 0usize;
    while n < out.len() && buf.len() - pos >= 16 {
        let b0 = buf[pos];
        let b1 = buf[pos + 1];
        // SAFETY: the caller guarantees the ISA; `pos + 16 <= buf.len()`.
        let h = unsafe { V::load16(buf.as_ptr().add(pos)) };
        let len7 = b1 & 0x7f;
        // 0: 7-bit length, 1: 16-bit, 2: 64-bit.
        let class = usize::from(len7 >= 126) + usize::from(len7 == 127);
        // SAFETY: the caller guarantees the ISA.
        let (raw, key) = unsafe { h.decode(&CLASS_SHUFFLE[class]) };
        let payload_len = raw & CLASS_LEN_MASK[class];
        if payload_len >> 63 != 0 {
            return Scan {
                frames: n,
                consumed: pos,
                error: Some(HeaderError::LengthOverflow),
            };
        }
        let masked = b1 >> 7;
        // 2 + (0, 2 or 8 length bytes) + (4 key bytes when masked): at most 14 <= 16.
        let header_len = 2 + 2 * class + 4 * (class >> 1) + 4 * usize::from(masked);
        let total = header_len as u64 + payload_len;
        if total > (buf.len() - pos) as u64 {
            return Scan {
                frames: n,
                consumed: pos,
                error: None,
            };
        }
        out[n] = FrameHeader {
            fin: b0 & 0x80 != 0,
            rsv: (b0 >> 4) & 0x7,
            opcode: b0 & 0x0f,
            mask: (masked != 0).then_some(key.to_le_bytes()),
            header_len: header_len as u8,
            payload_len,
        };
        n += 1;
        pos += total as usize;
    }
    let rest = scan_scalar(&buf[pos..], &mut out[n..]);
    Scan {
        frames: n + rest.frames,
        consumed: pos + rest.consumed,
        error: rest.error,
    }
}

pub(crate) fn scan_scalar(buf: &[u8], out: &mut [FrameHeader]) -> Scan {
    let mut pos = 0usize;
    let mut n = 0usize;
    while n < out.len() {
        match parse(&buf[pos..]) {
            Ok(Some(h)) => {
                let total = h.header_len as u64 + h.payload_len;
                if total > (buf.len() - pos) as u64 {
                    break;
                }
                out[n] = h;
                n += 1;
                pos += total as usize;
            }
            Ok(None) => break,
            Err(e) => {
                return Scan {
                    frames: n,
                    consumed: pos,
                    error: Some(e),
                };
            }
        }
    }
    Scan {
        frames: n,
        consumed: pos,
        error: None,
    }
}
