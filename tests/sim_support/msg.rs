//! Messages as the oracle compares them, and the payloads both sides send: each starts
//! with a tag naming its sender and its place (`p7.`, `a2.13.`), so that a message found
//! anywhere says where it came from, and continues with random text or bytes.

use std::fmt;

use bytes::Bytes;
use rapidws::codec::MessageKind;
use rapidws::tokio::{Message, MessageRef};

use super::rng::Rng;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Text,
    Binary,
    Ping,
    Pong,
    Close,
}

/// A message, kind and bytes (for a close: the code, big-endian, then the reason).
#[derive(Clone, PartialEq, Eq)]
pub struct Msg {
    pub kind: Kind,
    pub data: Bytes,
}

impl Msg {
    pub fn data(kind: MessageKind, data: impl Into<Bytes>) -> Msg {
        let kind = match kind {
            MessageKind::Text => Kind::Text,
            MessageKind::Binary => Kind::Binary,
        };
        Msg {
            kind,
            data: data.into(),
        }
    }

    pub fn is_data(&self) -> bool {
        matches!(self.kind, Kind::Text | Kind::Binary)
    }

    /// Data messages and pings: what the peer's record and the application's are
    /// compared on (pongs also answer the application's pings, and are left out).
    pub fn is_compared(&self) -> bool {
        self.is_data() || self.kind == Kind::Ping
    }

    pub fn to_message(&self) -> Message {
        match self.kind {
            Kind::Text => Message::text(
                String::from_utf8(self.data.to_vec()).expect("text payloads are UTF-8"),
            ),
            Kind::Binary => Message::Binary(self.data.clone()),
            Kind::Ping => Message::Ping(self.data.clone()),
            Kind::Pong => Message::Pong(self.data.clone()),
            Kind::Close => unreachable!("closes are sent by the close calls"),
        }
    }

    pub fn from_message(m: &Message) -> Msg {
        match m {
            Message::Text(t) => Msg {
                kind: Kind::Text,
                data: Bytes::copy_from_slice(t.as_bytes()),
            },
            Message::Binary(b) => Msg {
                kind: Kind::Binary,
                data: b.clone(),
            },
            Message::Ping(b) => Msg {
                kind: Kind::Ping,
                data: b.clone(),
            },
            Message::Pong(b) => Msg {
                kind: Kind::Pong,
                data: b.clone(),
            },
            Message::Close(c) => Msg {
                kind: Kind::Close,
                data: close_bytes(c.as_ref().map(|c| (c.code.0, c.reason.as_str()))),
            },
        }
    }

    pub fn from_ref(m: &MessageRef<'_>) -> Msg {
        let (kind, data): (Kind, &[u8]) = match m {
            MessageRef::Text(t) => (Kind::Text, t.as_bytes()),
            MessageRef::Binary(b) => (Kind::Binary, b),
            MessageRef::Ping(b) => (Kind::Ping, b),
            MessageRef::Pong(b) => (Kind::Pong, b),
            MessageRef::Close(c) => {
                return Msg {
                    kind: Kind::Close,
                    data: close_bytes(c.map(|(code, reason)| (code.0, reason))),
                };
            }
        };
        Msg {
            kind,
            data: Bytes::copy_from_slice(data),
        }
    }

    pub fn close(code: u16, reason: &str) -> Msg {
        Msg {
            kind: Kind::Close,
            data: close_bytes(Some((code, reason))),
        }
    }

    /// The tag at the front of the payload (up to its second dot).
    pub fn tag(&self) -> &[u8] {
        let d = &self.data[..];
        let mut dots = 0;
        for (i, &b) in d.iter().enumerate() {
            if b == b'.' {
                dots += 1;
                if dots == 2 || (dots == 1 && d.first() == Some(&b'p')) {
                    return &d[..=i];
                }
            }
        }
        &d[..d.len().min(12)]
    }
}

fn close_bytes(c: Option<(u16, &str)>) -> Bytes {
    match c {
        None => Bytes::new(),
        Some((code, reason)) => {
            let mut v = code.to_be_bytes().to_vec();
            v.extend_from_slice(reason.as_bytes());
            Bytes::from(v)
        }
    }
}

impl fmt::Debug for Msg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?}({} B {})",
            self.kind,
            self.data.len(),
            String::from_utf8_lossy(self.tag())
        )
    }
}

/// A payload of `len` bytes (at least the tag's) starting with `tag`: UTF-8 text with
/// characters of one to four bytes, or any bytes.
pub fn payload(rng: &mut Rng, kind: MessageKind, tag: &str, len: usize) -> Bytes {
    let mut v = tag.as_bytes().to_vec();
    match kind {
        MessageKind::Binary => {
            while v.len() < len {
                v.extend_from_slice(&rng.u64().to_le_bytes());
            }
            v.truncate(len.max(tag.len()));
        }
        MessageKind::Text => {
            const CHARS: [&str; 8] = ["a", "b", "z", " ", "é", "中", "😀", "\u{7f}"];
            // Runs of one character keep generation cheap for large messages.
            while v.len() < len {
                let c = CHARS[rng.below(CHARS.len() as u64) as usize];
                let run = rng.range(1, 64);
                for _ in 0..run {
                    if v.len() + c.len() > len {
                        break;
                    }
                    v.extend_from_slice(c.as_bytes());
                }
                if v.len() + 4 > len && v.len() < len {
                    v.resize(len, b'.');
                }
            }
        }
    }
    Bytes::from(v)
}

/// Where a message of `len` bytes is cut into fragments: 2 to 5 pieces (some maybe empty),
/// anywhere, inside a UTF-8 character too.
pub fn cuts(rng: &mut Rng, len: usize) -> Vec<usize> {
    let n = rng.range(2, 5);
    let mut at: Vec<usize> = (0..n - 1).map(|_| rng.range(0, len)).collect();
    at.sort_unstable();
    let mut sizes = Vec::with_capacity(n);
    let mut prev = 0;
    for a in at {
        sizes.push(a - prev);
        prev = a;
    }
    sizes.push(len - prev);
    sizes
}

/// A data message's kind, either one as likely.
pub fn kind(rng: &mut Rng) -> MessageKind {
    if rng.chance(1, 2) {
        MessageKind::Text
    } else {
        MessageKind::Binary
    }
}
