//! NEON instantiation of the generic kernels (16-byte vectors).

use core::arch::aarch64::*;

use crate::frame::{self, FrameHeader, HeaderVector, Scan};
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

impl HeaderVector for uint8x16_t {
    #[inline(always)]
    unsafe fn load16(p: *const u8) -> Self {
        // SAFETY: the caller guarantees NEON and 16 readable bytes.
        unsafe { vld1q_u8(p) }
    }
    #[inline(always)]
    unsafe fn decode(self, table: &[u8; 16]) -> (u64, u32) {
        // SAFETY: the caller guarantees NEON; `table` holds 16 readable bytes. `tbl`
        // gives 0 for indexes of 16 and up.
        unsafe {
            let s = vqtbl1q_u8(self, vld1q_u8(table.as_ptr()));
            decode_le(s)
        }
    }
}

/// Bytes 0..8 and 8..12 of `s` as little-endian integers, whatever the target's byte
/// order: the vector is stored and its bytes read back as bytes.
/// # Safety
/// NEON must be available.
#[inline(always)]
unsafe fn decode_le(s: uint8x16_t) -> (u64, u32) {
    if cfg!(target_endian = "little") {
        // SAFETY: the caller guarantees NEON.
        unsafe {
            (
                vgetq_lane_u64::<0>(vreinterpretq_u64_u8(s)),
                vgetq_lane_u32::<2>(vreinterpretq_u32_u8(s)),
            )
        }
    } else {
        let mut b = [0u8; 16];
        // SAFETY: the caller guarantees NEON; `b` holds 16 writable bytes.
        unsafe { vst1q_u8(b.as_mut_ptr(), s) };
        let lo: [u8; 8] = [b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]];
        (
            u64::from_le_bytes(lo),
            u32::from_le_bytes([b[8], b[9], b[10], b[11]]),
        )
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

/// # Safety
/// The CPU must support NEON.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn scan(buf: &[u8], out: &mut [FrameHeader]) -> Scan {
    // SAFETY: NEON is enabled for this function.
    unsafe { frame::scan_vector::<uint8x16_t>(buf, out) }
}
