//! The decoder's small pieces: unmasking with validation, a batched frame's extent,
//! frame sizes.

use super::*;

/// Unmasks a piece of a data frame's payload with `key` (its phase advanced for the next
/// piece) and feeds it to the message's UTF-8 validator, if the message is validated here;
/// `message_end` ends the message's validation.
#[inline(always)]
pub(super) fn unmask_and_validate(
    chunk: &mut [u8],
    key: &mut Option<[u8; 4]>,
    mut utf8: Option<&mut Validator>,
    message_end: bool,
) -> Result<(), ProtocolError> {
    match (key, utf8.as_deref_mut()) {
        (Some(key), Some(v)) => {
            utf8::unmask_validate(chunk, key, v).map_err(|_| ProtocolError::InvalidUtf8)?
        }
        (Some(key), None) => rapidws_simd::mask::apply(chunk, key),
        (None, Some(v)) => v.feed(chunk).map_err(|_| ProtocolError::InvalidUtf8)?,
        (None, None) => {}
    }
    if message_end && let Some(v) = utf8 {
        // RFC 6455 8.1: a text message ending inside a code point is invalid.
        v.finish().map_err(|_| ProtocolError::InvalidUtf8)?;
    }
    Ok(())
}

/// What a batched frame needs done to its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Batched {
    /// Uncompressed text: unmask and validate.
    Text,
    /// Binary or compressed data: unmask only.
    Opaque,
    /// Ping or pong: unmask only.
    Control,
}

/// The first byte, payload start and payload end of the complete frame at the start of
/// `buf`, for a header a batch has already parsed and checked; `None` if it is not all there.
#[inline(always)]
pub(super) fn batched_extent(buf: &[u8]) -> Option<(u8, usize, usize)> {
    let (&b0, rest) = buf.split_first()?;
    let &b1 = rest.first()?;
    let mask = usize::from(b1 >> 7) * 4;
    let (start, len) = match b1 & 0x7f {
        126 => (
            4 + mask,
            usize::from(u16::from_be_bytes([*buf.get(2)?, *buf.get(3)?])),
        ),
        127 => {
            let b: [u8; 8] = buf.get(2..10)?.try_into().ok()?;
            (10 + mask, usize::try_from(u64::from_be_bytes(b)).ok()?)
        }
        n => (2 + mask, usize::from(n)),
    };
    let end = start.checked_add(len)?;
    (end <= buf.len()).then_some((b0, start, end))
}

/// Header plus payload length of a frame.
#[inline]
pub(super) fn frame_size(h: &FrameHeader) -> u64 {
    u64::from(h.header_len) + h.payload_len
}

/// The OR of all bytes: its high bit is clear exactly when every byte is ASCII.
#[inline]
pub(super) fn or_bytes(buf: &[u8]) -> u8 {
    let mut words = buf.chunks_exact(8);
    let mut acc = 0u64;
    for w in &mut words {
        acc |= u64::from_ne_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
    }
    let mut b = words.remainder().iter().fold(0u8, |a, &x| a | x);
    for byte in acc.to_ne_bytes() {
        b |= byte;
    }
    b
}

/// `frame` is only ever set together with `message`; this keeps the impossible case
/// panic-free in release builds.
#[inline]
pub(super) fn unreachable_state() {
    debug_assert!(false, "decoder frame state without a message");
}
