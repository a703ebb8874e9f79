//! One place that maps a [`Backend`] to its kernel. Callers pass only available backends
//! (checked with [`Backend::is_available`] or obtained from [`Backend::best`]).
//!
//! A backend that is not compiled in falls through to the scalar kernel; that arm is only
//! reachable if the precondition is broken, and even then computes the right result.

use crate::Backend;
use crate::scalar;

macro_rules! dispatch {
    ($backend:expr, $name:ident($($arg:expr),*), $scalar:expr) => {
        match $backend {
            #[cfg(all(target_arch = "x86_64", target_feature = "sse2", feature = "avx512"))]
            // SAFETY: the caller guarantees the backend is available (AVX-512F/BW present).
            Backend::Avx512 => unsafe { crate::x86_64::avx512::$name($($arg),*) },
            #[cfg(all(target_arch = "x86_64", target_feature = "sse2", feature = "avx2"))]
            // SAFETY: the caller guarantees the backend is available (AVX2 present).
            Backend::Avx2 => unsafe { crate::x86_64::avx2::$name($($arg),*) },
            #[cfg(all(target_arch = "aarch64", feature = "neon"))]
            // SAFETY: the caller guarantees the backend is available (NEON present).
            Backend::Neon => unsafe { crate::aarch64::neon::$name($($arg),*) },
            _ => $scalar,
        }
    };
}

/// Masks `buf` at key phase 0.
/// # Safety
/// `backend` must be available.
#[inline]
pub(crate) unsafe fn mask(backend: Backend, buf: &mut [u8], key: [u8; 4]) {
    dispatch!(backend, mask(buf, key), scalar::mask(buf, key))
}

/// `dst = src ^ key` at key phase 0.
/// # Safety
/// `backend` must be available; `dst.len() == src.len()`.
#[inline]
pub(crate) unsafe fn mask_copy(backend: Backend, dst: &mut [u8], src: &[u8], key: [u8; 4]) {
    dispatch!(
        backend,
        mask_copy(dst, src, key),
        scalar::mask_copy(dst, src, key)
    )
}

/// Whether `buf` is complete, valid UTF-8.
/// # Safety
/// `backend` must be available.
#[inline]
pub(crate) unsafe fn validate(backend: Backend, buf: &[u8]) -> bool {
    dispatch!(backend, validate(buf), core::str::from_utf8(buf).is_ok())
}

/// Unmasks `buf` (key phase 0) and reports whether it is complete, valid UTF-8.
/// # Safety
/// `backend` must be available.
#[inline]
pub(crate) unsafe fn unmask_validate(backend: Backend, buf: &mut [u8], key: [u8; 4]) -> bool {
    dispatch!(backend, unmask_validate(buf, key), {
        scalar::mask(buf, key);
        core::str::from_utf8(buf).is_ok()
    })
}
