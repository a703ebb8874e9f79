//! Every SIMD backend against the scalar reference and std, on arbitrary bytes under
//! arbitrary chunking: masking (in place and copying, key carried across chunks), UTF-8
//! (one-shot, streaming, fused unmask+validate), frame scanning (every backend, the
//! public entry and a shifted copy of the bytes against the header parser) and the batch
//! decoder (`scan_batch`, `decode`, `run`, every backend against a frame-by-frame oracle
//! of `parse_header`, the byte-wise mask and std's UTF-8 check, with the rules taken from
//! the key bytes).
//!
//! Input: `op | key[4] | ncuts | cuts[2*ncuts] | data`. Backends the CPU lacks are skipped
//! (their `*_with` entry returns `None`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use rapidws::simd::frame::{
    self, Data, End, Frame, FrameHeader, Rules, Scanned, Violation, parse_header,
    scan as scan_auto, scan_with,
};
use rapidws::simd::utf8::{Validator, unmask_validate_with, validate_with};
use rapidws::simd::{Backend, mask};

/// The reference mask: byte `i` is XORed with `key[i % 4]`; the key ends rotated by `len`.
fn reference_mask(data: &[u8], key: [u8; 4]) -> (Vec<u8>, [u8; 4]) {
    let out = data
        .iter()
        .enumerate()
        .map(|(i, b)| b ^ key[i % 4])
        .collect();
    let mut k = key;
    k.rotate_left(data.len() % 4);
    (out, k)
}

/// `data` split at `cuts` (sorted positions); chunks may be empty.
fn chunks<'a>(data: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut out = Vec::with_capacity(cuts.len() + 1);
    let mut pos = 0;
    for &c in cuts {
        out.push(&data[pos..c]);
        pos = c;
    }
    out.push(&data[pos..]);
    out
}

fn check_mask(backend: Backend, data: &[u8], key: [u8; 4], cuts: &[usize]) {
    let (expected, expected_key) = reference_mask(data, key);
    // Whole buffer in place.
    let mut buf = data.to_vec();
    let mut k = key;
    if mask::apply_with(backend, &mut buf, &mut k).is_none() {
        return;
    }
    assert_eq!(buf, expected, "{backend:?} apply");
    assert_eq!(k, expected_key, "{backend:?} key");
    // Chunk by chunk, the key carried: the same bytes.
    let mut buf = data.to_vec();
    let mut k = key;
    let mut pos = 0;
    for c in chunks(data, cuts) {
        let end = pos + c.len();
        mask::apply_with(backend, &mut buf[pos..end], &mut k).unwrap();
        pos = end;
    }
    assert_eq!(buf, expected, "{backend:?} apply in chunks");
    assert_eq!(k, expected_key, "{backend:?} key in chunks");
    // Copying, at an odd destination offset.
    let mut dst = vec![0u8; data.len() + 1];
    let mut k = key;
    mask::copy_with(backend, &mut dst[1..], data, &mut k).unwrap();
    assert_eq!(&dst[1..], &expected[..], "{backend:?} copy");
    assert_eq!(k, expected_key, "{backend:?} copy key");
}

fn check_utf8(backend: Backend, data: &[u8], key: [u8; 4], cuts: &[usize]) {
    let std_result = std::str::from_utf8(data);
    // One-shot: same verdict and position as std.
    let Some(r) = validate_with(backend, data) else {
        return;
    };
    match (&r, &std_result) {
        (Ok(()), Ok(_)) => {}
        (Err(e), Err(s)) => {
            assert_eq!(e.valid_up_to(), s.valid_up_to(), "{backend:?} one-shot");
            assert_eq!(e.error_len(), s.error_len(), "{backend:?} one-shot");
        }
        _ => panic!("{backend:?} one-shot: {r:?} vs std {std_result:?}"),
    }
    // Streaming under arbitrary chunking: the first error, or `finish`, decides; the
    // verdict and the valid prefix are those of std on the whole message.
    let mut v = Validator::new();
    let mut streamed = Ok(());
    for c in chunks(data, cuts) {
        if let Err(e) = v.feed_with(backend, c).unwrap() {
            streamed = Err(e);
            break;
        }
    }
    if streamed.is_ok() {
        streamed = v.finish();
    }
    match (&streamed, &std_result) {
        (Ok(()), Ok(_)) => {}
        (Err(e), Err(s)) => assert_eq!(e.valid_up_to(), s.valid_up_to(), "{backend:?} stream"),
        _ => panic!("{backend:?} stream: {streamed:?} vs std {std_result:?}"),
    }
    // Fused unmask+validate of the masked bytes, chunk by chunk: the plain bytes come
    // back and the verdict matches.
    let (masked, _) = reference_mask(data, key);
    let mut buf = masked.clone();
    let mut k = key;
    let mut v = Validator::new();
    let mut fused = Ok(());
    let mut pos = 0;
    for c in chunks(&masked, cuts) {
        let end = pos + c.len();
        let r = unmask_validate_with(backend, &mut buf[pos..end], &mut k, &mut v).unwrap();
        pos = end;
        // A decoder stops at the first error, as this does.
        if let Err(e) = r {
            fused = Err(e);
            break;
        }
    }
    // Every chunk processed so far is fully unmasked, even the failing one.
    assert_eq!(&buf[..pos], &data[..pos], "{backend:?} fused unmask");
    if fused.is_ok() {
        assert_eq!(pos, data.len());
        fused = v.finish();
    }
    assert_eq!(
        fused.is_ok(),
        std_result.is_ok(),
        "{backend:?} fused verdict"
    );
    if let (Err(e), Err(s)) = (&fused, &std_result) {
        assert_eq!(
            e.valid_up_to(),
            s.valid_up_to(),
            "{backend:?} fused position"
        );
    }
}

fn check_scan(backend: Backend, data: &[u8], slots: usize) {
    let mut out = vec![FrameHeader::default(); slots];
    let Some(scan) = scan_with(backend, data, &mut out) else {
        return;
    };
    // The public entry, and the same bytes at another start alignment, give the same.
    let mut auto_out = vec![FrameHeader::default(); slots];
    assert_eq!(scan_auto(data, &mut auto_out), scan, "{backend:?} vs scan");
    assert_eq!(
        auto_out[..scan.frames],
        out[..scan.frames],
        "{backend:?} vs scan headers"
    );
    let mut shifted = vec![0u8; data.len() + 1];
    shifted[1..].copy_from_slice(data);
    let mut shifted_out = vec![FrameHeader::default(); slots];
    let s = scan_with(backend, &shifted[1..], &mut shifted_out).unwrap();
    assert_eq!(s, scan, "{backend:?} shifted");
    assert_eq!(
        shifted_out[..s.frames],
        out[..s.frames],
        "{backend:?} shifted headers"
    );
    // The reference: parse headers one after another.
    let mut pos = 0usize;
    let mut n = 0;
    let mut error = None;
    while n < slots {
        match parse_header(&data[pos..]) {
            Ok(Some(h)) => {
                let total = u64::from(h.header_len) + h.payload_len;
                if total > (data.len() - pos) as u64 {
                    break;
                }
                assert_eq!(out[n], h, "{backend:?} frame {n}");
                n += 1;
                pos += total as usize;
            }
            Ok(None) => break,
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    assert_eq!(scan.frames, n, "{backend:?} frames");
    assert_eq!(scan.consumed, pos, "{backend:?} consumed");
    assert_eq!(scan.error, error, "{backend:?} error");
}

/// Why the batch ends at a frame with header `h` (`None`: it is taken if whole).
fn batch_judge(h: &FrameHeader, rules: &Rules) -> Option<End> {
    let op = h.opcode;
    if ![0, 1, 2, 8, 9, 10].contains(&op) {
        return Some(End::Invalid(Violation::UnknownOpcode(op)));
    }
    let rsv1 = h.rsv & 4 != 0;
    if h.rsv & 3 != 0 || (rsv1 && !(rules.rsv1 && (op == 1 || op == 2))) {
        return Some(End::Invalid(Violation::ReservedBits));
    }
    if rules.masked != h.mask.is_some() {
        return Some(End::Invalid(if rules.masked {
            Violation::Unmasked
        } else {
            Violation::Masked
        }));
    }
    if op >= 8 {
        if h.payload_len > 125 {
            return Some(End::Invalid(Violation::ControlTooLong));
        }
        if !h.fin {
            return Some(End::Invalid(Violation::FragmentedControl));
        }
        return Some(End::Other);
    }
    if op == 0 || !h.fin || rsv1 {
        return Some(End::Other);
    }
    (h.payload_len > rules.max_payload).then_some(End::Invalid(Violation::TooLarge))
}

/// The oracle of the batch decoder: `data` as `decode` leaves it, what it returns, and
/// the messages `run` lends.
fn batch_oracle(data: &[u8], rules: &Rules) -> (Vec<u8>, Scanned, Vec<Frame>) {
    let mut out = data.to_vec();
    let mut frames = Vec::new();
    let mut pos = 0;
    let end = loop {
        let h = match parse_header(&data[pos..]) {
            Ok(Some(h)) => h,
            Ok(None) => break End::Incomplete,
            Err(_) => break End::Invalid(Violation::LengthOverflow),
        };
        if let Some(end) = batch_judge(&h, rules) {
            break end;
        }
        let total = u64::from(h.header_len) + h.payload_len;
        if total > (data.len() - pos) as u64 {
            break End::Incomplete;
        }
        let f = Frame { at: pos, header: h };
        let mut p = data[f.payload()].to_vec();
        if let Some(k) = h.mask {
            for (i, b) in p.iter_mut().enumerate() {
                *b ^= k[i % 4];
            }
        }
        if h.opcode == 1 && std::str::from_utf8(&p).is_err() {
            break End::Invalid(Violation::InvalidUtf8);
        }
        out[f.payload()].copy_from_slice(&p);
        frames.push(f);
        pos += total as usize;
    };
    let s = Scanned {
        frames: frames.len(),
        consumed: pos,
        end,
    };
    (out, s, frames)
}

fn check_batch(backend: Backend, data: &[u8], key: [u8; 4], drop_after: usize) {
    let rules = Rules {
        masked: key[0] & 1 != 0,
        rsv1: key[0] & 2 != 0,
        max_payload: u64::from(u16::from_le_bytes([key[1], key[2]])),
    };
    let (want, want_s, frames) = batch_oracle(data, &rules);
    // The scan: the frames before the first invalid text are the oracle's, and it ends
    // where the oracle's scan (which does not check UTF-8) ends.
    let mut out = vec![Frame::default(); frames.len() + 2];
    let Some(s) = frame::scan_batch_with(backend, data, &rules, &mut out) else {
        return;
    };
    assert_eq!(
        &out[..frames.len()],
        &frames[..],
        "{backend:?} scan_batch frames"
    );
    if want_s.end != End::Invalid(Violation::InvalidUtf8) {
        assert_eq!(s, want_s, "{backend:?} scan_batch");
    }
    // The decoder: the same bytes and outcome, in place, at an odd offset.
    let mut buf = vec![0u8; data.len() + 1];
    buf[1..].copy_from_slice(data);
    let s = frame::decode_with(backend, &mut buf[1..], &rules, usize::MAX).unwrap();
    assert_eq!(s, want_s, "{backend:?} decode");
    assert!(buf[1..] == want[..], "{backend:?} decode bytes");
    // The run: the oracle's messages, then dropped after `drop_after` of them, the rest
    // as it arrived.
    let mut buf = data.to_vec();
    let mut run = frame::run_with(backend, &mut buf, rules).unwrap();
    for f in frames.iter().take(drop_after) {
        let p = &want[f.payload()];
        let expect = if f.header.opcode == 1 {
            Data::Text(std::str::from_utf8(p).unwrap())
        } else {
            Data::Binary(p)
        };
        assert_eq!(run.next(), Some(expect), "{backend:?} run");
    }
    if drop_after >= frames.len() {
        assert_eq!(run.next(), None, "{backend:?} run end");
        assert_eq!(run.end(), Some(want_s.end), "{backend:?} run end reason");
    }
    let consumed = run.consumed();
    drop(run);
    assert!(buf[..consumed] == want[..consumed], "{backend:?} run bytes");
    assert!(
        buf[consumed..] == data[consumed..],
        "{backend:?} run left as it arrived"
    );
}

fuzz_target!(|input: &[u8]| {
    let [op, k0, k1, k2, k3, ncuts, rest @ ..] = input else {
        return;
    };
    let key = [*k0, *k1, *k2, *k3];
    let ncuts = usize::from(ncuts % 8);
    if rest.len() < 2 * ncuts {
        return;
    }
    let (cut_bytes, data) = rest.split_at(2 * ncuts);
    let mut cuts: Vec<usize> = cut_bytes
        .chunks(2)
        .map(|c| usize::from(u16::from_le_bytes([c[0], c[1]])) % (data.len() + 1))
        .collect();
    cuts.sort_unstable();
    for backend in Backend::ALL {
        match op % 4 {
            0 => check_mask(backend, data, key, &cuts),
            1 => check_utf8(backend, data, key, &cuts),
            2 => check_scan(backend, data, usize::from(op >> 2) + 1),
            _ => check_batch(backend, data, key, usize::from(op >> 2)),
        }
    }
});
