//! Frame decode and encode in memory, rapidws against tungstenite in the same run.
//!
//! Decode: a buffer of whole frames replayed through an in-memory stream (tungstenite reads
//! it with `WebSocket::read`; rapidws gets it with `Connection::handle_bytes` and
//! `poll_event`), one message per iteration. Masked = client-to-server frames decoded by a
//! server; unmasked = server-to-client decoded by a client. Encode: one message per
//! iteration written to `io::sink()` (tungstenite `send`; rapidws `send_binary` then a
//! vectored write of each `Transmit`), masked for the client role.
//!
//! Burst: 100 text frames of 16 B or 100 B in one buffer, masked (a client's burst, decoded
//! by a server) or unmasked (a server's, decoded by a client), decoded whole per iteration
//! through the bare `Decoder` and through `Connection` (`handle_bytes` of the whole buffer,
//! then `poll_event` until it is empty), one frame per call.
//!
//! `cargo bench -p rapidws-integration --bench codec -- --warm-up-time 1 --measurement-time 2`

use std::hint::black_box;
use std::io::{self, IoSlice, Read, Write};
use std::time::Instant;

use bytes::Buf;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rapidws::Role;
use rapidws::codec::{Decoder, DecoderConfig, Item};
use rapidws::connection::{Config, Connection, Event};
use tungstenite::protocol::{Role as TRole, WebSocket};

const SIZES: [usize; 3] = [16, 1024, 64 * 1024];
/// Frames in a replay buffer: enough that reads cover many frames at small sizes.
const FRAMES: usize = 64;

/// Reads a buffer of whole frames over and over; writes go nowhere.
struct Replay {
    data: Vec<u8>,
    pos: usize,
}

impl Read for Replay {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.pos == self.data.len() {
            self.pos = 0;
        }
        let n = buf.len().min(self.data.len() - self.pos);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

impl Write for Replay {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn frames(sender: Role, size: usize) -> Vec<u8> {
    let mut conn = Connection::new(sender, Config::default(), Instant::now());
    let payload: Vec<u8> = (0..size).map(|i| (i * 7) as u8).collect();
    let mut out = Vec::new();
    for _ in 0..FRAMES {
        conn.send_binary(&payload).unwrap();
        conn.write_pending(&mut out);
    }
    out
}

fn decode(c: &mut Criterion) {
    let mut g = c.benchmark_group("decode");
    for size in SIZES {
        g.throughput(Throughput::Bytes(size as u64));
        for masked in [true, false] {
            let (sender, receiver, trole) = if masked {
                (Role::Client, Role::Server, TRole::Server)
            } else {
                (Role::Server, Role::Client, TRole::Client)
            };
            let wire = frames(sender, size);
            let frame_len = wire.len() / FRAMES;
            let label = if masked { "masked" } else { "unmasked" };

            g.bench_function(BenchmarkId::new(format!("rapidws/{label}"), size), |b| {
                let now = Instant::now();
                let mut conn = Connection::new(receiver, Config::default(), now);
                let mut i = 0;
                b.iter(|| {
                    let at = (i % FRAMES) * frame_len;
                    i += 1;
                    conn.handle_bytes(now, &wire[at..at + frame_len]);
                    match conn.poll_event() {
                        Some(Ok(Event::Message(m))) => {
                            black_box(m.as_bytes());
                        }
                        other => panic!("{other:?}"),
                    }
                });
            });

            g.bench_function(
                BenchmarkId::new(format!("tungstenite/{label}"), size),
                |b| {
                    let replay = Replay {
                        data: wire.clone(),
                        pos: 0,
                    };
                    let mut ws = WebSocket::from_raw_socket(replay, trole, None);
                    b.iter(|| black_box(ws.read().unwrap()));
                },
            );
        }
    }
    g.finish();
}

fn encode(c: &mut Criterion) {
    let mut g = c.benchmark_group("encode");
    for size in SIZES {
        g.throughput(Throughput::Bytes(size as u64));
        let payload: Vec<u8> = (0..size).map(|i| (i * 7) as u8).collect();
        let shared = bytes::Bytes::from(payload.clone());
        for masked in [true, false] {
            let (role, trole) = if masked {
                (Role::Client, TRole::Client)
            } else {
                (Role::Server, TRole::Server)
            };
            let label = if masked { "masked" } else { "unmasked" };

            g.bench_function(BenchmarkId::new(format!("rapidws/{label}"), size), |b| {
                let mut conn = Connection::new(role, Config::default(), Instant::now());
                let mut sink = io::sink();
                b.iter(|| {
                    conn.send_binary(black_box(&payload)).unwrap();
                    while let Some(t) = conn.poll_transmit() {
                        let mut slices = [IoSlice::new(&[]); 2];
                        let n = t.chunks_vectored(&mut slices);
                        black_box(sink.write_vectored(&slices[..n]).unwrap());
                    }
                });
            });

            g.bench_function(
                BenchmarkId::new(format!("tungstenite/{label}"), size),
                |b| {
                    let mut ws = WebSocket::from_raw_socket(
                        Replay {
                            data: Vec::new(),
                            pos: 0,
                        },
                        trole,
                        None,
                    );
                    b.iter(|| {
                        ws.send(tungstenite::Message::Binary(black_box(shared.clone())))
                            .unwrap();
                    });
                },
            );
        }
    }
    g.finish();
}

/// Frames in a burst buffer.
const BURST: usize = 100;

/// `BURST` text frames of `size` bytes as `sender` sends them (masked from a client).
fn burst(sender: Role, size: usize) -> Vec<u8> {
    let mut conn = Connection::new(sender, Config::default(), Instant::now());
    let text: String = (0..size)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let mut out = Vec::new();
    for _ in 0..BURST {
        conn.send_text(&text).unwrap();
    }
    conn.write_pending(&mut out);
    out
}

fn decode_burst(c: &mut Criterion) {
    let mut g = c.benchmark_group("burst");
    g.throughput(Throughput::Elements(BURST as u64));
    for size in [16, 100] {
        for masked in [true, false] {
            let (sender, receiver, label) = if masked {
                (Role::Client, Role::Server, "masked")
            } else {
                (Role::Server, Role::Client, "unmasked")
            };
            let wire = burst(sender, size);
            let id = format!("{size}/{label}");
            g.bench_function(BenchmarkId::new("decoder", &id), |b| {
                let mut decoder = Decoder::new(DecoderConfig::new(receiver));
                let mut buf = wire.clone();
                b.iter(|| {
                    buf.copy_from_slice(&wire);
                    let mut pos = 0;
                    let mut messages = 0;
                    loop {
                        let d = decoder.decode(&mut buf[pos..]).unwrap();
                        pos += d.consumed;
                        match d.item {
                            Some(Item::Data(chunk)) => {
                                messages += usize::from(chunk.message_end);
                                black_box(&chunk);
                            }
                            Some(Item::Control(_)) => unreachable!(),
                            None => break,
                        }
                    }
                    assert_eq!(messages, BURST);
                });
            });

            g.bench_function(BenchmarkId::new("connection", &id), |b| {
                let now = Instant::now();
                let mut conn = Connection::new(receiver, Config::default(), now);
                b.iter(|| {
                    conn.handle_bytes(now, &wire);
                    let mut messages = 0;
                    while let Some(ev) = conn.poll_event() {
                        match ev {
                            Ok(Event::Message(m)) => {
                                black_box(m.as_bytes());
                                messages += 1;
                            }
                            other => panic!("{other:?}"),
                        }
                    }
                    assert_eq!(messages, BURST);
                });
            });
        }
    }
    g.finish();
}

criterion_group!(benches, decode, encode, decode_burst);
criterion_main!(benches);
