//! permessage-deflate for prepared (broadcast) messages: one compression shared by every
//! receiver, and the per-connection bookkeeping that keeps context takeover sound.
//!
//! A prepared message is deflated once, by a fresh raw compressor: it refers to no earlier
//! message, so every peer can inflate it whatever its inflater holds (RFC 7692 7.2.3.2 lets
//! a sender choose not to use the history it may use). A peer with context takeover then
//! has the message's uncompressed bytes at the end of its window, which our own compressor
//! never saw. Before our next own compressed message that compressor is therefore reset and
//! given the message's last window-size bytes as a preset dictionary (zlib's
//! `deflateSetDictionary`): back-references then only reach bytes the peer holds at the
//! same distance.

use bytes::Bytes;
use zlib_rs::{Deflate, DeflateFlush};

use super::pool::Key;
use super::sender::{deflate_into, strip_trailer};
use super::{DeflateError, PerMessageDeflate};

/// Resets `deflate` and makes the last `2^window_bits` bytes of `payload` its history.
pub(super) fn prime(deflate: &mut Deflate, payload: &[u8], window_bits: u8) {
    deflate.reset();
    let window = 1usize << window_bits;
    let tail = &payload[payload.len().saturating_sub(window)..];
    if deflate.set_dictionary(tail).is_err() {
        // A reset compressor with no history refers to nothing: still consistent.
        deflate.reset();
    }
}

/// Deflates `payload` as a whole RFC 7692 message against an empty history (fresh raw
/// compressor with a `window_bits` window, sync flush, trailer removed), appending it to
/// `out`. Level 1 uses our own compressor (`super::fast`), other levels zlib-rs.
pub(crate) fn compress_standalone(
    payload: &[u8],
    window_bits: u8,
    level: i32,
    mem_level: u8,
    out: &mut Vec<u8>,
) -> Result<(), DeflateError> {
    if payload.is_empty() {
        // RFC 7692 7.2.3.6: the empty message is one empty stored block, LEN/NLEN removed.
        out.push(0x00);
        return Ok(());
    }
    let key = Key {
        window_bits: window_bits.clamp(9, 15),
        level: level.clamp(0, 9),
        mem_level: mem_level.clamp(1, 9),
    };
    if key.level == 1 {
        // Our own level-1 compressor, as connections use (and far less to set up than a
        // zlib-rs compressor).
        super::fast::FastDeflate::new(key.window_bits).compress(payload, true, out);
        return Ok(());
    }
    let mut deflate = key.build();
    let start = out.len();
    deflate_into(&mut deflate, payload, DeflateFlush::SyncFlush, out)?;
    strip_trailer(out, start)
}

impl PerMessageDeflate {
    /// For a prepared message of `len` bytes: the window bits its compressed form must be
    /// made with for this connection, or `None` when this connection sends it uncompressed
    /// (shorter than [`DeflateConfig::min_size`](super::DeflateConfig::min_size), or an
    /// agreed 8-bit window).
    pub fn prepared_window_bits(&self, len: usize) -> Option<u8> {
        if self.sender.should_compress(len) {
            self.sender.prepared_window_bits()
        } else {
            None
        }
    }

    /// Records that a prepared message with uncompressed `payload` was sent compressed
    /// (made by a fresh compressor). With send context takeover, our compressor is primed
    /// with it (lazily, when it next compresses); keeps a reference, never a copy.
    pub fn prepared_sent(&mut self, payload: Bytes) {
        self.sender.prepared_sent(payload);
    }
}
