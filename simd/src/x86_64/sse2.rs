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

/// Whether `buf` (65 to 128 bytes) is all ASCII: the first and the last 64 bytes, eight
/// loads and one test, so that text which is ASCII about half the time (mostly-ASCII chat
/// at this size) pays one unpredictable branch, not two.
#[inline(always)]
pub(crate) fn is_ascii_65_128(buf: &[u8]) -> bool {
    let n = buf.len();
    if !(65..=128).contains(&n) {
        return buf.is_ascii();
    }
    let p = buf.as_ptr();
    // SAFETY: SSE2 as above; the loads cover `p .. p + 64` and `p + n - 64 .. p + n`,
    // inside `buf` since `n >= 64`.
    unsafe {
        let ld = |o: usize| _mm_loadu_si128(p.add(o).cast());
        let head = _mm_or_si128(_mm_or_si128(ld(0), ld(16)), _mm_or_si128(ld(32), ld(48)));
        let tail = _mm_or_si128(
            _mm_or_si128(ld(n - 64), ld(n - 48)),
            _mm_or_si128(ld(n - 32), ld(n - 16)),
        );
        _mm_movemask_epi8(_mm_or_si128(head, tail)) == 0
    }
}

/// Masks `buf` (16 to 64 bytes) in place at key phase 0 with two or four 16-byte
/// vectors and no loop (the scalar words take up to 7 steps and a loop exit that
/// mispredicts when lengths vary): half of them from the start, at phase 0, the other
/// half ending at the last byte, at the phase of `len`. Every vector is loaded before
/// any is stored, so where they overlap both store the same bytes.
#[inline(always)]
pub(crate) fn mask_16_64(buf: &mut [u8], key: [u8; 4]) {
    let n = buf.len();
    if !(16..=64).contains(&n) {
        crate::scalar::mask(buf, key);
        return;
    }
    let p = buf.as_mut_ptr();
    // The key at the phase of `n - 16` and `n - 32`: multiples of 4 apart from `n`.
    let tail_key = crate::scalar::rotated(key, n);
    // SAFETY: SSE2 as above. With `v` = 16 or 32 bytes per half (`n` up to 32 or 64),
    // the head vectors cover `p .. p + v` and the tail vectors `p + n - v .. p + n`, both
    // inside `buf` since `v <= n`.
    unsafe {
        let k0 = _mm_set1_epi32(i32::from_ne_bytes(key));
        let k1 = _mm_set1_epi32(i32::from_ne_bytes(tail_key));
        let ld = |o: usize, k: __m128i| _mm_xor_si128(_mm_loadu_si128(p.add(o).cast()), k);
        let st = |o: usize, v: __m128i| _mm_storeu_si128(p.add(o).cast(), v);
        if n <= 32 {
            let (a, z) = (ld(0, k0), ld(n - 16, k1));
            st(0, a);
            st(n - 16, z);
        } else {
            let (a, b) = (ld(0, k0), ld(16, k0));
            let (y, z) = (ld(n - 32, k1), ld(n - 16, k1));
            st(0, a);
            st(16, b);
            st(n - 32, y);
            st(n - 16, z);
        }
    }
}
