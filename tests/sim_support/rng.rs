//! The one source of every choice a run makes: the fuzzer's bytes first, then SplitMix64
//! from the seed, so a seed alone (the test) or a byte string (the fuzz target) replays a
//! run exactly.

/// A stream of choices.
#[derive(Clone, Debug)]
pub struct Rng {
    bytes: Vec<u8>,
    pos: usize,
    state: u64,
}

impl Rng {
    /// Choices from `seed` alone.
    pub fn new(seed: u64) -> Self {
        Rng::with_bytes(seed, Vec::new())
    }

    /// Choices from `bytes` while they last, then from `seed`.
    pub fn with_bytes(seed: u64, bytes: Vec<u8>) -> Self {
        Rng {
            bytes,
            pos: 0,
            state: seed,
        }
    }

    /// A stream of its own for another consumer, from the next 8 bytes of this one.
    pub fn fork(&mut self) -> Rng {
        Rng::new(self.u64())
    }

    fn splitmix(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// 64 bits.
    pub fn u64(&mut self) -> u64 {
        self.below(u64::MAX)
    }

    /// A number in `0..n` (0 when `n` is 0). From the bytes, as few as `n` needs.
    pub fn below(&mut self, n: u64) -> u64 {
        if n <= 1 {
            return 0;
        }
        if self.pos < self.bytes.len() {
            let need = (64 - (n - 1).leading_zeros()).div_ceil(8) as usize;
            let mut v = 0u64;
            for _ in 0..need {
                let b = self.bytes.get(self.pos).copied().unwrap_or(0);
                self.pos += 1;
                v = (v << 8) | u64::from(b);
            }
            return v % n;
        }
        self.splitmix() % n
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below((hi - lo) as u64 + 1) as usize
    }

    /// True `num` times in `den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }

    /// An index into `weights`, each as likely as its weight.
    pub fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u64 = weights.iter().map(|&w| u64::from(w)).sum();
        let mut x = self.below(total);
        for (i, &w) in weights.iter().enumerate() {
            if x < u64::from(w) {
                return i;
            }
            x -= u64::from(w);
        }
        weights.len() - 1
    }

    /// One of `items`.
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }

    /// A payload size: mostly small, sometimes a few frames' or reads' worth, rarely large
    /// enough to fill the send queue and the transport's buffer on its own.
    pub fn size(&mut self) -> usize {
        match self.weighted(&[60, 25, 11, 4]) {
            0 => self.range(0, 64),
            1 => self.range(65, 1500),
            2 => self.range(1501, 20_000),
            _ => self.range(20_001, 140_000),
        }
    }
}
