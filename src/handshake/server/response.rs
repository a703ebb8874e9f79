//! Answering an upgrade request: accepting it (the 101, or the fields of HTTP/2's 200),
//! or refusing it.

use super::super::http;
use super::super::{Negotiated, accept_key};
use super::{Request, ServerConfig, ServerError, check_headers, write_refusal};

#[cfg(feature = "deflate")]
use crate::deflate::DeflateParams;

impl Request {
    /// Accepts the upgrade: runs the origin check, selects a subprotocol, negotiates
    /// extensions and writes the 101 response.
    ///
    /// An HTTP/2 request ([`is_http2`](Request::is_http2)) has no HTTP/1.1 response: its
    /// [`Accepted::response`] is empty. Answer it through the HTTP/2 implementation with
    /// the status and fields of [`agreement`](Request::agreement).
    pub fn accept(self, config: &ServerConfig) -> Result<Accepted, ServerError> {
        self.accept_with_headers(config, &[])
    }

    /// [`accept`](Request::accept), adding `headers` (for example `Set-Cookie`) to the
    /// 101 response. Headers the handshake writes itself are refused with
    /// [`ServerError::ResponseHeader`], as are invalid names and values.
    pub fn accept_with_headers(
        self,
        config: &ServerConfig,
        headers: &[(&str, &str)],
    ) -> Result<Accepted, ServerError> {
        check_headers(
            headers,
            &[
                "upgrade",
                "connection",
                "sec-websocket-accept",
                "sec-websocket-protocol",
                "sec-websocket-extensions",
                "content-length",
                "transfer-encoding",
            ],
        )?;
        let agreement = self.agreement(config)?;

        let mut response = Vec::new();
        if !self.is_http2() {
            response.reserve(160);
            http::put_status_line(&mut response, agreement.status);
            for (name, value) in &agreement.headers {
                http::put_header(&mut response, name, value.as_bytes());
            }
            for (name, value) in headers {
                http::put_header(&mut response, name, value.as_bytes());
            }
            response.extend_from_slice(b"\r\n");
        }

        Ok(Accepted {
            response,
            subprotocol: agreement.subprotocol,
            #[cfg(feature = "deflate")]
            deflate: agreement.deflate,
            leftover: self.leftover,
        })
    }

    /// Everything accepting decides, as a status and response fields for an HTTP server
    /// that writes its own responses (hyper, an HTTP/2 implementation): runs the origin
    /// check, selects a subprotocol and negotiates extensions. An HTTP/1.1 request gets
    /// 101 with `Upgrade`, `Connection` and `Sec-WebSocket-Accept`; an HTTP/2 request
    /// (RFC 8441 5) gets 200 with only the negotiated `Sec-WebSocket-Protocol` and
    /// `Sec-WebSocket-Extensions`. [`accept`](Request::accept) writes the same as bytes.
    pub fn agreement(&self, config: &ServerConfig) -> Result<Agreement, ServerError> {
        if let Some(check) = &config.origin_check {
            let mut origins = self.header_values("origin");
            let origin = match (origins.next(), origins.next()) {
                (None, _) => None,
                (Some(o), None) => {
                    Some(core::str::from_utf8(o.trim_ascii()).map_err(|_| ServerError::Origin)?)
                }
                (Some(_), Some(_)) => return Err(ServerError::Origin),
            };
            if !check(origin) {
                return Err(ServerError::Origin);
            }
        }
        // RFC 6455 4.2.2: the server selects "one or none of the acceptable protocols" from
        // the client's list and echoes it in |Sec-WebSocket-Protocol|.
        let subprotocol = config
            .subprotocols
            .iter()
            .find(|ours| self.subprotocols().any(|theirs| theirs == ours.as_str()))
            .cloned();

        #[cfg(feature = "deflate")]
        let negotiated = match &config.deflate {
            Some(deflate) => {
                let offers: Vec<&[u8]> = self.header_values("sec-websocket-extensions").collect();
                if offers.is_empty() {
                    None
                } else {
                    crate::deflate::negotiate::server_negotiate(deflate, &offers)
                }
            }
            None => None,
        };

        let mut headers = Vec::with_capacity(5);
        let status = if self.is_http2() {
            // RFC 8441 5: "the server replies with a 200 status code"; the key and accept
            // fields are not used.
            200
        } else {
            headers.push(("Upgrade", "websocket".to_owned()));
            headers.push(("Connection", "Upgrade".to_owned()));
            headers.push(("Sec-WebSocket-Accept", accept_key(self.key())));
            101
        };
        if let Some(p) = &subprotocol {
            headers.push(("Sec-WebSocket-Protocol", p.clone()));
        }
        #[cfg(feature = "deflate")]
        let deflate = negotiated.map(|(params, value)| {
            headers.push(("Sec-WebSocket-Extensions", value));
            params
        });
        Ok(Agreement {
            status,
            headers,
            subprotocol,
            #[cfg(feature = "deflate")]
            deflate,
        })
    }

    /// A complete response refusing this request with `status` (for example 401 or 404
    /// after routing or authentication), `headers` and a plain-text `body`.
    /// A status outside 300..=599 becomes 500, as do invalid headers.
    pub fn reject(&self, status: u16, headers: &[(&str, &str)], body: &str) -> Vec<u8> {
        let reserved = [
            "connection",
            "content-length",
            "content-type",
            "transfer-encoding",
        ];
        match check_headers(headers, &reserved) {
            Ok(()) if (300..=599).contains(&status) => {
                write_refusal(status, headers, body.as_bytes())
            }
            _ => write_refusal(500, &[], b"internal server error"),
        }
    }
}

/// An application's refusal of an upgrade request (after routing or authentication).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reject {
    /// The HTTP status to answer with, 300..=599 (anything else becomes 500).
    pub status: u16,
    /// A plain-text body.
    pub body: String,
}

impl Reject {
    /// A refusal with `status` and `body`.
    pub fn new(status: u16, body: impl Into<String>) -> Self {
        Reject {
            status,
            body: body.into(),
        }
    }
}

/// What an accept hook (`tokio::accept_with`, `blocking::accept_with`) adds to the `101 Switching Protocols` response
/// when it accepts: `()` for nothing, or header fields (`Set-Cookie`, say) as a `Vec` of
/// name and value pairs. Fields the handshake writes itself (`Upgrade`, `Connection`,
/// `Sec-WebSocket-*`) and invalid names or values are refused with a 500.
pub trait ResponseHeaders {
    /// The fields, in order.
    fn into_fields(self) -> Vec<(String, String)>;
}

impl ResponseHeaders for () {
    fn into_fields(self) -> Vec<(String, String)> {
        Vec::new()
    }
}

impl<N: Into<String>, V: Into<String>> ResponseHeaders for Vec<(N, V)> {
    fn into_fields(self) -> Vec<(String, String)> {
        self.into_iter()
            .map(|(n, v)| (n.into(), v.into()))
            .collect()
    }
}

/// What accepting a request decided ([`Request::agreement`]), before it is written out:
/// the response's status and fields, and what the connection runs with.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Agreement {
    /// 101 for an HTTP/1.1 upgrade, 200 for an HTTP/2 extended CONNECT.
    pub status: u16,
    /// The response's header fields, in order, names as RFC 6455 spells them (HTTP/2
    /// implementations lowercase them).
    pub headers: Vec<(&'static str, String)>,
    /// The selected subprotocol, if any.
    pub subprotocol: Option<String>,
    /// The agreed permessage-deflate parameters, if the extension was negotiated.
    #[cfg(feature = "deflate")]
    pub deflate: Option<DeflateParams>,
}

/// A handshake the server accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Accepted {
    /// The 101 response to send.
    pub response: Vec<u8>,
    /// The selected subprotocol, if any.
    pub subprotocol: Option<String>,
    /// The agreed permessage-deflate parameters, if the extension was negotiated.
    #[cfg(feature = "deflate")]
    pub deflate: Option<DeflateParams>,
    /// Bytes that arrived after the request head: the first frames, for the codec.
    pub leftover: Vec<u8>,
}

impl Accepted {
    /// What this handshake agreed, with this end's deflate settings from `config` (the
    /// configuration it was accepted with), for `tokio::from_handshake`.
    pub fn negotiated(&self, config: &ServerConfig) -> Negotiated {
        let _ = config;
        Negotiated {
            subprotocol: self.subprotocol.clone(),
            #[cfg(feature = "deflate")]
            deflate: self.deflate.zip(config.deflate.clone()),
        }
    }
}

/// Why [`Request::decide`] refused a request, with the HTTP answer to write first.
#[cfg_attr(not(any(feature = "tokio", feature = "blocking")), allow(dead_code))]
pub(crate) struct Refusal {
    /// The complete refusal to send.
    pub(crate) response: Vec<u8>,
    /// What the IO layer reports.
    pub(crate) reason: Refused,
}

/// The two ways a parsed request is refused.
#[cfg_attr(not(any(feature = "tokio", feature = "blocking")), allow(dead_code))]
pub(crate) enum Refused {
    /// The application's hook refused it with this status.
    Rejected(u16),
    /// The request (or the headers the hook added) failed the checks.
    Invalid(ServerError),
}

impl Request {
    /// Runs the application's `check` on the request, then accepts it with the response
    /// headers `check` returned: what both IO layers do between reading the head and
    /// writing the answer.
    #[cfg_attr(not(any(feature = "tokio", feature = "blocking")), allow(dead_code))]
    pub(crate) fn decide<F, H>(self, config: &ServerConfig, check: F) -> Result<Accepted, Refusal>
    where
        F: FnOnce(&Request) -> Result<H, Reject>,
        H: ResponseHeaders,
    {
        let fields = match check(&self) {
            Ok(headers) => headers.into_fields(),
            Err(reject) => {
                return Err(Refusal {
                    response: self.reject(reject.status, &[], &reject.body),
                    reason: Refused::Rejected(reject.status),
                });
            }
        };
        let fields: Vec<(&str, &str)> = fields
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        self.accept_with_headers(config, &fields)
            .map_err(|e| Refusal {
                response: e.response(),
                reason: Refused::Invalid(e),
            })
    }
}
