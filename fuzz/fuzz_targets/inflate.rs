//! The permessage-deflate codec under a size limit: never a panic, never more than
//! `limit + 1` bytes of output or capacity, and a message inflates whole exactly when it
//! fits the limit.
//!
//! Input: `mode | windows | level | limit (2) | records`. The mode's low 2 bits pick what
//! the records are:
//!
//! - 0, 3: compressed frames as a peer sends them, `len | data`: the length byte's top bit
//!   ends the message, its low 7 bits are the length, 126 and 127 announcing a 2- and a
//!   3-byte length that follows.
//! - 1: messages made by a fill spec ([`rapidws_fuzz::Filler`]) from `flags | length`,
//!   compressed by our compressor (level, windows, context takeover and sender policy from
//!   the input), cut into frames and inflated: the message must come back, or fail with
//!   `TooLarge` exactly when it is longer than the limit.
//! - 2: the same messages, compressed and then corrupted by a few XORs, inflated: any
//!   outcome but a panic or a broken bound.
//!
//! Bits 2-3 of the mode scale the limit (`limit << {0, 2, 4, 6}`, up to 4 MiB), so small
//! inputs reach large outputs (DEFLATE expands up to 1032:1) and bombs stop at the limit.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rapidws::Role;
use rapidws::deflate::{DeflateConfig, DeflateError, DeflateParams, PerMessageDeflate};
use rapidws_fuzz::{Filler, Reader};

/// Most uncompressed bytes one input may have compressed.
const BUDGET: usize = 2 << 20;
/// Largest message one record may describe.
const MAX_MESSAGE: usize = (1 << 20) + 4096;
/// Largest message, and most bytes per input, that zlib-rs's levels compress: past a few
/// windows its code paths repeat, and its lazy matching on megabytes takes seconds here
/// (zlib-rs is fuzzed on its own).
const MAX_ZLIB_MESSAGE: usize = 128 << 10;
const ZLIB_BUDGET: usize = 256 << 10;

fuzz_target!(|data: &[u8]| {
    let mut r = Reader::new(data);
    let mode = r.u8();
    let windows = r.u8();
    let level = r.u8();
    let limit = usize::from(r.u16()) << (2 * ((mode >> 2) & 3));
    let params = DeflateParams {
        server_no_context_takeover: mode & 0x10 != 0,
        client_no_context_takeover: mode & 0x20 != 0,
        server_max_window_bits: 8 + (windows & 7),
        client_max_window_bits: 8 + (windows >> 3 & 7),
    };
    // Level 1 is our own encoder, the rest zlib-rs's: ours most often (zlib-rs is fuzzed on
    // its own, and its slow levels would take most of the time here).
    let config = DeflateConfig::new()
        .min_size(0)
        .level([1, 1, 1, 1, 1, 1, 0, 2, 6, 9][usize::from(level % 10)])
        .mem_level(1 + (level >> 4) % 9)
        .skip_if_not_smaller(mode & 0x40 != 0)
        .predict_incompressible(mode & 0x80 != 0);
    let sizes = if config.level == 1 {
        (MAX_MESSAGE, BUDGET)
    } else {
        (MAX_ZLIB_MESSAGE, ZLIB_BUDGET)
    };
    match mode & 3 {
        1 => round_trip(params, &config, r, limit, sizes),
        2 => corrupted(params, &config, r, limit, sizes),
        _ => inflate_frames(params, &config, r, limit),
    }
});

/// The bounds every decompress call keeps, whatever its input.
fn check_bounds(out: &Vec<u8>, limit: usize) {
    assert!(out.len() <= limit + 1, "{} > {limit}", out.len());
    assert!(
        out.capacity() <= (limit + 1).max(1024),
        "capacity {} for limit {limit}",
        out.capacity()
    );
}

fn inflate_frames(params: DeflateParams, config: &DeflateConfig, mut r: Reader<'_>, limit: usize) {
    let mut codec = PerMessageDeflate::new(Role::Client, params, config);
    let mut out = Vec::new();
    while !r.is_empty() {
        let b = r.u8();
        let fin = b & 0x80 != 0;
        let n = match b & 0x7f {
            126 => usize::from(r.u16()),
            127 => r.u24() as usize,
            n => usize::from(n),
        };
        let frame = r.take(n);
        let result = codec.decompress(frame, fin, &mut out, limit);
        check_bounds(&out, limit);
        if result.is_err() {
            return;
        }
        if fin {
            out.clear();
        }
    }
}

/// A message from `flags | length | fill spec`, of at most `max` bytes and within what is
/// left of `budget`.
fn message(r: &mut Reader<'_>, max: usize, budget: &mut usize) -> (u8, Vec<u8>) {
    let flags = r.u8();
    let len = r.length().min(max).min(*budget);
    *budget -= len;
    let mut msg = Vec::new();
    Filler::new().fill(r, len, true, &mut msg);
    (flags, msg)
}

/// Compresses `msg` as the server would send it: whole (the sender policy may decline,
/// `None`), or, with bit 0 of `flags`, in `flags >> 1 & 3` + 1 chunks of a fragmented
/// message. Returns the frames' payloads.
fn compress(server: &mut PerMessageDeflate, flags: u8, msg: &[u8]) -> Option<Vec<Vec<u8>>> {
    if flags & 1 == 0 {
        let mut wire = Vec::new();
        return server.compress(msg, &mut wire).unwrap().then(|| vec![wire]);
    }
    let chunks = usize::from(flags >> 1 & 3) + 1;
    let size = msg.len().div_ceil(chunks).max(1);
    let mut frames = Vec::new();
    let mut pieces = msg.chunks(size).peekable();
    if pieces.peek().is_none() {
        let mut wire = Vec::new();
        server.compress_chunk(&[], true, &mut wire).unwrap();
        return Some(vec![wire]);
    }
    while let Some(piece) = pieces.next() {
        let mut wire = Vec::new();
        server
            .compress_chunk(piece, pieces.peek().is_none(), &mut wire)
            .unwrap();
        // A chunk the compressor held back still goes out, as an empty frame.
        frames.push(wire);
    }
    Some(frames)
}

/// Inflates a message's frames, re-cut at `flags >> 3` (0: as compressed; else that many
/// equal frames), into `out` under `limit`.
fn inflate(
    client: &mut PerMessageDeflate,
    flags: u8,
    frames: &[Vec<u8>],
    out: &mut Vec<u8>,
    limit: usize,
) -> Result<(), DeflateError> {
    let recut;
    let frames = match usize::from(flags >> 3) {
        0 => frames,
        n => {
            let all = frames.concat();
            let size = all.len().div_ceil(n).max(1);
            recut = all.chunks(size).map(<[u8]>::to_vec).collect::<Vec<_>>();
            &recut[..]
        }
    };
    if frames.is_empty() {
        return client.decompress(&[], true, out, limit);
    }
    for (i, f) in frames.iter().enumerate() {
        client.decompress(f, i + 1 == frames.len(), out, limit)?;
        check_bounds(out, limit);
    }
    Ok(())
}

fn round_trip(
    params: DeflateParams,
    config: &DeflateConfig,
    mut r: Reader<'_>,
    limit: usize,
    (max_message, mut budget): (usize, usize),
) {
    let mut server = PerMessageDeflate::new(Role::Server, params, config);
    let mut client = PerMessageDeflate::new(Role::Client, params, config);
    while !r.is_empty() {
        let (flags, msg) = message(&mut r, max_message, &mut budget);
        let Some(frames) = compress(&mut server, flags, &msg) else {
            continue;
        };
        let mut got = Vec::new();
        let result = inflate(&mut client, flags, &frames, &mut got, limit);
        check_bounds(&got, limit);
        if msg.len() <= limit {
            assert_eq!(
                result,
                Ok(()),
                "{} bytes under a limit of {limit}",
                msg.len()
            );
            assert!(got == msg, "{} bytes came back as {}", msg.len(), got.len());
        } else {
            assert_eq!(
                result,
                Err(DeflateError::TooLarge),
                "{} bytes, limit {limit}",
                msg.len()
            );
            // The codec's state is undefined after an error; the connection would fail.
            return;
        }
    }
}

fn corrupted(
    params: DeflateParams,
    config: &DeflateConfig,
    mut r: Reader<'_>,
    limit: usize,
    (max_message, mut budget): (usize, usize),
) {
    let mut server = PerMessageDeflate::new(Role::Server, params, config);
    let mut client = PerMessageDeflate::new(Role::Client, params, config);
    while !r.is_empty() {
        let (flags, msg) = message(&mut r, max_message, &mut budget);
        let Some(mut frames) = compress(&mut server, flags | 1, &msg) else {
            continue;
        };
        let edits = r.u8() % 8;
        let mut changed = false;
        for _ in 0..edits {
            let i = usize::from(r.u8()) % frames.len();
            let at = r.position(frames[i].len().saturating_sub(1));
            let x = r.u8();
            if let Some(b) = frames[i].get_mut(at) {
                *b ^= x;
                changed |= x != 0;
            }
        }
        let mut got = Vec::new();
        let result = inflate(&mut client, flags, &frames, &mut got, limit);
        check_bounds(&got, limit);
        if !changed && msg.len() <= limit {
            assert!(result.is_ok() && got == msg, "an unchanged message");
        }
        // After an error the codec's state is undefined; after a change that inflated,
        // the window no longer matches the compressor's, so later messages differ too.
        if result.is_err() || changed {
            return;
        }
    }
}
