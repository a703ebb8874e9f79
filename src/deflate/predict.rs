//! Spotting messages that deflate would not shrink, before compressing them
//! ([`super::DeflateConfig::predict_incompressible`]).
//!
//! RFC 7692 6.1 lets a sender send any message uncompressed (RSV1 clear), and such a
//! message never enters the peer's inflater window. Deciding *before* the compressor sees
//! a message therefore needs no reset: with context takeover both windows keep the same
//! history, and the next compressed message may still refer back to it.
//!
//! # The test
//!
//! Up to [`SAMPLE`] bytes are sampled (the whole message when it is that short, otherwise
//! [`CHUNKS`] runs of [`CHUNK`] bytes spread evenly over it) and their byte histogram
//! gives the number of ordered pairs of equal sampled bytes, `C = Σ c(c - 1)`. For `n`
//! uniformly random bytes `C` averages `E = n(n - 1) / 256` with a standard deviation of
//! about `sqrt(2E)`. The message looks incompressible when `C` lies in
//! `[E - 4σ, E + max(E/4, 4σ)]`:
//!
//! - Above that band the bytes repeat more than random ones: text, numbers, most
//!   structured data, which deflate shrinks. At the upper edge the collision entropy
//!   `-log2(C / n(n - 1))` is at least `8 - log2(1.25) = 7.68` bits per byte, and Shannon
//!   entropy is never below it, so an order-0 coder could save at most 4 %; zlib's level-1
//!   static Huffman codes (8 or 9 bits per literal) make such data larger.
//! - Below it the bytes are *too* even to be random (a counter, a test pattern): such data
//!   is usually made of long repeats, which deflate finds, so it is compressed.
//!
//! What the histogram cannot see is repetition of random-looking data, such as a random
//! block repeated within the message. The [`Predictor`] therefore probes: after a run of
//! predicted skips it deflates one such message with a scratch compressor ([`probe`]: this
//! thread's, reset before each use, never the connection's), only to measure it. If it
//! shrinks to under 7/8 of its size, the message and the next [`DISTRUST_FOR`] are
//! compressed as usual; otherwise it goes uncompressed and the probe interval doubles, up
//! to [`MAX_PROBE_INTERVAL`] messages. Probing never touches the connection's compressor:
//! no reset, no lost context, and a connection that only ever sends incompressible data
//! never allocates one.

use std::cell::RefCell;

use zlib_rs::{Deflate, DeflateFlush};

use super::fast::FastDeflate;

use super::compressor::{Key, deflate_into};

/// The most bytes sampled from one message.
pub(super) const SAMPLE: usize = CHUNK * CHUNKS;
/// Bytes per sampled run: contiguous, so the sample reads whole cache lines.
const CHUNK: usize = 64;
/// Sampled runs per message longer than [`SAMPLE`]. 512 bytes in all tell random data
/// from text by far (the band reaches at least 4 standard deviations either side of the
/// random mean).
const CHUNKS: usize = 8;
/// Fewer sampled bytes than this say too little: such messages are compressed.
const MIN_SAMPLE: usize = 64;

/// Predicted skips before the first probe, and after a probe that found compressible data.
pub(super) const MIN_PROBE_INTERVAL: u32 = 16;
/// The longest run of predicted skips between two probes.
pub(super) const MAX_PROBE_INTERVAL: u32 = 1024;
/// Messages compressed without consulting the histogram after a probe showed that the
/// prediction was wrong for this stream.
pub(super) const DISTRUST_FOR: u32 = 256;

/// Whether `payload`'s sampled bytes look uniformly random (see the module docs).
pub(crate) fn looks_incompressible(payload: &[u8]) -> bool {
    // Shortcut for ASCII text, the common case: random bytes have the high bit set in half
    // of them (32 ± 4 of 64), text in next to none. Fewer than 8 of the first 64 settles
    // it without the histogram (the answer the histogram would give, far from the band).
    if let Some(head) = payload.get(..CHUNK)
        && head.iter().filter(|&&b| b >= 0x80).count() < CHUNK / 8
    {
        return false;
    }
    // Four histograms, summed at the end: consecutive equal bytes then do not wait on
    // each other's increment.
    let mut counts = [[0u16; 256]; 4];
    let mut n = 0usize;
    let mut add = |run: &[u8]| {
        let mut quads = run.chunks_exact(4);
        for q in &mut quads {
            counts[0][usize::from(q[0])] += 1;
            counts[1][usize::from(q[1])] += 1;
            counts[2][usize::from(q[2])] += 1;
            counts[3][usize::from(q[3])] += 1;
        }
        for &b in quads.remainder() {
            counts[0][usize::from(b)] += 1;
        }
        n += run.len();
    };
    if payload.len() <= SAMPLE {
        add(payload);
    } else {
        // CHUNKS runs, the first at the start and the last at the end.
        let stride = (payload.len() - CHUNK) / (CHUNKS - 1);
        for i in 0..CHUNKS {
            let at = i * stride;
            add(&payload[at..at + CHUNK]);
        }
    }
    if n < MIN_SAMPLE {
        return false;
    }
    // C = Σ c(c - 1) = Σ c² - n. At most SAMPLE (512) bytes: c² ≤ 2^18 and the sum of
    // them ≤ 2^18 fit u32, and the plain loop vectorizes.
    let [h0, h1, h2, h3] = &counts;
    let mut squares = 0u32;
    for (((a, b), c), d) in h0.iter().zip(h1).zip(h2).zip(h3) {
        let c = u32::from(*a) + u32::from(*b) + u32::from(*c) + u32::from(*d);
        squares += c * c;
    }
    let collisions = squares - n as u32;
    let n = n as f64;
    let expected = n * (n - 1.0) / 256.0;
    let sigma4 = 4.0 * (2.0 * expected).sqrt();
    let c = collisions as f64;
    c >= expected - sigma4 && c <= expected + (expected / 4.0).max(sigma4)
}

thread_local! {
    /// The scratch compressor probes run on at zlib-rs's levels: one per thread, created
    /// on the first probe (about 371 KiB at `mem_level` 8) and kept for the thread's life.
    static SCRATCH: RefCell<Option<(Key, Deflate)>> = const { RefCell::new(None) };
    /// The same at level 1, where the compressor is ours ([`FastDeflate`], about 72 KiB
    /// with a 15-bit window), by window bits.
    static FAST_SCRATCH: RefCell<Option<(u8, FastDeflate)>> = const { RefCell::new(None) };
}

/// The size `payload` deflates to as a whole message against an empty history (with the
/// `key` settings), measured on this thread's scratch compressor; `scratch` is used as
/// output room and left as it was. `None` if the compressor failed (the probe then counts
/// as incompressible).
pub(super) fn probe(payload: &[u8], key: Key, scratch: &mut Vec<u8>) -> Option<usize> {
    let start = scratch.len();
    if key.level == 1 {
        // Level 1 is our own compressor: probe with one of those (no zlib-rs state).
        FAST_SCRATCH.with(|cell| {
            let mut cell = cell.borrow_mut();
            let fast = match &mut *cell {
                Some((bits, f)) if *bits == key.window_bits => {
                    f.reset();
                    f
                }
                slot => {
                    &mut slot
                        .insert((key.window_bits, FastDeflate::new(key.window_bits)))
                        .1
                }
            };
            fast.compress(payload, true, scratch);
        });
        let size = scratch.len() - start;
        scratch.truncate(start);
        return Some(size);
    }
    let size = SCRATCH.with(|cell| {
        let mut cell = cell.borrow_mut();
        let deflate = match &mut *cell {
            Some((k, d)) if *k == key => {
                d.reset();
                d
            }
            slot => &mut slot.insert((key, key.build())).1,
        };
        let result = deflate_into(deflate, payload, DeflateFlush::SyncFlush, scratch);
        if result.is_err() {
            // Whatever state it is in, it is not used again.
            *cell = None;
        }
        result.ok().map(|()| scratch.len() - start)
    });
    scratch.truncate(start);
    size
}

/// What the sender should do with a message the histogram calls incompressible.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Compress it as usual (the histogram found it compressible, or is not trusted now).
    Compress,
    /// Measure it with [`probe`] and report the size to [`Predictor::probed`], which
    /// says whether to compress it.
    Probe,
    /// Send it uncompressed without compressing it.
    Skip,
}

/// The per-connection state of the prediction: probe schedule and distrust.
#[derive(Clone, Debug)]
pub(super) struct Predictor {
    /// Predicted skips since the last probe.
    skipped: u32,
    /// Skips allowed before the next probe.
    interval: u32,
    /// Messages left during which the histogram is not consulted.
    distrust: u32,
}

impl Predictor {
    pub(super) fn new() -> Self {
        Predictor {
            skipped: 0,
            interval: MIN_PROBE_INTERVAL,
            distrust: 0,
        }
    }

    /// The verdict for one message (already past `min_size`).
    pub(super) fn verdict(&mut self, payload: &[u8]) -> Verdict {
        if self.distrust > 0 {
            self.distrust -= 1;
            return Verdict::Compress;
        }
        if !looks_incompressible(payload) {
            return Verdict::Compress;
        }
        if self.skipped >= self.interval {
            self.skipped = 0;
            return Verdict::Probe;
        }
        self.skipped += 1;
        Verdict::Skip
    }

    /// The outcome of a probe: `in_len` bytes deflate to `out_len` (`None`: the probe
    /// failed). Returns whether to compress the probed message.
    pub(super) fn probed(&mut self, in_len: usize, out_len: Option<usize>) -> bool {
        if out_len.is_some_and(|out| out < in_len - in_len / 8) {
            // Random-looking but repetitive: let the compressor have the next messages.
            self.distrust = DISTRUST_FOR;
            self.interval = MIN_PROBE_INTERVAL;
            true
        } else {
            self.interval = (self.interval * 2).min(MAX_PROBE_INTERVAL);
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deflate::noise::noise;

    fn json(len: usize) -> Vec<u8> {
        let mut s = String::new();
        let mut i = 0u32;
        while s.len() < len {
            s.push_str(&format!(
                r#"{{"id":{i},"name":"user{}","score":{}.{},"tags":["a","b"]}},"#,
                i * 7919 % 1000,
                i * 31 % 977,
                i % 10
            ));
            i += 1;
        }
        s.truncate(len);
        s.into_bytes()
    }

    #[test]
    fn random_bytes_look_incompressible_at_every_size_from_a_kibibyte() {
        for len in [1024, 1500, 4096, 16 << 10, 256 << 10, 1 << 20] {
            for seed in 1..20 {
                assert!(
                    looks_incompressible(&noise(len, seed)),
                    "len {len} seed {seed}"
                );
            }
        }
    }

    #[test]
    fn most_short_random_messages_look_incompressible() {
        // Fewer samples, wider band: a few misses only cost a compression each.
        let hits = (1..200u64)
            .filter(|&seed| looks_incompressible(&noise(128, seed)))
            .count();
        assert!(hits > 150, "{hits} of 199");
    }

    #[test]
    fn text_and_structured_data_look_compressible() {
        for len in [64, 128, 1024, 16 << 10, 256 << 10] {
            assert!(!looks_incompressible(&json(len)), "json {len}");
        }
        // Little-endian u32 counters: high bytes are all zero.
        let counters: Vec<u8> = (0..4096u32).flat_map(|i| i.to_le_bytes()).collect();
        assert!(!looks_incompressible(&counters));
        // Base64 of random data: 64 symbols, 6 bits per byte.
        let b64: Vec<u8> = noise(4096, 5)
            .iter()
            .map(|b| {
                b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
                    [usize::from(b & 63)]
            })
            .collect();
        assert!(!looks_incompressible(&b64));
    }

    #[test]
    fn evenly_spread_patterns_are_too_even_to_be_random() {
        let ramp: Vec<u8> = (0..8192u32).map(|i| i as u8).collect();
        assert!(!looks_incompressible(&ramp));
        let every_value: Vec<u8> = (0..=255).collect();
        assert!(!looks_incompressible(&every_value));
    }

    #[test]
    fn short_samples_are_never_called_incompressible() {
        assert!(!looks_incompressible(&noise(MIN_SAMPLE - 1, 9)));
        assert!(!looks_incompressible(b""));
    }

    #[test]
    fn predictor_probes_after_a_run_of_skips_and_backs_off() {
        let random = noise(2048, 11);
        let mut p = Predictor::new();
        for _ in 0..MIN_PROBE_INTERVAL {
            assert_eq!(p.verdict(&random), Verdict::Skip);
        }
        assert_eq!(p.verdict(&random), Verdict::Probe);
        assert!(!p.probed(2048, Some(2100)));
        for _ in 0..2 * MIN_PROBE_INTERVAL {
            assert_eq!(p.verdict(&random), Verdict::Skip);
        }
        assert_eq!(p.verdict(&random), Verdict::Probe);
    }

    #[test]
    fn predictor_stops_skipping_after_a_probe_that_compressed_well() {
        let random = noise(2048, 12);
        let mut p = Predictor::new();
        while p.verdict(&random) != Verdict::Probe {}
        assert!(p.probed(2048, Some(100)));
        for _ in 0..DISTRUST_FOR {
            assert_eq!(p.verdict(&random), Verdict::Compress);
        }
        assert_eq!(p.verdict(&random), Verdict::Skip);
    }

    #[test]
    fn probe_measures_without_keeping_output_or_history() {
        let key = Key {
            window_bits: 15,
            level: 1,
            mem_level: 8,
        };
        let mut scratch = vec![1, 2, 3];
        let repeated = noise(1024, 14).repeat(8);
        let once = probe(&repeated, key, &mut scratch).unwrap();
        assert!(once < 2048, "{once}");
        assert_eq!(scratch, [1, 2, 3]);
        // Reset between probes: the same message measures the same, not as a repeat.
        assert_eq!(probe(&repeated, key, &mut scratch), Some(once));
        let random = noise(4096, 15);
        assert!(probe(&random, key, &mut scratch).unwrap() >= 4096);
        // Another key gets its own compressor.
        let small = Key {
            window_bits: 9,
            ..key
        };
        assert!(probe(&repeated, small, &mut scratch).unwrap() >= 4096);
    }

    #[test]
    fn probe_interval_is_capped() {
        let mut p = Predictor::new();
        for _ in 0..20 {
            assert!(!p.probed(1000, None));
        }
        assert_eq!(p.interval, MAX_PROBE_INTERVAL);
    }

    #[test]
    fn compressible_messages_do_not_count_towards_a_probe() {
        let random = noise(2048, 13);
        let text = json(2048);
        let mut p = Predictor::new();
        for _ in 0..MIN_PROBE_INTERVAL {
            assert_eq!(p.verdict(&random), Verdict::Skip);
            assert_eq!(p.verdict(&text), Verdict::Compress);
        }
        assert_eq!(p.verdict(&random), Verdict::Probe);
    }
}
