//! RFC 7692 section 5 and 7.1: negotiating permessage-deflate parameters.
//!
//! INTERFACE STUB: signatures are the contract with the handshake; bodies are being written.

use super::DeflateConfig;

/// The agreed parameters of a permessage-deflate extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeflateParams {
    /// The server resets its compressor after every message.
    pub server_no_context_takeover: bool,
    /// The client resets its compressor after every message.
    pub client_no_context_takeover: bool,
    /// The server's compressor window, 8..=15.
    pub server_max_window_bits: u8,
    /// The client's compressor window, 8..=15.
    pub client_max_window_bits: u8,
}

/// A server response the client must refuse (RFC 7692 5: _Fail the WebSocket Connection_).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NegotiationError {
    /// The response could not be parsed, or named a parameter twice, or an unknown one.
    Malformed,
    /// The response accepted an extension that was not offered, or more than one.
    Unexpected,
    /// A parameter's value was out of range or not what was offered.
    InvalidValue,
}

impl core::fmt::Display for NegotiationError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            NegotiationError::Malformed => "malformed Sec-WebSocket-Extensions response",
            NegotiationError::Unexpected => "unexpected extension in response",
            NegotiationError::InvalidValue => "invalid permessage-deflate parameter value",
        })
    }
}

impl std::error::Error for NegotiationError {}

/// Server side: from every `Sec-WebSocket-Extensions` header value of the request, picks the
/// first permessage-deflate offer the config can honour. Returns the agreed parameters and
/// the value for the response's `Sec-WebSocket-Extensions` header, or `None` to decline
/// (malformed offers are declined, not errors).
pub fn server_negotiate(
    config: &DeflateConfig,
    header_values: &[&[u8]],
) -> Option<(DeflateParams, String)> {
    let _ = (config, header_values);
    todo!("negotiation")
}

/// Client side: the `Sec-WebSocket-Extensions` value to offer.
pub fn client_offer(config: &DeflateConfig) -> String {
    let _ = config;
    todo!("negotiation")
}

/// Client side: validates every `Sec-WebSocket-Extensions` header value of the server's
/// response against what `config` offered. `Ok(None)` when the server declined.
pub fn client_accept(
    config: &DeflateConfig,
    header_values: &[&[u8]],
) -> Result<Option<DeflateParams>, NegotiationError> {
    let _ = (config, header_values);
    todo!("negotiation")
}
