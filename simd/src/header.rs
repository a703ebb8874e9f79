//! The frame header (RFC 6455 5.2) and what the batch decoder reports, below every kernel:
//! the scalar parser, the backends and [`crate::frame`], whose public API re-exports
//! them, all take them from here, so no kernel module depends on the one that
//! dispatches to it.

use core::ops::Range;

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

/// [`parse_header`], always inlined: into [`scan`](crate::frame::scan)'s loop, where a call per frame costs
/// as much as the parse of a small frame's header.
#[inline(always)]
pub(crate) fn parse(buf: &[u8]) -> Result<Option<FrameHeader>, HeaderError> {
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

/// The rules a peer's frames must follow, for the batch scanner and decoder: the ones of
/// RFC 6455 5.1-5.5 that one header decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rules {
    /// Frames must be masked (a server reading a client's) or must not be (a client
    /// reading a server's).
    pub masked: bool,
    /// RSV1 may be set on a text or binary frame (permessage-deflate was agreed). Such a
    /// frame is never taken into a batch, but it is no violation either.
    pub rsv1: bool,
    /// The largest payload taken: a whole message announcing more is
    /// [`Violation::TooLarge`].
    pub max_payload: u64,
}

impl Rules {
    /// A server's rules: masked frames, no RSV1, payloads up to `max_payload`.
    pub const fn server(max_payload: u64) -> Rules {
        Rules {
            masked: true,
            rsv1: false,
            max_payload,
        }
    }

    /// A client's rules: unmasked frames, no RSV1, payloads up to `max_payload`.
    pub const fn client(max_payload: u64) -> Rules {
        Rules {
            masked: false,
            rsv1: false,
            max_payload,
        }
    }
}

/// A frame found by [`scan_batch`](crate::frame::scan_batch): where its header starts in the buffer, and the header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Frame {
    /// Offset of the header's first byte.
    pub at: usize,
    /// The header.
    pub header: FrameHeader,
}

impl Frame {
    /// Where the payload lies in the buffer.
    pub fn payload(&self) -> Range<usize> {
        let start = self.at + usize::from(self.header.header_len);
        start..start + self.header.payload_len as usize
    }
}

/// A rule of RFC 6455 that a frame breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Violation {
    /// A 64-bit length with the most significant bit set (5.2).
    LengthOverflow,
    /// An opcode RFC 6455 does not define (5.2).
    UnknownOpcode(u8),
    /// RSV2 or RSV3 set, or RSV1 where [`Rules::rsv1`] does not allow it (5.2).
    ReservedBits,
    /// An unmasked frame where [`Rules::masked`] wants them masked (5.1).
    Unmasked,
    /// A masked frame where [`Rules::masked`] wants them unmasked (5.1).
    Masked,
    /// A control frame with more than 125 bytes of payload (5.5).
    ControlTooLong,
    /// A control frame without FIN (5.5).
    FragmentedControl,
    /// A message announcing more than [`Rules::max_payload`].
    TooLarge,
    /// Text that is not UTF-8 (8.1; found by [`decode`](crate::frame::decode) only).
    InvalidUtf8,
}

/// Why a batch ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// The next frame is not all in the buffer (or the buffer ended between frames).
    Incomplete,
    /// The output (or the count asked for) is full; more frames may follow.
    Full,
    /// The next frame breaks no rule but is not a whole, unfragmented, uncompressed text
    /// or binary message: a control frame, a fragment, a compressed message. The
    /// caller's decoder takes it from here.
    Other,
    /// The next frame breaks a rule.
    Invalid(Violation),
}

/// The outcome of [`scan_batch`](crate::frame::scan_batch) and [`decode`](crate::frame::decode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scanned {
    /// Whole messages found (and, by [`decode`](crate::frame::decode), decoded) at the front of the buffer.
    pub frames: usize,
    /// The bytes they take (headers and payloads); the next frame starts here.
    pub consumed: usize,
    /// Why the batch ended there.
    pub end: End,
}
