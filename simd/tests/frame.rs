//! Frame scanning: every backend against the header parser applied frame after frame,
//! over every length class, MASK bit, opcode, FIN/RSV bits, truncation point and start
//! alignment.
//!
//! Not under Miri: scanning is safe code on every backend, so Miri would add CI time and
//! check nothing the compiler does not.
#![cfg(not(miri))]

mod common;
use common::*;
use rapidws_simd::frame::{FrameHeader, HeaderError, Scan, parse_header, scan, scan_with};

/// The reference: `parse_header` frame after frame, as `scan` promises.
fn reference(buf: &[u8], slots: usize) -> (Vec<FrameHeader>, Scan) {
    let mut out = Vec::new();
    let mut pos = 0;
    let mut error = None;
    while out.len() < slots {
        match parse_header(&buf[pos..]) {
            Ok(Some(h)) => {
                let total = u64::from(h.header_len) + h.payload_len;
                if total > (buf.len() - pos) as u64 {
                    break;
                }
                out.push(h);
                pos += total as usize;
            }
            Ok(None) => break,
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    let s = Scan {
        frames: out.len(),
        consumed: pos,
        error,
    };
    (out, s)
}

/// `scan` and every backend's `scan_with` agree with the reference on `buf`.
fn check(buf: &[u8], slots: usize) {
    let (want, want_scan) = reference(buf, slots);
    let mut out = vec![FrameHeader::default(); slots];
    let got = scan(buf, &mut out);
    assert_eq!(got, want_scan, "auto on {} bytes", buf.len());
    assert_eq!(&out[..got.frames], &want[..], "auto headers");
    for b in backends() {
        let mut out = vec![FrameHeader::default(); slots];
        let got = scan_with(b, buf, &mut out).unwrap();
        assert_eq!(got, want_scan, "{} on {} bytes", b.name(), buf.len());
        assert_eq!(&out[..got.frames], &want[..], "{} headers", b.name());
    }
}

/// One frame: `b0` (FIN, RSV, opcode), `len` in the smallest length class that holds it
/// (in the 64-bit class when `long`), the key when given, and `len` payload bytes.
fn frame(b0: u8, len: usize, key: Option<[u8; 4]>, long: bool) -> Vec<u8> {
    let m = if key.is_some() { 0x80 } else { 0 };
    let mut f = vec![b0];
    if len < 126 && !long {
        f.push(m | len as u8);
    } else if len < 1 << 16 && !long {
        f.push(m | 126);
        f.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        // Also used for short lengths (`long`): a 64-bit length of a small value is
        // legal on the wire and must decode.
        f.push(m | 127);
        f.extend_from_slice(&(len as u64).to_be_bytes());
    }
    if let Some(k) = key {
        f.extend_from_slice(&k);
    }
    f.extend((0..len).map(|i| (i * 31 + 7) as u8));
    f
}

/// Lengths at and around every class edge.
const LENS: &[usize] = &[
    0, 1, 2, 5, 13, 14, 15, 16, 17, 125, 126, 127, 128, 300, 65_535, 65_536,
];

#[test]
fn scan_matches_the_parser_on_every_length_class_mask_bit_and_opcode() {
    let mut rng = Rng(5);
    for &len in LENS {
        for masked in [false, true] {
            for long in [false, true] {
                for b0 in [0x81u8, 0x02, 0x88, 0x89, 0x8A, 0xC1, 0x70, 0x0F] {
                    let key = masked.then(|| rng.next_u64().to_le_bytes()[..4].try_into().unwrap());
                    // The frame alone, then followed by a short and a long one.
                    let mut buf = frame(b0, len, key, long);
                    check(&buf, 4);
                    buf.extend(frame(0x82, 3, key, false));
                    buf.extend(frame(0x89, 130, None, false));
                    check(&buf, 4);
                    check(&buf, 1);
                }
            }
        }
    }
}

#[test]
fn scan_stops_at_every_truncation_point_and_start_alignment() {
    // A burst of frames of every class, masked and not.
    let mut burst = Vec::new();
    let big = 70_000;
    for (i, &len) in [0usize, 7, 125, 126, 200, 3, 127, 1, big, 2]
        .iter()
        .enumerate()
    {
        let key = (i % 2 == 0).then_some([i as u8, 0x5A, 0xA5, 0xFF]);
        burst.extend(frame(0x80 | (i as u8 % 3), len, key, i == 9));
    }
    let cut_step = 1;
    let mut store = vec![0u8; burst.len() + 64];
    for align in 0..64 {
        let buf = &mut store[align..align + burst.len()];
        buf.copy_from_slice(&burst);
        // Every prefix: complete frames, a frame cut in its header, or in its payload.
        let step = if align == 0 { cut_step } else { cut_step * 61 };
        for cut in (0..=burst.len()).step_by(step) {
            check(&buf[..cut], 16);
        }
        check(buf, 3);
    }
}

#[test]
fn a_64_bit_length_with_the_top_bit_set_is_an_error_after_the_good_frames() {
    let mut buf = frame(0x81, 5, None, false);
    buf.extend(frame(0x82, 1, Some([1, 2, 3, 4]), false));
    let bad_at = buf.len();
    buf.extend_from_slice(&[0x82, 127, 0x80, 0, 0, 0, 0, 0, 0, 1]);
    buf.extend_from_slice(&[0; 20]);
    check(&buf, 8);
    let mut out = [FrameHeader::default(); 8];
    let s = scan(&buf, &mut out);
    assert_eq!(
        (s.frames, s.consumed, s.error),
        (2, bad_at, Some(HeaderError::LengthOverflow))
    );
}

#[test]
fn scan_matches_the_parser_on_random_bytes() {
    let mut rng = Rng(77);
    let rounds = 20_000;
    for _ in 0..rounds {
        let len = rng.below(80);
        let mut buf = rng.bytes(len);
        // Small lengths now and then, so that several frames follow each other.
        for b in buf.iter_mut().skip(1).step_by(3) {
            if rng.below(2) == 0 {
                *b &= 0x87;
            }
        }
        check(&buf, 1 + rng.below(6));
    }
}
