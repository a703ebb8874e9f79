//! Hostile peers against the tokio layer over real loopback sockets: ping floods from a
//! peer that never reads, a reader that never reads while we send, peers vanishing in the
//! middle of a frame, and protocol violations whose close code must reach the wire.
//!
//! Every wait is bounded; socket buffers are made small so backpressure comes quickly.
#![cfg(feature = "tokio")]

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use rapidws::codec::ProtocolError;
use rapidws::tokio::{Config, Error, Message, ServerConfig, Timeout, TrySendError, WebSocket};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

mod alloc_count;
mod hostile_support;
use alloc_count::peak_during;
use hostile_support::raw_frame;

/// Every step of these tests finishes within this, or the test fails.
const STEP: Duration = Duration::from_secs(20);

async fn bounded<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(STEP, f)
        .await
        .expect("test step timed out")
}

/// A loopback listener whose accepted sockets have small kernel buffers.
fn small_buffer_listener() -> (TcpListener, SocketAddr) {
    let s = TcpSocket::new_v4().unwrap();
    s.set_send_buffer_size(16 * 1024).unwrap();
    s.set_recv_buffer_size(16 * 1024).unwrap();
    s.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let l = s.listen(16).unwrap();
    let a = l.local_addr().unwrap();
    (l, a)
}

/// A loopback client socket with small kernel buffers.
async fn small_buffer_connect(addr: SocketAddr) -> TcpStream {
    let s = TcpSocket::new_v4().unwrap();
    s.set_send_buffer_size(16 * 1024).unwrap();
    s.set_recv_buffer_size(16 * 1024).unwrap();
    s.connect(addr).await.unwrap()
}

const UPGRADE: &[u8] = b"GET / HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n\
Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
Sec-WebSocket-Version: 13\r\n\r\n";

/// A hand-rolled client: sends the upgrade request and reads the 101 head.
async fn raw_client(addr: SocketAddr) -> TcpStream {
    let mut s = small_buffer_connect(addr).await;
    s.write_all(UPGRADE).await.unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(bounded(s.read(&mut byte)).await.unwrap(), 1);
        head.push(byte[0]);
        assert!(head.len() < 4096);
    }
    assert!(head.starts_with(b"HTTP/1.1 101"), "{head:?}");
    s
}

/// Reads what the server sends until it closes the TCP connection; returns the close code
/// of the first close frame in it.
async fn read_close_code(s: &mut TcpStream) -> Option<u16> {
    let mut all = Vec::new();
    bounded(s.read_to_end(&mut all)).await.unwrap();
    let mut pos = 0;
    while pos + 2 <= all.len() {
        let op = all[pos] & 0x0f;
        let len = (all[pos + 1] & 0x7f) as usize;
        assert!(len < 126);
        if op == 0x8 {
            let p = &all[pos + 2..pos + 2 + len];
            return (p.len() >= 2).then(|| u16::from_be_bytes([p[0], p[1]]));
        }
        pos += 2 + len;
    }
    None
}

fn quiet_config() -> Config {
    // No keepalive pings of our own, so every byte on the wire is the test's.
    Config::default().with_keepalive(None, Duration::from_secs(30))
}

/// Accepts one connection with `config` on `listener`.
async fn accept_one(listener: &TcpListener, config: Config) -> WebSocket<TcpStream> {
    let (s, _) = bounded(listener.accept()).await.unwrap();
    bounded(rapidws::tokio::accept(
        s,
        &ServerConfig::default().with_connection(config),
    ))
    .await
    .unwrap()
}

// ---------------------------------------------------------------------------------------
// Floods and stalls
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn ping_flood_from_a_peer_that_never_reads_meets_backpressure_not_a_growing_queue() {
    let (l, addr) = small_buffer_listener();
    let server = tokio::spawn(async move {
        let mut ws = accept_one(&l, quiet_config()).await;
        let mut most_queued = 0usize;
        let mut pings = 0usize;
        // Keep receiving for a while; every receive call also tries to write pongs.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
        while tokio::time::Instant::now() < deadline {
            match tokio::time::timeout(Duration::from_millis(100), ws.recv()).await {
                Ok(Ok(Some(Message::Ping(_)))) => pings += 1,
                Ok(other) => panic!("unexpected {other:?}"),
                Err(_) => {}
            }
            most_queued = most_queued.max(ws.queued_bytes());
        }
        (most_queued, pings)
    });
    let mut flooder = raw_client(addr).await;
    let ping = raw_frame(0x89, 125, &[0x5a; 125]);
    let burst: Vec<u8> = ping.repeat(64);
    let mut sent = 0usize;
    let mut blocked = false;
    // Bounded: at most 64 MiB of pings are offered before the server must push back.
    while sent < 64 << 20 {
        match tokio::time::timeout(Duration::from_millis(500), flooder.write_all(&burst)).await {
            Ok(Ok(())) => sent += burst.len(),
            Ok(Err(e)) => panic!("the server dropped the flooder: {e}"),
            Err(_) => {
                blocked = true;
                break;
            }
        }
    }
    let (most_queued, pings) = bounded(server).await.unwrap();
    eprintln!(
        "ping flood: {sent} bytes sent before blocking, {pings} pings read, {most_queued} bytes queued at most"
    );
    assert!(
        blocked,
        "the flood was never pushed back ({sent} bytes sent)"
    );
    // The engine stops reading while pongs wait for the socket: what it queued is bounded
    // by one read's worth of pings, whatever the flooder offered.
    assert!(
        most_queued <= 512 * 1024,
        "{most_queued} bytes of pongs queued for {sent} bytes of pings"
    );
    let ping_bytes = pings * ping.len();
    assert!(
        ping_bytes <= sent,
        "{pings} pings received, {sent} bytes sent"
    );
    drop(flooder);
}

#[tokio::test]
async fn reader_that_never_reads_gets_queue_full_and_its_queue_stays_bounded() {
    let (l, addr) = small_buffer_listener();
    let high_water = 64 * 1024;
    let server = tokio::spawn(async move {
        let mut ws = accept_one(&l, quiet_config().with_send_queue_high_water(high_water)).await;
        let msg = Bytes::from(vec![9u8; 8 * 1024]);
        let mut accepted = 0usize;
        let mut full = false;
        // Bounded: 16 MiB offered at most. A short flush between tries lets the engine
        // write what the socket takes.
        for _ in 0..2048 {
            match ws.try_send(Message::Binary(msg.clone())) {
                Ok(()) => accepted += 1,
                Err(TrySendError::QueueFull(m)) => {
                    assert_eq!(m.len(), msg.len(), "the refused message is handed back");
                    let _ = tokio::time::timeout(Duration::from_millis(100), ws.flush()).await;
                    // Still no room after the socket took what it would: the peer is stuck.
                    if ws.queued_bytes() + msg.len() > high_water {
                        full = true;
                        break;
                    }
                }
                Err(e) => panic!("{e}"),
            }
        }
        (full, accepted, ws.queued_bytes(), ws)
    });
    let mut stalled = raw_client(addr).await;
    let (full, accepted, queued, ws) = bounded(server).await.unwrap();
    assert!(full, "never QueueFull after {accepted} messages");
    assert!(
        queued <= high_water + 8 * 1024 + 14,
        "{queued} bytes queued"
    );
    // Dropping the connection frees it; the stalled peer sees the TCP connection end.
    drop(ws);
    let mut sink = Vec::new();
    // It reads what was written before the drop, then EOF (or a reset).
    let _ = bounded(stalled.read_to_end(&mut sink)).await;
}

#[tokio::test]
async fn close_to_a_peer_that_never_reads_gives_up_after_the_close_timeout() {
    let (l, addr) = small_buffer_listener();
    let server = tokio::spawn(async move {
        let mut ws = accept_one(
            &l,
            quiet_config()
                .with_send_queue_high_water(64 * 1024)
                .with_close_timeout(Duration::from_millis(500)),
        )
        .await;
        // Fill the socket and the queue: the peer never reads.
        let msg = Bytes::from(vec![1u8; 32 * 1024]);
        for _ in 0..512 {
            if ws.try_send(Message::Binary(msg.clone())).is_err() {
                let _ = tokio::time::timeout(Duration::from_millis(100), ws.flush()).await;
                if ws.try_send(Message::Binary(msg.clone())).is_err() {
                    break;
                }
            }
        }
        assert!(ws.queued_bytes() > 0);
        let start = tokio::time::Instant::now();
        let r = tokio::time::timeout(Duration::from_secs(10), ws.close(1000, "")).await;
        (
            r.map_err(|_| "close() did not return within 10 s"),
            start.elapsed(),
        )
    });
    let _stalled = raw_client(addr).await;
    let (r, took) = bounded(server).await.unwrap();
    let r = r.expect("close() must be bounded by the close timeout");
    assert!(matches!(r, Err(Error::Timeout(Timeout::Close))), "{r:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");
}

#[test]
fn frame_announcing_1_gib_then_stalling_holds_at_most_the_read_ahead_limit() {
    // Limits raised so that the header passes: only the read-ahead limit bounds the room
    // the engine reserves for a payload that was announced but never sent.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let limit = 256 << 10;
    let config = quiet_config()
        .with_max_frame_size(2 << 30)
        .with_max_message_size(2 << 30)
        .with_max_read_ahead(limit);
    let (mut ws, _client) = rt.block_on(async {
        let (l, addr) = small_buffer_listener();
        let (ws, mut client) = tokio::join!(accept_one(&l, config), raw_client(addr));
        client
            .write_all(&raw_frame(0x82, 1 << 30, &[3; 10]))
            .await
            .unwrap();
        (ws, client)
    });
    // The server reads the header and the 10 bytes, then waits for the rest.
    let (r, peak) = peak_during(|| {
        rt.block_on(async { tokio::time::timeout(Duration::from_millis(300), ws.recv()).await })
    });
    assert!(r.is_err(), "the message cannot have completed: {r:?}");
    assert!(
        peak <= limit + 64 * 1024,
        "announcing 1 GiB and sending 10 bytes held {peak} bytes"
    );
}

// ---------------------------------------------------------------------------------------
// Peers vanishing mid-frame
// ---------------------------------------------------------------------------------------

async fn vanish_after(bytes: Vec<u8>) -> Result<Option<Message>, Error> {
    let (l, addr) = small_buffer_listener();
    let server = tokio::spawn(async move {
        let mut ws = accept_one(&l, quiet_config()).await;
        let mut last = Ok(None);
        for _ in 0..10 {
            last = ws.recv().await;
            if !matches!(last, Ok(Some(_))) {
                break;
            }
        }
        last
    });
    let mut c = raw_client(addr).await;
    c.write_all(&bytes).await.unwrap();
    drop(c);
    bounded(server).await.unwrap()
}

#[tokio::test]
async fn peer_closing_tcp_mid_payload_is_an_unexpected_eof() {
    let frame = raw_frame(0x82, 1000, &[7u8; 10]);
    let r = vanish_after(frame).await;
    assert!(matches!(&r, Err(e) if e.is_unexpected_eof()), "{r:?}");
}

#[tokio::test]
async fn peer_closing_tcp_mid_header_is_an_unexpected_eof() {
    // Two bytes of a 14-byte header.
    let frame = raw_frame(0x82, 1 << 20, &[]);
    let r = vanish_after(frame[..2].to_vec()).await;
    assert!(matches!(&r, Err(e) if e.is_unexpected_eof()), "{r:?}");
}

#[tokio::test]
async fn peer_closing_tcp_mid_fragmented_message_is_an_unexpected_eof() {
    let mut bytes = raw_frame(0x01, 5, b"hello");
    bytes.extend(raw_frame(0x00, 5, b" worl"));
    let r = vanish_after(bytes).await;
    assert!(matches!(&r, Err(e) if e.is_unexpected_eof()), "{r:?}");
}

#[tokio::test]
async fn server_vanishing_mid_frame_is_an_unexpected_eof_for_the_client() {
    let (l, addr) = small_buffer_listener();
    tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        let mut req = vec![0u8; 4096];
        let mut n = 0;
        while !req[..n].ends_with(b"\r\n\r\n") {
            n += s.read(&mut req[n..]).await.unwrap();
        }
        // Answer with the right accept key for the client's request.
        let head = String::from_utf8_lossy(&req[..n]).into_owned();
        let client_key = head
            .lines()
            .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
            .unwrap()
            .trim()
            .to_owned();
        let resp = format!(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Accept: {}\r\n\r\n",
            rapidws::handshake::accept_key(client_key.as_bytes())
        );
        s.write_all(resp.as_bytes()).await.unwrap();
        // An unmasked binary frame announcing 100 bytes, 3 sent, then gone.
        s.write_all(&[0x82, 100, 1, 2, 3]).await.unwrap();
    });
    let config = rapidws::tokio::ClientConfig::default().with_connection(quiet_config());
    let mut ws = bounded(rapidws::tokio::connect(&format!("ws://{addr}/"), &config))
        .await
        .unwrap();
    let r = bounded(ws.recv()).await;
    assert!(matches!(&r, Err(e) if e.is_unexpected_eof()), "{r:?}");
    // After the error, nothing more: no hang, no second error.
    assert!(matches!(bounded(ws.recv()).await, Ok(None)));
}

// ---------------------------------------------------------------------------------------
// Violations whose close code must reach the wire
// ---------------------------------------------------------------------------------------

/// Sends `bytes` from a raw client; returns the server's error and the close code the
/// raw client received before the server closed TCP.
async fn violation(
    bytes: Vec<u8>,
    config: Config,
) -> (Result<Option<Message>, Error>, Option<u16>) {
    let (l, addr) = small_buffer_listener();
    let server = tokio::spawn(async move {
        let mut ws = accept_one(&l, config).await;
        let mut last = Ok(None);
        for _ in 0..10 {
            last = ws.recv().await;
            if !matches!(last, Ok(Some(_))) {
                break;
            }
        }
        last
    });
    let mut c = raw_client(addr).await;
    c.write_all(&bytes).await.unwrap();
    let code = read_close_code(&mut c).await;
    // The server shut down first; our end closing ends its teardown (else it would wait
    // for it until the close timeout).
    drop(c);
    (bounded(server).await.unwrap(), code)
}

#[tokio::test]
async fn header_announcing_2_pow_62_bytes_gets_1009_on_the_wire() {
    let (r, code) = violation(raw_frame(0x82, 1 << 62, &[]), quiet_config()).await;
    assert!(
        matches!(r, Err(Error::Protocol(ProtocolError::FrameTooLarge))),
        "{r:?}"
    );
    assert_eq!(code, Some(1009));
}

#[tokio::test]
async fn header_announcing_2_pow_63_bytes_gets_1002_on_the_wire() {
    let (r, code) = violation(raw_frame(0x82, 1 << 63, &[]), quiet_config()).await;
    assert!(
        matches!(r, Err(Error::Protocol(ProtocolError::LengthOverflow))),
        "{r:?}"
    );
    assert_eq!(code, Some(1002));
}

#[tokio::test]
async fn invalid_close_code_gets_1002_on_the_wire() {
    let (r, code) = violation(raw_frame(0x88, 2, &1005u16.to_be_bytes()), quiet_config()).await;
    assert!(
        matches!(
            r,
            Err(Error::Protocol(ProtocolError::InvalidCloseCode(1005)))
        ),
        "{r:?}"
    );
    assert_eq!(code, Some(1002));
}

#[tokio::test]
async fn invalid_utf8_close_reason_gets_1007_on_the_wire() {
    let mut payload = 1000u16.to_be_bytes().to_vec();
    payload.extend_from_slice(b"\xc3\x28");
    let (r, code) = violation(raw_frame(0x88, 4, &payload), quiet_config()).await;
    assert!(
        matches!(r, Err(Error::Protocol(ProtocolError::InvalidUtf8))),
        "{r:?}"
    );
    assert_eq!(code, Some(1007));
}

#[tokio::test]
async fn rsv1_without_negotiation_gets_1002_on_the_wire() {
    let (r, code) = violation(raw_frame(0xC1, 2, b"hi"), quiet_config()).await;
    assert!(
        matches!(r, Err(Error::Protocol(ProtocolError::ReservedBits))),
        "{r:?}"
    );
    assert_eq!(code, Some(1002));
}

#[tokio::test]
async fn unknown_opcode_gets_1002_on_the_wire() {
    let (r, code) = violation(raw_frame(0x83, 0, &[]), quiet_config()).await;
    assert!(
        matches!(r, Err(Error::Protocol(ProtocolError::UnknownOpcode(3)))),
        "{r:?}"
    );
    assert_eq!(code, Some(1002));
}

#[tokio::test]
async fn data_after_close_is_ignored_and_the_close_is_echoed() {
    let mut bytes = raw_frame(0x88, 2, &1000u16.to_be_bytes());
    bytes.extend(raw_frame(0x81, 5, b"after"));
    bytes.extend_from_slice(&[0xff; 32]);
    let (r, code) = violation(bytes, quiet_config()).await;
    // The close was the last message; the rest was never parsed.
    assert!(matches!(r, Ok(None)), "{r:?}");
    assert_eq!(code, Some(1000));
}

#[cfg(feature = "deflate")]
#[tokio::test]
async fn compressed_message_inflating_past_the_limit_gets_1009_on_the_wire() {
    use rapidws::deflate::DeflateConfig;
    let (l, addr) = small_buffer_listener();
    let server = tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        let config = ServerConfig::default()
            .with_connection(quiet_config().with_max_message_size(1 << 20))
            .with_deflate(Some(DeflateConfig::new()));
        let mut ws = bounded(rapidws::tokio::accept(s, &config)).await.unwrap();
        ws.recv().await
    });
    // A well-behaved client sending a message the server's limit does not allow: 16 MiB of
    // zeros compress to a few KiB.
    let config = rapidws::tokio::ClientConfig::default()
        .with_connection(quiet_config().with_max_message_size(32 << 20))
        .with_deflate(Some(DeflateConfig::new().level(9)));
    let mut ws = bounded(rapidws::tokio::connect(&format!("ws://{addr}/"), &config))
        .await
        .unwrap();
    bounded(ws.send(Message::Binary(Bytes::from(vec![0u8; 16 << 20]))))
        .await
        .unwrap();
    let r = bounded(server).await.unwrap();
    assert!(
        matches!(
            r,
            Err(Error::Deflate(rapidws::deflate::DeflateError::TooLarge))
        ),
        "{r:?}"
    );
    match bounded(ws.recv()).await {
        Ok(Some(Message::Close(Some(f)))) => assert_eq!(f.code, 1009),
        other => panic!("expected close 1009, got {other:?}"),
    }
}

/// The connection's clock only moves when bytes arrive or a timer runs; a close sent after
/// a long quiet spell must still give the peer the whole close timeout to answer.
#[tokio::test(start_paused = true)]
async fn close_after_a_quiet_spell_still_waits_for_the_peers_answer() {
    let (a, b) = tokio::io::duplex(64 * 1024);
    let config = quiet_config().with_close_timeout(Duration::from_secs(5));
    let mut client = WebSocket::from_raw(a, rapidws::Role::Client, &config, &[]);
    let mut server = WebSocket::from_raw(b, rapidws::Role::Server, &config, &[]);
    // The server answers after 1 s: well within the close timeout.
    let server = tokio::spawn(async move {
        let first = server.recv().await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let rest = server.recv().await;
        (first.map(|m| m.is_some()), rest.map(|m| m.is_none()))
    });
    // Quiet for longer than the close timeout.
    tokio::time::sleep(Duration::from_secs(60)).await;
    let r = client.close(1000, "bye").await;
    assert!(r.is_ok(), "{r:?}");
    let (first, rest) = server.await.unwrap();
    assert!(matches!(first, Ok(true)) && matches!(rest, Ok(true)));
}
