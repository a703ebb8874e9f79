//! The decoder's small pieces: unmasking with validation, the impossible state.

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

/// `frame` is only ever set together with `message`; this keeps the impossible case
/// panic-free in release builds.
#[inline]
pub(super) fn unreachable_state() {
    debug_assert!(false, "decoder frame state without a message");
}
