//! Kernel timings that a busy machine cannot inflate: the minimum, over many rounds, of the
//! mean time of a batch of calls, every contender of a point interleaved round by round. A
//! round that the scheduler interrupts is slow and is never the minimum, so the ratio of
//! two minima holds where criterion's medians swing by 2x.
//!
//! What it measures is what users get:
//! - inputs of exactly the size named, many distinct ones per size (up to 4,096, at most
//!   512 KiB in all, so they stay in L2 as a frame that was just received does), taken in
//!   turn, so the branch predictor cannot learn them; UTF-8 inputs are generated valid at
//!   exactly that size, never cut back to a character boundary;
//! - every contender, ours and the peers', called through a `black_box`ed function pointer
//!   to an `#[inline(never)]` function, so none is inlined into the timing loop;
//! - `copy_from_slice` of the same size as the physical reference (a kernel that reads and
//!   writes every byte once cannot beat it by much);
//! - masking with a fresh key per call at rotating key phases, with the payload at a
//!   64-byte aligned address and one byte past it.
//!
//! `cargo bench -p rapidws-integration --bench kernels_min [-- FILTER]` (FILTER: a
//! substring of the point names, such as `utf8/mixed`, `mask/`, `frame/`, `scan/` or
//! `batch/`).

use std::hint::black_box;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use rapidws_simd::{Backend, frame, mask, utf8};

#[path = "support/corpus.rs"]
mod corpus;
use corpus::mixed_corpus;
#[path = "support/reads.rs"]
mod reads;

/// Distinct inputs per point take at most this many bytes in all.
const POOL: usize = 512 << 10;
/// And there are at most this many of them.
const MAX_INPUTS: usize = 4096;

fn label(n: usize) -> String {
    if n >= 1 << 20 {
        format!("{}MiB", n >> 20)
    } else if n >= 1 << 10 {
        format!("{}KiB", n >> 10)
    } else {
        format!("{n}B")
    }
}

/// Calls per timed batch and rounds per point for inputs of `n` bytes: about 256 KiB of
/// work per batch (at most 1,000 calls), fewer rounds for the largest inputs. A whole run
/// takes about half a minute.
fn plan(n: usize) -> (usize, usize) {
    let batch = ((256 << 10) / n.max(1)).clamp(1, 1000);
    let rounds = if n >= 16 << 20 {
        30
    } else if n >= 1 << 20 {
        100
    } else {
        1000
    };
    (batch, rounds)
}

/// Minimum over rounds of ns per call for each contender, measured in interleaved rounds.
/// `call(f, i)` runs contender `f` on input `i`; inputs are taken in turn. The timing loop
/// is compiled once per kind of kernel and calls each contender through its pointer.
fn min_times<F: Copy>(
    contenders: &[F],
    inputs: usize,
    n: usize,
    mut call: impl FnMut(F, usize),
) -> Vec<f64> {
    let (batch, rounds) = plan(n);
    let mut best = vec![f64::MAX; contenders.len()];
    let mut next = vec![0usize; contenders.len()];
    let mut order: Vec<usize> = (0..contenders.len()).collect();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..rounds {
        // A new order every round, so that no contender always runs right after the same
        // one (the memcpy reference, say, which leaves the caches in its own state: a
        // rotation would keep every contender's predecessor).
        for k in (1..order.len()).rev() {
            order.swap(k, rng.below(k + 1));
        }
        for &c in &order {
            let f = contenders[c];
            let f = black_box(f);
            let mut i = next[c];
            let s = Instant::now();
            for _ in 0..batch {
                call(f, i);
                // Not `(i + 1) % inputs`: a division is a 15-cycle chain from one call to
                // the next.
                i = if i + 1 == inputs { 0 } else { i + 1 };
            }
            let t = s.elapsed().as_nanos() as f64 / batch as f64;
            next[c] = i;
            best[c] = best[c].min(t);
        }
    }
    best
}

/// How many distinct inputs of `n` bytes a point rotates through.
fn input_count(n: usize) -> usize {
    (POOL / n.max(1)).clamp(1, MAX_INPUTS)
}

/// A tiny deterministic PRNG (xorshift64), so runs use the same inputs.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Valid UTF-8 of exactly `n` bytes: characters of `text` from a random character
/// boundary on, and where the next one would not fit, one of exactly the bytes left
/// (' ', 'é', '世'), so nothing is cut and the mix of widths stays that of `text`.
fn exact_text(text: &str, n: usize, rng: &mut Rng) -> Vec<u8> {
    let mut start = rng.below(text.len() - 4 * n.min(1 << 20) - 64);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let mut out = Vec::with_capacity(n);
    let mut chars = text[start..].chars().cycle();
    while out.len() < n {
        let c = chars.next().unwrap_or(' ');
        let left = n - out.len();
        let c = if c.len_utf8() <= left {
            c
        } else {
            [' ', '\u{e9}', '\u{4e16}'][left - 1]
        };
        let mut b = [0; 4];
        out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
    }
    debug_assert!(std::str::from_utf8(&out).is_ok() && out.len() == n);
    out
}

/// `count` inputs of exactly `n` bytes, back to back in one buffer, each starting 64-byte
/// aligned plus `shift`. Returns the buffer and the start of each input.
struct Inputs {
    store: Vec<u8>,
    starts: Vec<usize>,
    n: usize,
}

impl Inputs {
    fn new(count: usize, n: usize, shift: usize, mut fill: impl FnMut(&mut [u8])) -> Self {
        let stride = (n + shift).next_multiple_of(64) + 64;
        let mut store = vec![0u8; count * stride + 128];
        let base = store.as_ptr().align_offset(64);
        let starts: Vec<usize> = (0..count).map(|i| base + i * stride + shift).collect();
        for &s in &starts {
            fill(&mut store[s..s + n]);
        }
        Inputs { store, starts, n }
    }
    fn get(&self, i: usize) -> &[u8] {
        &self.store[self.starts[i]..self.starts[i] + self.n]
    }
    fn get_mut(&mut self, i: usize) -> &mut [u8] {
        let s = self.starts[i];
        &mut self.store[s..s + self.n]
    }
}

/// Prints a row: the point's name, each contender's ns, and our (first contender's)
/// speed against the fastest peer (the contenders from `peers_from` on, except the
/// last, which is the memcpy reference).
fn row(name: &str, names: &[&str], t: &[f64], peers_from: usize) {
    let mut s = format!("{name:26}");
    for (n, v) in names.iter().zip(t) {
        s += &format!(" {n}={v:.1}");
    }
    let best_peer = t[peers_from..t.len() - 1]
        .iter()
        .copied()
        .fold(f64::MAX, f64::min);
    s += &format!("  ratio={:.2}", best_peer / t[0]);
    println!("{s}");
}

// ---- contenders: each an out-of-line function, called through a black-boxed pointer ----

/// Masks `buf` (or, for the memcpy reference, copies `src` into it).
type MaskFn = fn(&mut [u8], &[u8], [u8; 4]);
/// Validates `src` (or, for the memcpy reference, copies it into `dst`).
type Utf8Fn = fn(&mut [u8], &[u8]) -> bool;

#[inline(never)]
fn ours_mask(buf: &mut [u8], _: &[u8], key: [u8; 4]) {
    mask::apply(buf, &mut { key });
}
#[inline(never)]
fn avx512_mask(buf: &mut [u8], _: &[u8], key: [u8; 4]) {
    mask::apply_with(Backend::Avx512, buf, &mut { key });
}
#[inline(never)]
fn avx2_mask(buf: &mut [u8], _: &[u8], key: [u8; 4]) {
    mask::apply_with(Backend::Avx2, buf, &mut { key });
}
#[inline(never)]
fn scalar_mask(buf: &mut [u8], _: &[u8], key: [u8; 4]) {
    mask::apply_with(Backend::Scalar, buf, &mut { key });
}
#[inline(never)]
fn fws_mask(buf: &mut [u8], _: &[u8], key: [u8; 4]) {
    fastwebsockets::unmask(buf, key);
}
#[inline(never)]
fn memcpy_mask(dst: &mut [u8], src: &[u8], _: [u8; 4]) {
    dst.copy_from_slice(src);
}
#[inline(never)]
fn ours_utf8(_: &mut [u8], b: &[u8]) -> bool {
    utf8::validate(b).is_ok()
}
#[inline(never)]
fn avx512_utf8(_: &mut [u8], b: &[u8]) -> bool {
    matches!(utf8::validate_with(Backend::Avx512, b), Some(Ok(())))
}
#[inline(never)]
fn avx2_utf8(_: &mut [u8], b: &[u8]) -> bool {
    matches!(utf8::validate_with(Backend::Avx2, b), Some(Ok(())))
}
#[inline(never)]
fn simdutf8_basic(_: &mut [u8], b: &[u8]) -> bool {
    simdutf8::basic::from_utf8(b).is_ok()
}
#[inline(never)]
fn std_utf8(_: &mut [u8], b: &[u8]) -> bool {
    std::str::from_utf8(b).is_ok()
}
#[inline(never)]
fn memcpy_utf8(dst: &mut [u8], src: &[u8]) -> bool {
    dst.copy_from_slice(src);
    true
}
#[inline(never)]
fn ours_feed(_: &mut [u8], b: &[u8]) -> bool {
    let mut v = utf8::Validator::new();
    v.feed(b).is_ok() && v.finish().is_ok()
}

fn bench_mask(want: &dyn Fn(&str) -> bool) {
    let sizes = [
        2usize,
        16,
        64,
        125,
        128,
        256,
        1 << 10,
        16 << 10,
        256 << 10,
        1 << 20,
        16 << 20,
        64 << 20,
    ];
    let mut all: Vec<(&str, MaskFn)> = vec![("auto", ours_mask)];
    for (b, f) in [
        (Backend::Avx512, avx512_mask as MaskFn),
        (Backend::Avx2, avx2_mask),
        (Backend::Scalar, scalar_mask),
    ] {
        if b.is_available() {
            all.push((b.name(), f));
        }
    }
    let peers_from = all.len();
    all.push(("fastwebsockets", fws_mask));
    all.push(("memcpy", memcpy_mask));
    let names: Vec<&str> = all.iter().map(|c| c.0).collect();
    let fns: Vec<MaskFn> = all.iter().map(|c| c.1).collect();
    for n in sizes {
        for shift in [0usize, 1] {
            let name = format!(
                "mask/{}{}",
                label(n),
                if shift == 1 { "/misaligned" } else { "" }
            );
            if !want(&name) {
                continue;
            }
            let count = input_count(n);
            let mut rng = Rng(n as u64 * 2 + shift as u64 + 1);
            let mut bufs = Inputs::new(count, n, shift, |b| {
                b.iter_mut().for_each(|x| *x = rng.next() as u8)
            });
            let src = Inputs::new(count, n, 0, |b| b.fill(0x5A));
            let keys: [[u8; 4]; 4] = [
                [0x37, 0xfa, 0x21, 0x3d],
                [0xfa, 0x21, 0x3d, 0x37],
                [0x21, 0x3d, 0x37, 0xfa],
                [0x3d, 0x37, 0xfa, 0x21],
            ];
            let t = min_times(&fns, count, n, |f, i| {
                f(bufs.get_mut(i), src.get(i), keys[i & 3])
            });
            row(&name, &names, &t, peers_from);
        }
    }
}

/// `text` with every `n`th non-ASCII character kept and the others replaced by `x`
/// (`n == 0`: none kept, all ASCII).
fn keep_every(text: &str, n: usize) -> String {
    let mut seen = 0;
    text.chars()
        .map(|c| {
            if c.is_ascii() {
                return c;
            }
            seen += 1;
            if n != 0 && seen % n == 0 { c } else { 'x' }
        })
        .collect()
}

fn bench_utf8(want: &dyn Fn(&str) -> bool) {
    let mixed = mixed_corpus(8 << 20);
    let ascii = keep_every(&mixed, 0);
    // Mostly ASCII with a non-ASCII character now and then (every 16th of the mixed
    // text's, about 2% of the bytes): English chat with a name or an emoji.
    let sparse = keep_every(&mixed, 16);
    // Every 256th: one non-ASCII character in about 3 KiB, where a kernel that goes on
    // checking after a non-ASCII stretch would lose ASCII's fast path.
    let rare = keep_every(&mixed, 256);
    let sizes = [
        16usize,
        32,
        64,
        128,
        256,
        1 << 10,
        16 << 10,
        256 << 10,
        1 << 20,
    ];
    let mut all: Vec<(&str, Utf8Fn)> = vec![("auto", ours_utf8)];
    for (b, f) in [
        (Backend::Avx512, avx512_utf8 as Utf8Fn),
        (Backend::Avx2, avx2_utf8),
    ] {
        if b.is_available() {
            all.push((b.name(), f));
        }
    }
    let peers_from = all.len();
    all.push(("simdutf8", simdutf8_basic));
    all.push(("std", std_utf8));
    all.push(("memcpy", memcpy_utf8));
    let names: Vec<&str> = all.iter().map(|c| c.0).collect();
    let fns: Vec<Utf8Fn> = all.iter().map(|c| c.1).collect();
    let streaming: [Utf8Fn; 3] = [ours_feed, ours_utf8, memcpy_utf8];
    for (kind, text) in [
        ("mixed", &mixed),
        ("sparse", &sparse),
        ("rare", &rare),
        ("ascii", &ascii),
    ] {
        for n in sizes {
            let name = format!("utf8/{kind}/{}", label(n));
            let sname = format!("feed/{kind}/{}", label(n));
            if !want(&name) && !want(&sname) {
                continue;
            }
            let count = input_count(n);
            let mut rng = Rng(n as u64 + 7);
            let inputs = Inputs::new(count, n, 0, |b| {
                b.copy_from_slice(&exact_text(text, n, &mut rng))
            });
            let mut dst = vec![0u8; n];
            let mut ok = 0usize;
            if want(&name) {
                let t = min_times(&fns, count, n, |f, i| {
                    ok += usize::from(f(&mut dst, inputs.get(i)))
                });
                row(&name, &names, &t, peers_from);
            }
            if want(&sname) {
                // The streaming validator fed a whole message at once (a frame that
                // arrived whole), against one-shot validation of the same inputs.
                let t = min_times(&streaming, count, n, |f, i| {
                    ok += usize::from(f(&mut dst, inputs.get(i)))
                });
                row(&sname, &["feed", "validate", "memcpy"], &t, 1);
            }
            let (batch, rounds) = plan(n);
            let calls = batch * rounds * if want(&name) { fns.len() } else { 0 }
                + batch * rounds * if want(&sname) { 3 } else { 0 };
            assert_eq!(ok, calls, "every input is valid UTF-8");
        }
    }
}

// ---- masking through the peers' frame APIs ----

/// An in-memory socket that hands out the same bytes (one frame) over and over, at most
/// `chunk` bytes per read, and discards writes.
struct Replay {
    frame: Vec<u8>,
    pos: usize,
}

impl tokio::io::AsyncRead for Replay {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        let take = buf.remaining().min(this.frame.len() - this.pos);
        buf.put_slice(&this.frame[this.pos..this.pos + take]);
        this.pos += take;
        if this.pos == this.frame.len() {
            this.pos = 0;
        }
        Poll::Ready(Ok(()))
    }
}

impl tokio::io::AsyncWrite for Replay {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        b: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Poll::Ready(Ok(b.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// One binary frame of `n` payload bytes, masked with `key` when given.
fn binary_frame(n: usize, key: Option<[u8; 4]>) -> Vec<u8> {
    let mut f = vec![0x82u8];
    let m = if key.is_some() { 0x80 } else { 0 };
    if n < 126 {
        f.push(m | n as u8);
    } else if n < 1 << 16 {
        f.push(m | 126);
        f.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        f.push(m | 127);
        f.extend_from_slice(&(n as u64).to_be_bytes());
    }
    if let Some(k) = key {
        f.extend_from_slice(&k);
    }
    f.extend((0..n).map(|i| (i * 7) as u8));
    f
}

/// A tokio-websockets stream reading `frame` forever: a server for masked frames, a
/// client for unmasked ones.
fn tws_stream(frame: Vec<u8>, masked: bool) -> tokio_websockets::WebSocketStream<Replay> {
    let io = Replay { frame, pos: 0 };
    let limits = tokio_websockets::Limits::unlimited();
    if masked {
        tokio_websockets::ServerBuilder::new()
            .limits(limits)
            .serve(io)
    } else {
        tokio_websockets::ClientBuilder::new()
            .limits(limits)
            .take_over(io)
    }
}

/// Reads one message from a tokio-websockets stream; its payload length.
#[inline(never)]
fn tws_next(ws: &mut tokio_websockets::WebSocketStream<Replay>) -> usize {
    use futures_core::Stream;
    let mut cx = Context::from_waker(Waker::noop());
    match Pin::new(ws).poll_next(&mut cx) {
        Poll::Ready(Some(Ok(m))) => m.as_payload().len(),
        other => panic!(
            "tokio-websockets: {:?}",
            other.map(|o| o.map(|r| r.is_ok()))
        ),
    }
}

/// Our decoder on the same bytes: copied in as a read would, then decoded (unmasking in
/// place); the payload length.
#[inline(never)]
fn ours_frame(dec: &mut rapidws::codec::Decoder, buf: &mut Vec<u8>, frame: &[u8]) -> usize {
    buf.clear();
    buf.extend_from_slice(frame);
    match dec.decode(buf) {
        Ok(rapidws::codec::Decoded {
            item: Some(rapidws::codec::Item::Data(d)),
            ..
        }) => d.payload.len(),
        other => panic!("rapidws: {other:?}"),
    }
}

/// Masking as users of tokio-websockets get it: its `mask::frame` is in a private
/// module, so it is reached through `WebSocketStream`, which also copies the frame from
/// the socket into its read buffer and builds a `Message`. Our decoder does the same work
/// (the copy from the socket's bytes, then `Decoder::decode`). A masked frame (server
/// role) against the same frame unmasked (client role): the difference is the unmasking.
fn bench_frame(want: &dyn Fn(&str) -> bool) {
    use rapidws::Role;
    use rapidws::codec::{Decoder, DecoderConfig};
    let key = [0x37, 0xfa, 0x21, 0x3d];
    for n in [
        16usize,
        128,
        1 << 10,
        16 << 10,
        256 << 10,
        1 << 20,
        16 << 20,
    ] {
        let name = format!("frame/{}", label(n));
        if !want(&name) {
            continue;
        }
        let masked = binary_frame(n, Some(key));
        let plain = binary_frame(n, None);
        let mut tws_m = tws_stream(masked.clone(), true);
        let mut tws_p = tws_stream(plain.clone(), false);
        let cfg = |role| {
            let mut c = DecoderConfig::new(role);
            c.max_frame_size = 1 << 30;
            c.max_message_size = 1 << 30;
            c
        };
        let mut dec_m = Decoder::new(cfg(Role::Server));
        let mut dec_p = Decoder::new(cfg(Role::Client));
        let (mut buf_m, mut buf_p) = (Vec::new(), Vec::new());
        let tws: fn(&mut tokio_websockets::WebSocketStream<Replay>) -> usize = black_box(tws_next);
        let ours: fn(&mut Decoder, &mut Vec<u8>, &[u8]) -> usize = black_box(ours_frame);
        let t = min_times(&[0usize, 1, 2, 3], 1, n, |c, _| {
            let got = match c {
                0 => ours(&mut dec_m, &mut buf_m, &masked),
                1 => ours(&mut dec_p, &mut buf_p, &plain),
                2 => tws(&mut tws_m),
                _ => tws(&mut tws_p),
            };
            assert_eq!(got, n);
        });
        let (ours_unmask, tws_unmask) = (t[0] - t[1], t[2] - t[3]);
        println!(
            "{name:26} ours_masked={:.1} ours_plain={:.1} tws_masked={:.1} tws_plain={:.1}  \
             frame_ratio={:.2}  unmask ours={ours_unmask:.1} tws={tws_unmask:.1}",
            t[0],
            t[1],
            t[2],
            t[3],
            t[2] / t[0],
        );
    }
}

// ---- frame scanning ----

/// `bytes` of back-to-back binary frames, masked or not, of `payload` bytes each, or
/// (`payload == 0`) of 50 to 500 bytes drawn at random, as a market-data feed's JSON
/// messages are (both sides of the 126-byte length class boundary).
fn frames(payload: usize, masked: bool, bytes: usize) -> (Vec<u8>, usize) {
    let mut rng = Rng(0x1234_5678);
    let mut buf = Vec::with_capacity(bytes + 600);
    let mut count = 0;
    loop {
        let n = if payload == 0 {
            50 + rng.below(451)
        } else {
            payload
        };
        let f = binary_frame(n, masked.then_some([1, 2, 3, 4]));
        if buf.len() + f.len() > bytes {
            return (buf, count);
        }
        buf.extend_from_slice(&f);
        count += 1;
    }
}

fn bench_scan(want: &dyn Fn(&str) -> bool) {
    type ScanFn = fn(Backend, &[u8], &mut [frame::FrameHeader]) -> usize;
    #[inline(never)]
    fn scan(b: Backend, buf: &[u8], out: &mut [frame::FrameHeader]) -> usize {
        frame::scan_with(b, buf, out).map_or(0, |s| s.frames)
    }
    let f: ScanFn = black_box(scan);
    let backends: Vec<Backend> = Backend::ALL
        .into_iter()
        .filter(|b| b.is_available())
        .collect();
    for payload in [64usize, 256, 0] {
        for masked in [false, true] {
            let name = format!(
                "scan/{}{}",
                if payload == 0 {
                    "50-500B".to_string()
                } else {
                    label(payload)
                },
                if masked { "/masked" } else { "" }
            );
            if !want(&name) {
                continue;
            }
            // 512 KiB of frames per call (too many length classes in a row for a branch
            // predictor to learn), scanned into a table of 32 headers at a time, as the
            // decoder's batches do.
            let (buf, count) = frames(payload, masked, 512 << 10);
            let mut out = vec![frame::FrameHeader::default(); 32];
            let t = min_times(&backends, 1, 512 << 10, |b, _| {
                let mut pos = 0;
                let mut seen = 0;
                while seen < count {
                    let k = f(b, black_box(&buf[pos..]), &mut out);
                    pos += out[..k]
                        .iter()
                        .map(|h| h.header_len as usize + h.payload_len as usize)
                        .sum::<usize>();
                    seen += k;
                }
            });
            let mut s = format!("{name:26}");
            for (b, v) in backends.iter().zip(&t) {
                s += &format!(" {}={:.2}", b.name(), v / count as f64);
            }
            s += &format!(
                "  scalar/fastest={:.2}",
                t[0] / t[1..].iter().copied().fold(t[0], f64::min)
            );
            println!("{s}");
        }
    }
}

// ---- the batch decoder ----

/// A read of 64 KiB of text frames of 2 to 512 bytes, masked (a server's read) and not:
/// the batch kernel per backend and through `frame::decode`, against the frame-by-frame
/// path through the public entries (`reads::frame_by_frame`: `parse_header`,
/// `mask::apply`, `utf8::validate` per frame), our `codec::Decoder` frame by frame, and
/// tokio-websockets' `WebSocketStream` (its frame decoder is private). Times per frame.
///
/// Then the UTF-8 check's cost per byte inside the batch (`batch/utf8`): a read of 64-byte
/// frames decoded as text less the same bytes as binary frames, per payload byte, against
/// `utf8::validate` of one 64 KiB buffer of the same text, per byte.
fn bench_batch(want: &dyn Fn(&str) -> bool) {
    use rapidws::Role;
    use rapidws::codec::{Decoder, DecoderConfig};
    use reads::{batch, frame_by_frame, read, rules};
    const READ: usize = 64 << 10;
    let backends: Vec<Backend> = Backend::ALL
        .into_iter()
        .filter(|b| b.is_available())
        .collect();
    for payload in [2usize, 5, 16, 64, 128, 512] {
        for masked in [false, true] {
            let name = format!(
                "batch/{}{}",
                label(payload),
                if masked { "/masked" } else { "" }
            );
            if !want(&name) {
                continue;
            }
            let (wire, count) = read(payload, masked, false, false, READ);
            let rules = rules(masked);
            let mut buf = wire.clone();
            let role = if masked { Role::Server } else { Role::Client };
            let mut dec = Decoder::new(DecoderConfig::new(role));
            let mut tws = tws_stream(wire.clone(), masked);
            // Contenders: each backend, auto, frame by frame, the decoder, tokio-websockets.
            let n = backends.len();
            let ids: Vec<usize> = (0..n + 4).collect();
            let batch_f: fn(Option<Backend>, &mut [u8], &frame::Rules) -> usize = black_box(batch);
            let fbf: fn(&mut [u8], &frame::Rules) -> usize = black_box(frame_by_frame);
            let t = min_times(&ids, 1, READ, |c, _| {
                let got = if c < n {
                    batch_f(Some(backends[c]), &mut buf, &rules)
                } else if c == n {
                    batch_f(None, &mut buf, &rules)
                } else if c == n + 1 {
                    fbf(&mut buf, &rules)
                } else if c == n + 2 {
                    decoder_read(&mut dec, &mut buf)
                } else {
                    (0..count).map(|_| tws_next(&mut tws)).count()
                };
                assert_eq!(got, count, "{name} contender {c}");
            });
            let per = |x: f64| x / count as f64;
            let mut line = format!("{name:22}");
            for (b, v) in backends.iter().zip(&t) {
                line += &format!(" {}={:.2}", b.name(), per(*v));
            }
            line += &format!(
                " auto={:.2} frame_by_frame={:.2} decoder={:.2} tokio-websockets={:.2}  \
                 frame_by_frame/auto={:.2} decoder/auto={:.2} tws/auto={:.2}",
                per(t[n]),
                per(t[n + 1]),
                per(t[n + 2]),
                per(t[n + 3]),
                t[n + 1] / t[n],
                t[n + 2] / t[n],
                t[n + 3] / t[n],
            );
            println!("{line}");
        }
    }
    for mixed in [false, true] {
        let name = format!("batch/utf8/{}", if mixed { "mixed" } else { "ascii" });
        if !want(&name) {
            continue;
        }
        let (mut text, count) = read(64, false, mixed, false, READ);
        let (mut bin, count_b) = read(64, false, mixed, true, READ);
        assert_eq!(count, count_b);
        let one = reads::corpus(mixed, READ);
        let one = &one[..READ];
        // A whole valid buffer: the corpus cut at a character boundary, padded.
        let mut one = one.to_vec();
        let mut cut = one.len();
        while core::str::from_utf8(&one[..cut]).is_err() {
            cut -= 1;
        }
        one[cut..].fill(b' ');
        let rules = rules(false);
        let batch_f: fn(Option<Backend>, &mut [u8], &frame::Rules) -> usize = black_box(batch);
        let t = min_times(&[0usize, 1, 2], 1, READ, |c, _| match c {
            0 => assert_eq!(batch_f(None, &mut text, &rules), count),
            1 => assert_eq!(batch_f(None, &mut bin, &rules), count),
            _ => assert!(utf8::validate(black_box(&one)).is_ok()),
        });
        let in_batch = (t[0] - t[1]) / (count * 64) as f64;
        let whole = t[2] / one.len() as f64;
        println!(
            "{name:22} text={:.2} binary={:.2} ns/frame; utf8 in batch={:.4} ns/B, \
             one 64 KiB buffer={:.4} ns/B, ratio={:.2}",
            t[0] / count as f64,
            t[1] / count as f64,
            in_batch,
            whole,
            in_batch / whole
        );
    }
}

/// Our frame-by-frame decoder over a whole read; messages decoded.
#[inline(never)]
fn decoder_read(dec: &mut rapidws::codec::Decoder, buf: &mut [u8]) -> usize {
    let mut pos = 0;
    let mut n = 0;
    while pos < buf.len() {
        match dec.decode(&mut buf[pos..]) {
            Ok(d) if d.item.is_some() => {
                pos += d.consumed;
                n += 1;
            }
            other => panic!("decoder: {other:?}"),
        }
    }
    n
}

fn main() {
    // `cargo bench` passes `--bench`; any other argument is a substring filter.
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let want = |name: &str| filter.as_deref().is_none_or(|f| name.contains(f));
    println!(
        "best backend: {}; times in ns per call (scan: per frame); ratio = fastest peer / ours",
        Backend::best().name()
    );
    bench_mask(&want);
    bench_utf8(&want);
    bench_frame(&want);
    bench_scan(&want);
    bench_batch(&want);
}
