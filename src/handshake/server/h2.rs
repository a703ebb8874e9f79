//! The HTTP/2 form of the upgrade request (RFC 8441): an extended CONNECT that another
//! implementation (hyper, h2) decoded, checked against the same limits as HTTP/1.1.

use super::{Request, ServerConfig, ServerError, collect_fields};

impl Request {
    /// Validates an HTTP/2 request another implementation (hyper, h2) has decoded as a
    /// WebSocket opening: an extended CONNECT (RFC 8441 4-5). The pseudo-header fields come
    /// separately: `method` (`:method`), `protocol` (`:protocol`, `None` when absent),
    /// `scheme`, `authority` and `path`; `headers` are the regular fields in order.
    ///
    /// Checked, in order: the method (anything but CONNECT:
    /// [`ServerError::ConnectRequired`], 405), `:protocol` (missing or not `websocket`:
    /// [`ServerError::ConnectProtocol`], 501), the limits ([`ServerConfig::max_headers`]
    /// over the regular fields, [`ServerConfig::max_request_size`] over pseudo and regular
    /// fields alike, as for HTTP/1.1), `:scheme`, `:path` and `:authority` and the fields
    /// HTTP/2 forbids
    /// ([`ServerError::Malformed`], 400), no body, then `sec-websocket-version: 13`
    /// ([`ServerError::Http2Version`], 400). There is no `Sec-WebSocket-Key` in this form
    /// (RFC 8441 5), so none is looked at. The same [`accept`](Request::accept) or
    /// [`agreement`](Request::agreement) follows, with the same origin check, subprotocol
    /// and permessage-deflate negotiation; the answer is a 200 instead of a 101.
    ///
    /// ```
    /// use rapidws::handshake::{Request, ServerConfig, ServerError};
    ///
    /// let config = ServerConfig::default().with_subprotocols(["chat"]);
    /// let headers: [(&str, &[u8]); 2] = [
    ///     ("sec-websocket-version", b"13"),
    ///     ("sec-websocket-protocol", b"chat"),
    /// ];
    /// let request = Request::from_http2_parts(
    ///     "CONNECT", Some("websocket"), Some("https"), Some("example.com"), "/chat", headers,
    ///     &config,
    /// )
    /// .unwrap();
    /// assert!(request.is_http2());
    /// let agreement = request.agreement(&config).unwrap();
    /// assert_eq!(agreement.status, 200);
    /// assert_eq!(agreement.subprotocol.as_deref(), Some("chat"));
    ///
    /// let tunnel = Request::from_http2_parts(
    ///     "CONNECT", None, None, Some("example.com:443"), "", [], &config,
    /// );
    /// assert_eq!(tunnel, Err(ServerError::ConnectProtocol));
    /// ```
    pub fn from_http2_parts<'h, I>(
        method: &str,
        protocol: Option<&str>,
        scheme: Option<&str>,
        authority: Option<&str>,
        path: &str,
        headers: I,
        config: &ServerConfig,
    ) -> Result<Self, ServerError>
    where
        I: IntoIterator<Item = (&'h str, &'h [u8])>,
    {
        // RFC 8441 4: "A new pseudo-header field :protocol MAY be included on request
        // HEADERS indicating the desired protocol to be spoken on the tunnel created by
        // CONNECT." 5: ":method = CONNECT", ":protocol = websocket".
        if method != "CONNECT" {
            return Err(ServerError::ConnectRequired);
        }
        if protocol != Some("websocket") {
            return Err(ServerError::ConnectProtocol);
        }
        let pseudo = [protocol, scheme, authority].map(Option::unwrap_or_default);
        let size = method.len() + path.len() + pseudo.iter().map(|p| p.len()).sum::<usize>();
        let mut head = Vec::with_capacity(256);
        head.extend_from_slice(path.as_bytes());
        let path_range = 0..head.len();
        let start = head.len();
        head.extend_from_slice(authority.unwrap_or_default().as_bytes());
        let authority_range = start..head.len();
        let headers = collect_fields(&mut head, size, headers, config)?;
        // RFC 8441 4: "On requests that contain the :protocol pseudo-header field, the
        // :scheme and :path pseudo-header fields of the target URI MUST also be included."
        // 5: ":authority" is the host of the target.
        let valid_scheme = matches!(scheme, Some(s) if s.eq_ignore_ascii_case("https")
            || s.eq_ignore_ascii_case("http"));
        let valid_path = path.starts_with('/') && path.bytes().all(|b| (b'!'..=b'~').contains(&b));
        let valid_authority = matches!(authority, Some(a) if !a.is_empty()
            && a.bytes().all(|b| (b'!'..=b'~').contains(&b)) && !a.contains(['/', '?', '#', '@']));
        if !valid_scheme || !valid_path || !valid_authority {
            return Err(ServerError::Malformed);
        }
        let request = Request {
            path: path_range,
            headers,
            key: 0..0,
            authority: Some(authority_range),
            leftover: Vec::new(),
            head,
        };
        request.validate_http2()?;
        Ok(request)
    }

    /// RFC 8441 5 and RFC 9113 8.2.2 on the regular fields of an extended CONNECT.
    fn validate_http2(&self) -> Result<(), ServerError> {
        // RFC 9113 8.2.2: "An endpoint MUST NOT generate an HTTP/2 message containing
        // connection-specific header fields ... Any message containing connection-specific
        // header fields MUST be treated as malformed." (Also what RFC 6455 upgrades need:
        // Upgrade and Connection do not exist here.)
        const CONNECTION_SPECIFIC: [&str; 5] = [
            "connection",
            "upgrade",
            "keep-alive",
            "proxy-connection",
            "transfer-encoding",
        ];
        if CONNECTION_SPECIFIC
            .iter()
            .any(|name| self.header_values(name).next().is_some())
            || self
                .header_values("te")
                .any(|v| v.trim_ascii() != b"trailers")
        {
            return Err(ServerError::Malformed);
        }
        if self
            .header_values("content-length")
            .any(|v| v.trim_ascii() != b"0")
        {
            return Err(ServerError::RequestBody);
        }
        // RFC 8441 5: "The HTTP/2 request MUST include a sec-websocket-version header with
        // the value 13" (as RFC 6455 4.1 item 9 asks of HTTP/1.1).
        let mut versions = self.header_values("sec-websocket-version");
        match (versions.next(), versions.next()) {
            (Some(v), None) if v.trim_ascii() == b"13" => Ok(()),
            _ => Err(ServerError::Http2Version),
        }
    }

    /// Whether this request came over HTTP/2 as an extended CONNECT (RFC 8441): it is
    /// answered with 200 and no `Sec-WebSocket-Accept`, and its [`key`](Request::key) is
    /// empty.
    pub fn is_http2(&self) -> bool {
        self.authority.is_some()
    }
}
