//! The blocking layer over loopback TCP: echo, close from either side, automatic pongs,
//! protocol errors answered with their close code.
#![cfg(feature = "blocking")]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

use rapidws::blocking::{self, ClientConfig, CloseFrame, Error, Message, ServerConfig};

const TIMEOUT: Option<Duration> = Some(Duration::from_secs(10));

/// A server thread accepting one connection and running `f` on it.
fn server<T: Send + 'static>(
    config: ServerConfig,
    f: impl FnOnce(blocking::WebSocket<TcpStream>) -> T + Send + 'static,
) -> (String, thread::JoinHandle<T>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("ws://{}/", listener.local_addr().unwrap());
    let h = thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        stream.set_read_timeout(TIMEOUT).unwrap();
        f(blocking::accept(stream, &config).unwrap())
    });
    (url, h)
}

/// Echoes data messages until the connection ends; returns the peer's close frame.
fn echo(mut ws: blocking::WebSocket<TcpStream>) -> Option<CloseFrame> {
    while let Some(msg) = ws.read().unwrap() {
        if msg.is_data() {
            ws.send(msg).unwrap();
        }
    }
    ws.close_frame().cloned()
}

fn client_config() -> ClientConfig {
    ClientConfig::default().with_read_timeout(TIMEOUT)
}

#[test]
fn echoes_text_and_binary_of_many_sizes_then_closes_from_client() {
    let (url, h) = server(ServerConfig::default(), echo);
    let mut ws = blocking::connect(&url, &client_config()).unwrap();
    ws.send(Message::text("hello")).unwrap();
    assert_eq!(ws.read().unwrap(), Some(Message::text("hello")));
    for len in [0usize, 1, 125, 126, 65535, 65536, 3 << 20] {
        let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
        ws.send_binary(&data).unwrap();
        assert_eq!(ws.read().unwrap(), Some(Message::binary(data)), "len {len}");
    }
    ws.close(1000, "done").unwrap();
    // The echo carries our code back (RFC 6455 5.5.1), without the reason.
    assert_eq!(ws.close_frame().map(|c| c.code.0), Some(1000));
    assert_eq!(ws.read().unwrap(), None);
    let seen = h.join().unwrap();
    assert_eq!(seen, Some(CloseFrame::new(1000, "done")));
}

#[cfg(feature = "deflate")]
#[test]
fn echoes_with_permessage_deflate_negotiated() {
    use rapidws::deflate::DeflateConfig;
    let (url, h) = server(
        ServerConfig::default().with_deflate(Some(DeflateConfig::default())),
        echo,
    );
    let config = client_config().with_deflate(Some(DeflateConfig::default()));
    let mut ws = blocking::connect(&url, &config).unwrap();
    assert!(ws.is_deflate());
    let text = "compressible text ".repeat(10_000);
    ws.send_text(&text).unwrap();
    assert_eq!(ws.read().unwrap(), Some(Message::text(text)));
    ws.close(1000, "").unwrap();
    h.join().unwrap();
}

#[test]
fn server_initiated_close_is_echoed_and_reported_to_both() {
    let (url, h) = server(ServerConfig::default(), |mut ws| {
        ws.send_text("bye soon").unwrap();
        ws.close(4000, "server done").unwrap();
        ws.close_frame().cloned()
    });
    let mut ws = blocking::connect(&url, &client_config()).unwrap();
    assert_eq!(ws.read().unwrap(), Some(Message::text("bye soon")));
    assert_eq!(
        ws.read().unwrap(),
        Some(Message::Close(Some(CloseFrame::new(4000, "server done"))))
    );
    assert_eq!(ws.read().unwrap(), None);
    // The echo carries the same code back (RFC 6455 5.5.1).
    assert_eq!(h.join().unwrap().map(|c| c.code.0), Some(4000));
    assert!(matches!(ws.send_text("late"), Err(Error::Closed)));
}

#[test]
fn ping_is_answered_automatically_with_the_same_payload() {
    let (url, h) = server(ServerConfig::default(), echo);
    let mut ws = blocking::connect(&url, &client_config()).unwrap();
    ws.ping(b"are you there").unwrap();
    assert_eq!(
        ws.read().unwrap(),
        Some(Message::Pong(bytes::Bytes::from_static(b"are you there")))
    );
    ws.close(1000, "").unwrap();
    h.join().unwrap();
}

#[test]
fn server_sees_ping_from_client_and_client_gets_pong() {
    let (url, h) = server(ServerConfig::default(), |mut ws| {
        let first = ws.read().unwrap();
        while ws.read().unwrap().is_some() {}
        first
    });
    let mut ws = blocking::connect(&url, &client_config()).unwrap();
    ws.send(Message::Ping(bytes::Bytes::from_static(b"p")))
        .unwrap();
    assert_eq!(
        ws.read().unwrap(),
        Some(Message::Pong(bytes::Bytes::from_static(b"p")))
    );
    ws.close(1000, "").unwrap();
    assert_eq!(
        h.join().unwrap(),
        Some(Message::Ping(bytes::Bytes::from_static(b"p")))
    );
}

#[test]
fn unmasked_client_frame_fails_with_1002_close() {
    let (url, h) = server(ServerConfig::default(), |mut ws| ws.read());
    let addr = url.trim_start_matches("ws://").trim_end_matches('/');
    let mut raw = TcpStream::connect(addr).unwrap();
    raw.set_read_timeout(TIMEOUT).unwrap();
    raw.write_all(
        b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        raw.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    assert!(head.starts_with(b"HTTP/1.1 101"));
    // RFC 6455 5.1: a server MUST close the connection upon an unmasked client frame.
    raw.write_all(&[0x81, 0x02, b'h', b'i']).unwrap();
    let result = h.join().unwrap();
    assert!(matches!(result, Err(Error::Protocol(_))), "{result:?}");
    let mut frame = Vec::new();
    raw.read_to_end(&mut frame).unwrap();
    assert_eq!(frame[0], 0x88, "a close frame");
    assert_eq!(u16::from_be_bytes([frame[2], frame[3]]), 1002);
}

#[test]
fn peer_vanishing_without_close_is_unexpected_eof() {
    let (url, h) = server(ServerConfig::default(), |ws| drop(ws.into_inner()));
    let mut ws = blocking::connect(&url, &client_config()).unwrap();
    h.join().unwrap();
    let err = ws.read().unwrap_err();
    assert!(
        matches!(&err, Error::Io(e) if e.kind() == std::io::ErrorKind::UnexpectedEof),
        "{err:?}"
    );
    assert!(ws.read().unwrap().is_none());
}

#[test]
fn read_timeout_is_retryable_and_loses_nothing() {
    let (url, h) = server(ServerConfig::default(), |mut ws| {
        thread::sleep(Duration::from_millis(300));
        ws.send_text("late").unwrap();
        while ws.read().unwrap().is_some() {}
    });
    let config = client_config().with_read_timeout(Some(Duration::from_millis(50)));
    let mut ws = blocking::connect(&url, &config).unwrap();
    let mut timeouts = 0;
    let msg = loop {
        match ws.read() {
            Ok(m) => break m,
            // A hang guard (20 s of 50 ms timeouts), not a measure of speed.
            Err(e) if e.is_would_block() && timeouts < 400 => timeouts += 1,
            Err(e) => panic!("{e}"),
        }
    };
    assert!(timeouts >= 1);
    assert_eq!(msg, Some(Message::text("late")));
    ws.get_ref().set_read_timeout(TIMEOUT).unwrap();
    ws.close(1000, "").unwrap();
    h.join().unwrap();
}

/// Only a build without TLS refuses `wss://`; with feature `rustls` it connects.
#[cfg(not(feature = "rustls"))]
#[test]
fn wss_url_is_refused_without_tls() {
    let err = blocking::connect("wss://127.0.0.1:1/", &client_config()).unwrap_err();
    assert!(matches!(
        err,
        Error::Url(rapidws::url::UrlError::TlsUnavailable)
    ));
}

#[test]
fn close_to_a_silent_peer_ends_with_the_close_timeout() {
    let (done, done_rx) = std::sync::mpsc::channel::<()>();
    let (url, h) = server(ServerConfig::default(), move |ws| {
        // Never read: our close is never answered, until the test is done (however
        // slowly it runs, the close timeout comes first).
        let _ = done_rx.recv();
        drop(ws);
    });
    let mut config = client_config().with_read_timeout(Some(Duration::from_millis(50)));
    config.connection.close_timeout = Some(Duration::from_millis(300));
    let mut ws = blocking::connect(&url, &config).unwrap();
    let started = std::time::Instant::now();
    let err = ws.close(1000, "").unwrap_err();
    assert!(
        matches!(err, Error::Timeout(rapidws::connection::Timeout::Close)),
        "{err:?}"
    );
    // Below the default close timeout (5 s): the configured 300 ms ended it.
    assert!(started.elapsed() < Duration::from_millis(4500));
    drop(done);
    h.join().unwrap();
}
