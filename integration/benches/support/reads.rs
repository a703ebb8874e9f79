//! Reads of many small frames for the batch decoder's benches (`batch/` in
//! `integration/benches/kernels.rs` and `integration/benches/kernels_min.rs`), and the
//! frame-by-frame paths it is measured against. Included with `#[path]`.
#![allow(dead_code)]

use rapidws_simd::frame::{self, FrameHeader, Rules, parse_header};
use rapidws_simd::{mask, utf8};

/// The masking key of every frame. Its bytes are below 0x80, so that ASCII text masked
/// with it is still ASCII: a bench decodes the same read again and again, and a masked
/// read decoded twice must stay valid text (unmasking is its own inverse). The work per
/// byte does not depend on the key.
pub const READ_KEY: [u8; 4] = [0x37, 0x7a, 0x21, 0x3d];

/// About `bytes` of back-to-back frames of `payload` bytes each (a client's masked ones
/// when `masked`), and how many: text frames or (`binary`) the same bytes as binary ones,
/// of JSON-like ASCII or (`mixed`) chat JSON with 22 % non-ASCII bytes, cut to whole
/// characters and padded with spaces, so every frame has exactly `payload` bytes.
pub fn read(
    payload: usize,
    masked: bool,
    mixed: bool,
    binary: bool,
    bytes: usize,
) -> (Vec<u8>, usize) {
    let corpus = corpus(mixed, bytes + 4096);
    let mut buf = Vec::with_capacity(bytes + payload + 16);
    let mut pos = 0;
    let mut count = 0;
    loop {
        let mut p = corpus[pos..pos + payload].to_vec();
        if mixed {
            let mut cut = payload;
            while core::str::from_utf8(&p[..cut]).is_err() {
                cut -= 1;
            }
            p[cut..].fill(b' ');
        }
        pos = (pos + payload + 1) % (corpus.len() - payload - 1);
        let b0 = if binary { 0x82 } else { 0x81 };
        let m = if masked { 0x80 } else { 0 };
        let mut f = vec![b0];
        if payload < 126 {
            f.push(m | payload as u8);
        } else {
            f.push(m | 126);
            f.extend_from_slice(&(payload as u16).to_be_bytes());
        }
        if masked {
            f.extend_from_slice(&READ_KEY);
            mask::apply(&mut p, &mut READ_KEY.clone());
        }
        f.extend_from_slice(&p);
        if buf.len() + f.len() > bytes {
            return (buf, count);
        }
        buf.extend_from_slice(&f);
        count += 1;
    }
}

/// `len` bytes of the text `read` cuts its payloads from.
pub fn corpus(mixed: bool, len: usize) -> Vec<u8> {
    if mixed {
        return crate::corpus::mixed_corpus(len).into_bytes();
    }
    let mut s = Vec::with_capacity(len + 64);
    let mut i = 0u32;
    while s.len() < len {
        s.extend_from_slice(format!("{{\"px\":{i},\"qty\":7,\"sym\":\"ABC\"}}").as_bytes());
        i = i.wrapping_mul(31).wrapping_add(17);
    }
    s
}

/// The rules of the side that reads: a server reads masked frames.
pub fn rules(masked: bool) -> Rules {
    if masked {
        Rules::server(1 << 20)
    } else {
        Rules::client(1 << 20)
    }
}

/// The frame-by-frame path a decoder takes without the batch kernel, through the public
/// entries: each header parsed and checked, its payload unmasked (`mask::apply`) and its
/// text validated (`utf8::validate`), one frame after another. Frames decoded.
#[inline(never)]
pub fn frame_by_frame(buf: &mut [u8], rules: &Rules) -> usize {
    let mut pos = 0;
    let mut n = 0;
    while let Ok(Some(h)) = parse_header(&buf[pos..]) {
        if !simple(&h, rules) {
            break;
        }
        let start = pos + usize::from(h.header_len);
        let end = start + h.payload_len as usize;
        if end > buf.len() {
            break;
        }
        let p = &mut buf[start..end];
        if let Some(mut key) = h.mask {
            mask::apply(p, &mut key);
        }
        if h.opcode == 1 && utf8::validate(p).is_err() {
            break;
        }
        pos = end;
        n += 1;
    }
    n
}

/// The checks the batch kernel makes of a header it takes.
#[inline(always)]
fn simple(h: &FrameHeader, rules: &Rules) -> bool {
    h.fin
        && h.rsv == 0
        && (h.opcode == 1 || h.opcode == 2)
        && h.mask.is_some() == rules.masked
        && h.payload_len <= rules.max_payload
}

/// The batch kernel on `backend` (`None`: the public entry), the whole read in one call.
#[inline(never)]
pub fn batch(backend: Option<rapidws_simd::Backend>, buf: &mut [u8], rules: &Rules) -> usize {
    match backend {
        Some(b) => frame::decode_with(b, buf, rules, usize::MAX).map_or(0, |s| s.frames),
        None => frame::decode(buf, rules, usize::MAX).frames,
    }
}

/// The headers alone, scanned into a table of 64 at a time.
#[inline(never)]
pub fn scan_only(buf: &[u8], rules: &Rules) -> usize {
    let mut out = [frame::Frame::default(); 64];
    let mut pos = 0;
    let mut n = 0;
    loop {
        let s = frame::scan_batch(&buf[pos..], rules, &mut out);
        n += s.frames;
        pos += s.consumed;
        if s.end != frame::End::Full {
            return n;
        }
    }
}
