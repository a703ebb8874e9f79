//! Going down cleanly, over real sockets on loopback: `serve` and `serve_handler` under a
//! `Shutdown` signal with 1,000 clients each, every one with messages still on the server
//! when the signal is given (in the connection's queue, in the socket, behind a send that
//! waits); a peer that never answers our close, one that never reads and a handler that
//! never returns, each within its bound; nothing accepted after the signal; the blocking
//! layer.
//!
//! Cost: about 5 s in all on the 2-core machine (the two 1,000-client runs about 1 s
//! each, the bounds test 2 s: twice its close timeout of 1 s).
#![cfg(all(feature = "tokio", feature = "blocking"))]

mod bounded_support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bounded_support::{client_handshake, ensure_descriptors, read_close};
use rapidws::handler::{Handler, Socket, serve_handler};
use rapidws::tokio::{
    ClientConfig, CloseFrame, Config, Message, ServerConfig, Shutdown, WebSocket, connect, serve,
};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

/// Clients per server run.
const CLIENTS: usize = 1000;
/// Messages each client is owed when the signal is given, and their size.
const OWED: usize = 16;
const SIZE: usize = 1024;
/// Of the `serve` clients, those whose handler is blocked in a `send` at the signal, and
/// what it tries to send them: far more than the socket buffers it is given hold.
const SENDERS: usize = 10;
/// Of the `serve` clients, those whose handler sends without end to a client that reads
/// everything (a send that rarely waits).
const STREAMS: usize = 10;
const BIG: usize = 64 << 10;
const BIG_COUNT: usize = 64;

/// Every wait of these tests is bounded by this.
const LIMIT: Duration = Duration::from_secs(60);

/// The two 1,000-client runs one at a time (2,000 descriptors each, and two cores).
static HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn bounded<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(LIMIT, f)
        .await
        .expect("test step timed out")
}

/// Message `i` of a client: its number in the first bytes.
fn numbered(i: usize, size: usize) -> Message {
    let mut data = vec![0u8; size];
    data[..8].copy_from_slice(&(i as u64).to_be_bytes());
    Message::binary(data)
}

fn number(msg: &Message) -> usize {
    match msg {
        Message::Binary(b) => u64::from_be_bytes(b[..8].try_into().unwrap()) as usize,
        other => panic!("expected a numbered binary message, got {other:?}"),
    }
}

/// What a client read: how many numbered messages, all in order from 0, the close frame,
/// and when that arrived.
struct Received {
    messages: usize,
    close: Option<CloseFrame>,
    closed_at: Instant,
}

/// Reads until the connection ends (our client echoes the close).
async fn read_all(mut ws: WebSocket<TcpStream>) -> Received {
    let mut messages = 0;
    let mut close = None;
    let mut closed_at = Instant::now();
    while let Some(msg) = ws.recv().await.expect("a clean close") {
        match msg {
            Message::Close(frame) => {
                closed_at = Instant::now();
                close = frame;
            }
            Message::Ping(_) | Message::Pong(_) => {}
            data => {
                assert_eq!(number(&data), messages, "in order, none missing");
                messages += 1;
            }
        }
    }
    Received {
        messages,
        close,
        closed_at,
    }
}

/// A client over plain TCP; `small`: its socket takes little at a time (a 4 KiB receive
/// buffer).
async fn client(addr: SocketAddr, small: bool) -> WebSocket<TcpStream> {
    let socket = TcpSocket::new_v4().unwrap();
    if small {
        socket.set_recv_buffer_size(4096).unwrap();
    }
    let stream = bounded(socket.connect(addr)).await.unwrap();
    let _ = stream.set_nodelay(true);
    let host = addr.to_string();
    bounded(rapidws::tokio::client_handshake(
        stream,
        &host,
        "/",
        &ClientConfig::default(),
    ))
    .await
    .unwrap()
}

/// A loopback listener whose sockets have a small kernel send buffer (accepted sockets
/// inherit it), so that a client that does not read fills it at once.
fn small_listener() -> TcpListener {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_send_buffer_size(8192).unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    socket.listen(1024).unwrap()
}

/// What the `serve` handlers count.
#[derive(Default)]
struct Counts {
    /// Connections whose messages are on the server.
    ready: AtomicUsize,
    /// Messages the blocked senders have started to send.
    big_sent: AtomicUsize,
    /// Handlers whose connection ended with a clean close.
    clean: AtomicUsize,
}

/// The `serve` handler. The client's first message says what to do with the `OWED`
/// messages it is owed: `queued` leaves them in the connection's send queue (`feed` does
/// not write) while the handler awaits something else, the signal; `waiting` lets the
/// receive write them into the socket and wait there; `sending` sends `BIG_COUNT`
/// messages of `BIG` bytes into small socket buffers, so that the send waits;
/// `streaming` sends to a client that reads them as they come, until a send fails.
async fn owe(mut ws: WebSocket<TcpStream>, shutdown: Shutdown, counts: Arc<Counts>) {
    let Ok(Some(Message::Text(mode))) = ws.recv().await else {
        panic!("the client says what it wants first");
    };
    match mode.as_str() {
        "queued" | "waiting" => {
            for i in 0..OWED {
                ws.feed(numbered(i, SIZE)).await.unwrap();
            }
            assert!(ws.queued_bytes() > OWED * SIZE, "queued, not written");
            counts.ready.fetch_add(1, SeqCst);
            if mode.as_str() == "queued" {
                shutdown.triggered().await;
            }
        }
        "sending" => {
            counts.ready.fetch_add(1, SeqCst);
            for i in 0..BIG_COUNT {
                counts.big_sent.fetch_add(1, SeqCst);
                // Fails once the signal has queued our close ahead of the next message.
                if ws.send(numbered(i, BIG)).await.is_err() {
                    break;
                }
            }
        }
        "streaming" => {
            counts.ready.fetch_add(1, SeqCst);
            let mut i = 0;
            while ws.send(numbered(i, SIZE)).await.is_ok() {
                i += 1;
            }
        }
        other => panic!("unknown mode {other}"),
    }
    // Whatever it did: the receive writes what is queued and our close, and ends once
    // the client has answered.
    loop {
        match ws.recv().await {
            Ok(Some(_)) => {}
            Ok(None) => {
                counts.clean.fetch_add(1, SeqCst);
                return;
            }
            Err(e) => panic!("the connection failed: {e}"),
        }
    }
}

/// Waits until `f` holds, polling.
async fn until(what: &str, f: impl Fn() -> bool) {
    bounded(async {
        while !f() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    let _ = what;
}

/// An attempt to open a WebSocket after the signal: refused (the listener is closed, or
/// the connection dropped), not left waiting: the handshake timeout is longer than the
/// test's bound.
async fn refused_after_the_signal(addr: SocketAddr) {
    let config = ClientConfig::default().with_handshake_timeout(Some(2 * LIMIT));
    let r = bounded(connect(format!("ws://{addr}/"), &config)).await;
    assert!(r.is_err(), "a connection was accepted after the signal");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_sends_everything_queued_then_1001_to_every_client() {
    let _one_at_a_time = HEAVY.lock().await;
    ensure_descriptors(3 * (CLIENTS + STREAMS) as u64);
    let shutdown = Shutdown::new();
    let config = ServerConfig::default().with_shutdown(&shutdown);
    let close_timeout = config.connection.close_timeout.unwrap();
    let listener = small_listener();
    let addr = listener.local_addr().unwrap();
    let counts = Arc::new(Counts::default());
    let server = {
        let (shutdown, counts) = (shutdown.clone(), counts.clone());
        tokio::spawn(serve(listener, config, move |ws| {
            owe(ws, shutdown.clone(), counts.clone())
        }))
    };

    let mut clients = Vec::with_capacity(CLIENTS);
    for i in 0..CLIENTS {
        let mode = match i {
            _ if i < SENDERS => "sending",
            _ if i.is_multiple_of(2) => "queued",
            _ => "waiting",
        };
        let mut ws = client(addr, mode == "sending").await;
        ws.send(Message::text(mode)).await.unwrap();
        clients.push((mode, ws));
    }
    until("every connection owes its messages", || {
        counts.ready.load(SeqCst) == CLIENTS
    })
    .await;
    // The streams start last, their clients reading from the start.
    let mut streams = Vec::with_capacity(STREAMS);
    for _ in 0..STREAMS {
        let mut ws = client(addr, false).await;
        ws.send(Message::text("streaming")).await.unwrap();
        streams.push(tokio::spawn(
            async move { ("streaming", read_all(ws).await) },
        ));
    }
    until("the streams run", || {
        counts.ready.load(SeqCst) == CLIENTS + STREAMS
    })
    .await;
    // The blocked senders have stopped short: their socket is full.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let big_sent = counts.big_sent.load(SeqCst);
    assert!(
        big_sent < SENDERS * BIG_COUNT,
        "the senders were not blocked ({big_sent} sends started)"
    );
    assert_eq!(shutdown.connections(), CLIENTS + STREAMS);

    let signal = Instant::now();
    shutdown.trigger();
    let readers: Vec<_> = clients
        .into_iter()
        .map(|(mode, ws)| tokio::spawn(async move { (mode, read_all(ws).await) }))
        .chain(streams)
        .collect();
    refused_after_the_signal(addr).await;
    let mut last_close = Duration::ZERO;
    for r in readers {
        let (mode, got) = bounded(r).await.unwrap();
        let close = got.close.expect("a close frame");
        assert_eq!((close.code.0, close.reason.as_str()), (1001, "going away"));
        if matches!(mode, "sending" | "streaming") {
            // What the handler sent, in order: the close went behind the message its send
            // had started, and the sends after it failed.
            assert!(got.messages > 0, "{mode}");
        } else {
            assert_eq!(got.messages, OWED, "{mode}");
        }
        last_close = last_close.max(got.closed_at - signal);
    }
    let returned = bounded(server).await.unwrap();
    let took = signal.elapsed();
    returned.unwrap();
    eprintln!(
        "{CLIENTS} clients: the last close {last_close:?} after the signal, serve returned \
         after {took:?}"
    );
    assert!(last_close < close_timeout, "{last_close:?}");
    assert!(took < 2 * close_timeout, "{took:?}");
    assert_eq!(counts.clean.load(SeqCst), CLIENTS + STREAMS);
    assert_eq!(shutdown.connections(), 0);
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "the listener is closed"
    );
}

/// How each handled connection ended, as `on_close` saw it: the peer's close code and
/// the error.
type Ends = Arc<Mutex<Vec<(Option<u16>, Option<String>)>>>;

/// A `serve_handler` connection: owes `OWED` messages from `on_open`, notes how it ended.
struct Owing {
    ends: Ends,
}

impl Handler for Owing {
    fn on_open(&mut self, socket: &mut Socket<'_>) {
        for i in 0..OWED {
            socket.send(numbered(i, SIZE));
        }
    }
    fn on_close(&mut self, frame: Option<&CloseFrame>, error: Option<&rapidws::Error>) {
        self.ends
            .lock()
            .unwrap()
            .push((frame.map(|f| f.code.0), error.map(ToString::to_string)));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_handler_goes_away_and_every_on_close_runs() {
    let _one_at_a_time = HEAVY.lock().await;
    ensure_descriptors(3 * CLIENTS as u64);
    let shutdown = Shutdown::new();
    let config = ServerConfig::default().with_shutdown(&shutdown);
    let close_timeout = config.connection.close_timeout.unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let ends = Ends::default();
    let server = {
        let ends = ends.clone();
        tokio::spawn(serve_handler(listener, config, move |_| Owing {
            ends: ends.clone(),
        }))
    };
    // The clients read nothing until the signal: what they are owed waits on the server.
    let mut clients = Vec::with_capacity(CLIENTS);
    for _ in 0..CLIENTS {
        clients.push(client(addr, true).await);
    }
    until("every connection is open", || {
        shutdown.connections() == CLIENTS
    })
    .await;

    let signal = Instant::now();
    shutdown.trigger();
    let readers: Vec<_> = clients
        .into_iter()
        .map(|ws| tokio::spawn(read_all(ws)))
        .collect();
    refused_after_the_signal(addr).await;
    let mut last_close = Duration::ZERO;
    for r in readers {
        let got = bounded(r).await.unwrap();
        let close = got.close.expect("a close frame");
        assert_eq!((close.code.0, close.reason.as_str()), (1001, "going away"));
        assert_eq!(got.messages, OWED);
        last_close = last_close.max(got.closed_at - signal);
    }
    bounded(server).await.unwrap().unwrap();
    let took = signal.elapsed();
    eprintln!(
        "{CLIENTS} handler clients: the last close {last_close:?} after the signal, \
         serve_handler returned after {took:?}"
    );
    assert!(last_close < close_timeout, "{last_close:?}");
    assert!(took < 2 * close_timeout, "{took:?}");
    let ends = ends.lock().unwrap();
    assert_eq!(ends.len(), CLIENTS, "on_close ran for every connection");
    // Each saw the client's answer to our close (its echo of 1001), and no error.
    assert!(
        ends.iter().all(|e| *e == (Some(1001), None)),
        "{:?}",
        &ends[..3]
    );
}

/// The bounds: a peer that reads but never answers our close, one that never reads, and
/// a handler that awaits something else forever. The first two are dropped at the close
/// timeout; `serve` aborts the third at twice the close timeout and returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_is_bounded_by_the_close_timeout() {
    let close_timeout = Duration::from_secs(1);
    let shutdown = Shutdown::new();
    let config = ServerConfig::default()
        .with_connection(Config::default().with_close_timeout(close_timeout))
        .with_shutdown(&shutdown);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let opened = Arc::new(AtomicUsize::new(0));
    let server = {
        let opened = opened.clone();
        tokio::spawn(serve(
            listener,
            config,
            move |mut ws: WebSocket<TcpStream>| {
                let opened = opened.clone();
                async move {
                    let n = opened.fetch_add(1, SeqCst);
                    if n == 2 {
                        // Never uses its connection again.
                        std::future::pending::<()>().await;
                    }
                    // Far more than the silent peer's socket takes.
                    for i in 0..64 {
                        if ws.try_send(numbered(i, BIG)).is_err() {
                            break;
                        }
                    }
                    while let Ok(Some(_)) = ws.recv().await {}
                }
            },
        ))
    };
    // 0: reads everything, never answers our close. 1: never reads. 2: its handler hangs.
    let mut mute = bounded_support::connect(addr).await;
    let leftover = client_handshake(&mut mute, false).await;
    until("opened", || opened.load(SeqCst) == 1).await;
    let deaf = {
        let socket = TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        let mut s = socket.connect(addr).await.unwrap();
        client_handshake(&mut s, false).await;
        s
    };
    until("opened", || opened.load(SeqCst) == 2).await;
    let mut hung = bounded_support::connect(addr).await;
    client_handshake(&mut hung, false).await;
    until("opened", || opened.load(SeqCst) == 3).await;

    let signal = Instant::now();
    shutdown.trigger();
    // The mute peer reads its data and our 1001, then the server drops it at the close
    // timeout: the end of the stream.
    let code = read_close(&mut mute, &leftover, LIMIT).await;
    assert_eq!(code, Some(1001));
    let mut rest = [0u8; 1];
    let eof = bounded(tokio::io::AsyncReadExt::read(&mut mute, &mut rest)).await;
    assert!(matches!(eof, Ok(0) | Err(_)), "{eof:?}");
    let dropped = signal.elapsed();
    assert!(
        dropped >= close_timeout && dropped < 2 * close_timeout,
        "the mute peer was dropped after {dropped:?}"
    );
    bounded(server).await.unwrap().unwrap();
    let took = signal.elapsed();
    eprintln!("mute peer dropped after {dropped:?}; serve returned after {took:?}");
    assert!(
        took >= 2 * close_timeout && took < 3 * close_timeout,
        "serve returned after {took:?}"
    );
    assert_eq!(shutdown.connections(), 0);
    drop((deaf, hung));
}

/// The blocking layer has no accept loop; a connection opened with the signal sees it at
/// its next call, and goes away like the others.
#[test]
fn a_blocking_connection_goes_away_at_its_next_read() {
    use rapidws::blocking;
    let shutdown = Shutdown::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("ws://{}/", listener.local_addr().unwrap());
    let config = ServerConfig::default().with_shutdown(&shutdown);
    let (sent_tx, sent) = std::sync::mpsc::channel();
    let (go_tx, go) = std::sync::mpsc::channel::<()>();
    let server = std::thread::spawn(move || {
        let mut ws = blocking::accept(listener.accept().unwrap().0, &config).unwrap();
        for i in 0..OWED {
            ws.send(numbered(i, SIZE)).unwrap();
        }
        sent_tx.send(()).unwrap();
        // The signal comes while this thread does something else; its next read sees it.
        go.recv().unwrap();
        let mut after = 0;
        while ws.read().unwrap().is_some() {
            after += 1;
        }
        after
    });
    let mut client = blocking::connect(&url, &ClientConfig::default()).unwrap();
    sent.recv().unwrap();
    shutdown.trigger();
    go_tx.send(()).unwrap();
    let mut numbers = Vec::new();
    let close = loop {
        match client.read().unwrap() {
            Some(Message::Close(frame)) => break frame,
            Some(msg) => numbers.push(number(&msg)),
            None => panic!("no close frame"),
        }
    };
    assert_eq!(numbers, (0..OWED).collect::<Vec<_>>());
    let close = close.expect("a close frame");
    assert_eq!((close.code.0, close.reason.as_str()), (1001, "going away"));
    while client.read().unwrap().is_some() {}
    // The server's read returned the client's answer to our close, then the end.
    assert_eq!(server.join().unwrap(), 1);
    assert_eq!(shutdown.connections(), 0);
}
