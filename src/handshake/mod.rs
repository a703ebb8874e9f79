//! The opening handshake, sans-IO: the HTTP/1.1 upgrade of RFC 6455 section 4 (bytes in,
//! request or response out) and the HTTP/2 extended CONNECT of RFC 8441 (fields in, fields
//! out; the HTTP/2 framing is the HTTP/2 implementation's).
//!
//! Server: [`ServerHandshake::feed`] the bytes read from the socket until it returns a
//! [`Request`]; inspect it (path, headers, origin) to route and authenticate, then
//! [`Request::accept`] it (send [`Accepted::response`]) or [`Request::reject`] it. A
//! [`ServerError`] carries the refusal to send in [`ServerError::response`].
//!
//! Client: [`ClientHandshake::new`] returns the request bytes to send; [`ClientHandshake::feed`]
//! the response bytes until it returns [`Upgraded`]. A status other than 101 comes back as
//! [`ClientError::Status`] with the response.
//!
//! Over HTTP/2 (RFC 8441): a server hands the decoded request's pseudo-header and regular
//! fields to [`Request::from_http2_parts`] and answers with the 200 and fields of
//! [`Request::agreement`]; a client sends the fields [`Http2ClientHandshake::new`] lists on
//! an extended CONNECT and checks the answer with [`Http2ClientHandshake::check`]. The
//! subprotocol, origin and permessage-deflate rules and the limits are the same in both
//! forms.
//!
//! Both ends buffer at most a configured number of bytes for the head and look at each byte
//! once when searching for its end, and hand back any bytes that followed the head (the
//! first frames) for the codec.

/// `is_deflate` for an agreement whose field `deflate` (feature `deflate`) holds what was
/// agreed: [`Negotiated`] and the client's [`Response`].
macro_rules! deflate_agreed {
    () => {
        /// Whether permessage-deflate was agreed (never without feature `deflate`).
        pub fn is_deflate(&self) -> bool {
            #[cfg(feature = "deflate")]
            let agreed = self.deflate.is_some();
            #[cfg(not(feature = "deflate"))]
            let agreed = false;
            agreed
        }
    };
}

mod client;
mod http;
mod server;

pub use client::{
    ClientConfig, ClientError, ClientHandshake, ClientRequest, ErrorResponse, Http2ClientHandshake,
    Response, Upgraded,
};
pub(crate) use server::Refused;
pub use server::{
    Accepted, Agreement, OriginCheck, Reject, Request, ResponseHeaders, ServerConfig, ServerError,
    ServerHandshake, is_valid_key,
};

use base64::Engine as _;
use sha1::{Digest as _, Sha1};

/// What an opening handshake agreed, for opening a connection over a handshake that ran
/// elsewhere (your own HTTP server or proxy): the subprotocol, and the permessage-deflate
/// parameters with this end's deflate settings. The tokio layer opens one with
/// `tokio::from_handshake`, the blocking layer with `blocking::from_handshake`.
///
/// From this crate's own handshake, [`Upgraded::negotiated`] and
/// [`Accepted::negotiated`] give it.
#[derive(Clone, Debug, Default)]
pub struct Negotiated {
    pub(crate) subprotocol: Option<String>,
    #[cfg(feature = "deflate")]
    pub(crate) deflate: Option<(crate::deflate::DeflateParams, crate::deflate::DeflateConfig)>,
}

impl Negotiated {
    /// Nothing agreed: no subprotocol, no extension.
    pub fn new() -> Self {
        Negotiated::default()
    }

    /// The subprotocol the handshake selected.
    pub fn with_subprotocol(mut self, protocol: impl Into<String>) -> Self {
        self.subprotocol = Some(protocol.into());
        self
    }

    /// permessage-deflate with the agreed `params` (as the `Sec-WebSocket-Extensions`
    /// response said) and this end's `settings` (compression level, thresholds, limits).
    #[cfg(feature = "deflate")]
    pub fn with_deflate(
        mut self,
        params: crate::deflate::DeflateParams,
        settings: crate::deflate::DeflateConfig,
    ) -> Self {
        self.deflate = Some((params, settings));
        self
    }

    /// The subprotocol, if any.
    pub fn subprotocol(&self) -> Option<&str> {
        self.subprotocol.as_deref()
    }

    /// The agreed permessage-deflate parameters, if any.
    #[cfg(feature = "deflate")]
    pub fn deflate(&self) -> Option<&crate::deflate::DeflateParams> {
        self.deflate.as_ref().map(|(params, _)| params)
    }

    deflate_agreed!();

    /// The core connection for `role` with these agreements.
    #[cfg(feature = "tokio")]
    pub(crate) fn open(
        &self,
        role: crate::codec::Role,
        config: std::sync::Arc<crate::connection::Config>,
        now: std::time::Instant,
    ) -> crate::connection::Connection {
        crate::connection::Connection::open(
            role,
            config,
            now,
            #[cfg(feature = "deflate")]
            self.deflate
                .as_ref()
                .map(|(params, settings)| (*params, settings)),
        )
    }
}

/// Default limit on the size of a request or response head: 16 KiB.
pub const DEFAULT_MAX_HEAD_SIZE: usize = 16 * 1024;

/// Default limit on the number of header fields in a head.
pub const DEFAULT_MAX_HEADERS: usize = 100;

/// RFC 6455 1.3: the GUID appended to the key before hashing.
const GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// The `Sec-WebSocket-Accept` value for a `Sec-WebSocket-Key` (RFC 6455 4.2.2 item 5.4):
/// base64 of the SHA-1 of the key (surrounding whitespace removed) followed by the GUID.
///
/// ```
/// assert_eq!(
///     rapidws::handshake::accept_key(b"dGhlIHNhbXBsZSBub25jZQ=="),
///     "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=",
/// );
/// ```
pub fn accept_key(key: &[u8]) -> String {
    let mut sha1 = Sha1::new();
    sha1.update(key.trim_ascii());
    sha1.update(GUID);
    base64::engine::general_purpose::STANDARD.encode(sha1.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_key_matches_the_rfc_6455_example() {
        assert_eq!(
            accept_key(b"dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }
}
