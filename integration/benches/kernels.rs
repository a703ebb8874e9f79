//! Kernel benchmarks: masking, UTF-8 (one-shot, unmask+validate), frame scanning and the
//! batch decoder, per backend and auto-dispatch, against peers in the same run.
//!
//! Full run: `cargo bench -p rapidws-integration --bench kernels`. Filter with a regex, e.g.
//! `cargo bench -p rapidws-integration --bench kernels -- 'mask/(16|128)B'` or `-- utf8/mixed`.
//! Timing is kept short (0.2 s warm-up, 0.6 s measurement, 20 samples per point).

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rapidws_simd::{Backend, frame, mask, utf8};

#[path = "support/corpus.rs"]
mod corpus;
use corpus::mixed_corpus;
#[path = "support/reads.rs"]
mod reads;

const SIZES: &[usize] = &[2, 16, 64, 125, 128, 1 << 10, 16 << 10, 256 << 10, 1 << 20];
/// Text corpora are larger than L2, and the benches rotate through distinct slices.
const CORPUS: usize = 8 << 20;
const KEY: [u8; 4] = [0x37, 0xfa, 0x21, 0x3d];

fn label(n: usize) -> String {
    if n >= 1 << 20 {
        format!("{}MiB", n >> 20)
    } else if n >= 1 << 10 {
        format!("{}KiB", n >> 10)
    } else {
        format!("{n}B")
    }
}

fn backends() -> Vec<Backend> {
    Backend::ALL
        .into_iter()
        .filter(|b| b.is_available())
        .collect()
}

/// A 64-byte aligned window of `n` bytes in `store`, shifted by `shift`.
fn window(store: &mut [u8], n: usize, shift: usize) -> &mut [u8] {
    let a = store.as_ptr().align_offset(64) + shift;
    &mut store[a..a + n]
}

fn bench_mask(c: &mut Criterion) {
    let mut store = vec![0x5Au8; (1 << 20) + 256];
    let mut src = vec![0xA5u8; (1 << 20) + 256];
    for &n in SIZES {
        for shift in [0usize, 1] {
            let name = format!(
                "mask/{}{}",
                label(n),
                if shift == 0 { "" } else { "/misaligned" }
            );
            let mut g = c.benchmark_group(&name);
            g.throughput(Throughput::Bytes(n as u64));
            for b in backends() {
                // A fresh key per call, as each frame brings its own: carrying one key
                // variable across calls would time a store-to-load chain through the key
                // that no frame has, and fastwebsockets takes the key by value.
                g.bench_function(b.name(), |bench| {
                    let buf = window(&mut store, n, shift);
                    bench.iter(|| mask::apply_with(b, black_box(&mut *buf), &mut black_box(KEY)));
                });
            }
            g.bench_function("auto", |bench| {
                let buf = window(&mut store, n, shift);
                bench.iter(|| mask::apply(black_box(&mut *buf), &mut black_box(KEY)));
            });
            g.bench_function("fastwebsockets", |bench| {
                let buf = window(&mut store, n, shift);
                bench.iter(|| fastwebsockets::unmask(black_box(&mut *buf), black_box(KEY)));
            });
            g.bench_function("copy_auto", |bench| {
                let s = window(&mut src, n, 0).to_vec();
                let buf = window(&mut store, n, shift);
                bench.iter(|| mask::copy(black_box(&mut *buf), black_box(&s), &mut black_box(KEY)));
            });
            g.bench_function("copy_from_slice", |bench| {
                let s = window(&mut src, n, 0).to_vec();
                let buf = window(&mut store, n, shift);
                bench.iter(|| black_box(&mut *buf).copy_from_slice(black_box(&s)));
            });
            g.finish();
        }
    }
}

/// Start/end offsets of distinct valid slices of about `n` bytes covering `text`.
fn slices(text: &str, n: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    while start + n <= text.len() && out.len() < 1 << 16 {
        let mut s = start;
        while !text.is_char_boundary(s) {
            s += 1;
        }
        let mut e = (s + n).min(text.len());
        while !text.is_char_boundary(e) {
            e -= 1;
        }
        out.push((s, e));
        start += n.max(64);
    }
    out
}

fn bench_utf8(c: &mut Criterion) {
    let mixed = mixed_corpus(CORPUS);
    let non_ascii = mixed.bytes().filter(|b| *b >= 0x80).count();
    eprintln!(
        "mixed corpus: {:.1}% non-ASCII bytes",
        100.0 * non_ascii as f64 / mixed.len() as f64
    );
    let ascii: String = mixed
        .chars()
        .map(|c| if c.is_ascii() { c } else { 'x' })
        .collect();
    for (kind, text) in [("ascii", &ascii), ("mixed", &mixed)] {
        for &n in SIZES {
            let sl = slices(text, n);
            let bytes = text.as_bytes();
            let mut g = c.benchmark_group(format!("utf8/{kind}/{}", label(n)));
            g.throughput(Throughput::Bytes(n as u64));
            let run =
                |g: &mut criterion::BenchmarkGroup<'_, _>, id: &str, f: &dyn Fn(&[u8]) -> bool| {
                    g.bench_function(id, |bench| {
                        let mut i = 0;
                        bench.iter(|| {
                            let (s, e) = sl[i];
                            i = if i + 1 == sl.len() { 0 } else { i + 1 };
                            assert!(f(black_box(&bytes[s..e])));
                        });
                    });
                };
            for b in backends() {
                run(&mut g, b.name(), &|x| {
                    utf8::validate_with(b, x).unwrap().is_ok()
                });
            }
            run(&mut g, "auto", &|x| utf8::validate(x).is_ok());
            run(&mut g, "simdutf8_basic", &|x| {
                simdutf8::basic::from_utf8(x).is_ok()
            });
            run(&mut g, "simdutf8_compat", &|x| {
                simdutf8::compat::from_utf8(x).is_ok()
            });
            run(&mut g, "std", &|x| std::str::from_utf8(x).is_ok());
            g.finish();
        }
    }
}

/// `utf8::unmask_validate` (the two passes themselves) against unmasking
/// then validating written out, and against fastwebsockets then simdutf8.
fn bench_fused(c: &mut Criterion) {
    let text = mixed_corpus(1 << 20);
    for n in [125usize, 1 << 10, 16 << 10, 256 << 10] {
        let mut e = n;
        while !text.is_char_boundary(e) {
            e -= 1;
        }
        let mut masked = text.as_bytes()[..e].to_vec();
        let mut k = KEY;
        mask::apply(&mut masked, &mut k);
        let mut g = c.benchmark_group(format!("unmask_validate/mixed/{}", label(n)));
        g.throughput(Throughput::Bytes(e as u64));
        let mut buf = masked.clone();
        g.bench_function("fused", |bench| {
            bench.iter(|| {
                buf.copy_from_slice(&masked);
                let mut key = KEY;
                let mut v = utf8::Validator::new();
                utf8::unmask_validate(black_box(&mut buf), &mut key, &mut v).unwrap();
                v.finish().unwrap();
            });
        });
        g.bench_function("mask_then_validate", |bench| {
            bench.iter(|| {
                buf.copy_from_slice(&masked);
                let mut key = KEY;
                mask::apply(black_box(&mut buf), &mut key);
                let mut v = utf8::Validator::new();
                v.feed(&buf).unwrap();
                v.finish().unwrap();
            });
        });
        g.bench_function("fastwebsockets_unmask_then_simdutf8", |bench| {
            bench.iter(|| {
                buf.copy_from_slice(&masked);
                fastwebsockets::unmask(black_box(&mut buf), KEY);
                simdutf8::basic::from_utf8(&buf).unwrap();
            });
        });
        g.finish();
    }
}

/// 512 KiB of back-to-back binary frames, masked or not, of `payload` bytes each, or
/// (`payload == 0`) of 50 to 500 bytes drawn at random, as a market-data feed's JSON
/// messages are: more length-class changes in a row than a branch predictor learns.
fn frames(payload: usize, masked: bool) -> (Vec<u8>, usize) {
    let mut buf = Vec::new();
    let mut count = 0;
    let mut x = 7u32;
    loop {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        let len = if payload == 0 {
            50 + (x >> 16) as usize % 451
        } else {
            payload
        };
        let start = buf.len();
        buf.push(0x82);
        let m = if masked { 0x80 } else { 0 };
        if len < 126 {
            buf.push(m | len as u8);
        } else {
            buf.push(m | 126);
            buf.extend_from_slice(&(len as u16).to_be_bytes());
        }
        if masked {
            buf.extend_from_slice(&KEY);
        }
        buf.resize(buf.len() + len, b'a');
        if buf.len() > 512 << 10 {
            buf.truncate(start);
            return (buf, count);
        }
        count += 1;
    }
}

/// `frame::scan` per backend over a buffer of many small frames, 32 headers per call as
/// the decoder's batches take them.
fn bench_scan(c: &mut Criterion) {
    for payload in [64usize, 256, 0] {
        for masked in [false, true] {
            let (buf, count) = frames(payload, masked);
            let size = if payload == 0 {
                "50-500B".to_string()
            } else {
                label(payload)
            };
            let name = format!("scan/{size}{}", if masked { "/masked" } else { "" });
            let mut g = c.benchmark_group(&name);
            g.throughput(Throughput::Elements(count as u64));
            let mut out = [frame::FrameHeader::default(); 32];
            for b in backends() {
                g.bench_function(BenchmarkId::from_parameter(b.name()), |bench| {
                    bench.iter(|| {
                        let mut pos = 0;
                        let mut seen = 0;
                        while seen < count {
                            let s = frame::scan_with(b, black_box(&buf[pos..]), &mut out).unwrap();
                            pos += s.consumed;
                            seen += s.frames;
                        }
                    });
                });
            }
            g.finish();
        }
    }
}

/// The batch decoder (`frame::decode`) over a read of 64 KiB of text frames of 2 to 512
/// bytes, masked and not, per backend and auto, against the frame-by-frame path through
/// the public entries (`reads::frame_by_frame`) and our `codec::Decoder` frame by frame.
/// Throughput in frames.
fn bench_batch(c: &mut Criterion) {
    use rapidws::Role;
    use rapidws::codec::{Decoder, DecoderConfig};
    for payload in [2usize, 5, 16, 64, 128, 512] {
        for masked in [false, true] {
            let (wire, count) = reads::read(payload, masked, false, false, 64 << 10);
            let rules = reads::rules(masked);
            let name = format!(
                "batch/{}{}",
                label(payload),
                if masked { "/masked" } else { "" }
            );
            let mut g = c.benchmark_group(&name);
            g.throughput(Throughput::Elements(count as u64));
            let mut buf = wire.clone();
            for b in backends() {
                g.bench_function(b.name(), |bench| {
                    bench.iter(|| reads::batch(Some(b), black_box(&mut buf), &rules));
                });
            }
            g.bench_function("auto", |bench| {
                bench.iter(|| reads::batch(None, black_box(&mut buf), &rules));
            });
            g.bench_function("frame_by_frame", |bench| {
                bench.iter(|| reads::frame_by_frame(black_box(&mut buf), &rules));
            });
            let role = if masked { Role::Server } else { Role::Client };
            let mut dec = Decoder::new(DecoderConfig::new(role));
            g.bench_function("decoder", |bench| {
                bench.iter(|| {
                    let mut pos = 0;
                    while pos < buf.len() {
                        pos += dec
                            .decode(black_box(&mut buf[pos..]))
                            .map_or(buf.len(), |d| d.consumed);
                    }
                });
            });
            g.finish();
        }
    }
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(200))
        .measurement_time(Duration::from_millis(600))
        .sample_size(20)
        .without_plots()
}

criterion_group! {
    name = kernels;
    config = config();
    targets = bench_mask, bench_utf8, bench_fused, bench_scan, bench_batch
}
criterion_main!(kernels);
