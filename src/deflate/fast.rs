//! Our own level-1 DEFLATE encoder (RFC 1951) for the sending side of permessage-deflate.
//!
//! Why not zlib-rs at level 1: its `deflate_quick` writes only static Huffman codes (18 %
//! larger than miniz_oxide's level 1 on JSON-like text), and every zlib-rs compressor
//! carries a fixed 64 Ki-entry hash head (128 KiB) plus a 64 KiB window and 64 KiB of hash
//! chains that are slid every 32 KiB of input: about 371 KiB per connection. Every input
//! byte reads one random hash entry, so with a hundred connections the hash reads miss the
//! caches (benches/RESULTS.md, "Deflate"). This encoder keeps per connection what context
//! takeover needs and little else:
//!
//! - the history: the last `2^window_bits` bytes sent, followed by the bytes being
//!   compressed (at most 32 KiB at a time), in one `Vec` (64 KiB at a 15-bit window);
//! - a hash head of [`HASH_SIZE`] 16-bit positions (8 KiB), each where the last 4-byte
//!   string with that hash starts in the history. A stale entry is harmless: every
//!   candidate is checked against the history's bytes before it is used.
//!
//! Matching is greedy with one candidate per position (as zlib's and miniz_oxide's level
//! 1), minimum length 4, and right after a match the same distance is tried first (a
//! message sent again is found whole). Before a block the hash head and the reachable
//! history are read front to back, so that with many connections their cache lines arrive
//! as one prefetched stream rather than as random misses. Per-block scratch (tokens,
//! frequencies, code tables) is one per thread, shared by all compressors. Each block of at most [`BLOCK`] input bytes is written with
//! whichever of dynamic Huffman codes, the fixed codes or a stored block is shortest,
//! counted exactly before writing.

use std::sync::OnceLock;

/// Hash head entries (a power of two).
const HASH_BITS: u32 = 12;
const HASH_SIZE: usize = 1 << HASH_BITS;
/// Input bytes per block; also how much the history grows past the window before it is
/// trimmed back to the window.
const BLOCK: usize = 32 * 1024;
/// RFC 1951 3.2.5: the longest match.
const MAX_MATCH: usize = 258;
/// Shortest match we look for (the hash covers 4 bytes).
const MIN_MATCH: usize = 4;

/// Literal/length alphabet: 0..=255 literals, 256 end of block, 257..=285 lengths.
const LIT_CODES: usize = 286;
const END_BLOCK: usize = 256;
const DIST_CODES: usize = 30;
/// Code length alphabet (RFC 1951 3.2.7).
const CL_CODES: usize = 19;
/// RFC 1951 3.2.7: the order in which code length code lengths are sent.
const CL_ORDER: [usize; CL_CODES] = [
    16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15,
];
/// RFC 1951 3.2.7: code lengths are at most 15 bits, code length codes at most 7.
const MAX_BITS: u8 = 15;
const MAX_CL_BITS: u8 = 7;

/// RFC 1951 3.2.5: extra bits of length codes 257..=285.
const LEN_EXTRA: [u8; 29] = [
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
];
/// RFC 1951 3.2.5: extra bits of distance codes 0..=29.
const DIST_EXTRA: [u8; DIST_CODES] = [
    0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13,
    13,
];

/// Length code (0..=28, i.e. symbol 257 + code) and its extra bits' value, for a match
/// length of 3..=258.
#[inline]
fn len_sym(len: usize) -> (usize, u32) {
    let l = (len - 3) as u32;
    if len == MAX_MATCH {
        (28, 0)
    } else if l < 8 {
        (l as usize, 0)
    } else {
        // Codes 8.. come in fours per extra bit: the top bit of l picks the group, the two
        // bits under it the code within the group, the rest are the extra bits.
        let top = 31 - l.leading_zeros();
        let code = 4 * (top - 1) + ((l >> (top - 2)) & 3);
        (code as usize, l & ((1 << (top - 2)) - 1))
    }
}

/// Distance code (0..=29) and its extra bits' value, for a distance of 1..=32768.
#[inline]
fn dist_sym(dist: usize) -> (usize, u32) {
    let d = (dist - 1) as u32;
    if d < 4 {
        (d as usize, 0)
    } else {
        let top = 31 - d.leading_zeros();
        let code = 2 * top + ((d >> (top - 1)) & 1);
        (code as usize, d & ((1 << (top - 1)) - 1))
    }
}

/// A token: a literal byte (`< 256`), or a match: `MATCH`, then from bit 23 up its length
/// code (5 bits) and that code's extra bits' value (5 bits), its distance code (5 bits)
/// and that code's extra bits' value (13 bits): all the writer needs, computed once.
const MATCH: u32 = 1 << 31;

#[inline(always)]
fn match_token(len: usize, dist: usize) -> (u32, usize, usize) {
    let (lc, lx) = len_sym(len);
    let (dc, dx) = dist_sym(dist);
    let t = MATCH | (lc as u32) << 23 | lx << 18 | (dc as u32) << 13 | dx;
    (t, lc, dc)
}

/// The fixed Huffman codes of RFC 1951 3.2.6 (lengths and bit-reversed codes).
struct FixedCodes {
    lit_len: [u8; 288],
    lit_code: [u16; 288],
    dist_len: [u8; DIST_CODES],
    dist_code: [u16; DIST_CODES],
}

fn fixed_codes() -> &'static FixedCodes {
    static FIXED: OnceLock<FixedCodes> = OnceLock::new();
    FIXED.get_or_init(|| {
        let mut lit_len = [0u8; 288];
        for (i, l) in lit_len.iter_mut().enumerate() {
            *l = match i {
                0..=143 => 8,
                144..=255 => 9,
                256..=279 => 7,
                _ => 8,
            };
        }
        let mut lit_code = [0u16; 288];
        canonical_codes(&lit_len, &mut lit_code);
        let dist_len = [5u8; DIST_CODES];
        let mut dist_code = [0u16; DIST_CODES];
        canonical_codes(&dist_len, &mut dist_code);
        FixedCodes {
            lit_len,
            lit_code,
            dist_len,
            dist_code,
        }
    })
}

/// RFC 1951 3.2.2: the canonical codes for `lens`, bit-reversed (DEFLATE sends Huffman
/// codes most significant bit first into a least-significant-bit-first stream).
fn canonical_codes(lens: &[u8], codes: &mut [u16]) {
    let mut count = [0u16; 16];
    for &l in lens {
        count[usize::from(l)] += 1;
    }
    count[0] = 0;
    let mut next = [0u16; 16];
    let mut code = 0u16;
    for bits in 1..16 {
        code = (code + count[bits - 1]) << 1;
        next[bits] = code;
    }
    for (l, c) in lens.iter().zip(codes.iter_mut()) {
        if *l != 0 {
            let n = next[usize::from(*l)];
            next[usize::from(*l)] += 1;
            *c = n.reverse_bits() >> (16 - u32::from(*l));
        }
    }
}

/// Huffman code lengths of at most `limit` bits for `freq`, written to `lens` (0 for an
/// unused symbol). At least two symbols must be used (callers make sure), so the code is
/// always complete, which strict inflaters (zlib) require.
fn build_lengths(freq: &[u32], limit: u8, lens: &mut [u8]) {
    lens.fill(0);
    // Used symbols, least frequent first, as `freq << 9 | symbol` (a frequency is at most
    // BLOCK + 1 < 2^23, a symbol < 2^9): sorting plain integers is the cheapest sort.
    let mut leaves = [0u32; LIT_CODES];
    let mut n = 0;
    for (sym, &f) in freq.iter().enumerate() {
        if f != 0 {
            leaves[n] = f << 9 | sym as u32;
            n += 1;
        }
    }
    debug_assert!(n >= 2, "build_lengths needs two used symbols");
    let leaves = &mut leaves[..n];
    leaves.sort_unstable();

    // Two-queue Huffman construction: leaves (sorted) and internal nodes (created in
    // nondecreasing weight order). Nodes 0..n are the leaves, n..2n-1 internal.
    let mut weight = [0u32; 2 * LIT_CODES];
    let mut parent = [0u16; 2 * LIT_CODES];
    for (w, &leaf) in weight.iter_mut().zip(leaves.iter()) {
        *w = leaf >> 9;
    }
    let (mut leaf, mut inner) = (0, n);
    for next in n..2 * n - 1 {
        let mut pick = || {
            if leaf < n && (inner >= next || weight[leaf] <= weight[inner]) {
                leaf += 1;
                leaf - 1
            } else {
                inner += 1;
                inner - 1
            }
        };
        let (a, b) = (pick(), pick());
        weight[next] = weight[a] + weight[b];
        parent[a] = next as u16;
        parent[b] = next as u16;
    }
    // Depths, root (the last node) at 0; reuse `weight` for them.
    let root = 2 * n - 2;
    weight[root] = 0;
    for k in (0..root).rev() {
        weight[k] = weight[usize::from(parent[k])] + 1;
    }
    // Leaves per depth, clamped at `limit`.
    let limit = usize::from(limit);
    let mut count = [0u32; 32];
    for &depth in &weight[..n] {
        count[(depth as usize).min(limit)] += 1;
    }
    // Kraft sum in units of 2^-limit: a complete code sums to exactly 2^limit. Clamping
    // only lengthened nothing and shortened some codes, so the sum can only be too large:
    // push the deepest codes shorter than `limit` one level down until it fits, then pull
    // codes back up while that keeps the sum within bounds, ending exactly complete.
    let full = 1u64 << limit;
    let mut kraft: u64 = (1..=limit)
        .map(|l| u64::from(count[l]) << (limit - l))
        .sum();
    while kraft > full {
        let l = (1..limit)
            .rev()
            .find(|&l| count[l] > 0)
            .expect("a code above the limit");
        count[l] -= 1;
        count[l + 1] += 1;
        kraft -= 1 << (limit - l - 1);
    }
    while kraft < full {
        // The slack's lowest bit is at least the unit of the longest code, so some code
        // can always move up one level without overshooting.
        let l = (2..=limit)
            .rev()
            .find(|&l| count[l] > 0 && (1u64 << (limit - l)) <= full - kraft)
            .expect("an incomplete code can be completed");
        count[l] -= 1;
        count[l - 1] += 1;
        kraft += 1 << (limit - l);
    }
    // Longest codes to the least frequent symbols.
    let mut idx = 0;
    for l in (1..=limit).rev() {
        for _ in 0..count[l] {
            lens[(leaves[idx] & 0x1ff) as usize] = l as u8;
            idx += 1;
        }
    }
}

/// Bits waiting to be written, least significant first (RFC 1951 3.1.1).
#[derive(Default)]
struct Bits {
    acc: u64,
    n: u32,
}

impl Bits {
    /// Appends the low `n` bits of `v` (n ≤ 32).
    #[inline(always)]
    fn put(&mut self, out: &mut Vec<u8>, v: u32, n: u32) {
        self.acc |= u64::from(v) << self.n;
        self.n += n;
        if self.n >= 32 {
            out.extend_from_slice(&(self.acc as u32).to_le_bytes());
            self.acc >>= 32;
            self.n -= 32;
        }
    }

    /// Writes out the whole bytes, keeping fewer than 8 bits.
    fn flush_bytes(&mut self, out: &mut Vec<u8>) {
        while self.n >= 8 {
            out.push(self.acc as u8);
            self.acc >>= 8;
            self.n -= 8;
        }
    }

    /// Pads with zero bits to the byte boundary and writes everything out.
    fn align(&mut self, out: &mut Vec<u8>) {
        self.n = self.n.next_multiple_of(8);
        self.flush_bytes(out);
    }
}

/// One symbol of the code lengths' run-length coding: the symbol (0..=18) and the value of
/// its extra bits.
type ClSym = (u8, u8);

/// The dynamic Huffman codes of one block and their header.
struct Dynamic {
    lit_len: [u8; LIT_CODES],
    lit_code: [u16; LIT_CODES],
    dist_len: [u8; DIST_CODES],
    dist_code: [u16; DIST_CODES],
    cl_len: [u8; CL_CODES],
    cl_code: [u16; CL_CODES],
    cl_syms: Vec<ClSym>,
    hlit: usize,
    hdist: usize,
    hclen: usize,
}

impl Dynamic {
    fn new() -> Self {
        Dynamic {
            lit_len: [0; LIT_CODES],
            lit_code: [0; LIT_CODES],
            dist_len: [0; DIST_CODES],
            dist_code: [0; DIST_CODES],
            cl_len: [0; CL_CODES],
            cl_code: [0; CL_CODES],
            cl_syms: Vec::with_capacity(LIT_CODES + DIST_CODES),
            hlit: 0,
            hdist: 0,
            hclen: 0,
        }
    }

    /// Builds the codes for the block's frequencies; returns the header's size in bits
    /// (after the 3 block header bits).
    fn build(&mut self, lit_freq: &mut [u32; LIT_CODES], dist_freq: &mut [u32; DIST_CODES]) -> u64 {
        // zlib's inflater accepts an incomplete code only with a single one-bit code; two
        // used symbols per alphabet always give a complete code. A symbol given a frequency
        // here is never written, it only costs its code's share of the tree.
        force_two(lit_freq);
        force_two(dist_freq);
        build_lengths(lit_freq, MAX_BITS, &mut self.lit_len);
        build_lengths(dist_freq, MAX_BITS, &mut self.dist_len);
        canonical_codes(&self.lit_len, &mut self.lit_code);
        canonical_codes(&self.dist_len, &mut self.dist_code);
        self.hlit = 257.max(LIT_CODES - self.lit_len.iter().rev().take_while(|&&l| l == 0).count());
        self.hdist =
            1.max(DIST_CODES - self.dist_len.iter().rev().take_while(|&&l| l == 0).count());

        // RFC 1951 3.2.7: the lengths of both alphabets as one sequence, run-length coded.
        let mut seq = [0u8; LIT_CODES + DIST_CODES];
        seq[..self.hlit].copy_from_slice(&self.lit_len[..self.hlit]);
        seq[self.hlit..self.hlit + self.hdist].copy_from_slice(&self.dist_len[..self.hdist]);
        let seq = &seq[..self.hlit + self.hdist];
        self.cl_syms.clear();
        let mut cl_freq = [0u32; CL_CODES];
        let mut i = 0;
        while i < seq.len() {
            let l = seq[i];
            let run = seq[i..].iter().take_while(|&&x| x == l).count();
            let mut left = run;
            if l == 0 {
                while left >= 11 {
                    let r = left.min(138);
                    self.cl_syms.push((18, (r - 11) as u8));
                    left -= r;
                }
                if left >= 3 {
                    self.cl_syms.push((17, (left - 3) as u8));
                    left = 0;
                }
            } else {
                // The first one literally, then repeats of it in runs of 3..=6.
                self.cl_syms.push((l, 0));
                left -= 1;
                while left >= 3 {
                    let r = left.min(6);
                    self.cl_syms.push((16, (r - 3) as u8));
                    left -= r;
                }
            }
            for _ in 0..left {
                self.cl_syms.push((l, 0));
            }
            i += run;
        }
        for &(s, _) in &self.cl_syms {
            cl_freq[usize::from(s)] += 1;
        }
        force_two(&mut cl_freq);
        build_lengths(&cl_freq, MAX_CL_BITS, &mut self.cl_len);
        canonical_codes(&self.cl_len, &mut self.cl_code);
        self.hclen = 4.max(
            CL_CODES
                - CL_ORDER
                    .iter()
                    .rev()
                    .take_while(|&&s| self.cl_len[s] == 0)
                    .count(),
        );

        let mut bits = 5 + 5 + 4 + 3 * self.hclen as u64;
        for &(s, _) in &self.cl_syms {
            bits += u64::from(self.cl_len[usize::from(s)]) + cl_extra_bits(s);
        }
        bits
    }

    fn write_header(&self, bits: &mut Bits, out: &mut Vec<u8>) {
        bits.put(out, (self.hlit - 257) as u32, 5);
        bits.put(out, (self.hdist - 1) as u32, 5);
        bits.put(out, (self.hclen - 4) as u32, 4);
        for &s in &CL_ORDER[..self.hclen] {
            bits.put(out, u32::from(self.cl_len[s]), 3);
        }
        for &(s, extra) in &self.cl_syms {
            let s = usize::from(s);
            bits.put(out, u32::from(self.cl_code[s]), u32::from(self.cl_len[s]));
            let n = cl_extra_bits(s as u8);
            if n > 0 {
                bits.put(out, u32::from(extra), n as u32);
            }
        }
    }
}

fn cl_extra_bits(sym: u8) -> u64 {
    match sym {
        16 => 2,
        17 => 3,
        18 => 7,
        _ => 0,
    }
}

/// Gives unused symbols a frequency of 1 until at least two are used.
fn force_two(freq: &mut [u32]) {
    let mut used = freq.iter().filter(|&&f| f != 0).count();
    for f in freq.iter_mut() {
        if used >= 2 {
            break;
        }
        if *f == 0 {
            *f = 1;
            used += 1;
        }
    }
}

/// Our compressor: what context takeover needs between messages (history, hash head) and
/// the bits of a byte not yet complete.
pub(crate) struct FastDeflate {
    /// `2^window_bits`: the farthest a match may reach back (RFC 7692 7.1.2).
    window: usize,
    /// The last `window` bytes compressed before the current block, then the block; at
    /// most `window + BLOCK` (64 Ki) bytes, so positions in it fit a `u16`.
    hist: Vec<u8>,
    /// Per hash, the position in `hist` of the last 4-byte string with it. Entries that
    /// are stale (0 after a reset or a trim) are harmless: every candidate is compared with
    /// the bytes at the current position before it is used.
    head: Box<[u16; HASH_SIZE]>,
    bits: Bits,
}

/// What one block needs while it is being written and never after: shared by all the
/// compressors of a thread (128 KiB of tokens), so a connection does not keep it, and it
/// stays in the cache from one connection's message to the next's.
struct Scratch {
    /// `BLOCK` + 1 entries: at most one token per input byte, and the end.
    tokens: Box<[u32]>,
    lit_freq: [u32; LIT_CODES],
    dist_freq: [u32; DIST_CODES],
    dynamic: Dynamic,
}

thread_local! {
    static SCRATCH: core::cell::RefCell<Scratch> = core::cell::RefCell::new(Scratch {
        tokens: vec![0; BLOCK + 1].into_boxed_slice(),
        lit_freq: [0; LIT_CODES],
        dist_freq: [0; DIST_CODES],
        dynamic: Dynamic::new(),
    });
}

impl core::fmt::Debug for FastDeflate {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("FastDeflate")
            .field("window", &self.window)
            .field("history", &self.hist.len())
            .finish()
    }
}

impl FastDeflate {
    /// A compressor whose matches reach back at most `2^window_bits` bytes (9..=15).
    pub(crate) fn new(window_bits: u8) -> Self {
        let window = 1usize << window_bits.clamp(9, 15);
        FastDeflate {
            window,
            hist: Vec::new(),
            head: Box::new([0; HASH_SIZE]),
            bits: Bits::default(),
        }
    }

    /// Forgets the history: later matches refer only to later input. Any bits of an
    /// unfinished message are dropped.
    pub(crate) fn reset(&mut self) {
        self.hist.clear();
        self.head.fill(0);
        self.bits = Bits::default();
    }

    /// Resets and makes the last `2^window_bits` bytes of `dictionary` the history, as
    /// if they had just been compressed (zlib's `deflateSetDictionary`).
    pub(crate) fn set_dictionary(&mut self, dictionary: &[u8]) {
        self.reset();
        let tail = &dictionary[dictionary.len().saturating_sub(self.window)..];
        self.hist.extend_from_slice(tail);
        for i in 0..tail.len().saturating_sub(MIN_MATCH - 1) {
            self.head[hash(read4(&self.hist, i))] = i as u16;
        }
    }

    /// Compresses `input` as the next part of the current message, appending whole bytes
    /// to `out`. With `fin` the message ends: RFC 7692 7.2.1's sync flush (an empty stored
    /// block) without its trailing `00 00 ff ff`, so the output ends on a byte boundary.
    pub(crate) fn compress(&mut self, input: &[u8], fin: bool, out: &mut Vec<u8>) {
        out.reserve(input.len() / 2 + 16);
        if !input.is_empty() {
            SCRATCH.with(|scratch| {
                // Not re-entered: nothing in here compresses on this thread again.
                let mut scratch = scratch.borrow_mut();
                for block in input.chunks(BLOCK) {
                    self.block(block, &mut scratch, out);
                }
            });
        }
        if fin {
            // RFC 1951 3.2.4: BFINAL 0, BTYPE 00, padding to the byte; LEN and NLEN
            // (00 00 ff ff) are the trailer RFC 7692 removes.
            self.bits.put(out, 0, 3);
            self.bits.align(out);
        } else {
            self.bits.flush_bytes(out);
        }
    }

    /// Compresses one block of at most [`BLOCK`] bytes.
    fn block(&mut self, input: &[u8], scratch: &mut Scratch, out: &mut Vec<u8>) {
        // Keep the last `window` bytes of history and append the block.
        if self.hist.len() + input.len() > self.window + BLOCK {
            let drop = self.hist.len() - self.window;
            self.hist.drain(..drop);
            // `drop` < 2^16; entries before the kept part become 0 (stale).
            let drop = drop as u16;
            for e in self.head.iter_mut() {
                *e = e.saturating_sub(drop);
            }
        }
        // The hash head and the history are cold when many connections take turns: left to
        // the matcher, every first touch of a cache line is a random miss on its critical
        // path. Read front to back first, they arrive as one stream the hardware prefetcher
        // follows. Of the history only what the new bytes are likely to reach.
        let reach = self
            .hist
            .len()
            .saturating_sub(self.window.min(4 * input.len()));
        std::hint::black_box(touch(&self.head[..]) ^ u16::from(touch(&self.hist[reach..])));
        let start = self.hist.len();
        let needed = start + input.len();
        if self.hist.capacity() < needed {
            // Doubling, but never past what the history can hold: window + BLOCK.
            let cap = (2 * self.hist.capacity()).clamp(needed, self.window + BLOCK);
            self.hist.reserve_exact(cap - start);
        }
        self.hist.extend_from_slice(input);
        scratch.lit_freq = [0; LIT_CODES];
        scratch.dist_freq = [0; DIST_CODES];
        let n = self.match_block(start, scratch);
        scratch.lit_freq[END_BLOCK] = 1;
        self.write_block(start, n, scratch, out);
    }

    /// Greedy LZ77 over `hist[start..]`: fills the tokens and the frequencies; returns the
    /// number of tokens.
    fn match_block(&mut self, start: usize, scratch: &mut Scratch) -> usize {
        let hist = &self.hist[..];
        let end = hist.len();
        let window = self.window;
        let head = &mut *self.head;
        let tokens = &mut scratch.tokens[..];
        let lit_freq = &mut scratch.lit_freq;
        let dist_freq = &mut scratch.dist_freq;
        let mut n = 0;
        let mut i = start;
        // The distance of the match just before `i`, 0 if a literal came before: a copy of
        // earlier data (a message sent again) goes on at the same distance, which the hash
        // head, pointing at the latest string with the same hash, often does not find.
        let mut rep = 0;
        while i + MIN_MATCH <= end {
            let cur = read4(hist, i);
            let h = hash(cur);
            let mut cand = usize::from(head[h]);
            head[h] = i as u16;
            if rep != 0 && read4(hist, i - rep) == cur {
                cand = i - rep;
            }
            rep = 0;
            // RFC 7692 7.1.2: the agreed max_window_bits bounds the LZ77 window, so no
            // match reaches back further than `window`.
            if cand < i && i - cand <= window && read4(hist, cand) == cur {
                let max = (end - i).min(MAX_MATCH);
                let len = common_len(hist, cand, i, max);
                let dist = i - cand;
                let (t, lc, dc) = match_token(len, dist);
                tokens[n] = t;
                n += 1;
                lit_freq[257 + lc] += 1;
                dist_freq[dc] += 1;
                // One more hash entry inside the match, at its last full string: the
                // next repeat of what follows often starts there.
                let last = i + len - 1;
                if last + MIN_MATCH <= end {
                    head[hash(read4(hist, last))] = last as u16;
                }
                rep = dist;
                i += len;
            } else {
                let b = cur as u8;
                tokens[n] = u32::from(b);
                n += 1;
                lit_freq[usize::from(b)] += 1;
                i += 1;
            }
        }
        for &b in &hist[i..end] {
            tokens[n] = u32::from(b);
            n += 1;
            lit_freq[usize::from(b)] += 1;
        }
        n
    }

    /// Writes the block's tokens with the cheapest of dynamic codes, fixed codes or a
    /// stored block.
    fn write_block(&mut self, start: usize, n: usize, scratch: &mut Scratch, out: &mut Vec<u8>) {
        let fixed = fixed_codes();
        // Extra bits are the same whichever codes are used.
        let mut extra = 0u64;
        let mut fixed_bits = 0u64;
        for (code, &f) in scratch.lit_freq.iter().enumerate() {
            fixed_bits += u64::from(f) * u64::from(fixed.lit_len[code]);
            if code > END_BLOCK {
                extra += u64::from(f) * u64::from(LEN_EXTRA[code - 257]);
            }
        }
        for (code, &f) in scratch.dist_freq.iter().enumerate() {
            fixed_bits += u64::from(f) * 5;
            extra += u64::from(f) * u64::from(DIST_EXTRA[code]);
        }
        let mut lit_freq = scratch.lit_freq;
        let mut dist_freq = scratch.dist_freq;
        let header = scratch.dynamic.build(&mut lit_freq, &mut dist_freq);
        let d = &scratch.dynamic;
        let mut dynamic_bits = header;
        for (code, &f) in scratch.lit_freq.iter().enumerate() {
            dynamic_bits += u64::from(f) * u64::from(d.lit_len[code]);
        }
        for (code, &f) in scratch.dist_freq.iter().enumerate() {
            dynamic_bits += u64::from(f) * u64::from(d.dist_len[code]);
        }
        let len = self.hist.len() - start;
        // Stored: 3 header bits, padding to the byte, LEN and NLEN, the bytes.
        let pad = u64::from((8 - (self.bits.n + 3) % 8) % 8);
        let stored_bits = 3 + pad + 32 + 8 * len as u64;
        let fixed_bits = fixed_bits + extra;
        let dynamic_bits = dynamic_bits + extra;

        if stored_bits <= fixed_bits.min(dynamic_bits) {
            // RFC 1951 3.2.4: BFINAL 0, BTYPE 00.
            self.bits.put(out, 0, 3);
            self.bits.align(out);
            let n = len as u16;
            out.extend_from_slice(&n.to_le_bytes());
            out.extend_from_slice(&(!n).to_le_bytes());
            out.extend_from_slice(&self.hist[start..]);
        } else if fixed_bits <= dynamic_bits {
            // BFINAL 0, BTYPE 01.
            self.bits.put(out, 0b010, 3);
            emit_tokens(
                &mut self.bits,
                &scratch.tokens[..n],
                &fixed.lit_len[..],
                &fixed.lit_code[..],
                &fixed.dist_len,
                &fixed.dist_code,
                out,
            );
        } else {
            // BFINAL 0, BTYPE 10.
            self.bits.put(out, 0b100, 3);
            let d = &scratch.dynamic;
            d.write_header(&mut self.bits, out);
            emit_tokens(
                &mut self.bits,
                &scratch.tokens[..n],
                &d.lit_len,
                &d.lit_code,
                &d.dist_len,
                &d.dist_code,
                out,
            );
        }
    }
}

/// Writes `tokens` and the end-of-block code with the given codes.
fn emit_tokens(
    bits: &mut Bits,
    tokens: &[u32],
    lit_len: &[u8],
    lit_code: &[u16],
    dist_len: &[u8],
    dist_code: &[u16],
    out: &mut Vec<u8>,
) {
    for &t in tokens {
        if t & MATCH == 0 {
            let s = t as usize;
            bits.put(out, u32::from(lit_code[s]), u32::from(lit_len[s]));
        } else {
            let lc = ((t >> 23) & 0x1f) as usize;
            let lx = (t >> 18) & 0x1f;
            let dc = ((t >> 13) & 0x1f) as usize;
            let dx = t & 0x1fff;
            let s = 257 + lc;
            let ln = u32::from(lit_len[s]);
            bits.put(
                out,
                u32::from(lit_code[s]) | lx << ln,
                ln + u32::from(LEN_EXTRA[lc]),
            );
            let dn = u32::from(dist_len[dc]);
            bits.put(
                out,
                u32::from(dist_code[dc]) | dx << dn,
                dn + u32::from(DIST_EXTRA[dc]),
            );
        }
    }
    bits.put(
        out,
        u32::from(lit_code[END_BLOCK]),
        u32::from(lit_len[END_BLOCK]),
    );
}

/// Reads one value per 64-byte cache line of `s`.
fn touch<T: Copy + core::ops::BitXor<Output = T> + Default>(s: &[T]) -> T {
    let step = (64 / core::mem::size_of::<T>()).max(1);
    s.iter().step_by(step).fold(T::default(), |a, &x| a ^ x)
}

#[inline(always)]
fn read4(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"))
}

#[inline(always)]
fn hash(v: u32) -> usize {
    (v.wrapping_mul(0x9E37_79B1) >> (32 - HASH_BITS)) as usize & (HASH_SIZE - 1)
}

/// Length of the common prefix of `b[a..]` and `b[i..]` (a < i), at least `MIN_MATCH`
/// (already compared) and at most `max` (`i + max <= b.len()`).
#[inline(always)]
fn common_len(b: &[u8], a: usize, i: usize, max: usize) -> usize {
    let mut n = MIN_MATCH;
    let (x, y) = (&b[a..a + max], &b[i..i + max]);
    while n + 8 <= max {
        let p = u64::from_le_bytes(x[n..n + 8].try_into().expect("8 bytes"));
        let q = u64::from_le_bytes(y[n..n + 8].try_into().expect("8 bytes"));
        let diff = p ^ q;
        if diff != 0 {
            return n + (diff.trailing_zeros() / 8) as usize;
        }
        n += 8;
    }
    while n < max && x[n] == y[n] {
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deflate::noise::noise;
    use crate::deflate::receiver::Receiver;

    /// JSON-like records, as the load tool sends.
    fn json_like(size: usize, seed: u64) -> Vec<u8> {
        const WORDS: [&str; 8] = [
            "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
        ];
        let mut x = seed | 1;
        let mut s = String::from("[");
        while s.len() < size {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            s.push_str(&format!(
                "{{\"id\":{},\"user\":\"{}_{}\",\"price\":{}.{:02},\"active\":{}}},",
                x % 100_000,
                WORDS[(x % 8) as usize],
                (x >> 8) % 1000,
                (x >> 20) % 10_000,
                (x >> 4) % 100,
                x & 1 == 1
            ));
        }
        s.truncate(size);
        s.into_bytes()
    }

    /// `message` compressed whole by `enc`, as one message.
    fn whole(enc: &mut FastDeflate, message: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        enc.compress(message, true, &mut out);
        out
    }

    fn inflate(receiver: &mut Receiver, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let done = receiver
            .decompress(payload, true, &mut out, 1 << 24, usize::MAX)
            .expect("our output inflates");
        assert_eq!(done, super::super::Inflated::Done);
        out
    }

    #[test]
    fn messages_round_trip_with_context_takeover_at_every_window() {
        for bits in 9..=15u8 {
            let mut enc = FastDeflate::new(bits);
            let mut receiver = Receiver::new();
            let messages: Vec<Vec<u8>> = vec![
                json_like(1024, 1),
                json_like(1024, 1), // a whole earlier copy: matches reach back
                b"x".to_vec(),
                Vec::new(),
                noise(3000, 2),
                json_like(70_000, 3), // several blocks, history trimmed in between
                [json_like(500, 4), noise(500, 5), json_like(500, 4)].concat(),
                vec![b'a'; 100_000], // runs of the longest match
                json_like(16 * 1024, 6),
            ];
            for m in &messages {
                let out = whole(&mut enc, m);
                assert_eq!(&inflate(&mut receiver, &out), m, "window bits {bits}");
            }
        }
    }

    #[test]
    fn an_empty_message_is_the_single_byte_of_rfc_7692() {
        // RFC 7692 7.2.3.6: an empty stored block with LEN/NLEN removed is `00`.
        let mut enc = FastDeflate::new(15);
        let out = whole(&mut enc, &[]);
        assert_eq!(out, [0x00]);
    }

    #[test]
    fn a_message_in_pieces_inflates_to_the_whole() {
        let message = json_like(50_000, 7);
        let mut enc = FastDeflate::new(15);
        let mut out = Vec::new();
        for piece in message.chunks(7000) {
            enc.compress(piece, false, &mut out);
        }
        enc.compress(&[], true, &mut out);
        assert_eq!(inflate(&mut Receiver::new(), &out), message);
    }

    #[test]
    fn reset_forgets_the_history() {
        let message = json_like(2000, 8);
        let mut enc = FastDeflate::new(15);
        let first = whole(&mut enc, &message);
        enc.reset();
        let second = whole(&mut enc, &message);
        // Without the history the second copy compresses exactly as the first did, and
        // a fresh inflater (which knows nothing of the first) decodes it.
        assert_eq!(first, second);
        assert_eq!(inflate(&mut Receiver::new(), &second), message);
    }

    #[test]
    fn a_dictionary_becomes_the_history() {
        let dictionary = json_like(40_000, 9);
        let message = dictionary[30_000..31_000].to_vec();
        // The peer has the dictionary in its window (it received it as a message).
        let mut receiver = Receiver::new();
        let standalone = whole(&mut FastDeflate::new(15), &dictionary);
        assert_eq!(inflate(&mut receiver, &standalone), dictionary);

        let mut enc = FastDeflate::new(15);
        enc.set_dictionary(&dictionary);
        let out = whole(&mut enc, &message);
        let fresh = whole(&mut FastDeflate::new(15), &message);
        assert!(
            out.len() * 3 < fresh.len(),
            "a copy of the history is a few matches: {} B, {} B without it",
            out.len(),
            fresh.len()
        );
        assert_eq!(inflate(&mut receiver, &out), message);
    }

    #[test]
    fn incompressible_data_goes_stored_and_grows_by_a_few_bytes() {
        let data = noise(100_000, 10);
        let mut enc = FastDeflate::new(15);
        let out = whole(&mut enc, &data);
        // 4 blocks of 32 KiB: 5 bytes of stored-block header each, plus the flush byte.
        assert!(out.len() <= data.len() + 4 * 5 + 1, "{} B", out.len());
        assert_eq!(inflate(&mut Receiver::new(), &out), data);
    }

    #[test]
    fn json_like_text_is_smaller_than_with_fixed_codes_only() {
        // zlib-rs's level 1 writes fixed codes only; our dynamic codes must beat it.
        let text = json_like(16 * 1024, 11);
        let ours = whole(&mut FastDeflate::new(15), &text);
        let mut zlib = crate::deflate::compressor::Key {
            window_bits: 15,
            level: 1,
            mem_level: 8,
        }
        .build();
        let mut theirs = Vec::new();
        compress_zlib_for_test(&mut zlib, &text, &mut theirs);
        assert!(
            ours.len() * 100 < theirs.len() * 95,
            "ours {} B, zlib-rs level 1 {} B",
            ours.len(),
            theirs.len()
        );
    }

    fn compress_zlib_for_test(d: &mut zlib_rs::Deflate, input: &[u8], out: &mut Vec<u8>) {
        crate::deflate::compressor::deflate_into(d, input, zlib_rs::DeflateFlush::SyncFlush, out)
            .expect("zlib-rs compresses");
    }

    #[test]
    fn code_lengths_are_complete_and_within_the_limit() {
        // Fibonacci frequencies make the deepest unlimited Huffman trees.
        let mut fib = [0u32; 30];
        let (mut a, mut b) = (1u32, 1u32);
        for f in fib.iter_mut() {
            *f = a;
            (a, b) = (b, a + b);
        }
        let cases: Vec<(Vec<u32>, u8)> = vec![
            (fib.to_vec(), 15),
            (fib[..19].to_vec(), 7),
            (vec![1, 1], 15),
            (vec![0, 5, 0, 0, 9], 7),
            ((0..286).map(|i| 1 + (i % 7) * 1000).collect(), 15),
        ];
        for (freq, limit) in cases {
            let mut lens = vec![0u8; freq.len()];
            build_lengths(&freq, limit, &mut lens);
            let kraft: u64 = lens
                .iter()
                .filter(|&&l| l > 0)
                .map(|&l| 1u64 << (limit - l))
                .sum();
            assert_eq!(kraft, 1 << limit, "complete code for {freq:?}: {lens:?}");
            for (f, l) in freq.iter().zip(&lens) {
                assert_eq!(*f == 0, *l == 0);
                assert!(*l <= limit);
            }
        }
    }

    #[test]
    fn length_and_distance_codes_match_rfc_1951_tables() {
        // RFC 1951 3.2.5: base lengths and distances of each code.
        const LEN_BASE: [usize; 29] = [
            3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99,
            115, 131, 163, 195, 227, 258,
        ];
        const DIST_BASE: [usize; 30] = [
            1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025,
            1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577,
        ];
        for len in 3..=258 {
            let (c, x) = len_sym(len);
            assert_eq!(LEN_BASE[c] + x as usize, len);
            assert!(x < 1 << LEN_EXTRA[c]);
        }
        for dist in 1..=32768 {
            let (c, x) = dist_sym(dist);
            assert_eq!(DIST_BASE[c] + x as usize, dist);
            assert!(x < 1 << DIST_EXTRA[c]);
        }
    }
}
