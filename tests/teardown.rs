//! One teardown rule in both IO layers (RFC 6455 7.1.1): after the close handshake the
//! server shuts TCP down first and the client waits for that; the wait for the peer's
//! close and for its FIN is `close_timeout` in both. Each peer here is a raw TCP socket,
//! so the test sees exactly when our side sends its FIN.

#![cfg(all(feature = "tokio", feature = "blocking"))]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::thread;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf};

use rapidws::{ClientConfig, CloseCode, Config, Error, ServerConfig, Timeout, blocking};

const UPGRADE: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\
    Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
    Sec-WebSocket-Version: 13\r\n\r\n";
/// A masked close with code 1000, as a client sends it.
const CLIENT_CLOSE: &[u8] = &[0x88, 0x82, 0, 0, 0, 0, 0x03, 0xe8];
/// An unmasked close with code 1000, as a server sends it.
const SERVER_CLOSE: &[u8] = &[0x88, 0x02, 0x03, 0xe8];

fn quick() -> Config {
    Config::default().with_close_timeout(Duration::from_millis(400))
}

/// Reads until `n` bytes (or the end, or the timeout) arrived.
fn read_n(s: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut out = vec![0; n];
    let mut got = 0;
    while got < n {
        match s.read(&mut out[got..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => got += k,
        }
    }
    out.truncate(got);
    out
}

/// Reads the head of an HTTP message (through the blank line).
fn read_head(s: &mut TcpStream) -> Vec<u8> {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut b).unwrap_or(0) == 0 {
            break;
        }
        head.push(b[0]);
    }
    head
}

/// Reads a client's upgrade request and answers it with a 101.
fn accept_raw(s: &mut TcpStream) {
    let head = String::from_utf8(read_head(s)).unwrap();
    let key = head
        .lines()
        .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
        .expect("a key");
    let accept = rapidws::handshake::accept_key(key.trim().as_bytes());
    let response = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
         Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
    );
    s.write_all(response.as_bytes()).unwrap();
}

/// Whether the peer has shut its side down: a read returns 0 within `within`.
fn sees_fin(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let mut b = [0u8; 64];
    matches!(s.read(&mut b), Ok(0))
}

/// A raw client against our server, whichever layer serves: it sends its close, reads the
/// echo, and checks that the server shuts down first while it still holds its end open.
fn raw_client_sees_the_server_shut_down_first(addr: std::net::SocketAddr) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(UPGRADE).unwrap();
    assert!(read_head(&mut s).starts_with(b"HTTP/1.1 101"));
    s.write_all(CLIENT_CLOSE).unwrap();
    assert_eq!(read_n(&mut s, 4), SERVER_CLOSE, "the echo");
    assert!(
        sees_fin(&mut s, Duration::from_secs(2)),
        "the server shuts TCP down first (RFC 6455 7.1.1)"
    );
    drop(s);
}

/// A raw server against our client: after the close handshake our client must not shut
/// down before the server does; once the server has, the client follows.
fn raw_server_sees_the_client_wait_for_it(listener: TcpListener) -> Duration {
    let (mut s, _) = listener.accept().unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    accept_raw(&mut s);
    s.write_all(SERVER_CLOSE).unwrap();
    let echo = read_n(&mut s, 8);
    assert_eq!((echo[0], echo[1] & 0x7f), (0x88, 2), "a masked close echo");
    assert!(
        !sees_fin(&mut s, Duration::from_millis(250)),
        "the client waits for the server's FIN"
    );
    let started = Instant::now();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    assert!(sees_fin(&mut s, Duration::from_secs(2)), "then it closes");
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_server_shuts_down_first() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (s, _) = listener.accept().await.unwrap();
        let config = ServerConfig::default().with_connection(quick());
        let mut ws = rapidws::tokio::accept(s, &config).await.unwrap();
        let mut seen = Vec::new();
        while let Some(m) = ws.recv().await.unwrap() {
            seen.push(m);
        }
        seen
    });
    tokio::task::spawn_blocking(move || raw_client_sees_the_server_shut_down_first(addr))
        .await
        .unwrap();
    let seen = tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(seen.len(), 1, "the client's close, then Ok(None): {seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_client_waits_for_the_server_to_shut_down() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("ws://{}/", listener.local_addr().unwrap());
    let raw = thread::spawn(move || raw_server_sees_the_client_wait_for_it(listener));
    let config = ClientConfig::default().with_connection(quick());
    let mut ws = rapidws::tokio::connect(&url, &config).await.unwrap();
    while ws.recv().await.unwrap().is_some() {}
    let client_follow = raw.join().unwrap();
    assert!(client_follow < Duration::from_secs(1), "{client_follow:?}");
}

#[test]
fn blocking_server_shuts_down_first() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = thread::spawn(move || {
        let (s, _) = listener.accept().unwrap();
        let config = ServerConfig::default().with_connection(quick());
        let mut ws = blocking::accept(s, &config).unwrap();
        let mut seen = 0;
        while ws.read().unwrap().is_some() {
            seen += 1;
        }
        seen
    });
    raw_client_sees_the_server_shut_down_first(addr);
    assert_eq!(server.join().unwrap(), 1);
}

#[test]
fn blocking_client_waits_for_the_server_to_shut_down() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("ws://{}/", listener.local_addr().unwrap());
    let raw = thread::spawn(move || raw_server_sees_the_client_wait_for_it(listener));
    // No socket read timeout: the connection's own deadlines bound every read.
    let config = ClientConfig::default()
        .with_connection(quick())
        .with_read_timeout(None);
    let mut ws = blocking::connect(&url, &config).unwrap();
    while ws.read().unwrap().is_some() {}
    let client_follow = raw.join().unwrap();
    assert!(client_follow < Duration::from_secs(1), "{client_follow:?}");
}

/// A raw server that completes the handshake and then never answers anything, holding
/// the connection open until the test sends on (or drops) the returned sender: the
/// close timeout, not the end of the stream, ends the wait however slowly the test runs.
fn silent_server() -> (String, thread::JoinHandle<()>, std::sync::mpsc::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("ws://{}/", listener.local_addr().unwrap());
    let (done, done_rx) = std::sync::mpsc::channel::<()>();
    let h = thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        accept_raw(&mut s);
        let _ = done_rx.recv();
    });
    (url, h, done)
}

/// Above the close timeout (400 ms) and below the default one (5 s): the configured
/// timeout ended the wait. Not a measure of speed: a starved machine has 4 s to spare.
const CLOSE_WITHIN: Duration = Duration::from_millis(4500);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_close_timeout_bounds_the_wait_for_an_answer() {
    let (url, h, done) = silent_server();
    let config = ClientConfig::default().with_connection(quick());
    let mut ws = rapidws::tokio::connect(&url, &config).await.unwrap();
    let started = Instant::now();
    let err = ws.close(CloseCode::NORMAL, "").await.unwrap_err();
    assert!(matches!(err, Error::Timeout(Timeout::Close)), "{err:?}");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(400) && took < CLOSE_WITHIN,
        "{took:?}"
    );
    drop(done);
    h.join().unwrap();
}

#[test]
fn blocking_close_timeout_bounds_the_wait_for_an_answer() {
    let (url, h, done) = silent_server();
    // No socket read timeout: the close timeout alone bounds the wait.
    let config = ClientConfig::default()
        .with_connection(quick())
        .with_read_timeout(None);
    let mut ws = blocking::connect(&url, &config).unwrap();
    let started = Instant::now();
    let err = ws.close(CloseCode::NORMAL, "").unwrap_err();
    assert!(matches!(err, Error::Timeout(Timeout::Close)), "{err:?}");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(400) && took < CLOSE_WITHIN,
        "{took:?}"
    );
    drop(done);
    h.join().unwrap();
}

/// A transport whose shutdown finishes in another task, as an HTTP/2 stream's does (hyper
/// sends END_STREAM from the task that owns the stream): the first `poll_shutdown` hands
/// the work over and is pending until that task has run. Reads that find the end are
/// counted.
struct DeferredShutdown {
    inner: DuplexStream,
    ends_read: Arc<AtomicUsize>,
    finished: Arc<AtomicBool>,
    handed_over: bool,
}

impl AsyncRead for DeferredShutdown {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() == before {
            self.ends_read.fetch_add(1, Ordering::Relaxed);
        }
        r
    }
}

impl AsyncWrite for DeferredShutdown {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if self.finished.load(Ordering::Relaxed) {
            return Pin::new(&mut self.inner).poll_shutdown(cx);
        }
        if !self.handed_over {
            self.handed_over = true;
            let (finished, waker) = (self.finished.clone(), cx.waker().clone());
            tokio::spawn(async move {
                finished.store(true, Ordering::Relaxed);
                waker.wake();
            });
        }
        Poll::Pending
    }
}

/// After the server's end arrives, a client whose shutdown is still in progress waits for
/// it instead of reading the end again and again. On one thread such a loop would keep
/// the task that finishes the shutdown from running until the close timeout.
#[tokio::test(flavor = "current_thread")]
async fn tokio_client_waits_for_a_shutdown_in_progress_without_reading_the_end_again() {
    let (a, b) = tokio::io::duplex(1 << 16);
    let ends_read = Arc::new(AtomicUsize::new(0));
    let finished = Arc::new(AtomicBool::new(false));
    let transport = DeferredShutdown {
        inner: a,
        ends_read: ends_read.clone(),
        finished: finished.clone(),
        handed_over: false,
    };
    let config = Config::default().with_close_timeout(Duration::from_secs(30));
    let mut client =
        rapidws::tokio::WebSocket::from_raw(transport, rapidws::Role::Client, &config, &[]);
    let mut server = rapidws::tokio::WebSocket::from_raw(b, rapidws::Role::Server, &config, &[]);
    let server = tokio::spawn(async move { while server.recv().await.unwrap().is_some() {} });
    client.close(CloseCode::NORMAL, "bye").await.unwrap();
    assert!(finished.load(Ordering::Relaxed), "the shutdown finished");
    assert_eq!(
        ends_read.load(Ordering::Relaxed),
        1,
        "the server's end is read once"
    );
    server.await.unwrap();
}
