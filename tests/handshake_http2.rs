//! The HTTP/2 form of the opening handshake (RFC 8441 4-5), sans-IO: an extended CONNECT's
//! fields in, a refusal or the 200 and its fields out; and the client's fields and check.
//! The same negotiation and limits as the HTTP/1.1 upgrade.

use rapidws::handshake::{
    ClientConfig, ClientError, ClientRequest, Http2ClientHandshake, Request, ServerConfig,
    ServerError,
};

type Fields = Vec<(&'static str, Vec<u8>)>;

fn fields(pairs: &[(&'static str, &str)]) -> Fields {
    pairs
        .iter()
        .map(|(n, v)| (*n, v.as_bytes().to_vec()))
        .collect()
}

/// What Chromium sends for `new WebSocket("wss://example.com/chat?room=1", ["chat"])`.
fn browser_fields() -> Fields {
    fields(&[
        ("origin", "https://example.com"),
        ("sec-websocket-version", "13"),
        ("sec-websocket-protocol", "chat, superchat"),
        (
            "sec-websocket-extensions",
            "permessage-deflate; client_max_window_bits",
        ),
        ("user-agent", "Mozilla/5.0"),
    ])
}

struct Pseudo {
    method: &'static str,
    protocol: Option<&'static str>,
    scheme: Option<&'static str>,
    authority: Option<&'static str>,
    path: &'static str,
}

const VALID: Pseudo = Pseudo {
    method: "CONNECT",
    protocol: Some("websocket"),
    scheme: Some("https"),
    authority: Some("example.com"),
    path: "/chat?room=1",
};

fn parse(p: &Pseudo, fields: &Fields, config: &ServerConfig) -> Result<Request, ServerError> {
    Request::from_http2_parts(
        p.method,
        p.protocol,
        p.scheme,
        p.authority,
        p.path,
        fields.iter().map(|(n, v)| (*n, v.as_slice())),
        config,
    )
}

#[test]
fn browser_request_is_accepted_with_200_and_no_accept_key() {
    let config = ServerConfig::default().with_subprotocols(["superchat", "chat"]);
    let request = parse(&VALID, &browser_fields(), &config).unwrap();
    assert!(request.is_http2());
    assert_eq!(request.path(), "/chat?room=1");
    assert_eq!(request.host(), b"example.com");
    assert_eq!(request.origin(), Some(&b"https://example.com"[..]));
    assert_eq!(request.key(), b"");
    let agreement = request.agreement(&config).unwrap();
    assert_eq!(agreement.status, 200);
    assert_eq!(agreement.subprotocol.as_deref(), Some("superchat"));
    assert_eq!(
        agreement.headers,
        vec![("Sec-WebSocket-Protocol", "superchat".to_owned())]
    );
    // There is no HTTP/1.1 response to write for it.
    assert!(request.accept(&config).unwrap().response.is_empty());
}

#[cfg(feature = "deflate")]
#[test]
fn permessage_deflate_is_negotiated_as_over_http1() {
    use rapidws::deflate::DeflateConfig;
    let config = ServerConfig::default().with_deflate(Some(DeflateConfig::default()));
    let request = parse(&VALID, &browser_fields(), &config).unwrap();
    let agreement = request.agreement(&config).unwrap();
    assert!(agreement.deflate.is_some());
    let (name, value) = &agreement.headers[0];
    assert_eq!(*name, "Sec-WebSocket-Extensions");
    assert!(value.starts_with("permessage-deflate"), "{value}");
    // Declined by a server without deflate: no extension field at all.
    let plain = ServerConfig::default();
    let agreement = parse(&VALID, &browser_fields(), &plain)
        .unwrap()
        .agreement(&plain)
        .unwrap();
    assert_eq!(agreement.deflate, None);
    assert!(agreement.headers.is_empty());
}

#[test]
fn origin_check_applies_to_the_http2_form() {
    let config = ServerConfig::default().with_origin_check(|o| o == Some("https://good.example"));
    let request = parse(&VALID, &browser_fields(), &config).unwrap();
    assert_eq!(request.agreement(&config), Err(ServerError::Origin));
}

#[test]
fn methods_other_than_connect_get_405_allowing_connect() {
    let get = Pseudo {
        method: "GET",
        protocol: None,
        ..VALID
    };
    let e = parse(&get, &browser_fields(), &ServerConfig::default()).unwrap_err();
    assert_eq!(e, ServerError::ConnectRequired);
    assert_eq!(e.status(), 405);
    assert_eq!(e.response_headers(), &[("Allow", "CONNECT")]);
}

#[test]
fn plain_connect_and_other_protocols_get_501() {
    let tunnel = Pseudo {
        protocol: None,
        scheme: None,
        path: "",
        ..VALID
    };
    let other = Pseudo {
        protocol: Some("webtransport"),
        ..VALID
    };
    let upper = Pseudo {
        protocol: Some("WebSocket "),
        ..VALID
    };
    for p in [tunnel, other, upper] {
        let e = parse(&p, &browser_fields(), &ServerConfig::default()).unwrap_err();
        assert_eq!(e, ServerError::ConnectProtocol);
        assert_eq!(e.status(), 501);
    }
}

#[test]
fn missing_or_invalid_scheme_path_or_authority_is_malformed() {
    let cases = [
        Pseudo {
            scheme: None,
            ..VALID
        },
        Pseudo {
            scheme: Some("ftp"),
            ..VALID
        },
        Pseudo { path: "", ..VALID },
        Pseudo {
            path: "chat",
            ..VALID
        },
        Pseudo {
            path: "/a b",
            ..VALID
        },
        Pseudo {
            authority: None,
            ..VALID
        },
        Pseudo {
            authority: Some(""),
            ..VALID
        },
        Pseudo {
            authority: Some("user@example.com"),
            ..VALID
        },
    ];
    for p in cases {
        let e = parse(&p, &browser_fields(), &ServerConfig::default()).unwrap_err();
        assert_eq!(
            e,
            ServerError::Malformed,
            "{:?} {:?} {:?}",
            p.scheme,
            p.path,
            p.authority
        );
        assert_eq!(e.status(), 400);
    }
}

#[test]
fn connection_specific_fields_are_malformed() {
    for (name, value) in [
        ("connection", "upgrade"),
        ("upgrade", "websocket"),
        ("keep-alive", "5"),
        ("proxy-connection", "keep-alive"),
        ("transfer-encoding", "chunked"),
        ("te", "gzip"),
    ] {
        let mut f = browser_fields();
        f.push((name, value.as_bytes().to_vec()));
        let e = parse(&VALID, &f, &ServerConfig::default()).unwrap_err();
        assert_eq!(e, ServerError::Malformed, "{name}");
    }
    let mut f = browser_fields();
    f.push(("te", b"trailers".to_vec()));
    assert!(parse(&VALID, &f, &ServerConfig::default()).is_ok());
}

#[test]
fn a_body_is_refused() {
    let mut f = browser_fields();
    f.push(("content-length", b"5".to_vec()));
    let e = parse(&VALID, &f, &ServerConfig::default()).unwrap_err();
    assert_eq!(e, ServerError::RequestBody);
}

#[test]
fn version_other_than_13_gets_400_naming_13_and_no_upgrade() {
    for version in [None, Some("8"), Some("13, 13")] {
        let mut f: Fields = browser_fields()
            .into_iter()
            .filter(|(n, _)| *n != "sec-websocket-version")
            .collect();
        if let Some(v) = version {
            f.push(("sec-websocket-version", v.as_bytes().to_vec()));
        }
        let e = parse(&VALID, &f, &ServerConfig::default()).unwrap_err();
        assert_eq!(e, ServerError::Http2Version);
        assert_eq!(e.status(), 400);
        assert_eq!(e.response_headers(), &[("Sec-WebSocket-Version", "13")]);
    }
    // Two fields of 13 are a repeated field, as over HTTP/1.1.
    let mut f = browser_fields();
    f.push(("sec-websocket-version", b"13".to_vec()));
    assert_eq!(
        parse(&VALID, &f, &ServerConfig::default()).unwrap_err(),
        ServerError::Http2Version
    );
}

#[test]
fn a_key_field_is_not_needed_nor_looked_at() {
    let mut f = browser_fields();
    f.push(("sec-websocket-key", b"not base64".to_vec()));
    assert!(parse(&VALID, &f, &ServerConfig::default()).is_ok());
}

#[test]
fn header_count_and_size_limits_apply_to_http2_fields() {
    let mut config = ServerConfig::default();
    config.max_headers = 6;
    let mut f = browser_fields();
    assert!(parse(&VALID, &f, &config).is_ok());
    f.push(("x-one", b"1".to_vec()));
    assert!(parse(&VALID, &f, &config).is_ok());
    f.push(("x-two", b"2".to_vec()));
    assert_eq!(
        parse(&VALID, &f, &config).unwrap_err(),
        ServerError::TooManyHeaders
    );

    let mut config = ServerConfig::default();
    config.max_request_size = 1024;
    let mut f = browser_fields();
    f.push(("cookie", "a".repeat(1000).into_bytes()));
    let e = parse(&VALID, &f, &config).unwrap_err();
    assert_eq!(e, ServerError::RequestTooLarge);
    assert_eq!(e.status(), 431);
    // The pseudo-header fields count too.
    let long_path: &'static str = Box::leak(format!("/{}", "p".repeat(1100)).into_boxed_str());
    let p = Pseudo {
        path: long_path,
        ..VALID
    };
    assert_eq!(
        parse(&p, &browser_fields(), &config).unwrap_err(),
        ServerError::RequestTooLarge
    );
}

#[test]
fn client_fields_carry_version_origin_offers_and_extra_headers() {
    let request = ClientRequest::new("example.com", "/chat")
        .origin("https://example.com")
        .subprotocol("chat")
        .subprotocol("superchat")
        .header("Authorization", "Bearer x");
    let (_, f) = Http2ClientHandshake::new(&request, ClientConfig::default()).unwrap();
    let f: Vec<(&str, &str)> = f.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    assert_eq!(
        f,
        vec![
            ("sec-websocket-version", "13"),
            ("origin", "https://example.com"),
            ("sec-websocket-protocol", "chat, superchat"),
            ("authorization", "Bearer x"),
        ]
    );
    // Reserved names are refused as over HTTP/1.1.
    let bad = ClientRequest::new("example.com", "/").header("Sec-WebSocket-Key", "x");
    assert!(matches!(
        Http2ClientHandshake::new(&bad, ClientConfig::default()),
        Err(ClientError::InvalidRequest(_))
    ));
}

#[test]
fn client_check_refuses_what_was_not_offered_and_non_2xx() {
    let request = ClientRequest::new("example.com", "/").subprotocol("chat");
    let (hs, _) = Http2ClientHandshake::new(&request, ClientConfig::default()).unwrap();
    let ok: [(&str, &[u8]); 0] = [];
    assert_eq!(hs.check(200, ok).unwrap().subprotocol, None);
    let other: [(&str, &[u8]); 1] = [("sec-websocket-protocol", b"superchat")];
    assert_eq!(hs.check(200, other).unwrap_err(), ClientError::Subprotocol);
    let ext: [(&str, &[u8]); 1] = [("sec-websocket-extensions", b"permessage-deflate")];
    assert_eq!(hs.check(200, ext).unwrap_err(), ClientError::Extension);
    let refused: [(&str, &[u8]); 1] = [("content-type", b"text/plain")];
    match hs.check(501, refused).unwrap_err() {
        ClientError::Status(r) => {
            assert_eq!(r.status, 501);
            assert_eq!(r.header("content-type"), Some(&b"text/plain"[..]));
        }
        e => panic!("expected a status error, got {e:?}"),
    }
    let mut config = ClientConfig::default();
    config.max_headers = 1;
    let (hs, _) = Http2ClientHandshake::new(&request, config).unwrap();
    let two: [(&str, &[u8]); 2] = [("a", b"1"), ("b", b"2")];
    assert_eq!(hs.check(200, two).unwrap_err(), ClientError::TooManyHeaders);
}

#[cfg(feature = "deflate")]
#[test]
fn client_and_server_agree_on_deflate_through_fields() {
    use rapidws::deflate::DeflateConfig;
    let request = ClientRequest::new("example.com", "/");
    let client = ClientConfig::default().with_deflate(Some(DeflateConfig::default()));
    let (hs, f) = Http2ClientHandshake::new(&request, client).unwrap();
    let server = ServerConfig::default().with_deflate(Some(DeflateConfig::default()));
    let agreement = Request::from_http2_parts(
        "CONNECT",
        Some("websocket"),
        Some("https"),
        Some("example.com"),
        "/",
        f.iter().map(|(n, v)| (n.as_str(), v.as_bytes())),
        &server,
    )
    .unwrap()
    .agreement(&server)
    .unwrap();
    let answer = agreement.headers.iter().map(|(n, v)| (*n, v.as_bytes()));
    let upgraded = hs.check(agreement.status, answer).unwrap();
    assert_eq!(upgraded.deflate, agreement.deflate);
    assert!(upgraded.deflate.is_some());
}

mod arbitrary {
    use proptest::prelude::*;
    use rapidws::handshake::{Request, ServerConfig};

    fn pseudo() -> impl Strategy<Value = Option<String>> {
        prop_oneof![
            Just(None),
            Just(Some("websocket".to_owned())),
            Just(Some("https".to_owned())),
            Just(Some("/".to_owned())),
            "\\PC{0,40}".prop_map(Some),
            proptest::collection::vec(any::<u8>(), 0..40)
                .prop_map(|b| Some(String::from_utf8_lossy(&b).into_owned())),
        ]
    }

    proptest! {
        /// Whatever an HTTP/2 implementation hands over, the handshake answers with an
        /// acceptance (a 200) or a refusal with one of its statuses, never a panic.
        #[test]
        fn any_http2_request_gets_200_or_a_fitting_refusal(
            method in prop_oneof![Just("CONNECT".to_owned()), "[A-Za-z]{0,8}"],
            protocol in pseudo(),
            scheme in pseudo(),
            authority in pseudo(),
            path in pseudo(),
            fields in proptest::collection::vec(
                (
                    prop_oneof![
                        Just("sec-websocket-version".to_owned()),
                        Just("sec-websocket-protocol".to_owned()),
                        Just("sec-websocket-extensions".to_owned()),
                        Just("origin".to_owned()),
                        Just("content-length".to_owned()),
                        Just("te".to_owned()),
                        "[a-z-]{1,12}",
                    ],
                    proptest::collection::vec(any::<u8>(), 0..64),
                ),
                0..12,
            ),
            max_headers in 0usize..16,
            max_request_size in 0usize..512,
        ) {
            let mut config = ServerConfig::default().with_subprotocols(["chat"]);
            config.max_headers = max_headers;
            config.max_request_size = max_request_size;
            #[cfg(feature = "deflate")]
            let config = config.with_deflate(Some(rapidws::deflate::DeflateConfig::default()));
            let result = Request::from_http2_parts(
                &method,
                protocol.as_deref(),
                scheme.as_deref(),
                authority.as_deref(),
                path.as_deref().unwrap_or_default(),
                fields.iter().map(|(n, v)| (n.as_str(), v.as_slice())),
                &config,
            );
            match result {
                Ok(request) => {
                    prop_assert!(request.is_http2());
                    match request.agreement(&config) {
                        Ok(agreement) => prop_assert_eq!(agreement.status, 200),
                        Err(e) => prop_assert!([403, 500].contains(&e.status()), "{e:?}"),
                    }
                }
                Err(e) => prop_assert!([400, 405, 431, 501].contains(&e.status()), "{e:?}"),
            }
        }
    }
}
