//! Asking for memory before it is read: [`prefetch`].
//!
//! A server with many connections that each send now and then finds a connection's
//! state out of cache whenever its next message comes: its fields lie on a dozen cache
//! lines, and the code that reads them one after the other, with a system call between
//! them, waits for memory a dozen times in turn. Asking for all of the lines first lets
//! the memory system fetch them together, while the read is still under way.

/// Asks the CPU to bring every cache line of `value` into cache, without waiting for
/// them and without any effect a program can observe: a hint, no load. On x86_64
/// (`prefetcht0`) and aarch64 (`prfm pldl1keep`); elsewhere, and under Miri, it does
/// nothing.
#[inline(always)]
pub fn prefetch<T: ?Sized>(value: &T) {
    let start = core::ptr::from_ref(value).cast::<u8>();
    let len = core::mem::size_of_val(value);
    let mut offset = 0;
    while offset < len {
        line(start.wrapping_add(offset));
        offset += LINE;
    }
    // The last line, when `value` straddles one more than its size covers from its
    // start's line.
    if len > 0 {
        line(start.wrapping_add(len - 1));
    }
}

/// The cache line size the hint steps by (64 bytes on the CPUs this targets; a CPU with
/// larger lines fetches some of them twice, which costs nothing).
const LINE: usize = 64;

#[cfg(all(target_arch = "x86_64", target_feature = "sse", not(miri)))]
#[inline(always)]
fn line(p: *const u8) {
    use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
    // SAFETY: a prefetch is a hint: it never faults and reads nothing the program sees,
    // whatever the address; `p` points into a live reference in any case. SSE is
    // enabled (the cfg above).
    unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast::<i8>()) }
}

#[cfg(all(target_arch = "aarch64", not(miri)))]
#[inline(always)]
fn line(p: *const u8) {
    // SAFETY: `prfm` is a hint: it never faults, writes nothing and reads nothing the
    // program sees, whatever the address; `p` points into a live reference in any case.
    unsafe {
        core::arch::asm!(
            "prfm pldl1keep, [{p}]",
            p = in(reg) p,
            options(nostack, readonly, preserves_flags)
        );
    }
}

#[cfg(not(any(
    all(target_arch = "x86_64", target_feature = "sse", not(miri)),
    all(target_arch = "aarch64", not(miri))
)))]
#[inline(always)]
fn line(_: *const u8) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_size_and_alignment_is_only_hinted() {
        let bytes = [7u8; 1000];
        for start in 0..70 {
            for len in [0, 1, 63, 64, 65, 127, 128, 129, 700] {
                let part = &bytes[start..start + len];
                prefetch(&part);
                prefetch(part);
            }
        }
        prefetch(&());
        prefetch(&[0u64; 100]);
        assert_eq!(bytes, [7u8; 1000], "nothing written");
    }
}
