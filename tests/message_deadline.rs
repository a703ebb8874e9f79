#![cfg(all(feature = "tokio", feature = "blocking", feature = "deflate"))]
//! The message deadline ([`Config::message_timeout`], close 1008) holds for every shape of
//! message, over real sockets, in both IO layers and both roles: a first frame that
//! inflates to 1 or 8 MiB (or an uncompressed one of 1 MiB, which arrives in several
//! reads), followed by an empty or a 1-byte non-final continuation every half second,
//! which keeps the idle and keepalive timers satisfied. The peer must read 1008 at the
//! deadline, and the connection's budget must come back to zero.
mod bounded_support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bounded_support::{
    FrameReader, client_handshake, connect, deflated_zeros, frame, listener, server_handshake,
};
use rapidws::connection::Budget;
use rapidws::deflate::DeflateConfig;
use rapidws::tokio::{ClientConfig, Config, Error, ServerConfig, Timeout, WebSocket, serve};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const DEADLINE: Duration = Duration::from_millis(1500);
/// How often the peer sends a continuation: often enough that nothing but the message
/// deadline can end the connection.
const TRICKLE: Duration = Duration::from_millis(500);
/// How long the peer waits for our close at most: the deadline with room to spare for a
/// loaded machine. A connection still open then has no deadline at all.
const PATIENCE: Duration = Duration::from_secs(12);

#[derive(Clone, Copy, Debug)]
enum First {
    /// Zeros, compressed: the first frame inflates to this many bytes.
    Compressed(usize),
    /// This many bytes, as they are.
    Plain(usize),
}

#[derive(Clone, Copy, Debug)]
struct Shape {
    first: First,
    /// Payload bytes of each continuation: 0 or 1.
    each: usize,
}

fn shapes() -> Vec<Shape> {
    let firsts = [
        First::Compressed(1 << 20),
        First::Compressed(8 << 20),
        First::Plain(1 << 20),
    ];
    firsts
        .into_iter()
        .flat_map(|first| [0, 1].map(|each| Shape { first, each }))
        .collect()
}

impl Shape {
    fn first_frame(self, mask: bool) -> Vec<u8> {
        match self.first {
            First::Compressed(n) => {
                let p = deflated_zeros(n);
                frame(0x40 | 0x02, p.len() as u64, &p, mask)
            }
            First::Plain(n) => frame(0x02, n as u64, &vec![7; n], mask),
        }
    }

    /// The `i`th continuation. A compressed message's bytes must stay a valid DEFLATE
    /// stream, one byte at a time: the first frame ended with a sync flush whose last four
    /// bytes (`00 00 ff ff`) were removed (RFC 7692 7.2.1), so the stream waits in an empty
    /// stored block for its length; those four bytes complete it, and each `00` after
    /// them starts the next such block.
    fn continuation(self, i: usize, mask: bool) -> Vec<u8> {
        let payload: &[u8] = match (self.each, self.first) {
            (0, _) => &[],
            (_, First::Compressed(_)) => &[[0x00u8, 0x00, 0xff, 0xff, 0x00][i % 5]],
            (_, First::Plain(_)) => b"x",
        };
        frame(0x00, payload.len() as u64, payload, mask)
    }

    /// As the peer on `stream` (after the handshake, `leftover` read past it): the first
    /// frame, then a continuation every [`TRICKLE`] until our close arrives; its code, or
    /// `None` when none came within [`PATIENCE`].
    async fn trickle(self, stream: TcpStream, leftover: Vec<u8>, mask: bool) -> Option<u16> {
        let (mut rd, mut wr) = stream.into_split();
        let first = self.first_frame(mask);
        let writer = tokio::spawn(async move {
            // Our side may close and reset while this is still being written: fine.
            if wr.write_all(&first).await.is_err() {
                return;
            }
            for i in 0.. {
                tokio::time::sleep(TRICKLE).await;
                if wr.write_all(&self.continuation(i, mask)).await.is_err() {
                    return;
                }
            }
        });
        let mut r = FrameReader::default();
        let mut code = r.feed(&leftover);
        let mut buf = vec![0u8; 16 << 10];
        let until = tokio::time::Instant::now() + PATIENCE;
        while code.is_none() {
            match tokio::time::timeout_at(until, rd.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
                Ok(Ok(n)) => code = r.feed(&buf[..n]),
            }
        }
        writer.abort();
        code
    }
}

fn connection_config(budget: &Budget) -> Config {
    Config::default()
        .with_message_timeout(Some(DEADLINE))
        .with_max_message_size(64 << 20)
        .with_max_frame_size(64 << 20)
        .with_budget(Some(budget.clone()))
}

fn deflate() -> Option<DeflateConfig> {
    Some(DeflateConfig::default())
}

/// The budget comes back to zero once the connection has ended (within a bound).
async fn budget_returns_to_zero(budget: &Budget, what: &str) {
    let until = Instant::now() + Duration::from_secs(5);
    while budget.held() != 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(budget.held(), 0, "{what}: the budget still holds bytes");
}

async fn tokio_server(shape: Shape) {
    let budget = Budget::new(256 << 20);
    let (l, addr) = listener().await;
    let config = ServerConfig::default()
        .with_connection(connection_config(&budget))
        .with_deflate(deflate());
    let (tx, rx) = tokio::sync::oneshot::channel();
    let tx = std::sync::Mutex::new(Some(tx));
    tokio::spawn(serve(l, config, move |mut ws: WebSocket<TcpStream>| {
        let tx = tx.lock().unwrap().take();
        async move {
            let end = loop {
                match ws.recv().await {
                    Ok(Some(_)) => {}
                    other => break other,
                }
            };
            if let Some(tx) = tx {
                let _ = tx.send(end);
            }
        }
    }));
    let mut s = connect(addr).await;
    let leftover = client_handshake(&mut s, true).await;
    let code = shape.trickle(s, leftover, true).await;
    assert_eq!(code, Some(1008), "tokio server, {shape:?}");
    let end = rx.await.unwrap();
    assert!(
        matches!(end, Err(Error::Timeout(Timeout::Message))),
        "tokio server, {shape:?}: {end:?}"
    );
    budget_returns_to_zero(&budget, &format!("tokio server, {shape:?}")).await;
}

/// A raw server for a client under test: the handshake, then the peer's part; its code.
async fn raw_server(shape: Shape) -> (SocketAddr, tokio::task::JoinHandle<Option<u16>>) {
    let (l, addr) = listener().await;
    let peer = tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        s.set_nodelay(true).unwrap();
        server_handshake(&mut s, true).await;
        shape.trickle(s, Vec::new(), false).await
    });
    (addr, peer)
}

async fn tokio_client(shape: Shape) {
    let budget = Budget::new(256 << 20);
    let (addr, peer) = raw_server(shape).await;
    let config = ClientConfig::default()
        .with_connection(connection_config(&budget))
        .with_deflate(deflate());
    let mut ws = rapidws::tokio::connect(format!("ws://{addr}/"), &config)
        .await
        .unwrap();
    let end = loop {
        match ws.recv().await {
            Ok(Some(_)) => {}
            other => break other,
        }
    };
    assert!(
        matches!(end, Err(Error::Timeout(Timeout::Message))),
        "tokio client, {shape:?}: {end:?}"
    );
    assert_eq!(peer.await.unwrap(), Some(1008), "tokio client, {shape:?}");
    drop(ws);
    budget_returns_to_zero(&budget, &format!("tokio client, {shape:?}")).await;
}

async fn blocking_server(shape: Shape) {
    let budget = Budget::new(256 << 20);
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let config = rapidws::blocking::ServerConfig::default()
        .with_connection(connection_config(&budget))
        .with_deflate(deflate());
    let server = std::thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        let mut ws = rapidws::blocking::accept(s, &config).unwrap();
        loop {
            match ws.read() {
                Ok(Some(_)) => {}
                other => break other,
            }
        }
    });
    let mut s = connect(addr).await;
    let leftover = client_handshake(&mut s, true).await;
    let code = shape.trickle(s, leftover, true).await;
    assert_eq!(code, Some(1008), "blocking server, {shape:?}");
    let end = tokio::task::spawn_blocking(move || server.join().unwrap())
        .await
        .unwrap();
    assert!(
        matches!(end, Err(Error::Timeout(Timeout::Message))),
        "blocking server, {shape:?}: {end:?}"
    );
    budget_returns_to_zero(&budget, &format!("blocking server, {shape:?}")).await;
}

async fn blocking_client(shape: Shape) {
    let budget = Budget::new(256 << 20);
    let (addr, peer) = raw_server(shape).await;
    let config = rapidws::blocking::ClientConfig::default()
        .with_connection(connection_config(&budget))
        .with_deflate(deflate());
    let client = tokio::task::spawn_blocking(move || {
        let mut ws = rapidws::blocking::connect(format!("ws://{addr}/"), &config).unwrap();
        loop {
            match ws.read() {
                Ok(Some(_)) => {}
                other => break other,
            }
        }
    });
    assert_eq!(
        peer.await.unwrap(),
        Some(1008),
        "blocking client, {shape:?}"
    );
    let end = client.await.unwrap();
    assert!(
        matches!(end, Err(Error::Timeout(Timeout::Message))),
        "blocking client, {shape:?}: {end:?}"
    );
    budget_returns_to_zero(&budget, &format!("blocking client, {shape:?}")).await;
}

/// Every shape at once, so the file takes about one deadline and a half.
async fn all_shapes<F: Future<Output = ()> + Send + 'static>(case: fn(Shape) -> F) {
    let cases: Vec<_> = shapes()
        .into_iter()
        .map(|s| tokio::spawn(case(s)))
        .collect();
    for c in cases {
        c.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unfinished_message_of_any_shape_is_closed_with_1008_by_the_tokio_server() {
    all_shapes(tokio_server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unfinished_message_of_any_shape_is_closed_with_1008_by_the_tokio_client() {
    all_shapes(tokio_client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unfinished_message_of_any_shape_is_closed_with_1008_by_the_blocking_server() {
    all_shapes(blocking_server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unfinished_message_of_any_shape_is_closed_with_1008_by_the_blocking_client() {
    all_shapes(blocking_client).await;
}
