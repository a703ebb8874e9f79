//! permessage-deflate (RFC 7692): compression at level 1 by our own encoder, other levels
//! and all decompression by zlib-rs.
//!
//! [`negotiate`] handles the `Sec-WebSocket-Extensions` offer and answer; [`PerMessageDeflate`]
//! is the per-connection codec the connection uses once the extension is agreed.
//!
//! # What the codec does (RFC 7692 7.2)
//!
//! - Sending: a message is deflated as raw DEFLATE (no zlib header), sync-flushed, and the
//!   trailing `00 00 ff ff` of the flush's empty stored block is removed. The empty message
//!   is the single byte `00`. With context takeover the compressor keeps its window across
//!   messages; without it (our direction's `*_no_context_takeover`, or a pooled compressor)
//!   it is reset after every message. Whether a message is compressed at all is the sender
//!   policy ([`DeflateConfig::min_size`], [`DeflateConfig::predict_incompressible`],
//!   [`DeflateConfig::skip_if_not_smaller`]) unless the send chose for itself
//!   ([`Compression`], [`PerMessageDeflate::compress_with`]); a message
//!   sent uncompressed never enters our compressor, as it never enters the peer's
//!   inflater.
//! - Receiving: each frame of a compressed message is inflated as it arrives; after the
//!   last frame `00 00 ff ff` is appended to the input. The inflater keeps its window across
//!   messages, which is correct whether or not the peer takes over context. A DEFLATE block
//!   with BFINAL set ends the inflater's stream (RFC 7692 7.2.3.4): it is restarted, and the
//!   rest of the message is inflated as a new stream.
//! - Level 1 (the default) compresses with our own DEFLATE encoder (`fast.rs`): greedy
//!   matching on an 8 KiB hash head, and per block whichever of dynamic Huffman codes,
//!   fixed codes or a stored block is shortest. zlib-rs's level 1 writes fixed codes only
//!   (about 18 % larger on JSON-like text) and keeps a 128 KiB hash head per connection,
//!   which misses the caches once many connections take turns. Levels 2..=9 use zlib-rs.
//! - Window bits: our compressor never uses a larger window than agreed. zlib cannot
//!   compress with an 8-bit window, so a direction agreed at 8 bits sends every message
//!   uncompressed ([`PerMessageDeflate::should_compress`] is false, and
//!   [`PerMessageDeflate::compress_chunk`] writes stored blocks). The inflater always uses
//!   15 bits, so it decodes any agreed window, including zlib-based peers that compress an
//!   agreed 8 with a 9-bit window.
//! - Bounded inflate: output grows in steps of at most 64 KiB and never past `max_len + 1`
//!   bytes; the size a peer announces is never used to reserve memory.
//!
//! # Memory
//!
//! Compressors and decompressors are created on first use. At level 1 (the default) a
//! compressor holds an 8 KiB hash head and a history that grows with what was sent up to
//! the window plus 32 KiB (about 77 KiB at a 15-bit window); per thread, one 128 KiB token
//! buffer is shared by all level-1 compressors. With zlib-rs 0.6 (levels 2..=9, 15-bit
//! windows, `mem_level` 8) a compressor holds about 371 KiB. A decompressor holds about
//! 49 KiB whatever the window (measured by `tests/deflate_memory.rs`; figures per level,
//! window and memory level in `benches/RESULTS.md`). [`CompressorPolicy::Pooled`] shares compressors
//! between connections and gives up send-side context takeover.
//!
//! # Prepared messages
//!
//! A prepared message is deflated once, by a fresh raw compressor: it refers to no earlier
//! message, so every peer can inflate it whatever its inflater holds (RFC 7692 7.2.3.2 lets
//! a sender choose not to use the history it may use). A peer with context takeover then
//! has the message's uncompressed bytes at the end of its window, which our own compressor
//! never saw. Before our next own compressed message that compressor is therefore reset and
//! given the message's last window-size bytes as a preset dictionary (zlib's
//! `deflateSetDictionary`): back-references then only reach bytes the peer holds at the
//! same distance.

pub(crate) mod compressor;
mod fast;
// The integration tests' noise generator, so that one xorshift serves them and the unit
// tests here (`predict`, `fast`).
pub mod negotiate;
#[cfg(test)]
#[path = "../../tests/noise/mod.rs"]
mod noise;
mod pool;
mod predict;
mod receiver;
pub(crate) use receiver::Inflated;
mod sender;

pub use negotiate::{DeflateParams, NegotiationError};
pub use pool::CompressorPool;

use std::sync::Arc;

use crate::codec::Role;
use crate::message::Compression;

/// How compressors are held.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub enum CompressorPolicy {
    /// One compressor per connection, created on the first compressed message and kept for
    /// the connection's life: fastest, and required for send-side context takeover.
    #[default]
    Attached,
    /// Compressors are borrowed from a shared pool for one message and returned reset.
    /// Memory then scales with the messages being compressed at once rather than with the
    /// connections; send-side context takeover is given up, so a server demands
    /// `server_no_context_takeover` and a client offers `client_no_context_takeover`.
    Pooled(Arc<CompressorPool>),
}

/// permessage-deflate settings. `Option<DeflateConfig>` in a connection's config turns
/// the extension on (offered by a client, accepted by a server).
///
/// Values out of range are clamped where they are used (window bits to 8..=15 in
/// negotiation, 9..=15 for our compressor; level to 0..=9; memory level to 1..=9).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct DeflateConfig {
    /// Request (client) or require/accept (server) that the server resets its compressor
    /// per message. Default off.
    pub server_no_context_takeover: bool,
    /// Request (client) or require/accept (server) that the client resets its compressor
    /// per message. Default off.
    pub client_no_context_takeover: bool,
    /// Largest LZ77 window the server may use, 9..=15. Default 15 (32 KiB).
    pub server_max_window_bits: u8,
    /// Largest LZ77 window the client may use, 9..=15. Default 15 (32 KiB).
    pub client_max_window_bits: u8,
    /// Compression level, 0..=9. Default 1: our own encoder (fast, small per-connection
    /// state, dynamic Huffman codes; on JSON-like text smaller than zlib-rs's level 1 and
    /// miniz_oxide's). 0 and 2..=9 are zlib-rs's levels.
    pub level: i32,
    /// zlib memory level, 1..=9, for zlib-rs's levels; lower saves compressor memory.
    /// Default 8. Level 1's own encoder does not use it.
    pub mem_level: u8,
    /// Messages shorter than this are sent uncompressed. Default 128 bytes.
    pub min_size: usize,
    /// Send a message uncompressed when deflating does not make it smaller. The compressor
    /// is then reset (with context takeover this gives up the history it held), so that it
    /// never references bytes the peer did not receive compressed. Costs a compression per
    /// such message; off by default.
    pub skip_if_not_smaller: bool,
    /// Send messages that look incompressible (random, encrypted or already compressed
    /// data) uncompressed, without running deflate on them. Default on.
    ///
    /// The test reads a byte histogram of up to 512 bytes sampled from the message (8 runs
    /// of 64 bytes spread over a longer one), well under a microsecond (ASCII text is
    /// recognised from its first 64 bytes), and calls a message
    /// incompressible only when its sampled bytes are about as evenly spread as random
    /// ones: then an order-0 coder could save at most about 4 %, and zlib-rs's level 1 makes
    /// such data about 5 % larger. The decision comes before the compressor sees the
    /// message, so it needs no compressor reset and keeps context takeover intact (a
    /// message sent uncompressed never enters the peer's window either).
    ///
    /// Random-looking data that repeats (a random block twice in one message) is what a
    /// histogram cannot see: after a run of skipped messages (16 at first, doubling up to
    /// 1,024) one is deflated as a probe on a scratch compressor (one per thread, about
    /// 72 KiB at level 1 and 371 KiB for zlib-rs's levels, kept for the thread's life),
    /// never on the
    /// connection's. When it shrinks to under 7/8 of its size, it and the next 256
    /// messages are compressed as usual; otherwise it goes uncompressed. So probing costs
    /// no reset and no context, and a connection that only ever sends incompressible data
    /// never allocates a compressor.
    ///
    /// Applies to whole messages ([`PerMessageDeflate::compress`]); a fragmented message
    /// is compressed or not as a whole when it begins.
    pub predict_incompressible: bool,
    /// How compressors are held. Default [`CompressorPolicy::Attached`].
    pub policy: CompressorPolicy,
}

impl Default for DeflateConfig {
    fn default() -> Self {
        DeflateConfig {
            server_no_context_takeover: false,
            client_no_context_takeover: false,
            server_max_window_bits: 15,
            client_max_window_bits: 15,
            level: 1,
            mem_level: 8,
            min_size: 128,
            skip_if_not_smaller: false,
            predict_incompressible: true,
            policy: CompressorPolicy::Attached,
        }
    }
}

impl DeflateConfig {
    /// The default settings: context takeover both ways, 15-bit windows, level 1, memory
    /// level 8, messages under 128 bytes and messages that look incompressible
    /// uncompressed, one compressor per connection.
    pub fn new() -> Self {
        Self::default()
    }
}

setters! { DeflateConfig {
    /// Sets [`DeflateConfig::server_no_context_takeover`].
    server_no_context_takeover(on: bool) => server_no_context_takeover;
    /// Sets [`DeflateConfig::client_no_context_takeover`].
    client_no_context_takeover(on: bool) => client_no_context_takeover;
    /// Sets [`DeflateConfig::server_max_window_bits`].
    server_max_window_bits(bits: u8) => server_max_window_bits;
    /// Sets [`DeflateConfig::client_max_window_bits`].
    client_max_window_bits(bits: u8) => client_max_window_bits;
    /// Sets [`DeflateConfig::level`].
    level(level: i32) => level;
    /// Sets [`DeflateConfig::mem_level`].
    mem_level(mem_level: u8) => mem_level;
    /// Sets [`DeflateConfig::min_size`].
    min_size(min_size: usize) => min_size;
    /// Sets [`DeflateConfig::skip_if_not_smaller`].
    skip_if_not_smaller(on: bool) => skip_if_not_smaller;
    /// Sets [`DeflateConfig::predict_incompressible`].
    predict_incompressible(on: bool) => predict_incompressible;
    /// Sets [`DeflateConfig::policy`].
    policy(policy: CompressorPolicy) => policy;
} }

/// A permessage-deflate failure. Maps to a close code with [`DeflateError::close_code`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeflateError {
    /// The inflated message passed the size limit (close code 1009).
    TooLarge,
    /// The compressed data is not a valid deflate stream (close code 1007).
    Corrupt,
    /// zlib refused an operation on our own compressor; a bug, not the peer's doing
    /// (close code 1011).
    Internal,
}

impl DeflateError {
    /// The close code to send for this error.
    pub fn close_code(&self) -> u16 {
        match self {
            DeflateError::TooLarge => 1009,
            DeflateError::Corrupt => 1007,
            DeflateError::Internal => 1011,
        }
    }
}

impl core::fmt::Display for DeflateError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DeflateError::TooLarge => f.write_str("inflated message exceeds the size limit"),
            DeflateError::Corrupt => f.write_str("invalid deflate data"),
            DeflateError::Internal => f.write_str("internal compressor error"),
        }
    }
}

impl std::error::Error for DeflateError {}

/// The 4 bytes a sync flush ends with, removed on send and restored on receive
/// (RFC 7692 7.2.1 and 7.2.2).
pub const TRAILER: [u8; 4] = [0x00, 0x00, 0xff, 0xff];

/// The per-connection permessage-deflate codec, for the agreed [`DeflateParams`].
///
/// Call order: for each outgoing data message, either [`compress`](Self::compress) once
/// (whole message), or [`compress_chunk`](Self::compress_chunk) per fragment with `fin` on
/// the last; never interleave two outgoing messages. For each incoming message with RSV1
/// set on its first frame, call [`decompress`](Self::decompress) once per frame, `fin` on
/// the last. After an error the codec's state is undefined: fail the connection with
/// [`DeflateError::close_code`].
///
/// ```
/// use rapidws::Role;
/// use rapidws::deflate::{DeflateConfig, DeflateError, DeflateParams, PerMessageDeflate};
///
/// let config = DeflateConfig::default();
/// let params = DeflateParams::default(); // a bare `permessage-deflate` agreement
/// let mut server = PerMessageDeflate::new(Role::Server, params, &config);
/// let mut client = PerMessageDeflate::new(Role::Client, params, &config);
///
/// // RFC 7692 7.2.3.1: "Hello" as one compressed frame's payload.
/// let mut text = Vec::new();
/// client.decompress(&[0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00], true, &mut text, 1024)?;
/// assert_eq!(text, b"Hello");
///
/// // A round trip; the receiver bounds what it inflates.
/// let message = "Hello, Hello, Hello, Hello".repeat(100);
/// let mut payload = Vec::new();
/// assert!(server.compress(message.as_bytes(), &mut payload)?);
/// assert!(payload.len() < message.len() / 10);
/// let mut inflated = Vec::new();
/// client.decompress(&payload, true, &mut inflated, message.len())?;
/// assert_eq!(inflated, message.as_bytes());
///
/// // With a 1000-byte limit the same payload stops at the limit, not after it.
/// let mut limited = PerMessageDeflate::new(Role::Client, params, &config);
/// let mut out = Vec::new();
/// let err = limited.decompress(&payload, true, &mut out, 1000);
/// assert_eq!(err, Err(DeflateError::TooLarge));
/// assert!(out.capacity() <= 1001);
/// # Ok::<(), DeflateError>(())
/// ```
#[derive(Debug)]
pub struct PerMessageDeflate {
    sender: sender::Sender,
    receiver: receiver::Receiver,
}

impl PerMessageDeflate {
    /// A codec for `role` with the agreed parameters. Allocates nothing yet: the compressor
    /// and the decompressor are created on first use.
    pub fn new(role: Role, params: DeflateParams, config: &DeflateConfig) -> Self {
        let (send_reset, send_bits) = match role {
            Role::Server => (
                params.server_no_context_takeover,
                params.server_max_window_bits,
            ),
            Role::Client => (
                params.client_no_context_takeover,
                params.client_max_window_bits,
            ),
        };
        PerMessageDeflate {
            sender: sender::Sender::new(send_reset, send_bits, config),
            receiver: receiver::Receiver::new(),
        }
    }

    /// Whether a message of `len` bytes should be compressed at all: `len >= min_size`,
    /// and our direction can compress (it cannot at an agreed 8-bit window).
    pub fn should_compress(&self, len: usize) -> bool {
        self.sender.should_compress(len)
    }

    /// Compresses a whole message, appending the RFC 7692 payload (sync-flushed, trailing
    /// `00 00 ff ff` removed) to `out`. Returns `false`, leaving `out` as it was, when the
    /// message should go uncompressed instead (the sender policy); the compressor state is
    /// kept consistent with what the peer will see either way.
    ///
    /// The policy: `false` when [`should_compress`](Self::should_compress) is false; with
    /// [`DeflateConfig::predict_incompressible`], when the message looks incompressible
    /// (decided before our compressor sees it); and, with
    /// [`DeflateConfig::skip_if_not_smaller`], when the result is not shorter than
    /// `payload` (the compressor is then reset).
    pub fn compress(&mut self, payload: &[u8], out: &mut Vec<u8>) -> Result<bool, DeflateError> {
        self.sender.compress(payload, out, Compression::Auto)
    }

    /// [`compress`](Self::compress) with the choice made for this message:
    /// [`Compression::Auto`] is `compress`; [`Compression::Never`] returns `false` at once,
    /// and the compressor never sees the message (its history stays as the peer's
    /// inflater will have it, with or without context takeover);
    /// [`Compression::Always`] compresses whatever the size threshold, the
    /// incompressibility test and [`DeflateConfig::skip_if_not_smaller`] say, and returns
    /// `false` only when this direction cannot compress (an agreed 8-bit window).
    ///
    /// ```
    /// use rapidws::{Compression, Role};
    /// use rapidws::deflate::{DeflateConfig, DeflateParams, PerMessageDeflate};
    ///
    /// let config = DeflateConfig::default(); // messages under 128 bytes go uncompressed
    /// let mut server = PerMessageDeflate::new(Role::Server, DeflateParams::default(), &config);
    /// let mut client = PerMessageDeflate::new(Role::Client, DeflateParams::default(), &config);
    /// let mut out = Vec::new();
    /// assert!(server.compress_with(b"tick tick tick tick", &mut out, Compression::Always)?);
    /// let long = "already compressed, say ".repeat(20);
    /// assert!(!server.compress_with(long.as_bytes(), &mut Vec::new(), Compression::Never)?);
    ///
    /// // The peer's inflater never saw the uncompressed message, and it needs not have.
    /// let mut inflated = Vec::new();
    /// client.decompress(&out, true, &mut inflated, 1024)?;
    /// assert_eq!(inflated, b"tick tick tick tick");
    /// # Ok::<(), rapidws::deflate::DeflateError>(())
    /// ```
    pub fn compress_with(
        &mut self,
        payload: &[u8],
        out: &mut Vec<u8>,
        compression: Compression,
    ) -> Result<bool, DeflateError> {
        self.sender.compress(payload, out, compression)
    }

    /// Compresses one chunk of a message sent as fragments; `fin` ends the message
    /// (flushes and strips the trailer). Appends to `out`, possibly nothing for a chunk
    /// that is not the last (zlib may hold the input back until the flush); the frame
    /// may then be sent empty. Applies no sender policy: the caller has decided to send
    /// this message compressed (RSV1 on its first frame).
    pub fn compress_chunk(
        &mut self,
        chunk: &[u8],
        fin: bool,
        out: &mut Vec<u8>,
    ) -> Result<(), DeflateError> {
        self.sender.compress_chunk(chunk, fin, out)
    }

    /// Inflates one frame's (unmasked) payload of a compressed message, appending to `out`.
    /// `fin` marks the message's last frame (the trailer is restored). The inflater keeps
    /// its window across messages whether or not the peer takes over context (a peer that
    /// does not simply never refers back). Fails with [`DeflateError::TooLarge`] as soon as
    /// `out.len()` would pass `max_len`, having grown `out` to at most about `max_len`.
    ///
    /// `max_len` bounds `out.len()` as a whole, so pass the message limit when `out`
    /// collects the message's frames. `out`'s capacity is grown to at most `max_len + 1`.
    /// Invalid data fails with [`DeflateError::Corrupt`].
    pub fn decompress(
        &mut self,
        input: &[u8],
        fin: bool,
        out: &mut Vec<u8>,
        max_len: usize,
    ) -> Result<(), DeflateError> {
        match self
            .receiver
            .decompress(input, fin, out, max_len, usize::MAX)?
        {
            Inflated::Done => Ok(()),
            // Never with no pause point; a pause would mean output cut short.
            Inflated::Paused(_) => Err(DeflateError::TooLarge),
        }
    }

    /// [`decompress`](Self::decompress) that pauses when `out` holds `stop` bytes (the
    /// memory granted so far) with output left to make: `Paused` with how many bytes of
    /// `input` it took. Call again with the rest of `input` (empty when it took all), the
    /// same `fin`, and a later `stop`, to go on where it paused. A `stop` past `max_len`
    /// never pauses; `out`'s capacity is grown to at most `stop` (or `max_len + 1`).
    #[cfg_attr(not(feature = "deflate"), allow(dead_code))]
    pub(crate) fn decompress_within(
        &mut self,
        input: &[u8],
        fin: bool,
        out: &mut Vec<u8>,
        max_len: usize,
        stop: usize,
    ) -> Result<Inflated, DeflateError> {
        self.receiver.decompress(input, fin, out, max_len, stop)
    }

    /// For a prepared message of `len` bytes: the window bits its compressed form must be
    /// made with for this connection, or `None` when this connection sends it uncompressed
    /// (shorter than [`DeflateConfig::min_size`](DeflateConfig::min_size), or an
    /// agreed 8-bit window).
    pub fn prepared_window_bits(&self, len: usize) -> Option<u8> {
        self.prepared_window_bits_with(len, Compression::Auto)
    }

    /// [`prepared_window_bits`](Self::prepared_window_bits) for a prepared message that
    /// holds `compression`: `None` for [`Compression::Never`]; for
    /// [`Compression::Always`], the window bits whatever `len` (`None` only at an agreed
    /// 8-bit window).
    pub fn prepared_window_bits_with(&self, len: usize, compression: Compression) -> Option<u8> {
        match compression {
            Compression::Never => None,
            Compression::Always => self.sender.prepared_window_bits(),
            Compression::Auto if self.sender.should_compress(len) => {
                self.sender.prepared_window_bits()
            }
            Compression::Auto => None,
        }
    }

    /// Records that a prepared message with uncompressed `payload` was sent compressed
    /// (made by a fresh compressor). With send context takeover, our compressor is primed
    /// with it (lazily, when it next compresses); keeps a reference, never a copy.
    pub fn prepared_sent(&mut self, payload: bytes::Bytes) {
        self.sender.prepared_sent(payload);
    }
}

/// Appends `len` zero bytes to `out` for a zlib call to write into, growing its capacity
/// geometrically but never past `cap_limit` (unless `out` needs more than that itself).
fn grow_zeroed(out: &mut Vec<u8>, len: usize, cap_limit: usize) {
    let needed = out.len() + len;
    if out.capacity() < needed {
        let target = out.capacity().saturating_mul(2).min(cap_limit).max(needed);
        out.reserve_exact(target - out.len());
    }
    out.resize(needed, 0);
}
