//! AVX-512 (F + BW) instantiation of the generic kernels (64-byte vectors).

use core::arch::x86_64::*;

use crate::generic::{self, Vector};

/// The low `len` bits set (`len < 64`).
#[inline(always)]
fn low_bits(len: usize) -> u64 {
    (1u64 << len) - 1
}

impl Vector for __m512i {
    const LANES: usize = 64;
    // Two vectors per ASCII test: on mixed text a 64-byte step is all ASCII often
    // enough for its branch to mispredict, and one vector per step is mostly loop.
    const STEP: usize = 128;
    const ENTRY_ASCII: usize = crate::utf8::ASCII_INLINE_MAX;

    #[inline(always)]
    unsafe fn splat(b: u8) -> Self {
        // SAFETY: the caller guarantees AVX-512F.
        unsafe { _mm512_set1_epi8(b as i8) }
    }
    #[inline(always)]
    unsafe fn splat_u32(w: u32) -> Self {
        // SAFETY: the caller guarantees AVX-512F.
        unsafe { _mm512_set1_epi32(w as i32) }
    }
    #[inline(always)]
    unsafe fn load(p: *const u8) -> Self {
        // SAFETY: the caller guarantees AVX-512F and 64 readable bytes.
        unsafe { _mm512_loadu_si512(p.cast()) }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut u8) {
        // SAFETY: the caller guarantees AVX-512F and 64 writable bytes.
        unsafe { _mm512_storeu_si512(p.cast(), self) }
    }
    #[inline(always)]
    unsafe fn load_partial(p: *const u8, len: usize) -> Self {
        // SAFETY: the caller guarantees AVX-512BW and `len < 64` readable bytes; masked-off
        // bytes are not accessed (and cannot fault).
        unsafe { _mm512_maskz_loadu_epi8(low_bits(len), p.cast()) }
    }
    #[inline(always)]
    unsafe fn table(t: &[u8; 16]) -> Self {
        // SAFETY: the caller guarantees AVX-512F; `t` holds 16 readable bytes.
        unsafe { _mm512_broadcast_i32x4(_mm_loadu_si128(t.as_ptr().cast())) }
    }
    #[inline(always)]
    unsafe fn xor(self, o: Self) -> Self {
        // SAFETY: the caller guarantees AVX-512F.
        unsafe { _mm512_xor_si512(self, o) }
    }
    #[inline(always)]
    unsafe fn or(self, o: Self) -> Self {
        // SAFETY: the caller guarantees AVX-512F.
        unsafe { _mm512_or_si512(self, o) }
    }
    #[inline(always)]
    unsafe fn and(self, o: Self) -> Self {
        // SAFETY: the caller guarantees AVX-512F.
        unsafe { _mm512_and_si512(self, o) }
    }
    #[inline(always)]
    unsafe fn shr4(self) -> Self {
        // SAFETY: the caller guarantees AVX-512BW.
        unsafe { _mm512_and_si512(_mm512_srli_epi16::<4>(self), _mm512_set1_epi8(0x0F)) }
    }
    #[inline(always)]
    unsafe fn lookup(self, table: Self) -> Self {
        // SAFETY: the caller guarantees AVX-512BW.
        unsafe { _mm512_shuffle_epi8(table, self) }
    }
    #[inline(always)]
    unsafe fn sat_sub(self, o: Self) -> Self {
        // SAFETY: the caller guarantees AVX-512BW.
        unsafe { _mm512_subs_epu8(self, o) }
    }
    #[inline(always)]
    unsafe fn prev1(self, prev: Self) -> Self {
        // SAFETY: the caller guarantees AVX-512F/BW. `t` = the 16 bytes before each
        // 128-bit lane of `self` (valignd works across the whole register).
        unsafe {
            let t = _mm512_alignr_epi32::<12>(self, prev);
            _mm512_alignr_epi8::<15>(self, t)
        }
    }
    #[inline(always)]
    unsafe fn prev2(self, prev: Self) -> Self {
        // SAFETY: as in `prev1`.
        unsafe {
            let t = _mm512_alignr_epi32::<12>(self, prev);
            _mm512_alignr_epi8::<14>(self, t)
        }
    }
    #[inline(always)]
    unsafe fn prev3(self, prev: Self) -> Self {
        // SAFETY: as in `prev1`.
        unsafe {
            let t = _mm512_alignr_epi32::<12>(self, prev);
            _mm512_alignr_epi8::<13>(self, t)
        }
    }
    #[inline(always)]
    unsafe fn is_ascii(self) -> bool {
        // SAFETY: the caller guarantees AVX-512BW.
        unsafe { _mm512_movepi8_mask(self) == 0 }
    }
    #[inline(always)]
    unsafe fn any(self) -> bool {
        // SAFETY: the caller guarantees AVX-512BW.
        unsafe { _mm512_test_epi8_mask(self, self) != 0 }
    }
    #[inline(always)]
    unsafe fn mask_partial(p: *mut u8, len: usize, _key: [u8; 4], k: Self) {
        // SAFETY: the caller guarantees AVX-512BW and `len < 64` valid bytes at `p`; the
        // masked load and store touch exactly those.
        unsafe {
            let m = low_bits(len);
            let v = _mm512_maskz_loadu_epi8(m, p.cast());
            _mm512_mask_storeu_epi8(p.cast(), m, _mm512_xor_si512(v, k));
        }
    }
}

/// # Safety
/// The CPU must support AVX-512F and AVX-512BW.
#[target_feature(enable = "avx512f,avx512bw")]
pub(crate) unsafe fn mask(buf: &mut [u8], key: [u8; 4]) {
    // SAFETY: AVX-512F/BW are enabled for this function.
    unsafe { generic::mask::<__m512i>(buf, key) }
}

/// # Safety
/// The CPU must support AVX-512F and AVX-512BW; `dst.len() == src.len()`.
#[target_feature(enable = "avx512f,avx512bw")]
pub(crate) unsafe fn mask_copy(dst: &mut [u8], src: &[u8], key: [u8; 4]) {
    // SAFETY: AVX-512F/BW are enabled for this function; the caller checked the lengths.
    unsafe { generic::mask_copy::<__m512i>(dst, src, key) }
}

/// # Safety
/// The CPU must support AVX-512F and AVX-512BW.
#[target_feature(enable = "avx512f,avx512bw")]
pub(crate) unsafe fn validate(buf: &[u8]) -> bool {
    // SAFETY: AVX-512F/BW are enabled for this function.
    unsafe { generic::validate::<__m512i>(buf) }
}
