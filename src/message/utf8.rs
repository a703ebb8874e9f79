//! Text that is known to be UTF-8, held in shared bytes.

use bytes::Bytes;

/// UTF-8 text held in [`Bytes`], so a text message is shared, not copied.
///
/// The bytes are validated when the value is built; [`Utf8Bytes::as_str`] checks again with
/// the standard library (this crate forbids `unsafe`), which for ASCII runs at memory speed.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Utf8Bytes(Bytes);

impl Utf8Bytes {
    /// Wraps `bytes` without a copy if they are valid UTF-8; otherwise the error says where
    /// the text broke and hands the bytes back.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use rapidws::Utf8Bytes;
    ///
    /// let text = Utf8Bytes::try_from_bytes(Bytes::from_static(b"caf\xc3\xa9")).unwrap();
    /// assert_eq!(text, "caf\u{e9}");
    ///
    /// let err = Utf8Bytes::try_from_bytes(Bytes::from_static(b"ab\xffcd")).unwrap_err();
    /// assert_eq!((err.valid_up_to(), err.error_len()), (2, Some(1)));
    /// assert_eq!(err.into_bytes(), &b"ab\xffcd"[..]);
    /// ```
    pub fn try_from_bytes(bytes: Bytes) -> Result<Self, FromUtf8Error> {
        match rapidws_simd::utf8::validate(&bytes) {
            Ok(()) => Ok(Utf8Bytes(bytes)),
            Err(error) => Err(FromUtf8Error { bytes, error }),
        }
    }

    /// Wraps bytes the codec has already validated as UTF-8.
    pub(crate) fn from_validated(bytes: Bytes) -> Self {
        debug_assert!(std::str::from_utf8(&bytes).is_ok());
        Utf8Bytes(bytes)
    }

    /// A static string, without copying.
    pub const fn from_static(s: &'static str) -> Self {
        Utf8Bytes(Bytes::from_static(s.as_bytes()))
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        // Validated on construction, so this cannot fail; it checks again because this
        // crate forbids `unsafe`, with the SIMD kernels (std's check of non-ASCII text runs
        // at a fraction of their speed).
        rapidws_simd::utf8::from_utf8(&self.0).unwrap_or_default()
    }

    /// The text's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The underlying buffer.
    pub fn into_bytes(self) -> Bytes {
        self.0
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the text is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::ops::Deref for Utf8Bytes {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl std::fmt::Debug for Utf8Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl std::fmt::Display for Utf8Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<String> for Utf8Bytes {
    fn from(s: String) -> Self {
        Utf8Bytes(Bytes::from(s))
    }
}

impl From<&str> for Utf8Bytes {
    fn from(s: &str) -> Self {
        Utf8Bytes(Bytes::copy_from_slice(s.as_bytes()))
    }
}

impl From<Utf8Bytes> for Bytes {
    fn from(s: Utf8Bytes) -> Bytes {
        s.0
    }
}

impl TryFrom<Bytes> for Utf8Bytes {
    type Error = FromUtf8Error;
    /// [`Utf8Bytes::try_from_bytes`].
    fn try_from(bytes: Bytes) -> Result<Self, FromUtf8Error> {
        Utf8Bytes::try_from_bytes(bytes)
    }
}

impl TryFrom<Vec<u8>> for Utf8Bytes {
    type Error = FromUtf8Error;
    /// Validates and wraps the vector without a copy.
    fn try_from(bytes: Vec<u8>) -> Result<Self, FromUtf8Error> {
        Utf8Bytes::try_from_bytes(Bytes::from(bytes))
    }
}

/// Bytes that are not valid UTF-8, from [`Utf8Bytes::try_from_bytes`] and
/// [`Message::into_text`](super::Message::into_text): where the text broke, and the bytes, handed back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FromUtf8Error {
    bytes: Bytes,
    error: rapidws_simd::utf8::Utf8Error,
}

impl FromUtf8Error {
    /// Bytes of the input that were valid UTF-8 before the error (as
    /// [`std::str::Utf8Error::valid_up_to`]).
    pub fn valid_up_to(&self) -> usize {
        self.error.valid_up_to()
    }

    /// Length of the invalid sequence at [`valid_up_to`](Self::valid_up_to), or `None` when
    /// the input ended inside a code point (as [`std::str::Utf8Error::error_len`]).
    pub fn error_len(&self) -> Option<usize> {
        self.error.error_len()
    }

    /// The bytes that were refused.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The bytes that were refused, without a copy.
    pub fn into_bytes(self) -> Bytes {
        self.bytes
    }
}

impl std::fmt::Display for FromUtf8Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for FromUtf8Error {}

impl PartialEq<str> for Utf8Bytes {
    fn eq(&self, other: &str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<&str> for Utf8Bytes {
    fn eq(&self, other: &&str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<String> for Utf8Bytes {
    fn eq(&self, other: &String) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<Utf8Bytes> for str {
    fn eq(&self, other: &Utf8Bytes) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<Utf8Bytes> for &str {
    fn eq(&self, other: &Utf8Bytes) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<Utf8Bytes> for String {
    fn eq(&self, other: &Utf8Bytes) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}
