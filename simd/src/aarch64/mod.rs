//! aarch64 backends.
#[cfg(feature = "neon")]
pub(crate) mod neon;
