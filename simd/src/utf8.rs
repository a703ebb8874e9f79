//! UTF-8 validation: one-shot and streaming (across WebSocket fragments), fail-fast.

use crate::Backend;

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

/// Validates a complete UTF-8 string.
#[inline]
pub fn validate(buf: &[u8]) -> Result<(), Utf8Error> {
    core::str::from_utf8(buf).map(|_| ()).map_err(from_core)
}

/// [`validate`] with a chosen backend; `None` when the CPU or build lacks it.
pub fn validate_with(backend: Backend, buf: &[u8]) -> Option<Result<(), Utf8Error>> {
    if !backend.is_available() {
        return None;
    }
    Some(validate(buf))
}

/// Streaming validator for a message that arrives in chunks.
///
/// Carries up to 3 bytes of an incomplete code point between chunks. An invalid sequence is
/// reported in the chunk where it first becomes certain (a prefix that can never complete is
/// an error at once); [`Validator::finish`] reports a code point left incomplete at the end.
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
    pub fn reset(&mut self) {
        *self = Self::new();
    }

    /// True when no code point is left incomplete.
    pub fn is_complete(&self) -> bool {
        self.partial_len == 0
    }

    /// Validates the next chunk of the message.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<(), Utf8Error> {
        self.feed_with(Backend::best(), chunk).unwrap_or(Ok(()))
    }

    /// [`Validator::feed`] with a chosen backend; `None` when the CPU or build lacks it.
    pub fn feed_with(
        &mut self,
        backend: Backend,
        mut chunk: &[u8],
    ) -> Option<Result<(), Utf8Error>> {
        if !backend.is_available() {
            return None;
        }
        // Complete the carried code point first.
        while self.partial_len > 0 && !chunk.is_empty() {
            self.partial[self.partial_len as usize] = chunk[0];
            self.partial_len += 1;
            chunk = &chunk[1..];
            match core::str::from_utf8(&self.partial[..self.partial_len as usize]) {
                Ok(_) => {
                    self.consumed += self.partial_len as usize;
                    self.partial_len = 0;
                }
                Err(e) if e.error_len().is_some() => {
                    return Some(Err(Utf8Error {
                        valid_up_to: self.consumed,
                        error_len: e.error_len().map(|n| n as u8),
                    }));
                }
                Err(_) => {}
            }
        }
        match core::str::from_utf8(chunk) {
            Ok(_) => {
                self.consumed += chunk.len();
                Some(Ok(()))
            }
            Err(e) => match e.error_len() {
                Some(n) => Some(Err(Utf8Error {
                    valid_up_to: self.consumed + e.valid_up_to(),
                    error_len: Some(n as u8),
                })),
                None => {
                    let tail = &chunk[e.valid_up_to()..];
                    self.partial[..tail.len()].copy_from_slice(tail);
                    self.partial_len = tail.len() as u8;
                    self.consumed += e.valid_up_to();
                    Some(Ok(()))
                }
            },
        }
    }

    /// Ends the message: an incomplete code point left over is an error. Resets the validator.
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
/// result to `validator`, in one pass over the bytes where the backend allows.
pub fn unmask_validate(
    buf: &mut [u8],
    key: &mut [u8; 4],
    validator: &mut Validator,
) -> Result<(), Utf8Error> {
    crate::mask::apply(buf, key);
    validator.feed(buf)
}
