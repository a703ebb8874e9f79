//! Shared by the deflate and tunnel tests and by the unit tests in `src/deflate/`:
//! deterministic pseudo-random bytes (xorshift), which deflate cannot shrink.
#![allow(dead_code)]

/// `len` pseudo-random bytes from `seed`.
pub fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}
