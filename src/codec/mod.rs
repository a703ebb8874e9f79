//! WebSocket frames (RFC 6455 section 5): an incremental [`Decoder`] and an [`Encoder`].
//!
//! The decoder works on a caller-owned, mutable receive buffer. It parses a header as soon
//! as its bytes are there, then unmasks (and, for text, UTF-8-validates) the payload in
//! place while it arrives, so a frame is never rescanned and a bad text message fails at
//! the first chunk where the error is certain. A whole single-frame message is checked,
//! unmasked and validated in one step, one frame per call: scanning the headers of a
//! burst of frames first ([`rapidws_simd::frame::scan`]) measured slower. Every protocol
//! rule of RFC 6455 section 5 is enforced here, frame by frame, and each violation is a
//! [`ProtocolError`] that maps to its close code.
//!
//! The encoder makes a header of at most 14 bytes in a fixed array ([`HeaderBuf`], no
//! allocation) and leaves the payload where it is, so an IO layer can send header and
//! payload in one vectored write.

mod decoder;
mod encoder;

pub(crate) use decoder::Short;
pub use decoder::{ControlFrame, DataChunk, Decoded, Decoder, DecoderConfig, Item};
pub(crate) use encoder::header_len;
pub use encoder::{Encoder, HeaderBuf, MaskKeys, RandomError, encode_header};

use core::fmt;

/// Default largest frame payload accepted: 16 MiB.
pub const DEFAULT_MAX_FRAME_SIZE: usize = 16 << 20;
/// Default largest message accepted (after inflation when compressed): 16 MiB.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 16 << 20;
/// Largest control frame payload (RFC 6455 5.5).
pub const MAX_CONTROL_PAYLOAD: usize = 125;

/// The most payload bytes a compressed (permessage-deflate) data frame may announce when
/// uncompressed frames may announce `max_frame_size`: `max_frame_size` plus DEFLATE's
/// worst-case expansion of that many bytes, so that a peer compressing a message within
/// the limits into one frame is never refused for the frame's size.
///
/// DEFLATE does not always shrink: incompressible data grows by a stored block's 5-byte
/// header per block (zlib makes a block per 2 KiB at memory level 5, as Python
/// `websockets` sets it, and per 128 bytes at memory level 1: up to 4 %), or by the 9-bit
/// fixed-Huffman codes of the bytes 144-255 (zlib-rs's level-1 strategy: 5.5 % on random
/// bytes, 12.5 % at worst). The allowance is zlib's own bound for any settings
/// (`deflateBound`: `n + n/8 + n/256 + n/512 + 4`), plus 64 bytes for the empty block that
/// ends a flush: 13.1 % more, 18.1 MiB for the default 16 MiB.
///
/// Memory does not follow the frame size here: compressed bytes are inflated as they
/// arrive and not kept, and what the inflater produces is bounded by the message limit.
///
/// ```
/// use rapidws::codec::max_compressed_frame_size;
///
/// assert_eq!(max_compressed_frame_size(16 << 20), 18_972_740);
/// // Python `websockets` sent 16 MiB of random bytes as one frame of 16,818,182 bytes.
/// assert!(max_compressed_frame_size(16 << 20) > 16_818_182);
/// ```
pub const fn max_compressed_frame_size(max_frame_size: usize) -> usize {
    let n = max_frame_size;
    n.saturating_add(n >> 3)
        .saturating_add(n >> 8)
        .saturating_add(n >> 9)
        .saturating_add(4 + 64)
}
/// Largest frame header: 2 bytes, 8 bytes of extended length, 4 bytes of mask key.
pub const MAX_HEADER_LEN: usize = 14;

/// Which end of the connection this is. Clients mask what they send; servers require it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// The end that sent the upgrade request.
    Client,
    /// The end that accepted it.
    Server,
}

/// A frame opcode (RFC 6455 5.2). Reserved opcodes are refused by the decoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpCode {
    /// 0x0: continues a fragmented data message.
    Continuation,
    /// 0x1: first frame of a text message.
    Text,
    /// 0x2: first frame of a binary message.
    Binary,
    /// 0x8: close.
    Close,
    /// 0x9: ping.
    Ping,
    /// 0xA: pong.
    Pong,
}

impl OpCode {
    /// The opcode for its 4-bit wire value; `None` for reserved values.
    pub fn from_u8(v: u8) -> Option<OpCode> {
        Some(match v {
            0x0 => OpCode::Continuation,
            0x1 => OpCode::Text,
            0x2 => OpCode::Binary,
            0x8 => OpCode::Close,
            0x9 => OpCode::Ping,
            0xA => OpCode::Pong,
            _ => return None,
        })
    }

    /// The 4-bit wire value.
    pub fn as_u8(self) -> u8 {
        match self {
            OpCode::Continuation => 0x0,
            OpCode::Text => 0x1,
            OpCode::Binary => 0x2,
            OpCode::Close => 0x8,
            OpCode::Ping => 0x9,
            OpCode::Pong => 0xA,
        }
    }

    /// True for close, ping and pong.
    pub fn is_control(self) -> bool {
        self.as_u8() & 0x8 != 0
    }
}

/// The kind of a data message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MessageKind {
    /// UTF-8 text (validated on receipt).
    Text,
    /// Arbitrary bytes.
    Binary,
}

impl MessageKind {
    /// The opcode of the message's first frame.
    pub fn opcode(self) -> OpCode {
        match self {
            MessageKind::Text => OpCode::Text,
            MessageKind::Binary => OpCode::Binary,
        }
    }
}

/// The kind of a control frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ControlKind {
    /// Close (0x8).
    Close,
    /// Ping (0x9).
    Ping,
    /// Pong (0xA).
    Pong,
}

/// A close status code (RFC 6455 7.4).
///
/// Every code in the IANA "WebSocket Close Code Number Registry" (RFC 6455 7.4.1 and
/// 11.7) has a named constant. Codes 3000-3999 are registered with IANA by libraries and
/// frameworks, 4000-4999 are for private use between applications (RFC 6455 7.4.2):
/// `CloseCode(4001)`, or `4001` wherever a close takes `impl Into<CloseCode>`.
///
/// Which codes may travel in a close frame is [`is_valid_on_wire`](Self::is_valid_on_wire):
/// a close frame received with another code fails the connection with a protocol error
/// (1002), and a `close` with one is refused. [`NO_STATUS`](Self::NO_STATUS),
/// [`ABNORMAL`](Self::ABNORMAL) and [`TLS`](Self::TLS) are never sent: they name what
/// happened when no code could be read.
///
/// ```
/// use rapidws::CloseCode;
///
/// assert_eq!(CloseCode::NORMAL, 1000);
/// assert!(CloseCode::GOING_AWAY.is_valid_on_wire());
/// assert!(!CloseCode::ABNORMAL.is_valid_on_wire());
/// assert!(CloseCode(4000).is_valid_on_wire());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CloseCode(pub u16);

impl CloseCode {
    /// 1000, Normal Closure: the purpose of the connection has been fulfilled
    /// (RFC 6455 7.4.1).
    pub const NORMAL: CloseCode = CloseCode(1000);
    /// 1001, Going Away: the endpoint is going away, a server going down or a browser
    /// leaving the page (RFC 6455 7.4.1).
    pub const GOING_AWAY: CloseCode = CloseCode(1001);
    /// 1002, Protocol Error: the peer broke the protocol (RFC 6455 7.4.1).
    pub const PROTOCOL: CloseCode = CloseCode(1002);
    /// 1003, Unsupported Data: a data type the endpoint cannot accept, such as binary for
    /// a text-only endpoint (RFC 6455 7.4.1).
    pub const UNSUPPORTED: CloseCode = CloseCode(1003);
    /// 1005, No Status Rcvd: the close frame carried no code (RFC 6455 7.4.1). Never sent;
    /// [`CloseFrame`](crate::CloseFrame)s that the peer sent without a code report it.
    pub const NO_STATUS: CloseCode = CloseCode(1005);
    /// 1006, Abnormal Closure: the connection ended without a close frame (RFC 6455 7.4.1,
    /// 7.1.5). Never sent; here such an end is an `UnexpectedEof` IO error.
    pub const ABNORMAL: CloseCode = CloseCode(1006);
    /// 1007, Invalid frame payload data: data inconsistent with the message type, such as
    /// invalid UTF-8 in text (RFC 6455 7.4.1).
    pub const INVALID_DATA: CloseCode = CloseCode(1007);
    /// 1008, Policy Violation: a message broke the endpoint's policy, when no other code
    /// fits (RFC 6455 7.4.1).
    pub const POLICY: CloseCode = CloseCode(1008);
    /// 1009, Message Too Big (RFC 6455 7.4.1).
    pub const TOO_BIG: CloseCode = CloseCode(1009);
    /// 1010, Mandatory Ext.: the client expected an extension the server did not agree to
    /// (RFC 6455 7.4.1).
    pub const EXTENSION: CloseCode = CloseCode(1010);
    /// 1011, Internal Error: the server met an unexpected condition (RFC 6455 7.4.1).
    pub const INTERNAL: CloseCode = CloseCode(1011);
    /// 1012, Service Restart: the service is restarting; a client may reconnect, after a
    /// randomized delay (IANA registry).
    pub const SERVICE_RESTART: CloseCode = CloseCode(1012);
    /// 1013, Try Again Later: the service is overloaded; a client may reconnect later
    /// (IANA registry). Also what a server sends a consumer it sheds for falling behind.
    pub const TRY_AGAIN_LATER: CloseCode = CloseCode(1013);
    /// 1014, Bad Gateway: a gateway or proxy got an invalid response from the upstream
    /// server (IANA registry).
    pub const BAD_GATEWAY: CloseCode = CloseCode(1014);
    /// 1015, TLS handshake: the TLS handshake failed (RFC 6455 7.4.1). Never sent.
    pub const TLS: CloseCode = CloseCode(1015);

    /// Whether this code may appear in a close frame on the wire (RFC 6455 7.4.1, 7.4.2):
    /// 1000-1003, 1007-1011, 1012-1014 (added to the IANA registry that RFC 6455 11.7
    /// set up), and the registered/private range 3000-4999. 1004-1006 and 1015 are
    /// reserved and MUST NOT be sent; everything else is unassigned.
    pub fn is_valid_on_wire(self) -> bool {
        matches!(self.0, 1000..=1003 | 1007..=1014 | 3000..=4999)
    }
}

impl From<u16> for CloseCode {
    fn from(v: u16) -> Self {
        CloseCode(v)
    }
}

impl From<CloseCode> for u16 {
    fn from(c: CloseCode) -> u16 {
        c.0
    }
}

impl PartialEq<u16> for CloseCode {
    fn eq(&self, other: &u16) -> bool {
        self.0 == *other
    }
}

impl fmt::Display for CloseCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A received frame that breaks RFC 6455. Each maps to the close code the connection
/// sends before failing ([`ProtocolError::close_code`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProtocolError {
    /// A reserved bit set that no negotiated extension defines.
    ReservedBits,
    /// A reserved opcode.
    UnknownOpcode(u8),
    /// A control frame with more than 125 bytes of payload.
    ControlFrameTooLong,
    /// A control frame without FIN.
    FragmentedControlFrame,
    /// A continuation frame with no message in progress.
    UnexpectedContinuation,
    /// A text or binary frame while a fragmented message is in progress.
    ExpectedContinuation,
    /// An unmasked frame sent to a server.
    UnmaskedFrame,
    /// A masked frame sent to a client.
    MaskedFrame,
    /// A 64-bit payload length with its most significant bit set.
    LengthOverflow,
    /// A close frame with a 1-byte payload.
    InvalidClosePayload,
    /// A close frame with a code that may not be sent.
    InvalidCloseCode(u16),
    /// A text message or close reason that is not UTF-8.
    InvalidUtf8,
    /// A frame larger than the configured maximum frame size (for a compressed frame, than
    /// [`max_compressed_frame_size`] of it).
    FrameTooLarge,
    /// A message larger than the configured maximum message size.
    MessageTooLarge,
}

impl ProtocolError {
    /// The close code to send for this error: 1007 for bad UTF-8, 1009 for size limits,
    /// 1002 for everything else.
    pub fn close_code(&self) -> CloseCode {
        match self {
            ProtocolError::InvalidUtf8 => CloseCode::INVALID_DATA,
            ProtocolError::FrameTooLarge | ProtocolError::MessageTooLarge => CloseCode::TOO_BIG,
            _ => CloseCode::PROTOCOL,
        }
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtocolError::ReservedBits => f.write_str("reserved bits set without an extension"),
            ProtocolError::UnknownOpcode(op) => write!(f, "reserved opcode {op:#x}"),
            ProtocolError::ControlFrameTooLong => f.write_str("control frame over 125 bytes"),
            ProtocolError::FragmentedControlFrame => f.write_str("fragmented control frame"),
            ProtocolError::UnexpectedContinuation => {
                f.write_str("continuation frame without a message in progress")
            }
            ProtocolError::ExpectedContinuation => {
                f.write_str("new data frame inside a fragmented message")
            }
            ProtocolError::UnmaskedFrame => f.write_str("unmasked frame from a client"),
            ProtocolError::MaskedFrame => f.write_str("masked frame from a server"),
            ProtocolError::LengthOverflow => f.write_str("payload length has its high bit set"),
            ProtocolError::InvalidClosePayload => f.write_str("close frame with a 1-byte payload"),
            ProtocolError::InvalidCloseCode(c) => write!(f, "invalid close code {c}"),
            ProtocolError::InvalidUtf8 => f.write_str("invalid UTF-8 in text"),
            ProtocolError::FrameTooLarge => f.write_str("frame exceeds the size limit"),
            ProtocolError::MessageTooLarge => f.write_str("message exceeds the size limit"),
        }
    }
}

impl std::error::Error for ProtocolError {}

/// Checks a received close payload (RFC 6455 5.5.1, 7.4): empty, or a valid code
/// followed by a UTF-8 reason. Returns the code, if any.
pub fn parse_close_payload(payload: &[u8]) -> Result<Option<(CloseCode, &str)>, ProtocolError> {
    match payload.len() {
        0 => Ok(None),
        // RFC 6455 5.5.1: "If there is a body, the first two bytes of the body MUST be a
        // 2-byte unsigned integer ... representing a status code"; one byte cannot be one.
        1 => Err(ProtocolError::InvalidClosePayload),
        _ => {
            let code = CloseCode(u16::from_be_bytes([payload[0], payload[1]]));
            if !code.is_valid_on_wire() {
                return Err(ProtocolError::InvalidCloseCode(code.0));
            }
            // RFC 6455 5.5.1: the reason "is not guaranteed to be human readable" but it
            // is UTF-8-encoded data; 8.1 makes invalid UTF-8 a failure.
            let reason =
                core::str::from_utf8(&payload[2..]).map_err(|_| ProtocolError::InvalidUtf8)?;
            Ok(Some((code, reason)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registered_close_code_has_its_number_and_wire_rule() {
        // The IANA WebSocket Close Code Number Registry, 1000-1015, and whether a close
        // frame may carry each code here.
        let registry = [
            (CloseCode::NORMAL, 1000, true),
            (CloseCode::GOING_AWAY, 1001, true),
            (CloseCode::PROTOCOL, 1002, true),
            (CloseCode::UNSUPPORTED, 1003, true),
            (CloseCode::NO_STATUS, 1005, false),
            (CloseCode::ABNORMAL, 1006, false),
            (CloseCode::INVALID_DATA, 1007, true),
            (CloseCode::POLICY, 1008, true),
            (CloseCode::TOO_BIG, 1009, true),
            (CloseCode::EXTENSION, 1010, true),
            (CloseCode::INTERNAL, 1011, true),
            (CloseCode::SERVICE_RESTART, 1012, true),
            (CloseCode::TRY_AGAIN_LATER, 1013, true),
            (CloseCode::BAD_GATEWAY, 1014, true),
            (CloseCode::TLS, 1015, false),
        ];
        for (code, number, on_wire) in registry {
            assert_eq!(code, number);
            assert_eq!(code.is_valid_on_wire(), on_wire, "{code}");
            let payload = number.to_be_bytes();
            assert_eq!(parse_close_payload(&payload).is_ok(), on_wire, "{code}");
        }
        assert!(!CloseCode(1004).is_valid_on_wire());
        assert!(CloseCode(3000).is_valid_on_wire() && CloseCode(4999).is_valid_on_wire());
        assert!(!CloseCode(2999).is_valid_on_wire() && !CloseCode(5000).is_valid_on_wire());
    }
}
