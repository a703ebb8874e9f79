//! The opening handshake through the public API: valid requests, every refusal with its
//! status, subprotocols, limits, chunking invariance and client/server round trips.

use proptest::prelude::*;
use rapidws::handshake::{
    Accepted, ClientConfig, ClientError, ClientHandshake, ClientRequest, Request, ServerConfig,
    ServerError, ServerHandshake, accept_key,
};

const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";
const ACCEPT: &str = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

/// The RFC 6455 1.2 example request.
fn rfc_request() -> Vec<u8> {
    request_with(&[
        "GET /chat HTTP/1.1",
        "Host: server.example.com",
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "Origin: http://example.com",
        "Sec-WebSocket-Protocol: chat, superchat",
        "Sec-WebSocket-Version: 13",
    ])
}

fn request_with(lines: &[&str]) -> Vec<u8> {
    let mut out = String::new();
    for line in lines {
        out.push_str(line);
        out.push_str("\r\n");
    }
    out.push_str("\r\n");
    out.into_bytes()
}

/// A minimal valid request with `replace` substituted for the line starting with the
/// same header name (or the request line), `None` removing it.
fn minimal_with(name: &str, replacement: Option<&str>) -> Vec<u8> {
    let base = [
        "GET / HTTP/1.1",
        "Host: localhost",
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version: 13",
    ];
    let lines: Vec<&str> = base
        .iter()
        .filter_map(|l| {
            if l.starts_with(name) {
                replacement
            } else {
                Some(*l)
            }
        })
        .collect();
    request_with(&lines)
}

/// The minimal valid request.
fn minimal() -> Vec<u8> {
    minimal_with("\0", None)
}

fn parse(config: &ServerConfig, bytes: &[u8]) -> Result<Option<Request>, ServerError> {
    ServerHandshake::new(config).feed(bytes)
}

fn accept(config: &ServerConfig, bytes: &[u8]) -> Result<Accepted, ServerError> {
    parse(config, bytes)?
        .expect("complete request")
        .accept(config)
}

fn refusal_status(config: &ServerConfig, bytes: &[u8]) -> u16 {
    let err = accept(config, bytes).expect_err("request must be refused");
    let response = err.response();
    let status_line = format!("HTTP/1.1 {} ", err.status());
    assert!(response.starts_with(status_line.as_bytes()), "{err:?}");
    err.status()
}

fn response_header<'a>(response: &'a [u8], name: &str) -> Option<&'a str> {
    let text = std::str::from_utf8(response).unwrap();
    let head = text.split("\r\n\r\n").next().unwrap();
    head.split("\r\n").skip(1).find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

// ----- valid handshakes -----

#[test]
fn rfc_example_request_is_accepted_with_the_rfc_accept_value() {
    let config = ServerConfig::default().with_subprotocols(["chat"]);
    let accepted = accept(&config, &rfc_request()).unwrap();
    let response = std::str::from_utf8(&accepted.response).unwrap();
    assert!(response.starts_with("HTTP/1.1 101 Switching Protocols\r\n"));
    assert!(response.ends_with("\r\n\r\n"));
    assert_eq!(
        response_header(&accepted.response, "Sec-WebSocket-Accept"),
        Some(ACCEPT)
    );
    assert_eq!(
        response_header(&accepted.response, "Upgrade"),
        Some("websocket")
    );
    assert_eq!(
        response_header(&accepted.response, "Connection"),
        Some("Upgrade")
    );
    assert_eq!(
        response_header(&accepted.response, "Sec-WebSocket-Protocol"),
        Some("chat")
    );
    assert_eq!(accepted.subprotocol.as_deref(), Some("chat"));
    assert!(accepted.leftover.is_empty());
    assert_eq!(accept_key(KEY.as_bytes()), ACCEPT);
}

#[test]
fn request_view_exposes_path_headers_and_origin() {
    let bytes = minimal_with("GET", Some("GET /rooms/7?token=abc HTTP/1.1"));
    let mut bytes = String::from_utf8(bytes).unwrap();
    bytes.insert_str(
        bytes.len() - 2,
        "Origin: https://app.example\r\nX-Trace: 42\r\n",
    );
    let request = parse(&ServerConfig::default(), bytes.as_bytes())
        .unwrap()
        .unwrap();
    assert_eq!(request.path(), "/rooms/7?token=abc");
    assert_eq!(request.host(), b"localhost");
    assert_eq!(request.origin(), Some(&b"https://app.example"[..]));
    assert_eq!(request.header("x-trace"), Some(&b"42"[..]));
    assert_eq!(request.key(), KEY.as_bytes());
    assert_eq!(request.headers().count(), 7);
    assert!(request.headers().any(|(n, v)| n == "X-Trace" && v == b"42"));
}

#[test]
fn connection_token_lists_with_keep_alive_are_accepted() {
    let config = ServerConfig::default();
    for connection in [
        "Connection: keep-alive, Upgrade",
        "Connection: Upgrade,keep-alive",
        "Connection: keep-alive ,  upgrade  ",
        "Connection: ,, keep-alive,UPGRADE,",
    ] {
        let bytes = minimal_with("Connection", Some(connection));
        assert!(accept(&config, &bytes).is_ok(), "{connection}");
    }
}

#[test]
fn repeated_connection_headers_are_combined() {
    let bytes = request_with(&[
        "GET / HTTP/1.1",
        "Host: localhost",
        "Connection: keep-alive",
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version: 13",
    ]);
    assert!(accept(&ServerConfig::default(), &bytes).is_ok());
}

#[test]
fn header_names_and_tokens_are_case_insensitive() {
    let bytes = request_with(&[
        "GET / HTTP/1.1",
        "HOST: localhost",
        "upgrade: WebSocket",
        "CONNECTION: UPGRADE",
        "sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==",
        "SEC-WEBSOCKET-VERSION: 13",
    ]);
    let accepted = accept(&ServerConfig::default(), &bytes).unwrap();
    assert_eq!(
        response_header(&accepted.response, "Sec-WebSocket-Accept"),
        Some(ACCEPT)
    );
}

#[test]
fn upgrade_list_naming_websocket_among_others_is_accepted() {
    let bytes = minimal_with("Upgrade", Some("Upgrade: h2c, websocket"));
    assert!(accept(&ServerConfig::default(), &bytes).is_ok());
}

#[test]
fn zero_content_length_is_accepted() {
    let bytes = request_with(&[
        "GET / HTTP/1.1",
        "Host: localhost",
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Content-Length: 0",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version: 13",
    ]);
    assert!(accept(&ServerConfig::default(), &bytes).is_ok());
}

// ----- refusals -----

#[test]
fn post_is_refused_with_405_allowing_get() {
    let bytes = minimal_with("GET", Some("POST / HTTP/1.1"));
    let err = accept(&ServerConfig::default(), &bytes).unwrap_err();
    assert_eq!(err, ServerError::MethodNotAllowed);
    assert_eq!(refusal_status(&ServerConfig::default(), &bytes), 405);
    assert_eq!(response_header(&err.response(), "Allow"), Some("GET"));
}

#[test]
fn http_1_0_is_refused_with_400() {
    let bytes = minimal_with("GET", Some("GET / HTTP/1.0"));
    assert_eq!(
        accept(&ServerConfig::default(), &bytes),
        Err(ServerError::HttpVersion)
    );
    assert_eq!(refusal_status(&ServerConfig::default(), &bytes), 400);
}

#[test]
fn missing_or_repeated_host_is_refused_with_400() {
    let config = ServerConfig::default();
    let missing = minimal_with("Host", None);
    assert_eq!(accept(&config, &missing), Err(ServerError::Host));
    let twice = minimal_with("Host", Some("Host: a\r\nHost: b"));
    assert_eq!(accept(&config, &twice), Err(ServerError::Host));
    assert_eq!(refusal_status(&config, &twice), 400);
}

#[test]
fn missing_or_wrong_upgrade_is_refused_with_400() {
    let config = ServerConfig::default();
    for upgrade in [None, Some("Upgrade: h2c"), Some("Upgrade: websockets")] {
        let bytes = minimal_with("Upgrade", upgrade);
        assert_eq!(
            accept(&config, &bytes),
            Err(ServerError::Upgrade),
            "{upgrade:?}"
        );
        assert_eq!(refusal_status(&config, &bytes), 400);
    }
}

#[test]
fn connection_without_upgrade_token_is_refused_with_400() {
    let config = ServerConfig::default();
    for connection in [
        None,
        Some("Connection: keep-alive"),
        Some("Connection: upgraded"),
    ] {
        let bytes = minimal_with("Connection", connection);
        assert_eq!(
            accept(&config, &bytes),
            Err(ServerError::Connection),
            "{connection:?}"
        );
        assert_eq!(refusal_status(&config, &bytes), 400);
    }
}

#[test]
fn other_websocket_versions_are_refused_with_426_naming_13() {
    let config = ServerConfig::default();
    for version in [
        None,
        Some("Sec-WebSocket-Version: 8"),
        Some("Sec-WebSocket-Version: 13, 8"),
        Some("Sec-WebSocket-Version: 13\r\nSec-WebSocket-Version: 13"),
    ] {
        let bytes = minimal_with("Sec-WebSocket-Version", version);
        let err = accept(&config, &bytes).unwrap_err();
        assert_eq!(err, ServerError::Version, "{version:?}");
        assert_eq!(refusal_status(&config, &bytes), 426);
        assert_eq!(
            response_header(&err.response(), "Sec-WebSocket-Version"),
            Some("13")
        );
    }
}

#[test]
fn bad_keys_are_refused_with_400() {
    let config = ServerConfig::default();
    for key in [
        None,
        Some("Sec-WebSocket-Key: "),
        // 15 and 17 bytes.
        Some("Sec-WebSocket-Key: AAAAAAAAAAAAAAAAAAAA"),
        Some("Sec-WebSocket-Key: AAAAAAAAAAAAAAAAAAAAAAA="),
        Some("Sec-WebSocket-Key: AAAAAAAAAAAAAAAAAAAAAAA"),
        Some("Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ"),
        Some("Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25j!Q=="),
        Some(
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        ),
    ] {
        let bytes = minimal_with("Sec-WebSocket-Key", key);
        assert_eq!(accept(&config, &bytes), Err(ServerError::Key), "{key:?}");
        assert_eq!(refusal_status(&config, &bytes), 400);
    }
}

#[test]
fn a_request_announcing_a_body_is_refused_with_400() {
    let config = ServerConfig::default();
    for body in ["Content-Length: 5", "Transfer-Encoding: chunked"] {
        let bytes = minimal_with("Host", Some(&format!("Host: localhost\r\n{body}")));
        assert_eq!(
            accept(&config, &bytes),
            Err(ServerError::RequestBody),
            "{body}"
        );
        assert_eq!(refusal_status(&config, &bytes), 400);
    }
}

#[test]
fn malformed_http_is_refused_with_400() {
    let config = ServerConfig::default();
    // A TLS ClientHello (a wss:// client on a plain port) is refused at its first byte,
    // with an error that says so.
    let hello = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n";
    assert_eq!(parse(&config, hello), Err(ServerError::TlsOnPlainPort));
    assert_eq!(refusal_status(&config, hello), 400);
    for bytes in [
        &b"GET / HTTP/1.1\r\nHost localhost\r\n\r\n"[..],
        b"GET / HTTP/1.1\r\nHo st: localhost\r\n\r\n",
        b"GET / HTTP/1.1\nHost: a\n\nUpgrade: websocket\r\n\r\n",
    ] {
        assert_eq!(parse(&config, bytes), Err(ServerError::Malformed));
        assert_eq!(refusal_status(&config, bytes), 400);
    }
}

#[test]
fn refused_origins_get_403_and_the_check_sees_the_origin() {
    let config =
        ServerConfig::default().with_origin_check(|origin| origin == Some("http://example.com"));
    assert!(accept(&config, &rfc_request()).is_ok());

    let other = String::from_utf8(rfc_request())
        .unwrap()
        .replace("example.com\r\nSec", "evil.test\r\nSec");
    assert_eq!(accept(&config, other.as_bytes()), Err(ServerError::Origin));
    assert_eq!(refusal_status(&config, other.as_bytes()), 403);

    let none = minimal();
    assert_eq!(accept(&config, &none), Err(ServerError::Origin));
    let allow_missing = ServerConfig::default().with_origin_check(|origin| origin.is_none());
    assert!(accept(&allow_missing, &none).is_ok());
}

#[test]
fn refusal_responses_are_complete_http_messages() {
    let err = ServerError::Key;
    let response = String::from_utf8(err.response()).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\n"));
    assert!(head.contains("\r\nConnection: close"));
    assert_eq!(body, err.to_string());
    assert_eq!(
        response_header(response.as_bytes(), "Content-Length"),
        Some(&*body.len().to_string())
    );
}

// ----- limits -----

#[test]
fn an_endless_header_line_is_refused_with_431_within_the_limit() {
    let config = ServerConfig::default();
    let mut handshake = ServerHandshake::new(&config);
    assert_eq!(handshake.feed(b"GET / HTTP/1.1\r\nX-Long: "), Ok(None));
    let chunk = [b'a'; 1000];
    let mut fed = 0usize;
    let err = loop {
        match handshake.feed(&chunk) {
            Ok(None) => {
                assert!(handshake.buffered() <= config.max_request_size);
                fed += chunk.len();
                assert!(fed <= 2 * config.max_request_size, "never refused");
            }
            Ok(Some(_)) => panic!("an unterminated head cannot complete"),
            Err(e) => break e,
        }
    };
    assert_eq!(err, ServerError::RequestTooLarge);
    assert_eq!(err.status(), 431);
    assert!(fed < config.max_request_size);
    assert_eq!(handshake.buffered(), 0);
}

#[test]
fn ten_thousand_headers_are_refused_with_431_and_a_bounded_buffer() {
    let mut bytes = b"GET / HTTP/1.1\r\n".to_vec();
    for i in 0..10_000 {
        bytes.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
    }
    bytes.extend_from_slice(b"\r\n");

    // With the default size limit the head is too large long before it ends.
    let config = ServerConfig::default();
    let mut handshake = ServerHandshake::new(&config);
    let mut result = Ok(None);
    for chunk in bytes.chunks(512) {
        result = handshake.feed(chunk);
        assert!(handshake.buffered() <= config.max_request_size);
        if !matches!(result, Ok(None)) {
            break;
        }
    }
    assert_eq!(result, Err(ServerError::RequestTooLarge));

    // With room for the bytes, the header count limit refuses it.
    let mut roomy = ServerConfig::default();
    roomy.max_request_size = 1 << 20;
    assert_eq!(parse(&roomy, &bytes), Err(ServerError::TooManyHeaders));
    assert_eq!(ServerError::TooManyHeaders.status(), 431);
}

#[test]
fn a_head_exactly_at_the_limit_is_accepted() {
    let bytes = minimal();
    let mut config = ServerConfig::default();
    config.max_request_size = bytes.len();
    assert!(accept(&config, &bytes).is_ok());
    config.max_request_size = bytes.len() - 1;
    assert_eq!(parse(&config, &bytes), Err(ServerError::RequestTooLarge));
}

#[test]
fn header_count_at_the_limit_is_accepted() {
    let bytes = minimal();
    let mut config = ServerConfig::default();
    config.max_headers = 5;
    assert!(accept(&config, &bytes).is_ok());
    config.max_headers = 4;
    assert_eq!(parse(&config, &bytes), Err(ServerError::TooManyHeaders));
}

// ----- incremental input and leftovers -----

#[test]
fn trickled_request_gives_the_same_result_as_whole() {
    let config = ServerConfig::default().with_subprotocols(["superchat", "chat"]);
    let whole = parse(&config, &rfc_request()).unwrap().unwrap();
    let mut handshake = ServerHandshake::new(&config);
    let bytes = rfc_request();
    let (last, init) = bytes.split_last().unwrap();
    for b in init {
        assert_eq!(handshake.feed(&[*b]), Ok(None));
    }
    let trickled = handshake.feed(&[*last]).unwrap().unwrap();
    assert_eq!(trickled, whole);
    assert_eq!(trickled.accept(&config), whole.accept(&config));
}

#[test]
fn bytes_after_the_request_are_handed_back() {
    let config = ServerConfig::default();
    let frame = [
        0x81,
        0x85,
        1,
        2,
        3,
        4,
        b'h' ^ 1,
        b'e' ^ 2,
        b'l' ^ 3,
        b'l' ^ 4,
        b'o' ^ 1,
    ];
    let mut bytes = minimal();
    bytes.extend_from_slice(&frame);
    let request = parse(&config, &bytes).unwrap().unwrap();
    assert_eq!(request.leftover(), frame);
    assert_eq!(request.accept(&config).unwrap().leftover, frame);

    // The same when the head's end and the frame arrive split across feeds.
    let mut handshake = ServerHandshake::new(&config);
    let split = bytes.len() - frame.len() - 2;
    assert_eq!(handshake.feed(&bytes[..split]), Ok(None));
    let request = handshake.feed(&bytes[split..]).unwrap().unwrap();
    assert_eq!(request.leftover(), frame);
}

#[test]
fn leftover_larger_than_the_head_limit_is_kept_whole() {
    let bytes = minimal();
    let mut config = ServerConfig::default();
    config.max_request_size = bytes.len();
    let mut input = bytes.clone();
    input.extend(std::iter::repeat_n(0x42, 100_000));
    let request = parse(&config, &input).unwrap().unwrap();
    assert_eq!(request.leftover().len(), 100_000);
}

// ----- subprotocols -----

#[test]
fn server_preference_order_selects_the_subprotocol() {
    let config = ServerConfig::default().with_subprotocols(["superchat", "chat"]);
    let accepted = accept(&config, &rfc_request()).unwrap();
    assert_eq!(accepted.subprotocol.as_deref(), Some("superchat"));
    assert_eq!(
        response_header(&accepted.response, "Sec-WebSocket-Protocol"),
        Some("superchat")
    );
}

#[test]
fn no_common_subprotocol_selects_none_and_sends_no_header() {
    let config = ServerConfig::default().with_subprotocols(["mqtt"]);
    let accepted = accept(&config, &rfc_request()).unwrap();
    assert_eq!(accepted.subprotocol, None);
    assert_eq!(
        response_header(&accepted.response, "Sec-WebSocket-Protocol"),
        None
    );
}

#[test]
fn subprotocols_from_repeated_headers_are_all_considered() {
    let bytes = minimal_with(
        "Sec-WebSocket-Version",
        Some(
            "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: a, b\r\nSec-WebSocket-Protocol: c",
        ),
    );
    let config = ServerConfig::default().with_subprotocols(["c", "b"]);
    let request = parse(&config, &bytes).unwrap().unwrap();
    assert_eq!(request.subprotocols().collect::<Vec<_>>(), ["a", "b", "c"]);
    assert_eq!(
        request.accept(&config).unwrap().subprotocol.as_deref(),
        Some("c")
    );
}

#[test]
fn subprotocol_matching_is_case_sensitive() {
    let config = ServerConfig::default().with_subprotocols(["Chat"]);
    assert_eq!(accept(&config, &rfc_request()).unwrap().subprotocol, None);
}

// ----- response headers and custom refusals -----

#[test]
fn caller_headers_are_added_to_the_101_response() {
    let config = ServerConfig::default();
    let request = parse(&config, &rfc_request()).unwrap().unwrap();
    let accepted = request
        .accept_with_headers(&config, &[("Set-Cookie", "session=1; HttpOnly")])
        .unwrap();
    assert_eq!(
        response_header(&accepted.response, "Set-Cookie"),
        Some("session=1; HttpOnly")
    );
}

#[test]
fn caller_headers_cannot_inject_or_override_handshake_headers() {
    let config = ServerConfig::default();
    for header in [
        ("X-Evil", "a\r\nSet-Cookie: x=1"),
        ("Bad Name", "v"),
        ("Sec-WebSocket-Accept", "forged"),
        ("connection", "close"),
    ] {
        let request = parse(&config, &rfc_request()).unwrap().unwrap();
        let err = request.accept_with_headers(&config, &[header]).unwrap_err();
        assert_eq!(err, ServerError::ResponseHeader, "{header:?}");
        assert_eq!(err.status(), 500);
    }
}

#[test]
fn reject_writes_the_callers_status_headers_and_body() {
    let request = parse(&ServerConfig::default(), &rfc_request())
        .unwrap()
        .unwrap();
    let response = request.reject(401, &[("WWW-Authenticate", "Bearer")], "token required");
    let text = String::from_utf8(response.clone()).unwrap();
    assert!(text.starts_with("HTTP/1.1 401 Unauthorized\r\n"));
    assert_eq!(
        response_header(&response, "WWW-Authenticate"),
        Some("Bearer")
    );
    assert!(text.ends_with("\r\n\r\ntoken required"));

    let upgraded_by_mistake = request.reject(101, &[], "");
    assert!(upgraded_by_mistake.starts_with(b"HTTP/1.1 500 "));
    let injected = request.reject(404, &[("X", "a\r\nb: c")], "");
    assert!(injected.starts_with(b"HTTP/1.1 500 "));
}

// ----- client -----

fn fixed_client(request: &ClientRequest) -> (ClientHandshake, Vec<u8>) {
    // The key of the RFC 6455 example: "the sample nonce".
    ClientHandshake::with_key(request, ClientConfig::default(), *b"the sample nonce").unwrap()
}

fn server_response(lines: &[&str]) -> Vec<u8> {
    request_with(lines)
}

fn upgrade_response(extra: &[&str]) -> Vec<u8> {
    let mut lines = vec![
        "HTTP/1.1 101 Switching Protocols",
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=",
    ];
    lines.extend_from_slice(extra);
    server_response(&lines)
}

#[test]
fn client_request_carries_every_requested_part() {
    let request = ClientRequest::new("example.com:8080", "/chat?room=1")
        .origin("https://example.com")
        .subprotocol("chat")
        .subprotocol("superchat")
        .header("Authorization", "Bearer abc");
    let (_, bytes) = fixed_client(&request);
    let text = String::from_utf8(bytes).unwrap();
    assert!(text.starts_with("GET /chat?room=1 HTTP/1.1\r\n"));
    for line in [
        "Host: example.com:8080",
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version: 13",
        "Origin: https://example.com",
        "Sec-WebSocket-Protocol: chat, superchat",
        "Authorization: Bearer abc",
    ] {
        assert!(text.contains(&format!("\r\n{line}\r\n")), "{line}");
    }
    assert!(!text.contains("Sec-WebSocket-Extensions"));
    assert!(text.ends_with("\r\n\r\n"));
}

#[test]
fn urls_give_the_request_and_where_to_connect() {
    let cases = [
        (
            "ws://example.com",
            "example.com",
            "/",
            false,
            "example.com",
            80,
        ),
        (
            "ws://example.com:80/a",
            "example.com",
            "/a",
            false,
            "example.com",
            80,
        ),
        (
            "WSS://example.com/chat?x=1",
            "example.com",
            "/chat?x=1",
            true,
            "example.com",
            443,
        ),
        (
            "wss://example.com:8443",
            "example.com:8443",
            "/",
            true,
            "example.com",
            8443,
        ),
        (
            "ws://127.0.0.1:9001?agent=x",
            "127.0.0.1:9001",
            "/?agent=x",
            false,
            "127.0.0.1",
            9001,
        ),
        ("ws://[::1]/", "[::1]", "/", false, "::1", 80),
        // RFC 3986 3.2.3: an empty port means the scheme's default.
        (
            "ws://example.com:/",
            "example.com",
            "/",
            false,
            "example.com",
            80,
        ),
        (
            "ws://[::1]:9001/ws",
            "[::1]:9001",
            "/ws",
            false,
            "::1",
            9001,
        ),
    ];
    for (url, host_header, path, secure, host, port) in cases {
        let (request, target) = ClientRequest::from_url(url).unwrap();
        assert_eq!(request, ClientRequest::new(host_header, path), "{url}");
        assert_eq!(
            (target.secure, target.host.as_str(), target.port),
            (secure, host, port),
            "{url}"
        );
    }
}

#[test]
fn unusable_urls_are_refused() {
    for url in [
        "http://example.com/",
        "example.com",
        "ws://",
        "ws://:80/",
        "ws://example.com:0/",
        "ws://example.com:65536/",
        "ws://example.com:8o/",
        "ws://user@example.com/",
        "ws://example.com/#frag",
        "ws://[::1/",
        "ws://[::1]x/",
        "ws://[]/",
        "ws://exa mple.com/",
        "ws://example.com/a b",
    ] {
        assert!(ClientRequest::from_url(url).is_err(), "{url}");
    }
}

#[test]
fn random_keys_are_valid_and_differ_between_handshakes() {
    let request = ClientRequest::new("localhost", "/");
    let key_of = |bytes: &[u8]| {
        let request = parse(&ServerConfig::default(), bytes).unwrap().unwrap();
        request.key().to_vec()
    };
    let (_, a) = ClientHandshake::new(&request, ClientConfig::default()).unwrap();
    let (_, b) = ClientHandshake::new(&request, ClientConfig::default()).unwrap();
    assert_ne!(key_of(&a), key_of(&b));
}

#[test]
fn invalid_client_requests_are_refused_before_sending() {
    let cases = [
        ClientRequest::new("", "/"),
        ClientRequest::new("a b", "/"),
        ClientRequest::new("host", "chat"),
        ClientRequest::new("host", "/a b"),
        ClientRequest::new("host", "/").origin("x\r\ny: z"),
        ClientRequest::new("host", "/").subprotocol("a b"),
        ClientRequest::new("host", "/")
            .subprotocol("a")
            .subprotocol("a"),
        ClientRequest::new("host", "/").header("Sec-WebSocket-Key", "x"),
        ClientRequest::new("host", "/").header("X", "a\nb"),
    ];
    for request in cases {
        let result = ClientHandshake::new(&request, ClientConfig::default());
        assert!(
            matches!(result, Err(ClientError::InvalidRequest(_))),
            "{request:?}"
        );
    }
}

#[test]
fn client_accepts_a_valid_101_and_keeps_leftover_frames() {
    let (mut client, _) = fixed_client(&ClientRequest::new("h", "/").subprotocol("chat"));
    let mut bytes = upgrade_response(&["Sec-WebSocket-Protocol: chat"]);
    bytes.extend_from_slice(&[0x81, 0x02, b'h', b'i']);
    let upgraded = client.feed(&bytes).unwrap().unwrap();
    assert_eq!(upgraded.subprotocol.as_deref(), Some("chat"));
    assert_eq!(upgraded.leftover, [0x81, 0x02, b'h', b'i']);
    assert_eq!(
        upgraded.header("sec-websocket-accept"),
        Some(ACCEPT.as_bytes())
    );
}

#[test]
fn non_101_status_is_a_typed_error_with_headers_and_body() {
    let (mut client, _) = fixed_client(&ClientRequest::new("h", "/"));
    let mut bytes = server_response(&[
        "HTTP/1.1 403 Forbidden",
        "Content-Type: text/plain",
        "Content-Length: 9",
    ]);
    bytes.extend_from_slice(b"forbid");
    let Err(ClientError::Status(response)) = client.feed(&bytes) else {
        panic!("expected a status error");
    };
    assert_eq!(response.status, 403);
    assert_eq!(response.reason, "Forbidden");
    assert_eq!(response.header("content-type"), Some(&b"text/plain"[..]));
    assert_eq!(response.body, b"forbid");
}

#[test]
fn client_refuses_invalid_101_responses() {
    let protocols = ClientRequest::new("h", "/").subprotocol("chat");
    let cases: Vec<(Vec<u8>, ClientError)> = vec![
        (
            server_response(&[
                "HTTP/1.1 101 Switching Protocols",
                "Upgrade: websocket",
                "Connection: Upgrade",
                "Sec-WebSocket-Accept: AAAAAAAAAAAAAAAAAAAAAAAAAAA=",
            ]),
            ClientError::Accept,
        ),
        (
            server_response(&[
                "HTTP/1.1 101 Switching Protocols",
                "Upgrade: websocket",
                "Connection: Upgrade",
            ]),
            ClientError::Accept,
        ),
        (
            upgrade_response(&["Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="]),
            ClientError::Accept,
        ),
        (
            server_response(&[
                "HTTP/1.1 101 Switching Protocols",
                "Connection: Upgrade",
                "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=",
            ]),
            ClientError::Upgrade,
        ),
        (
            server_response(&[
                "HTTP/1.1 101 Switching Protocols",
                "Upgrade: websocket, h2c",
                "Connection: Upgrade",
                "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=",
            ]),
            ClientError::Upgrade,
        ),
        (
            server_response(&[
                "HTTP/1.1 101 Switching Protocols",
                "Upgrade: websocket",
                "Connection: keep-alive",
                "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=",
            ]),
            ClientError::Connection,
        ),
        (
            upgrade_response(&["Sec-WebSocket-Protocol: superchat"]),
            ClientError::Subprotocol,
        ),
        (
            upgrade_response(&[
                "Sec-WebSocket-Protocol: chat",
                "Sec-WebSocket-Protocol: chat",
            ]),
            ClientError::Subprotocol,
        ),
        (
            upgrade_response(&["Sec-WebSocket-Extensions: permessage-deflate"]),
            ClientError::Extension,
        ),
        (
            server_response(&[
                "HTTP/1.0 101 Switching Protocols",
                "Upgrade: websocket",
                "Connection: Upgrade",
                "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=",
            ]),
            ClientError::Malformed,
        ),
        (
            b"SSH-2.0-OpenSSH_9.6\r\n\r\n".to_vec(),
            ClientError::Malformed,
        ),
    ];
    for (bytes, expected) in cases {
        let (mut client, _) = fixed_client(&protocols);
        assert_eq!(
            client.feed(&bytes),
            Err(expected.clone()),
            "{}",
            String::from_utf8_lossy(&bytes)
        );
    }
}

#[test]
fn subprotocol_header_without_an_offer_is_refused() {
    let (mut client, _) = fixed_client(&ClientRequest::new("h", "/"));
    let bytes = upgrade_response(&["Sec-WebSocket-Protocol: chat"]);
    assert_eq!(client.feed(&bytes), Err(ClientError::Subprotocol));
}

#[test]
fn client_response_limit_bounds_the_buffer() {
    let (mut client, _) = fixed_client(&ClientRequest::new("h", "/"));
    assert_eq!(client.feed(b"HTTP/1.1 101 OK\r\nX: "), Ok(None));
    let mut result = Ok(None);
    for _ in 0..100 {
        result = client.feed(&[b'x'; 1024]);
        assert!(client.buffered() <= rapidws::handshake::DEFAULT_MAX_HEAD_SIZE);
        if result.is_err() {
            break;
        }
    }
    assert_eq!(result, Err(ClientError::ResponseTooLarge));
}

#[test]
fn client_and_server_complete_a_handshake_in_memory() {
    let server_config = ServerConfig::default().with_subprotocols(["v2.chat", "v1.chat"]);
    let request = ClientRequest::new("localhost:9001", "/ws")
        .origin("http://localhost")
        .subprotocol("v1.chat")
        .subprotocol("v2.chat");
    let (mut client, request_bytes) =
        ClientHandshake::new(&request, ClientConfig::default()).unwrap();

    // The client's first frame travels right behind its request, and the server's behind
    // its response.
    let mut to_server = request_bytes;
    to_server.extend_from_slice(&[0x89, 0x80, 9, 9, 9, 9]);
    let mut server = ServerHandshake::new(&server_config);
    let mut received = None;
    let mut to_codec = Vec::new();
    for chunk in to_server.chunks(7) {
        // Once the handshake is done, later reads belong to the codec.
        match &received {
            None => received = server.feed(chunk).unwrap(),
            Some(_) => to_codec.extend_from_slice(chunk),
        }
    }
    let received = received.expect("server saw the whole request");
    assert_eq!(received.path(), "/ws");
    assert_eq!(received.origin(), Some(&b"http://localhost"[..]));
    let accepted = received.accept(&server_config).unwrap();
    let mut first_frames = accepted.leftover.clone();
    first_frames.extend_from_slice(&to_codec);
    assert_eq!(first_frames, [0x89, 0x80, 9, 9, 9, 9]);

    let mut to_client = accepted.response.clone();
    to_client.extend_from_slice(&[0x8a, 0x00]);
    let mut upgraded = None;
    let mut to_codec = Vec::new();
    for chunk in to_client.chunks(5) {
        match &upgraded {
            None => upgraded = client.feed(chunk).unwrap(),
            Some(_) => to_codec.extend_from_slice(chunk),
        }
    }
    let upgraded = upgraded.expect("client saw the whole response");
    assert_eq!(upgraded.subprotocol.as_deref(), Some("v2.chat"));
    assert_eq!(accepted.subprotocol, upgraded.subprotocol);
    let mut first_frames = upgraded.leftover.clone();
    first_frames.extend_from_slice(&to_codec);
    assert_eq!(first_frames, [0x8a, 0x00]);
}

#[test]
fn client_trickled_response_gives_the_same_result_as_whole() {
    let request = ClientRequest::new("h", "/").subprotocol("chat");
    let mut bytes = upgrade_response(&["Sec-WebSocket-Protocol: chat", "Server: test"]);
    bytes.push(0x88);
    let (mut whole, _) = fixed_client(&request);
    let expected = whole.feed(&bytes).unwrap().unwrap();
    let (mut trickled, _) = fixed_client(&request);
    let mut got = None;
    for (i, b) in bytes.iter().enumerate() {
        if let Some(u) = trickled.feed(&[*b]).unwrap() {
            // The head ends one byte before the end: the last byte is a frame byte.
            assert_eq!(i, bytes.len() - 2);
            got = Some(u);
            break;
        }
    }
    let mut got = got.expect("complete response");
    got.leftover.push(0x88);
    assert_eq!(got, expected);
}

// ----- permessage-deflate wiring -----

#[cfg(feature = "deflate")]
mod deflate {
    use super::*;
    use rapidws::deflate::DeflateConfig;

    #[test]
    fn server_without_deflate_ignores_extension_offers() {
        let bytes = minimal_with(
            "Sec-WebSocket-Version",
            Some("Sec-WebSocket-Version: 13\r\nSec-WebSocket-Extensions: permessage-deflate"),
        );
        let accepted = accept(&ServerConfig::default(), &bytes).unwrap();
        assert_eq!(accepted.deflate, None);
        assert_eq!(
            response_header(&accepted.response, "Sec-WebSocket-Extensions"),
            None
        );
    }

    #[test]
    fn server_with_deflate_accepts_a_plain_offer() {
        let config = ServerConfig::default().with_deflate(Some(DeflateConfig::default()));
        let bytes = minimal_with(
            "Sec-WebSocket-Version",
            Some(
                "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Extensions: permessage-deflate; client_max_window_bits",
            ),
        );
        let accepted = accept(&config, &bytes).unwrap();
        let params = accepted.deflate.expect("deflate negotiated");
        assert_eq!(params.server_max_window_bits, 15);
        let header = response_header(&accepted.response, "Sec-WebSocket-Extensions").unwrap();
        assert!(header.starts_with("permessage-deflate"), "{header}");
    }

    #[test]
    fn client_and_server_agree_on_deflate_in_memory() {
        let server_config = ServerConfig::default().with_deflate(Some(DeflateConfig::default()));
        let client_config = ClientConfig::default().with_deflate(Some(DeflateConfig::default()));
        let (mut client, request) =
            ClientHandshake::new(&ClientRequest::new("localhost", "/"), client_config).unwrap();
        assert!(
            String::from_utf8_lossy(&request)
                .contains("Sec-WebSocket-Extensions: permessage-deflate")
        );
        let accepted = accept(&server_config, &request).unwrap();
        let upgraded = client.feed(&accepted.response).unwrap().unwrap();
        assert!(accepted.deflate.is_some());
        assert_eq!(accepted.deflate, upgraded.deflate);
    }

    #[test]
    fn client_offering_deflate_accepts_a_server_that_declines() {
        let config = ClientConfig::default().with_deflate(Some(DeflateConfig::default()));
        let (mut client, request) =
            ClientHandshake::new(&ClientRequest::new("localhost", "/"), config).unwrap();
        let accepted = accept(&ServerConfig::default(), &request).unwrap();
        assert_eq!(
            client.feed(&accepted.response).unwrap().unwrap().deflate,
            None
        );
    }

    #[test]
    fn client_refuses_an_unknown_extension_even_when_offering_deflate() {
        let config = ClientConfig::default().with_deflate(Some(DeflateConfig::default()));
        let (mut client, _) =
            ClientHandshake::with_key(&ClientRequest::new("h", "/"), config, *b"the sample nonce")
                .unwrap();
        let bytes = upgrade_response(&["Sec-WebSocket-Extensions: x-webkit-deflate-frame"]);
        assert!(matches!(client.feed(&bytes), Err(ClientError::Deflate(_))));
    }
}

// ----- chunking invariance -----

proptest! {
    #[test]
    fn splitting_the_request_anywhere_gives_the_same_result(
        cuts in proptest::collection::vec(0usize..400, 0..8),
        leftover in proptest::collection::vec(any::<u8>(), 0..32),
    ) {
        let config = ServerConfig::default().with_subprotocols(["chat"]);
        let mut bytes = rfc_request();
        bytes.extend_from_slice(&leftover);
        let expected = accept(&config, &bytes).unwrap();

        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
        cuts.push(0);
        cuts.push(bytes.len());
        cuts.sort_unstable();
        let mut handshake = ServerHandshake::new(&config);
        let mut got = None;
        let mut to_codec = Vec::new();
        for pair in cuts.windows(2) {
            let chunk = &bytes[pair[0]..pair[1]];
            match &got {
                None => got = handshake.feed(chunk).unwrap(),
                Some(_) => to_codec.extend_from_slice(chunk),
            }
        }
        let mut got = got.expect("complete request").accept(&config).unwrap();
        got.leftover.extend_from_slice(&to_codec);
        prop_assert_eq!(got, expected);
    }

    #[test]
    fn splitting_a_bad_request_anywhere_gives_the_same_refusal(
        cut in 0usize..200,
        which in 0usize..4,
    ) {
        let config = ServerConfig::default();
        let bytes = match which {
            0 => minimal_with("GET", Some("PUT / HTTP/1.1")),
            1 => minimal_with("Sec-WebSocket-Version", Some("Sec-WebSocket-Version: 7")),
            2 => minimal_with("Host", None),
            _ => minimal_with("Sec-WebSocket-Key", Some("Sec-WebSocket-Key: x")),
        };
        let expected = parse(&config, &bytes).unwrap_err();
        let cut = cut % (bytes.len() + 1);
        let mut handshake = ServerHandshake::new(&config);
        let first = handshake.feed(&bytes[..cut]);
        let result = match first {
            Ok(None) => handshake.feed(&bytes[cut..]).map(|_| ()),
            other => other.map(|_| ()),
        };
        prop_assert_eq!(result, Err(expected));
    }

    #[test]
    fn splitting_the_response_anywhere_gives_the_same_result(
        cuts in proptest::collection::vec(0usize..300, 0..8),
    ) {
        let request = ClientRequest::new("h", "/").subprotocol("chat");
        let bytes = upgrade_response(&["Sec-WebSocket-Protocol: chat"]);
        let (mut whole, _) = fixed_client(&request);
        let expected = whole.feed(&bytes).unwrap().unwrap();
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
        cuts.push(0);
        cuts.push(bytes.len());
        cuts.sort_unstable();
        let (mut client, _) = fixed_client(&request);
        let mut got = None;
        for pair in cuts.windows(2) {
            if let Some(u) = client.feed(&bytes[pair[0]..pair[1]]).unwrap() {
                got = Some(u);
            }
        }
        prop_assert_eq!(got, Some(expected));
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_stay_bounded(
        bytes in proptest::collection::vec(any::<u8>(), 0..2048),
        chunk in 1usize..64,
    ) {
        let mut config = ServerConfig::default();
        config.max_request_size = 512;
        let mut handshake = ServerHandshake::new(&config);
        for c in bytes.chunks(chunk) {
            match handshake.feed(c) {
                Ok(Some(request)) => { let _ = request.accept(&config); }
                Ok(None) => prop_assert!(handshake.buffered() <= 512),
                Err(e) => prop_assert!(e.response().starts_with(b"HTTP/1.1 ")),
            }
        }
    }
}
