#![cfg(all(feature = "tokio", feature = "blocking"))]
//! `Config::send_timeout`: a send to a peer that stopped reading fails on its own, with
//! `Timeout::Send` (close 1008), on every layer and send path, without a timer of the
//! application's own; a peer that reads slowly but steadily is never taken for one that
//! stopped.
mod tokio_support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rapidws::handler::{Handler, Socket, serve_handler};
use rapidws::tokio::{
    ClientConfig, Config, Error, Message, ServerConfig, Timeout, WebSocket, accept,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_support::{bounded, listener};

const SEND_TIMEOUT: Duration = Duration::from_millis(1000);
/// The most a stalled send may take to fail: the timeout, with room for a loaded machine.
const WITHIN: Duration = Duration::from_secs(15);

fn config() -> Config {
    Config::default().with_send_timeout(Some(SEND_TIMEOUT))
}

fn chunk() -> Message {
    Message::Binary(Bytes::from(vec![0x5a; 64 << 10]))
}

/// The client side of a handshake on `addr` that then never reads (it keeps the socket).
async fn client_that_never_reads(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    upgrade_request(&mut s).await;
    s
}

async fn upgrade_request(s: &mut TcpStream) {
    s.write_all(
        b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    .await
    .unwrap();
}

/// The server side of a handshake on the next connection, which then never reads.
async fn server_that_never_reads(l: tokio::net::TcpListener) -> TcpStream {
    let (mut s, _) = l.accept().await.unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut b).await.unwrap();
        assert!(n > 0);
        head.extend_from_slice(&b[..n]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let key = head
        .lines()
        .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
        .unwrap()
        .trim()
        .to_owned();
    let accept = rapidws::handshake::accept_key(key.as_bytes());
    s.write_all(
        format!(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Accept: {accept}\r\n\r\n"
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    s
}

/// Sends until a send fails: the error, and how long the sends took.
async fn send_until_it_fails<S>(ws: &mut WebSocket<S>) -> (Error, Duration)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let start = Instant::now();
    loop {
        if let Err(e) = ws.send(chunk()).await {
            return (e, start.elapsed());
        }
    }
}

fn assert_send_timeout(what: &str, e: &Error, took: Duration) {
    assert!(
        matches!(e, Error::Timeout(Timeout::Send)),
        "{what}: {e:?} after {took:?}"
    );
    assert!(
        (SEND_TIMEOUT..WITHIN).contains(&took),
        "{what}: failed after {took:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bare_send_to_a_client_that_never_reads_fails_at_the_send_timeout() {
    let (l, addr) = listener().await;
    let server = tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        let config = ServerConfig::default().with_connection(config());
        let mut ws = accept(s, &config).await.unwrap();
        send_until_it_fails(&mut ws).await
    });
    let _peer = client_that_never_reads(addr).await;
    let (e, took) = bounded(server).await.unwrap();
    assert_send_timeout("tokio server", &e, took);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bare_send_to_a_server_that_never_reads_fails_at_the_send_timeout() {
    let (l, addr) = listener().await;
    let peer = tokio::spawn(server_that_never_reads(l));
    let config = ClientConfig::default().with_connection(config());
    let mut ws = rapidws::tokio::connect(format!("ws://{addr}/"), &config)
        .await
        .unwrap();
    let _peer = peer.await.unwrap();
    let (e, took) = bounded(send_until_it_fails(&mut ws)).await;
    assert_send_timeout("tokio client", &e, took);
}

/// A split connection whose peer never reads: the write half sends (`feed`: waits for
/// room in the queue only; otherwise `send`: waits for the flush too) while the read half
/// waits in `recv`. Whichever task meets the send timeout first, both report it: the
/// send that was waiting fails with the timeout, not with a bare `Closed` (it did, now
/// and then, when the receiving task met it first and ended the connection).
async fn split_halves_end_at_the_send_timeout(feed: bool) {
    let (l, addr) = listener().await;
    let server = tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        let config = ServerConfig::default().with_connection(config());
        let (mut rd, mut wr) = accept(s, &config).await.unwrap().into_split();
        let reader = tokio::spawn(async move { rd.recv().await });
        let start = Instant::now();
        let e = loop {
            let r = if feed {
                wr.feed(chunk()).await
            } else {
                wr.send(chunk()).await
            };
            if let Err(e) = r {
                break e;
            }
        };
        (e, start.elapsed(), reader.await.unwrap())
    });
    let _peer = client_that_never_reads(addr).await;
    let (e, took, read) = bounded(server).await.unwrap();
    assert_send_timeout("write half", &e, took);
    assert!(
        matches!(read, Err(Error::Timeout(Timeout::Send))),
        "the read half: {read:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_write_half_and_its_read_half_both_end_at_the_send_timeout() {
    split_halves_end_at_the_send_timeout(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_feeding_write_half_and_its_read_half_both_end_at_the_send_timeout() {
    split_halves_end_at_the_send_timeout(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_try_send_queued_fails_the_receive_at_the_send_timeout() {
    let (l, addr) = listener().await;
    let server = tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        let config = ServerConfig::default().with_connection(config());
        let mut ws = accept(s, &config).await.unwrap();
        // Queued without waiting; the receive writes it, until the socket is full and
        // the peer stalls it.
        let start = Instant::now();
        loop {
            while ws.try_send(chunk()).is_ok() {}
            if let Ok(r) = tokio::time::timeout(Duration::from_millis(100), ws.recv()).await {
                break (r, start.elapsed());
            }
        }
    });
    let _peer = client_that_never_reads(addr).await;
    let (r, took) = bounded(server).await.unwrap();
    assert!(
        matches!(r, Err(Error::Timeout(Timeout::Send))),
        "{r:?} after {took:?}"
    );
    assert!(took < WITHIN, "{took:?}");
}

/// Sends a burst on open; reports how the connection ended.
struct Burst(tokio::sync::mpsc::UnboundedSender<Option<String>>);

impl Handler for Burst {
    fn on_open(&mut self, socket: &mut Socket<'_>) {
        for _ in 0..1024 {
            socket.send(chunk());
        }
    }
    fn on_close(&mut self, _: Option<&rapidws::CloseFrame>, error: Option<&Error>) {
        let _ = self.0.send(error.map(|e| format!("{e:?}")));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_whose_peer_never_reads_ends_at_the_send_timeout() {
    let (l, addr) = listener().await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let config = ServerConfig::default().with_connection(config());
    tokio::spawn(serve_handler(l, config, move |_| Burst(tx.clone())));
    let start = Instant::now();
    let _peer = client_that_never_reads(addr).await;
    let error = bounded(rx.recv()).await.unwrap();
    assert_eq!(error.as_deref(), Some("Timeout(Send)"));
    assert!(start.elapsed() < WITHIN, "{:?}", start.elapsed());
}

#[test]
fn a_bare_blocking_send_to_a_client_that_never_reads_fails_at_the_send_timeout() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _peer = rt.block_on(client_that_never_reads(addr));
    let (s, _) = l.accept().unwrap();
    let config = rapidws::blocking::ServerConfig::default().with_connection(config());
    let mut ws = rapidws::blocking::accept(s, &config).unwrap();
    let payload = vec![0x5a; 64 << 10];
    let start = Instant::now();
    let e = loop {
        if let Err(e) = ws.send_binary(&payload) {
            break e;
        }
    };
    assert_send_timeout("blocking server", &e, start.elapsed());
    // The socket's own write timeout is back once the connection has ended.
    assert_eq!(ws.read().unwrap_err().to_string(), e.to_string());
    assert_eq!(ws.into_inner().write_timeout().unwrap(), None);
}

#[test]
fn a_bare_blocking_send_to_a_server_that_never_reads_fails_at_the_send_timeout() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (l, addr) = rt.block_on(listener());
    let peer = rt.spawn(server_that_never_reads(l));
    let config = rapidws::blocking::ClientConfig::default().with_connection(config());
    let mut ws = rapidws::blocking::connect(format!("ws://{addr}/"), &config).unwrap();
    let _peer = rt.block_on(peer).unwrap();
    let payload = vec![0x5a; 64 << 10];
    let start = Instant::now();
    let e = loop {
        if let Err(e) = ws.send_binary(&payload) {
            break e;
        }
    };
    assert_send_timeout("blocking client", &e, start.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_reads_slowly_but_steadily_is_not_timed_out() {
    // Our client sends for three send timeouts to a server that reads 64 KiB every
    // 100 ms: the sockets stay full, and every few reads make room for a write. Both
    // socket buffers are small: the kernel reopens a closed receive window only once a
    // sixteenth of the buffer (and a segment) is free, and wakes a writer once about
    // half of its send buffer is; with the autotuned megabytes of loopback a slow reader
    // frees that much only every several seconds, and its writer sees no progress for
    // that long (the default send timeout, 30 s, leaves room for it).
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(128 << 10).unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = socket.local_addr().unwrap();
    let l = socket.listen(16).unwrap();
    let reader = tokio::spawn(async move {
        let mut peer = server_that_never_reads(l).await;
        let mut buf = vec![0u8; 64 << 10];
        let mut total = 0usize;
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            match peer.read(&mut buf).await {
                Ok(0) | Err(_) => return total,
                Ok(n) => total += n,
            }
        }
    });
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_send_buffer_size(64 << 10).unwrap();
    let tcp = socket.connect(addr).await.unwrap();
    let config = ClientConfig::default().with_connection(config());
    let mut ws = rapidws::tokio::client_handshake(tcp, "localhost", "/", &config)
        .await
        .unwrap();
    let start = Instant::now();
    let (mut sent, mut waited) = (0usize, Duration::ZERO);
    while start.elapsed() < 3 * SEND_TIMEOUT {
        let t = Instant::now();
        bounded(ws.send(chunk())).await.unwrap();
        waited += t.elapsed();
        sent += 1;
    }
    // The sends waited for the socket longer than the send timeout in all: the wait
    // started again with each write that made progress.
    assert!(waited > SEND_TIMEOUT, "{sent} sends waited {waited:?}");
    reader.abort();
}

/// A send waiting for room in the queue goes on as soon as a write made room, even when
/// that write found the socket full: it once waited for the socket to take more, however
/// much room the write had made (with a peer that stopped reading, until the send timeout
/// ended the connection, with room in the queue all along).
#[tokio::test]
async fn a_send_goes_on_once_a_write_made_room_though_the_socket_is_full() {
    // A socket that takes 96 KiB and then nothing (nobody reads the other end).
    let (ours, _theirs) = tokio::io::duplex(96 * 1024);
    let config = Config::default()
        .with_send_queue_high_water(128 * 1024)
        .with_send_timeout(None);
    let mut ws = WebSocket::from_raw(ours, rapidws::Role::Server, &config, &[]);
    let chunk = Message::Binary(Bytes::from(vec![7u8; 64 * 1024]));
    // Two chunks fill the queue to its high-water mark without a write.
    ws.feed(chunk.clone()).await.unwrap();
    ws.feed(chunk.clone()).await.unwrap();
    // The third needs room: the write takes 96 KiB of the 128 queued and then finds the
    // socket full, leaving 32 KiB queued, room for 96 more.
    // One poll: the duplex takes what it takes at once and wakes nothing after.
    futures_util::FutureExt::now_or_never(ws.feed(chunk))
        .expect("the feed waited although the write had made room")
        .unwrap();
}
