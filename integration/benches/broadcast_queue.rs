//! The library's share of a broadcast, without sockets: one ~4 KiB JSON message queued on
//! 1,000 server `Connection`s and taken out as `Transmit`s, per iteration. Prepared (built
//! and, with deflate, compressed once per iteration) against the per-connection calls.
//! `integration/benches/broadcast.rs` measures the same over loopback TCP, where the
//! kernel's cost per write dominates.

use std::hint::black_box;
use std::time::Instant;

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rapidws::PreparedMessage;
use rapidws::Role;
use rapidws::codec::MessageKind;
use rapidws::connection::{Config, Connection};
use rapidws::deflate::{DeflateConfig, DeflateParams, PerMessageDeflate};

const CONNS: usize = 1000;

fn json() -> String {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut s = String::from("{\"type\":\"book\",\"levels\":[");
    let mut i = 0;
    while s.len() < 4000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.push_str(&format!(
            "{{\"i\":{i},\"px\":{}.{:02},\"qty\":{}}},",
            x % 100_000,
            (x >> 20) % 100,
            (x >> 30) % 10_000
        ));
        i += 1;
    }
    s.push_str("{}]}");
    s
}

fn conns(deflate: bool) -> Vec<Connection> {
    let params = DeflateParams {
        server_no_context_takeover: false,
        client_no_context_takeover: false,
        server_max_window_bits: 15,
        client_max_window_bits: 15,
    };
    (0..CONNS)
        .map(|_| {
            let mut c = Connection::new(Role::Server, Config::default(), Instant::now());
            if deflate {
                c.set_deflate(PerMessageDeflate::new(
                    Role::Server,
                    params,
                    &DeflateConfig::new(),
                ));
            }
            c
        })
        .collect()
}

fn drain(conns: &mut [Connection]) -> usize {
    let mut n = 0;
    for c in conns {
        while let Some(t) = c.poll_transmit() {
            n += t.len();
        }
    }
    n
}

fn bench(c: &mut Criterion) {
    let text = json();
    for deflate in [false, true] {
        let mut g = c.benchmark_group(format!(
            "broadcast_queue/{CONNS}_conns/deflate_{}",
            if deflate { "on" } else { "off" }
        ));
        g.throughput(Throughput::Elements(CONNS as u64));
        let mut cs = conns(deflate);
        g.bench_function("prepared", |b| {
            b.iter(|| {
                let msg = PreparedMessage::text(&text);
                for c in &mut cs {
                    c.send_prepared(&msg).unwrap();
                }
                black_box(drain(&mut cs))
            })
        });
        let mut cs = conns(deflate);
        g.bench_function("send_bytes", |b| {
            b.iter(|| {
                let shared = Bytes::copy_from_slice(text.as_bytes());
                for c in &mut cs {
                    c.send_bytes(MessageKind::Text, shared.clone()).unwrap();
                }
                black_box(drain(&mut cs))
            })
        });
        let mut cs = conns(deflate);
        g.bench_function("send", |b| {
            b.iter(|| {
                for c in &mut cs {
                    c.send(MessageKind::Text, text.as_bytes()).unwrap();
                }
                black_box(drain(&mut cs))
            })
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
