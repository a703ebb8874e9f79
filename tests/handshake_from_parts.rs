//! `Request::from_parts` (a request another HTTP server parsed) must decide exactly as
//! `ServerHandshake::feed` (the same request as bytes): same refusal, or same acceptance.

use rapidws::handshake::{Request, ServerConfig, ServerError, ServerHandshake};

/// A request head from its lines.
fn head(lines: &[&str]) -> Vec<u8> {
    let mut out = lines.join("\r\n");
    out.push_str("\r\n\r\n");
    out.into_bytes()
}

const VALID: &[&str] = &[
    "GET /chat?room=1 HTTP/1.1",
    "Host: server.example.com",
    "Upgrade: websocket",
    "Connection: keep-alive, Upgrade",
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
    "Origin: http://example.com",
    "Sec-WebSocket-Protocol: chat, superchat",
    "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits",
    "Sec-WebSocket-Version: 13",
];

/// `VALID` with line `i` replaced by `line` (or removed when `line` is empty).
fn variant(i: usize, line: &str) -> Vec<String> {
    let mut lines: Vec<String> = VALID.iter().map(|l| l.to_string()).collect();
    if line.is_empty() {
        lines.remove(i);
    } else {
        lines[i] = line.to_owned();
    }
    lines
}

/// Parses `bytes` with httparse, as an HTTP server would, and validates the parts.
fn via_parts(bytes: &[u8], config: &ServerConfig) -> Result<Request, ServerError> {
    let mut slots = [httparse::EMPTY_HEADER; 64];
    let mut parsed = httparse::Request::new(&mut slots);
    assert!(parsed.parse(bytes).unwrap().is_complete());
    let headers = parsed.headers.iter().map(|h| (h.name, h.value));
    Request::from_parts(
        parsed.method.unwrap(),
        (1, parsed.version.unwrap()),
        parsed.path.unwrap(),
        headers,
        config,
    )
}

fn via_bytes(bytes: &[u8], config: &ServerConfig) -> Result<Request, ServerError> {
    Ok(ServerHandshake::new(config)
        .feed(bytes)?
        .expect("complete head"))
}

fn assert_same_decision(lines: &[String], config: &ServerConfig) {
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let bytes = head(&lines);
    let (a, b) = (via_bytes(&bytes, config), via_parts(&bytes, config));
    match (a, b) {
        (Err(a), Err(b)) => assert_eq!(a, b, "{lines:?}"),
        (Ok(a), Ok(b)) => {
            assert_eq!(a.path(), b.path());
            assert!(a.headers().eq(b.headers()), "{lines:?}");
            assert_eq!(a.key(), b.key());
            assert_eq!(a.accept(config), b.accept(config), "{lines:?}");
        }
        (a, b) => panic!("bytes gave {a:?}, parts gave {b:?} for {lines:?}"),
    }
}

fn configs() -> Vec<ServerConfig> {
    let plain = ServerConfig::default();
    let rich = ServerConfig::default()
        .with_subprotocols(["superchat", "chat"])
        .with_origin_check(|o| o == Some("http://example.com"));
    #[cfg(feature = "deflate")]
    let rich = rich.with_deflate(Some(rapidws::deflate::DeflateConfig::default()));
    vec![plain, rich]
}

#[test]
fn from_parts_accepts_what_feed_accepts_with_the_same_response() {
    for config in configs() {
        let lines: Vec<String> = VALID.iter().map(|l| l.to_string()).collect();
        assert!(via_parts(&head(VALID), &config).is_ok());
        assert_same_decision(&lines, &config);
    }
}

#[test]
fn from_parts_refuses_what_feed_refuses_with_the_same_error() {
    let cases: &[(usize, &str)] = &[
        (0, "POST /chat HTTP/1.1"),
        (0, "GET /chat HTTP/1.0"),
        (1, ""),
        (2, ""),
        (2, "Upgrade: h2c"),
        (3, "Connection: keep-alive"),
        (4, ""),
        (4, "Sec-WebSocket-Key: c2hvcnQ="),
        (5, "Origin: http://evil.example"),
        (8, "Sec-WebSocket-Version: 8"),
        (8, ""),
        (5, "Content-Length: 5"),
        (5, "Transfer-Encoding: chunked"),
        (5, "Host: second.example.com"),
        (5, "Sec-WebSocket-Version: 13"),
    ];
    for config in configs() {
        for (i, line) in cases {
            let lines = variant(*i, line);
            assert_same_decision(&lines, &config);
            let bytes = head(&lines.iter().map(String::as_str).collect::<Vec<_>>());
            let refused = via_parts(&bytes, &config).and_then(|r| r.accept(&config).map(|_| ()));
            // Without an origin check every origin is allowed.
            let origin_allowed = config.origin_check.is_none() && line.starts_with("Origin");
            assert_eq!(refused.is_err(), !origin_allowed, "{lines:?}");
        }
    }
}

#[test]
fn from_parts_refuses_other_http_versions() {
    let config = ServerConfig::default();
    let headers: Vec<(&str, &[u8])> = VALID[1..]
        .iter()
        .map(|l| {
            let (n, v) = l.split_once(": ").unwrap();
            (n, v.as_bytes())
        })
        .collect();
    for version in [(1, 0), (2, 0), (3, 0), (0, 9)] {
        let r = Request::from_parts("GET", version, "/", headers.iter().copied(), &config);
        assert_eq!(r, Err(ServerError::HttpVersion), "{version:?}");
    }
    let r = Request::from_parts("GET", (1, 1), "/", headers.iter().copied(), &config);
    assert!(r.is_ok());
}

#[test]
fn from_parts_applies_the_header_count_and_size_limits() {
    let mut config = ServerConfig::default();
    config.max_headers = VALID.len() - 2;
    let lines: Vec<String> = VALID.iter().map(|l| l.to_string()).collect();
    assert_same_decision(&lines, &config);
    assert_eq!(
        via_parts(&head(VALID), &config).err(),
        Some(ServerError::TooManyHeaders)
    );

    let config = ServerConfig::default();
    let big = format!("X-Filler: {}", "a".repeat(config.max_request_size));
    let bytes = head(&[VALID, &[big.as_str()]].concat());
    assert_eq!(
        via_parts(&bytes, &config).err(),
        Some(ServerError::RequestTooLarge)
    );
}
