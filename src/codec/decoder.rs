//! The incremental frame decoder.

use core::ops::Range;

use rapidws_simd::frame::{FrameHeader, HeaderError, parse_header};
use rapidws_simd::utf8::{self, Validator};

use super::{
    ControlKind, DEFAULT_MAX_FRAME_SIZE, DEFAULT_MAX_MESSAGE_SIZE, MAX_CONTROL_PAYLOAD,
    MessageKind, OpCode, ProtocolError, max_compressed_frame_size, parse_close_payload,
};
use crate::codec::Role;

/// Decoder settings.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct DecoderConfig {
    /// Which end decodes: a server requires masked frames, a client unmasked ones.
    pub role: Role,
    /// Largest frame payload accepted, checked against the header before any payload is
    /// buffered. A frame of a compressed message may carry up to
    /// [`max_compressed_frame_size`] of it (DEFLATE's worst-case expansion: a peer that
    /// compresses a whole message into one frame is not refused for it). Default 16 MiB.
    pub max_frame_size: usize,
    /// Largest message accepted, checked against each header as a fragmented message
    /// grows. For compressed messages the decoder does not check it: the limit applies to
    /// the inflated bytes, which only the inflater sees. Default 16 MiB.
    pub max_message_size: usize,
    /// Whether RSV1 may be set on the first frame of a data message (permessage-deflate
    /// was negotiated).
    pub rsv1_allowed: bool,
}

impl DecoderConfig {
    /// Defaults for `role`: 16 MiB frames, 16 MiB messages, no extension.
    pub fn new(role: Role) -> Self {
        DecoderConfig {
            role,
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            rsv1_allowed: false,
        }
    }
}

/// One step of [`Decoder::decode`]: how many bytes at the front of the buffer are done
/// with, and what they held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoded {
    /// Bytes at the start of the buffer the caller must drop before the next call. Any
    /// payload range in `item` lies inside them.
    pub consumed: usize,
    /// What was decoded; `None` when more bytes are needed (`consumed` may still be
    /// non-zero: a data frame header was read).
    pub item: Option<Item>,
}

/// What [`Decoder::decode_short`] found: a whole uncompressed data message in one frame,
/// unmasked and (for text) validated; the frame ends with the payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Short {
    /// Where the payload lies in the buffer passed to the decoder.
    pub(crate) payload: Range<usize>,
    pub(crate) kind: MessageKind,
}

impl Short {
    /// The same as [`Decoder::decode`] reports it.
    #[inline(always)]
    pub(crate) fn into_decoded(self) -> Decoded {
        whole_message(self.kind, false, self.payload)
    }
}

/// The kind of a data message: text (opcode 0x1) or binary.
#[inline(always)]
fn data_kind(text: bool) -> MessageKind {
    if text {
        MessageKind::Text
    } else {
        MessageKind::Binary
    }
}

/// The step of a whole message in one frame, its payload at `payload` (the frame ends
/// with it).
#[inline(always)]
fn whole_message(kind: MessageKind, compressed: bool, payload: Range<usize>) -> Decoded {
    Decoded {
        consumed: payload.end,
        item: Some(Item::Data(DataChunk {
            kind,
            compressed,
            payload,
            first: true,
            frame_end: true,
            message_end: true,
        })),
    }
}

/// What one [`Decoder::decode`] call found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// Payload bytes of a data message, already unmasked (and validated, for uncompressed text).
    Data(DataChunk),
    /// A whole control frame, unmasked and checked.
    Control(ControlFrame),
}

/// A run of a data message's payload, as much as had arrived.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataChunk {
    /// The message's kind (from its first frame).
    pub kind: MessageKind,
    /// Whether the message is compressed (RSV1 on its first frame).
    pub compressed: bool,
    /// Where the payload lies in the buffer passed to [`Decoder::decode`].
    pub payload: Range<usize>,
    /// The first chunk of the message.
    pub first: bool,
    /// The last chunk of its frame.
    pub frame_end: bool,
    /// The last chunk of the message (its frame has FIN).
    pub message_end: bool,
}

/// A control frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlFrame {
    /// Close, ping or pong.
    pub kind: ControlKind,
    /// Where the (unmasked) payload lies in the buffer passed to [`Decoder::decode`]. For a
    /// close, it has been checked by [`super::parse_close_payload`].
    pub payload: Range<usize>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FrameState {
    remaining: u64,
    key: Option<[u8; 4]>,
    fin: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct MessageState {
    kind: MessageKind,
    compressed: bool,
    /// Payload bytes announced so far (uncompressed messages only).
    total: u64,
    /// A chunk of this message has been returned.
    started: bool,
}

/// An incremental RFC 6455 frame decoder.
///
/// Call [`Decoder::decode`] with the unconsumed received bytes (starting where the last
/// call's `consumed` ended) until it returns no item; feed it more bytes and repeat. The
/// result does not depend on how the stream was split into calls, except that data payload
/// may come in more, smaller chunks.
///
/// ```
/// use rapidws::Role;
/// use rapidws::codec::{Decoder, DecoderConfig, Encoder, Item, MessageKind, OpCode};
///
/// // A client's text frame: masked, as RFC 6455 5.1 requires.
/// let mut wire = Vec::new();
/// Encoder::new(Role::Client).encode_into(true, false, OpCode::Text, b"hello", &mut wire)?;
///
/// // A server decodes it as it arrives, 4 bytes at a time.
/// let mut decoder = Decoder::new(DecoderConfig::new(Role::Server));
/// let (mut received, mut text) = (Vec::new(), Vec::new());
/// for part in wire.chunks(4) {
///     received.extend_from_slice(part);
///     loop {
///         let step = decoder.decode(&mut received)?;
///         if let Some(Item::Data(chunk)) = &step.item {
///             assert_eq!(chunk.kind, MessageKind::Text);
///             // Unmasked and UTF-8-checked in place.
///             text.extend_from_slice(&received[chunk.payload.clone()]);
///         }
///         received.drain(..step.consumed);
///         if step.item.is_none() {
///             break; // more bytes needed
///         }
///     }
/// }
/// assert_eq!(text, b"hello");
/// assert!(!decoder.in_message());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Decoder {
    config: DecoderConfig,
    /// [`max_compressed_frame_size`] of the frame limit.
    max_compressed_frame: u64,
    frame: Option<FrameState>,
    message: Option<MessageState>,
    utf8: Validator,
    /// The MASK bit a frame must carry in this role (`0x80` for a server).
    mask_bit: u8,
    /// Largest payload [`short_whole`](Self::short_whole) takes: 65,535 (a 16-bit
    /// length), or a smaller limit.
    short_max: usize,
}

impl Decoder {
    /// A decoder at the start of a stream.
    pub fn new(config: DecoderConfig) -> Self {
        let short_max = config
            .max_frame_size
            .min(config.max_message_size)
            .min(usize::from(u16::MAX));
        Decoder {
            max_compressed_frame: max_compressed_frame_size(config.max_frame_size) as u64,
            mask_bit: if config.role == Role::Server { 0x80 } else { 0 },
            short_max,
            config,
            frame: None,
            message: None,
            utf8: Validator::new(),
        }
    }

    /// The settings in use.
    pub fn config(&self) -> &DecoderConfig {
        &self.config
    }

    /// The rules of the batch kernel (`rapidws_simd::frame::run`) for the frames this
    /// decoder takes: the role's masking, RSV1 when permessage-deflate is on (such a
    /// frame ends a batch either way), and payloads within both size limits.
    pub(crate) fn batch_rules(&self) -> rapidws_simd::frame::Rules {
        rapidws_simd::frame::Rules {
            masked: self.config.role == Role::Server,
            rsv1: self.config.rsv1_allowed,
            max_payload: self.config.max_frame_size.min(self.config.max_message_size) as u64,
        }
    }

    /// Allows or forbids RSV1 on data messages (once permessage-deflate is agreed).
    pub fn set_rsv1_allowed(&mut self, allowed: bool) {
        self.config.rsv1_allowed = allowed;
    }

    /// True when a data message is partly received.
    pub fn in_message(&self) -> bool {
        self.message.is_some()
    }

    /// Payload bytes of the data frame being decoded that have not been passed to
    /// [`decode`](Self::decode) yet, as announced by its header (already checked against
    /// [`DecoderConfig::max_frame_size`]); `None` between frames. An IO layer can size
    /// its next read with it.
    pub fn frame_remaining(&self) -> Option<u64> {
        self.frame.map(|f| f.remaining)
    }

    /// Decodes the next item from `buf`, unmasking payload in place.
    ///
    /// `buf` must start right after the bytes consumed by the previous call and hold the
    /// bytes that followed them unchanged (more may be appended). After an error the
    /// stream is unusable; the connection fails with the error's close code.
    #[inline]
    pub fn decode(&mut self, buf: &mut [u8]) -> Result<Decoded, ProtocolError> {
        match self.decode_short(buf) {
            Some(r) => r.map(Short::into_decoded),
            None => self.decode_long(buf),
        }
    }

    /// [`decode`](Self::decode) of the common frame alone (a whole unfragmented text or
    /// binary message, no message open, all in `buf`); `None` for every other case, which
    /// [`decode_long`](Self::decode_long) then decides. A caller that handles the two
    /// apart keeps this result in registers: joined with the general path's, which
    /// comes back through memory, it would go through memory too.
    #[inline(always)]
    pub(crate) fn decode_short(&mut self, buf: &mut [u8]) -> Option<Result<Short, ProtocolError>> {
        if self.frame.is_some() {
            return None;
        }
        let header = self.short_whole(buf)?;
        // Opcode 0x1: text.
        let text = header.opcode == 0x1;
        Some(
            self.whole_payload(buf, &header, text, false)
                .map(|payload| Short {
                    payload,
                    kind: data_kind(text),
                }),
        )
    }

    /// [`decode`](Self::decode) where [`decode_short`](Self::decode_short) said `None`.
    #[inline]
    pub(crate) fn decode_long(&mut self, buf: &mut [u8]) -> Result<Decoded, ProtocolError> {
        if self.frame.is_some() {
            return self.payload(buf, 0);
        }
        self.decode_frame(buf)
    }

    /// [`decode`](Self::decode) at the start of a frame, for every header: out of line,
    /// so that `decode` is the short path alone, inlined into its caller with its result
    /// in registers (callgrind, firehose `recv_ref` at 64 B: 21 instructions fewer a
    /// message than with the call).
    #[inline(never)]
    fn decode_frame(&mut self, buf: &mut [u8]) -> Result<Decoded, ProtocolError> {
        let header = match parse_header(buf) {
            Ok(Some(h)) => h,
            Ok(None) => {
                return Ok(Decoded {
                    consumed: 0,
                    item: None,
                });
            }
            // RFC 6455 5.2: "the most significant bit MUST be 0" in a 64-bit length.
            Err(HeaderError::LengthOverflow) => return Err(ProtocolError::LengthOverflow),
        };
        let opcode = self.check_frame(&header)?;
        if opcode.is_control() {
            let start = header.header_len as usize;
            let end = start + header.payload_len as usize;
            if buf.len() < end {
                // At most 139 bytes: wait for the whole frame, re-parsing its header then.
                return Ok(Decoded {
                    consumed: 0,
                    item: None,
                });
            }
            if let Some(mut key) = header.mask {
                rapidws_simd::mask::apply(&mut buf[start..end], &mut key);
            }
            let kind = match opcode {
                OpCode::Close => {
                    parse_close_payload(&buf[start..end])?;
                    ControlKind::Close
                }
                OpCode::Ping => ControlKind::Ping,
                _ => ControlKind::Pong,
            };
            return Ok(Decoded {
                consumed: end,
                item: Some(Item::Control(ControlFrame {
                    kind,
                    payload: start..end,
                })),
            });
        }
        let rsv1 = header.rsv & 0b100 != 0;
        let hlen = header.header_len as usize;
        if header.fin
            && self.message.is_none()
            && opcode != OpCode::Continuation
            && header.payload_len <= (buf.len() - hlen) as u64
        {
            return self.whole(buf, &header, opcode == OpCode::Text, rsv1);
        }
        match (opcode, &mut self.message) {
            // RFC 6455 5.4: continuation frames only inside a fragmented message, and "the
            // fragments of one message MUST NOT be interleaved" with another's.
            (OpCode::Continuation, None) => return Err(ProtocolError::UnexpectedContinuation),
            (OpCode::Continuation, Some(m)) => {
                if !m.compressed {
                    m.total += header.payload_len;
                    if m.total > self.config.max_message_size as u64 {
                        return Err(ProtocolError::MessageTooLarge);
                    }
                }
            }
            (_, Some(_)) => return Err(ProtocolError::ExpectedContinuation),
            (_, None) => {
                let kind = data_kind(opcode == OpCode::Text);
                if !rsv1 && header.payload_len > self.config.max_message_size as u64 {
                    return Err(ProtocolError::MessageTooLarge);
                }
                self.message = Some(MessageState {
                    kind,
                    compressed: rsv1,
                    total: header.payload_len,
                    started: false,
                });
            }
        }
        self.frame = Some(FrameState {
            remaining: header.payload_len,
            key: header.mask,
            fin: header.fin,
        });
        self.payload(&mut buf[hlen..], hlen)
    }

    /// The header of the most common frame, whole in `buf`, read and judged in a few
    /// byte comparisons: FIN, no RSV bit, text or binary, masked as the role requires,
    /// a 7- or 16-bit length within the limits, no message in progress. Every rule of
    /// [`check_frame`](Self::check_frame) and the message state holds for it; `None` for
    /// anything else, which the general path decides.
    #[inline(always)]
    fn short_whole(&self, buf: &[u8]) -> Option<FrameHeader> {
        let (&b0, &b1) = (buf.first()?, buf.get(1)?);
        // 0x81 or 0x82: FIN, RSV clear, text or binary.
        if b0.wrapping_sub(0x81) > 1 || b1 & 0x80 != self.mask_bit || self.message.is_some() {
            return None;
        }
        let code = b1 & 0x7F;
        let (len, at) = if code < 126 {
            (usize::from(code), 2)
        } else if code == 126 {
            let ext = buf.get(2..4)?;
            (usize::from(u16::from_be_bytes([ext[0], ext[1]])), 4)
        } else {
            return None;
        };
        if len > self.short_max {
            return None;
        }
        let (mask, header_len) = if self.mask_bit != 0 {
            let key = buf.get(at..at + 4)?;
            (Some([key[0], key[1], key[2], key[3]]), at + 4)
        } else {
            (None, at)
        };
        if buf.len() - header_len < len {
            return None;
        }
        Some(FrameHeader {
            fin: true,
            rsv: 0,
            opcode: b0 & 0x0F,
            mask,
            header_len: header_len as u8,
            payload_len: len as u64,
        })
    }

    /// The common case whole: an unfragmented data message (its header checked) whose
    /// frame is all in `buf`, with no message in progress. Unmasked and validated in place
    /// and handed out in one step, without the frame and message state the general path
    /// keeps between calls (a tenth of a small echo's decoding).
    #[inline(always)]
    fn whole(
        &mut self,
        buf: &mut [u8],
        header: &FrameHeader,
        text: bool,
        compressed: bool,
    ) -> Result<Decoded, ProtocolError> {
        let payload = self.whole_payload(buf, header, text, compressed)?;
        Ok(whole_message(data_kind(text), compressed, payload))
    }

    /// [`whole`](Self::whole)'s checks, unmasking and validation; where the payload lies
    /// in `buf` (the frame ends with it).
    #[inline(always)]
    fn whole_payload(
        &mut self,
        buf: &mut [u8],
        header: &FrameHeader,
        text: bool,
        compressed: bool,
    ) -> Result<Range<usize>, ProtocolError> {
        if !compressed && header.payload_len > self.config.max_message_size as u64 {
            return Err(ProtocolError::MessageTooLarge);
        }
        let start = header.header_len as usize;
        // The caller checked that the payload is in `buf`, so this is no larger than it.
        let end = start + header.payload_len as usize;
        let payload = &mut buf[start..end];
        if let Some(mut key) = header.mask {
            rapidws_simd::mask::apply(payload, &mut key);
        }
        // A whole message: one-shot validation (the streaming validator stays at rest).
        // Compressed text is validated after inflating.
        if text && !compressed {
            utf8::validate(payload).map_err(|_| ProtocolError::InvalidUtf8)?;
        }
        Ok(start..end)
    }

    /// The rules of RFC 6455 5.2-5.5 that one header decides on its own (everything but the
    /// fragmentation state and the message size): its opcode, on success.
    #[inline(always)]
    fn check_frame(&self, header: &FrameHeader) -> Result<OpCode, ProtocolError> {
        let opcode = OpCode::from_u8(header.opcode)
            // RFC 6455 5.2: "If an unknown opcode is received, the receiving endpoint MUST
            // _Fail the WebSocket Connection_."
            .ok_or(ProtocolError::UnknownOpcode(header.opcode))?;
        let rsv1 = header.rsv & 0b100 != 0;
        // RFC 6455 5.2: RSV1-3 "MUST be 0 unless an extension is negotiated that defines
        // meanings for non-zero values". RFC 7692 6: RSV1 is set on the first frame of a
        // compressed message only, never on control or continuation frames.
        if header.rsv & 0b011 != 0
            || (rsv1
                && !(self.config.rsv1_allowed && matches!(opcode, OpCode::Text | OpCode::Binary)))
        {
            return Err(ProtocolError::ReservedBits);
        }
        // RFC 6455 5.1: "a server MUST close the connection upon receiving a frame that is
        // not masked" and "a client MUST close a connection if it detects a masked frame".
        match (self.config.role, header.mask.is_some()) {
            (Role::Server, false) => return Err(ProtocolError::UnmaskedFrame),
            (Role::Client, true) => return Err(ProtocolError::MaskedFrame),
            _ => {}
        }
        if opcode.is_control() {
            // RFC 6455 5.5: "All control frames MUST have a payload length of 125 bytes or
            // less and MUST NOT be fragmented."
            if header.payload_len > MAX_CONTROL_PAYLOAD as u64 {
                return Err(ProtocolError::ControlFrameTooLong);
            }
            if !header.fin {
                return Err(ProtocolError::FragmentedControlFrame);
            }
        } else {
            // Limits come before any payload is held: a frame announcing more than we
            // accept is refused at its header. A compressed frame (RSV1 on the first, or
            // a continuation of a compressed message) may be larger than what it
            // inflates to; its bytes are inflated as they arrive, never held.
            let compressed = rsv1
                || (opcode == OpCode::Continuation && self.message.is_some_and(|m| m.compressed));
            let limit = if compressed {
                self.max_compressed_frame
            } else {
                self.config.max_frame_size as u64
            };
            if header.payload_len > limit {
                return Err(ProtocolError::FrameTooLarge);
            }
        }
        Ok(opcode)
    }

    /// Processes the payload of the current data frame at the start of `buf`; `offset` is
    /// where `buf` starts in the caller's buffer.
    fn payload(&mut self, buf: &mut [u8], offset: usize) -> Result<Decoded, ProtocolError> {
        let (Some(frame), Some(msg)) = (self.frame.as_mut(), self.message.as_mut()) else {
            unreachable_state();
            return Ok(Decoded {
                consumed: offset,
                item: None,
            });
        };
        let n = buf
            .len()
            .min(usize::try_from(frame.remaining).unwrap_or(usize::MAX));
        if n == 0 && frame.remaining != 0 {
            return Ok(Decoded {
                consumed: offset,
                item: None,
            });
        }
        let frame_end = frame.remaining == n as u64;
        let message_end = frame_end && frame.fin;
        let validate = msg.kind == MessageKind::Text && !msg.compressed;
        unmask_and_validate(
            &mut buf[..n],
            &mut frame.key,
            validate.then_some(&mut self.utf8),
            message_end,
        )?;
        frame.remaining -= n as u64;
        let chunk = DataChunk {
            kind: msg.kind,
            compressed: msg.compressed,
            payload: offset..offset + n,
            first: !msg.started,
            frame_end,
            message_end,
        };
        msg.started = true;
        if frame_end {
            self.frame = None;
        }
        if message_end {
            self.message = None;
        }
        Ok(Decoded {
            consumed: offset + n,
            item: Some(Item::Data(chunk)),
        })
    }
}

mod helpers;

use helpers::{unmask_and_validate, unreachable_state};

#[cfg(test)]
mod tests;
