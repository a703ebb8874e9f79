//! UTF-8: every backend, one-shot and streaming, against `core::str::from_utf8`.

mod common;
use common::*;
use rapidws_simd::utf8::{self, Validator};

#[cfg(not(miri))]
const MAX_LEN: usize = 1100;
#[cfg(miri)]
const MAX_LEN: usize = 130;

/// One-shot validation of `b` on every backend (and auto) equals std.
fn check_one_shot(b: &[u8]) {
    let want = std_result(b);
    assert_eq!(our_result(utf8::validate(b)), want, "auto on {b:x?}");
    for be in backends() {
        let got = our_result(utf8::validate_with(be, b).unwrap());
        assert_eq!(got, want, "{} on {b:x?}", be.name());
    }
}

/// The index of the byte at which `msg` becomes certainly invalid, if it does.
fn certain_error_at(msg: &[u8]) -> Option<usize> {
    match std_result(msg) {
        Err((_, Some(_))) => {}
        _ => return None,
    }
    // Prefixes are monotone: once certainly invalid, always so.
    let (mut lo, mut hi) = (0, msg.len());
    while lo < hi {
        let mid = (lo + hi) / 2;
        if matches!(std_result(&msg[..=mid]), Err((_, Some(_)))) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Some(lo)
}

/// Streams `msg` through a validator in `chunks` on `be` (and through the fused
/// unmask+validate), checking the outcome, the error position and fail-fast.
fn check_stream(msg: &[u8], cuts: &[usize]) {
    let want = std_result(msg);
    let certain = certain_error_at(msg);
    let key = [0x11, 0x82, 0xF3, 0x64];
    let mut masked = msg.to_vec();
    mask_oracle(&mut masked, key, 0);
    // Every backend, and `None` for the public entries (`feed`, `unmask_validate`) with
    // their own inline paths (natively only: what they add to the kernels is safe code,
    // and their unsafe inline ASCII test runs under Miri through `validate`).
    let public = (!cfg!(miri)).then_some(None);
    for be in backends().map(Some).chain(public) {
        let name = be.map_or("auto", |b| b.name());
        for fused in [false, true] {
            let mut v = Validator::new();
            let mut k = key;
            let mut buf = masked.clone();
            let mut start = 0;
            let mut outcome = None;
            for &end in cuts.iter().chain(core::iter::once(&msg.len())) {
                let chunk = &mut buf[start..end];
                let r = match (fused, be) {
                    (true, Some(be)) => {
                        utf8::unmask_validate_with(be, chunk, &mut k, &mut v).unwrap()
                    }
                    (true, None) => utf8::unmask_validate(chunk, &mut k, &mut v),
                    (false, _) => {
                        chunk.copy_from_slice(&msg[start..end]);
                        match be {
                            Some(be) => v.feed_with(be, chunk).unwrap(),
                            None => v.feed(chunk),
                        }
                    }
                };
                if let Err(e) = r {
                    let c = certain.expect("error reported on a message std accepts");
                    assert!(
                        (start..end).contains(&c),
                        "{} fused={fused}: error at {c} reported in chunk {start}..{end}",
                        name
                    );
                    if fused {
                        assert_eq!(&buf[start..end], &msg[start..end], "chunk left masked");
                    }
                    outcome = Some(Err((e.valid_up_to(), e.error_len())));
                    break;
                } else if let Some(c) = certain {
                    assert!(
                        c >= end,
                        "{} fused={fused}: error at {c} missed in chunk {start}..{end}",
                        name
                    );
                }
                start = end;
            }
            let outcome = outcome.unwrap_or_else(|| {
                assert_eq!(
                    v.is_complete(),
                    std_result(msg).is_ok() || certain.is_some()
                );
                v.finish().map_err(|e| (e.valid_up_to(), e.error_len()))
            });
            assert_eq!(
                outcome, want,
                "{} fused={fused} cuts {cuts:?} msg {msg:x?}",
                name
            );
        }
    }
}

#[test]
fn one_shot_matches_std_on_slices_of_mixed_text_at_every_length() {
    let text = mixed_text(4 * MAX_LEN + 64, 5);
    let step = if cfg!(miri) { 3 } else { 1 };
    for len in (0..=MAX_LEN).step_by(step) {
        // Slices start and end anywhere, so some cut through code points.
        let off = (len * 13) % 64;
        check_one_shot(&text[off..off + len]);
    }
}

#[test]
fn one_shot_finds_a_corrupted_byte_anywhere() {
    let text = mixed_text(MAX_LEN + 8, 9);
    let step = if cfg!(miri) { 17 } else { 1 };
    let mut rng = Rng(99);
    for len in (1..=MAX_LEN).step_by(step) {
        let mut b = text[..len].to_vec();
        let at = rng.below(len);
        b[at] = [0x80, 0xBF, 0xC0, 0xF5, 0xFF, 0xED, 0xE0, 0xF4][rng.below(8)];
        check_one_shot(&b);
    }
}

#[test]
fn one_shot_matches_std_on_large_inputs() {
    let sizes: &[usize] = if cfg!(miri) {
        &[2000]
    } else {
        &[65_536, 1 << 20]
    };
    for &n in sizes {
        let text = mixed_text(n, 21);
        check_one_shot(&text);
        let ascii = vec![b'a'; n];
        check_one_shot(&ascii);
        let mut bad = text.clone();
        let at = bad.len() - 3;
        bad[at] = 0xC0;
        check_one_shot(&bad);
        let mut bad = text.clone();
        bad[n / 2] = 0x80;
        check_one_shot(&bad);
    }
}

/// Every 1- and 2-byte sequence, and 3/4-byte sequences over boundary bytes, placed
/// across vector boundaries, on every backend.
#[test]
fn every_sequence_class_matches_std_at_vector_boundaries() {
    const EDGES: &[u8] = &[
        0x00, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xEC,
        0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xF7, 0xF8, 0xFF,
    ];
    let positions: &[usize] = if cfg!(miri) { &[62] } else { &[30, 62] };
    let mut buf = vec![b'a'; 80];
    let mut run = |seq: &[u8]| {
        let positions = if seq.len() > 2 {
            &positions[positions.len() - 1..]
        } else {
            positions
        };
        for &p in positions {
            buf.fill(b'a');
            buf[p..p + seq.len()].copy_from_slice(seq);
            check_one_shot(&buf);
            // Also as the very end of the input.
            check_one_shot(&buf[..p + seq.len()]);
        }
    };
    let firsts: Vec<u8> = if cfg!(miri) {
        EDGES.to_vec()
    } else {
        (0..=255).collect()
    };
    for &a in &firsts {
        run(&[a]);
        for &b in if cfg!(miri) { EDGES } else { &firsts[..] } {
            run(&[a, b]);
        }
        if a >= 0xE0 {
            // Under Miri, the bytes around each class boundary only.
            let mids: &[u8] = if cfg!(miri) {
                &[0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0]
            } else {
                EDGES
            };
            for &b in mids {
                for &c in mids {
                    run(&[a, b, c]);
                    if a >= 0xF0 && !cfg!(miri) {
                        for &d in &[0x00, 0x80, 0xBF, 0xC0] {
                            run(&[a, b, c, d]);
                        }
                    }
                }
            }
        }
    }
}

/// A sequence cut short anywhere in a long input: in ASCII (where whole ASCII blocks are
/// skipped without a look at the bytes before them) and after non-ASCII text (where each
/// vector reads the three bytes before it from memory), including the last block, which
/// overlaps bytes already checked.
#[test]
fn truncated_sequence_is_found_at_every_offset_of_long_inputs() {
    let lens: &[usize] = if cfg!(miri) {
        &[131]
    } else {
        // Around the short paths' limits for 16-, 32- and 64-byte vectors (first and last
        // vector only up to 2 vectors, four vectors up to 4) and the main loop after them,
        // and around the entry's inline ASCII tests (one of up to 64 bytes, one of 65 to
        // 128, after which the kernels test for themselves).
        &[
            35, 48, 63, 64, 65, 66, 67, 97, 127, 128, 129, 130, 200, 256, 257, 333, 700, 1024,
        ]
    };
    let step = if cfg!(miri) { 5 } else { 1 };
    let cut: &[&[u8]] = &[
        b"\xC3",
        b"\xE2\x82",
        b"\xF0\x9F\x98",
        b"\xED\xA0\x80",
        b"\x80",
    ];
    let text = mixed_text(1024, 3);
    for &len in lens {
        // Non-ASCII text, then ASCII: the kernels check a dense non-ASCII stretch without
        // testing each step for ASCII, and test again after it.
        let half = [&text[..len / 2], &b"a".repeat(len - len / 2)[..]].concat();
        for filler in [&b"a".repeat(len)[..], &text[..len], &half] {
            for seq in cut {
                for at in (0..=len - seq.len()).step_by(step) {
                    let mut b = filler.to_vec();
                    b[at..at + seq.len()].copy_from_slice(seq);
                    check_one_shot(&b);
                }
            }
        }
    }
}

/// A valid character of every width after an ASCII stretch of any length, up to the end:
/// the AVX2 kernel skips an ASCII prefix 128 bytes per test before it checks the rest,
/// and must judge a character that starts in, at or past the prefix's last run alike.
#[test]
fn a_character_after_an_ascii_stretch_of_any_length_is_judged_like_std() {
    let lens: &[usize] = if cfg!(miri) {
        &[135]
    } else {
        &[
            129, 131, 160, 255, 256, 257, 300, 383, 384, 385, 511, 512, 513, 700,
        ]
    };
    let step = if cfg!(miri) { 11 } else { 1 };
    let chars: &[&[u8]] = &["é".as_bytes(), "€".as_bytes(), "😀".as_bytes()];
    for &len in lens {
        for c in chars {
            for at in (0..=len - c.len()).step_by(step) {
                let mut b = vec![b'a'; len];
                b[at..at + c.len()].copy_from_slice(c);
                check_one_shot(&b);
                // The same character cut short, at the end of the input and before ASCII.
                check_one_shot(&b[..at + c.len() - 1]);
                b[at + c.len() - 1] = b'a';
                check_one_shot(&b);
            }
        }
    }
}

/// Markus Kuhn's UTF-8 decoder stress test, sections 2 to 5, written from its spec:
/// (bytes, valid?).
fn kuhn_cases() -> Vec<(Vec<u8>, bool)> {
    let mut v: Vec<(Vec<u8>, bool)> = vec![
        // 1: a correct text
        ("\u{3ba}\u{1f79}\u{3c3}\u{3bc}\u{3b5}".into(), true),
        // 2.1 first sequence of each length
        (vec![0x00], true),
        (vec![0xC2, 0x80], true),
        (vec![0xE0, 0xA0, 0x80], true),
        (vec![0xF0, 0x90, 0x80, 0x80], true),
        (vec![0xF8, 0x88, 0x80, 0x80, 0x80], false),
        (vec![0xFC, 0x84, 0x80, 0x80, 0x80, 0x80], false),
        // 2.2 last sequence of each length
        (vec![0x7F], true),
        (vec![0xDF, 0xBF], true),
        (vec![0xEF, 0xBF, 0xBF], true),
        (vec![0xF7, 0xBF, 0xBF, 0xBF], false),
        (vec![0xFB, 0xBF, 0xBF, 0xBF, 0xBF], false),
        (vec![0xFD, 0xBF, 0xBF, 0xBF, 0xBF, 0xBF], false),
        // 2.3 other boundaries
        (vec![0xED, 0x9F, 0xBF], true),
        (vec![0xEE, 0x80, 0x80], true),
        (vec![0xEF, 0xBF, 0xBD], true),
        (vec![0xF4, 0x8F, 0xBF, 0xBF], true),
        (vec![0xF4, 0x90, 0x80, 0x80], false),
        // 3.1 unexpected continuation bytes
        (vec![0x80], false),
        (vec![0xBF], false),
        (vec![0x80, 0xBF], false),
        (vec![0x80, 0xBF, 0x80, 0xBF, 0x80, 0xBF, 0x80], false),
        ((0x80..=0xBF).collect(), false),
        // 3.3 sequences with the last byte missing
        (vec![0xC0], false),
        (vec![0xE0, 0x80], false),
        (vec![0xF0, 0x80, 0x80], false),
        (vec![0xDF], false),
        (vec![0xEF, 0xBF], false),
        (vec![0xF7, 0xBF, 0xBF], false),
        // 3.4 all of 3.3 concatenated
        (
            vec![
                0xC0, 0xE0, 0x80, 0xF0, 0x80, 0x80, 0xDF, 0xEF, 0xBF, 0xF7, 0xBF, 0xBF,
            ],
            false,
        ),
        // 3.5 impossible bytes
        (vec![0xFE], false),
        (vec![0xFF], false),
        (vec![0xFE, 0xFE, 0xFF, 0xFF], false),
        // 4.1 overlong ASCII '/'
        (vec![0xC0, 0xAF], false),
        (vec![0xE0, 0x80, 0xAF], false),
        (vec![0xF0, 0x80, 0x80, 0xAF], false),
        // 4.2 maximum overlongs
        (vec![0xC1, 0xBF], false),
        (vec![0xE0, 0x9F, 0xBF], false),
        (vec![0xF0, 0x8F, 0xBF, 0xBF], false),
        // 4.3 overlong NUL
        (vec![0xC0, 0x80], false),
        (vec![0xE0, 0x80, 0x80], false),
        (vec![0xF0, 0x80, 0x80, 0x80], false),
        // 5.1 single UTF-16 surrogates
        (vec![0xED, 0xA0, 0x80], false),
        (vec![0xED, 0xAD, 0xBF], false),
        (vec![0xED, 0xAE, 0x80], false),
        (vec![0xED, 0xAF, 0xBF], false),
        (vec![0xED, 0xB0, 0x80], false),
        (vec![0xED, 0xBE, 0x80], false),
        (vec![0xED, 0xBF, 0xBF], false),
        // 5.2 paired surrogates
        (vec![0xED, 0xA0, 0x80, 0xED, 0xB0, 0x80], false),
        (vec![0xED, 0xAF, 0xBF, 0xED, 0xBF, 0xBF], false),
        // 5.3 noncharacters are valid UTF-8
        (vec![0xEF, 0xBF, 0xBE], true),
        (vec![0xEF, 0xBF, 0xBF], true),
        (vec![0xEF, 0xB7, 0x90], true),
        (vec![0xF4, 0x8F, 0xBF, 0xBE], true),
    ];
    // 3.2 lonely start characters, each followed by a space
    for lead in 0xC0..=0xFDu8 {
        v.push((vec![lead, b' '], false));
    }
    v
}

#[test]
fn kuhn_stress_cases_are_judged_like_std_in_short_and_long_contexts() {
    for (bytes, valid) in kuhn_cases() {
        assert_eq!(
            std_result(&bytes).is_ok(),
            valid,
            "case table wrong for {bytes:x?}"
        );
        check_one_shot(&bytes);
        // Inside a long ASCII text, at and across a 64-byte boundary.
        for at in [0usize, 60, 63] {
            let mut long = vec![b'x'; 130];
            long.splice(at..at, bytes.iter().copied());
            check_one_shot(&long);
        }
        check_stream(&bytes, &[bytes.len() / 2]);
    }
}

/// Autobahn 6.3/6.4: a valid prefix, then a sequence that can never complete, sent in
/// fragments; the error must surface in the fragment where it becomes certain.
#[test]
fn autobahn_6_x_fragmented_invalid_text_fails_in_the_right_fragment() {
    let kosme: &[u8] = "\u{3ba}\u{1f79}\u{3c3}\u{3bc}\u{3b5}".as_bytes();
    let mut msg = kosme.to_vec();
    msg.extend_from_slice(&[0xF4, 0x90, 0x80, 0x80]);
    msg.extend_from_slice(b"edited");
    let k = kosme.len();
    // 6.4.1: three fragments; 6.4.2: the bad lead ends fragment one; 6.4.3/6.4.4: split
    // inside the sequence.
    check_stream(&msg, &[k, k + 4]);
    check_stream(&msg, &[k + 1]);
    check_stream(&msg, &[k, k + 1, k + 2, k + 3, k + 4]);
    // 6.3.1: a surrogate inside otherwise valid text.
    let mut sur = kosme.to_vec();
    sur.extend_from_slice(&[0xED, 0xA0, 0x80]);
    sur.extend_from_slice(b"edited");
    for cut in 0..=sur.len() {
        check_stream(&sur, &[cut]);
    }
    // The same payloads padded past vector sizes.
    let mut long = mixed_text(300, 2);
    let p = long.len();
    long.extend_from_slice(&msg);
    long.extend_from_slice(&mixed_text(200, 4));
    check_stream(&long, &[p + 1]);
    check_stream(&long, &[p - 5, p + 2, p + 150]);
    // Autobahn 6.4.x must fail even if the message never ends: the validator reports the
    // error without `finish`.
    let mut v = Validator::new();
    assert!(v.feed(&[0xF4]).is_ok());
    assert!(v.feed(&[0x90]).is_err());
    let mut v = Validator::new();
    assert!(v.feed(&[0xED, 0xA0]).is_err());
}

#[test]
fn streaming_matches_std_at_every_split_point() {
    let len = if cfg!(miri) { 40 } else { 200 };
    let text = mixed_text(len, 13);
    let mut bad = text.clone();
    bad[len / 2] = 0xF5;
    let truncated = &text[..text.len() - 1];
    for msg in [&text[..], &bad[..], truncated] {
        for cut in 0..=msg.len() {
            check_stream(msg, &[cut]);
        }
    }
}

#[test]
fn streaming_matches_std_under_random_chunking() {
    let mut rng = Rng(1234);
    let rounds = if cfg!(miri) { 6 } else { 400 };
    for round in 0..rounds {
        let len = rng.below(if cfg!(miri) { 150 } else { 700 });
        let mut msg = mixed_text(len, round + 1)[..len].to_vec();
        if round % 3 == 0 && len > 0 {
            let at = rng.below(len);
            msg[at] = rng.next_u64() as u8;
        }
        let mut cuts: Vec<usize> = (0..rng.below(6)).map(|_| rng.below(len + 1)).collect();
        cuts.sort_unstable();
        check_stream(&msg, &cuts);
    }
}

#[test]
fn validator_reset_and_finish_start_a_new_message() {
    let mut v = Validator::new();
    v.feed(&[0xE2, 0x82]).unwrap();
    assert!(!v.is_complete());
    let e = v.finish().unwrap_err();
    assert_eq!((e.valid_up_to(), e.error_len()), (0, None));
    assert!(v.is_complete());
    v.feed(b"ok").unwrap();
    v.feed(&[0xE2]).unwrap();
    v.reset();
    assert!(v.is_complete());
    v.feed(b"fine").unwrap();
    assert!(v.finish().is_ok());
}

#[test]
fn unavailable_backends_return_none() {
    for b in rapidws_simd::Backend::ALL {
        assert_eq!(utf8::validate_with(b, b"abc").is_some(), b.is_available());
        let mut v = Validator::new();
        assert_eq!(v.feed_with(b, b"abc").is_some(), b.is_available());
    }
}

/// Long payloads through the fused entry and the streaming validator, cut at and near
/// 8 KiB multiples: a code point split by a cut is valid, and an error next to one is
/// found (and located) as by std, with the whole payload unmasked either way.
#[test]
#[cfg_attr(miri, ignore = "safe code over 24 KiB inputs; too slow under Miri")]
fn long_payloads_match_std_around_cuts() {
    let text = mixed_text(3 * 8192 + 77, 41);
    check_stream(&text, &[]);
    check_stream(&text, &[8190, 16385]);
    let bad: &[&[u8]] = &[b"\xC3", b"\xF0\x9F\x98", b"\x80", b"\xED\xA0\x80"];
    for boundary in [8192, 16384] {
        for at in boundary - 4..boundary + 4 {
            for seq in bad {
                let mut b = text.clone();
                b[at..at + seq.len()].copy_from_slice(seq);
                check_stream(&b, &[]);
                check_stream(&b, &[boundary]);
            }
        }
    }
}
