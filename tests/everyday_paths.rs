#![cfg(all(feature = "tokio", feature = "blocking"))]
//! The everyday paths where the IO layer, its halves, their wakers and the teardown work
//! together, as applications ported from tokio-tungstenite exercise them: a peer that
//! sends a few pings and hangs up before the application reads (a tab closed, a phone
//! losing signal), a writer and a reader on two tasks through `futures`' `split`, and
//! replies still arriving after our half sent its close.
mod tokio_support;

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use rapidws::Role;
use rapidws::connection::{Config, Connection};
use rapidws::handler::{Handler, Socket, serve_handler};
use rapidws::handshake::{ClientHandshake, ClientRequest, ServerHandshake};
use rapidws::tokio::{
    ClientConfig, CloseCode, CloseFrame, Error, Message, ServerConfig, WebSocket, accept, connect,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_support::*;

/// A peer that speaks through the sans-IO core: what it queues is written in one go.
struct RawPeer {
    stream: TcpStream,
    conn: Connection,
}

impl RawPeer {
    /// The client side of a handshake with the server at `addr`.
    async fn client(addr: std::net::SocketAddr) -> RawPeer {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.set_nodelay(true).unwrap();
        let request = ClientRequest::new("localhost", "/");
        let (mut hs, bytes) =
            ClientHandshake::new(&request, rapidws::handshake::ClientConfig::default()).unwrap();
        stream.write_all(&bytes).await.unwrap();
        let mut buf = [0u8; 1024];
        loop {
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0, "EOF in the handshake");
            if hs.feed(&buf[..n]).unwrap().is_some() {
                break;
            }
        }
        let conn = Connection::new(Role::Client, Config::default(), Instant::now());
        RawPeer { stream, conn }
    }

    /// The server side of a handshake on the next connection `l` accepts.
    async fn server(l: &TcpListener) -> RawPeer {
        let (mut stream, _) = l.accept().await.unwrap();
        stream.set_nodelay(true).unwrap();
        let config = rapidws::handshake::ServerConfig::default();
        let mut hs = ServerHandshake::new(&config);
        let mut buf = [0u8; 1024];
        let request = loop {
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0, "EOF in the handshake");
            if let Some(r) = hs.feed(&buf[..n]).unwrap() {
                break r;
            }
        };
        let accepted = request.accept(&config).unwrap();
        stream.write_all(&accepted.response).await.unwrap();
        let conn = Connection::new(Role::Server, Config::default(), Instant::now());
        RawPeer { stream, conn }
    }

    /// Writes what the core queued.
    async fn flush(&mut self) {
        let mut out = Vec::new();
        self.conn.write_pending(&mut out);
        self.stream.write_all(&out).await.unwrap();
    }

    /// Ends the TCP connection: a FIN, or a reset (linger 0) when `reset`.
    fn hang_up(self, reset: bool) {
        if reset {
            self.stream.set_zero_linger().unwrap();
        }
        drop(self.stream);
    }
}

/// What one receiving loop saw: the messages in order, then how it ended.
#[derive(Debug)]
struct Seen {
    messages: Vec<Message>,
    end: Result<(), Error>,
}

impl Seen {
    fn data(&self) -> Vec<&Message> {
        self.messages.iter().filter(|m| m.is_data()).collect()
    }
    fn pings(&self) -> usize {
        self.messages
            .iter()
            .filter(|m| matches!(m, Message::Ping(_)))
            .count()
    }
}

async fn receive_all<S>(ws: &mut WebSocket<S>) -> Seen
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut messages = Vec::new();
    let end = loop {
        match ws.recv().await {
            Ok(Some(m)) => messages.push(m),
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    Seen { messages, end }
}

// --- 1. A peer that pings and hangs up before the application reads ---------------------

/// The frames a hanging-up client sends before its end, all in one write.
#[derive(Clone, Copy, Debug)]
struct HangUp {
    text: bool,
    pings: usize,
    close: bool,
    reset: bool,
}

impl HangUp {
    fn all() -> impl Iterator<Item = HangUp> {
        (0..8).map(|i| HangUp {
            text: i & 1 != 0,
            pings: 2,
            close: i & 2 != 0,
            reset: i & 4 != 0,
        })
    }

    /// Writes the frames as one client, then hangs up.
    async fn run(self, addr: std::net::SocketAddr) {
        let mut peer = RawPeer::client(addr).await;
        if self.text {
            peer.conn.send_text("before the pings").unwrap();
        }
        for i in 0..self.pings {
            peer.conn.ping(format!("ping {i}").as_bytes()).unwrap();
        }
        if self.close {
            peer.conn
                .close(Instant::now(), CloseCode::GOING_AWAY, "")
                .unwrap();
        }
        peer.flush().await;
        peer.hang_up(self.reset);
    }

    /// What the server must have seen: the text and both pings in order whenever the
    /// peer's end was a FIN (a reset may destroy what was not read yet), and an end that
    /// is an error or a clean close, never a panic.
    fn check(self, seen: &Seen) {
        if !self.reset {
            assert_eq!(
                seen.data().len(),
                usize::from(self.text),
                "{self:?}: {seen:?}"
            );
            assert_eq!(seen.pings(), self.pings, "{self:?}: {seen:?}");
            let closed = seen.messages.iter().any(|m| matches!(m, Message::Close(_)));
            assert_eq!(closed, self.close, "{self:?}: {seen:?}");
        }
        if seen.end.is_ok() {
            assert!(
                self.close,
                "a clean end without a close: {self:?}: {seen:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_pings_twice_and_hangs_up_before_the_server_reads_ends_without_a_panic() {
    for shape in HangUp::all() {
        let (l, addr) = listener().await;
        let server = tokio::spawn(async move {
            let (s, _) = l.accept().await.unwrap();
            let mut ws = accept(s, &ServerConfig::default()).await.unwrap();
            // The application is busy for a moment: everything has arrived, and the
            // peer is gone, before the first `recv`.
            tokio::time::sleep(Duration::from_millis(300)).await;
            receive_all(&mut ws).await
        });
        shape.run(addr).await;
        let seen = bounded(server).await.expect("the server task panicked");
        shape.check(&seen);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_pings_and_hangs_up_before_the_client_reads_ends_without_a_panic() {
    for reset in [false, true] {
        let (l, addr) = listener().await;
        let server = tokio::spawn(async move {
            let mut peer = RawPeer::server(&l).await;
            peer.conn.send_text("tick").unwrap();
            peer.flush().await;
            for i in 0..3 {
                tokio::time::sleep(Duration::from_millis(10)).await;
                peer.conn.ping(format!("{i}").as_bytes()).unwrap();
                peer.flush().await;
            }
            peer.conn
                .close(Instant::now(), CloseCode::GOING_AWAY, "idle")
                .unwrap();
            peer.flush().await;
            peer.hang_up(reset);
        });
        let mut ws = connect(format!("ws://{addr}/"), &ClientConfig::default())
            .await
            .unwrap();
        bounded(server).await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let seen = bounded(tokio::spawn(async move { receive_all(&mut ws).await }))
            .await
            .expect("the client task panicked");
        if !reset {
            assert_eq!(seen.data(), [&Message::text("tick")], "{seen:?}");
            assert_eq!(seen.pings(), 3, "{seen:?}");
            assert!(
                seen.messages.iter().any(
                    |m| matches!(m, Message::Close(Some(f)) if f.code == CloseCode::GOING_AWAY)
                ),
                "{seen:?}"
            );
        }
    }
}

/// Counts the callbacks of one connection of a `serve_handler` server whose `on_open`
/// takes a while.
struct SlowOpen {
    report: tokio::sync::mpsc::UnboundedSender<(usize, usize, bool)>,
    data: usize,
    pings: usize,
}

impl Handler for SlowOpen {
    fn on_open(&mut self, _: &mut Socket<'_>) {
        // Blocking on purpose: the application is busy when the peer's frames arrive.
        std::thread::sleep(Duration::from_millis(300));
    }
    fn on_message(&mut self, _: &mut Socket<'_>, _: Message) {
        self.data += 1;
    }
    fn on_ping(&mut self, _: &mut Socket<'_>, _: bytes::Bytes) {
        self.pings += 1;
    }
    fn on_close(&mut self, frame: Option<&CloseFrame>, _: Option<&Error>) {
        let _ = self.report.send((self.data, self.pings, frame.is_some()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_whose_open_is_slow_sees_the_pings_and_its_close_runs_when_the_peer_hangs_up() {
    let (l, addr) = listener().await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(serve_handler(l, ServerConfig::default(), move |_| {
        SlowOpen {
            report: tx.clone(),
            data: 0,
            pings: 0,
        }
    }));
    for shape in HangUp::all() {
        shape.run(addr).await;
        let (data, pings, closed) = bounded(rx.recv()).await.expect("on_close did not run");
        if !shape.reset {
            assert_eq!(data, usize::from(shape.text), "{shape:?}");
            assert_eq!(pings, shape.pings, "{shape:?}");
            assert_eq!(closed, shape.close, "{shape:?}");
        }
    }
}

#[test]
fn a_blocking_server_survives_a_client_that_pings_twice_and_hangs_up() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    for shape in HangUp::all() {
        let server = std::thread::spawn({
            let l = l.try_clone().unwrap();
            move || {
                let (s, _) = l.accept().unwrap();
                let mut ws =
                    rapidws::blocking::accept(s, &rapidws::blocking::ServerConfig::default())
                        .unwrap();
                std::thread::sleep(Duration::from_millis(300));
                let mut messages = Vec::new();
                let end = loop {
                    match ws.read() {
                        Ok(Some(m)) => messages.push(m),
                        Ok(None) => break Ok(()),
                        Err(e) => break Err(e),
                    }
                };
                (messages, end.is_ok())
            }
        });
        rt.block_on(shape.run(addr));
        let (messages, _) = server.join().expect("the blocking server panicked");
        if !shape.reset {
            let pings = messages
                .iter()
                .filter(|m| matches!(m, Message::Ping(_)))
                .count();
            assert_eq!(pings, shape.pings, "{shape:?}: {messages:?}");
        }
    }
}

// --- 2. A writer task and a reader task through futures' `split` --------------------------

/// Sizes from 8 to 3,000 bytes, the same for every run.
fn sizes(n: usize) -> impl Iterator<Item = usize> {
    let mut x: u32 = 0x9e37_79b9;
    (0..n).map(move |_| {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        8 + (x as usize % 2993)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn futures_split_writer_and_reader_tasks_finish_under_load() {
    const N: usize = 20_000;
    let addr = echo_server(ServerConfig::default()).await;
    for run in 0..5 {
        let ws = connect(format!("ws://{addr}/"), &ClientConfig::default())
            .await
            .unwrap();
        let (mut sink, mut stream) = ws.split();
        let writer = tokio::spawn(async move {
            for (i, n) in sizes(N).enumerate() {
                let mut payload = vec![(i % 251) as u8; n];
                payload[..4].copy_from_slice(&(i as u32).to_be_bytes());
                sink.send(Message::binary(payload)).await.unwrap();
            }
            sink
        });
        let reader = tokio::spawn(async move {
            let mut got = 0;
            for (i, n) in sizes(N).enumerate() {
                let msg = stream.next().await.expect("ended early").unwrap();
                let Message::Binary(b) = msg else {
                    panic!("not binary: {msg:?}")
                };
                assert_eq!((b.len(), &b[..4]), (n, &(i as u32).to_be_bytes()[..]));
                got += 1;
            }
            (stream, got)
        });
        let timeout = Duration::from_secs(30);
        let sink = tokio::time::timeout(timeout, writer)
            .await
            .unwrap_or_else(|_| panic!("run {run}: the writer hung"))
            .unwrap();
        let (stream, got) = tokio::time::timeout(timeout, reader)
            .await
            .unwrap_or_else(|_| panic!("run {run}: the reader hung"))
            .unwrap();
        assert_eq!(got, N);
        let mut ws = sink.reunite(stream).unwrap();
        ws.close(1000, "").await.unwrap();
    }
}

// --- 3. Replies that arrive after our close ---------------------------------------------

/// Sends 100 requests and closes on a writer half; the reader half must see all 100
/// replies, then the peer's close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_that_arrive_after_our_close_reach_the_reading_half() {
    let addr = echo_server(ServerConfig::default()).await;
    for split in ["futures", "into_split"] {
        for _ in 0..10 {
            let ws = connect(format!("ws://{addr}/"), &ClientConfig::default())
                .await
                .unwrap();
            let got = match split {
                "futures" => {
                    let (mut sink, mut stream) = ws.split();
                    let writer = tokio::spawn(async move {
                        for i in 0..100 {
                            sink.send(Message::text(format!("{i}"))).await.unwrap();
                        }
                        sink.close().await.unwrap();
                    });
                    let mut got = Vec::new();
                    while let Some(Ok(m)) = bounded(stream.next()).await {
                        got.push(m);
                    }
                    bounded(writer).await.unwrap();
                    got
                }
                _ => {
                    let (mut rd, mut wr) = ws.into_split();
                    let writer = tokio::spawn(async move {
                        for i in 0..100 {
                            wr.send(Message::text(format!("{i}"))).await.unwrap();
                        }
                        wr.close(1000, "").await.unwrap();
                    });
                    let mut got = Vec::new();
                    while let Ok(Some(m)) = bounded(rd.recv()).await {
                        got.push(m);
                    }
                    bounded(writer).await.unwrap();
                    got
                }
            };
            let texts: Vec<_> = got.iter().filter(|m| m.is_data()).collect();
            let want: Vec<_> = (0..100).map(|i| Message::text(format!("{i}"))).collect();
            assert_eq!(texts, want.iter().collect::<Vec<_>>(), "{split}");
            assert!(
                matches!(got.last(), Some(Message::Close(_))),
                "{split}: the peer's close ends the stream: {got:?}"
            );
        }
    }
}
