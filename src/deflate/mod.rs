//! permessage-deflate (RFC 7692) on zlib-rs.
//!
//! [`negotiate`] handles the `Sec-WebSocket-Extensions` offer and answer; [`PerMessageDeflate`]
//! is the per-connection codec the connection uses once the extension is agreed.
//!
//! INTERFACE STUB: the signatures below are the contract between the protocol core and the
//! deflate implementation; the bodies are being written.

pub mod negotiate;

pub use negotiate::{DeflateParams, NegotiationError};

use crate::Role;

/// How compressors are held.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub enum CompressorPolicy {
    /// One compressor per connection, kept for its life: fastest, and required for
    /// send-side context takeover.
    #[default]
    Attached,
}

/// permessage-deflate settings. `Option<DeflateConfig>` in a connection's config turns
/// the extension on (offered by a client, accepted by a server).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct DeflateConfig {
    /// Request (client) or require/accept (server) that the server resets its compressor per message.
    pub server_no_context_takeover: bool,
    /// Request (client) or require/accept (server) that the client resets its compressor per message.
    pub client_no_context_takeover: bool,
    /// Largest LZ77 window the server may use, 9..=15.
    pub server_max_window_bits: u8,
    /// Largest LZ77 window the client may use, 9..=15.
    pub client_max_window_bits: u8,
    /// zlib compression level, 0..=9.
    pub level: i32,
    /// zlib memory level, 1..=9.
    pub mem_level: u8,
    /// Messages shorter than this are sent uncompressed.
    pub min_size: usize,
    /// How compressors are held.
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
            policy: CompressorPolicy::Attached,
        }
    }
}

/// A permessage-deflate failure. Maps to a close code with [`DeflateError::close_code`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeflateError {
    /// The inflated message passed the size limit (close code 1009).
    TooLarge,
    /// The compressed data is not a valid deflate stream (close code 1007).
    Corrupt,
}

impl DeflateError {
    /// The close code to send for this error.
    pub fn close_code(&self) -> u16 {
        match self {
            DeflateError::TooLarge => 1009,
            DeflateError::Corrupt => 1007,
        }
    }
}

impl core::fmt::Display for DeflateError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DeflateError::TooLarge => f.write_str("inflated message exceeds the size limit"),
            DeflateError::Corrupt => f.write_str("invalid deflate data"),
        }
    }
}

impl std::error::Error for DeflateError {}

/// The per-connection permessage-deflate codec, for the agreed [`DeflateParams`].
pub struct PerMessageDeflate {
    _private: (),
}

impl PerMessageDeflate {
    /// A codec for `role` with the agreed parameters.
    pub fn new(role: Role, params: DeflateParams, config: &DeflateConfig) -> Self {
        let _ = (role, params, config);
        todo!("deflate implementation")
    }

    /// Whether a message of `len` bytes should be compressed at all (the minimum size policy).
    pub fn should_compress(&self, len: usize) -> bool {
        let _ = len;
        todo!("deflate implementation")
    }

    /// Compresses a whole message, appending the RFC 7692 payload (sync-flushed, trailing
    /// `00 00 ff ff` removed) to `out`. Returns `false`, leaving `out` as it was, when the
    /// message should go uncompressed instead (the sender policy); the compressor state is
    /// kept consistent with what the peer will see either way.
    pub fn compress(&mut self, payload: &[u8], out: &mut Vec<u8>) -> Result<bool, DeflateError> {
        let _ = (payload, out);
        todo!("deflate implementation")
    }

    /// Compresses one chunk of a message sent as fragments; `fin` ends the message
    /// (flushes and strips the trailer). Appends to `out`.
    pub fn compress_chunk(
        &mut self,
        chunk: &[u8],
        fin: bool,
        out: &mut Vec<u8>,
    ) -> Result<(), DeflateError> {
        let _ = (chunk, fin, out);
        todo!("deflate implementation")
    }

    /// Inflates one frame's (unmasked) payload of a compressed message, appending to `out`.
    /// `fin` marks the message's last frame (the trailer is restored and, without context
    /// takeover, the inflater reset). Fails with [`DeflateError::TooLarge`] as soon as
    /// `out.len()` would pass `max_len`, having grown `out` to at most about `max_len`.
    pub fn decompress(
        &mut self,
        input: &[u8],
        fin: bool,
        out: &mut Vec<u8>,
        max_len: usize,
    ) -> Result<(), DeflateError> {
        let _ = (input, fin, out, max_len);
        todo!("deflate implementation")
    }
}
