//! Prepared messages mixed with ordinary ones, to peers with and without compression
//! context takeover and without compression: every message must decode to what was sent.
#![cfg(feature = "deflate")]

use std::time::Instant;

use bytes::Bytes;
use rapidws::Role;
use rapidws::codec::MessageKind;
use rapidws::connection::{Config, Connection, OwnedEvent};
use rapidws::connection::{PrepareError, PreparedMessage};
use rapidws::deflate::{DeflateConfig, DeflateParams, PerMessageDeflate};

fn params(server_nct: bool, server_bits: u8) -> DeflateParams {
    DeflateParams {
        server_no_context_takeover: server_nct,
        client_no_context_takeover: false,
        server_max_window_bits: server_bits,
        client_max_window_bits: 15,
    }
}

/// A server and a client connection; `deflate` gives the agreed parameters (None: off).
fn pair(deflate: Option<DeflateParams>) -> (Connection, Connection) {
    let now = Instant::now();
    let mut server = Connection::new(Role::Server, Config::default(), now);
    let mut client = Connection::new(Role::Client, Config::default(), now);
    if let Some(p) = deflate {
        let dc = DeflateConfig::default().min_size(16);
        server.set_deflate(PerMessageDeflate::new(Role::Server, p, &dc));
        client.set_deflate(PerMessageDeflate::new(Role::Client, p, &dc));
    }
    (server, client)
}

/// Moves everything `from` has to send into `to` and returns the wire bytes.
fn pump(from: &mut Connection, to: &mut Connection) -> Vec<u8> {
    let mut wire = Vec::new();
    from.write_pending(&mut wire);
    to.handle_bytes(Instant::now(), &wire);
    wire
}

fn received(conn: &mut Connection) -> Vec<(MessageKind, Bytes)> {
    let mut out = Vec::new();
    for _ in 0..1000 {
        match conn.poll_event_owned() {
            Some(Ok(OwnedEvent::Message { kind, data })) => out.push((kind, data)),
            Some(other) => panic!("unexpected event {other:?}"),
            None => break,
        }
    }
    out
}

/// A deterministic stream of JSON-ish messages that share a lot of text, so that an
/// ordinary compressed message back-references earlier ones (ordinary and prepared).
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    fn message(&mut self) -> String {
        let words = [
            "price", "volume", "symbol", "EURUSD", "bid", "ask", "ts", "depth",
        ];
        let mut s = String::from("{");
        let n = 5 + self.next() % 200;
        for i in 0..n {
            let w = words[(self.next() % words.len() as u64) as usize];
            s.push_str(&format!("\"{w}{}\":{},", i % 7, self.next() % 1000));
        }
        s.push('}');
        s
    }
}

/// Sends a seeded mix of prepared and ordinary messages server -> client, checking each
/// arrives intact; returns the wire bytes of every message.
fn mixed_run(deflate: Option<DeflateParams>, seed: u64, rounds: usize) -> Vec<Vec<u8>> {
    let (mut server, mut client) = pair(deflate);
    let mut g = Gen(seed);
    let mut wires = Vec::new();
    for _ in 0..rounds {
        let text = g.message();
        let prepared = g.next().is_multiple_of(2);
        if prepared {
            server.send_prepared(&PreparedMessage::text(&text)).unwrap();
        } else {
            server.send_text(&text).unwrap();
        }
        wires.push(pump(&mut server, &mut client));
        let got = received(&mut client);
        assert_eq!(got.len(), 1, "seed {seed}: one message per send");
        assert_eq!(got[0].0, MessageKind::Text);
        assert_eq!(
            &got[0].1[..],
            text.as_bytes(),
            "seed {seed}, prepared {prepared}"
        );
    }
    wires
}

#[test]
fn mixed_prepared_and_ordinary_messages_decode_with_context_takeover() {
    for seed in 0..20 {
        let wires = mixed_run(Some(params(false, 15)), seed, 60);
        assert!(
            wires.iter().any(|w| w[0] & 0x40 != 0),
            "messages went out compressed"
        );
    }
}

#[test]
fn mixed_messages_decode_with_a_small_agreed_window() {
    for seed in 0..10 {
        mixed_run(Some(params(false, 9)), seed, 60);
        mixed_run(Some(params(false, 11)), seed, 60);
    }
}

#[test]
fn mixed_messages_decode_without_server_context_takeover() {
    for seed in 0..10 {
        mixed_run(Some(params(true, 15)), seed, 60);
    }
}

#[test]
fn mixed_messages_decode_without_compression() {
    for seed in 0..5 {
        let wires = mixed_run(None, seed, 40);
        assert!(wires.iter().all(|w| w[0] & 0x40 == 0), "nothing compressed");
    }
}

#[test]
fn prepared_frame_is_the_shared_buffer_on_an_uncompressed_server() {
    let (mut server, _) = pair(None);
    let msg = PreparedMessage::text(&"x".repeat(4096));
    server.send_prepared(&msg).unwrap();
    let t = server.poll_transmit().unwrap();
    assert!(t.header().is_empty());
    assert_eq!(t.payload().as_ptr(), msg.frame().as_ptr(), "no copy");
}

#[test]
fn one_compressed_frame_serves_every_context_takeover_peer() {
    let msg = PreparedMessage::text(&"shared broadcast payload ".repeat(50));
    let mut frames = Vec::new();
    for warmup in 0..4 {
        let (mut server, mut client) = pair(Some(params(false, 15)));
        // Different histories before the broadcast.
        for i in 0..warmup {
            server
                .send_text(&format!("history {i} {}", "abc".repeat(40 * i)))
                .unwrap();
        }
        pump(&mut server, &mut client);
        received(&mut client);
        server.send_prepared(&msg).unwrap();
        let t = server.poll_transmit().unwrap();
        frames.push(t.payload().clone());
        client.handle_bytes(Instant::now(), t.payload());
        let got = received(&mut client);
        assert_eq!(&got[0].1[..], &msg.payload()[..]);
    }
    assert!(frames.iter().all(|f| f.as_ptr() == frames[0].as_ptr()));
    assert_eq!(frames[0][0], 0xc1, "FIN + RSV1 + text");
}

#[test]
fn next_own_message_back_references_the_prepared_one() {
    // With the compressor primed by the prepared message, the same text sent next as an
    // ordinary message compresses to a few bytes of back-reference.
    let text = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".repeat(20);
    let (mut server, mut client) = pair(Some(params(false, 15)));
    server.send_prepared(&PreparedMessage::text(&text)).unwrap();
    let first = pump(&mut server, &mut client);
    server.send_text(&text).unwrap();
    let second = pump(&mut server, &mut client);
    let got = received(&mut client);
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|(_, d)| &d[..] == text.as_bytes()));
    assert!(
        second.len() < 20 && second.len() < first.len(),
        "primed: {} bytes after {}",
        second.len(),
        first.len()
    );
}

#[test]
fn prepared_message_below_min_size_goes_uncompressed() {
    let (mut server, mut client) = pair(Some(params(false, 15)));
    let msg = PreparedMessage::binary(b"tiny");
    server.send_prepared(&msg).unwrap();
    let wire = pump(&mut server, &mut client);
    assert_eq!(wire, &msg.frame()[..]);
    assert_eq!(&received(&mut client)[0].1[..], b"tiny");
}

#[test]
fn client_sends_prepared_message_masked() {
    let (mut server, mut client) = pair(Some(params(false, 15)));
    let text = "from the client ".repeat(30);
    client.send_prepared(&PreparedMessage::text(&text)).unwrap();
    let wire = pump(&mut client, &mut server);
    assert_ne!(wire[1] & 0x80, 0, "mask bit set");
    assert_eq!(&received(&mut server)[0].1[..], text.as_bytes());
}

#[test]
fn build_writes_the_payload_after_the_header() {
    for len in [0usize, 1, 125, 126, 65_535, 65_536, 70_000] {
        let msg = PreparedMessage::build(MessageKind::Binary, |w| {
            for i in 0..len {
                w.extend_from_slice(&[(i % 251) as u8]);
            }
            Ok::<_, std::io::Error>(())
        })
        .unwrap();
        assert_eq!(msg.len(), len);
        let hl = msg.frame().len() - len;
        assert_eq!(
            hl,
            if len < 126 {
                2
            } else if len <= 65_535 {
                4
            } else {
                10
            }
        );
        let expected: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        assert_eq!(&msg.payload()[..], &expected[..]);
        let (mut server, mut client) = pair(Some(params(false, 15)));
        server.send_prepared(&msg).unwrap();
        pump(&mut server, &mut client);
        assert_eq!(&received(&mut client)[0].1[..], &expected[..]);
    }
}

#[test]
fn build_refuses_text_that_is_not_utf8() {
    let r = PreparedMessage::build(MessageKind::Text, |w| {
        w.extend_from_slice(&[0xff, 0xfe]);
        Ok::<_, std::io::Error>(())
    });
    assert!(matches!(r, Err(PrepareError::InvalidUtf8)));
    assert!(matches!(
        PreparedMessage::new(MessageKind::Text, b"ok \xc3"),
        Err(PrepareError::InvalidUtf8)
    ));
}

#[test]
fn build_passes_the_writer_error_through() {
    let r = PreparedMessage::build(MessageKind::Binary, |_| Err("serializer failed"));
    assert!(matches!(r, Err(PrepareError::Write("serializer failed"))));
}

#[test]
fn prepared_message_after_close_is_refused() {
    let (mut server, _) = pair(None);
    server
        .close(Instant::now(), rapidws::CloseCode::NORMAL, "")
        .unwrap();
    assert!(
        server
            .send_prepared(&PreparedMessage::text("late"))
            .is_err()
    );
}

#[test]
fn incompressible_prepared_message_goes_out_plain() {
    // xorshift bytes do not deflate: the plain frame is shorter and as valid.
    let mut x = 0x1234_5678_9abc_def1u64;
    let data: Vec<u8> = (0..3000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let msg = PreparedMessage::binary(&data);
    let (mut server, mut client) = pair(Some(params(false, 15)));
    server.send_prepared(&msg).unwrap();
    let wire = pump(&mut server, &mut client);
    assert_eq!(wire, &msg.frame()[..]);
    // The compressor was not primed with it, and what follows still decodes.
    server.send_binary(&data).unwrap();
    pump(&mut server, &mut client);
    let got = received(&mut client);
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|(_, d)| d[..] == data[..]));
}

// ----- the per-send switch (`Compression`) -----

/// Prepared and ordinary messages, each with a seeded choice of [`Compression`], from
/// `role` to its peer: one sent with `Never` has RSV1 clear, one with `Always` has it
/// set, and every message decodes, so the two ends' windows never part.
fn switched_run(params: DeflateParams, role: Role, seed: u64, rounds: usize) {
    use rapidws::Compression;
    let (mut server, mut client) = pair(Some(params));
    let (from, to) = match role {
        Role::Server => (&mut server, &mut client),
        Role::Client => (&mut client, &mut server),
    };
    let mut g = Gen(seed);
    let (mut plain, mut compressed) = (0, 0);
    for round in 0..rounds {
        let text = if g.next().is_multiple_of(5) {
            "tiny".to_string()
        } else {
            g.message()
        };
        let choice =
            [Compression::Auto, Compression::Never, Compression::Always][(g.next() % 3) as usize];
        let prepared = g.next().is_multiple_of(2);
        if prepared {
            let msg = PreparedMessage::text(&text).with_compression(choice);
            from.send_prepared(&msg).unwrap();
        } else {
            from.send_with(MessageKind::Text, text.as_bytes(), choice)
                .unwrap();
        }
        let wire = pump(from, to);
        let ctx = format!(
            "{role:?}, {params:?}, seed {seed}, round {round}, {choice:?}, prepared {prepared}"
        );
        match choice {
            Compression::Never => assert_eq!(wire[0], 0x81, "{ctx}: RSV1 clear"),
            Compression::Always => assert_eq!(wire[0], 0xc1, "{ctx}: RSV1 set"),
            _ => {}
        }
        if wire[0] & 0x40 == 0 {
            plain += 1;
        } else {
            compressed += 1;
        }
        let got = received(to);
        assert_eq!(got.len(), 1, "{ctx}");
        assert_eq!(&got[0].1[..], text.as_bytes(), "{ctx}");
    }
    assert!(plain > 0 && compressed > 0, "both kinds went out");
}

#[test]
fn prepared_and_ordinary_messages_with_a_switch_decode_with_and_without_context_takeover() {
    for (snct, cnct) in [(false, false), (true, true), (true, false), (false, true)] {
        for bits in [15, 9] {
            let params = DeflateParams {
                server_no_context_takeover: snct,
                client_no_context_takeover: cnct,
                server_max_window_bits: bits,
                client_max_window_bits: bits,
            };
            for seed in 0..6 {
                switched_run(params, Role::Server, seed, 60);
                switched_run(params, Role::Client, seed, 60);
            }
        }
    }
}

#[test]
fn a_prepared_message_built_uncompressed_goes_as_its_plain_frame() {
    use rapidws::Compression;
    let (mut server, mut client) = pair(Some(params(false, 15)));
    let text = "a broadcast that deflate would shrink a lot ".repeat(40);
    let shared = PreparedMessage::text(&text);
    let plain = shared.clone().with_compression(Compression::Never);
    assert_eq!(plain.compression(), Compression::Never);
    assert_eq!(
        shared.compression(),
        Compression::Auto,
        "the original is unchanged"
    );

    server.send_prepared(&plain).unwrap();
    let wire = pump(&mut server, &mut client);
    assert_eq!(
        &wire[..],
        &plain.frame()[..],
        "the shared plain frame, RSV1 clear"
    );
    // The same message, as prepared by default, still goes compressed, and so does the
    // next ordinary message, which refers back to it.
    server.send_prepared(&shared).unwrap();
    let wire = pump(&mut server, &mut client);
    assert_eq!(wire[0], 0xc1);
    assert!(wire.len() < text.len() / 4);
    server.send_text(&text).unwrap();
    let wire = pump(&mut server, &mut client);
    assert_eq!(wire[0], 0xc1);
    assert!(
        wire.len() < 40,
        "{} bytes: refers back to the prepared message",
        wire.len()
    );
    let got = received(&mut client);
    assert_eq!(got.len(), 3);
    assert!(got.iter().all(|(_, data)| &data[..] == text.as_bytes()));

    // A client masks every frame itself: the switch holds there too.
    client.send_prepared(&plain).unwrap();
    let wire = pump(&mut client, &mut server);
    assert_eq!(wire[0], 0x81);
    let tiny = PreparedMessage::text("hi").with_compression(Compression::Always);
    client.send_prepared(&tiny).unwrap();
    let wire = pump(&mut client, &mut server);
    assert_eq!(wire[0], 0xc1);
    let got = received(&mut server);
    assert_eq!(&got[0].1[..], text.as_bytes());
    assert_eq!(&got[1].1[..], b"hi");
}

#[test]
fn a_prepared_message_forced_compressed_goes_compressed_below_the_threshold() {
    use rapidws::Compression;
    let (mut server, mut client) = pair(Some(params(false, 15)));
    // Under `min_size` (16 here) and not shrunk by deflate: plain unless forced.
    let tiny = PreparedMessage::text("tick");
    server.send_prepared(&tiny).unwrap();
    assert_eq!(pump(&mut server, &mut client)[0], 0x81);
    server
        .send_prepared(&tiny.clone().with_compression(Compression::Always))
        .unwrap();
    assert_eq!(pump(&mut server, &mut client)[0], 0xc1);
    server.send_text(&"tick tock ".repeat(30)).unwrap();
    pump(&mut server, &mut client);
    let got = received(&mut client);
    assert_eq!(got.len(), 3);
    assert_eq!(&got[1].1[..], b"tick");
    assert_eq!(&got[2].1[..], "tick tock ".repeat(30).as_bytes());
}
