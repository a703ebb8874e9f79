//! Portable reference kernels, word-at-a-time (`u64`). Every other backend is tested
//! against these. They do not rotate the key: callers rotate once per public call.

/// `key` repeated twice as one native-endian word, so `word ^ key8(k)` masks 8 bytes
/// starting at key phase 0.
#[inline(always)]
fn key8(key: [u8; 4]) -> u64 {
    u64::from_ne_bytes([
        key[0], key[1], key[2], key[3], key[0], key[1], key[2], key[3],
    ])
}

/// Masks `buf` in place starting at key phase 0.
#[inline]
pub(crate) fn mask(buf: &mut [u8], key: [u8; 4]) {
    let k = key8(key);
    let mut words = buf.chunks_exact_mut(8);
    for w in &mut words {
        let x = u64::from_ne_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]) ^ k;
        w.copy_from_slice(&x.to_ne_bytes());
    }
    // Whole words keep the phase at 0 (8 is a multiple of 4).
    let rest = words.into_remainder();
    for (i, b) in rest.iter_mut().enumerate() {
        *b ^= key[i & 3];
    }
}

/// Writes `src ^ key` into `dst` (same length) starting at key phase 0.
#[inline]
pub(crate) fn mask_copy(dst: &mut [u8], src: &[u8], key: [u8; 4]) {
    debug_assert_eq!(dst.len(), src.len());
    let k = key8(key);
    let mut d = dst.chunks_exact_mut(8);
    let mut s = src.chunks_exact(8);
    for (dw, sw) in (&mut d).zip(&mut s) {
        let x = u64::from_ne_bytes([sw[0], sw[1], sw[2], sw[3], sw[4], sw[5], sw[6], sw[7]]) ^ k;
        dw.copy_from_slice(&x.to_ne_bytes());
    }
    for (i, (db, sb)) in d.into_remainder().iter_mut().zip(s.remainder()).enumerate() {
        *db = *sb ^ key[i & 3];
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
