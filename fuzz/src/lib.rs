//! What the fuzz targets share: a reader over the fuzzer's bytes, and [`Filler`], which
//! grows a few of them into a payload of any length. A target reads a length and a fill
//! spec from its input instead of the payload itself, so an input of a few dozen bytes can
//! describe a megabyte frame: the fuzzer reaches large frames, long messages and inflate
//! bombs without mutating megabytes of random input, and each run stays fast.

/// Reads an input front to back. Past the end every number reads as 0 and every slice as
/// empty, so any input is a valid one.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    data: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader over `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Reader { data }
    }

    /// Whether every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        self.data
    }

    /// One byte, or 0 at the end.
    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    /// Two bytes, big-endian (as on the wire).
    pub fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8(), self.u8()])
    }

    /// Three bytes, big-endian: a length up to 16 MiB.
    pub fn u24(&mut self) -> u32 {
        u32::from_be_bytes([0, self.u8(), self.u8(), self.u8()])
    }

    /// Four bytes, big-endian.
    pub fn u32(&mut self) -> u32 {
        u32::from_be_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    /// A length, short most of the time: a byte below `0xf0` is the length itself,
    /// `0xf0..=0xfe` is followed by a 2-byte length, `0xff` by a 3-byte one (up to 16 MiB).
    /// Random bytes then describe small payloads and fast runs, while one byte of the
    /// input (or a dictionary entry) is all a large payload takes.
    pub fn length(&mut self) -> usize {
        match self.u8() {
            n @ 0..0xf0 => usize::from(n),
            0xf0..0xff => usize::from(self.u16()),
            0xff => self.u24() as usize,
        }
    }

    /// Up to `n` bytes (fewer at the end).
    pub fn take(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.data.split_at(n.min(self.data.len()));
        self.data = rest;
        head
    }

    /// A position in `0..=len` from two bytes, spread over the whole range (every
    /// position is reachable while `len < 65536`).
    pub fn position(&mut self, len: usize) -> usize {
        ((usize::from(self.u16()) * (len + 1)) >> 16).min(len)
    }
}

/// Code points of every UTF-8 length, so that a text payload cut anywhere splits one.
const TEXT: &[char] = &[
    'a',
    'é',
    '€',
    '😀',
    ' ',
    'ß',
    '中',
    '\u{10FFFF}',
    'z',
    '\u{80}',
];

/// Words for JSON-like text: compressible the way real messages are.
const WORDS: &[&str] = &[
    "{\"id\":",
    "\"name\":\"",
    "\",",
    "\"price\":",
    "12.5",
    "true",
    "null",
    "},",
    "[",
    "]",
    "\"ts\":1700000000",
    "\"symbol\":\"BTC-USD\"",
    " ",
    "\"qty\":",
    "0.0001",
    "\n",
];

/// Grows fill specs into payloads. Text continues from one payload to the next (the
/// fragments of one message then split code points and still join into UTF-8), so a
/// target keeps one `Filler` per message and [`Filler::new_message`] between messages.
#[derive(Clone, Debug, Default)]
pub struct Filler {
    /// Bytes of `TEXT`'s endless cycle already produced by this message.
    text_pos: usize,
}

impl Filler {
    /// A filler at the start of a message.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts a new message: text starts again at a code point boundary.
    pub fn new_message(&mut self) {
        self.text_pos = 0;
    }

    /// Appends `len` bytes made by the spec read from `r`. The spec's first byte picks the
    /// shape (low 3 bits) and, for text, bit 3 asks for whole code points at the end of the
    /// message (`message_end`), ASCII filling the room a cut one would take:
    ///
    /// | shape | bytes | payload |
    /// |---|---|---|
    /// | 0 | `b` | `b` repeated |
    /// | 1 | `n`, then `n % 64 + 1` bytes | those bytes, cycled |
    /// | 2 | `skip` | UTF-8 text of code points of 1 to 4 bytes, continuing the message's text after skipping `skip` bytes (0 keeps it valid) |
    /// | 3 | seed (4) | noise: incompressible |
    /// | 4 | `n` (2), then `n` bytes | those bytes (as far as `len`), then cycled; zeros when none |
    /// | 5 | `n`, seed (4) | a block of `16 * (n + 1)` noise bytes, repeated (matches at a distance) |
    /// | 6 | seed (4) | JSON-like ASCII words |
    /// | 7 | seed (4), `d` | sparse: zeros with a noise byte every `d + 1` bytes on average |
    pub fn fill(&mut self, r: &mut Reader<'_>, len: usize, message_end: bool, out: &mut Vec<u8>) {
        let spec = r.u8();
        let start = out.len();
        out.reserve(len);
        match spec & 7 {
            0 => out.resize(start + len, r.u8()),
            1 => {
                let n = usize::from(r.u8() % 64) + 1;
                cycle(r.take(n), len, out);
            }
            2 => {
                self.text_pos += usize::from(r.u8());
                self.text(len, spec & 8 != 0 && message_end, out);
            }
            3 => {
                let mut rng = Rng::new(r.u32());
                out.extend((0..len).map(|_| rng.byte()));
            }
            4 => {
                let n = usize::from(r.u16());
                cycle(r.take(n), len, out);
            }
            5 => {
                let n = 16 * (usize::from(r.u8()) + 1);
                let mut rng = Rng::new(r.u32());
                let block: Vec<u8> = (0..n.min(len)).map(|_| rng.byte()).collect();
                cycle(&block, len, out);
            }
            6 => {
                let mut rng = Rng::new(r.u32());
                while out.len() < start + len {
                    let w = WORDS[rng.next_u64() as usize % WORDS.len()].as_bytes();
                    let room = start + len - out.len();
                    out.extend_from_slice(&w[..w.len().min(room)]);
                }
            }
            _ => {
                let mut rng = Rng::new(r.u32());
                let d = u64::from(r.u8()) + 1;
                out.extend((0..len).map(|_| {
                    let x = rng.next_u64();
                    if x.is_multiple_of(d) {
                        (x >> 32) as u8
                    } else {
                        0
                    }
                }));
            }
        }
        debug_assert_eq!(out.len(), start + len);
    }

    /// `len` bytes of the text cycle from `text_pos`; with `whole`, the last code point is
    /// not cut (ASCII takes its room), so a message ending here is UTF-8.
    fn text(&mut self, len: usize, whole: bool, out: &mut Vec<u8>) {
        let cycle_len: usize = TEXT.iter().map(|c| c.len_utf8()).sum();
        let mut pos = self.text_pos % cycle_len;
        // Find the code point `pos` falls in, and the offset inside it.
        let (mut i, mut off) = (0, pos);
        while off >= TEXT[i].len_utf8() {
            off -= TEXT[i].len_utf8();
            i += 1;
        }
        let end = out.len() + len;
        let mut buf = [0u8; 4];
        while out.len() < end {
            let bytes = TEXT[i].encode_utf8(&mut buf).as_bytes();
            let room = end - out.len();
            let piece = &bytes[off..];
            if whole && piece.len() > room {
                out.resize(end, b'.');
                break;
            }
            out.extend_from_slice(&piece[..piece.len().min(room)]);
            pos += piece.len().min(room);
            off = 0;
            i = (i + 1) % TEXT.len();
        }
        self.text_pos = pos;
    }
}

/// Appends `len` bytes of `pattern` repeated (zeros for an empty pattern).
fn cycle(pattern: &[u8], len: usize, out: &mut Vec<u8>) {
    if pattern.is_empty() {
        out.resize(out.len() + len, 0);
        return;
    }
    let end = out.len() + len;
    while out.len() < end {
        let n = pattern.len().min(end - out.len());
        out.extend_from_slice(&pattern[..n]);
    }
}

/// xorshift64*: cheap noise that a compressor cannot shrink.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a 32-bit seed (any seed, zero included).
    pub fn new(seed: u32) -> Self {
        Rng(u64::from(seed) << 1 | 1)
    }

    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// The next byte.
    pub fn byte(&mut self) -> u8 {
        (self.next_u64() >> 56) as u8
    }
}

/// XORs `payload` with `key` from phase 0, as RFC 6455 5.3 masks a frame's payload: the
/// reference the library's kernels are compared with, written out here so a target never
/// checks the library with itself.
pub fn mask(payload: &mut [u8], key: [u8; 4]) {
    for (i, b) in payload.iter_mut().enumerate() {
        *b ^= key[i % 4];
    }
}

/// How a frame header writes its payload length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LenForm {
    /// The shortest form, as RFC 6455 5.2 asks of a sender.
    Minimal,
    /// Always 126 and 16 bits (a length over 65535 is cut to its low 16 bits).
    Ext16,
    /// Always 127 and 64 bits.
    Ext64,
}

/// Appends a frame header: first byte `b0` as given (FIN, RSV, opcode), the mask bit and
/// key when `key` is set, and `len` in `form`.
pub fn header(b0: u8, key: Option<[u8; 4]>, len: u64, form: LenForm, out: &mut Vec<u8>) {
    let m = if key.is_some() { 0x80 } else { 0 };
    let form = match form {
        LenForm::Minimal if len < 126 => None,
        LenForm::Minimal if len <= 0xffff => Some(LenForm::Ext16),
        LenForm::Minimal => Some(LenForm::Ext64),
        f => Some(f),
    };
    out.push(b0);
    match form {
        None => out.push(m | len as u8),
        Some(LenForm::Ext16) => {
            out.push(m | 126);
            out.extend_from_slice(&(len as u16).to_be_bytes());
        }
        Some(_) => {
            out.push(m | 127);
            out.extend_from_slice(&len.to_be_bytes());
        }
    }
    if let Some(k) = key {
        out.extend_from_slice(&k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_fragments_join_into_utf8_wherever_they_are_cut() {
        for cut in 0..40 {
            let mut f = Filler::new();
            let mut out = Vec::new();
            f.fill(&mut Reader::new(&[2, 0]), cut, false, &mut out);
            f.fill(&mut Reader::new(&[10, 0]), 57 - cut.min(57), true, &mut out);
            assert!(std::str::from_utf8(&out).is_ok(), "cut {cut}: {out:?}");
        }
    }

    #[test]
    fn every_shape_fills_exactly_the_length_asked() {
        for shape in 0..16u8 {
            for len in [0, 1, 5, 1000, 70 * 1024] {
                let mut out = vec![9];
                let spec = [shape, 3, 1, 2, 3, 4, 5, 6];
                Filler::new().fill(&mut Reader::new(&spec), len, true, &mut out);
                assert_eq!(out.len(), len + 1, "shape {shape}");
            }
        }
    }
}
