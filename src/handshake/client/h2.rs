//! The HTTP/2 form of the opening handshake (RFC 8441), client side.

use super::*;

/// The client end of a WebSocket opened over HTTP/2 (RFC 8441 4-5): lists the fields of the
/// extended CONNECT, then checks the server's answer. The HTTP/2 implementation sends the
/// request and carries the stream; this only decides what the fields say.
///
/// The request is a CONNECT with the pseudo-header fields `:protocol = websocket`,
/// `:scheme` (`https` for `wss`, `http` for `ws`), `:authority` ([`ClientRequest::host`])
/// and `:path` ([`ClientRequest::path`]), plus the regular fields
/// [`new`](Http2ClientHandshake::new) returns: `sec-websocket-version: 13`, the origin, the
/// offered subprotocols and permessage-deflate, and the request's extra headers. There is
/// no `Sec-WebSocket-Key` and no `Sec-WebSocket-Accept` in this form. RFC 8441 3: a client
/// sends it only on a connection whose server sent `SETTINGS_ENABLE_CONNECT_PROTOCOL = 1`.
///
/// ```
/// use rapidws::handshake::{ClientConfig, ClientRequest, Http2ClientHandshake};
///
/// let request = ClientRequest::new("example.com", "/chat").subprotocol("chat");
/// let (handshake, fields) = Http2ClientHandshake::new(&request, ClientConfig::default()).unwrap();
/// assert!(fields.contains(&("sec-websocket-version".to_owned(), "13".to_owned())));
/// let answer: [(&str, &[u8]); 1] = [("sec-websocket-protocol", b"chat")];
/// let upgraded = handshake.check(200, answer).unwrap();
/// assert_eq!(upgraded.subprotocol.as_deref(), Some("chat"));
/// ```
#[derive(Debug)]
pub struct Http2ClientHandshake {
    max_response_size: usize,
    max_headers: usize,
    agreed: Offer,
}

impl Http2ClientHandshake {
    /// Validates `request` and returns the handshake with the regular fields of the
    /// extended CONNECT, names in lowercase as HTTP/2 requires (RFC 9113 8.2.1), the
    /// request's extra headers ([`ClientRequest::header`]) last.
    pub fn new(
        request: &ClientRequest,
        config: ClientConfig,
    ) -> Result<(Self, Vec<(String, String)>), ClientError> {
        request.validate()?;
        let mut fields = Vec::with_capacity(4 + request.headers.len());
        // RFC 8441 5: "The HTTP/2 request MUST include a sec-websocket-version header".
        fields.push(("sec-websocket-version".to_owned(), "13".to_owned()));
        if let Some(origin) = &request.origin {
            fields.push(("origin".to_owned(), origin.clone()));
        }
        if !request.subprotocols.is_empty() {
            let list = request.subprotocols.join(", ");
            fields.push(("sec-websocket-protocol".to_owned(), list));
        }
        #[cfg(feature = "deflate")]
        if let Some(deflate) = &config.deflate {
            let offer = crate::deflate::negotiate::client_offer(deflate);
            fields.push(("sec-websocket-extensions".to_owned(), offer));
        }
        for (name, value) in &request.headers {
            fields.push((name.to_ascii_lowercase(), value.clone()));
        }
        let handshake = Http2ClientHandshake {
            max_response_size: config.max_response_size,
            max_headers: config.max_headers,
            agreed: Offer {
                subprotocols: request.subprotocols.clone(),
                #[cfg(feature = "deflate")]
                deflate: config.deflate,
            },
        };
        Ok((handshake, fields))
    }

    /// Checks the server's answer: its `status` and header fields. A 2xx status with
    /// fields within the offer gives [`Upgraded`] (its `leftover` is empty: the stream's
    /// data belongs to the codec from the first byte); any other status is
    /// [`ClientError::Status`]. The response limits of [`ClientConfig`] apply to the fields.
    pub fn check<'h, I>(&self, status: u16, headers: I) -> Result<Upgraded, ClientError>
    where
        I: IntoIterator<Item = (&'h str, &'h [u8])>,
    {
        let over = |o| match o {
            http::Over::Fields => ClientError::TooManyHeaders,
            http::Over::Size => ClientError::ResponseTooLarge,
        };
        let mut room =
            http::FieldRoom::new(self.max_headers, self.max_response_size, 0).map_err(over)?;
        let mut fields: Vec<(String, Vec<u8>)> = Vec::new();
        for (name, value) in headers {
            room.take(name, value).map_err(over)?;
            fields.push((name.to_owned(), value.to_vec()));
        }
        // RFC 8441 5 (the server "replies with a 200"); RFC 9110 9.3.6: "Any 2xx
        // (Successful) response indicates that the sender (and all inbound proxies) will
        // switch to tunnel mode".
        if !(200..300).contains(&status) {
            return Err(ClientError::Status(Box::new(ErrorResponse {
                status,
                reason: http::reason_phrase(status).to_owned(),
                headers: fields,
                body: Vec::new(),
            })));
        }
        let values = |name: &'static str| {
            fields
                .iter()
                .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_slice())
        };
        #[cfg_attr(not(feature = "deflate"), allow(unused_variables))]
        let (subprotocol, deflate) = self.agreed.check(values)?;
        Ok(Upgraded {
            status,
            subprotocol,
            #[cfg(feature = "deflate")]
            deflate,
            headers: fields,
            leftover: Vec::new(),
        })
    }
}
