//! Frame headers (RFC 6455 5.2), and the batch decoder: the whole messages of one read
//! found, checked, unmasked and validated in one kernel call.
//!
//! [`parse_header`] and [`scan`] decode header fields only; protocol rules (reserved
//! bits, opcode validity, control frame limits, masking direction) are the caller's to
//! enforce. [`scan_batch`], [`decode`] and [`run`] take [`Rules`] and enforce every rule
//! that a header decides on its own.
//!
//! ```
//! use rapidws_simd::frame::{self, Data, End, Rules};
//!
//! // What a client reads: three unmasked messages and a ping.
//! let mut read = vec![0x81, 5];
//! read.extend_from_slice(b"hello");
//! read.extend_from_slice(&[0x82, 3, 1, 2, 3]);
//! read.extend_from_slice(&[0x81, 6]);
//! read.extend_from_slice("grüß".as_bytes());
//! read.extend_from_slice(&[0x89, 0]);
//!
//! let rules = Rules::client(1 << 20);
//! let mut run = frame::run(&mut read, rules);
//! assert_eq!(run.next(), Some(Data::Text("hello")));
//! assert_eq!(run.next(), Some(Data::Binary(&[1, 2, 3])));
//! assert_eq!(run.next(), Some(Data::Text("grüß")));
//! // The ping ends the run: a control frame is the caller's to decode.
//! assert_eq!(run.next(), None);
//! assert_eq!((run.consumed(), run.end()), (20, Some(End::Other)));
//! ```

use crate::header::parse;
use crate::{Backend, batch, dispatch};

pub use crate::header::{
    End, Frame, FrameHeader, HeaderError, Rules, Scanned, Violation, parse_header,
};

/// The outcome of [`scan`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scan {
    /// Number of complete frames written to the output slice.
    pub frames: usize,
    /// Bytes of the buffer covered by those frames (headers and payloads).
    pub consumed: usize,
    /// Set when the frame after the last complete one has an invalid header.
    pub error: Option<HeaderError>,
}

/// Parses the headers of consecutive complete frames (header and whole payload buffered)
/// at the start of `buf` into `out`, stopping at a partial frame, an invalid header, or
/// when `out` is full. The payload of frame `i` starts at the sum of the earlier frames'
/// sizes plus `out[i].header_len`.
///
/// ```
/// use rapidws_simd::frame::{FrameHeader, scan};
///
/// // Two unmasked server frames, "hi" (text) and a 3-byte binary, then half a header.
/// let buf = [0x81, 2, b'h', b'i', 0x82, 3, 1, 2, 3, 0x81];
/// let mut headers = [FrameHeader::default(); 8];
/// let s = scan(&buf, &mut headers);
/// assert_eq!((s.frames, s.consumed, s.error), (2, 9, None));
/// assert_eq!((headers[0].opcode, headers[0].payload_len), (0x1, 2));
/// assert_eq!((headers[1].opcode, headers[1].header_len), (0x2, 2));
/// ```
pub fn scan(buf: &[u8], out: &mut [FrameHeader]) -> Scan {
    scan_scalar(buf, out)
}

/// [`scan`] with a chosen backend; `None` when the CPU or build lacks it. Every backend
/// runs the same scalar parser: a vector decoder of one header at a time (one 16-byte
/// load per header and a byte shuffle chosen by the length class, no branch per field)
/// measured 1.5-2.3x slower on AVX2 and AVX-512, because each header's position depends
/// on the previous frame's length and the branches of the scalar parser let the CPU run
/// ahead on a predicted length, where the vector decoder waits for the shuffle and the
/// move out of the vector register. The entry exists so that tests and benches loop over
/// [`Backend::ALL`] as for the other kernels; [`decode`] is the batch decoder whose
/// payload passes are vector code.
pub fn scan_with(backend: Backend, buf: &[u8], out: &mut [FrameHeader]) -> Option<Scan> {
    if !backend.is_available() {
        return None;
    }
    Some(scan_scalar(buf, out))
}

fn scan_scalar(buf: &[u8], out: &mut [FrameHeader]) -> Scan {
    let mut pos = 0usize;
    let mut n = 0usize;
    while n < out.len() {
        match parse(&buf[pos..]) {
            Ok(Some(h)) => {
                let total = h.header_len as u64 + h.payload_len;
                if total > (buf.len() - pos) as u64 {
                    break;
                }
                out[n] = h;
                n += 1;
                pos += total as usize;
            }
            Ok(None) => break,
            Err(e) => {
                return Scan {
                    frames: n,
                    consumed: pos,
                    error: Some(e),
                };
            }
        }
    }
    Scan {
        frames: n,
        consumed: pos,
        error: None,
    }
}

// ---------------------------------------------------------------------------------------
// The batch decoder
// ---------------------------------------------------------------------------------------

/// Finds the whole messages at the front of `buf`, one [`Frame`] each in `out`, checking
/// every frame against `rules`: a frame is taken when it is a whole, unfragmented,
/// uncompressed text or binary message (FIN, no RSV bit, opcode 1 or 2, masked as the
/// rules say, within [`Rules::max_payload`], all of it in `buf`). The first frame that is
/// not ends the batch, and [`Scanned::end`] says why; so does a full `out`.
///
/// The scan hops from header to header: where a header starts depends on the length in
/// the one before it. It is the same scalar code on every backend; [`decode`] adds the
/// vector passes over the payloads.
///
/// ```
/// use rapidws_simd::frame::{End, Rules, Violation, scan_batch, Frame};
///
/// // Two masked client frames, then one with RSV2 set.
/// let buf = [0x81, 0x81, 1, 2, 3, 4, b'h' ^ 1, 0x82, 0x80, 9, 9, 9, 9, 0xA1, 0x80];
/// let mut out = [Frame::default(); 8];
/// let s = scan_batch(&buf, &Rules::server(1 << 20), &mut out);
/// assert_eq!((s.frames, s.consumed), (2, 13));
/// assert_eq!(s.end, End::Incomplete, "the third header lacks its key");
/// assert_eq!(out[0].payload(), 6..7);
/// assert_eq!(out[1].header.mask, Some([9, 9, 9, 9]));
/// let s = scan_batch(&[0xA1, 0x80, 0, 0, 0, 0], &Rules::server(1 << 20), &mut out);
/// assert_eq!(s.end, End::Invalid(Violation::ReservedBits));
/// ```
pub fn scan_batch(buf: &[u8], rules: &Rules, out: &mut [Frame]) -> Scanned {
    batch::scan(buf, rules, out)
}

/// [`scan_batch`] with a chosen backend; `None` when the CPU or build lacks it. Every
/// backend runs the same scan (see [`scan_batch`]); the entry lets tests and benches loop
/// over [`Backend::ALL`] as for the other kernels.
pub fn scan_batch_with(
    backend: Backend,
    buf: &[u8],
    rules: &Rules,
    out: &mut [Frame],
) -> Option<Scanned> {
    if !backend.is_available() {
        return None;
    }
    Some(batch::scan(buf, rules, out))
}

/// Decodes the whole messages at the front of `buf` in place, at most `max_frames` of
/// them: the frames [`scan_batch`] would take, unmasked (when [`Rules::masked`]) and
/// their text validated as UTF-8, each message on its own (header bytes and binary
/// payloads never enter the check, and a message that ends inside a character is
/// invalid). One call of the backend's kernel does it all: the scan, then one pass over
/// the payloads that unmasks them and tests the text for ASCII, then the full check of
/// the text that is not ASCII.
///
/// Text that fails the check ends the batch before its message with
/// [`Violation::InvalidUtf8`], and that message and those after it are left as they
/// arrived (masked again): the caller's frame-by-frame decoder finds the same error
/// there. A frame that breaks another rule, or is not a whole message, ends it the same
/// way, untouched. Only the first [`Scanned::consumed`] bytes are changed.
///
/// Payloads at `buf[Frame::payload()]` of the frames [`scan_batch`] finds; [`run`] walks
/// them for you and lends the text as `&str`.
#[inline]
pub fn decode(buf: &mut [u8], rules: &Rules, max_frames: usize) -> Scanned {
    dispatch::decode_auto(buf, rules, max_frames)
}

/// [`decode`] with a chosen backend; `None` when the CPU or build lacks it.
pub fn decode_with(
    backend: Backend,
    buf: &mut [u8],
    rules: &Rules,
    max_frames: usize,
) -> Option<Scanned> {
    if !backend.is_available() {
        return None;
    }
    // SAFETY: availability checked just above.
    Some(unsafe { dispatch::decode(backend, buf, rules, max_frames) })
}

/// A message of a [`Run`], lent from its buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Data<'a> {
    /// A text message, validated.
    Text(&'a str),
    /// A binary message.
    Binary(&'a [u8]),
}

impl<'a> Data<'a> {
    /// The payload's bytes.
    pub fn as_bytes(&self) -> &'a [u8] {
        match *self {
            Data::Text(t) => t.as_bytes(),
            Data::Binary(b) => b,
        }
    }
}

/// The whole messages at the front of a buffer, decoded a round of up to 64 at a time by
/// [`decode`] as the iteration reaches them, and lent: text as `&str` without a second
/// check. Made by [`run`].
///
/// Dropped before its end, a run leaves the messages it decoded and did not hand out
/// as they arrived (masked again), so the buffer from [`consumed`](Self::consumed) on
/// can be decoded again by anyone; unless [`keep_decoded`](Self::keep_decoded) was
/// called: then its owner, which kept [`decoded`](Self::decoded), puts them back with
/// [`remask`] (a run that is leaked, `mem::forget`, is never dropped).
pub struct Run<'a> {
    /// The buffer the run was made from, borrowed exclusively for `'a`: the messages
    /// handed out (`..pos`) are lent from it shared, the rest (`pos..`) is only ever
    /// reached through this run.
    buf: *mut u8,
    len: usize,
    /// Bytes of the messages handed out: the next one starts here.
    pos: usize,
    /// Where the messages decoded so far end (`pos..decoded` are decoded, not yet handed
    /// out).
    decoded: usize,
    /// Why the decoding ended, once it has.
    end: Option<End>,
    rules: Rules,
    backend: Option<Backend>,
    /// Leave `pos..decoded` decoded when dropped ([`Run::keep_decoded`]).
    keep: bool,
    _buf: core::marker::PhantomData<&'a mut [u8]>,
}

// SAFETY: a `Run` is an exclusive borrow of a byte buffer and its position in it, as a
// `&mut [u8]` is, which is `Send` and `Sync`: it holds no shared or thread-bound state.
unsafe impl Send for Run<'_> {}
// SAFETY: as above; `&Run` gives access to nothing but its counters.
unsafe impl Sync for Run<'_> {}

/// The whole messages at the front of `buf`, lent one after another (see [`Run`]).
pub fn run(buf: &mut [u8], rules: Rules) -> Run<'_> {
    Run {
        len: buf.len(),
        buf: buf.as_mut_ptr(),
        pos: 0,
        decoded: 0,
        end: None,
        rules,
        backend: None,
        keep: false,
        _buf: core::marker::PhantomData,
    }
}

/// Puts the whole messages at the front of `buf`, decoded (unmasked) by a [`Run`] and not
/// handed out, back as they arrived: masked again with the keys in their headers. For
/// the owner of a run that [keeps](Run::keep_decoded) what it decoded: `buf` is the
/// run's buffer from [`consumed`](Run::consumed) to [`decoded`](Run::decoded). Nothing to
/// do for unmasked frames (`rules.masked` false).
pub fn remask(buf: &mut [u8], rules: &Rules) {
    if !rules.masked {
        return;
    }
    let n = buf.len();
    let mut pos = 0;
    while pos < n {
        let Ok(s) = batch::simple_at(&buf[pos..], rules) else {
            break;
        };
        let start = pos + s.header_len;
        let Some(payload) = buf.get_mut(start..start + s.payload_len) else {
            break;
        };
        crate::scalar::mask(payload, s.key);
        pos = start + s.payload_len;
    }
}

/// [`run`] with a chosen backend; `None` when the CPU or build lacks it.
pub fn run_with(backend: Backend, buf: &mut [u8], rules: Rules) -> Option<Run<'_>> {
    if !backend.is_available() {
        return None;
    }
    let mut r = run(buf, rules);
    r.backend = Some(backend);
    Some(r)
}

impl<'a> Run<'a> {
    /// Bytes of the messages handed out so far (headers and payloads): the next message,
    /// or whatever ended the run, starts there.
    #[inline]
    pub fn consumed(&self) -> usize {
        self.pos
    }

    /// Bytes of the messages decoded so far, handed out or not: those from
    /// [`consumed`](Self::consumed) to here are unmasked in the buffer and not handed
    /// out yet.
    #[inline]
    pub fn decoded(&self) -> usize {
        self.decoded
    }

    /// From now on, a drop leaves the messages decoded and not handed out as they are
    /// (unmasked): the run's owner keeps [`decoded`](Self::decoded) as the iteration goes
    /// and puts them back with [`remask`] itself, so that a run that is never dropped
    /// (leaked) does not leave them unmasked unbeknownst to it.
    #[inline]
    pub fn keep_decoded(&mut self) {
        self.keep = true;
    }

    /// Why the run ended, once the iteration has returned `None`.
    #[inline]
    pub fn end(&self) -> Option<End> {
        if self.decoded == self.pos {
            self.end
        } else {
            None
        }
    }

    /// The bytes from the next message on.
    fn rest(&mut self) -> &mut [u8] {
        // SAFETY: `buf..buf+len` is the buffer borrowed exclusively for `'a`; `pos <= len`;
        // nothing handed out lies at or after `pos`, and the slice lives no longer than
        // the `&mut self` it comes from.
        unsafe { core::slice::from_raw_parts_mut(self.buf.add(self.pos), self.len - self.pos) }
    }

    /// Decodes the next round; false when there is nothing more.
    #[cold]
    #[inline(never)]
    fn fill(&mut self) -> bool {
        if self.end.is_some() {
            return false;
        }
        let (rules, backend) = (self.rules, self.backend);
        let rest = self.rest();
        let s = match backend {
            // SAFETY: `run_with` checked the backend.
            Some(b) => unsafe { dispatch::decode(b, rest, &rules, batch::CHUNK) },
            None => dispatch::decode_auto(rest, &rules, batch::CHUNK),
        };
        if s.end != End::Full {
            self.end = Some(s.end);
        }
        self.decoded = self.pos + s.consumed;
        s.frames > 0
    }
}

impl<'a> Iterator for Run<'a> {
    type Item = Data<'a>;

    #[inline]
    fn next(&mut self) -> Option<Data<'a>> {
        if self.decoded == self.pos && !self.fill() {
            return None;
        }
        // SAFETY: `pos..decoded` holds whole messages that `decode` took (their headers
        // checked, their payloads inside), so the header and the payload read here lie
        // in it. The payload is lent shared for `'a` and `pos` moves past it: the run
        // never reaches it again.
        unsafe {
            let p = self.buf.add(self.pos);
            let code = *p.add(1) & 0x7F;
            let (len, at) = if code < 126 {
                (usize::from(code), 2)
            } else if code == 126 {
                let e = p.add(2).cast::<[u8; 2]>().read();
                (usize::from(u16::from_be_bytes(e)), 4)
            } else {
                let e = p.add(2).cast::<[u8; 8]>().read();
                (u64::from_be_bytes(e) as usize, 10)
            };
            let header_len = at + if self.rules.masked { 4 } else { 0 };
            let payload: &'a [u8] = core::slice::from_raw_parts(p.add(header_len), len);
            let text = *p == 0x81;
            self.pos += header_len + len;
            debug_assert!(self.pos <= self.decoded);
            Some(if text {
                // `decode` validated this payload as UTF-8, and it has not changed since:
                // the run held it exclusively from then until now, and lends it shared.
                Data::Text(core::str::from_utf8_unchecked(payload))
            } else {
                Data::Binary(payload)
            })
        }
    }
}

impl Drop for Run<'_> {
    fn drop(&mut self) {
        if self.keep || !self.rules.masked || self.decoded == self.pos {
            return;
        }
        // Messages decoded and not handed out go back to how they arrived.
        let (n, rules) = (self.decoded - self.pos, self.rules);
        remask(&mut self.rest()[..n], &rules);
    }
}

impl core::fmt::Debug for Run<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Run")
            .field("consumed", &self.pos)
            .field("decoded", &self.decoded)
            .field("end", &self.end)
            .finish_non_exhaustive()
    }
}
