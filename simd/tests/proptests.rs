//! Property tests: random bytes and chunkings on every backend.

mod common;
use common::*;
use proptest::prelude::*;
use rapidws_simd::{mask, utf8};

fn cfg() -> ProptestConfig {
    ProptestConfig {
        cases: if cfg!(miri) { 4 } else { 256 },
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Random bytes biased towards UTF-8 structure.
fn utf8ish() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..300),
        any::<String>().prop_map(String::into_bytes),
        (any::<String>(), any::<usize>(), any::<u8>()).prop_map(|(s, at, b)| {
            let mut v = s.into_bytes();
            if !v.is_empty() {
                let i = at % v.len();
                v[i] = b;
            }
            v
        }),
        (0usize..400, any::<u64>()).prop_map(|(n, seed)| mixed_text(n, seed)),
    ]
}

proptest! {
    #![proptest_config(cfg())]

    #[test]
    fn from_utf8_equals_std(data in utf8ish()) {
        let ours = utf8::from_utf8(&data);
        prop_assert_eq!(our_result(ours.map(|_| ())), std_result(&data));
        if let Ok(text) = ours {
            prop_assert_eq!(text.as_ptr(), data.as_ptr());
            prop_assert_eq!(text.len(), data.len());
        }
    }

    #[test]
    fn validate_equals_std(data in utf8ish()) {
        let want = std_result(&data);
        for b in backends() {
            prop_assert_eq!(our_result(utf8::validate_with(b, &data).unwrap()), want);
        }
        prop_assert_eq!(our_result(utf8::validate(&data)), want);
    }

    #[test]
    fn chunked_validator_equals_std(data in utf8ish(), cuts in prop::collection::vec(any::<usize>(), 0..5)) {
        let want = std_result(&data);
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (data.len() + 1)).collect();
        cuts.sort_unstable();
        cuts.push(data.len());
        for b in backends() {
            let mut v = utf8::Validator::new();
            let mut start = 0;
            let mut got = Ok(());
            for &end in &cuts {
                if let Err(e) = v.feed_with(b, &data[start..end]).unwrap() {
                    got = Err((e.valid_up_to(), e.error_len()));
                    break;
                }
                start = end;
            }
            if got.is_ok() {
                got = v.finish().map_err(|e| (e.valid_up_to(), e.error_len()));
            }
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn fused_unmask_validate_equals_unmask_then_validate(
        data in utf8ish(), key in any::<[u8; 4]>(), cut in any::<usize>()
    ) {
        let cut = cut % (data.len() + 1);
        let mut masked = data.clone();
        mask_oracle(&mut masked, key, 0);
        for b in backends() {
            let mut buf = masked.clone();
            let mut k = key;
            let mut v = utf8::Validator::new();
            let (x, y) = buf.split_at_mut(cut);
            let r1 = utf8::unmask_validate_with(b, x, &mut k, &mut v).unwrap();
            let got = match r1 {
                Err(e) => Err((e.valid_up_to(), e.error_len())),
                Ok(()) => match utf8::unmask_validate_with(b, y, &mut k, &mut v).unwrap() {
                    Err(e) => Err((e.valid_up_to(), e.error_len())),
                    Ok(()) => v.finish().map_err(|e| (e.valid_up_to(), e.error_len())),
                },
            };
            prop_assert_eq!(got, std_result(&data));
            if r1.is_ok() {
                prop_assert_eq!(&buf, &data);
                prop_assert_eq!(k, key_at(key, data.len()));
            }
        }
    }

    #[test]
    fn mask_equals_oracle(data in prop::collection::vec(any::<u8>(), 0..600), key in any::<[u8; 4]>(), phase in 0usize..4) {
        let mut want = data.clone();
        mask_oracle(&mut want, key, phase);
        for b in backends() {
            let mut buf = data.clone();
            let mut k = key_at(key, phase);
            mask::apply_with(b, &mut buf, &mut k).unwrap();
            prop_assert_eq!(&buf, &want);
            let mut out = vec![0; data.len()];
            let mut k = key_at(key, phase);
            mask::copy_with(b, &mut out, &data, &mut k).unwrap();
            prop_assert_eq!(&out, &want);
        }
    }
}
