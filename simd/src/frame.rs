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
        // One bounds check and one 4-byte load, not four of each.
        let k = 2 + ext;
        let mut key = [0u8; 4];
        key.copy_from_slice(&buf[k..k + 4]);
        Some(key)
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
    scan_scalar(buf, out)
}

/// [`scan`] with a chosen backend; `None` when the CPU or build lacks it. Every backend
/// runs the same scalar parser: a vector decoder (one 16-byte load per header and a byte
/// shuffle chosen by the length class, no branch per field) measured 1.5-2.3x slower on
/// AVX2 and AVX-512, because each header's position depends on the previous frame's
/// length and the branches of the scalar parser let the CPU run ahead on a predicted
/// length, where the vector decoder waits for the shuffle and the move out of the vector
/// register (`benches/RESULTS.md`, "Kernels"). The entry exists so that tests
/// and benches loop over [`Backend::ALL`] as for the other kernels.
pub fn scan_with(backend: Backend, buf: &[u8], out: &mut [FrameHeader]) -> Option<Scan> {
    if !backend.is_available() {
        return None;
    }
    Some(scan_scalar(buf, out))
}

fn scan_scalar(buf: &[u8], out: &mut [FrameHeader]) -> Scan {
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
