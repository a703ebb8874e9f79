#![cfg(feature = "tokio")]
//! tokio-tungstenite as the oracle: the idioms its users write (futures' `split` with a
//! writer task and a reader task, `forward` between two sockets, a `select!` loop that
//! cancels `next()`, an `Arc<Mutex<SplitSink>>` shared by several senders, closing the
//! write half while the read half drains, pings and `Message::Close` through `send`,
//! dropping either half) run with the rapidws client and with the tokio-tungstenite client
//! against the same rapidws server, and, in the server role, with a rapidws server and a
//! tokio-tungstenite server for the same client; [`runs`] times each. Both must see the
//! same messages in the same order.
//!
//! Each idiom is written once, over [`Lib`]: what the two libraries share (a `Stream` of
//! messages and a `Sink` for them), so what differs is only the library under it.
// The tokio tests' helpers, shared with the root package's tests.
#[path = "../../tests/tokio_support/mod.rs"]
mod tokio_support;

use std::fmt::Debug;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{Sink, SinkExt, Stream, StreamExt, TryStreamExt};
use tokio::net::TcpStream;
use tokio_support::*;

/// How many times each idiom runs with each library: `RAPIDWS_ORACLE_RUNS`, 50 by
/// default (what CI runs).
fn runs() -> usize {
    std::env::var("RAPIDWS_ORACLE_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50)
}

/// A message as either library delivers it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Seen {
    Text(String),
    Binary(Vec<u8>),
    Ping(Vec<u8>),
    Pong(Vec<u8>),
    /// A close frame's code. An empty close frame counts as 1000: tungstenite's
    /// `Sink::close` sends one, rapidws's sends 1000, and both mean a normal close.
    Close(u16),
}

/// What the two libraries share, for the idioms to be written once.
trait Lib: Send + Sync + 'static {
    const NAME: &'static str;
    type Msg: Debug + Send + Sync + 'static;
    type Err: Debug + Send + 'static;
    type Ws: Stream<Item = Result<Self::Msg, Self::Err>>
        + Sink<Self::Msg, Error = Self::Err>
        + Unpin
        + Send
        + 'static;

    /// The client side of the opening handshake on `tcp`.
    fn client(tcp: TcpStream) -> impl Future<Output = Self::Ws> + Send;
    /// The server side of the opening handshake on `tcp`.
    fn server(tcp: TcpStream) -> impl Future<Output = Self::Ws> + Send;
    fn text(s: String) -> Self::Msg;
    fn binary(b: Vec<u8>) -> Self::Msg;
    fn ping(b: &[u8]) -> Self::Msg;
    fn close(code: u16, reason: &str) -> Self::Msg;
    fn seen(m: &Self::Msg) -> Seen;
}

struct Rapid;

impl Lib for Rapid {
    const NAME: &'static str = "rapidws";
    type Msg = rapidws::Message;
    type Err = rapidws::tokio::Error;
    type Ws = rapidws::tokio::WebSocket<TcpStream>;

    async fn client(tcp: TcpStream) -> Self::Ws {
        let config = rapidws::tokio::ClientConfig::default();
        rapidws::tokio::client_handshake(tcp, "localhost", "/", &config)
            .await
            .unwrap()
    }
    async fn server(tcp: TcpStream) -> Self::Ws {
        rapidws::tokio::accept(tcp, &rapidws::tokio::ServerConfig::default())
            .await
            .unwrap()
    }
    fn text(s: String) -> Self::Msg {
        rapidws::Message::text(s)
    }
    fn binary(b: Vec<u8>) -> Self::Msg {
        rapidws::Message::binary(b)
    }
    fn ping(b: &[u8]) -> Self::Msg {
        rapidws::Message::Ping(b.to_vec().into())
    }
    fn close(code: u16, reason: &str) -> Self::Msg {
        rapidws::Message::Close(Some(rapidws::CloseFrame::new(code, reason)))
    }
    fn seen(m: &Self::Msg) -> Seen {
        use rapidws::Message as M;
        match m {
            M::Text(t) => Seen::Text(t.to_string()),
            M::Binary(b) => Seen::Binary(b.to_vec()),
            M::Ping(b) => Seen::Ping(b.to_vec()),
            M::Pong(b) => Seen::Pong(b.to_vec()),
            M::Close(f) => Seen::Close(f.as_ref().map_or(1000, |f| f.code.0)),
        }
    }
}

struct Tungstenite;

impl Lib for Tungstenite {
    const NAME: &'static str = "tokio-tungstenite";
    type Msg = tungstenite::Message;
    type Err = tungstenite::Error;
    type Ws = tokio_tungstenite::WebSocketStream<TcpStream>;

    async fn client(tcp: TcpStream) -> Self::Ws {
        tokio_tungstenite::client_async("ws://localhost/", tcp)
            .await
            .unwrap()
            .0
    }
    async fn server(tcp: TcpStream) -> Self::Ws {
        tokio_tungstenite::accept_async(tcp).await.unwrap()
    }
    fn text(s: String) -> Self::Msg {
        tungstenite::Message::text(s)
    }
    fn binary(b: Vec<u8>) -> Self::Msg {
        tungstenite::Message::binary(b)
    }
    fn ping(b: &[u8]) -> Self::Msg {
        tungstenite::Message::Ping(b.to_vec().into())
    }
    fn close(code: u16, reason: &str) -> Self::Msg {
        tungstenite::Message::Close(Some(tungstenite::protocol::CloseFrame {
            code: code.into(),
            reason: reason.to_owned().into(),
        }))
    }
    fn seen(m: &Self::Msg) -> Seen {
        use tungstenite::Message as M;
        match m {
            M::Text(t) => Seen::Text(t.to_string()),
            M::Binary(b) => Seen::Binary(b.to_vec()),
            M::Ping(b) => Seen::Ping(b.to_vec()),
            M::Pong(b) => Seen::Pong(b.to_vec()),
            M::Close(f) => Seen::Close(f.as_ref().map_or(1000, |f| u16::from(f.code))),
            M::Frame(_) => unreachable!("raw frames are never read"),
        }
    }
}

fn is_data(s: &Seen) -> bool {
    matches!(s, Seen::Text(_) | Seen::Binary(_))
}

/// The `i`th message of a sequence: text or binary, 8 to 3,000 bytes, its index inside.
fn nth<L: Lib>(i: usize) -> L::Msg {
    let n = 8 + (i * 7919) % 2993;
    if i.is_multiple_of(3) {
        L::text(format!("{i:08}{}", "é".repeat((n - 8) / 2)))
    } else {
        let mut b = vec![(i % 251) as u8; n];
        b[..8].copy_from_slice(&(i as u64).to_be_bytes());
        L::binary(b)
    }
}

/// Reads `stream` to its end: what it yielded, and the first error (as text), if any.
async fn drain<L: Lib>(
    stream: &mut (impl Stream<Item = Result<L::Msg, L::Err>> + Unpin),
) -> (Vec<Seen>, Option<String>) {
    let mut seen = Vec::new();
    while let Some(m) = bounded(stream.next()).await {
        match m {
            Ok(m) => seen.push(L::seen(&m)),
            Err(e) => return (seen, Some(format!("{e:?}"))),
        }
    }
    (seen, None)
}

/// A rapidws echo server: every text and binary message sent back.
async fn reference_server() -> SocketAddr {
    echo_server(rapidws::tokio::ServerConfig::default()).await
}

async fn tcp(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).await.unwrap();
    s.set_nodelay(true).unwrap();
    s
}

/// Runs `idiom` [`runs`] times with each library and asserts that every run of both saw
/// what the first rapidws run saw.
async fn compare<F, G>(name: &str, rapid: F, tungstenite: G)
where
    F: AsyncFnMut() -> Vec<Seen>,
    G: AsyncFnMut() -> Vec<Seen>,
{
    let (mut rapid, mut tungstenite) = (rapid, tungstenite);
    let mut oracle = None;
    for run in 0..runs() {
        let want = tungstenite().await;
        let got = rapid().await;
        let oracle = oracle.get_or_insert_with(|| want.clone());
        assert_eq!(
            &want, oracle,
            "{name}: tokio-tungstenite run {run} differs from its first"
        );
        assert_eq!(
            &got, oracle,
            "{name}: rapidws run {run} differs from tokio-tungstenite"
        );
    }
}

// --- client role: each idiom on a client of either library, against a rapidws server ---

/// futures' `split`: a writer task sends 2,000 messages of 8-3,000 bytes and closes the
/// sink; a reader task reads everything until the end.
async fn split_writer_and_reader_tasks<L: Lib>(addr: SocketAddr) -> Vec<Seen> {
    const N: usize = 2000;
    let (mut sink, mut stream) = L::client(tcp(addr).await).await.split();
    let writer = tokio::spawn(async move {
        for i in 0..N {
            sink.send(nth::<L>(i)).await.unwrap();
        }
        sink.close().await.unwrap();
    });
    let reader = tokio::spawn(async move { drain::<L>(&mut stream).await });
    bounded(writer).await.unwrap();
    let (seen, end) = bounded(reader).await.unwrap();
    assert_eq!(end, None, "{}", L::NAME);
    seen
}

/// `forward`: what one socket receives is sent on by another (a relay); what comes back
/// on the second is read. Closing the first sends its close through the second too.
async fn forward_between_two_sockets<L: Lib>(addr: SocketAddr) -> Vec<Seen> {
    const N: usize = 300;
    let (mut a_sink, a_stream) = L::client(tcp(addr).await).await.split();
    let (b_sink, mut b_stream) = L::client(tcp(addr).await).await.split();
    let relay = tokio::spawn(a_stream.forward(b_sink));
    for i in 0..N {
        a_sink.send(nth::<L>(i)).await.unwrap();
    }
    a_sink.close().await.unwrap();
    let (seen, end) = drain::<L>(&mut b_stream).await;
    assert_eq!(end, None, "{}", L::NAME);
    // The relay ends with the first socket; its result is the library's own affair.
    let _ = bounded(relay).await.unwrap();
    seen
}

/// A `select!` loop: a ticker sends the next message while `next()` waits, so every tick
/// cancels a pending `next()`; once every echo is back, `Message::Close` goes through
/// `send`.
async fn select_loop_cancelling_next<L: Lib>(addr: SocketAddr) -> Vec<Seen> {
    const N: usize = 60;
    let mut ws = L::client(tcp(addr).await).await;
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    let (mut sent, mut echoed, mut closing) = (0, 0, false);
    let mut seen = Vec::new();
    bounded(async {
        loop {
            tokio::select! {
                m = ws.next() => match m {
                    Some(Ok(m)) => {
                        let s = L::seen(&m);
                        echoed += usize::from(is_data(&s));
                        seen.push(s);
                        if echoed == N && !closing {
                            closing = true;
                            ws.send(L::close(1000, "done")).await.unwrap();
                        }
                    }
                    Some(Err(e)) => panic!("{}: {e:?}", L::NAME),
                    None => break,
                },
                _ = tick.tick(), if sent < N => {
                    ws.send(nth::<L>(sent)).await.unwrap();
                    sent += 1;
                }
            }
        }
    })
    .await;
    seen
}

/// An `Arc<Mutex<SplitSink>>` shared by four sender tasks of 50 messages each; the reader
/// closes the sink once every echo is back. Each sender's messages must come back in its
/// order (how the senders interleave is the scheduler's).
async fn sink_shared_by_several_senders<L: Lib>(addr: SocketAddr) -> Vec<Seen> {
    const SENDERS: usize = 4;
    const EACH: usize = 50;
    let (sink, mut stream) = L::client(tcp(addr).await).await.split();
    let sink = Arc::new(tokio::sync::Mutex::new(sink));
    let senders: Vec<_> = (0..SENDERS)
        .map(|k| {
            let sink = sink.clone();
            tokio::spawn(async move {
                for i in 0..EACH {
                    let msg = L::text(format!("{k}:{i}"));
                    sink.lock().await.send(msg).await.unwrap();
                }
            })
        })
        .collect();
    let mut per_sender = vec![Vec::new(); SENDERS];
    let mut got = 0;
    while got < SENDERS * EACH {
        let m = bounded(stream.next()).await.unwrap().unwrap();
        if let Seen::Text(t) = L::seen(&m) {
            let k: usize = t.split(':').next().unwrap().parse().unwrap();
            per_sender[k].push(Seen::Text(t));
            got += 1;
        }
    }
    for s in senders {
        bounded(s).await.unwrap();
    }
    sink.lock().await.close().await.unwrap();
    let (rest, end) = drain::<L>(&mut stream).await;
    assert_eq!(end, None, "{}", L::NAME);
    per_sender.into_iter().flatten().chain(rest).collect()
}

/// A writer task sends 100 requests and closes its half at once; the read half drains
/// the replies that arrive after our close, then the peer's close.
async fn close_write_half_while_the_read_half_drains<L: Lib>(addr: SocketAddr) -> Vec<Seen> {
    let (mut sink, mut stream) = L::client(tcp(addr).await).await.split();
    let writer = tokio::spawn(async move {
        for i in 0..100 {
            sink.send(L::text(format!("request {i}"))).await.unwrap();
        }
        sink.close().await.unwrap();
    });
    let (seen, end) = drain::<L>(&mut stream).await;
    assert_eq!(end, None, "{}", L::NAME);
    bounded(writer).await.unwrap();
    seen
}

/// A ping and a close through `send`: the pong comes back as a message, the close ends
/// the stream after the messages before it.
async fn ping_and_close_through_send<L: Lib>(addr: SocketAddr) -> Vec<Seen> {
    let mut ws = L::client(tcp(addr).await).await;
    ws.send(L::ping(b"are you there")).await.unwrap();
    ws.send(L::text("hello".into())).await.unwrap();
    ws.send(L::close(4000, "bye")).await.unwrap();
    let (seen, end) = drain::<L>(&mut ws).await;
    assert_eq!(end, None, "{}", L::NAME);
    seen
}

/// Dropping the read half: the sink still sends and closes. Then dropping the sink half:
/// the stream still reads what was sent before.
async fn drop_either_half<L: Lib>(addr: SocketAddr) -> Vec<Seen> {
    let (mut sink, stream) = L::client(tcp(addr).await).await.split();
    drop(stream);
    for i in 0..50 {
        sink.send(nth::<L>(i)).await.unwrap();
    }
    sink.close().await.unwrap();

    let (mut sink, mut stream) = L::client(tcp(addr).await).await.split();
    for i in 0..50 {
        sink.send(nth::<L>(i)).await.unwrap();
    }
    drop(sink);
    let mut seen = Vec::new();
    for _ in 0..50 {
        seen.push(L::seen(&bounded(stream.next()).await.unwrap().unwrap()));
    }
    seen
}

macro_rules! client_role {
    ($($idiom:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $idiom() {
            let addr = reference_server().await;
            compare(
                stringify!($idiom),
                async || super::$idiom::<Rapid>(addr).await,
                async || super::$idiom::<Tungstenite>(addr).await,
            )
            .await;
        }
    )*};
}

mod client {
    use super::*;
    client_role!(
        split_writer_and_reader_tasks,
        forward_between_two_sockets,
        select_loop_cancelling_next,
        sink_shared_by_several_senders,
        close_write_half_while_the_read_half_drains,
        ping_and_close_through_send,
        drop_either_half,
    );
}

// --- server role: each idiom on a server of either library, for one rapidws client -----

/// A server of library `L` on a free port, running `serve` on each connection.
async fn server_of<L: Lib, F, Fut>(serve: F) -> SocketAddr
where
    F: Fn(L::Ws) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (l, addr) = listener().await;
    let serve = Arc::new(serve);
    tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            s.set_nodelay(true).unwrap();
            let serve = serve.clone();
            tokio::spawn(async move { serve(L::server(s).await).await });
        }
    });
    addr
}

/// The client the server idioms are seen from: sends `n` messages, reads `replies`
/// messages, closes, and reads to the end.
async fn client_script(addr: SocketAddr, n: usize, replies: usize) -> Vec<Seen> {
    let mut ws = Rapid::client(tcp(addr).await).await;
    for i in 0..n {
        ws.feed(nth::<Rapid>(i)).await.unwrap();
    }
    ws.flush().await.unwrap();
    let mut seen = Vec::new();
    while seen.iter().filter(|s| is_data(s)).count() < replies {
        seen.push(Rapid::seen(&bounded(ws.recv()).await.unwrap().unwrap()));
    }
    bounded(ws.close(1000, "")).await.unwrap();
    seen
}

/// The echo server of tokio-tungstenite's examples: the stream's data messages forwarded
/// into the sink.
async fn echo_by_forward<L: Lib>() -> Vec<Seen> {
    let addr = server_of::<L, _, _>(|ws: L::Ws| async move {
        let (sink, stream) = ws.split();
        let data = stream.try_filter(|m| std::future::ready(is_data(&L::seen(m))));
        let _ = data.forward(sink).await;
    })
    .await;
    client_script(addr, 500, 500).await
}

/// A reader task hands each message to a writer task over a channel; the writer answers
/// it, and closes its sink when the channel ends.
async fn reader_and_writer_tasks_over_a_channel<L: Lib>() -> Vec<Seen> {
    let addr = server_of::<L, _, _>(|ws: L::Ws| async move {
        let (mut sink, mut stream) = ws.split();
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Seen>(16);
        let writer = tokio::spawn(async move {
            while let Some(s) = rx.recv().await {
                let text = match s {
                    Seen::Text(t) => format!("text {}", t.len()),
                    Seen::Binary(b) => format!("binary {}", b.len()),
                    _ => continue,
                };
                if sink.send(L::text(text)).await.is_err() {
                    return;
                }
            }
            let _ = sink.close().await;
        });
        while let Some(Ok(m)) = stream.next().await {
            if tx.send(L::seen(&m)).await.is_err() {
                break;
            }
        }
        drop(tx);
        let _ = writer.await;
    })
    .await;
    client_script(addr, 300, 300).await
}

/// A `select!` loop on the server: a ticker sends 40 ticks while `next()` waits (each
/// tick cancels it), then `Message::Close` through `send`; the client only reads.
async fn server_select_loop_with_a_ticker<L: Lib>() -> Vec<Seen> {
    let addr = server_of::<L, _, _>(|mut ws: L::Ws| async move {
        let mut tick = tokio::time::interval(Duration::from_millis(1));
        let mut n = 0;
        loop {
            tokio::select! {
                m = ws.next() => match m {
                    Some(Ok(_)) => {}
                    _ => break,
                },
                _ = tick.tick(), if n <= 40 => {
                    let msg = if n < 40 {
                        L::text(format!("tick {n}"))
                    } else {
                        L::close(1001, "going away")
                    };
                    n += 1;
                    if ws.send(msg).await.is_err() {
                        break;
                    }
                }
            }
        }
    })
    .await;
    let mut ws = Rapid::client(tcp(addr).await).await;
    let mut seen = Vec::new();
    while let Some(m) = bounded(ws.recv()).await.unwrap() {
        seen.push(Rapid::seen(&m));
    }
    seen
}

/// The server's writer task sends 100 messages and closes its half while its reader task
/// still reads what the client sent (which it then answers with a count).
async fn server_closes_its_write_half_while_reading<L: Lib>() -> Vec<Seen> {
    let (tx, mut counts) = tokio::sync::mpsc::unbounded_channel();
    let addr = server_of::<L, _, _>(move |ws: L::Ws| {
        let tx = tx.clone();
        async move {
            let (mut sink, mut stream) = ws.split();
            let writer = tokio::spawn(async move {
                for i in 0..100 {
                    sink.send(L::text(format!("{i}"))).await.unwrap();
                }
                sink.close().await.unwrap();
            });
            let mut data = 0;
            while let Some(Ok(m)) = stream.next().await {
                data += usize::from(is_data(&L::seen(&m)));
            }
            let _ = writer.await;
            let _ = tx.send(data);
        }
    })
    .await;
    let mut ws = Rapid::client(tcp(addr).await).await;
    for i in 0..30 {
        ws.feed(nth::<Rapid>(i)).await.unwrap();
    }
    ws.flush().await.unwrap();
    let mut seen = Vec::new();
    while let Some(m) = bounded(ws.recv()).await.unwrap() {
        seen.push(Rapid::seen(&m));
    }
    let data = bounded(counts.recv()).await.unwrap();
    seen.push(Seen::Text(format!("the server read {data}")));
    seen
}

macro_rules! server_role {
    ($($idiom:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $idiom() {
            compare(
                stringify!($idiom),
                async || super::$idiom::<Rapid>().await,
                async || super::$idiom::<Tungstenite>().await,
            )
            .await;
        }
    )*};
}

mod server {
    use super::*;
    server_role!(
        echo_by_forward,
        reader_and_writer_tasks_over_a_channel,
        server_select_loop_with_a_ticker,
        server_closes_its_write_half_while_reading,
    );
}
