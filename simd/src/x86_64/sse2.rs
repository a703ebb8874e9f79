//! SSE2 paths for short inputs, inlined into the public entries before any dispatch.
//! SSE2 is part of every x86_64 target, so they need no detection and no
//! `#[target_feature]` function.

use core::arch::x86_64::*;

/// Whether `buf` (16 to 64 bytes) is all ASCII: one OR of up to four overlapping loads.
#[inline(always)]
pub(crate) fn is_ascii_16_64(buf: &[u8]) -> bool {
    let n = buf.len();
    if !(16..=64).contains(&n) {
        return buf.is_ascii();
    }
    let p = buf.as_ptr();
    // SAFETY: SSE2 as above; the loads cover `p .. p + 16`, `p + n - 16 .. p + n` and,
    // for `n > 32`, `p + 16 .. p + 32` and `p + n - 32 .. p + n - 16`, all inside `buf`.
    unsafe {
        let mut v = _mm_or_si128(
            _mm_loadu_si128(p.cast()),
            _mm_loadu_si128(p.add(n - 16).cast()),
        );
        if n > 32 {
            v = _mm_or_si128(v, _mm_loadu_si128(p.add(16).cast()));
            v = _mm_or_si128(v, _mm_loadu_si128(p.add(n - 32).cast()));
        }
        _mm_movemask_epi8(v) == 0
    }
}
