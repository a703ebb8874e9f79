//! Bytes held per compressor and per decompressor, measured with a counting allocator.
//! Run with `--nocapture` to see the table (it is recorded in benches/RESULTS.md).
#![cfg(feature = "deflate")]

use rapidws::Role;
use rapidws::deflate::{DeflateConfig, DeflateParams, PerMessageDeflate};

mod alloc_count;

/// Heap bytes live in the process now.
fn live() -> isize {
    alloc_count::live_heap() as isize
}

fn params(bits: u8) -> DeflateParams {
    DeflateParams {
        server_no_context_takeover: false,
        client_no_context_takeover: false,
        server_max_window_bits: bits,
        client_max_window_bits: bits,
    }
}

/// Distinct JSON-like messages, so that a compressor's history fills as a server's does.
fn messages(count: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|i| {
            format!("{{\"id\":{i},\"name\":\"memory {}\"}}", i * 7919)
                .repeat(40)
                .into_bytes()
        })
        .collect()
}

/// Live bytes held by a codec after it has compressed (or only inflated) `count` messages.
fn held(bits: u8, level: i32, mem_level: u8, compress: bool, count: usize) -> isize {
    let cfg = DeflateConfig::new()
        .min_size(0)
        .level(level)
        .mem_level(mem_level);
    let msgs = messages(count);
    let mut sender = PerMessageDeflate::new(Role::Client, params(bits), &cfg);
    let mut frames = Vec::new();
    for msg in &msgs {
        let mut frame = Vec::new();
        assert!(sender.compress(msg, &mut frame).unwrap());
        frames.push(frame);
    }
    let mut out = Vec::with_capacity(msgs[0].len());
    let mut sent = Vec::with_capacity(2 * msgs[0].len() + 64);
    let before = live();
    let mut codec = PerMessageDeflate::new(Role::Server, params(bits), &cfg);
    if compress {
        for msg in &msgs {
            sent.clear();
            assert!(codec.compress(msg, &mut sent).unwrap());
        }
        let held = live() - before;
        drop(codec);
        held
    } else {
        for (frame, msg) in frames.iter().zip(&msgs) {
            out.clear();
            codec.decompress(frame, true, &mut out, usize::MAX).unwrap();
            assert_eq!(&out, msg);
        }
        let held = live() - before;
        drop(codec);
        held
    }
}

/// One test only: the counter is global, and a second test (or the harness reporting it)
/// would allocate at the same time.
#[test]
fn codec_memory_is_lazy_bounded_and_shrinks_with_the_compressor_window() {
    let before = live();
    let codec = PerMessageDeflate::new(Role::Server, params(15), &DeflateConfig::default());
    assert_eq!(live(), before, "nothing is allocated before use");
    drop(codec);

    // Level 1 is our own compressor (a 64 Ki-byte history at most, 8 KiB of hash head);
    // other levels are zlib-rs. After 1 message and after 200 (about 200 KiB: the history
    // is full).
    println!(
        "| level | window bits | mem_level | compressor, 1 msg | compressor, 200 msgs | decompressor |"
    );
    println!("|---|---|---|---|---|---|");
    let mut rows = Vec::new();
    for (level, bits, mem) in [
        (1, 15u8, 8u8),
        (1, 12, 8),
        (1, 9, 8),
        (2, 15, 8),
        (2, 15, 9),
        (2, 15, 1),
        (2, 12, 8),
        (2, 9, 8),
        (2, 9, 1),
    ] {
        let c1 = held(bits, level, mem, true, 1);
        let c = held(bits, level, mem, true, 200);
        let d = held(bits, level, mem, false, 200);
        println!("| {level} | {bits} | {mem} | {c1} | {c} | {d} |");
        rows.push((level, bits, c1, c, d));
    }
    let (_, _, ours1, ours, d15) = rows[0];
    // Ours: 8 KiB of hash head and the history, which grows with what was sent up to
    // 32 KiB of window plus one 32 KiB block.
    assert!(ours1 < 16 * 1024, "{ours1}");
    assert!(ours > 64 * 1024 && ours <= 80 * 1024, "{ours}");
    let (_, _, _, ours9, _) = rows[2];
    assert!(ours9 < ours, "{ours9}");
    // zlib-rs 0.6 inflate: state plus a 32 KiB window, whatever the window bits.
    assert!(d15 > 32 * 1024 && d15 < 64 * 1024, "{d15}");
    let (_, _, _, z15, _) = rows[3];
    // zlib-rs: 2 windows + prev chain + 64 Ki-entry hash head + pending/symbol buffers.
    assert!(z15 > 256 * 1024 && z15 < 400 * 1024, "{z15}");
    let (_, _, _, z9, d9) = rows[8];
    assert!(z9 < z15 / 2, "{z9}");
    assert_eq!(d9, d15);

    // A codec that only sends incompressible data never creates its compressor: skipped
    // messages do not touch it, and the probe (after 16 skips) runs on the thread's
    // scratch compressor, which the first round creates and the thread keeps.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let noise: Vec<u8> = (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    let mut held_per_round = Vec::new();
    for _ in 0..2 {
        let mut out = Vec::with_capacity(2 * noise.len());
        let before = live();
        let mut codec = PerMessageDeflate::new(Role::Server, params(15), &DeflateConfig::new());
        for _ in 0..40 {
            assert!(!codec.compress(&noise, &mut out).unwrap());
        }
        held_per_round.push(live() - before);
        drop(codec);
    }
    println!("incompressible only, live bytes per round: {held_per_round:?}");
    // The first round creates the thread's scratch (level 1: our compressor, under 80 KiB).
    assert!(
        held_per_round[0] > 0 && held_per_round[0] < 80 * 1024,
        "{held_per_round:?}"
    );
    assert_eq!(held_per_round[1], 0, "the codec allocated");
}
