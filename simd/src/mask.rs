//! RFC 6455 section 5.3 masking: `byte[i] ^= key[i % 4]`.
//!
//! The key is taken by `&mut [u8; 4]` and rotated by the number of bytes processed, so a
//! payload can be (un)masked in pieces as it arrives: masking `a` then `b` with the same
//! key variable equals masking `a ++ b` in one call.

use crate::{Backend, dispatch, scalar};

/// Below this many bytes the inlined scalar words (at most 7 steps plus one overlapping
/// word; on x86_64 from 16 bytes the SSE2 vectors) beat any dispatch.
const SMALL: usize = 64;

/// On x86_64, inputs of 16 bytes up to this many take the inlined SSE2 vectors
/// (`x86_64::sse2::mask_16_64`) instead: two or four vectors, no loop and no call (at
/// 64 bytes 2.6-2.7 ns a call against the AVX-512 kernel's 3.4 through the cached
/// pointer, Intel VM). Above it the dispatched kernel is as fast as eight such vectors
/// (one or two 64-byte vectors on AVX-512, 3.3-3.6 ns at 128 bytes either way).
#[cfg(all(
    target_arch = "x86_64",
    target_feature = "sse2",
    any(feature = "avx2", feature = "avx512")
))]
const SSE2_MAX: usize = 64;

/// Masks (or unmasks: the operation is its own inverse) `buf` in place and advances `key`.
#[inline]
pub fn apply(buf: &mut [u8], key: &mut [u8; 4]) {
    #[cfg(all(
        target_arch = "x86_64",
        target_feature = "sse2",
        any(feature = "avx2", feature = "avx512")
    ))]
    if (16..=SSE2_MAX).contains(&buf.len()) {
        crate::x86_64::sse2::mask_16_64(buf, *key);
        *key = scalar::rotated(*key, buf.len());
        return;
    }
    if buf.len() < SMALL {
        scalar::mask(buf, *key);
    } else {
        dispatch::mask_auto(buf, *key);
    }
    *key = scalar::rotated(*key, buf.len());
}

/// [`apply`] with a chosen backend; `None` when the CPU or build lacks it.
pub fn apply_with(backend: Backend, buf: &mut [u8], key: &mut [u8; 4]) -> Option<()> {
    if !backend.is_available() {
        return None;
    }
    // SAFETY: availability checked just above.
    unsafe { dispatch::mask(backend, buf, *key) };
    *key = scalar::rotated(*key, buf.len());
    Some(())
}

/// Copies `src` into `dst` masked, in one pass, and advances `key`.
///
/// # Panics
/// If `dst.len() != src.len()`.
#[inline]
pub fn copy(dst: &mut [u8], src: &[u8], key: &mut [u8; 4]) {
    assert_eq!(dst.len(), src.len(), "mask::copy: length mismatch");
    if src.len() < SMALL {
        scalar::mask_copy(dst, src, *key);
    } else {
        copy_dispatch(dst, src, *key);
    }
    *key = scalar::rotated(*key, src.len());
}

#[inline(never)]
fn copy_dispatch(dst: &mut [u8], src: &[u8], key: [u8; 4]) {
    // SAFETY: `best()` only returns available backends; the caller checked the lengths.
    unsafe { dispatch::mask_copy(Backend::best(), dst, src, key) }
}

/// [`copy`] with a chosen backend; `None` when the CPU or build lacks it.
///
/// # Panics
/// If `dst.len() != src.len()`.
pub fn copy_with(backend: Backend, dst: &mut [u8], src: &[u8], key: &mut [u8; 4]) -> Option<()> {
    assert_eq!(dst.len(), src.len(), "mask::copy_with: length mismatch");
    if !backend.is_available() {
        return None;
    }
    // SAFETY: availability and lengths checked just above.
    unsafe { dispatch::mask_copy(backend, dst, src, *key) };
    *key = scalar::rotated(*key, src.len());
    Some(())
}
