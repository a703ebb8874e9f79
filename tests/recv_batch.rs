//! Batch receive: `Connection::poll_batch`, `WebSocket::recv_batch` (tokio, whole and
//! split) and the blocking `read_batch` lend what `poll_message_ref` would lend, in the
//! same order, with the same pongs and the same close codes, in both roles, however the
//! bytes arrive; a batch dropped early loses nothing; and no message lent in a batch
//! allocates (a counting global allocator counts this thread's allocations).
#![cfg(feature = "tokio")]

use std::time::Instant;

mod alloc_count;

use rapidws::connection::{Config, Connection, Delivery};
use rapidws::{CloseCode, MessageKind, MessageRef, Role};

/// An owned copy of a lent message, to compare sequences.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Got {
    Text(String),
    Binary(Vec<u8>),
    Ping(Vec<u8>),
    Pong(Vec<u8>),
    Close(Option<(u16, String)>),
    Error(Option<u16>),
}

/// The close code a failure of the tokio or blocking layer sent.
fn code(e: &rapidws::Error) -> Option<u16> {
    match e {
        rapidws::Error::Protocol(p) => Some(p.close_code().0),
        _ => None,
    }
}

fn got_owned(m: rapidws::Message) -> Got {
    match m {
        rapidws::Message::Text(t) => Got::Text(t.as_str().to_owned()),
        rapidws::Message::Binary(b) => Got::Binary(b.to_vec()),
        rapidws::Message::Ping(p) => Got::Ping(p.to_vec()),
        rapidws::Message::Pong(p) => Got::Pong(p.to_vec()),
        rapidws::Message::Close(c) => {
            Got::Close(c.map(|f| (f.code.0, f.reason.as_str().to_owned())))
        }
    }
}

fn got(m: MessageRef<'_>) -> Got {
    match m {
        MessageRef::Text(t) => Got::Text(t.to_owned()),
        MessageRef::Binary(b) => Got::Binary(b.to_vec()),
        MessageRef::Ping(p) => Got::Ping(p.to_vec()),
        MessageRef::Pong(p) => Got::Pong(p.to_vec()),
        MessageRef::Close(c) => Got::Close(c.map(|(code, r)| (code.0, r.to_owned()))),
    }
}

/// A tiny deterministic PRNG, so failures reproduce.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// What the peer of `role` sends: many small messages of every length class, with pings,
/// fragmented messages and (when `bad`) a text frame that is not UTF-8 somewhere.
fn stream(role: Role, seed: u64, bad: bool) -> Vec<u8> {
    let peer = if role == Role::Server {
        Role::Client
    } else {
        Role::Server
    };
    let mut rng = Rng(seed | 1);
    let mut conn = Connection::new(peer, Config::default(), Instant::now());
    let mut out = Vec::new();
    let count = 300;
    let bad_at = bad.then(|| 50 + rng.below(200));
    for i in 0..count {
        let len = match rng.below(8) {
            0 => 126 + rng.below(400),
            1 => rng.below(3),
            _ => rng.below(126),
        };
        match rng.below(20) {
            0 => conn.ping(&vec![b'p'; len.min(125)]).unwrap(),
            1 => {
                conn.begin_message(MessageKind::Text).unwrap();
                conn.send_chunk("frag ".as_bytes()).unwrap();
                conn.end_message("mént".as_bytes()).unwrap();
            }
            2..=8 => conn.send(MessageKind::Binary, &vec![i as u8; len]).unwrap(),
            _ => {
                let text: String = "héllo wörld, ünïcode ".chars().cycle().take(len).collect();
                conn.send_text(&text).unwrap();
            }
        }
        if Some(i) == bad_at {
            // Not UTF-8: sent as text through the sans-IO core, which does not check it.
            conn.send(MessageKind::Text, &[b'o', b'k', 0xE2, 0x28, 0xA1])
                .unwrap();
        }
        conn.write_pending(&mut out);
    }
    out
}

/// Everything a connection of `role` lends from `wire`, fed in pieces of the sizes
/// `cuts` gives, one message per call (`batch: false`) or batch after batch; and what it
/// wrote back (pongs, its close).
fn receive(role: Role, wire: &[u8], cuts: &mut Rng, batch: bool) -> (Vec<Got>, Vec<u8>) {
    let now = Instant::now();
    let mut conn = Connection::new(role, Config::default(), now);
    let mut seen = Vec::new();
    let mut pos = 0;
    loop {
        let n = (1 + cuts.below(9000)).min(wire.len() - pos);
        conn.handle_bytes(now, &wire[pos..pos + n]);
        pos += n;
        loop {
            if batch {
                match conn.poll_batch() {
                    Some(Ok(b)) => seen.extend(b.map(got)),
                    Some(Err(e)) => seen.push(Got::Error(e.close_code().map(|c| c.0))),
                    None => break,
                }
            } else {
                match conn.poll_message_ref() {
                    Some(Ok(m)) => seen.push(got(m)),
                    Some(Err(e)) => seen.push(Got::Error(e.close_code().map(|c| c.0))),
                    None => break,
                }
            }
        }
        if pos == wire.len() {
            break;
        }
    }
    let mut out = Vec::new();
    conn.write_pending(&mut out);
    (seen, out)
}

#[test]
fn poll_batch_lends_what_poll_message_ref_lends_in_both_roles() {
    for role in [Role::Server, Role::Client] {
        for seed in 0..12 {
            let bad = seed % 3 == 2;
            let wire = stream(role, seed, bad);
            // The same cuts for both.
            let (want, want_out) = receive(role, &wire, &mut Rng(seed + 100), false);
            let (got, got_out) = receive(role, &wire, &mut Rng(seed + 100), true);
            assert!(want.len() > 50, "{role:?} {seed}: {} messages", want.len());
            assert_eq!(got, want, "{role:?} seed {seed}");
            // The same pongs and close (a client masks each with a key of its own).
            if role == Role::Server {
                assert!(got_out == want_out, "{role:?} seed {seed}: pongs and close");
            } else {
                assert_eq!(
                    got_out.len(),
                    want_out.len(),
                    "seed {seed}: pongs and close"
                );
            }
            if bad {
                assert_eq!(want.last(), Some(&Got::Error(Some(1007))));
            }
        }
    }
}

#[test]
fn a_batch_dropped_early_leaves_the_rest_as_it_arrived() {
    for role in [Role::Server, Role::Client] {
        let wire = stream(role, 7, false);
        let (want, _) = receive(role, &wire, &mut Rng(1), false);
        let now = Instant::now();
        let mut conn = Connection::new(role, Config::default(), now);
        conn.handle_bytes(now, &wire);
        let mut seen = Vec::new();
        let mut k = 0;
        while let Some(b) = conn.poll_batch() {
            // Take 0, 1, 2, ... messages of each batch (at least one in all, as a
            // receive loop would), then drop it.
            k = (k + 1) % 4;
            seen.extend(b.unwrap().take(k.max(1)).map(got));
        }
        assert_eq!(seen, want, "{role:?}");
    }
}

/// Takes the first `k` messages of `b` (at least one), then leaks it (`mem::forget`, safe
/// code): no drop runs, and the connection must still know which messages the batch
/// decoded in place and did not hand out.
fn take_and_forget(mut b: rapidws::connection::Batch<'_>, k: usize, seen: &mut Vec<Got>) {
    for _ in 0..k.max(1) {
        match b.next() {
            Some(m) => seen.push(got(m)),
            None => break,
        }
    }
    std::mem::forget(b);
}

/// The messages of [`stream`] and the client's close with 1000 "done", on the wire.
fn stream_then_close(seed: u64) -> Vec<u8> {
    let mut wire = stream(Role::Server, seed, false);
    let mut c = Connection::new(Role::Client, Config::default(), Instant::now());
    c.close(Instant::now(), CloseCode::NORMAL, "done").unwrap();
    c.write_pending(&mut wire);
    wire
}

#[test]
fn a_batch_leaked_mid_round_leaves_the_rest_as_it_arrived() {
    for role in [Role::Server, Role::Client] {
        let wire = stream(role, 7, false);
        let (want, _) = receive(role, &wire, &mut Rng(1), false);
        let now = Instant::now();
        let mut conn = Connection::new(role, Config::default(), now);
        conn.handle_bytes(now, &wire);
        let mut seen = Vec::new();
        let mut k = 0;
        while let Some(b) = conn.poll_batch() {
            k = (k + 1) % 4;
            take_and_forget(b.unwrap(), k, &mut seen);
        }
        assert_eq!(seen, want, "{role:?}");
    }
}

#[test]
fn chunk_delivery_and_deflate_take_the_usual_path() {
    // With chunk delivery a batch is one event; messages keep coming whole.
    let role = Role::Server;
    let wire = stream(role, 3, false);
    let now = Instant::now();
    let config = Config::default().with_delivery(Delivery::Chunks);
    let mut a = Connection::new(role, config.clone(), now);
    let mut b = Connection::new(role, config, now);
    a.handle_bytes(now, &wire);
    b.handle_bytes(now, &wire);
    let mut want = Vec::new();
    while let Some(m) = a.poll_message_ref() {
        want.push(got(m.unwrap()));
    }
    let mut seen = Vec::new();
    while let Some(batch) = b.poll_batch() {
        let batch: Vec<Got> = batch.unwrap().map(got).collect();
        assert_eq!(batch.len(), 1, "chunk delivery batches one message");
        seen.extend(batch);
    }
    assert_eq!(seen, want);
}

#[test]
fn a_batch_allocates_nothing_per_message() {
    for role in [Role::Server, Role::Client] {
        let peer = if role == Role::Server {
            Role::Client
        } else {
            Role::Server
        };
        let now = Instant::now();
        let mut sender = Connection::new(peer, Config::default(), now);
        let mut conn = Connection::new(role, Config::default(), now);
        let mut wire = Vec::new();
        let mut received = 0;
        let mut allocations = 0;
        for round in 0..20 {
            wire.clear();
            for i in 0..500 {
                sender
                    .send_text(&format!("{{\"round\":{round},\"i\":{i},\"ü\":1}}"))
                    .unwrap();
            }
            sender.write_pending(&mut wire);
            conn.handle_bytes(now, &wire);
            let counting = round >= 2;
            if counting {
                alloc_count::start();
            }
            while let Some(b) = conn.poll_batch() {
                for m in b.unwrap() {
                    assert!(m.as_text().unwrap().contains("\"ü\":1"));
                    received += 1;
                }
            }
            let n = alloc_count::stop();
            if counting {
                allocations += n;
            }
        }
        assert_eq!(received, 20 * 500);
        assert_eq!(allocations, 0, "{role:?}: 9,000 messages lent in batches");
    }
}

mod tokio_layer {
    use super::*;
    use rapidws::tokio::WebSocket;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, duplex};

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn a_batch_leaked_mid_round_leaves_the_rest_as_it_arrived() {
        for split in [false, true] {
            let wire = stream_then_close(13);
            let (want, _) = receive(Role::Server, &wire, &mut Rng(5), false);
            runtime().block_on(async {
                let (mut peer, io) = duplex(1 << 20);
                let ws = WebSocket::from_raw(io, Role::Server, &Config::default(), &[]);
                let writer = tokio::spawn(async move {
                    peer.write_all(&wire).await.unwrap();
                    let mut sink = Vec::new();
                    let _ = peer.read_to_end(&mut sink).await;
                });
                let mut seen = Vec::new();
                let mut k = 0;
                macro_rules! receive_all {
                    ($ws:expr) => {
                        loop {
                            match $ws.recv_batch().await {
                                Ok(Some(b)) => {
                                    k = (k + 1) % 4;
                                    take_and_forget(b, k, &mut seen);
                                }
                                Ok(None) => break,
                                Err(e) => {
                                    seen.push(Got::Error(code(&e)));
                                    break;
                                }
                            }
                        }
                    };
                }
                if split {
                    let (mut rd, _wr) = ws.into_split();
                    receive_all!(rd);
                } else {
                    let mut ws = ws;
                    receive_all!(ws);
                }
                writer.await.unwrap();
                assert_eq!(seen, want, "split {split}");
            });
        }
    }

    #[test]
    fn recv_batch_lends_every_message_of_a_burst_and_fails_bad_text_with_1007() {
        for role in [Role::Server, Role::Client] {
            for split in [false, true] {
                let wire = stream(role, 11, true);
                let (want, _) = receive(role, &wire, &mut Rng(5), false);
                runtime().block_on(async {
                    let (mut peer, io) = duplex(1 << 20);
                    let ws = WebSocket::from_raw(io, role, &Config::default(), &[]);
                    let writer = tokio::spawn(async move {
                        for chunk in wire.chunks(7000) {
                            peer.write_all(chunk).await.unwrap();
                            tokio::task::yield_now().await;
                        }
                        peer
                    });
                    let mut seen = Vec::new();
                    let mut batches = 0;
                    if split {
                        let (mut rd, _wr) = ws.into_split();
                        loop {
                            match rd.recv_batch().await {
                                Ok(Some(b)) => {
                                    batches += 1;
                                    seen.extend(b.map(got));
                                }
                                Ok(None) => break,
                                Err(e) => {
                                    seen.push(Got::Error(code(&e)));
                                    break;
                                }
                            }
                        }
                    } else {
                        let mut ws = ws;
                        loop {
                            match ws.recv_batch().await {
                                Ok(Some(b)) => {
                                    batches += 1;
                                    seen.extend(b.map(got));
                                }
                                Ok(None) => break,
                                Err(e) => {
                                    seen.push(Got::Error(code(&e)));
                                    break;
                                }
                            }
                        }
                    }
                    drop(writer);
                    assert_eq!(seen, want, "{role:?} split {split}");
                    assert!(batches < want.len() / 2, "{batches} batches");
                });
            }
        }
    }

    #[test]
    fn a_read_half_batch_dropped_early_goes_back_to_the_connection() {
        let role = Role::Server;
        let wire = stream(role, 4, false);
        let (want, _) = receive(role, &wire, &mut Rng(5), false);
        runtime().block_on(async {
            let (mut peer, io) = duplex(1 << 20);
            let ws = WebSocket::from_raw(io, role, &Config::default(), &[]);
            peer.write_all(&wire).await.unwrap();
            let (mut rd, _wr) = ws.into_split();
            let mut seen = Vec::new();
            let mut k = 0;
            while seen.len() < want.len() {
                k += 1;
                if k % 3 == 0 {
                    // An owning receive between batches takes the next message.
                    let m = rd.recv().await.unwrap().unwrap();
                    seen.push(got_owned(m));
                    continue;
                }
                let b = rd.recv_batch().await.unwrap().unwrap();
                seen.extend(b.take(k % 5 + 1).map(got));
            }
            assert_eq!(seen, want);
        });
    }

    #[test]
    fn recv_batch_allocates_nothing_per_message() {
        for role in [Role::Server, Role::Client] {
            for split in [false, true] {
                runtime().block_on(async {
                    let peer_role = if role == Role::Server {
                        Role::Client
                    } else {
                        Role::Server
                    };
                    let (mut peer, io) = duplex(4 << 20);
                    let ws = WebSocket::from_raw(io, role, &Config::default(), &[]);
                    let (mut ws, mut rd) = if split {
                        let (rd, wr) = ws.into_split();
                        std::mem::forget(wr);
                        (None, Some(rd))
                    } else {
                        (Some(ws), None)
                    };
                    let mut sender = Connection::new(peer_role, Config::default(), Instant::now());
                    let mut allocations = 0;
                    let mut received = 0;
                    for round in 0..30 {
                        // One message a read, then many.
                        let per_read = if round % 2 == 0 { 1 } else { 300 };
                        let mut wire = Vec::new();
                        for i in 0..per_read {
                            sender.send(MessageKind::Binary, &[i as u8; 40]).unwrap();
                        }
                        sender.write_pending(&mut wire);
                        peer.write_all(&wire).await.unwrap();
                        let mut left = per_read;
                        let counting = round >= 8;
                        while left > 0 {
                            if counting {
                                alloc_count::start();
                            }
                            let n = match (&mut ws, &mut rd) {
                                (Some(ws), _) => ws.recv_batch().await.unwrap().unwrap().count(),
                                (_, Some(rd)) => rd.recv_batch().await.unwrap().unwrap().count(),
                                _ => unreachable!(),
                            };
                            let a = alloc_count::stop();
                            if counting {
                                allocations += a;
                            }
                            left -= n;
                            received += n;
                        }
                    }
                    assert_eq!(received, 15 * 301);
                    // A message that arrives alone on a split half is copied into the
                    // half (as `recv_ref` copies it) into a buffer it keeps: no
                    // allocation either.
                    assert_eq!(allocations, 0, "{role:?} split {split}");
                });
            }
        }
    }
}

mod blocking_layer {
    use super::*;
    use rapidws::blocking::WebSocket;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn a_read_batch_leaked_mid_round_leaves_the_rest_as_it_arrived() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let wire = stream_then_close(13);
        let (want, _) = receive(Role::Server, &wire, &mut Rng(5), false);
        let writer = std::thread::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(&wire).unwrap();
            let mut sink = Vec::new();
            let _ = std::io::Read::read_to_end(&mut s, &mut sink);
        });
        let (sock, _) = listener.accept().unwrap();
        let mut ws = WebSocket::from_raw(sock, Role::Server, &Config::default(), &[]);
        let mut seen = Vec::new();
        let mut k = 0;
        loop {
            match ws.read_batch() {
                Ok(Some(b)) => {
                    k = (k + 1) % 4;
                    take_and_forget(b, k, &mut seen);
                }
                Ok(None) => break,
                Err(e) => {
                    seen.push(Got::Error(code(&e)));
                    break;
                }
            }
        }
        writer.join().unwrap();
        assert_eq!(seen, want);
    }

    #[test]
    fn read_batch_lends_every_message_and_reports_the_close() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let wire = stream(Role::Server, 9, false);
        let (want, _) = receive(Role::Server, &wire, &mut Rng(5), false);
        let writer = std::thread::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(&wire).unwrap();
            // Then a close, and wait for the echo.
            let mut c = Connection::new(Role::Client, Config::default(), Instant::now());
            c.close(Instant::now(), CloseCode::NORMAL, "done").unwrap();
            let mut out = Vec::new();
            c.write_pending(&mut out);
            s.write_all(&out).unwrap();
            let mut sink = Vec::new();
            let _ = std::io::Read::read_to_end(&mut s, &mut sink);
        });
        let (sock, _) = listener.accept().unwrap();
        let mut ws = WebSocket::from_raw(sock, Role::Server, &Config::default(), &[]);
        let mut seen = Vec::new();
        while let Some(b) = ws.read_batch().unwrap() {
            seen.extend(b.map(got));
        }
        writer.join().unwrap();
        assert_eq!(seen.last(), Some(&Got::Close(Some((1000, "done".into())))));
        seen.pop();
        assert_eq!(seen, want);
    }
}
