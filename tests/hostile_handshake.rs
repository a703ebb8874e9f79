//! Hostile opening handshakes: endless header lines, header floods, oversized heads and
//! slow-loris trickles get their exact error and HTTP status, in bounded memory and time.
//!
//! The sans-IO parsers are fed directly; the tokio layer runs over in-memory duplex
//! streams on tokio's paused clock, so the timeouts are exact and nothing sleeps.

use std::time::{Duration, Instant};

use rapidws::handshake::{
    ClientConfig, ClientError, ClientHandshake, ClientRequest, ServerConfig, ServerError,
    ServerHandshake,
};

mod alloc_count;
use alloc_count::peak_during;

const DEFAULT_LIMIT: usize = rapidws::handshake::DEFAULT_MAX_HEAD_SIZE;

fn request_with(extra: &str) -> Vec<u8> {
    format!(
        "GET /chat HTTP/1.1\r\nHost: example.com\r\nUpgrade: websocket\r\n\
         Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Sec-WebSocket-Version: 13\r\n{extra}\r\n"
    )
    .into_bytes()
}

/// Feeds `chunk` repeatedly (at most `max_feeds` times) until the parser answers.
fn feed_until_answer(
    hs: &mut ServerHandshake,
    first: &[u8],
    chunk: &[u8],
    max_feeds: usize,
) -> (Result<(), ServerError>, usize, usize) {
    let mut fed = first.len();
    let mut most_buffered = 0;
    match hs.feed(first) {
        Ok(None) => {}
        Ok(Some(_)) => panic!("accepted"),
        Err(e) => return (Err(e), fed, most_buffered),
    }
    for _ in 0..max_feeds {
        most_buffered = most_buffered.max(hs.buffered());
        fed += chunk.len();
        match hs.feed(chunk) {
            Ok(None) => {}
            Ok(Some(_)) => panic!("accepted"),
            Err(e) => return (Err(e), fed, most_buffered),
        }
    }
    (Ok(()), fed, most_buffered)
}

// ---------------------------------------------------------------------------------------
// Sans-IO server parser
// ---------------------------------------------------------------------------------------

#[test]
fn endless_header_line_is_refused_with_431_at_the_head_limit() {
    let config = ServerConfig::default();
    let mut hs = ServerHandshake::new(&config);
    let ((r, fed, most), peak) = peak_during(|| {
        feed_until_answer(
            &mut hs,
            b"GET / HTTP/1.1\r\nX-Endless: ",
            &[b'a'; 1000],
            1_000_000,
        )
    });
    assert_eq!(r, Err(ServerError::RequestTooLarge));
    assert_eq!(ServerError::RequestTooLarge.status(), 431);
    assert!(
        ServerError::RequestTooLarge
            .response()
            .starts_with(b"HTTP/1.1 431 ")
    );
    // Refused as soon as the limit was reached, not later.
    assert!(
        (DEFAULT_LIMIT..DEFAULT_LIMIT + 1000).contains(&fed),
        "{fed}"
    );
    assert!(most < DEFAULT_LIMIT);
    // At most the head buffer (grown geometrically up to twice the limit) was held.
    assert!(peak <= 2 * DEFAULT_LIMIT, "{peak} bytes");
    assert_eq!(hs.buffered(), 0, "the buffer is released on refusal");
}

#[test]
fn endless_line_without_any_line_break_is_431_too() {
    let mut hs = ServerHandshake::new(&ServerConfig::default());
    let (r, _, _) = feed_until_answer(&mut hs, b"G", &[b'E'; 4096], 1000);
    assert_eq!(r, Err(ServerError::RequestTooLarge));
}

#[test]
fn ten_thousand_headers_pass_the_default_head_limit_and_get_431() {
    let headers: String = (0..10_000).map(|i| format!("X-{i}: v\r\n")).collect();
    let req = request_with(&headers);
    assert!(req.len() > DEFAULT_LIMIT);
    let mut hs = ServerHandshake::new(&ServerConfig::default());
    let (r, peak) = peak_during(|| hs.feed(&req).map(|_| ()));
    assert_eq!(r, Err(ServerError::RequestTooLarge));
    assert!(peak <= 2 * DEFAULT_LIMIT, "{peak} bytes");
}

#[test]
fn ten_thousand_headers_under_a_raised_size_limit_get_431_for_the_count() {
    let mut config = ServerConfig::default();
    config.max_request_size = 1 << 20;
    let headers: String = (0..10_000).map(|i| format!("X-{i}: v\r\n")).collect();
    let req = request_with(&headers);
    assert!(req.len() < config.max_request_size);
    let mut hs = ServerHandshake::new(&config);
    let (r, peak) = peak_during(|| hs.feed(&req).map(|_| ()));
    assert_eq!(r, Err(ServerError::TooManyHeaders));
    assert_eq!(ServerError::TooManyHeaders.status(), 431);
    // The head itself plus 100 header slots; nothing per header sent.
    assert!(peak <= 2 * req.len() + 16 * 1024, "{peak} bytes");
}

#[test]
fn exactly_max_headers_are_accepted_and_one_more_is_431() {
    let config = ServerConfig::default();
    // The request already has 5 header fields of its own.
    let fits: String = (0..config.max_headers - 5)
        .map(|i| format!("X-{i}: v\r\n"))
        .collect();
    let mut hs = ServerHandshake::new(&config);
    assert!(matches!(hs.feed(&request_with(&fits)), Ok(Some(_))));
    let over = format!("{fits}X-last: v\r\n");
    let mut hs = ServerHandshake::new(&config);
    assert_eq!(
        hs.feed(&request_with(&over)).map(|_| ()),
        Err(ServerError::TooManyHeaders)
    );
}

#[test]
fn request_over_the_limit_in_one_read_is_431_without_copying_past_the_limit() {
    let big = request_with(&format!("X-Pad: {}\r\n", "p".repeat(40 * 1024)));
    let mut hs = ServerHandshake::new(&ServerConfig::default());
    let (r, peak) = peak_during(|| hs.feed(&big).map(|_| ()));
    assert_eq!(r, Err(ServerError::RequestTooLarge));
    assert!(
        peak <= DEFAULT_LIMIT + 1024,
        "{peak} bytes held for a 40 KiB head"
    );
}

#[test]
fn request_one_byte_per_feed_is_parsed_in_linear_time() {
    // CVE-2023-43669-style quadratic rescans: a 16 KiB head trickled one byte at a time.
    let pad = "p".repeat(DEFAULT_LIMIT - 400);
    let req = request_with(&format!("X-Pad: {pad}\r\n"));
    assert!(req.len() < DEFAULT_LIMIT);
    let mut hs = ServerHandshake::new(&ServerConfig::default());
    let start = Instant::now();
    let mut answer = None;
    for (i, b) in req.iter().enumerate() {
        match hs.feed(std::slice::from_ref(b)) {
            Ok(None) => assert!(i + 1 < req.len()),
            Ok(Some(r)) => answer = Some(r),
            Err(e) => panic!("refused at byte {i}: {e}"),
        }
    }
    assert_eq!(answer.expect("accepted").path(), "/chat");
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
}

// ---------------------------------------------------------------------------------------
// Sans-IO client parser
// ---------------------------------------------------------------------------------------

fn client() -> ClientHandshake {
    let req = ClientRequest::new("example.com", "/");
    ClientHandshake::with_key(&req, ClientConfig::default(), [7; 16])
        .unwrap()
        .0
}

#[test]
fn endless_response_header_is_response_too_large() {
    let mut hs = client();
    let mut r = hs.feed(b"HTTP/1.1 101 Switching Protocols\r\nX-Endless: ");
    let mut fed = 0;
    while let Ok(None) = r {
        assert!(hs.buffered() < DEFAULT_LIMIT);
        fed += 1000;
        assert!(fed < 10 * DEFAULT_LIMIT, "never refused");
        r = hs.feed(&[b'z'; 1000]);
    }
    assert_eq!(r.map(|_| ()), Err(ClientError::ResponseTooLarge));
}

#[test]
fn response_with_ten_thousand_headers_is_refused() {
    let headers: String = (0..10_000).map(|i| format!("X-{i}: v\r\n")).collect();
    let resp = format!("HTTP/1.1 101 Switching Protocols\r\n{headers}\r\n");
    let mut hs = client();
    assert_eq!(
        hs.feed(resp.as_bytes()).map(|_| ()),
        Err(ClientError::ResponseTooLarge)
    );
    let mut config = ClientConfig::default();
    config.max_response_size = 1 << 20;
    let req = ClientRequest::new("example.com", "/");
    let mut hs = ClientHandshake::with_key(&req, config, [7; 16]).unwrap().0;
    assert_eq!(
        hs.feed(resp.as_bytes()).map(|_| ()),
        Err(ClientError::TooManyHeaders)
    );
}

// ---------------------------------------------------------------------------------------
// The tokio layer, on the paused clock
// ---------------------------------------------------------------------------------------

#[cfg(feature = "tokio")]
mod over_tokio {
    use super::*;
    use rapidws::tokio::{Error, Timeout, accept, client_handshake};
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream, duplex};

    /// Writes `bytes` one byte per second (as long as the other end is there).
    async fn trickle(mut io: DuplexStream, bytes: Vec<u8>) -> usize {
        let mut sent = 0;
        for b in bytes {
            if io.write_all(&[b]).await.is_err() {
                break;
            }
            sent += 1;
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        sent
    }

    #[tokio::test(start_paused = true)]
    async fn one_byte_per_second_request_hits_the_handshake_timeout_at_10s() {
        let (server_io, client_io) = duplex(64 * 1024);
        let sender = tokio::spawn(trickle(client_io, request_with("")));
        let start = tokio::time::Instant::now();
        let r = accept(server_io, &rapidws::tokio::ServerConfig::default()).await;
        let took = start.elapsed();
        assert!(
            matches!(r, Err(Error::Timeout(Timeout::Handshake))),
            "{r:?}"
        );
        // The default handshake timeout is a deadline for the whole head, not an idle timer:
        // steady progress does not extend it.
        assert_eq!(took, Duration::from_secs(10));
        let sent = sender.await.unwrap();
        assert!((10..=12).contains(&sent), "{sent} bytes trickled");
    }

    #[tokio::test(start_paused = true)]
    async fn one_byte_per_second_response_hits_the_client_handshake_timeout() {
        let (client_io, server_io) = duplex(64 * 1024);
        // The "server" reads the request, then trickles an endless response.
        let server = tokio::spawn(async move {
            let mut io = server_io;
            let mut req = vec![0u8; 4096];
            let _ = io.read(&mut req).await;
            trickle(io, b"HTTP/1.1 101 Switching Protocols\r\n".repeat(10)).await
        });
        let config = rapidws::tokio::ClientConfig::default();
        let start = tokio::time::Instant::now();
        let r = client_handshake(client_io, "example.com", "/", &config).await;
        assert!(
            matches!(r, Err(Error::Timeout(Timeout::Handshake))),
            "{r:?}"
        );
        assert_eq!(start.elapsed(), Duration::from_secs(10));
        server.abort();
    }

    /// Sends `request` to a server over a duplex stream; returns the server's result and the
    /// response the client read.
    async fn refused_over_tokio(request: Vec<u8>) -> (Result<(), Error>, String) {
        let (server_io, mut client_io) = duplex(1 << 20);
        let server = tokio::spawn(async move {
            accept(server_io, &rapidws::tokio::ServerConfig::default())
                .await
                .map(|_| ())
        });
        // The server may refuse before all of it is written; that is fine.
        let _ = client_io.write_all(&request).await;
        let mut response = Vec::new();
        let _ = tokio::time::timeout(
            Duration::from_secs(30),
            client_io.read_to_end(&mut response),
        )
        .await
        .expect("the server closed the stream after refusing");
        let r = server.await.unwrap();
        (r, String::from_utf8_lossy(&response).into_owned())
    }

    #[tokio::test(start_paused = true)]
    async fn oversized_request_over_tokio_gets_a_431_response() {
        let big = request_with(&format!("X-Pad: {}\r\n", "p".repeat(64 * 1024)));
        let (r, response) = refused_over_tokio(big).await;
        assert!(
            matches!(r, Err(Error::ServerHandshake(ServerError::RequestTooLarge))),
            "{r:?}"
        );
        assert!(response.starts_with("HTTP/1.1 431 "), "{response}");
        assert!(response.contains("Connection: close"));
    }

    #[tokio::test(start_paused = true)]
    async fn ten_thousand_headers_over_tokio_get_a_431_response() {
        let headers: String = (0..10_000).map(|i| format!("X-{i}: v\r\n")).collect();
        let (r, response) = refused_over_tokio(request_with(&headers)).await;
        assert!(
            matches!(r, Err(Error::ServerHandshake(ServerError::RequestTooLarge))),
            "{r:?}"
        );
        assert!(response.starts_with("HTTP/1.1 431 "), "{response}");
    }

    #[tokio::test(start_paused = true)]
    async fn endless_header_line_over_tokio_gets_a_431_response() {
        let mut endless = b"GET / HTTP/1.1\r\nHost: x\r\nX-Endless: ".to_vec();
        endless.extend(std::iter::repeat_n(b'a', 256 * 1024));
        let (r, response) = refused_over_tokio(endless).await;
        assert!(
            matches!(r, Err(Error::ServerHandshake(ServerError::RequestTooLarge))),
            "{r:?}"
        );
        assert!(response.starts_with("HTTP/1.1 431 "), "{response}");
    }

    #[tokio::test(start_paused = true)]
    async fn client_vanishing_mid_request_is_an_unexpected_eof() {
        let (server_io, mut client_io) = duplex(4096);
        let server = tokio::spawn(async move {
            accept(server_io, &rapidws::tokio::ServerConfig::default())
                .await
                .map(|_| ())
        });
        client_io
            .write_all(b"GET / HTTP/1.1\r\nHost: ")
            .await
            .unwrap();
        drop(client_io);
        let r = server.await.unwrap();
        assert!(matches!(&r, Err(e) if e.is_unexpected_eof()), "{r:?}");
    }
}
