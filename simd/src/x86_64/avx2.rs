//! AVX2 instantiation of the generic kernels (32-byte vectors).

use core::arch::x86_64::*;

use crate::generic::{self, Vector};

impl Vector for __m256i {
    const LANES: usize = 32;

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
        let mut tmp = [0u8; 32];
        // SAFETY: the caller guarantees `len < 32` readable bytes at `p`; `tmp` is a
        // distinct local with room for them and 32 readable bytes.
        unsafe {
            core::ptr::copy_nonoverlapping(p, tmp.as_mut_ptr(), len);
            _mm256_loadu_si256(tmp.as_ptr().cast())
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

/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn unmask_validate(buf: &mut [u8], key: [u8; 4]) -> bool {
    // SAFETY: AVX2 is enabled for this function.
    unsafe { generic::unmask_validate::<__m256i>(buf, key) }
}
