//! x86_64 backends.
#[cfg(feature = "avx2")]
pub(crate) mod avx2;
#[cfg(feature = "avx512")]
pub(crate) mod avx512;
pub(crate) mod sse2;
