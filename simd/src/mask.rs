//! RFC 6455 section 5.3 masking: `byte[i] ^= key[i % 4]`.
//!
//! The key is taken by `&mut [u8; 4]` and rotated by the number of bytes processed, so a
//! payload can be (un)masked in pieces as it arrives: masking `a` then `b` with the same
//! key variable equals masking `a ++ b` in one call.

use crate::Backend;

/// Masks (or unmasks: the operation is its own inverse) `buf` in place and advances `key`.
#[inline]
pub fn apply(buf: &mut [u8], key: &mut [u8; 4]) {
    scalar_apply(buf, key);
}

/// [`apply`] with a chosen backend; `None` when the CPU or build lacks it.
pub fn apply_with(backend: Backend, buf: &mut [u8], key: &mut [u8; 4]) -> Option<()> {
    if !backend.is_available() {
        return None;
    }
    scalar_apply(buf, key);
    Some(())
}

/// Copies `src` into `dst` masked, in one pass, and advances `key`.
///
/// # Panics
/// If `dst.len() != src.len()`.
#[inline]
pub fn copy(dst: &mut [u8], src: &[u8], key: &mut [u8; 4]) {
    assert_eq!(dst.len(), src.len(), "mask::copy: length mismatch");
    scalar_copy(dst, src, key);
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
    scalar_copy(dst, src, key);
    Some(())
}

fn scalar_apply(buf: &mut [u8], key: &mut [u8; 4]) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b ^= key[i & 3];
    }
    key.rotate_left(buf.len() & 3);
}

fn scalar_copy(dst: &mut [u8], src: &[u8], key: &mut [u8; 4]) {
    for (i, (d, s)) in dst.iter_mut().zip(src).enumerate() {
        *d = *s ^ key[i & 3];
    }
    key.rotate_left(src.len() & 3);
}
