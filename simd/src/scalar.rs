//! Portable reference kernels, word-at-a-time (`u64`). Every other backend is tested
//! against these. They do not rotate the key: callers rotate once per public call.

/// `key` repeated twice as one native-endian word, so `word ^ key8(k)` masks 8 bytes
/// starting at key phase 0.
#[inline(always)]
fn key8(key: [u8; 4]) -> u64 {
    // The same 4 bytes in both halves, so the result is the same on either endianness.
    // (A byte-wise `from_ne_bytes` array compiled to a dozen shifts and ors.)
    let w = u64::from(u32::from_ne_bytes(key));
    w | (w << 32)
}

// Slice-to-array reads: one bounds check and one load each (byte-wise array literals
// left eight loads in some loops).
#[inline(always)]
fn read8(b: &[u8], i: usize) -> u64 {
    u64::from_ne_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]))
}

#[inline(always)]
fn write8(b: &mut [u8], i: usize, w: u64) {
    b[i..i + 8].copy_from_slice(&w.to_ne_bytes());
}

#[inline(always)]
fn read4(b: &[u8], i: usize) -> u32 {
    u32::from_ne_bytes(b[i..i + 4].try_into().unwrap_or([0; 4]))
}

#[inline(always)]
fn write4(b: &mut [u8], i: usize, w: u32) {
    b[i..i + 4].copy_from_slice(&w.to_ne_bytes());
}

/// Masks `buf` in place starting at key phase 0.
///
/// Whole words, then one word ending at the last byte instead of a byte loop: that word is
/// read (and masked with the key at its phase) before the loop writes, so where it overlaps
/// the loop's last word both store the same bytes. Lengths 4..8 take two overlapping `u32`s
/// the same way, so no length below 64 runs a loop of more than 7 steps.
///
/// Always inlined: [`crate::mask::apply`] runs it for small inputs without a call.
#[inline(always)]
pub(crate) fn mask(buf: &mut [u8], key: [u8; 4]) {
    let n = buf.len();
    if n >= 8 {
        let last = n - 8;
        let tail = read8(buf, last) ^ key8(rotated(key, last));
        let k = key8(key);
        let mut i = 0;
        while i + 8 <= n {
            write8(buf, i, read8(buf, i) ^ k);
            i += 8;
        }
        write8(buf, last, tail);
    } else if n >= 4 {
        let last = n - 4;
        let tail = read4(buf, last) ^ u32::from_ne_bytes(rotated(key, last));
        write4(buf, 0, read4(buf, 0) ^ u32::from_ne_bytes(key));
        write4(buf, last, tail);
    } else {
        for (b, k) in buf.iter_mut().zip(key) {
            *b ^= k;
        }
    }
}

/// Writes `src ^ key` into `dst` (same length) starting at key phase 0, with the same
/// overlapping last word as [`mask`].
#[inline]
pub(crate) fn mask_copy(dst: &mut [u8], src: &[u8], key: [u8; 4]) {
    debug_assert_eq!(dst.len(), src.len());
    let n = src.len().min(dst.len());
    if n >= 8 {
        let k = key8(key);
        let mut i = 0;
        while i + 8 <= n {
            write8(dst, i, read8(src, i) ^ k);
            i += 8;
        }
        let last = n - 8;
        write8(dst, last, read8(src, last) ^ key8(rotated(key, last)));
    } else if n >= 4 {
        let last = n - 4;
        write4(dst, 0, read4(src, 0) ^ u32::from_ne_bytes(key));
        write4(
            dst,
            last,
            read4(src, last) ^ u32::from_ne_bytes(rotated(key, last)),
        );
    } else {
        for ((d, s), k) in dst.iter_mut().zip(src).zip(key) {
            *d = *s ^ k;
        }
    }
}

/// `key` rotated left by `phase` bytes: the key that masks a byte at offset `phase`.
///
/// One register rotate; `<[u8]>::rotate_left` is an out-of-line call that cost more than
/// masking a 2-byte ping.
#[inline(always)]
pub(crate) fn rotated(key: [u8; 4], phase: usize) -> [u8; 4] {
    let w = u32::from_ne_bytes(key);
    let bits = 8 * (phase as u32 & 3);
    let w = if cfg!(target_endian = "little") {
        w.rotate_right(bits)
    } else {
        w.rotate_left(bits)
    };
    w.to_ne_bytes()
}

/// Start of an incomplete code point at the end of `b` (`b.len()` when none): the last
/// lead byte within 3 bytes of the end whose sequence would need more bytes than remain.
/// `byte(i)` gives the (possibly unmasked) byte at index `i`.
#[inline]
pub(crate) fn incomplete_tail_start(len: usize, byte: impl Fn(usize) -> u8) -> usize {
    let mut back = 1;
    while back <= 3 && back <= len {
        let c = byte(len - back);
        if c & 0xC0 != 0x80 {
            let need = if c >= 0xF0 {
                4
            } else if c >= 0xE0 {
                3
            } else if c >= 0xC0 {
                2
            } else {
                1
            };
            return if need > back { len - back } else { len };
        }
        back += 1;
    }
    len
}
