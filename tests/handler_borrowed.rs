//! The handler API's borrowed callback (`Handler::BORROWED`, `on_message_ref`): messages
//! lent in order, batch after batch, replies framed straight into the output queue, a
//! close or a panic in the middle of a batch ending the connection as it does for owned
//! callbacks, and no allocation per message (a counting global allocator counts the
//! server thread's allocations from inside its callbacks).
#![cfg(feature = "tokio")]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod alloc_count;

use rapidws::connection::{Config, Connection, Event};
use rapidws::handler::{self, Handler, Socket};
use rapidws::tokio::{CloseFrame, MessageRef, ServerConfig};
use rapidws::{CloseCode, MessageKind, Role};

/// Echoes what it is lent; closes on "close", panics on "panic"; counts, and counts the
/// allocations made between its `from`th and `to`th message.
#[derive(Default)]
struct Echo {
    count: usize,
    from: usize,
    to: usize,
    allocations: Arc<Mutex<Option<usize>>>,
    pings: usize,
    /// Replies with an owned copy of each message (which allocates), so that the test
    /// sees the counter count on the server's thread.
    copy: bool,
}

impl Handler for Echo {
    const BORROWED: bool = true;
    fn on_message_ref(&mut self, socket: &mut Socket<'_>, msg: MessageRef<'_>) {
        self.count += 1;
        if self.to > 0 && self.count == self.from {
            alloc_count::start();
        }
        if self.to > 0 && self.count == self.to {
            *self.allocations.lock().unwrap() = Some(alloc_count::stop());
        }
        match msg {
            MessageRef::Text("close") => socket.close(4000, "asked"),
            MessageRef::Text("panic") => panic!("asked to panic"),
            MessageRef::Text("count") => socket.send_text(self.count.to_string()),
            msg if self.copy => socket.send(msg.to_message()),
            msg => socket.send_ref(msg),
        }
    }
    fn on_ping(&mut self, _: &mut Socket<'_>, _: bytes::Bytes) {
        self.pings += 1;
    }
}

/// A server running `handler` on one connection, on its own thread and runtime; its
/// address.
fn serve(
    handler: Echo,
) -> (
    std::net::SocketAddr,
    std::thread::JoinHandle<Result<(), String>>,
) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            listener.set_nonblocking(true).unwrap();
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let (s, _) = listener.accept().await.unwrap();
            let ws = rapidws::tokio::accept(s, &ServerConfig::default())
                .await
                .map_err(|e| e.to_string())?;
            let mut h = handler;
            handler::run(ws, &mut h).await.map_err(|e| e.to_string())
        })
    });
    (addr, t)
}

/// A blocking client: the handshake, then frames sent and received through a sans-IO
/// connection.
struct Client {
    sock: TcpStream,
    conn: Connection,
}

impl Client {
    fn connect(addr: std::net::SocketAddr) -> Client {
        let mut sock = TcpStream::connect(addr).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        sock.write_all(
            b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
              Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        )
        .unwrap();
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            sock.read_exact(&mut b).unwrap();
            head.push(b[0]);
        }
        assert!(head.starts_with(b"HTTP/1.1 101"));
        let conn = Connection::new(Role::Client, Config::default(), Instant::now());
        Client { sock, conn }
    }

    fn flush(&mut self) {
        let mut out = Vec::new();
        self.conn.write_pending(&mut out);
        self.sock.write_all(&out).unwrap();
    }

    /// The next `n` events (or fewer if the connection ends), as text.
    fn events(&mut self, n: usize) -> Vec<String> {
        let mut seen = Vec::new();
        let mut buf = vec![0u8; 64 << 10];
        while seen.len() < n {
            while let Some(ev) = self.conn.poll_event() {
                seen.push(match ev {
                    Ok(Event::Message(m)) => format!("{m:?}"),
                    Ok(Event::Close(c)) => format!("close {:?}", c.map(|(code, _)| code.0)),
                    Ok(other) => format!("{other:?}"),
                    Err(e) => format!("error {e}"),
                });
                if seen.len() == n {
                    return seen;
                }
            }
            self.flush();
            let k = self.sock.read(&mut buf).unwrap_or(0);
            if k == 0 {
                return seen;
            }
            self.conn.handle_bytes(Instant::now(), &buf[..k]);
        }
        seen
    }
}

#[test]
fn borrowed_callbacks_echo_bursts_in_order() {
    let (addr, server) = serve(Echo::default());
    let mut c = Client::connect(addr);
    let mut want = Vec::new();
    let mut pings = 0;
    for i in 0..2000 {
        match i % 5 {
            0 => {
                c.conn
                    .send(MessageKind::Binary, &vec![i as u8; i % 300])
                    .unwrap();
                want.push(format!("{:?}", MessageRef::Binary(&vec![i as u8; i % 300])));
            }
            _ => {
                let t = format!("message {i}: héllo");
                c.conn.send_text(&t).unwrap();
                want.push(format!("{:?}", MessageRef::Text(&t)));
            }
        }
        if i % 97 == 0 {
            c.conn.ping(b"p").unwrap();
            pings += 1;
        }
    }
    c.conn.send_text("count").unwrap();
    want.push(format!("{:?}", MessageRef::Text("2001")));
    c.flush();
    // Every message and a pong for each ping: asking for more would wait out the read
    // timeout (20 s) for events that never come.
    let got: Vec<String> = c
        .events(want.len() + pings)
        .into_iter()
        .filter(|e| !e.starts_with("Pong"))
        .take(want.len())
        .collect();
    assert_eq!(got, want);
    c.conn.close(Instant::now(), CloseCode::NORMAL, "").unwrap();
    c.flush();
    assert_eq!(c.events(1), vec!["close Some(1000)".to_string()]);
    drop(c);
    server.join().unwrap().unwrap();
}

#[test]
fn a_close_or_a_panic_in_a_batch_ends_it_there() {
    for (stop, code) in [("close", 4000u16), ("panic", 1011)] {
        let (addr, server) = serve(Echo::default());
        let mut c = Client::connect(addr);
        for i in 0..50 {
            c.conn.send_text(&format!("m{i}")).unwrap();
        }
        c.conn.send_text(stop).unwrap();
        for i in 0..50 {
            c.conn.send_text(&format!("after {i}")).unwrap();
        }
        c.flush();
        let got = c.events(52);
        assert_eq!(got.len(), 51, "{stop}: {got:?}");
        assert_eq!(got[49], format!("{:?}", MessageRef::Text("m49")));
        assert_eq!(got[50], format!("close Some({code})"), "{stop}");
        c.flush();
        drop(c);
        let r = server.join().unwrap();
        assert_eq!(r.is_err(), stop == "panic", "{stop}: {r:?}");
    }
}

#[test]
fn borrowed_callbacks_allocate_nothing_per_message() {
    for (burst, copy) in [(1usize, false), (64, false), (64, true)] {
        let allocations = Arc::new(Mutex::new(None));
        let (from, to) = (1000, 3000);
        let (addr, server) = serve(Echo {
            from,
            to,
            allocations: allocations.clone(),
            copy,
            ..Echo::default()
        });
        let mut c = Client::connect(addr);
        let mut sent = 0;
        while sent < to + 10 {
            for _ in 0..burst {
                c.conn
                    .send_text(&format!("{{\"n\":{sent},\"text\":\"grüße\"}}"))
                    .unwrap();
                sent += 1;
            }
            c.flush();
            let got = c.events(burst);
            assert_eq!(got.len(), burst);
        }
        c.conn.close(Instant::now(), CloseCode::NORMAL, "").unwrap();
        c.flush();
        let _ = c.events(1);
        drop(c);
        server.join().unwrap().unwrap();
        let n = allocations.lock().unwrap().expect("counted");
        if copy {
            // The counter counts on the server's thread: one copy per message.
            assert!(
                n >= to - from,
                "{n} allocations for {} owned copies",
                to - from
            );
        } else {
            assert_eq!(
                n,
                0,
                "{burst} in flight: allocations over {} echoes",
                to - from
            );
        }
    }
}

#[test]
fn owned_handlers_are_unchanged_by_the_borrowed_path() {
    // A handler without `BORROWED` gets owned messages, no copy: `on_message_ref` is never
    // called.
    struct Owned(Arc<Mutex<Vec<String>>>);
    impl Handler for Owned {
        fn on_message(&mut self, socket: &mut Socket<'_>, msg: rapidws::tokio::Message) {
            self.0.lock().unwrap().push(format!("{msg:?}"));
            socket.send(msg);
        }
        fn on_message_ref(&mut self, _: &mut Socket<'_>, _: MessageRef<'_>) {
            unreachable!("not borrowed");
        }
        fn on_close(&mut self, frame: Option<&CloseFrame>, _: Option<&rapidws::tokio::Error>) {
            self.0
                .lock()
                .unwrap()
                .push(format!("{:?}", frame.map(|f| f.code)));
        }
    }
    let log = Arc::new(Mutex::new(Vec::new()));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let log2 = log.clone();
    let server = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            listener.set_nonblocking(true).unwrap();
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let (s, _) = listener.accept().await.unwrap();
            let ws = rapidws::tokio::accept(s, &ServerConfig::default())
                .await
                .unwrap();
            handler::run(ws, &mut Owned(log2)).await.unwrap();
        })
    });
    let mut c = Client::connect(addr);
    c.conn.send_text("a").unwrap();
    c.conn.send_text("b").unwrap();
    c.flush();
    assert_eq!(c.events(2).len(), 2);
    c.conn.close(Instant::now(), CloseCode::NORMAL, "").unwrap();
    c.flush();
    let _ = c.events(1);
    drop(c);
    server.join().unwrap();
    assert_eq!(log.lock().unwrap().len(), 3);
}

/// A handler that answers every message with 256 KiB, counting its callbacks: borrowed
/// (`B`) or owned.
struct Flood<const B: bool> {
    calls: Arc<std::sync::atomic::AtomicUsize>,
    reply: bytes::Bytes,
}

impl<const B: bool> Handler for Flood<B> {
    const BORROWED: bool = B;
    fn on_message(&mut self, socket: &mut Socket<'_>, _: rapidws::tokio::Message) {
        self.calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        socket.send_binary(self.reply.clone());
    }
    fn on_message_ref(&mut self, socket: &mut Socket<'_>, _: MessageRef<'_>) {
        self.calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        socket.send_binary(self.reply.clone());
    }
}

/// How many callbacks a [`Flood`] handler ran for a raw peer that writes 400 tiny frames
/// in one write and never reads. The server's send timeout (1 s: the peer never reads)
/// ends the connection, and with it the count; no time is measured.
fn flood_calls<const B: bool>() -> usize {
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let handler = Flood::<B> {
        calls: calls.clone(),
        reply: bytes::Bytes::from(vec![1u8; 256 << 10]),
    };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            listener.set_nonblocking(true).unwrap();
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let (s, _) = listener.accept().await.unwrap();
            let mut config = ServerConfig::default();
            config.connection.send_timeout = Some(Duration::from_secs(1));
            let ws = rapidws::tokio::accept(s, &config).await.unwrap();
            let mut h = handler;
            handler::run(ws, &mut h).await
        })
    });
    let mut c = Client::connect(addr);
    for _ in 0..400 {
        c.conn.send_text("x").unwrap();
    }
    c.flush();
    // Never read; the server ends the connection when its send times out.
    let ended = server.join().unwrap();
    assert!(ended.is_err(), "{ended:?}");
    drop(c);
    calls.load(std::sync::atomic::Ordering::Relaxed)
}

#[test]
fn a_borrowed_batch_stops_at_the_send_queues_high_water_mark() {
    let owned = flood_calls::<false>();
    let borrowed = flood_calls::<true>();
    // The owned handler stops receiving once the queue is past its mark (256 KiB) and the
    // socket is full: a few replies' worth. The borrowed one stops its batch there too,
    // not after every message of the read.
    assert!(owned < 100, "owned: {owned} callbacks");
    assert!(
        borrowed <= owned + 8,
        "borrowed: {borrowed} callbacks, owned: {owned}"
    );
}
