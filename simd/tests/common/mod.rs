//! Shared helpers for the kernel tests (included with `mod common;`).
#![allow(dead_code)]

use rapidws_simd::Backend;

/// Every backend this CPU and build can run.
pub fn backends() -> impl Iterator<Item = Backend> {
    Backend::ALL.into_iter().filter(|b| b.is_available())
}

/// A tiny deterministic PRNG (xorshift64*), so failures reproduce.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
}

/// Valid mixed text: ASCII, Latin-1, Greek, CJK and emoji (1- to 4-byte sequences).
pub fn mixed_text(len: usize, seed: u64) -> Vec<u8> {
    const PARTS: &[&str] = &[
        "{\"user\":\"ana\",\"msg\":\"",
        "hello ",
        "caf\u{e9} ",
        "\u{3ba}\u{1f79}\u{3c3}\u{3bc}\u{3b5} ",
        "\u{4f60}\u{597d}\u{4e16}\u{754c}",
        "\u{1f600}\u{1f680}",
        "\"}\n",
        "\u{10ffff}\u{ffff}\u{e000}\u{d7ff}",
        "plain ascii words here ",
    ];
    let mut rng = Rng(seed | 1);
    let mut out = Vec::with_capacity(len + 32);
    while out.len() < len {
        out.extend_from_slice(PARTS[rng.below(PARTS.len())].as_bytes());
    }
    out
}

/// The byte-at-a-time masking oracle.
pub fn mask_oracle(buf: &mut [u8], key: [u8; 4], phase: usize) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b ^= key[(i + phase) & 3];
    }
}

/// `key` rotated to `phase`, as the API leaves it after `phase` bytes.
pub fn key_at(key: [u8; 4], phase: usize) -> [u8; 4] {
    let mut k = key;
    k.rotate_left(phase & 3);
    k
}

/// `(valid_up_to, error_len)` from std, the oracle for every UTF-8 kernel.
pub fn std_result(b: &[u8]) -> Result<(), (usize, Option<usize>)> {
    core::str::from_utf8(b)
        .map(|_| ())
        .map_err(|e| (e.valid_up_to(), e.error_len()))
}

pub fn our_result(
    r: Result<(), rapidws_simd::utf8::Utf8Error>,
) -> Result<(), (usize, Option<usize>)> {
    r.map_err(|e| (e.valid_up_to(), e.error_len()))
}
