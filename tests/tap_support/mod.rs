//! A recording TCP relay for loopback tests that look at the frames on the wire (RSV1,
//! fragmentation): both ends are real sockets, the relay keeps a copy of each direction.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// Bound on every read of the relay.
const LIMIT: Duration = Duration::from_secs(20);

/// A loopback relay for one connection to `upstream`, keeping what passes each way.
pub struct Tap {
    pub addr: SocketAddr,
    /// Server to client.
    pub down: Arc<Mutex<Vec<u8>>>,
    /// Client to server.
    pub up: Arc<Mutex<Vec<u8>>>,
}

pub fn tap(upstream: SocketAddr) -> Tap {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (down, up) = (Arc::default(), Arc::default());
    let (d, u) = (Arc::clone(&down), Arc::clone(&up));
    thread::spawn(move || {
        let (client, _) = listener.accept().unwrap();
        let server = TcpStream::connect(upstream).unwrap();
        for s in [&client, &server] {
            s.set_read_timeout(Some(LIMIT)).unwrap();
        }
        let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
        thread::spawn(move || pipe(c2, s2, &u));
        pipe(server, client, &d);
    });
    Tap { addr, down, up }
}

/// Copies `from` to `to` until `from` ends, recording the bytes.
fn pipe(mut from: TcpStream, mut to: TcpStream, log: &Mutex<Vec<u8>>) {
    let mut buf = [0u8; 16 * 1024];
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 {
            break;
        }
        log.lock().unwrap().extend_from_slice(&buf[..n]);
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

/// A data message as it went over the wire: RSV1 on its first frame, its frames'
/// count, and whether any continuation frame had RSV1 (never allowed).
#[derive(Debug)]
pub struct Sent {
    pub rsv1: bool,
    pub frames: usize,
    pub continuation_rsv1: bool,
}

/// The data messages in one direction's bytes (after the HTTP head), in order.
pub fn messages(log: &[u8]) -> Vec<Sent> {
    let head = log.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let wire = &log[head..];
    let mut out: Vec<Sent> = Vec::new();
    let mut at = 0;
    while at + 2 <= wire.len() {
        let (b0, b1) = (wire[at], wire[at + 1]);
        let (len, mut next) = match b1 & 0x7f {
            126 => (
                usize::from(u16::from_be_bytes([wire[at + 2], wire[at + 3]])),
                at + 4,
            ),
            127 => (
                u64::from_be_bytes(wire[at + 2..at + 10].try_into().unwrap()) as usize,
                at + 10,
            ),
            n => (usize::from(n), at + 2),
        };
        if b1 & 0x80 != 0 {
            next += 4; // the masking key
        }
        at = next + len;
        let rsv1 = b0 & 0x40 != 0;
        match b0 & 0x0f {
            0 => {
                let m = out
                    .last_mut()
                    .expect("a continuation follows a first frame");
                m.frames += 1;
                m.continuation_rsv1 |= rsv1;
            }
            1 | 2 => out.push(Sent {
                rsv1,
                frames: 1,
                continuation_rsv1: false,
            }),
            _ => {} // control frames
        }
    }
    out
}
