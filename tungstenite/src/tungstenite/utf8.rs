//! [`Utf8Bytes`]: text known to be UTF-8, shared without a copy.

use std::fmt;

use bytes::{Bytes, BytesMut};

/// UTF-8 text held in [`Bytes`], as tungstenite's `Utf8Bytes`: cloned and passed on
/// without a copy. It is rapidws's own text type inside, so a text message goes to and
/// from the connection without being copied or validated again.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Utf8Bytes(pub(crate) rapidws::Utf8Bytes);

impl Utf8Bytes {
    /// Text from a static string, without a copy.
    #[inline]
    pub const fn from_static(s: &'static str) -> Self {
        Utf8Bytes(rapidws::Utf8Bytes::from_static(s))
    }

    /// The text.
    #[inline]
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// The rapidws text this wraps.
    #[inline]
    pub fn into_rapidws(self) -> rapidws::Utf8Bytes {
        self.0
    }
}

impl From<rapidws::Utf8Bytes> for Utf8Bytes {
    #[inline]
    fn from(t: rapidws::Utf8Bytes) -> Self {
        Utf8Bytes(t)
    }
}

impl From<Utf8Bytes> for rapidws::Utf8Bytes {
    #[inline]
    fn from(t: Utf8Bytes) -> Self {
        t.0
    }
}

impl std::ops::Deref for Utf8Bytes {
    type Target = str;
    #[inline]
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<[u8]> for Utf8Bytes {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl AsRef<str> for Utf8Bytes {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl std::borrow::Borrow<str> for Utf8Bytes {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl std::hash::Hash for Utf8Bytes {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl PartialOrd for Utf8Bytes {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Utf8Bytes {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

/// Comparisons with what a `&str` compares with (`&str`, `String`), as tungstenite's.
impl<T> PartialEq<T> for Utf8Bytes
where
    for<'a> &'a str: PartialEq<T>,
{
    fn eq(&self, other: &T) -> bool {
        self.as_str() == *other
    }
}

impl fmt::Display for Utf8Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Utf8Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl TryFrom<Bytes> for Utf8Bytes {
    type Error = std::str::Utf8Error;
    fn try_from(bytes: Bytes) -> Result<Self, Self::Error> {
        // The std error type is tungstenite's; rapidws's SIMD check runs first and std's
        // only on the error path, to build the error.
        match rapidws::Utf8Bytes::try_from_bytes(bytes) {
            Ok(t) => Ok(Utf8Bytes(t)),
            Err(e) => Err(utf8_error(e.as_bytes())),
        }
    }
}

/// std's error for bytes known not to be UTF-8.
fn utf8_error(bytes: &[u8]) -> std::str::Utf8Error {
    match std::str::from_utf8(bytes) {
        Err(e) => e,
        // rapidws and std agree on UTF-8, so this is not reached; an error is still needed.
        Ok(_) => match std::str::from_utf8(std::hint::black_box(&[0xff_u8][..])) {
            Err(e) => e,
            Ok(_) => unreachable!("0xff is never UTF-8"),
        },
    }
}

impl TryFrom<BytesMut> for Utf8Bytes {
    type Error = std::str::Utf8Error;
    fn try_from(bytes: BytesMut) -> Result<Self, Self::Error> {
        bytes.freeze().try_into()
    }
}

impl TryFrom<Vec<u8>> for Utf8Bytes {
    type Error = std::str::Utf8Error;
    fn try_from(v: Vec<u8>) -> Result<Self, Self::Error> {
        Bytes::from(v).try_into()
    }
}

impl From<String> for Utf8Bytes {
    #[inline]
    fn from(s: String) -> Self {
        Utf8Bytes(s.into())
    }
}

impl From<&str> for Utf8Bytes {
    #[inline]
    fn from(s: &str) -> Self {
        Utf8Bytes(s.into())
    }
}

impl From<&String> for Utf8Bytes {
    #[inline]
    fn from(s: &String) -> Self {
        Utf8Bytes(s.as_str().into())
    }
}

impl From<Utf8Bytes> for Bytes {
    #[inline]
    fn from(t: Utf8Bytes) -> Self {
        t.0.into_bytes()
    }
}
