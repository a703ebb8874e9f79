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
    const ENTRY_ASCII: usize = crate::generic::ASCII_INLINE_MAX;
    const PREFETCH_AHEAD: usize = 8 * 1024;

    #[inline(always)]
    unsafe fn prefetch(p: *const u8) {
        // SAFETY: a prefetch is a hint: it reads nothing and never faults, whatever `p`.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast()) }
    }
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
    #[inline(always)]
    unsafe fn unmask_ascii_short(buf: &mut [u8], key: [u8; 4]) -> bool {
        // SAFETY: the caller guarantees AVX-512F/BW and `buf.len() < 64`; the masked load
        // and store touch exactly `buf`; the lanes past it (the key after the XOR) are
        // left out of the ASCII test.
        unsafe {
            let m = low_bits(buf.len());
            let p = buf.as_mut_ptr();
            let v = _mm512_xor_si512(
                _mm512_maskz_loadu_epi8(m, p.cast()),
                _mm512_set1_epi32(i32::from_ne_bytes(key)),
            );
            _mm512_mask_storeu_epi8(p.cast(), m, v);
            _mm512_movepi8_mask(v) & m == 0
        }
    }
    #[inline(always)]
    unsafe fn ascii_short(buf: &[u8]) -> bool {
        // SAFETY: the caller guarantees AVX-512BW and `buf.len() < 64`; the masked load
        // reads exactly `buf`, the rest of the vector is zero.
        unsafe {
            let v = _mm512_maskz_loadu_epi8(low_bits(buf.len()), buf.as_ptr().cast());
            _mm512_movepi8_mask(v) == 0
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

/// The batch decoder ([`crate::frame::decode`]).
/// # Safety
/// The CPU must support AVX-512F and AVX-512BW.
#[target_feature(enable = "avx512f,avx512bw")]
pub(crate) unsafe fn decode(
    buf: &mut [u8],
    rules: &crate::header::Rules,
    max_frames: usize,
) -> crate::header::Scanned {
    // SAFETY: AVX-512F and AVX-512BW are enabled for this function.
    unsafe { crate::batch::decode::<generic::Vectors<__m512i>>(buf, rules, max_frames) }
}

/// An AVX-512 vector whose [`Vector::shr4`] is one GFNI affine transform instead of a
/// 16-bit shift and a mask: two operations fewer per 64 bytes of UTF-8 checked, on the
/// vector ports that bound the kernel (AMD Zen 4, Intel Ice Lake and later have GFNI).
/// Everything else is the plain AVX-512 vector's.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub(crate) struct Gfni(__m512i);

/// A `Gfni` method that is the plain vector's.
macro_rules! plain {
    ($e:expr) => {
        // SAFETY: the caller's guarantees are the plain vector's, which `Gfni` wraps.
        unsafe { $e }
    };
}

impl Vector for Gfni {
    const LANES: usize = <__m512i as Vector>::LANES;
    const STEP: usize = <__m512i as Vector>::STEP;
    const ENTRY_ASCII: usize = <__m512i as Vector>::ENTRY_ASCII;

    #[inline(always)]
    unsafe fn splat(b: u8) -> Self {
        Gfni(plain!(<__m512i as Vector>::splat(b)))
    }
    #[inline(always)]
    unsafe fn splat_u32(w: u32) -> Self {
        Gfni(plain!(<__m512i as Vector>::splat_u32(w)))
    }
    #[inline(always)]
    unsafe fn load(p: *const u8) -> Self {
        Gfni(plain!(<__m512i as Vector>::load(p)))
    }
    #[inline(always)]
    unsafe fn load_partial(p: *const u8, len: usize) -> Self {
        Gfni(plain!(<__m512i as Vector>::load_partial(p, len)))
    }
    #[inline(always)]
    unsafe fn table(t: &[u8; 16]) -> Self {
        Gfni(plain!(<__m512i as Vector>::table(t)))
    }
    #[inline(always)]
    unsafe fn xor(self, o: Self) -> Self {
        Gfni(plain!(self.0.xor(o.0)))
    }
    #[inline(always)]
    unsafe fn or(self, o: Self) -> Self {
        Gfni(plain!(self.0.or(o.0)))
    }
    #[inline(always)]
    unsafe fn and(self, o: Self) -> Self {
        Gfni(plain!(self.0.and(o.0)))
    }
    #[inline(always)]
    unsafe fn lookup(self, table: Self) -> Self {
        Gfni(plain!(self.0.lookup(table.0)))
    }
    #[inline(always)]
    unsafe fn sat_sub(self, o: Self) -> Self {
        Gfni(plain!(self.0.sat_sub(o.0)))
    }
    #[inline(always)]
    unsafe fn prev1(self, prev: Self) -> Self {
        Gfni(plain!(self.0.prev1(prev.0)))
    }
    #[inline(always)]
    unsafe fn prev2(self, prev: Self) -> Self {
        Gfni(plain!(self.0.prev2(prev.0)))
    }
    #[inline(always)]
    unsafe fn prev3(self, prev: Self) -> Self {
        Gfni(plain!(self.0.prev3(prev.0)))
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut u8) {
        plain!(self.0.store(p))
    }
    #[inline(always)]
    unsafe fn is_ascii(self) -> bool {
        plain!(self.0.is_ascii())
    }
    #[inline(always)]
    unsafe fn any(self) -> bool {
        plain!(self.0.any())
    }
    #[inline(always)]
    unsafe fn shr4(self) -> Self {
        // Each result bit `i < 4` is input bit `i + 4` (matrix row `7 - i` selects it),
        // bits 4..8 are zero.
        const SHR4: i64 = 0x1020_4080_0000_0000;
        // SAFETY: the caller guarantees AVX-512F and GFNI.
        unsafe {
            Gfni(_mm512_gf2p8affine_epi64_epi8::<0>(
                self.0,
                _mm512_set1_epi64(SHR4),
            ))
        }
    }
}

/// Whether this CPU has GFNI, for [`validate`] on AVX-512: fixed at compile time when
/// the build enables it, else detected (and cached by `std`).
#[inline]
pub(crate) fn has_gfni() -> bool {
    if cfg!(target_feature = "gfni") {
        return true;
    }
    #[cfg(feature = "std")]
    return std::arch::is_x86_feature_detected!("gfni");
    #[allow(unreachable_code)]
    false
}

/// The UTF-8 kernel for this CPU: [`validate_gfni`] where GFNI is present. Calling it
/// needs AVX-512F and AVX-512BW.
pub(crate) fn validate_kernel() -> unsafe fn(&[u8]) -> bool {
    if has_gfni() {
        validate_gfni
    } else {
        validate_plain
    }
}

/// # Safety
/// The CPU must support AVX-512F and AVX-512BW.
#[inline]
pub(crate) unsafe fn validate(buf: &[u8]) -> bool {
    // SAFETY: the caller guarantees AVX-512F/BW; `validate_kernel` adds GFNI only where
    // the CPU has it.
    unsafe { validate_kernel()(buf) }
}

/// # Safety
/// The CPU must support AVX-512F and AVX-512BW.
#[target_feature(enable = "avx512f,avx512bw")]
pub(crate) unsafe fn validate_plain(buf: &[u8]) -> bool {
    // SAFETY: AVX-512F/BW are enabled for this function.
    unsafe { generic::validate::<__m512i>(buf) }
}

/// # Safety
/// The CPU must support AVX-512F, AVX-512BW and GFNI.
#[target_feature(enable = "avx512f,avx512bw,gfni")]
pub(crate) unsafe fn validate_gfni(buf: &[u8]) -> bool {
    // SAFETY: AVX-512F/BW and GFNI are enabled for this function.
    unsafe { generic::validate::<Gfni>(buf) }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;

    /// The plain and the GFNI kernel differ in one register operation; on a CPU with both,
    /// they agree with std on every length of valid and corrupted mixed text (the
    /// integration tests reach only the one `validate` picks).
    #[test]
    fn plain_and_gfni_kernels_agree_with_std() {
        if !(std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw"))
        {
            return;
        }
        let gfni = has_gfni();
        let text = "{\"user\":\"Zoë\",\"text\":\"grüße, мир, 世界 🎉!\"} "
            .repeat(40)
            .into_bytes();
        let lens = if cfg!(miri) { 0..140 } else { 0..1100 };
        for len in lens {
            for start in [0, 1, 7] {
                let mut b = text[start..start + len].to_vec();
                for corrupt in [None, Some(len / 2), Some(len.saturating_sub(1))] {
                    if let Some(i) = corrupt.filter(|&i| i < len) {
                        b[i] ^= 0xC0;
                    }
                    let want = core::str::from_utf8(&b).is_ok();
                    // SAFETY: AVX-512F/BW detected above, GFNI where `gfni`.
                    unsafe {
                        assert_eq!(validate_plain(&b), want, "plain, len {len}");
                        if gfni {
                            assert_eq!(validate_gfni(&b), want, "gfni, len {len}");
                        }
                    }
                }
            }
        }
    }
}
