//! Shared by the hyper and axum upgrade tests: a rapidws client echo check and raw HTTP
//! exchanges for what a WebSocket client cannot send (a plain GET, a wrong version).
#![allow(dead_code)]

use std::net::SocketAddr;

use bytes::Bytes;
use rapidws::deflate::DeflateConfig;
use rapidws::tokio::{ClientConfig, Message, connect};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

// The tokio tests' helpers: bounded waits (every test waits by the same rule), the data
// pattern, and receiving past pings.
#[path = "../../../tests/tokio_support/mod.rs"]
mod tokio_support;
use tokio_support::recv_data;
pub use tokio_support::{bounded, pattern};

/// A client that offers permessage-deflate (`deflate`) or not.
pub fn client(deflate: bool) -> ClientConfig {
    ClientConfig::default().with_deflate(deflate.then(DeflateConfig::default))
}

/// Connects to `ws://addr/path` with the rapidws tokio client and checks that text and
/// binary messages of several sizes (compressible and not) come back unchanged.
pub async fn echo_text_and_binary(addr: SocketAddr, path: &str, config: &ClientConfig) {
    let mut ws = bounded(connect(&format!("ws://{addr}{path}"), config))
        .await
        .expect("connect");
    let mut messages = Vec::new();
    for len in [0usize, 1, 125, 126, 4096, 70_000] {
        let text: String = (0..len)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        messages.push(Message::text(text));
        messages.push(Message::Binary(Bytes::from(pattern(len))));
    }
    // Highly compressible, large enough to need many deflate blocks.
    messages.push(Message::Binary(Bytes::from(vec![b'z'; 300_000])));
    for msg in messages {
        bounded(ws.send(msg.clone())).await.expect("send");
        assert_eq!(recv_data(&mut ws).await, msg);
    }
    bounded(ws.close(1000, "")).await.expect("close");
}

/// An HTTP response read off a raw connection.
#[derive(Debug)]
pub struct RawResponse {
    /// The status code.
    pub status: u16,
    /// Header fields, names lowercased.
    pub headers: Vec<(String, String)>,
    /// The body (`Content-Length` bytes).
    pub body: Vec<u8>,
    /// Bytes read after the body (for a 101: the first frames).
    pub rest: Vec<u8>,
}

impl RawResponse {
    /// The value of header `name` (lowercase), if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A valid upgrade request head for `path`, with `extra` header lines (each ending CRLF)
/// and `Sec-WebSocket-Version: version`.
pub fn upgrade_request(path: &str, version: &str, extra: &str) -> String {
    format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: {version}\r\n\
         {extra}\r\n"
    )
}

/// Sends `request` on a new connection to `addr` and reads one response; the connection
/// is returned for more.
pub async fn exchange(addr: SocketAddr, request: &[u8]) -> (RawResponse, TcpStream) {
    let mut stream = bounded(TcpStream::connect(addr)).await.expect("connect");
    bounded(stream.write_all(request)).await.expect("write");
    let response = bounded(read_response(&mut stream)).await;
    (response, stream)
}

/// Reads one response head and its `Content-Length` body (at most 64 KiB in all).
pub async fn read_response(stream: &mut TcpStream) -> RawResponse {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).await.expect("read");
        assert!(n > 0, "connection closed before a full response: {buf:?}");
        buf.extend_from_slice(&chunk[..n]);
        assert!(buf.len() < 64 << 10, "response too large");
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut parsed = httparse::Response::new(&mut headers);
        let httparse::Status::Complete(head_len) = parsed.parse(&buf).expect("valid HTTP") else {
            continue;
        };
        let status = parsed.code.expect("status");
        let headers: Vec<(String, String)> = parsed
            .headers
            .iter()
            .map(|h| {
                (
                    h.name.to_ascii_lowercase(),
                    String::from_utf8_lossy(h.value).into_owned(),
                )
            })
            .collect();
        let body_len: usize = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .map_or(0, |(_, v)| v.parse().expect("content-length"));
        while buf.len() < head_len + body_len {
            let n = stream.read(&mut chunk).await.expect("read body");
            assert!(n > 0, "connection closed inside the body");
            buf.extend_from_slice(&chunk[..n]);
        }
        let rest = buf.split_off(head_len + body_len);
        let body = buf.split_off(head_len);
        return RawResponse {
            status,
            headers,
            body,
            rest,
        };
    }
}

/// A masked client text frame carrying `payload` (under 126 bytes).
pub fn masked_text_frame(payload: &[u8]) -> Vec<u8> {
    assert!(payload.len() < 126);
    let key = [0x37, 0xfa, 0x21, 0x3d];
    let mut frame = vec![0x81, 0x80 | payload.len() as u8];
    frame.extend_from_slice(&key);
    frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
    frame
}

/// Reads until `have` holds an unmasked server frame with a payload under 126 bytes;
/// returns its first byte and payload.
pub async fn read_small_frame(stream: &mut TcpStream, mut have: Vec<u8>) -> (u8, Vec<u8>) {
    let mut chunk = [0u8; 256];
    loop {
        if have.len() >= 2 {
            let len = usize::from(have[1] & 0x7f);
            assert!(len < 126 && have[1] & 0x80 == 0, "unexpected frame header");
            if have.len() >= 2 + len {
                return (have[0], have[2..2 + len].to_vec());
            }
        }
        let n = bounded(stream.read(&mut chunk)).await.expect("read frame");
        assert!(n > 0, "connection closed before the frame");
        have.extend_from_slice(&chunk[..n]);
    }
}

// Checks both integrations must pass, each against a server routing `/ws` to an echo.

/// A text frame sent in the same write as the upgrade request reaches the echo and comes
/// back.
pub async fn assert_early_frame_is_not_lost(addr: SocketAddr) {
    let mut bytes = upgrade_request("/ws", "13", "").into_bytes();
    bytes.extend_from_slice(&masked_text_frame(b"early bird"));
    let (response, mut stream) = exchange(addr, &bytes).await;
    assert_eq!(response.status, 101);
    let (first, payload) = read_small_frame(&mut stream, response.rest).await;
    assert_eq!((first, payload.as_slice()), (0x81, &b"early bird"[..]));
}

/// A plain GET to `/ws` gets a 400 naming what is missing.
pub async fn assert_plain_get_is_refused_with_400(addr: SocketAddr) {
    let (response, _stream) = exchange(
        addr,
        b"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/html\r\n\r\n",
    )
    .await;
    assert_eq!(response.status, 400);
    assert_eq!(
        String::from_utf8_lossy(&response.body),
        "Upgrade header must name websocket"
    );
}

/// An upgrade request for WebSocket version 8 gets a 426 naming version 13.
pub async fn assert_version_8_is_refused_with_426(addr: SocketAddr) {
    let (response, _stream) = exchange(addr, upgrade_request("/ws", "8", "").as_bytes()).await;
    assert_eq!(response.status, 426);
    assert_eq!(response.header("sec-websocket-version"), Some("13"));
    assert_eq!(response.header("upgrade"), Some("websocket"));
}
