//! Frame encoding: headers into a fixed array, payload masked for clients.

use core::fmt;

use super::{MAX_HEADER_LEN, OpCode};
use crate::codec::Role;

/// An encoded frame header: up to 14 bytes in a fixed array, no allocation.
// `encode_header` builds the bytes in a register, as one number, and the output queue
// writes them from there (`HeaderBuf::pieces`). Built byte by byte, they were stored in
// small pieces and read back wider, which the processor cannot forward from the stores: a
// stall per frame (`perf annotate` of the pipelined echo: most of the time spent queueing
// a reply was two such loads).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct HeaderBuf {
    /// The header's bytes, then zeros.
    bytes: [u8; 16],
    /// The header's length.
    len: u8,
}

impl HeaderBuf {
    /// The header bytes.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        // The mask tells the compiler the length is in bounds: no check, no panic path.
        &self.bytes[..self.len() & 15]
    }

    /// The header length, 2 to 14.
    #[allow(clippy::len_without_is_empty)]
    #[inline]
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// The whole array with its length, for callers that keep the array.
    #[inline]
    pub fn into_parts(self) -> ([u8; MAX_HEADER_LEN], u8) {
        let mut bytes = [0; MAX_HEADER_LEN];
        bytes.copy_from_slice(&self.bytes[..MAX_HEADER_LEN]);
        (bytes, self.len)
    }

    /// The header in at most three pieces of 8, 4 and 2 bytes, in order (a header is 2 to
    /// 14 bytes, always an even count): `put(piece, width)`, the piece's little-endian
    /// bytes being the header's next `width` bytes. To be written from a register, not byte
    /// by byte nor with a call of `memcpy`. Read in two 8-byte halves, as a `HeaderBuf` on
    /// the stack was written: a 16-byte load of two 8-byte stores is not forwarded from
    /// them, a stall while they are recent.
    #[inline(always)]
    pub(crate) fn pieces(&self, mut put: impl FnMut(u64, usize)) {
        let len = self.len();
        let mut low = [0; 8];
        low.copy_from_slice(&self.bytes[..8]);
        let mut rest = u64::from_le_bytes(low);
        if len & 8 != 0 {
            put(rest, 8);
            let mut high = [0; 8];
            high.copy_from_slice(&self.bytes[8..]);
            rest = u64::from_le_bytes(high);
        }
        if len & 4 != 0 {
            put(rest, 4);
            rest >>= 32;
        }
        if len & 2 != 0 {
            put(rest, 2);
        }
    }

    /// Writes the header to the front of `out` (at least [`len`](Self::len) bytes long)
    /// from a register ([`pieces`](Self::pieces)).
    #[inline(always)]
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn write_into(&self, out: &mut [u8]) {
        let mut at = 0;
        self.pieces(|piece, width| {
            out[at..at + width].copy_from_slice(&piece.to_le_bytes()[..width]);
            at += width;
        });
    }
}

impl fmt::Debug for HeaderBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("HeaderBuf").field(&self.as_slice()).finish()
    }
}

/// RFC 6455 5.2's length forms: "the minimal number of bytes MUST be used to encode the
/// length".
#[derive(Clone, Copy)]
enum LengthForm {
    /// In the second byte: up to 125.
    Short,
    /// 126, then 16 bits: up to 65,535.
    Medium,
    /// 127, then 64 bits.
    Long,
}

impl LengthForm {
    #[inline(always)]
    fn of(payload_len: u64) -> Self {
        if payload_len < 126 {
            LengthForm::Short
        } else if payload_len <= u64::from(u16::MAX) {
            LengthForm::Medium
        } else {
            LengthForm::Long
        }
    }

    /// The header's length in this form, without a masking key.
    #[inline(always)]
    fn header_len(self) -> usize {
        match self {
            LengthForm::Short => 2,
            LengthForm::Medium => 4,
            LengthForm::Long => 10,
        }
    }
}

/// The length of the header [`encode_header`] makes for `payload_len` bytes, masked or
/// not.
#[inline]
pub(crate) fn header_len(payload_len: u64, masked: bool) -> usize {
    LengthForm::of(payload_len).header_len() + if masked { 4 } else { 0 }
}

/// Encodes a frame header (RFC 6455 5.2) with the shortest length form.
///
/// `rsv1` marks a compressed message's first frame (RFC 7692). The caller keeps control
/// frames at or below 125 bytes; the connection checks that before calling.
#[inline]
pub fn encode_header(
    fin: bool,
    rsv1: bool,
    opcode: OpCode,
    mask: Option<[u8; 4]>,
    payload_len: u64,
) -> HeaderBuf {
    // The bytes as one little-endian number: byte i is bits 8i..8i+8.
    let first = (u8::from(fin) << 7) | (u8::from(rsv1) << 6) | opcode.as_u8();
    let mask_bit = if mask.is_some() { 0x80 } else { 0 };
    // The length in its shortest form; an extended length in network byte order.
    let form = LengthForm::of(payload_len);
    let (second, extended) = match form {
        LengthForm::Short => (mask_bit | payload_len as u8, 0),
        // Swapped: the number whose little-endian bytes are the big-endian length.
        LengthForm::Medium => (
            mask_bit | 126,
            u128::from((payload_len as u16).swap_bytes()),
        ),
        LengthForm::Long => (mask_bit | 127, u128::from(payload_len.swap_bytes())),
    };
    let mut v = u128::from(first) | u128::from(second) << 8 | extended << 16;
    let mut len = form.header_len();
    if let Some(key) = mask {
        v |= u128::from(u32::from_le_bytes(key)) << (8 * len);
        len += 4;
    }
    HeaderBuf {
        bytes: v.to_le_bytes(),
        len: len as u8,
    }
}

/// The OS random source failed, so no masking key could be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RandomError;

impl fmt::Display for RandomError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the OS random source failed")
    }
}

impl std::error::Error for RandomError {}

/// Masking keys from the OS random source, drawn in batches so a frame costs no syscall.
///
/// RFC 6455 5.3: "The masking key MUST be derived from a strong source of entropy"
/// and be unpredictable; keys come straight from `getrandom`.
#[derive(Debug)]
pub struct MaskKeys {
    pool: Box<[u8; 256]>,
    pos: usize,
}

impl Default for MaskKeys {
    fn default() -> Self {
        Self::new()
    }
}

impl MaskKeys {
    /// An empty pool; it is filled on first use.
    pub fn new() -> Self {
        MaskKeys {
            pool: Box::new([0; 256]),
            pos: 256,
        }
    }

    /// The next masking key. Keys are drawn from the OS 256 bytes (64 keys) at a time.
    /// [`RandomError`] when the OS has no entropy to give; the connection cannot send then.
    pub fn next_key(&mut self) -> Result<[u8; 4], RandomError> {
        if self.pos + 4 > self.pool.len() {
            getrandom::fill(&mut self.pool[..]).map_err(|_| RandomError)?;
            self.pos = 0;
        }
        let mut key = [0u8; 4];
        key.copy_from_slice(&self.pool[self.pos..self.pos + 4]);
        self.pos += 4;
        Ok(key)
    }
}

/// Encodes frames for one role: clients mask with fresh keys, servers never mask.
#[derive(Debug)]
pub struct Encoder {
    role: Role,
    keys: Option<MaskKeys>,
}

impl Encoder {
    /// An encoder for `role`.
    pub fn new(role: Role) -> Self {
        Encoder { role, keys: None }
    }

    /// The role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The header for a frame of `payload_len` bytes, and the key its payload must be
    /// masked with (client role only).
    ///
    /// RFC 6455 5.1: "a client MUST mask all frames that it sends to the server" and "a
    /// server MUST NOT mask any frames that it sends to the client".
    #[inline]
    pub fn header(
        &mut self,
        fin: bool,
        rsv1: bool,
        opcode: OpCode,
        payload_len: u64,
    ) -> Result<(HeaderBuf, Option<[u8; 4]>), RandomError> {
        let mask = self.key()?;
        Ok((encode_header(fin, rsv1, opcode, mask, payload_len), mask))
    }

    /// The key the next frame is masked with: a fresh one for a client, none for a server.
    #[inline]
    pub(crate) fn key(&mut self) -> Result<Option<[u8; 4]>, RandomError> {
        Ok(match self.role {
            Role::Client => Some(self.keys.get_or_insert_with(MaskKeys::new).next_key()?),
            Role::Server => None,
        })
    }

    /// Appends a whole frame (header and, for clients, masked payload) to `out`.
    pub fn encode_into(
        &mut self,
        fin: bool,
        rsv1: bool,
        opcode: OpCode,
        payload: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), RandomError> {
        let (header, mask) = self.header(fin, rsv1, opcode, payload.len() as u64)?;
        out.reserve(header.len() + payload.len());
        out.extend_from_slice(header.as_slice());
        let start = out.len();
        out.extend_from_slice(payload);
        if let Some(mut key) = mask {
            rapidws_simd::mask::apply(&mut out[start..], &mut key);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 6455 5.2 written out byte by byte: the reference the register-built header is
    /// held to.
    fn reference(fin: bool, rsv1: bool, op: OpCode, mask: Option<[u8; 4]>, len: u64) -> Vec<u8> {
        let mut out = vec![(u8::from(fin) << 7) | (u8::from(rsv1) << 6) | op.as_u8()];
        let bit = if mask.is_some() { 0x80 } else { 0 };
        if len < 126 {
            out.push(bit | len as u8);
        } else if len < 65536 {
            out.push(bit | 126);
            out.extend_from_slice(&(len as u16).to_be_bytes());
        } else {
            out.push(bit | 127);
            out.extend_from_slice(&len.to_be_bytes());
        }
        out.extend_from_slice(mask.as_ref().map_or(&[][..], |k| &k[..]));
        out
    }

    #[test]
    fn every_length_form_mask_and_flag_matches_the_byte_by_byte_reference() {
        let lens = [
            0,
            1,
            125,
            126,
            127,
            255,
            256,
            0x1234,
            65535,
            65536,
            0x0102_0304_0506,
            u64::MAX >> 1,
        ];
        let ops = [
            OpCode::Continuation,
            OpCode::Text,
            OpCode::Binary,
            OpCode::Close,
        ];
        for len in lens {
            for op in ops {
                for (fin, rsv1) in [(true, false), (false, false), (true, true), (false, true)] {
                    for mask in [None, Some([0x37, 0xfa, 0x21, 0x3d]), Some([0xff; 4])] {
                        let h = encode_header(fin, rsv1, op, mask, len);
                        let want = reference(fin, rsv1, op, mask, len);
                        assert_eq!(
                            h.as_slice(),
                            &want[..],
                            "{len} {op:?} {fin} {rsv1} {mask:?}"
                        );
                        assert_eq!(h.len(), want.len());
                        assert_eq!(header_len(len, mask.is_some()), want.len());
                        let (array, n) = h.into_parts();
                        assert_eq!(&array[..usize::from(n)], &want[..]);
                        let mut pieces = Vec::new();
                        h.pieces(|p, n| pieces.extend_from_slice(&p.to_le_bytes()[..n]));
                        assert_eq!(pieces, want);
                        let mut out = [0xee; 20];
                        h.write_into(&mut out);
                        assert_eq!(&out[..want.len()], &want[..]);
                        assert!(
                            out[want.len()..].iter().all(|&b| b == 0xee),
                            "nothing past it"
                        );
                    }
                }
            }
        }
    }
}
