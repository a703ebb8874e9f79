//! Kernel bodies written once over a small [`Vector`] trait; each ISA module instantiates
//! them inside a few-line `#[target_feature]` function.
//!
//! UTF-8 validation follows the lookup-table method of Keiser and Lemire ("Validating
//! UTF-8 in less than one instruction per byte", 2021): three 16-entry tables indexed by
//! nibbles of each byte and of the byte before it classify every 2-byte window, and
//! saturating subtractions find the 3rd/4th bytes that must be continuations.

use crate::scalar;

/// Up to this many bytes [`crate::utf8::validate`] tests for ASCII inline, before any
/// dispatch (on x86_64; the kernels skip their own test there, [`Vector::ENTRY_ASCII`]).
/// Here, below both the entry and the kernels, so that neither imports the other.
#[cfg(all(
    target_arch = "x86_64",
    target_feature = "sse2",
    any(feature = "avx2", feature = "avx512")
))]
pub(crate) const ASCII_INLINE_MAX: usize = 128;

/// The vector operations the kernels need. Implemented per ISA with `#[inline(always)]`
/// methods so they inline into the caller's `#[target_feature]` function.
///
/// # Safety
/// Every method may only run on a CPU that supports the implementing type's ISA; the
/// pointer methods additionally need the documented range to be valid.
pub(crate) trait Vector: Copy {
    /// Bytes per vector (a multiple of 4 and a divisor of 64).
    const LANES: usize;
    /// Bytes per step of the main UTF-8 loop, one ASCII test per step: a multiple of
    /// `LANES`, at most `4 * LANES`.
    const STEP: usize = 64;
    /// Inputs up to this many bytes reach the kernel through a public entry that has
    /// tested them for ASCII already ([`ASCII_INLINE_MAX`] on x86_64), so the kernel
    /// does not test again: on text that reaches it, the branch could only mispredict.
    const ENTRY_ASCII: usize = 0;
    /// Whether the UTF-8 kernel first skips an ASCII prefix in runs of [`ascii_run`]
    /// bytes, before it sets up the check ([`validate`]). On an AVX2-only AMD EPYC VM
    /// (256-bit operations at half the 128-bit rate),
    /// `cargo bench -p rapidws-integration --bench kernels_min -- utf8/`: ASCII text of
    /// 256 bytes in 10.5 ns with it and 18.1 without
    /// (simdutf8: 10.8), text with a rare non-ASCII character 14.1 and 20.0, mixed
    /// text 52 and 50. The other ISAs keep the one path until measured on their CPUs.
    const ASCII_PREFIX: bool = false;
    /// # Safety
    /// The ISA must be available.
    unsafe fn splat(b: u8) -> Self;
    /// # Safety
    /// The ISA must be available.
    unsafe fn splat_u32(w: u32) -> Self;
    /// # Safety
    /// The ISA must be available; `p..p+LANES` must be readable.
    unsafe fn load(p: *const u8) -> Self;
    /// # Safety
    /// The ISA must be available; `p..p+LANES` must be writable.
    unsafe fn store(self, p: *mut u8);
    /// Loads `len < LANES` bytes, zero-filling the rest.
    /// # Safety
    /// The ISA must be available; `p..p+len` must be readable.
    unsafe fn load_partial(p: *const u8, len: usize) -> Self;
    /// A 16-byte table, repeated in every 128-bit lane.
    /// # Safety
    /// The ISA must be available.
    unsafe fn table(t: &[u8; 16]) -> Self;
    /// # Safety
    /// The ISA must be available.
    unsafe fn xor(self, o: Self) -> Self;
    /// # Safety
    /// The ISA must be available.
    unsafe fn or(self, o: Self) -> Self;
    /// # Safety
    /// The ISA must be available.
    unsafe fn and(self, o: Self) -> Self;
    /// Every byte shifted right by 4 (its high nibble).
    /// # Safety
    /// The ISA must be available.
    unsafe fn shr4(self) -> Self;
    /// `table[self[i]]` for indexes below 16, per 128-bit lane.
    /// # Safety
    /// The ISA must be available.
    unsafe fn lookup(self, table: Self) -> Self;
    /// Unsigned saturating `self - o` per byte.
    /// # Safety
    /// The ISA must be available.
    unsafe fn sat_sub(self, o: Self) -> Self;
    /// The input shifted by 1, 2, 3 bytes, the first bytes taken from the end of `prev`.
    /// # Safety
    /// The ISA must be available.
    unsafe fn prev1(self, prev: Self) -> Self;
    /// # Safety
    /// The ISA must be available.
    unsafe fn prev2(self, prev: Self) -> Self;
    /// # Safety
    /// The ISA must be available.
    unsafe fn prev3(self, prev: Self) -> Self;
    /// Whether every byte is below 0x80.
    /// # Safety
    /// The ISA must be available.
    unsafe fn is_ascii(self) -> bool;
    /// Whether any byte is non-zero.
    /// # Safety
    /// The ISA must be available.
    unsafe fn any(self) -> bool;
    /// How far ahead of the masking loop to prefetch, in bytes; 0: not at all. The
    /// hardware prefetcher keeps up with 32-byte vectors (two accesses per cache line)
    /// but not, on the Intel Xeon this was measured on, with 64-byte ones past L2: AVX-512
    /// masking of 16 MiB took 0.82-0.90x the time of AVX2's without the hint, 0.99-1.00x
    /// with it 8 KiB ahead (`cargo bench -p rapidws-integration --bench kernels_min --
    /// mask/`). The same hint made the AVX2 loop slower.
    const PREFETCH_AHEAD: usize = 0;
    /// Hints that the cache line at `p` is about to be read; `p` need not be valid.
    /// # Safety
    /// The ISA must be available.
    #[inline(always)]
    unsafe fn prefetch(_p: *const u8) {}
    /// Masks `len < LANES` bytes at `p` in place with `key` (phase 0). The default
    /// uses the scalar words; ISAs with masked loads override it.
    /// # Safety
    /// The ISA must be available; `p..p+len` must be readable and writable.
    #[inline(always)]
    unsafe fn mask_partial(p: *mut u8, len: usize, key: [u8; 4], _k: Self) {
        // SAFETY: the caller guarantees `p..p+len` is valid and exclusively ours.
        scalar::mask(unsafe { core::slice::from_raw_parts_mut(p, len) }, key);
    }
    /// Unmasks `buf`, shorter than `LANES`, in place at key phase 0, for the batch
    /// decoder; whether the unmasked bytes are all ASCII. The default uses the scalar
    /// words; ISAs with masked loads override it.
    /// # Safety
    /// The ISA must be available.
    #[inline(always)]
    unsafe fn unmask_ascii_short(buf: &mut [u8], key: [u8; 4]) -> bool {
        crate::batch::unmask_ascii_words(buf, key)
    }
    /// Whether `buf`, shorter than `LANES`, is all ASCII, for the batch decoder.
    /// # Safety
    /// The ISA must be available.
    #[inline(always)]
    unsafe fn ascii_short(buf: &[u8]) -> bool {
        crate::batch::ascii_words(buf)
    }
}

/// The batch decoder's payload passes ([`crate::batch::Payload`]) on vectors of `V`.
pub(crate) struct Vectors<V>(core::marker::PhantomData<V>);

impl<V: Vector> crate::batch::Payload for Vectors<V> {
    /// Head and tail vectors from the original bytes (the tail ending at the last
    /// byte, at its key phase), the vectors between them in a loop, as [`mask`] does
    /// without its alignment (a batch's payloads are short); the OR of everything
    /// unmasked tells ASCII.
    #[inline(always)]
    unsafe fn unmask_ascii(buf: &mut [u8], key: [u8; 4]) -> bool {
        let n = buf.len();
        if n < V::LANES {
            // SAFETY: the caller guarantees the ISA.
            return unsafe { V::unmask_ascii_short(buf, key) };
        }
        let p = buf.as_mut_ptr();
        // SAFETY: the caller guarantees the ISA; the head vector covers `p..p+LANES`, the
        // tail `p+last..p+n`, the loop's `p+i..p+i+LANES` with `LANES <= i < last`, all
        // inside `buf` since `n >= LANES`. Both ends are loaded before anything is
        // stored, and where the loop overlaps the tail both store the same bytes.
        unsafe {
            let k = V::splat_u32(u32::from_ne_bytes(key));
            let last = n - V::LANES;
            let kl = V::splat_u32(u32::from_ne_bytes(scalar::rotated(key, last)));
            let head = V::load(p).xor(k);
            let tail = V::load(p.add(last)).xor(kl);
            let mut acc = head.or(tail);
            if n <= 2 * V::LANES {
                head.store(p);
                tail.store(p.add(last));
                return acc.is_ascii();
            }
            // `i` is a multiple of `LANES`, itself of 4: key phase 0.
            let mut i = V::LANES;
            while i + 3 * V::LANES <= last {
                let a = V::load(p.add(i)).xor(k);
                let b = V::load(p.add(i + V::LANES)).xor(k);
                let c = V::load(p.add(i + 2 * V::LANES)).xor(k);
                let d = V::load(p.add(i + 3 * V::LANES)).xor(k);
                a.store(p.add(i));
                b.store(p.add(i + V::LANES));
                c.store(p.add(i + 2 * V::LANES));
                d.store(p.add(i + 3 * V::LANES));
                acc = acc.or(a).or(b).or(c).or(d);
                i += 4 * V::LANES;
            }
            while i < last {
                let v = V::load(p.add(i)).xor(k);
                v.store(p.add(i));
                acc = acc.or(v);
                i += V::LANES;
            }
            head.store(p);
            tail.store(p.add(last));
            acc.is_ascii()
        }
    }

    #[inline(always)]
    unsafe fn ascii(buf: &[u8]) -> bool {
        let n = buf.len();
        if n < V::LANES {
            // SAFETY: the caller guarantees the ISA.
            return unsafe { V::ascii_short(buf) };
        }
        let p = buf.as_ptr();
        // SAFETY: the caller guarantees the ISA; every vector lies in `p..p+n`: they start
        // at 0, at `last = n - LANES`, and at multiples of `LANES` below `last`.
        unsafe {
            let last = n - V::LANES;
            // The first and the last vector, then four at a time, then one at a time: two
            // loads and no loop up to two vectors, as most messages of a batch are.
            let mut acc = V::load(p).or(V::load(p.add(last)));
            let mut i = V::LANES;
            while i + 3 * V::LANES <= last {
                acc = acc
                    .or(V::load(p.add(i)))
                    .or(V::load(p.add(i + V::LANES)))
                    .or(V::load(p.add(i + 2 * V::LANES)))
                    .or(V::load(p.add(i + 3 * V::LANES)));
                i += 4 * V::LANES;
            }
            while i < last {
                acc = acc.or(V::load(p.add(i)));
                i += V::LANES;
            }
            acc.is_ascii()
        }
    }

    type Checker = Utf8<V>;
    type Errors = V;

    #[inline(always)]
    unsafe fn checker() -> (Utf8<V>, V) {
        // SAFETY: the caller guarantees the ISA.
        unsafe { (Utf8::new(), V::splat(0)) }
    }

    #[inline(always)]
    unsafe fn check(u: &Utf8<V>, buf: &[u8], errors: &mut V) {
        // SAFETY: the caller guarantees the ISA; the batch calls it for text that is not
        // all ASCII.
        unsafe { *errors = errors.or(text_errors::<V>(u, buf)) }
    }

    #[inline(always)]
    unsafe fn any(errors: V) -> bool {
        // SAFETY: the caller guarantees the ISA.
        unsafe { errors.any() }
    }
}

// Error classes of a 2-byte window (first byte = `prev1`, second = current byte).
const TOO_SHORT: u8 = 1 << 0; // lead byte followed by a lead byte or ASCII
const TOO_LONG: u8 = 1 << 1; // ASCII followed by a continuation
const OVERLONG_3: u8 = 1 << 2; // E0 80..9F
const TOO_LARGE: u8 = 1 << 3; // F4 90..BF, F5.. 90..BF
const SURROGATE: u8 = 1 << 4; // ED A0..BF
const OVERLONG_2: u8 = 1 << 5; // C0/C1 + continuation
const TOO_LARGE_1000: u8 = 1 << 6; // F5..FF 80..8F
const OVERLONG_4: u8 = 1 << 6; // F0 80..8F (shares the bit: the lead's low nibble tells)
const TWO_CONTS: u8 = 1 << 7; // continuation + continuation (allowed in 3rd/4th place)
const CARRY: u8 = TOO_SHORT | TOO_LONG | TWO_CONTS;

/// Indexed by the high nibble of the first byte.
static BYTE_1_HIGH: [u8; 16] = [
    TOO_LONG,
    TOO_LONG,
    TOO_LONG,
    TOO_LONG,
    TOO_LONG,
    TOO_LONG,
    TOO_LONG,
    TOO_LONG,
    TWO_CONTS,
    TWO_CONTS,
    TWO_CONTS,
    TWO_CONTS,
    TOO_SHORT | OVERLONG_2,
    TOO_SHORT,
    TOO_SHORT | OVERLONG_3 | SURROGATE,
    TOO_SHORT | TOO_LARGE | TOO_LARGE_1000 | OVERLONG_4,
];

/// Indexed by the low nibble of the first byte.
static BYTE_1_LOW: [u8; 16] = [
    CARRY | OVERLONG_3 | OVERLONG_2 | OVERLONG_4,
    CARRY | OVERLONG_2,
    CARRY,
    CARRY,
    CARRY | TOO_LARGE,
    CARRY | TOO_LARGE | TOO_LARGE_1000,
    CARRY | TOO_LARGE | TOO_LARGE_1000,
    CARRY | TOO_LARGE | TOO_LARGE_1000,
    CARRY | TOO_LARGE | TOO_LARGE_1000,
    CARRY | TOO_LARGE | TOO_LARGE_1000,
    CARRY | TOO_LARGE | TOO_LARGE_1000,
    CARRY | TOO_LARGE | TOO_LARGE_1000,
    CARRY | TOO_LARGE | TOO_LARGE_1000,
    CARRY | TOO_LARGE | TOO_LARGE_1000 | SURROGATE,
    CARRY | TOO_LARGE | TOO_LARGE_1000,
    CARRY | TOO_LARGE | TOO_LARGE_1000,
];

/// Indexed by the high nibble of the second byte.
static BYTE_2_HIGH: [u8; 16] = [
    TOO_SHORT,
    TOO_SHORT,
    TOO_SHORT,
    TOO_SHORT,
    TOO_SHORT,
    TOO_SHORT,
    TOO_SHORT,
    TOO_SHORT,
    TOO_LONG | OVERLONG_2 | TWO_CONTS | OVERLONG_3 | TOO_LARGE_1000 | OVERLONG_4,
    TOO_LONG | OVERLONG_2 | TWO_CONTS | OVERLONG_3 | TOO_LARGE,
    TOO_LONG | OVERLONG_2 | TWO_CONTS | SURROGATE | TOO_LARGE,
    TOO_LONG | OVERLONG_2 | TWO_CONTS | SURROGATE | TOO_LARGE,
    TOO_SHORT,
    TOO_SHORT,
    TOO_SHORT,
    TOO_SHORT,
];

/// Per-byte maxima for a block that may end a string: a lead byte in the last three
/// positions that needs more bytes than remain exceeds its limit.
static INCOMPLETE_MAX: [u8; 64] = {
    let mut m = [0xFF; 64];
    m[61] = 0xF0 - 1;
    m[62] = 0xE0 - 1;
    m[63] = 0xC0 - 1;
    m
};

/// Streaming UTF-8 checker over vectors: error bits accumulate, checked once at the end.
#[derive(Clone, Copy)]
pub(crate) struct Utf8<V> {
    prev: V,
    incomplete: V,
    error: V,
    t1h: V,
    t1l: V,
    t2h: V,
    low_nibble: V,
    third: V,
    fourth: V,
    high_bit: V,
    max: V,
}

impl<V: Vector> Utf8<V> {
    /// # Safety
    /// The ISA of `V` must be available.
    #[inline(always)]
    pub(crate) unsafe fn new() -> Self {
        // SAFETY: the caller guarantees the ISA; INCOMPLETE_MAX holds 64 >= LANES bytes.
        unsafe {
            Utf8 {
                prev: V::splat(0),
                incomplete: V::splat(0),
                error: V::splat(0),
                t1h: V::table(&BYTE_1_HIGH),
                t1l: V::table(&BYTE_1_LOW),
                t2h: V::table(&BYTE_2_HIGH),
                low_nibble: V::splat(0x0F),
                third: V::splat(0xE0 - 0x80),
                fourth: V::splat(0xF0 - 0x80),
                high_bit: V::splat(0x80),
                max: V::load(INCOMPLETE_MAX.as_ptr().add(64 - V::LANES)),
            }
        }
    }

    /// Checks one vector of input that follows the previous one.
    /// # Safety
    /// The ISA of `V` must be available.
    #[inline(always)]
    pub(crate) unsafe fn block(&mut self, input: V) {
        // SAFETY: the caller guarantees the ISA.
        unsafe {
            if input.is_ascii() {
                // A sequence left open by the previous vector cannot continue in ASCII.
                self.error = self.error.or(self.incomplete);
                self.incomplete = V::splat(0);
            } else {
                self.non_ascii(input);
            }
            self.prev = input;
        }
    }

    /// Checks a vector known to contain non-ASCII bytes; does not update `prev`.
    /// # Safety
    /// The ISA of `V` must be available.
    #[inline(always)]
    unsafe fn non_ascii(&mut self, input: V) {
        // SAFETY: the caller guarantees the ISA.
        unsafe {
            let e = self.errors(
                input,
                input.prev1(self.prev),
                input.prev2(self.prev),
                input.prev3(self.prev),
            );
            self.error = self.error.or(e);
            self.incomplete = input.sat_sub(self.max);
        }
    }

    /// The error bits of every 2- to 4-byte window ending in `input`, given the input
    /// shifted by 1, 2 and 3 bytes (`p1`, `p2`, `p3`: the bytes before each position).
    /// # Safety
    /// The ISA of `V` must be available.
    #[inline(always)]
    unsafe fn errors(&self, input: V, p1: V, p2: V, p3: V) -> V {
        // SAFETY: the caller guarantees the ISA.
        unsafe {
            let special = p1
                .shr4()
                .lookup(self.t1h)
                .and(p1.and(self.low_nibble).lookup(self.t1l))
                .and(input.shr4().lookup(self.t2h));
            let must_be_cont = p2
                .sat_sub(self.third)
                .or(p3.sat_sub(self.fourth))
                .and(self.high_bit);
            must_be_cont.xor(special)
        }
    }

    /// Checks `64 / LANES` vectors at `p` with one ASCII test for all of them.
    /// # Safety
    /// The ISA of `V` must be available; `p..p+64` readable.
    #[inline(always)]
    unsafe fn block64(&mut self, v: [V; 4]) {
        let n = 64 / V::LANES;
        // SAFETY: the caller guarantees the ISA.
        unsafe {
            let mut all = v[0];
            for x in &v[1..n] {
                all = all.or(*x);
            }
            if all.is_ascii() {
                self.error = self.error.or(self.incomplete);
                self.incomplete = V::splat(0);
                self.prev = v[n - 1];
            } else {
                // No per-vector ASCII test here: on mixed text its branch mispredicts
                // more than the table lookups it would skip cost.
                for x in &v[..n] {
                    self.non_ascii(*x);
                    self.prev = *x;
                }
            }
        }
    }

    /// True when everything fed so far is valid and no sequence is left open.
    /// # Safety
    /// The ISA of `V` must be available.
    #[inline(always)]
    pub(crate) unsafe fn finish(&self) -> bool {
        // SAFETY: the caller guarantees the ISA.
        unsafe { !self.error.or(self.incomplete).any() }
    }
}

/// Loads the `64 / LANES` vectors starting at `p`.
/// # Safety
/// The ISA of `V` must be available; `p..p+64` readable.
#[inline(always)]
unsafe fn load64<V: Vector>(p: *const u8) -> [V; 4] {
    // SAFETY: the caller guarantees the ISA and 64 readable bytes; `j * LANES < 64`.
    unsafe {
        let mut v = [V::splat(0); 4];
        for (j, x) in v.iter_mut().enumerate().take(64 / V::LANES) {
            *x = V::load(p.add(j * V::LANES));
        }
        v
    }
}

/// Loads the `STEP / LANES` vectors starting at `p` (the rest of the array is unused).
/// # Safety
/// The ISA of `V` must be available; `p..p+STEP` readable.
#[inline(always)]
unsafe fn load_step<V: Vector>(p: *const u8) -> [V; 4] {
    // SAFETY: the caller guarantees the ISA and STEP readable bytes; `j * LANES < STEP`.
    unsafe {
        let mut v = [V::splat(0); 4];
        for (j, x) in v.iter_mut().enumerate().take(V::STEP / V::LANES) {
            *x = V::load(p.add(j * V::LANES));
        }
        v
    }
}

/// The OR of the `STEP / LANES` vectors of a step: ASCII if and only if the step is.
/// # Safety
/// The ISA of `V` must be available.
#[inline(always)]
unsafe fn or_step<V: Vector>(v: &[V; 4]) -> V {
    // SAFETY: the caller guarantees the ISA.
    unsafe {
        let mut all = v[0];
        for x in &v[1..V::STEP / V::LANES] {
            all = all.or(*x);
        }
        all
    }
}

/// Bytes per test of the loop that skips a run of ASCII: 4 vectors, at least 128 bytes.
#[inline(always)]
const fn ascii_run<V: Vector>() -> usize {
    if 4 * V::LANES > 128 {
        4 * V::LANES
    } else {
        128
    }
}

/// Whether the `b` bytes at `p` are all ASCII (`b` a multiple of `LANES`).
/// # Safety
/// The ISA of `V` must be available; `p..p+b` readable.
#[inline(always)]
unsafe fn ascii_at<V: Vector>(p: *const u8, b: usize) -> bool {
    // SAFETY: the caller guarantees the ISA and b readable bytes.
    unsafe {
        let mut all = V::load(p);
        let mut j = V::LANES;
        while j < b {
            all = all.or(V::load(p.add(j)));
            j += V::LANES;
        }
        all.is_ascii()
    }
}

impl<V: Vector> Utf8<V> {
    /// The error bits of the windows ending in the vector `input` at `p`, reading the
    /// bytes before each position from memory (`p - 1`, `p - 2`, `p - 3`) instead of
    /// shuffling them out of the previous vector: three loads in place of four shuffles,
    /// which compete with the table lookups for the shuffle ports.
    ///
    /// Checking a byte twice is harmless (its error bits depend only on it and the three
    /// bytes before it), so a last vector may overlap ones checked before.
    /// # Safety
    /// The ISA of `V` must be available; `p - 3 .. p + LANES` must be readable.
    #[inline(always)]
    unsafe fn check_at(&self, p: *const u8, input: V) -> V {
        // SAFETY: the caller guarantees the ISA and the readable range.
        unsafe {
            self.errors(
                input,
                V::load(p.sub(1)),
                V::load(p.sub(2)),
                V::load(p.sub(3)),
            )
        }
    }

    /// Non-zero when a sequence is left open just before `p`: a lead byte in the last
    /// three positions before `p` that needs more bytes than remain before `p`. An ASCII
    /// stretch from `p` on is valid exactly when this is zero.
    /// # Safety
    /// The ISA of `V` must be available; `p - LANES .. p` must be readable.
    #[inline(always)]
    unsafe fn open_before(&self, p: *const u8) -> V {
        // SAFETY: the caller guarantees the ISA and the readable range.
        unsafe { V::load(p.sub(V::LANES)).sat_sub(self.max) }
    }

    /// The error bits of the first vector of a string (nothing before it).
    /// # Safety
    /// The ISA of `V` must be available; `p..p+LANES` must be readable.
    #[inline(always)]
    unsafe fn check_first(&self, p: *const u8) -> V {
        // SAFETY: the caller guarantees the ISA and the readable range.
        unsafe {
            let v = V::load(p);
            if v.is_ascii() {
                return V::splat(0);
            }
            let zero = V::splat(0);
            self.errors(v, v.prev1(zero), v.prev2(zero), v.prev3(zero))
        }
    }

    /// Checks `[i, end)` of the string at `p`, `STEP` bytes at a time with one ASCII test
    /// per step, while a whole step fits; returns where it stopped (`end - i < STEP`).
    /// The error bits are OR-ed into `err`.
    ///
    /// An ASCII step is valid when no sequence is left open before it
    /// ([`Utf8::open_before`]); a run of ASCII steps after it is skipped in a loop with
    /// nothing else in it. After two non-ASCII steps in a row the next [`DENSE_RUN`]
    /// steps are checked whole, untested: on mostly-ASCII text with a non-ASCII
    /// character every hundred bytes or so about a third of the steps are ASCII, and
    /// the test's branch mispredicts more than the checks it skips cost, while text
    /// with a rare non-ASCII character never has two such steps in a row.
    /// # Safety
    /// The ISA of `V` must be available; `i >= LANES`; `p + i - LANES .. p + end` must be
    /// readable.
    #[inline(always)]
    unsafe fn body(&self, p: *const u8, mut i: usize, end: usize, err: &mut V) -> usize {
        // SAFETY: the caller guarantees the ISA; every load lies in `p + i - LANES ..
        // p + i + STEP` with `i >= LANES` and `i + V::STEP <= end`.
        unsafe {
            let mut dense = false;
            while i + V::STEP <= end {
                let v = load_step::<V>(p.add(i));
                if or_step(&v).is_ascii() {
                    dense = false;
                    *err = err.or(self.open_before(p.add(i)));
                    i += V::STEP;
                    // A run of ASCII: 4 vectors per test, nothing else in the loop.
                    let run = ascii_run::<V>();
                    while i + run <= end && ascii_at::<V>(p.add(i), run) {
                        i += run;
                    }
                } else {
                    for (j, x) in v.iter().enumerate().take(V::STEP / V::LANES) {
                        *err = err.or(self.check_at(p.add(i + j * V::LANES), *x));
                    }
                    i += V::STEP;
                    // A second non-ASCII step in a row: text this dense goes on being
                    // non-ASCII, so the next steps are checked without the test.
                    let stop = if dense {
                        end.min(i + DENSE_RUN * V::STEP)
                    } else {
                        i
                    };
                    dense = true;
                    while i + V::STEP <= stop {
                        for j in 0..V::STEP / V::LANES {
                            let q = p.add(i + j * V::LANES);
                            *err = err.or(self.check_at(q, V::load(q)));
                        }
                        i += V::STEP;
                    }
                }
            }
            i
        }
    }

    /// Checks `[i, n)`, the last bytes of the string at `p` (fewer than `STEP`, possibly
    /// none), and whether a sequence is left open at the end. The last vector ends at
    /// the last byte, overlapping bytes checked before, instead of a copy into a
    /// zero-padded buffer. One ASCII test for the whole tail.
    /// # Safety
    /// The ISA of `V` must be available; `LANES <= i <= n`, `n >= LANES + 3`; `p..p+n`
    /// must be readable.
    #[inline(always)]
    unsafe fn tail(&self, p: *const u8, i: usize, n: usize, err: &mut V) {
        // SAFETY: the caller guarantees the ISA; vectors start at `i` or below `n -
        // LANES`, and at or after `n - LANES >= 3`, so they and their 3 preceding bytes
        // lie in `p..p+n`; `open_before` reads `p + i - LANES .. p + i` with `i >= LANES`.
        unsafe {
            let last = n - V::LANES;
            if i < n {
                let mut all = V::load(p.add(last));
                let mut j = i;
                while j < last {
                    all = all.or(V::load(p.add(j)));
                    j += V::LANES;
                }
                if all.is_ascii() {
                    *err = err.or(self.open_before(p.add(i)));
                } else {
                    let mut j = i;
                    while j < last {
                        *err = err.or(self.check_at(p.add(j), V::load(p.add(j))));
                        j += V::LANES;
                    }
                    *err = err.or(self.check_at(p.add(last), V::load(p.add(last))));
                }
            }
            *err = err.or(self.open_before(p.add(n)));
        }
    }
}

/// Steps checked without an ASCII test after two non-ASCII steps in a row
/// ([`Utf8::body`]). Measured with `kernels_min` on the Intel VM, text with 2 %
/// non-ASCII bytes: 1 KiB in 50 ns with the untested run and 60 without (AVX-512), 60
/// and 72 (AVX2), 1 MiB in 49 and 71 us (AVX2); text with a non-ASCII character every
/// ~3 KiB is as fast either way.
const DENSE_RUN: usize = 7;

/// Whether `buf` is valid, complete UTF-8.
///
/// Where the ISA asks for it ([`Vector::ASCII_PREFIX`]) a leading stretch of ASCII is
/// skipped first, one test per [`ascii_run`] bytes, and all-ASCII input returns before
/// the check's tables are set up. Then the first vector is checked on its own (there are
/// no bytes before it to load); after it every vector reads its preceding bytes from
/// memory ([`Utf8::check_at`]), `STEP` bytes per step with one ASCII test
/// ([`Utf8::body`]), and the last bytes end in one vector ending at the last byte
/// ([`Utf8::tail`]). Errors are OR-ed together and tested once, at the end. Inputs
/// shorter than `LANES + 3` go through the streaming checker.
/// # Safety
/// The ISA of `V` must be available.
#[inline(always)]
pub(crate) unsafe fn validate<V: Vector>(buf: &[u8]) -> bool {
    let n = buf.len();
    let p = buf.as_ptr();
    if n < V::LANES + 3 {
        // SAFETY: the caller guarantees the ISA.
        return unsafe { validate_stream::<V>(buf) };
    }
    if n <= 4 * V::LANES {
        // SAFETY: the caller guarantees the ISA; `LANES + 3 <= n <= 4 * LANES`.
        return unsafe { validate_small::<V>(p, n) };
    }
    // SAFETY: the caller guarantees the ISA. The prefix runs read `p + i .. p + i + run`
    // with `i + run < n`, and `p + n - run .. p + n` with `n >= run`; after them `i` is 0
    // or at least `run >= LANES`, and `n >= LANES + 3`, as `check_first`, `body` (from
    // `LANES` or `i`, to `n`) and `tail` need.
    unsafe {
        let run = ascii_run::<V>();
        let mut i = 0;
        if V::ASCII_PREFIX && n >= run {
            while i + run < n && ascii_at::<V>(p.add(i), run) {
                i += run;
            }
            // All ASCII when the last run, ending at the end, is (it overlaps the rest).
            if i + run >= n && ascii_at::<V>(p.add(n - run), run) {
                return true;
            }
        }
        let u = Utf8::<V>::new();
        // After an ASCII prefix (`i >= run > LANES`) no sequence is open at `i`: the check
        // starts there with no error, as after an ASCII step of `body`.
        let (mut err, i) = if i == 0 {
            (u.check_first(p), V::LANES)
        } else {
            (V::splat(0), i)
        };
        let i = u.body(p, i, n, &mut err);
        u.tail(p, i, n, &mut err);
        !err.any()
    }
}

/// Whether the `n` bytes at `p` are valid, complete UTF-8, for `LANES + 3 <= n <= 4 *
/// LANES`: two vectors (the first and the last) up to `2 * LANES`, else four (the first,
/// the last, and two between them, the third overlapping the last when `n` is short),
/// with one ASCII test for all of them and no loop.
/// # Safety
/// The ISA of `V` must be available; `LANES + 3 <= n <= 4 * LANES`; `p..p+n` readable.
#[inline(always)]
unsafe fn validate_small<V: Vector>(p: *const u8, n: usize) -> bool {
    let last = n - V::LANES;
    // SAFETY: the caller guarantees the ISA; every vector lies in `p..p+n`.
    unsafe {
        let v0 = V::load(p);
        let all = if n <= 2 * V::LANES {
            // Two vectors, the second overlapping the first unless `n == 2 * LANES`.
            v0.or(V::load(p.add(last)))
        } else {
            let v1 = V::load(p.add(V::LANES));
            let v2 = V::load(p.add((2 * V::LANES).min(last)));
            v0.or(v1).or(v2).or(V::load(p.add(last)))
        };
        if n > V::ENTRY_ASCII && all.is_ascii() {
            return true;
        }
        !small_errors(&Utf8::<V>::new(), p, n).any()
    }
}

/// The error bits of the `n` bytes at `p` for `LANES + 3 <= n <= 4 * LANES`: two
/// vectors (the first and the last) up to `2 * LANES`, else four (the first, the last,
/// and two between them, the third overlapping the last when `n` is short), no loop.
/// # Safety
/// The ISA of `V` must be available; `LANES + 3 <= n <= 4 * LANES`; `p..p+n` readable.
#[inline(always)]
unsafe fn small_errors<V: Vector>(u: &Utf8<V>, p: *const u8, n: usize) -> V {
    let last = n - V::LANES;
    // SAFETY: the caller guarantees the ISA; every vector lies in `p..p+n`, and all but
    // the first start at or after `min(LANES, n - LANES) >= 3`, as `check_at` needs.
    unsafe {
        let v0 = V::load(p);
        let zero = V::splat(0);
        let first = u.errors(v0, v0.prev1(zero), v0.prev2(zero), v0.prev3(zero));
        if n <= 2 * V::LANES {
            return first
                .or(u.check_at(p.add(last), V::load(p.add(last))))
                .or(u.open_before(p.add(n)));
        }
        let o1 = V::LANES;
        let o2 = (2 * V::LANES).min(last);
        first
            .or(u.check_at(p.add(o1), V::load(p.add(o1))))
            .or(u.check_at(p.add(o2), V::load(p.add(o2))))
            .or(u.check_at(p.add(last), V::load(p.add(last))))
            .or(u.open_before(p.add(n)))
    }
}

/// The error bits of `buf`, text that is not all ASCII, checked as one complete UTF-8
/// string (none: valid), with the checker's tables set up once for many such calls (`u`,
/// fresh from [`Utf8::new`]): the batch decoder's check of one message's text, which
/// it gathers with the others' and tests once. [`validate`] without its ASCII tests.
/// # Safety
/// The ISA of `V` must be available.
#[inline(always)]
pub(crate) unsafe fn text_errors<V: Vector>(u: &Utf8<V>, buf: &[u8]) -> V {
    let n = buf.len();
    let p = buf.as_ptr();
    // SAFETY: the caller guarantees the ISA; the lengths are what each path needs.
    unsafe {
        if n < V::LANES + 3 {
            // Short: the streaming checker, its verdict as error bits.
            let ok = validate_stream::<V>(buf);
            return V::splat(u8::from(!ok));
        }
        if n <= 4 * V::LANES {
            return small_errors(u, p, n);
        }
        let mut err = u.check_first(p);
        let i = u.body(p, V::LANES, n, &mut err);
        u.tail(p, i, n, &mut err);
        err
    }
}

/// Whether `buf` is valid, complete UTF-8, one vector after another through the
/// streaming checker (short inputs, where a vector cannot overlap three earlier bytes).
/// # Safety
/// The ISA of `V` must be available.
#[inline(always)]
unsafe fn validate_stream<V: Vector>(buf: &[u8]) -> bool {
    let n = buf.len();
    let p = buf.as_ptr();
    // SAFETY: the caller guarantees the ISA; every load stays inside `buf`.
    unsafe {
        let mut u = Utf8::<V>::new();
        let mut i = 0;
        while i + 64 <= n {
            u.block64(load64::<V>(p.add(i)));
            i += 64;
        }
        while i + V::LANES <= n {
            u.block(V::load(p.add(i)));
            i += V::LANES;
        }
        if i < n {
            // The zero padding is ASCII, so it also closes the check of an open sequence.
            u.block(V::load_partial(p.add(i), n - i));
        }
        u.finish()
    }
}

/// From this many vectors on, masking aligns its stores: a vector store that straddles two
/// cache lines costs two, and a payload that follows a header is rarely aligned. Below
/// it the head vector would overlap most of the rest (`mask` covers up to four vectors
/// without a loop, so its loop always aligns).
const ALIGN_FROM: usize = 4;

/// `(skew, key)` for a loop that starts at the first `LANES`-aligned address after `p`
/// (`p + LANES` when `p` is aligned: the head vector covers `p..p + LANES`): the bytes
/// before it, 1 to `LANES`, and the key at the phase of that address.
#[inline(always)]
fn aligned_start<V: Vector>(p: *const u8, key: [u8; 4]) -> (usize, [u8; 4]) {
    let skew = V::LANES - (p.addr() & (V::LANES - 1));
    (skew, scalar::rotated(key, skew))
}

/// Masks `buf` in place starting at key phase 0.
///
/// The first and the last vector are masked from the original bytes before the loop and
/// stored after it (where they overlap the loop's vectors, both write the same bytes),
/// so the loop can start at the first aligned address and end anywhere without a scalar
/// head or tail. The loop stops where the last vector starts, so an aligned payload of
/// whole vectors loads and stores each vector once.
/// # Safety
/// The ISA of `V` must be available.
#[inline(always)]
pub(crate) unsafe fn mask<V: Vector>(buf: &mut [u8], key: [u8; 4]) {
    let n = buf.len();
    let p = buf.as_mut_ptr();
    // SAFETY: the caller guarantees the ISA; every access stays inside `buf`: vectors
    // start at `0`, `last = n - LANES`, at `LANES` and `last - LANES` when
    // `2 * LANES < n`, and at `i` with `i < last`.
    unsafe {
        let k = V::splat_u32(u32::from_ne_bytes(key));
        if n < V::LANES {
            V::mask_partial(p, n, key, k);
            return;
        }
        let last = n - V::LANES;
        let kl = V::splat_u32(u32::from_ne_bytes(scalar::rotated(key, last)));
        let tail = V::load(p.add(last)).xor(kl);
        let head = V::load(p).xor(k);
        if n <= 2 * V::LANES {
            // The first and the last vector cover it all.
            head.store(p);
            tail.store(p.add(last));
            return;
        }
        if n <= 4 * V::LANES {
            // Two vectors from each end cover it all, without a loop. A vector ending
            // `LANES` (a multiple of 4) before the last one has the last one's key phase.
            let b = V::load(p.add(V::LANES)).xor(k);
            let c = V::load(p.add(last - V::LANES)).xor(kl);
            head.store(p);
            b.store(p.add(V::LANES));
            c.store(p.add(last - V::LANES));
            tail.store(p.add(last));
            return;
        }
        // Past four vectors (`ALIGN_FROM`) the loop always starts aligned.
        let (mut i, key_at) = aligned_start::<V>(p, key);
        let kk = V::splat_u32(u32::from_ne_bytes(key_at));
        // `[i, last)`: the last vector covers the rest.
        while i + 4 * V::LANES <= last {
            if V::PREFETCH_AHEAD > 0 {
                V::prefetch(p.wrapping_add(i + V::PREFETCH_AHEAD));
            }
            let a = V::load(p.add(i)).xor(kk);
            let b = V::load(p.add(i + V::LANES)).xor(kk);
            let c = V::load(p.add(i + 2 * V::LANES)).xor(kk);
            let d = V::load(p.add(i + 3 * V::LANES)).xor(kk);
            a.store(p.add(i));
            b.store(p.add(i + V::LANES));
            c.store(p.add(i + 2 * V::LANES));
            d.store(p.add(i + 3 * V::LANES));
            i += 4 * V::LANES;
        }
        while i < last {
            V::load(p.add(i)).xor(kk).store(p.add(i));
            i += V::LANES;
        }
        head.store(p);
        tail.store(p.add(last));
    }
}

/// Writes `src ^ key` into `dst` (same length) starting at key phase 0, with the stores
/// aligned for long inputs as in [`mask`].
/// # Safety
/// The ISA of `V` must be available; `dst.len() == src.len()`.
#[inline(always)]
pub(crate) unsafe fn mask_copy<V: Vector>(dst: &mut [u8], src: &[u8], key: [u8; 4]) {
    let n = src.len();
    debug_assert_eq!(dst.len(), n);
    let d = dst.as_mut_ptr();
    let s = src.as_ptr();
    if n < V::LANES {
        scalar::mask_copy(dst, src, key);
        return;
    }
    // SAFETY: the caller guarantees the ISA and equal lengths; accesses stay in bounds as
    // in `mask`. `dst` and `src` do not overlap (one is borrowed mutably).
    unsafe {
        let k = V::splat_u32(u32::from_ne_bytes(key));
        let last = n - V::LANES;
        let kl = V::splat_u32(u32::from_ne_bytes(scalar::rotated(key, last)));
        V::load(s).xor(k).store(d);
        let (mut i, mut kk) = (V::LANES, k);
        if n >= ALIGN_FROM * V::LANES {
            let (skew, key_at) = aligned_start::<V>(d, key);
            i = skew;
            kk = V::splat_u32(u32::from_ne_bytes(key_at));
        }
        while i + 4 * V::LANES <= last {
            let a = V::load(s.add(i)).xor(kk);
            let b = V::load(s.add(i + V::LANES)).xor(kk);
            let c = V::load(s.add(i + 2 * V::LANES)).xor(kk);
            let e = V::load(s.add(i + 3 * V::LANES)).xor(kk);
            a.store(d.add(i));
            b.store(d.add(i + V::LANES));
            c.store(d.add(i + 2 * V::LANES));
            e.store(d.add(i + 3 * V::LANES));
            i += 4 * V::LANES;
        }
        while i < last {
            V::load(s.add(i)).xor(kk).store(d.add(i));
            i += V::LANES;
        }
        V::load(s.add(last)).xor(kl).store(d.add(last));
    }
}
