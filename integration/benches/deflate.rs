//! permessage-deflate per message: rapidws (zlib-rs) against flate2 (miniz_oxide, its
//! default backend, as used by the peers) in the same run, with and without context
//! takeover, on JSON-like messages of 1 KiB, 16 KiB and 256 KiB. Both at level 1, raw
//! DEFLATE, sync flush, trailer removed/restored as RFC 7692 7.2 says.
//!
//! `cargo bench -p rapidws-integration --bench deflate -- --warm-up-time 1 --measurement-time 2`

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress};
use rapidws::Role;
use rapidws::deflate::{DeflateConfig, DeflateParams, PerMessageDeflate};

const SIZES: [usize; 3] = [1024, 16 * 1024, 256 * 1024];
/// Messages per stream: at least 16, and enough that a cycle (128 KiB or more) outgrows the
/// 32 KiB window, so that takeover never finds a whole earlier copy of the same message.
fn stream_len(size: usize) -> usize {
    (128 * 1024 / size).max(16)
}

/// A JSON-like message: an array of small records with varying numbers and names.
fn json_message(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 128);
    out.push(b'[');
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let record = format!(
            "{{\"id\":{},\"user\":\"user{}\",\"score\":{}.{},\"active\":{},\"tags\":[\"t{}\",\"t{}\"]}},",
            x % 100_000,
            x % 977,
            x % 1000,
            x % 97,
            x.is_multiple_of(3),
            x % 13,
            x % 29
        );
        out.extend_from_slice(record.as_bytes());
    }
    out.truncate(len);
    out
}

fn params(no_takeover: bool) -> DeflateParams {
    DeflateParams {
        server_no_context_takeover: no_takeover,
        client_no_context_takeover: no_takeover,
        server_max_window_bits: 15,
        client_max_window_bits: 15,
    }
}

fn config() -> DeflateConfig {
    DeflateConfig::new().min_size(0).level(1)
}

/// flate2's permessage-deflate sender: raw DEFLATE, sync flush, trailer removed.
fn flate2_compress(c: &mut Compress, msg: &[u8], out: &mut Vec<u8>, reset: bool) {
    out.clear();
    out.reserve(msg.len() + msg.len() / 16 + 64);
    let start_in = c.total_in();
    loop {
        let done = (c.total_in() - start_in) as usize;
        if out.len() == out.capacity() {
            out.reserve(out.capacity());
        }
        c.compress_vec(&msg[done..], out, FlushCompress::Sync)
            .unwrap();
        if (c.total_in() - start_in) as usize == msg.len() && out.len() < out.capacity() {
            break;
        }
    }
    assert!(out.ends_with(&[0, 0, 0xff, 0xff]));
    out.truncate(out.len() - 4);
    if reset {
        c.reset();
    }
}

/// flate2's receiver: payload plus the trailer, inflated into a Vec it grows as needed.
fn flate2_decompress(d: &mut Decompress, frame: &[u8], out: &mut Vec<u8>, reset: bool) {
    out.clear();
    for input in [frame, &[0, 0, 0xff, 0xff]] {
        let start_in = d.total_in();
        loop {
            if out.len() == out.capacity() {
                out.reserve(out.capacity().max(4096));
            }
            let done = (d.total_in() - start_in) as usize;
            d.decompress_vec(&input[done..], out, FlushDecompress::Sync)
                .unwrap();
            if (d.total_in() - start_in) as usize == input.len() && out.len() < out.capacity() {
                break;
            }
        }
    }
    if reset {
        d.reset(false);
    }
}

/// The compressed stream of `messages` as our compressor sends it.
fn rapidws_stream(messages: &[Vec<u8>], no_takeover: bool) -> Vec<Vec<u8>> {
    let mut codec = PerMessageDeflate::new(Role::Server, params(no_takeover), &config());
    messages
        .iter()
        .map(|m| {
            let mut out = Vec::new();
            assert!(codec.compress(m, &mut out).unwrap());
            out
        })
        .collect()
}

fn flate2_stream(messages: &[Vec<u8>], no_takeover: bool) -> Vec<Vec<u8>> {
    let mut c = Compress::new(Compression::new(1), false);
    messages
        .iter()
        .map(|m| {
            let mut out = Vec::new();
            flate2_compress(&mut c, m, &mut out, no_takeover);
            out
        })
        .collect()
}

fn ratios(messages: &[Vec<u8>]) {
    let raw: usize = messages.iter().map(Vec::len).sum();
    for (name, stream) in [
        ("rapidws takeover", rapidws_stream(messages, false)),
        ("rapidws no-takeover", rapidws_stream(messages, true)),
        ("flate2 takeover", flate2_stream(messages, false)),
        ("flate2 no-takeover", flate2_stream(messages, true)),
    ] {
        let packed: usize = stream.iter().map(Vec::len).sum();
        eprintln!(
            "ratio {:>7} B msgs, {name:<20}: {:.2}% of original",
            messages[0].len(),
            100.0 * packed as f64 / raw as f64
        );
    }
}

fn bench(c: &mut Criterion) {
    for size in SIZES {
        let n = stream_len(size);
        let messages: Vec<Vec<u8>> = (0..n as u64).map(|s| json_message(size, s)).collect();
        ratios(&messages);

        let mut group = c.benchmark_group(format!("deflate/compress/{size}"));
        group.throughput(Throughput::Bytes(size as u64));
        for no_takeover in [false, true] {
            let mode = if no_takeover {
                "no_takeover"
            } else {
                "takeover"
            };
            group.bench_function(BenchmarkId::new("rapidws", mode), |b| {
                let mut codec =
                    PerMessageDeflate::new(Role::Server, params(no_takeover), &config());
                let mut out = Vec::with_capacity(size + size / 8 + 64);
                let mut i = 0;
                b.iter(|| {
                    out.clear();
                    black_box(codec.compress(&messages[i % n], &mut out).unwrap());
                    i += 1;
                    out.len()
                });
            });
            group.bench_function(BenchmarkId::new("flate2", mode), |b| {
                let mut comp = Compress::new(Compression::new(1), false);
                let mut out = Vec::with_capacity(size + size / 8 + 64);
                let mut i = 0;
                b.iter(|| {
                    flate2_compress(&mut comp, &messages[i % n], &mut out, no_takeover);
                    i += 1;
                    out.len()
                });
            });
        }
        group.finish();

        let mut group = c.benchmark_group(format!("deflate/inflate/{size}"));
        group.throughput(Throughput::Bytes(size as u64));
        for no_takeover in [false, true] {
            let mode = if no_takeover {
                "no_takeover"
            } else {
                "takeover"
            };
            // Both inflate the same wire bytes (ours), in stream order so takeover holds.
            let stream = rapidws_stream(&messages, no_takeover);
            group.bench_function(BenchmarkId::new("rapidws", mode), |b| {
                let mut codec =
                    PerMessageDeflate::new(Role::Client, params(no_takeover), &config());
                let mut out = Vec::with_capacity(size);
                let mut i = 0;
                b.iter(|| {
                    out.clear();
                    codec
                        .decompress(&stream[i % n], true, &mut out, 1 << 24)
                        .unwrap();
                    i += 1;
                    out.len()
                });
            });
            group.bench_function(BenchmarkId::new("flate2", mode), |b| {
                let mut d = Decompress::new(false);
                let mut out = Vec::with_capacity(size);
                let mut i = 0;
                b.iter(|| {
                    flate2_decompress(&mut d, &stream[i % n], &mut out, false);
                    i += 1;
                    out.len()
                });
            });
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
