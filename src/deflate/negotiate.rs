//! RFC 7692 section 5 and 7.1: negotiating permessage-deflate parameters.
//!
//! `Sec-WebSocket-Extensions` values follow RFC 6455 9.1:
//!
//! ```text
//! extension-list = 1#extension
//! extension      = extension-token *( ";" extension-param )
//! extension-param = token [ "=" (token | quoted-string) ]
//! ```
//!
//! with optional whitespace around the separators and, per RFC 7230 7, empty list elements
//! tolerated. A quoted value must, once unquoted, still be a token (RFC 6455 9.1).
//!
//! What the server agrees to and what the client accepts:
//!
//! - The server takes the FIRST permessage-deflate offer that is well formed and that it can
//!   honour (RFC 7692 5.1: offers are in order of preference); a malformed offer is declined
//!   and the next one tried (RFC 7692 7: "a server MUST decline an extension negotiation
//!   offer" with an unknown or duplicate parameter or an invalid value).
//! - `server_max_window_bits=8` from a client is honoured, although zlib cannot compress
//!   with a 256-byte window: the server then sends every message of that connection
//!   uncompressed (always valid: RSV1 is per message). No stream with a larger window than
//!   agreed is ever produced. The same holds for a client whose response says
//!   `client_max_window_bits=8`.
//! - The client validates the response strictly (RFC 7692 5: the client MUST _Fail the
//!   WebSocket Connection_ on a response it cannot accept).

use super::{CompressorPolicy, DeflateConfig};

/// The extension's registered name.
pub const EXTENSION_NAME: &str = "permessage-deflate";

const SERVER_NO_CONTEXT_TAKEOVER: &str = "server_no_context_takeover";
const CLIENT_NO_CONTEXT_TAKEOVER: &str = "client_no_context_takeover";
const SERVER_MAX_WINDOW_BITS: &str = "server_max_window_bits";
const CLIENT_MAX_WINDOW_BITS: &str = "client_max_window_bits";

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

impl Default for DeflateParams {
    /// The parameters of a bare `permessage-deflate` agreement: context takeover both ways,
    /// 15-bit windows.
    fn default() -> Self {
        DeflateParams {
            server_no_context_takeover: false,
            client_no_context_takeover: false,
            server_max_window_bits: 15,
            client_max_window_bits: 15,
        }
    }
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

// ---------------------------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------------------------

/// One parsed list element: an extension name and its parameters (value unquoted).
#[derive(Debug, PartialEq, Eq)]
struct Extension<'a> {
    name: &'a [u8],
    params: Vec<(&'a [u8], Option<Vec<u8>>)>,
}

/// RFC 7230 3.2.6 tchar.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn is_token(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|&b| is_tchar(b))
}

fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// Splits `s` at every `sep` outside a quoted-string. `None` when a quote is left open.
fn split_outside_quotes(s: &[u8], sep: u8) -> Option<Vec<&[u8]>> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut in_quotes = false;
    let mut i = 0;
    while i < s.len() {
        let b = s[i];
        if in_quotes {
            match b {
                b'\\' => i += 1,
                b'"' => in_quotes = false,
                _ => {}
            }
        } else if b == b'"' {
            in_quotes = true;
        } else if b == sep {
            parts.push(&s[start..i]);
            start = i + 1;
        }
        i += 1;
    }
    if in_quotes || i > s.len() {
        return None;
    }
    parts.push(&s[start..]);
    Some(parts)
}

/// Unquotes an RFC 7230 quoted-string (including the quotes). `None` if malformed.
fn unquote(s: &[u8]) -> Option<Vec<u8>> {
    let inner = s.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
    let mut out = Vec::with_capacity(inner.len());
    let mut it = inner.iter();
    while let Some(&b) = it.next() {
        match b {
            b'\\' => out.push(*it.next()?),
            b'"' => return None,
            _ => out.push(b),
        }
    }
    Some(out)
}

/// Parses one list element (`name *( ";" param )`). `None` when it is malformed.
fn parse_extension(element: &[u8]) -> Option<Extension<'_>> {
    let mut pieces = split_outside_quotes(element, b';')?.into_iter();
    let name = trim_ows(pieces.next()?);
    if !is_token(name) {
        return None;
    }
    let mut params = Vec::new();
    for piece in pieces {
        let piece = trim_ows(piece);
        let (pname, value) = match piece.iter().position(|&b| b == b'=') {
            None => (piece, None),
            Some(eq) => {
                let raw = trim_ows(&piece[eq + 1..]);
                let value = if raw.first() == Some(&b'"') {
                    // RFC 6455 9.1: a quoted value must still be a token once unquoted.
                    let v = unquote(raw)?;
                    if !is_token(&v) {
                        return None;
                    }
                    v
                } else if is_token(raw) {
                    raw.to_vec()
                } else {
                    return None;
                };
                (trim_ows(&piece[..eq]), Some(value))
            }
        };
        if !is_token(pname) {
            return None;
        }
        params.push((pname, value));
    }
    Some(Extension { name, params })
}

/// Every list element of every header value, each parsed or `None` when malformed. Empty
/// elements are skipped (RFC 7230 7).
fn parse_list<'a>(header_values: &[&'a [u8]]) -> Vec<Option<Extension<'a>>> {
    let mut out = Vec::new();
    for value in header_values {
        match split_outside_quotes(value, b',') {
            None => out.push(None),
            Some(elements) => {
                for element in elements {
                    if trim_ows(element).is_empty() {
                        continue;
                    }
                    out.push(parse_extension(element));
                }
            }
        }
    }
    out
}

/// RFC 7692 7.1.2.1: a window bits value is a decimal integer 8..=15 without leading zeros.
fn parse_window_bits(value: &[u8]) -> Option<u8> {
    match value {
        [b'8'] => Some(8),
        [b'9'] => Some(9),
        [b'1', d @ b'0'..=b'5'] => Some(10 + (d - b'0')),
        _ => None,
    }
}

/// The permessage-deflate parameters as written in one offer or response.
#[derive(Debug, Default, PartialEq, Eq)]
struct RawParams {
    server_no_context_takeover: bool,
    client_no_context_takeover: bool,
    server_max_window_bits: Option<u8>,
    /// `Some(None)`: present without a value (allowed in an offer only).
    client_max_window_bits: Option<Option<u8>>,
}

/// Why a parameter list was refused.
#[derive(Debug, PartialEq, Eq)]
enum ParamError {
    /// Unknown or duplicate parameter, or a value on a flag.
    Malformed,
    /// A window bits value outside 8..=15 (or missing where required).
    InvalidValue,
}

impl From<ParamError> for NegotiationError {
    fn from(e: ParamError) -> Self {
        match e {
            ParamError::Malformed => NegotiationError::Malformed,
            ParamError::InvalidValue => NegotiationError::InvalidValue,
        }
    }
}

/// Reads the four RFC 7692 parameters; `allow_bare_client_bits` is true for an offer.
fn read_params(ext: &Extension<'_>, allow_bare_client_bits: bool) -> Result<RawParams, ParamError> {
    let mut p = RawParams::default();
    let mut seen = [false; 4];
    for (name, value) in &ext.params {
        let idx = if name.eq_ignore_ascii_case(SERVER_NO_CONTEXT_TAKEOVER.as_bytes()) {
            0
        } else if name.eq_ignore_ascii_case(CLIENT_NO_CONTEXT_TAKEOVER.as_bytes()) {
            1
        } else if name.eq_ignore_ascii_case(SERVER_MAX_WINDOW_BITS.as_bytes()) {
            2
        } else if name.eq_ignore_ascii_case(CLIENT_MAX_WINDOW_BITS.as_bytes()) {
            3
        } else {
            // RFC 7692 7: an unknown parameter makes the offer/response invalid.
            return Err(ParamError::Malformed);
        };
        // RFC 7692 7: "has more than one parameter with the same name" -> decline/fail.
        if std::mem::replace(&mut seen[idx], true) {
            return Err(ParamError::Malformed);
        }
        match idx {
            // RFC 7692 7.1.1.1 / 7.1.1.2: the no_context_takeover parameters have no value.
            0 | 1 if value.is_some() => return Err(ParamError::Malformed),
            0 => p.server_no_context_takeover = true,
            1 => p.client_no_context_takeover = true,
            2 => {
                // RFC 7692 7.1.2.1: server_max_window_bits always has a value.
                let v = value.as_deref().ok_or(ParamError::InvalidValue)?;
                p.server_max_window_bits =
                    Some(parse_window_bits(v).ok_or(ParamError::InvalidValue)?);
            }
            _ => match value {
                // RFC 7692 7.1.2.2: client_max_window_bits may be valueless in an offer only.
                None if allow_bare_client_bits => p.client_max_window_bits = Some(None),
                None => return Err(ParamError::InvalidValue),
                Some(v) => {
                    p.client_max_window_bits =
                        Some(Some(parse_window_bits(v).ok_or(ParamError::InvalidValue)?));
                }
            },
        }
    }
    Ok(p)
}

fn is_permessage_deflate(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(EXTENSION_NAME.as_bytes())
}

fn clamp_bits(bits: u8) -> u8 {
    bits.clamp(8, 15)
}

/// Whether our own compressor is pooled and so resets after every message.
fn pooled(config: &DeflateConfig) -> bool {
    matches!(config.policy, CompressorPolicy::Pooled(_))
}

// ---------------------------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------------------------

/// Server side: from every `Sec-WebSocket-Extensions` header value of the request, picks the
/// first permessage-deflate offer the config can honour. Returns the agreed parameters and
/// the value for the response's `Sec-WebSocket-Extensions` header, or `None` to decline
/// (malformed offers are declined, not errors).
///
/// The agreement: `server_no_context_takeover` when offered, when the config asks for it, or
/// when compressors are pooled; `client_no_context_takeover` when offered or asked for;
/// `server_max_window_bits` the smaller of the offer's and the config's (stated whenever it
/// is below 15 or was offered); `client_max_window_bits` the smaller of the offer's and the
/// config's, stated only if the offer had the parameter (RFC 7692 7.1.2.2). A config that
/// limits the client's window still accepts an offer without `client_max_window_bits`: the
/// server then inflates with a 15-bit window.
pub fn server_negotiate(
    config: &DeflateConfig,
    header_values: &[&[u8]],
) -> Option<(DeflateParams, String)> {
    for ext in parse_list(header_values).into_iter().flatten() {
        if !is_permessage_deflate(ext.name) {
            continue;
        }
        // RFC 7692 5.1 / 7: decline a malformed offer and look at the next one.
        let Ok(offer) = read_params(&ext, true) else {
            continue;
        };
        return Some(server_accept_offer(config, &offer));
    }
    None
}

fn server_accept_offer(config: &DeflateConfig, offer: &RawParams) -> (DeflateParams, String) {
    let our_server_bits = clamp_bits(config.server_max_window_bits);
    let our_client_bits = clamp_bits(config.client_max_window_bits);
    let params = DeflateParams {
        // RFC 7692 7.1.1.1: a server MAY include server_no_context_takeover even if not offered.
        server_no_context_takeover: offer.server_no_context_takeover
            || config.server_no_context_takeover
            || pooled(config),
        client_no_context_takeover: offer.client_no_context_takeover
            || config.client_no_context_takeover,
        // RFC 7692 7.1.2.1: the response's value is the same as or smaller than the offer's.
        server_max_window_bits: offer
            .server_max_window_bits
            .map_or(our_server_bits, |v| v.min(our_server_bits)),
        // RFC 7692 7.1.2.2: only with client_max_window_bits in the offer may the server
        // limit the client's window.
        client_max_window_bits: match offer.client_max_window_bits {
            None => 15,
            Some(None) => our_client_bits,
            Some(Some(v)) => v.min(our_client_bits),
        },
    };
    let mut response = String::from(EXTENSION_NAME);
    if params.server_no_context_takeover {
        response.push_str("; ");
        response.push_str(SERVER_NO_CONTEXT_TAKEOVER);
    }
    if params.client_no_context_takeover {
        response.push_str("; ");
        response.push_str(CLIENT_NO_CONTEXT_TAKEOVER);
    }
    if params.server_max_window_bits < 15 || offer.server_max_window_bits.is_some() {
        response.push_str(&format!(
            "; {SERVER_MAX_WINDOW_BITS}={}",
            params.server_max_window_bits
        ));
    }
    let state_client_bits = match offer.client_max_window_bits {
        None => false,
        Some(None) => params.client_max_window_bits < 15,
        Some(Some(_)) => true,
    };
    if state_client_bits {
        response.push_str(&format!(
            "; {CLIENT_MAX_WINDOW_BITS}={}",
            params.client_max_window_bits
        ));
    }
    (params, response)
}

// ---------------------------------------------------------------------------------------------
// Client
// ---------------------------------------------------------------------------------------------

/// Client side: the `Sec-WebSocket-Extensions` value to offer.
///
/// Always offers `client_max_window_bits` (with the config's value when below 15, bare
/// otherwise) so the server may limit our window; asks for `client_no_context_takeover`
/// when the config does or compressors are pooled.
pub fn client_offer(config: &DeflateConfig) -> String {
    let mut offer = String::from(EXTENSION_NAME);
    if config.server_no_context_takeover {
        offer.push_str("; ");
        offer.push_str(SERVER_NO_CONTEXT_TAKEOVER);
    }
    if config.client_no_context_takeover || pooled(config) {
        offer.push_str("; ");
        offer.push_str(CLIENT_NO_CONTEXT_TAKEOVER);
    }
    let server_bits = clamp_bits(config.server_max_window_bits);
    if server_bits < 15 {
        offer.push_str(&format!("; {SERVER_MAX_WINDOW_BITS}={server_bits}"));
    }
    let client_bits = clamp_bits(config.client_max_window_bits);
    if client_bits < 15 {
        offer.push_str(&format!("; {CLIENT_MAX_WINDOW_BITS}={client_bits}"));
    } else {
        offer.push_str("; ");
        offer.push_str(CLIENT_MAX_WINDOW_BITS);
    }
    offer
}

/// Client side: validates every `Sec-WebSocket-Extensions` header value of the server's
/// response against what `config` offered. `Ok(None)` when the server declined.
///
/// Refused: unparsable values, unknown or duplicate parameters, a value on a
/// `*_no_context_takeover` flag ([`NegotiationError::Malformed`]); any extension other than
/// one permessage-deflate ([`NegotiationError::Unexpected`]); a window bits value outside
/// 8..=15, missing, or larger than offered, and a response that drops a
/// `server_no_context_takeover` we asked for ([`NegotiationError::InvalidValue`]).
pub fn client_accept(
    config: &DeflateConfig,
    header_values: &[&[u8]],
) -> Result<Option<DeflateParams>, NegotiationError> {
    let mut accepted: Option<DeflateParams> = None;
    for ext in parse_list(header_values) {
        let ext = ext.ok_or(NegotiationError::Malformed)?;
        // RFC 6455 9.1: the server may only accept extensions the client offered, and we
        // offered permessage-deflate once.
        if !is_permessage_deflate(ext.name) || accepted.is_some() {
            return Err(NegotiationError::Unexpected);
        }
        let response = read_params(&ext, false)?;
        accepted = Some(client_check_response(config, &response)?);
    }
    Ok(accepted)
}

fn client_check_response(
    config: &DeflateConfig,
    response: &RawParams,
) -> Result<DeflateParams, NegotiationError> {
    let offered_server_bits = clamp_bits(config.server_max_window_bits);
    let offered_client_bits = clamp_bits(config.client_max_window_bits);
    // RFC 7692 7.1.1.1: a server accepts server_no_context_takeover by including it.
    if config.server_no_context_takeover && !response.server_no_context_takeover {
        return Err(NegotiationError::InvalidValue);
    }
    let server_max_window_bits = match response.server_max_window_bits {
        // RFC 7692 7.1.2.1: "the same or smaller value as the offer".
        Some(v) if v > offered_server_bits => return Err(NegotiationError::InvalidValue),
        Some(v) => v,
        None => offered_server_bits,
    };
    let client_max_window_bits = match response.client_max_window_bits {
        // We always offer client_max_window_bits, so the server may state it (7.1.2.2),
        // with a value no larger than an offered one.
        Some(Some(v)) if v > offered_client_bits => return Err(NegotiationError::InvalidValue),
        Some(Some(v)) => v,
        Some(None) => return Err(NegotiationError::InvalidValue),
        None => offered_client_bits,
    };
    Ok(DeflateParams {
        server_no_context_takeover: response.server_no_context_takeover,
        // RFC 7692 7.1.1.2: the server may ask for it even if we did not; we comply.
        client_no_context_takeover: response.client_no_context_takeover
            || config.client_no_context_takeover,
        server_max_window_bits,
        client_max_window_bits,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_quoted_values_and_whitespace() {
        let list = parse_list(&[b" permessage-deflate ; client_max_window_bits = \"10\" ,, x"]);
        assert_eq!(list.len(), 2);
        let ext = list[0].as_ref().unwrap();
        assert_eq!(ext.name, b"permessage-deflate");
        assert_eq!(
            ext.params,
            vec![(&b"client_max_window_bits"[..], Some(b"10".to_vec()))]
        );
        assert_eq!(list[1].as_ref().unwrap().name, b"x");
    }

    #[test]
    fn comma_inside_quotes_does_not_split() {
        let list = parse_list(&[b"a; p=\"x,y\", b"]);
        // "x,y" is not a token once unquoted: the first element is malformed, the second fine.
        assert_eq!(list.len(), 2);
        assert!(list[0].is_none());
        assert_eq!(list[1].as_ref().unwrap().name, b"b");
    }

    #[test]
    fn unterminated_quote_is_malformed() {
        assert_eq!(parse_list(&[b"a; p=\"10"]), vec![None]);
    }

    #[test]
    fn window_bits_reject_leading_zero_and_range() {
        assert_eq!(parse_window_bits(b"8"), Some(8));
        assert_eq!(parse_window_bits(b"15"), Some(15));
        for bad in [&b"08"[..], b"7", b"16", b"", b"1", b"+9", b"9 "] {
            assert_eq!(parse_window_bits(bad), None, "{bad:?}");
        }
    }
}
