//! NEON instantiation of the generic kernels (16-byte vectors).

use core::arch::aarch64::*;

use crate::generic::{self, Vector};

impl Vector for uint8x16_t {
    const LANES: usize = 16;

    #[inline(always)]
    unsafe fn splat(b: u8) -> Self {
        // SAFETY: the caller guarantees NEON.
        unsafe { vdupq_n_u8(b) }
    }
    #[inline(always)]
    unsafe fn splat_u32(w: u32) -> Self {
        // SAFETY: the caller guarantees NEON.
        unsafe { vreinterpretq_u8_u32(vdupq_n_u32(w)) }
    }
    #[inline(always)]
    unsafe fn load(p: *const u8) -> Self {
        // SAFETY: the caller guarantees NEON and 16 readable bytes.
        unsafe { vld1q_u8(p) }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut u8) {
        // SAFETY: the caller guarantees NEON and 16 writable bytes.
        unsafe { vst1q_u8(p, self) }
    }
    #[inline(always)]
    unsafe fn load_partial(p: *const u8, len: usize) -> Self {
        let mut tmp = [0u8; 16];
        // SAFETY: the caller guarantees `len < 16` readable bytes at `p`; `tmp` is a
        // distinct local with 16 bytes.
        unsafe {
            core::ptr::copy_nonoverlapping(p, tmp.as_mut_ptr(), len);
            vld1q_u8(tmp.as_ptr())
        }
    }
    #[inline(always)]
    unsafe fn table(t: &[u8; 16]) -> Self {
        // SAFETY: the caller guarantees NEON; `t` holds 16 readable bytes.
        unsafe { vld1q_u8(t.as_ptr()) }
    }
    #[inline(always)]
    unsafe fn xor(self, o: Self) -> Self {
        // SAFETY: the caller guarantees NEON.
        unsafe { veorq_u8(self, o) }
    }
    #[inline(always)]
    unsafe fn or(self, o: Self) -> Self {
        // SAFETY: the caller guarantees NEON.
        unsafe { vorrq_u8(self, o) }
    }
    #[inline(always)]
    unsafe fn and(self, o: Self) -> Self {
        // SAFETY: the caller guarantees NEON.
        unsafe { vandq_u8(self, o) }
    }
    #[inline(always)]
    unsafe fn shr4(self) -> Self {
        // SAFETY: the caller guarantees NEON.
        unsafe { vshrq_n_u8::<4>(self) }
    }
    #[inline(always)]
    unsafe fn lookup(self, table: Self) -> Self {
        // SAFETY: the caller guarantees NEON.
        unsafe { vqtbl1q_u8(table, self) }
    }
    #[inline(always)]
    unsafe fn sat_sub(self, o: Self) -> Self {
        // SAFETY: the caller guarantees NEON.
        unsafe { vqsubq_u8(self, o) }
    }
    #[inline(always)]
    unsafe fn prev1(self, prev: Self) -> Self {
        // SAFETY: the caller guarantees NEON.
        unsafe { vextq_u8::<15>(prev, self) }
    }
    #[inline(always)]
    unsafe fn prev2(self, prev: Self) -> Self {
        // SAFETY: the caller guarantees NEON.
        unsafe { vextq_u8::<14>(prev, self) }
    }
    #[inline(always)]
    unsafe fn prev3(self, prev: Self) -> Self {
        // SAFETY: the caller guarantees NEON.
        unsafe { vextq_u8::<13>(prev, self) }
    }
    #[inline(always)]
    unsafe fn is_ascii(self) -> bool {
        // SAFETY: the caller guarantees NEON.
        unsafe { vmaxvq_u8(self) < 0x80 }
    }
    #[inline(always)]
    unsafe fn any(self) -> bool {
        // SAFETY: the caller guarantees NEON.
        unsafe { vmaxvq_u8(self) != 0 }
    }
}

/// # Safety
/// The CPU must support NEON.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn mask(buf: &mut [u8], key: [u8; 4]) {
    // SAFETY: NEON is enabled for this function.
    unsafe { generic::mask::<uint8x16_t>(buf, key) }
}

/// # Safety
/// The CPU must support NEON; `dst.len() == src.len()`.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn mask_copy(dst: &mut [u8], src: &[u8], key: [u8; 4]) {
    // SAFETY: NEON is enabled for this function; the caller checked the lengths.
    unsafe { generic::mask_copy::<uint8x16_t>(dst, src, key) }
}

/// # Safety
/// The CPU must support NEON.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn validate(buf: &[u8]) -> bool {
    // SAFETY: NEON is enabled for this function.
    unsafe { generic::validate::<uint8x16_t>(buf) }
}

/// The batch decoder ([`crate::frame::decode`]).
/// # Safety
/// The CPU must support NEON.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn decode(
    buf: &mut [u8],
    rules: &crate::header::Rules,
    max_frames: usize,
) -> crate::header::Scanned {
    // SAFETY: NEON is enabled for this function.
    unsafe { crate::batch::decode::<generic::Vectors<uint8x16_t>>(buf, rules, max_frames) }
}
