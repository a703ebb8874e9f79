//! Arbitrary operation sequences against a client/server pair wired through memory,
//! plus raw hostile bytes: never a panic, and the close state machine holds its promises.
#![no_main]

use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use rapidws::Role;
use rapidws::codec::{CloseCode, MessageKind};
use rapidws::connection::{Config, Connection, Delivery, Event, SendError};

#[derive(Arbitrary, Debug)]
enum Op {
    Send {
        server: bool,
        text: bool,
        data: Vec<u8>,
    },
    Begin {
        server: bool,
        text: bool,
    },
    Chunk {
        server: bool,
        data: Vec<u8>,
    },
    End {
        server: bool,
        data: Vec<u8>,
    },
    Ping {
        server: bool,
        data: Vec<u8>,
    },
    Pong {
        server: bool,
        data: Vec<u8>,
    },
    Close {
        server: bool,
        code: u16,
        reason: String,
    },
    /// Moves pending output to the peer, split at `split` bytes.
    Pump {
        to_server: bool,
        split: u16,
    },
    /// Hostile bytes straight into one side's input.
    Raw {
        server: bool,
        bytes: Vec<u8>,
    },
    Advance {
        secs: u8,
    },
}

#[derive(Arbitrary, Debug)]
struct Input {
    chunks_on_server: bool,
    small_limits: bool,
    timers: bool,
    ops: Vec<Op>,
}

fn config(chunks: bool, small: bool, timers: bool) -> Config {
    let mut c = Config::default();
    if chunks {
        c.delivery = Delivery::Chunks;
    }
    if small {
        c.max_frame_size = 100;
        c.max_message_size = 300;
    }
    if timers {
        c.keepalive_interval = Some(Duration::from_secs(10));
        c.pong_timeout = Some(Duration::from_secs(5));
        c.idle_timeout = Some(Duration::from_secs(60));
    }
    c
}

fn drain(conn: &mut Connection) {
    for _ in 0..100_000 {
        match conn.poll_event() {
            None => return,
            // A text message is UTF-8: the core debug-asserts it where it lends the text
            // (fuzz builds keep debug assertions), and `MessageRef::Text` holds a `str`.
            Some(Ok(Event::Message(m))) => {
                if let Some(text) = m.as_text() {
                    assert_eq!(text.len(), m.len());
                }
            }
            Some(Ok(Event::Close(_))) => assert!(conn.close_received()),
            Some(Ok(_)) => {}
            Some(Err(e)) => {
                assert!(conn.is_closed(), "an error closes the connection: {e}");
            }
        }
    }
    panic!("poll_event did not settle");
}

fuzz_target!(|input: Input| {
    let t0 = Instant::now();
    let mut now = t0;
    let mut client = Connection::new(
        Role::Client,
        config(false, input.small_limits, input.timers),
        now,
    );
    let mut server = Connection::new(
        Role::Server,
        config(input.chunks_on_server, input.small_limits, input.timers),
        now,
    );
    for op in input.ops.into_iter().take(200) {
        match op {
            Op::Send {
                server: s,
                text,
                data,
            } => {
                let conn = if s { &mut server } else { &mut client };
                let was_closed = conn.close_sent() || conn.is_closed();
                let r = if text {
                    conn.send_text(&String::from_utf8_lossy(&data))
                } else {
                    conn.send_binary(&data)
                };
                if was_closed {
                    assert_eq!(r, Err(SendError::Closed));
                }
            }
            Op::Begin { server: s, text } => {
                let conn = if s { &mut server } else { &mut client };
                let kind = if text {
                    MessageKind::Text
                } else {
                    MessageKind::Binary
                };
                let _ = conn.begin_message(kind);
            }
            Op::Chunk { server: s, data } => {
                let conn = if s { &mut server } else { &mut client };
                let _ = conn.send_chunk(&data);
            }
            Op::End { server: s, data } => {
                let conn = if s { &mut server } else { &mut client };
                let _ = conn.end_message(&data);
            }
            Op::Ping { server: s, data } => {
                let conn = if s { &mut server } else { &mut client };
                let r = conn.ping(&data);
                if data.len() > 125 {
                    assert!(r.is_err());
                }
            }
            Op::Pong { server: s, data } => {
                let conn = if s { &mut server } else { &mut client };
                let _ = conn.pong(&data);
            }
            Op::Close {
                server: s,
                code,
                reason,
            } => {
                let conn = if s { &mut server } else { &mut client };
                if conn.close(now, CloseCode(code), &reason).is_ok() {
                    assert!(conn.close_sent());
                    assert_eq!(conn.send_binary(b"x"), Err(SendError::Closed));
                }
            }
            Op::Pump { to_server, split } => {
                let (from, to) = if to_server {
                    (&mut client, &mut server)
                } else {
                    (&mut server, &mut client)
                };
                let mut wire = Vec::new();
                from.write_pending(&mut wire);
                let split = (split as usize).min(wire.len());
                to.handle_bytes(now, &wire[..split]);
                drain(to);
                // The rest as an IO layer reads: into the room `reserve_recv` makes.
                if split < wire.len() {
                    to.reserve_recv(64).extend_from_slice(&wire[split..]);
                    to.handle_received(now);
                }
                drain(to);
            }
            Op::Raw { server: s, bytes } => {
                let conn = if s { &mut server } else { &mut client };
                conn.handle_bytes(now, &bytes);
                drain(conn);
            }
            Op::Advance { secs } => {
                now += Duration::from_secs(secs as u64);
                for conn in [&mut client, &mut server] {
                    if let Some(t) = conn.poll_timeout() {
                        assert!(t >= t0);
                    }
                    conn.handle_timeout(now);
                    drain(conn);
                }
            }
        }
    }
    // Closing cleanly always finishes within a bounded exchange, unless a side failed.
    for _ in 0..4 {
        let mut wire = Vec::new();
        client.write_pending(&mut wire);
        server.handle_bytes(now, &wire);
        drain(&mut server);
        let mut wire = Vec::new();
        server.write_pending(&mut wire);
        client.handle_bytes(now, &wire);
        drain(&mut client);
    }
});
