//! permessage-deflate codec: RFC 7692 7.2.3 examples, round trips, bombs, sender policy.
#![cfg(feature = "deflate")]

use std::sync::Arc;

use proptest::prelude::*;
use rapidws::Role;
use rapidws::deflate::{
    CompressorPolicy, CompressorPool, DeflateConfig, DeflateError, DeflateParams, PerMessageDeflate,
};

mod noise;
use noise::noise;

const UNLIMITED: usize = usize::MAX;

fn config() -> DeflateConfig {
    DeflateConfig::new().min_size(0)
}

fn params(snct: bool, cnct: bool, sbits: u8, cbits: u8) -> DeflateParams {
    DeflateParams {
        server_no_context_takeover: snct,
        client_no_context_takeover: cnct,
        server_max_window_bits: sbits,
        client_max_window_bits: cbits,
    }
}

/// A server and a client codec for the same agreement.
fn pair(p: DeflateParams, cfg: &DeflateConfig) -> (PerMessageDeflate, PerMessageDeflate) {
    (
        PerMessageDeflate::new(Role::Server, p, cfg),
        PerMessageDeflate::new(Role::Client, p, cfg),
    )
}

fn compress(codec: &mut PerMessageDeflate, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    assert!(
        codec.compress(payload, &mut out).unwrap(),
        "message was sent uncompressed"
    );
    out
}

fn inflate(codec: &mut PerMessageDeflate, frames: &[&[u8]]) -> Result<Vec<u8>, DeflateError> {
    let mut out = Vec::new();
    for (i, frame) in frames.iter().enumerate() {
        codec.decompress(frame, i + 1 == frames.len(), &mut out, UNLIMITED)?;
    }
    Ok(out)
}

fn receiver() -> PerMessageDeflate {
    PerMessageDeflate::new(Role::Client, DeflateParams::default(), &config())
}

// --- RFC 7692 7.2.3 examples -----------------------------------------------------------------

const HELLO: [u8; 7] = [0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00];

#[test]
fn rfc7692_7_2_3_1_hello_compresses_to_the_rfc_bytes() {
    let mut server = PerMessageDeflate::new(Role::Server, DeflateParams::default(), &config());
    assert_eq!(compress(&mut server, b"Hello"), HELLO);
}

#[test]
fn rfc7692_7_2_3_1_hello_inflates_whole_and_fragmented() {
    assert_eq!(inflate(&mut receiver(), &[&HELLO]).unwrap(), b"Hello");
    // "if the fragments are 3 and 4 octets"
    assert_eq!(
        inflate(&mut receiver(), &[&HELLO[..3], &HELLO[3..]]).unwrap(),
        b"Hello"
    );
}

#[test]
fn rfc7692_7_2_3_2_second_hello_uses_the_shared_window() {
    // zlib-rs finds this match from level 2 up (level 1 emits an equally valid `02 13 00 00`).
    let cfg = config().level(6);
    let mut server = PerMessageDeflate::new(Role::Server, DeflateParams::default(), &cfg);
    assert_eq!(compress(&mut server, b"Hello"), HELLO);
    assert_eq!(
        compress(&mut server, b"Hello"),
        [0xf2, 0x00, 0x11, 0x00, 0x00]
    );

    let mut client = receiver();
    assert_eq!(inflate(&mut client, &[&HELLO]).unwrap(), b"Hello");
    assert_eq!(
        inflate(&mut client, &[&[0xf2, 0x00, 0x11, 0x00, 0x00]]).unwrap(),
        b"Hello"
    );
}

#[test]
fn rfc7692_7_2_3_2_without_takeover_second_hello_is_the_same_bytes() {
    let p = params(true, true, 15, 15);
    let mut server = PerMessageDeflate::new(Role::Server, p, &config());
    assert_eq!(compress(&mut server, b"Hello"), HELLO);
    assert_eq!(compress(&mut server, b"Hello"), HELLO);
}

#[test]
fn rfc7692_7_2_3_3_block_with_no_compression_inflates() {
    let stored = [
        0x00, 0x05, 0x00, 0xfa, 0xff, 0x48, 0x65, 0x6c, 0x6c, 0x6f, 0x00,
    ];
    assert_eq!(inflate(&mut receiver(), &[&stored]).unwrap(), b"Hello");
}

#[test]
fn rfc7692_7_2_3_4_block_with_bfinal_inflates_and_the_next_message_too() {
    let bfinal = [0xf3, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00, 0x00];
    let mut client = receiver();
    assert_eq!(inflate(&mut client, &[&bfinal]).unwrap(), b"Hello");
    assert_eq!(inflate(&mut client, &[&bfinal]).unwrap(), b"Hello");
    assert_eq!(inflate(&mut client, &[&HELLO]).unwrap(), b"Hello");
}

#[test]
fn rfc7692_7_2_3_5_two_deflate_blocks_in_one_message_inflate() {
    // "He" in one block, a sync flush, "llo" in another block.
    let two = [
        0xf2, 0x48, 0x05, 0x00, 0x00, 0x00, 0xff, 0xff, 0xca, 0xc9, 0xc9, 0x07, 0x00,
    ];
    assert_eq!(inflate(&mut receiver(), &[&two]).unwrap(), b"Hello");
}

#[test]
fn empty_message_compresses_to_a_single_zero_byte() {
    let (mut server, mut client) = pair(DeflateParams::default(), &config());
    assert_eq!(compress(&mut server, b""), [0x00]);
    assert_eq!(compress(&mut server, b"Hello"), HELLO);
    assert_eq!(compress(&mut server, b""), [0x00]);
    assert_eq!(inflate(&mut client, &[&[0x00]]).unwrap(), b"");
    assert_eq!(inflate(&mut client, &[&HELLO]).unwrap(), b"Hello");
    assert_eq!(inflate(&mut client, &[&[0x00]]).unwrap(), b"");
}

#[test]
fn empty_message_as_empty_fixed_block_inflates() {
    assert_eq!(inflate(&mut receiver(), &[&[0x02, 0x00]]).unwrap(), b"");
    assert_eq!(inflate(&mut receiver(), &[&[0x00]]).unwrap(), b"");
    // An empty compressed payload: only the restored trailer, an incomplete block header.
    assert_eq!(inflate(&mut receiver(), &[&[]]).unwrap(), b"");
}

#[test]
fn empty_message_sent_as_chunks_is_a_single_zero_byte() {
    let mut server = PerMessageDeflate::new(Role::Server, DeflateParams::default(), &config());
    let mut out = Vec::new();
    server.compress_chunk(b"", false, &mut out).unwrap();
    server.compress_chunk(b"", true, &mut out).unwrap();
    assert_eq!(out, [0x00]);
}

#[test]
fn chunked_message_equals_whole_message_after_inflate() {
    let (mut server, mut client) = pair(DeflateParams::default(), &config());
    let mut frames = Vec::new();
    for (chunk, fin) in [(&b"Hel"[..], false), (b"", false), (b"lo", true)] {
        let mut out = Vec::new();
        server.compress_chunk(chunk, fin, &mut out).unwrap();
        frames.push(out);
    }
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    assert_eq!(inflate(&mut client, &refs).unwrap(), b"Hello");
    // The stream goes on with context takeover.
    let again = compress(&mut server, b"Hello");
    assert_eq!(inflate(&mut client, &[&again]).unwrap(), b"Hello");
}

// --- errors ---------------------------------------------------------------------------------

#[test]
fn invalid_block_type_is_corrupt() {
    // BTYPE = 11 is reserved (RFC 1951 3.2.3).
    assert_eq!(
        inflate(&mut receiver(), &[&[0xff, 0xff]]),
        Err(DeflateError::Corrupt)
    );
    assert_eq!(DeflateError::Corrupt.close_code(), 1007);
}

#[test]
fn stored_block_with_bad_nlen_is_corrupt() {
    let bad = [0x00, 0x05, 0x00, 0x00, 0x00, b'H', b'e', b'l', b'l', b'o'];
    assert_eq!(
        inflate(&mut receiver(), &[&bad]),
        Err(DeflateError::Corrupt)
    );
}

#[test]
fn distance_before_the_window_start_is_corrupt() {
    // The second-Hello message refers back 5 bytes; a fresh inflater has no history.
    assert_eq!(
        inflate(&mut receiver(), &[&[0xf2, 0x00, 0x11, 0x00, 0x00]]),
        Err(DeflateError::Corrupt)
    );
}

// --- bounded inflate ------------------------------------------------------------------------

/// A message of `mib` MiB of zeros: one sync-flushed segment that inflates to 1 MiB,
/// repeated (each segment refers only to itself, so the copies are valid one after another).
fn bomb(mib: usize) -> Vec<u8> {
    let mut sender =
        PerMessageDeflate::new(Role::Client, DeflateParams::default(), &config().level(9));
    let mut segment = Vec::new();
    assert!(sender.compress(&vec![0u8; 1 << 20], &mut segment).unwrap());
    let mut out = Vec::with_capacity((segment.len() + 4) * mib);
    for i in 0..mib {
        out.extend_from_slice(&segment);
        if i + 1 < mib {
            out.extend_from_slice(&[0x00, 0x00, 0xff, 0xff]);
        }
    }
    out
}

#[test]
fn inflate_stops_at_max_message_size() {
    let compressed = bomb(64);
    let mut client = receiver();
    let mut out = Vec::new();
    let limit = 1 << 20;
    assert_eq!(
        client.decompress(&compressed, true, &mut out, limit),
        Err(DeflateError::TooLarge)
    );
    assert!(out.len() <= limit + 1, "{}", out.len());
    assert!(out.capacity() <= limit + 1, "capacity {}", out.capacity());
    assert_eq!(DeflateError::TooLarge.close_code(), 1009);
}

#[test]
fn inflate_limit_counts_bytes_across_frames() {
    let compressed = bomb(2);
    let mut client = receiver();
    let mut out = Vec::new();
    let (a, b) = compressed.split_at(compressed.len() / 2);
    let limit = (2 << 20) - 1;
    let first = client.decompress(a, false, &mut out, limit);
    let result = first.and_then(|()| client.decompress(b, true, &mut out, limit));
    assert_eq!(result, Err(DeflateError::TooLarge));
    assert!(out.len() <= limit + 1);
}

#[test]
fn inflate_exactly_at_the_limit_succeeds() {
    let compressed = bomb(2);
    let mut out = Vec::new();
    receiver()
        .decompress(&compressed, true, &mut out, 2 << 20)
        .unwrap();
    assert_eq!(out.len(), 2 << 20);
    assert!(out.iter().all(|&b| b == 0));
}

#[test]
fn gib_bomb_stops_at_the_limit_having_allocated_about_the_limit() {
    // About 1 MiB of input that would inflate to 1 GiB.
    let compressed = bomb(1024);
    assert!(compressed.len() < 2 << 20, "{}", compressed.len());
    let mut out = Vec::new();
    let limit = 4 << 20;
    assert_eq!(
        receiver().decompress(&compressed, false, &mut out, limit),
        Err(DeflateError::TooLarge)
    );
    assert!(out.capacity() <= limit + 1, "capacity {}", out.capacity());
}

#[test]
fn one_kib_frame_stops_at_a_small_limit() {
    // DEFLATE's best ratio is about 1:1032, so 1 KiB inflates to about 1 MiB at most.
    let mut frame = bomb(2);
    frame.truncate(1024);
    let mut out = Vec::with_capacity(16);
    let limit = 64 * 1024;
    assert_eq!(
        receiver().decompress(&frame, false, &mut out, limit),
        Err(DeflateError::TooLarge)
    );
    assert!(out.capacity() <= limit + 1, "capacity {}", out.capacity());
}

// --- sender policy --------------------------------------------------------------------------

#[test]
fn messages_under_min_size_go_uncompressed() {
    let cfg = DeflateConfig::new().min_size(128);
    let mut server = PerMessageDeflate::new(Role::Server, DeflateParams::default(), &cfg);
    assert!(!server.should_compress(127));
    assert!(server.should_compress(128));
    let mut out = vec![1, 2, 3];
    assert!(!server.compress(&[b'a'; 127], &mut out).unwrap());
    assert_eq!(out, [1, 2, 3]);
}

#[test]
fn skip_if_not_smaller_sends_incompressible_data_uncompressed_and_stays_in_sync() {
    for p in [params(false, false, 15, 15), params(true, true, 15, 15)] {
        let cfg = config().skip_if_not_smaller(true);
        let (mut server, mut client) = pair(p, &cfg);
        let text = b"the same words again and again, the same words again and again".repeat(4);
        let first = compress(&mut server, &text);
        assert_eq!(inflate(&mut client, &[&first]).unwrap(), text);
        let random = noise(4096, 7);
        let mut out = vec![9];
        assert!(!server.compress(&random, &mut out).unwrap());
        assert_eq!(out, [9], "out is left as it was");
        // The peer never saw `random` compressed; the next message must not refer to it.
        let mut next = random[..2048].to_vec();
        next.extend_from_slice(&text);
        let third = compress(&mut server, &next);
        assert_eq!(inflate(&mut client, &[&third]).unwrap(), next);
    }
}

#[test]
fn skip_if_not_smaller_sends_the_empty_message_uncompressed() {
    let mut server = PerMessageDeflate::new(
        Role::Server,
        DeflateParams::default(),
        &config().skip_if_not_smaller(true),
    );
    let mut out = Vec::new();
    assert!(!server.compress(b"", &mut out).unwrap());
    assert!(out.is_empty());
}

#[test]
fn without_skip_policy_incompressible_data_is_still_compressed() {
    let cfg = config().predict_incompressible(false);
    let mut server = PerMessageDeflate::new(Role::Server, DeflateParams::default(), &cfg);
    let mut out = Vec::new();
    assert!(server.compress(&noise(4096, 3), &mut out).unwrap());
    assert!(out.len() >= 4096);
}

// --- 8-bit windows --------------------------------------------------------------------------

#[test]
fn agreed_8_bit_window_for_our_compressor_sends_uncompressed_or_stored() {
    let p = params(false, false, 8, 15);
    let (mut server, mut client) = pair(p, &config());
    assert!(!server.should_compress(1 << 20));
    let mut out = Vec::new();
    assert!(
        !server
            .compress(b"Hello Hello Hello Hello", &mut out)
            .unwrap()
    );
    assert!(out.is_empty());
    // Fragmented messages the caller already marked compressed become stored blocks.
    let payload = noise(70_000, 11);
    let mut frames = Vec::new();
    for (i, chunk) in payload.chunks(30_000).enumerate() {
        let mut out = Vec::new();
        server.compress_chunk(chunk, i == 2, &mut out).unwrap();
        frames.push(out);
    }
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    assert_eq!(inflate(&mut client, &refs).unwrap(), payload);
    // The client direction still compresses.
    assert!(client.should_compress(1000));
}

#[test]
fn peer_stream_with_a_9_bit_window_inflates_when_8_was_agreed() {
    // zlib compresses "8" with a 9-bit window; our inflater accepts that.
    let p9 = params(false, false, 9, 9);
    let text = b"abcdefgh".repeat(200);
    let mut sender = PerMessageDeflate::new(Role::Client, p9, &config());
    let msg = compress(&mut sender, &text);
    let mut server = PerMessageDeflate::new(Role::Server, params(false, false, 15, 8), &config());
    assert_eq!(inflate(&mut server, &[&msg]).unwrap(), text);
}

// --- pooled compressors ---------------------------------------------------------------------

#[test]
fn pooled_compressors_are_shared_and_reset_between_messages() {
    let pool = Arc::new(CompressorPool::new(4));
    let cfg = config().policy(CompressorPolicy::Pooled(Arc::clone(&pool)));
    let p = params(true, false, 15, 15);
    let mut a = PerMessageDeflate::new(Role::Server, p, &cfg);
    let mut b = PerMessageDeflate::new(Role::Server, p, &cfg);
    let mut client_a = PerMessageDeflate::new(Role::Client, p, &config());
    let mut client_b = PerMessageDeflate::new(Role::Client, p, &config());
    assert_eq!(pool.idle(), 0);
    assert_eq!(compress(&mut a, b"Hello"), HELLO);
    assert_eq!(pool.idle(), 1);
    // Same compressor, reset: no reference to the first Hello.
    assert_eq!(compress(&mut b, b"Hello"), HELLO);
    assert_eq!(pool.idle(), 1);
    assert_eq!(inflate(&mut client_a, &[&HELLO]).unwrap(), b"Hello");
    assert_eq!(inflate(&mut client_b, &[&HELLO]).unwrap(), b"Hello");

    // A fragmented message holds its compressor until the last chunk.
    let mut out = Vec::new();
    a.compress_chunk(b"Hel", false, &mut out).unwrap();
    assert_eq!(pool.idle(), 0);
    a.compress_chunk(b"lo", true, &mut out).unwrap();
    assert_eq!(pool.idle(), 1);
    assert_eq!(inflate(&mut client_a, &[&out]).unwrap(), b"Hello");
}

#[test]
fn pool_keeps_at_most_max_idle_compressors() {
    let pool = Arc::new(CompressorPool::new(1));
    let cfg = config().policy(CompressorPolicy::Pooled(Arc::clone(&pool)));
    let p = params(true, false, 15, 15);
    let mut a = PerMessageDeflate::new(Role::Server, p, &cfg);
    let mut b = PerMessageDeflate::new(Role::Server, p, &cfg);
    let (mut oa, mut ob) = (Vec::new(), Vec::new());
    a.compress_chunk(b"x", false, &mut oa).unwrap();
    b.compress_chunk(b"y", false, &mut ob).unwrap();
    a.compress_chunk(b"", true, &mut oa).unwrap();
    b.compress_chunk(b"", true, &mut ob).unwrap();
    assert_eq!(pool.idle(), 1);
}

// --- round trips ----------------------------------------------------------------------------

/// JSON-like text with repeats, so context takeover matters.
fn json_like(len: usize, seed: u64) -> Vec<u8> {
    let words = noise(len / 8 + 8, seed);
    let mut out = Vec::with_capacity(len + 64);
    let mut i = 0;
    while out.len() < len {
        let w = words[i % words.len()];
        i += 1;
        out.extend_from_slice(
            format!(
                "{{\"id\":{},\"name\":\"user{}\",\"ok\":{}}},",
                w,
                w % 17,
                w.is_multiple_of(2)
            )
            .as_bytes(),
        );
    }
    out.truncate(len);
    out
}

/// Sends `messages` from `sender` to `receiver`, each compressed whole or in chunks, each
/// delivered in frames split at `cuts`, and checks the receiver gets them back.
fn exchange(
    sender: &mut PerMessageDeflate,
    receiver: &mut PerMessageDeflate,
    messages: &[(Vec<u8>, Vec<usize>, Vec<usize>)],
) {
    for (payload, send_cuts, recv_cuts) in messages {
        let compressed = if send_cuts.is_empty() {
            let mut out = Vec::new();
            if !sender.compress(payload, &mut out).unwrap() {
                // The sender policy sends it uncompressed; the inflater never sees it.
                assert!(out.is_empty());
                continue;
            }
            out
        } else {
            let mut out = Vec::new();
            let mut prev = 0;
            for (i, &cut) in send_cuts.iter().enumerate() {
                let cut = cut.clamp(prev, payload.len());
                let fin = i + 1 == send_cuts.len();
                let end = if fin { payload.len() } else { cut };
                sender
                    .compress_chunk(&payload[prev..end], fin, &mut out)
                    .unwrap();
                prev = end;
            }
            out
        };
        let mut frames = Vec::new();
        let mut prev = 0;
        for &cut in recv_cuts.iter().chain(std::iter::once(&compressed.len())) {
            let cut = cut.clamp(prev, compressed.len());
            frames.push(&compressed[prev..cut]);
            prev = cut;
        }
        let got = inflate(receiver, &frames).unwrap();
        assert_eq!(&got, payload);
    }
}

#[test]
fn every_parameter_combination_round_trips_both_ways() {
    let mut n = 0;
    for bits in 0..16u32 {
        for sbits in [8u8, 9, 12, 15] {
            for cbits in [8u8, 9, 11, 15] {
                let p = params(bits & 1 != 0, bits & 2 != 0, sbits, cbits);
                let cfg = config()
                    .skip_if_not_smaller(bits & 4 != 0)
                    .level(if bits & 8 != 0 { 6 } else { 1 });
                let (mut server, mut client) = pair(p, &cfg);
                let msgs: Vec<_> = (0..4u64)
                    .map(|i| {
                        let payload = json_like([0usize, 300, 5000, 70_000][i as usize], i + n);
                        let cuts = if i % 2 == 0 {
                            vec![]
                        } else {
                            vec![7, 100, 3000]
                        };
                        (payload, cuts, vec![1, 5, 1000])
                    })
                    .collect();
                // Messages our compressor cannot take (8-bit window) go as stored chunks.
                let chunked: Vec<_> = msgs
                    .iter()
                    .map(|(p, c, r)| {
                        (
                            p.clone(),
                            if c.is_empty() {
                                vec![p.len()]
                            } else {
                                c.clone()
                            },
                            r.clone(),
                        )
                    })
                    .collect();
                let s2c = if server.should_compress(1 << 20) {
                    &msgs
                } else {
                    &chunked
                };
                let c2s = if client.should_compress(1 << 20) {
                    &msgs
                } else {
                    &chunked
                };
                exchange(&mut server, &mut client, s2c);
                exchange(&mut client, &mut server, c2s);
                n += 1;
            }
        }
    }
    assert_eq!(n, 256);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_payloads_and_fragmentation_round_trip(
        snct in any::<bool>(),
        cnct in any::<bool>(),
        sbits in 9u8..=15,
        cbits in 9u8..=15,
        messages in proptest::collection::vec(
            (
                prop_oneof![
                    proptest::collection::vec(any::<u8>(), 0..2000),
                    (0usize..20_000, any::<u64>()).prop_map(|(n, s)| json_like(n, s)),
                ],
                proptest::collection::vec(0usize..20_000, 0..4),
                proptest::collection::vec(0usize..20_000, 0..6),
            ),
            1..6,
        ),
    ) {
        let p = params(snct, cnct, sbits, cbits);
        let (mut server, mut client) = pair(p, &config());
        let mut messages = messages;
        for m in &mut messages {
            m.1.sort_unstable();
            m.2.sort_unstable();
        }
        exchange(&mut server, &mut client, &messages);
        exchange(&mut client, &mut server, &messages);
    }

    #[test]
    fn arbitrary_input_never_panics_and_respects_the_limit(
        frames in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..4),
        limit in 0usize..5000,
    ) {
        let mut client = receiver();
        let mut out = Vec::new();
        for (i, f) in frames.iter().enumerate() {
            if client.decompress(f, i + 1 == frames.len(), &mut out, limit).is_err() {
                break;
            }
        }
        prop_assert!(out.len() <= limit + 1);
    }
}

// --- incompressible messages (`predict_incompressible`) -------------------------------------

/// With the predictor on (the default) and context takeover both ways.
fn predicting() -> DeflateConfig {
    DeflateConfig::new().min_size(0)
}

#[test]
fn predictor_is_on_by_default() {
    assert!(DeflateConfig::default().predict_incompressible);
}

#[test]
fn incompressible_message_is_sent_uncompressed_and_takeover_stays_in_sync() {
    let (mut server, mut client) = pair(DeflateParams::default(), &predicting());
    let text = json_like(3000, 1);
    let first = compress(&mut server, &text);
    assert_eq!(inflate(&mut client, &[&first]).unwrap(), text);
    // Skipped before the compressor saw it: `out` untouched, the caller sends it with RSV1
    // clear, and neither window holds it.
    let random = noise(4096, 21);
    let mut out = vec![7];
    assert!(!server.compress(&random, &mut out).unwrap());
    assert_eq!(out, [7]);
    // No reset happened: the next message still refers back to the first one.
    let again = compress(&mut server, &text);
    assert!(
        again.len() < first.len() / 4,
        "context was lost: {} then {} bytes",
        first.len(),
        again.len()
    );
    assert_eq!(inflate(&mut client, &[&again]).unwrap(), text);
}

#[test]
fn without_the_predictor_random_data_is_compressed_as_before() {
    let cfg = predicting().predict_incompressible(false);
    let mut server = PerMessageDeflate::new(Role::Server, DeflateParams::default(), &cfg);
    for seed in 0..20 {
        let mut out = Vec::new();
        assert!(server.compress(&noise(2048, seed), &mut out).unwrap());
    }
}

#[test]
fn a_run_of_incompressible_messages_is_probed_and_never_sent_larger() {
    let (mut server, mut client) = pair(DeflateParams::default(), &predicting());
    let text = json_like(2000, 2);
    let mut sent_compressed = 0;
    for i in 0..200u64 {
        let random = noise(1024, 100 + i);
        let mut out = Vec::new();
        if server.compress(&random, &mut out).unwrap() {
            sent_compressed += 1;
            assert!(out.len() < random.len());
            assert_eq!(inflate(&mut client, &[&out]).unwrap(), random);
        }
        if i % 50 == 0 {
            // Ordinary messages in between still compress and decode, whatever probes
            // (and their resets) happened.
            let z = compress(&mut server, &text);
            assert!(z.len() < text.len() / 2);
            assert_eq!(inflate(&mut client, &[&z]).unwrap(), text);
        }
    }
    assert_eq!(sent_compressed, 0);
}

#[test]
fn random_looking_data_with_repeats_inside_is_found_by_a_probe() {
    // Messages made of a random 2 KiB block repeated 8 times: the sampled bytes look
    // random, which the histogram cannot tell from noise, but deflate finds the repeats.
    // The first probe (after 16 skips) shows it, and the messages go compressed.
    let (mut server, mut client) = pair(DeflateParams::default(), &predicting());
    let mut compressed = 0;
    for i in 0..100 {
        let msg = noise(2048, 50 + i).repeat(8);
        let mut out = Vec::new();
        if server.compress(&msg, &mut out).unwrap() {
            assert!(out.len() < msg.len() / 4);
            assert_eq!(inflate(&mut client, &[&out]).unwrap(), msg);
            compressed += 1;
        }
    }
    assert_eq!(compressed, 100 - 16);
}

#[test]
fn random_data_sent_again_is_skipped_again() {
    // A copy of a skipped message is not in either window: there is nothing to refer
    // back to, and the copy is skipped as well.
    let (mut server, _client) = pair(DeflateParams::default(), &predicting());
    let block = noise(1024, 5);
    for _ in 0..16 {
        let mut out = Vec::new();
        assert!(!server.compress(&block, &mut out).unwrap());
    }
}

#[test]
fn a_skipped_message_leaves_a_pending_prime_for_the_next_compressed_one() {
    use rapidws::MessageKind;
    use rapidws::PreparedMessage;

    let cfg = predicting();
    let (mut server, mut client) = pair(DeflateParams::default(), &cfg);
    let text = json_like(3000, 3);
    // A prepared message goes out compressed by a fresh compressor; the peer's window now
    // ends with its bytes, and our compressor is to be primed with them.
    let prepared = PreparedMessage::new(MessageKind::Text, &text).unwrap();
    let bits = server.prepared_window_bits(text.len()).unwrap();
    let frame = prepared.compressed_frame(bits).unwrap().clone();
    let header = match frame[1] & 0x7f {
        126 => 4,
        127 => 10,
        _ => 2,
    };
    assert_eq!(frame[0] & 0x40, 0x40, "RSV1");
    server.prepared_sent(prepared.payload());
    assert_eq!(inflate(&mut client, &[&frame[header..]]).unwrap(), text);
    // An incompressible message in between is skipped, not compressed.
    let mut out = Vec::new();
    assert!(!server.compress(&noise(4096, 8), &mut out).unwrap());
    // The next compressed message refers back to the prepared one and decodes.
    let z = compress(&mut server, &text);
    let mut fresh = PerMessageDeflate::new(Role::Server, DeflateParams::default(), &cfg);
    let standalone = compress(&mut fresh, &text).len();
    assert!(
        z.len() * 4 < standalone,
        "{} bytes against {standalone} without history: the prime was lost",
        z.len()
    );
    assert_eq!(inflate(&mut client, &[&z]).unwrap(), text);
}

/// One message of the mixes below.
#[derive(Clone, Debug)]
enum Kind {
    Random(usize, u64),
    Text(usize, u64),
    /// A random block of the given length, repeated the given number of times.
    RepeatedRandom(usize, u64, usize),
    /// An earlier message again (index modulo the messages so far).
    Again(usize),
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        4 => (0usize..6000, any::<u64>()).prop_map(|(n, s)| Kind::Random(n, s)),
        3 => (0usize..6000, any::<u64>()).prop_map(|(n, s)| Kind::Text(n, s)),
        1 => (16usize..600, any::<u64>(), 2usize..8).prop_map(|(n, s, k)| Kind::RepeatedRandom(n, s, k)),
        2 => any::<usize>().prop_map(Kind::Again),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn skipped_and_compressed_mixes_round_trip(
        snct in any::<bool>(),
        sbits in 9u8..=15,
        level in prop_oneof![Just(1), Just(6)],
        skip_if_not_smaller in any::<bool>(),
        pooled in any::<bool>(),
        kinds in proptest::collection::vec(kind(), 1..48),
    ) {
        let mut cfg = predicting().level(level).skip_if_not_smaller(skip_if_not_smaller);
        if pooled {
            cfg = cfg.policy(CompressorPolicy::Pooled(Arc::new(CompressorPool::new(2))));
        }
        let (mut server, mut client) = pair(params(snct, false, sbits, 15), &cfg);
        let mut sent: Vec<Vec<u8>> = Vec::new();
        for k in kinds {
            let payload = match k {
                Kind::Random(n, s) => noise(n, s),
                Kind::Text(n, s) => json_like(n, s),
                Kind::RepeatedRandom(n, s, times) => noise(n, s).repeat(times),
                Kind::Again(i) if !sent.is_empty() => sent[i % sent.len()].clone(),
                Kind::Again(_) => Vec::new(),
            };
            let mut out = b"prefix".to_vec();
            if server.compress(&payload, &mut out).unwrap() {
                prop_assert_eq!(inflate(&mut client, &[&out[6..]]).unwrap(), payload.clone());
            } else {
                // Uncompressed (RSV1 clear): nothing was written, the inflater sees nothing.
                prop_assert_eq!(&out[..], b"prefix");
            }
            sent.push(payload);
        }
    }
}

// --- level 1 (our own encoder) against an independent inflater --------------------------------

/// Inflates RFC 7692 messages with flate2's miniz_oxide backend, one stream across messages
/// (context takeover), restoring the trailer as a receiver does.
struct MinizReceiver(flate2::Decompress);

impl MinizReceiver {
    fn new() -> Self {
        MinizReceiver(flate2::Decompress::new(false))
    }

    fn inflate(&mut self, payload: &[u8]) -> Vec<u8> {
        let input = [payload, &[0x00, 0x00, 0xff, 0xff][..]].concat();
        let mut out = Vec::with_capacity(16 * input.len() + 1024);
        let start = self.0.total_in();
        loop {
            let used = (self.0.total_in() - start) as usize;
            if out.len() == out.capacity() {
                out.reserve(out.capacity());
            }
            self.0
                .decompress_vec(&input[used..], &mut out, flate2::FlushDecompress::Sync)
                .expect("miniz_oxide inflates our output");
            if (self.0.total_in() - start) as usize == input.len() && out.len() < out.capacity() {
                return out;
            }
        }
    }
}

#[test]
fn level_1_output_inflates_with_miniz_oxide_at_every_window() {
    for bits in 9..=15u8 {
        let p = params(false, false, bits, bits);
        let mut server = PerMessageDeflate::new(Role::Server, p, &config());
        let mut peer = MinizReceiver::new();
        let mut messages = vec![
            json_like(1000, 1),
            json_like(1000, 1),
            json_like(40_000, 2),
            [json_like(3000, 3), noise(3000, 4), json_like(3000, 3)].concat(),
            vec![b'x'; 70_000],
            Vec::new(),
            json_like(200, 5),
        ];
        messages.push(messages[2].clone());
        for m in &messages {
            let mut out = Vec::new();
            if server.compress(m, &mut out).unwrap() {
                assert_eq!(&peer.inflate(&out), m, "window bits {bits}");
            }
        }
    }
}

#[test]
fn level_1_is_no_larger_than_miniz_oxide_level_1_on_json_like_text() {
    // What peers on flate2's default backend send at level 1 (yawc, for one): dynamic
    // codes, 4 Ki-entry hash. Messages of 1 KiB and 16 KiB, context takeover, trailer off.
    for len in [1024, 16 * 1024] {
        let messages: Vec<Vec<u8>> = (0..8).map(|i| json_like(len, 100 + i)).collect();
        let (mut server, _) = pair(DeflateParams::default(), &config());
        let ours: usize = messages
            .iter()
            .map(|m| compress(&mut server, m).len())
            .sum();
        let mut z = flate2::Compress::new(flate2::Compression::fast(), false);
        let mut theirs = 0;
        for m in &messages {
            let mut out = Vec::with_capacity(2 * m.len() + 64);
            z.compress_vec(m, &mut out, flate2::FlushCompress::Sync)
                .unwrap();
            assert!(out.ends_with(&[0x00, 0x00, 0xff, 0xff]));
            theirs += out.len() - 4;
        }
        println!("{len} B messages: ours {ours} B, miniz_oxide {theirs} B");
        assert!(
            ours <= theirs,
            "{len} B messages: ours {ours} B, miniz_oxide {theirs} B"
        );
    }
}

// --- the per-send switch (`compress_with`) ---------------------------------------------------

#[test]
fn compress_with_never_leaves_the_window_as_the_peer_has_it() {
    use rapidws::Compression;
    let (mut server, mut client) = pair(params(false, false, 15, 15), &DeflateConfig::default());
    let a = "the first message, which both windows hold ".repeat(8);
    let b = "a second message the peer gets as it is ".repeat(8);
    let first = compress(&mut server, a.as_bytes());
    assert_eq!(inflate(&mut client, &[&first]).unwrap(), a.as_bytes());
    let mut out = Vec::new();
    assert!(
        !server
            .compress_with(b.as_bytes(), &mut out, Compression::Never)
            .unwrap()
    );
    assert!(
        out.is_empty(),
        "nothing written for an uncompressed message"
    );
    // `a` again refers back to the first message only, as the peer can follow.
    let again = compress(&mut server, a.as_bytes());
    assert!(again.len() < 16, "{} bytes: a back-reference", again.len());
    assert_eq!(inflate(&mut client, &[&again]).unwrap(), a.as_bytes());
}

#[test]
fn compress_with_always_overrides_threshold_predictor_and_skip_if_not_smaller() {
    use rapidws::Compression;
    let settings = DeflateConfig::default().skip_if_not_smaller(true);
    let (mut server, mut client) = pair(params(false, false, 15, 15), &settings);
    let random = noise(4096, 11);
    for payload in [&b""[..], b"tiny", &random] {
        let mut out = Vec::new();
        assert!(
            !server.compress(payload, &mut out).unwrap(),
            "the settings skip it"
        );
        assert!(
            server
                .compress_with(payload, &mut out, Compression::Always)
                .unwrap()
        );
        assert_eq!(inflate(&mut client, &[&out]).unwrap(), payload);
    }
    let text = "compressible ".repeat(40);
    assert!(compress(&mut server, text.as_bytes()).len() < text.len() / 4);
}

#[test]
fn compress_with_always_cannot_compress_at_an_agreed_8_bit_window() {
    use rapidws::Compression;
    let (mut server, _) = pair(params(false, false, 8, 15), &config());
    let mut out = Vec::new();
    let text = "compressible ".repeat(40);
    assert!(
        !server
            .compress_with(text.as_bytes(), &mut out, Compression::Always)
            .unwrap()
    );
    assert!(out.is_empty());
    assert_eq!(
        server.prepared_window_bits_with(text.len(), Compression::Always),
        None
    );
    let (server, _) = pair(params(false, false, 15, 15), &DeflateConfig::default());
    assert_eq!(
        server.prepared_window_bits_with(4, Compression::Always),
        Some(15)
    );
    assert_eq!(server.prepared_window_bits_with(4, Compression::Auto), None);
    assert_eq!(
        server.prepared_window_bits_with(4096, Compression::Never),
        None
    );
}
