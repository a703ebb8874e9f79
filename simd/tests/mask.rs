//! Masking: every backend against the byte-at-a-time oracle, over lengths, start
//! alignments and key phases, in one call and streamed.

mod common;
use common::*;
use rapidws_simd::mask;

const KEY: [u8; 4] = [0x37, 0xfa, 0x21, 0x3d];

#[cfg(not(miri))]
const MAX_LEN: usize = 1100;
#[cfg(miri)]
const MAX_LEN: usize = 140;

#[cfg(not(miri))]
const LARGE: &[usize] = &[4096, 65_536 + 5, 1 << 20];
#[cfg(miri)]
const LARGE: &[usize] = &[1027];

/// Lengths, alignments and phases: each length meets every alignment and every phase
/// across the sweep (alignment `len % 64`, all four phases per length near the edges).
fn cases() -> impl Iterator<Item = (usize, usize, usize)> {
    let step = if cfg!(miri) { 7 } else { 1 };
    (0..=MAX_LEN)
        .step_by(step)
        .chain(LARGE.iter().copied())
        .flat_map(|len| {
            let aligns: Vec<usize> = if len <= 260 && !cfg!(miri) {
                (0..64).collect()
            } else {
                vec![len % 64, 1, 0]
            };
            aligns
                .into_iter()
                .flat_map(move |a| (0..4).map(move |p| (len, a, p)))
        })
}

#[test]
fn apply_matches_oracle_on_every_backend_length_alignment_and_phase() {
    let mut rng = Rng(7);
    let data = rng.bytes(MAX_LEN.max(LARGE[LARGE.len() - 1]) + 64);
    let mut store = vec![0u8; data.len() + 64];
    let mut checked = 0usize;
    for (len, align, phase) in cases() {
        let src = &data[..len];
        let mut want = src.to_vec();
        mask_oracle(&mut want, KEY, phase);
        for b in backends() {
            let buf = &mut store[align..align + len];
            buf.copy_from_slice(src);
            let mut key = key_at(KEY, phase);
            mask::apply_with(b, buf, &mut key).unwrap();
            assert_eq!(
                buf,
                &want[..],
                "{} len {len} align {align} phase {phase}",
                b.name()
            );
            assert_eq!(
                key,
                key_at(KEY, phase + len),
                "{} key after {len}",
                b.name()
            );
            checked += 1;
        }
        let buf = &mut store[align..align + len];
        buf.copy_from_slice(src);
        let mut key = key_at(KEY, phase);
        mask::apply(buf, &mut key);
        assert_eq!(buf, &want[..], "auto len {len} align {align} phase {phase}");
    }
    assert!(checked > 0);
}

#[test]
fn copy_matches_oracle_on_every_backend_length_alignment_and_phase() {
    let mut rng = Rng(11);
    let data = rng.bytes(MAX_LEN.max(LARGE[LARGE.len() - 1]) + 64);
    let mut out = vec![0u8; data.len() + 64];
    for (len, align, phase) in cases() {
        let src = &data[align..align + len];
        let mut want = src.to_vec();
        mask_oracle(&mut want, KEY, phase);
        for b in backends() {
            let dst = &mut out[(align * 7) % 64..(align * 7) % 64 + len];
            dst.fill(0xAA);
            let mut key = key_at(KEY, phase);
            mask::copy_with(b, dst, src, &mut key).unwrap();
            assert_eq!(
                dst,
                &want[..],
                "{} len {len} align {align} phase {phase}",
                b.name()
            );
            assert_eq!(key, key_at(KEY, phase + len));
        }
        let dst = &mut out[..len];
        let mut key = key_at(KEY, phase);
        mask::copy(dst, src, &mut key);
        assert_eq!(dst, &want[..], "auto len {len}");
    }
}

#[test]
fn masking_in_pieces_equals_masking_at_once_at_every_split() {
    let len = if cfg!(miri) { 70 } else { 300 };
    let data = mixed_text(len, 3)[..len].to_vec();
    let mut want = data.clone();
    mask_oracle(&mut want, KEY, 0);
    for b in backends() {
        for split in 0..=len {
            let mut buf = data.clone();
            let mut key = KEY;
            let (x, y) = buf.split_at_mut(split);
            mask::apply_with(b, x, &mut key).unwrap();
            mask::apply_with(b, y, &mut key).unwrap();
            assert_eq!(buf, want, "{} split {split}", b.name());
        }
    }
}

#[test]
fn unavailable_backends_return_none() {
    let names: Vec<&str> = backends().map(|b| b.name()).collect();
    eprintln!(
        "available backends: {names:?}, best: {}",
        rapidws_simd::Backend::best().name()
    );
    for b in rapidws_simd::Backend::ALL {
        let mut buf = [1u8; 40];
        let mut key = KEY;
        let r = mask::apply_with(b, &mut buf, &mut key);
        assert_eq!(r.is_some(), b.is_available(), "{}", b.name());
        if r.is_none() {
            assert_eq!(
                buf, [1u8; 40],
                "an unavailable backend must not touch the buffer"
            );
            assert_eq!(key, KEY);
        }
    }
    assert!(rapidws_simd::Backend::best().is_available());
}

#[test]
#[should_panic(expected = "length mismatch")]
fn copy_with_different_lengths_panics() {
    let mut key = KEY;
    mask::copy(&mut [0u8; 3], &[0u8; 4], &mut key);
}
