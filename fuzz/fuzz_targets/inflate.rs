//! Arbitrary compressed frames into the permessage-deflate inflater under a size limit:
//! never a panic, never more than `limit + 1` bytes of output or capacity. Half of the
//! inputs also round-trip their bytes through our compressor (all four parameters and the
//! sender policy chosen by the input) and must come back unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rapidws::Role;
use rapidws::deflate::{DeflateConfig, DeflateParams, PerMessageDeflate};

fuzz_target!(|data: &[u8]| {
    let [mode, limit_hi, limit_lo, rest @ ..] = data else {
        return;
    };
    let limit = usize::from(u16::from_be_bytes([*limit_hi, *limit_lo])) * 4;
    let params = DeflateParams {
        server_no_context_takeover: mode & 2 != 0,
        client_no_context_takeover: mode & 4 != 0,
        server_max_window_bits: 8 + (mode >> 4) % 8,
        client_max_window_bits: 15,
    };
    let config = DeflateConfig::new()
        .min_size(0)
        .skip_if_not_smaller(mode & 8 != 0)
        .predict_incompressible(mode & 0x80 != 0);
    if mode & 1 == 0 {
        inflate_frames(params, &config, rest, limit);
    } else {
        round_trip(params, &config, rest);
    }
});

/// Frames are `len | data`, the length byte's top bit marking the message's last frame.
fn inflate_frames(params: DeflateParams, config: &DeflateConfig, mut data: &[u8], limit: usize) {
    let mut codec = PerMessageDeflate::new(Role::Client, params, config);
    let mut out = Vec::new();
    while let [len, tail @ ..] = data {
        let fin = len & 0x80 != 0;
        let n = usize::from(len & 0x7f).min(tail.len());
        let (frame, tail) = tail.split_at(n);
        data = tail;
        let result = codec.decompress(frame, fin, &mut out, limit);
        assert!(out.len() <= limit + 1, "{} > {limit}", out.len());
        assert!(out.capacity() <= (limit + 1).max(1024), "capacity {}", out.capacity());
        if result.is_err() {
            return;
        }
        if fin {
            out.clear();
        }
    }
}

/// Messages are `len | data` too; the length byte's top bit sends the message in 2 chunks.
fn round_trip(params: DeflateParams, config: &DeflateConfig, mut data: &[u8]) {
    let mut server = PerMessageDeflate::new(Role::Server, params, config);
    let mut client = PerMessageDeflate::new(Role::Client, params, config);
    while let [len, tail @ ..] = data {
        let chunked = len & 0x80 != 0 || !server.should_compress(1);
        let n = usize::from(len & 0x7f).min(tail.len()) * 8 % (tail.len() + 1);
        let (msg, tail) = tail.split_at(n);
        data = tail;
        let mut wire = Vec::new();
        if chunked {
            let (a, b) = msg.split_at(msg.len() / 3);
            server.compress_chunk(a, false, &mut wire).unwrap();
            server.compress_chunk(b, true, &mut wire).unwrap();
        } else if !server.compress(msg, &mut wire).unwrap() {
            continue;
        }
        let mut got = Vec::new();
        let (a, b) = wire.split_at(wire.len() / 2);
        client.decompress(a, false, &mut got, usize::MAX).unwrap();
        client.decompress(b, true, &mut got, usize::MAX).unwrap();
        assert_eq!(got, msg);
    }
}
