//! AVX2 instantiation of the generic kernels (32-byte vectors).

use core::arch::x86_64::*;

use crate::generic::{self, Vector};

/// Shuffle indices for [`Vector::load_partial`]: 16 bytes from offset `s` pick byte
/// `j + s` while that is below 16, and 0 (index with bit 7 set) after.
static SHIFT: [u8; 32] = {
    let mut t = [0x80; 32];
    let mut i = 0;
    while i < 16 {
        t[i] = i as u8;
        i += 1;
    }
    t
};

/// `len < 16` bytes at `p` as two little-endian words, zero-filled, without a byte loop
/// for `len >= 4`: the bytes past 8 (or past 4) come from a word ending at `p + len`,
/// shifted down.
/// # Safety
/// `p..p+len` must be readable.
#[inline(always)]
unsafe fn words_partial(p: *const u8, len: usize) -> [u64; 2] {
    // SAFETY: every read below lies inside `p..p+len` by the branch conditions.
    unsafe {
        let rd8 = |i: usize| u64::from_le(p.add(i).cast::<u64>().read_unaligned());
        let rd4 = |i: usize| u64::from(u32::from_le(p.add(i).cast::<u32>().read_unaligned()));
        if len >= 8 {
            let hi = if len > 8 {
                rd8(len - 8) >> (8 * (16 - len))
            } else {
                0
            };
            [rd8(0), hi]
        } else if len >= 4 {
            // Bytes 4..len from the u32 ending at `len`; for `len == 4` it is `p[..4]`
            // again, shifted out entirely.
            let hi = (rd4(len - 4) << 32) >> (8 * (8 - len));
            [rd4(0) | (hi & !0xFFFF_FFFF), 0]
        } else {
            let mut w = 0u64;
            for i in 0..len {
                w |= u64::from(*p.add(i)) << (8 * i);
            }
            [w, 0]
        }
    }
}

impl Vector for __m256i {
    const LANES: usize = 32;
    const ENTRY_ASCII: usize = crate::generic::ASCII_INLINE_MAX;
    const ASCII_PREFIX: bool = true;

    #[inline(always)]
    unsafe fn splat(b: u8) -> Self {
        // SAFETY: the caller guarantees AVX2.
        unsafe { _mm256_set1_epi8(b as i8) }
    }
    #[inline(always)]
    unsafe fn splat_u32(w: u32) -> Self {
        // SAFETY: the caller guarantees AVX2.
        unsafe { _mm256_set1_epi32(w as i32) }
    }
    #[inline(always)]
    unsafe fn load(p: *const u8) -> Self {
        // SAFETY: the caller guarantees AVX2 and 32 readable bytes; loadu has no alignment need.
        unsafe { _mm256_loadu_si256(p.cast()) }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut u8) {
        // SAFETY: the caller guarantees AVX2 and 32 writable bytes.
        unsafe { _mm256_storeu_si256(p.cast(), self) }
    }
    #[inline(always)]
    unsafe fn load_partial(p: *const u8, len: usize) -> Self {
        // SAFETY: the caller guarantees AVX2 and `len < 32` readable bytes at `p`; every
        // load below reads inside `p..p+len` (or the 32-byte SHIFT table at an offset of
        // at most 16, for 16 bytes).
        unsafe {
            if len >= 16 {
                // The low lane is `p[..16]`. The high lane is the 16 bytes ending at `p +
                // len`, moved down by `32 - len` bytes with zeros shifted in: shuffle
                // indices with bit 7 set give 0.
                let lo = _mm_loadu_si128(p.cast());
                let hi = _mm_loadu_si128(p.add(len - 16).cast());
                let idx = _mm_loadu_si128(SHIFT.as_ptr().add(32 - len).cast());
                _mm256_set_m128i(_mm_shuffle_epi8(hi, idx), lo)
            } else {
                let [a, b] = words_partial(p, len);
                _mm256_set_epi64x(0, 0, b as i64, a as i64)
            }
        }
    }
    #[inline(always)]
    unsafe fn table(t: &[u8; 16]) -> Self {
        // SAFETY: the caller guarantees AVX2; `t` holds 16 readable bytes.
        unsafe { _mm256_broadcastsi128_si256(_mm_loadu_si128(t.as_ptr().cast())) }
    }
    #[inline(always)]
    unsafe fn xor(self, o: Self) -> Self {
        // SAFETY: the caller guarantees AVX2.
        unsafe { _mm256_xor_si256(self, o) }
    }
    #[inline(always)]
    unsafe fn or(self, o: Self) -> Self {
        // SAFETY: the caller guarantees AVX2.
        unsafe { _mm256_or_si256(self, o) }
    }
    #[inline(always)]
    unsafe fn and(self, o: Self) -> Self {
        // SAFETY: the caller guarantees AVX2.
        unsafe { _mm256_and_si256(self, o) }
    }
    #[inline(always)]
    unsafe fn shr4(self) -> Self {
        // SAFETY: the caller guarantees AVX2.
        unsafe { _mm256_and_si256(_mm256_srli_epi16::<4>(self), _mm256_set1_epi8(0x0F)) }
    }
    #[inline(always)]
    unsafe fn lookup(self, table: Self) -> Self {
        // SAFETY: the caller guarantees AVX2.
        unsafe { _mm256_shuffle_epi8(table, self) }
    }
    #[inline(always)]
    unsafe fn sat_sub(self, o: Self) -> Self {
        // SAFETY: the caller guarantees AVX2.
        unsafe { _mm256_subs_epu8(self, o) }
    }
    #[inline(always)]
    unsafe fn prev1(self, prev: Self) -> Self {
        // SAFETY: the caller guarantees AVX2. `t` = [prev.high, self.low]: the 16 bytes
        // before each lane of `self`.
        unsafe {
            let t = _mm256_permute2x128_si256::<0x21>(prev, self);
            _mm256_alignr_epi8::<15>(self, t)
        }
    }
    #[inline(always)]
    unsafe fn prev2(self, prev: Self) -> Self {
        // SAFETY: as in `prev1`.
        unsafe {
            let t = _mm256_permute2x128_si256::<0x21>(prev, self);
            _mm256_alignr_epi8::<14>(self, t)
        }
    }
    #[inline(always)]
    unsafe fn prev3(self, prev: Self) -> Self {
        // SAFETY: as in `prev1`.
        unsafe {
            let t = _mm256_permute2x128_si256::<0x21>(prev, self);
            _mm256_alignr_epi8::<13>(self, t)
        }
    }
    #[inline(always)]
    unsafe fn is_ascii(self) -> bool {
        // SAFETY: the caller guarantees AVX2.
        unsafe { _mm256_movemask_epi8(self) == 0 }
    }
    #[inline(always)]
    unsafe fn any(self) -> bool {
        // SAFETY: the caller guarantees AVX2.
        unsafe { _mm256_testz_si256(self, self) == 0 }
    }
    /// From 16 bytes two 16-byte vectors, from each end (the second at its key phase),
    /// both loaded before either is stored; below that the scalar words.
    #[inline(always)]
    unsafe fn unmask_ascii_short(buf: &mut [u8], key: [u8; 4]) -> bool {
        let n = buf.len();
        if n < 16 {
            return crate::batch::unmask_ascii_words(buf, key);
        }
        let p = buf.as_mut_ptr();
        let tail_key = crate::scalar::rotated(key, n - 16);
        // SAFETY: the caller guarantees AVX2 (SSE2 with it); `16 <= n`, so both vectors
        // lie in `buf`.
        unsafe {
            let head = _mm_xor_si128(
                _mm_loadu_si128(p.cast()),
                _mm_set1_epi32(i32::from_ne_bytes(key)),
            );
            let tail = _mm_xor_si128(
                _mm_loadu_si128(p.add(n - 16).cast()),
                _mm_set1_epi32(i32::from_ne_bytes(tail_key)),
            );
            _mm_storeu_si128(p.cast(), head);
            _mm_storeu_si128(p.add(n - 16).cast(), tail);
            _mm_movemask_epi8(_mm_or_si128(head, tail)) == 0
        }
    }
    /// From 16 bytes two 16-byte vectors, from each end; below that the scalar words.
    #[inline(always)]
    unsafe fn ascii_short(buf: &[u8]) -> bool {
        let n = buf.len();
        if n < 16 {
            return crate::batch::ascii_words(buf);
        }
        let p = buf.as_ptr();
        // SAFETY: the caller guarantees AVX2 (SSE2 with it); `16 <= n`.
        unsafe {
            let v = _mm_or_si128(
                _mm_loadu_si128(p.cast()),
                _mm_loadu_si128(p.add(n - 16).cast()),
            );
            _mm_movemask_epi8(v) == 0
        }
    }
}

/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn mask(buf: &mut [u8], key: [u8; 4]) {
    // SAFETY: AVX2 is enabled for this function.
    unsafe { generic::mask::<__m256i>(buf, key) }
}

/// # Safety
/// The CPU must support AVX2; `dst.len() == src.len()`.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn mask_copy(dst: &mut [u8], src: &[u8], key: [u8; 4]) {
    // SAFETY: AVX2 is enabled for this function; the caller checked the lengths.
    unsafe { generic::mask_copy::<__m256i>(dst, src, key) }
}

/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn validate(buf: &[u8]) -> bool {
    // SAFETY: AVX2 is enabled for this function.
    unsafe { generic::validate::<__m256i>(buf) }
}

/// The batch decoder ([`crate::frame::decode`]).
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn decode(
    buf: &mut [u8],
    rules: &crate::header::Rules,
    max_frames: usize,
) -> crate::header::Scanned {
    // SAFETY: AVX2 is enabled for this function.
    unsafe { crate::batch::decode::<generic::Vectors<__m256i>>(buf, rules, max_frames) }
}
