//! The envelope a publication travels in between nodes: a short text head, then the
//! payload as published.
//!
//! ```text
//! rw1 <origin node, 16 hex> <t|b> <excluded connection, hex, or -> <offset or -> <epoch or ->\n<payload>
//! ```
//!
//! Text, so that the Redis script that assigns the offset and epoch can finish the head
//! with string concatenation, and so that `redis-cli MONITOR` shows something readable.
//! Everything from a broker is untrusted: [`Envelope::parse`] bounds the head, checks
//! each field and refuses a text payload that is not UTF-8; it never panics.

use bytes::Bytes;

use super::history::Position;
use crate::codec::MessageKind;

const MAGIC: &[u8] = b"rw1 ";

/// The longest head [`Envelope::parse`] looks for: magic, four fields of at most 20
/// characters, separators and the newline.
const MAX_HEAD: usize = 128;

/// A publication as it travels between nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Envelope {
    /// The node that published it.
    pub origin: u64,
    pub kind: MessageKind,
    /// A connection of the origin node that must not receive it.
    pub exclude: Option<u64>,
    pub position: Option<Position>,
    pub payload: Bytes,
}

/// Why an envelope from a broker was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Malformed {
    Head,
    TooLarge,
    InvalidUtf8,
}

/// The start of an envelope, up to and including the excluded connection's field and its
/// trailing space: what a publisher sends to a broker that fills in the position.
pub(crate) fn head(origin: u64, kind: MessageKind, exclude: Option<u64>) -> String {
    let k = match kind {
        MessageKind::Text => 't',
        MessageKind::Binary => 'b',
    };
    match exclude {
        Some(x) => format!("rw1 {origin:016x} {k} {x:x} "),
        None => format!("rw1 {origin:016x} {k} - "),
    }
}

/// A whole envelope without a position.
pub(crate) fn encode(
    origin: u64,
    kind: MessageKind,
    exclude: Option<u64>,
    payload: &[u8],
) -> Bytes {
    let head = head(origin, kind, exclude);
    let mut out = Vec::with_capacity(head.len() + 4 + payload.len());
    out.extend_from_slice(head.as_bytes());
    out.extend_from_slice(b"- -\n");
    out.extend_from_slice(payload);
    Bytes::from(out)
}

/// A whole envelope with a position (what a broker-side script produces).
#[cfg(test)]
pub(crate) fn encode_at(
    origin: u64,
    kind: MessageKind,
    exclude: Option<u64>,
    position: Position,
    payload: &[u8],
) -> Bytes {
    let mut out = head(origin, kind, exclude).into_bytes();
    out.extend_from_slice(format!("{} {}\n", position.offset, position.epoch).as_bytes());
    out.extend_from_slice(payload);
    Bytes::from(out)
}

fn parse_hex(field: &[u8]) -> Option<u64> {
    if field.is_empty() || field.len() > 16 {
        return None;
    }
    u64::from_str_radix(std::str::from_utf8(field).ok()?, 16).ok()
}

fn parse_dec(field: &[u8]) -> Option<u64> {
    if field.is_empty() || field.len() > 20 || !field.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(field).ok()?.parse().ok()
}

impl Envelope {
    /// Parses `data` from a broker; the payload must be at most `max_payload` bytes.
    pub(crate) fn parse(data: Bytes, max_payload: usize) -> Result<Envelope, Malformed> {
        let window = &data[..data.len().min(MAX_HEAD)];
        if !window.starts_with(MAGIC) {
            return Err(Malformed::Head);
        }
        let nl = memchr::memchr(b'\n', window).ok_or(Malformed::Head)?;
        let mut fields = window[MAGIC.len()..nl].split(|&b| b == b' ');
        let mut next = || fields.next().ok_or(Malformed::Head);
        let origin = parse_hex(next()?).ok_or(Malformed::Head)?;
        let kind = match next()? {
            b"t" => MessageKind::Text,
            b"b" => MessageKind::Binary,
            _ => return Err(Malformed::Head),
        };
        let exclude = match next()? {
            b"-" => None,
            x => Some(parse_hex(x).ok_or(Malformed::Head)?),
        };
        let position = match (next()?, next()?) {
            (b"-", b"-") => None,
            (o, e) => Some(Position {
                offset: parse_dec(o).ok_or(Malformed::Head)?,
                epoch: parse_dec(e).ok_or(Malformed::Head)?,
            }),
        };
        if fields.next().is_some() {
            return Err(Malformed::Head);
        }
        let payload = data.slice(nl + 1..);
        if payload.len() > max_payload {
            return Err(Malformed::TooLarge);
        }
        if kind == MessageKind::Text && rapidws_simd::utf8::validate(&payload).is_err() {
            return Err(Malformed::InvalidUtf8);
        }
        Ok(Envelope {
            origin,
            kind,
            exclude,
            position,
            payload,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_with_and_without_a_position() {
        let plain = encode(0xabc, MessageKind::Text, None, b"hello");
        let e = Envelope::parse(plain, 64).unwrap();
        assert_eq!(e.origin, 0xabc);
        assert_eq!(e.kind, MessageKind::Text);
        assert_eq!((e.exclude, e.position), (None, None));
        assert_eq!(&e.payload[..], b"hello");

        let at = Position {
            offset: 42,
            epoch: 1_700_000_000_123_456,
        };
        let full = encode_at(u64::MAX, MessageKind::Binary, Some(7), at, b"\n\0x");
        let e = Envelope::parse(full, 64).unwrap();
        assert_eq!(e.origin, u64::MAX);
        assert_eq!((e.exclude, e.position), (Some(7), Some(at)));
        assert_eq!(&e.payload[..], b"\n\0x");
    }

    #[test]
    fn hostile_input_is_refused_without_panicking() {
        let cases: &[&[u8]] = &[
            b"",
            b"rw1",
            b"rw1 ",
            b"rw2 0000000000000001 t - - -\nx",
            b"rw1 0000000000000001 t - - -",
            b"rw1 zz t - - -\nx",
            b"rw1 0000000000000001 q - - -\nx",
            b"rw1 0000000000000001 t - 1\nx",
            b"rw1 0000000000000001 t - - - extra\nx",
            b"rw1 0000000000000001 t - 99999999999999999999999 1\nx",
            b"rw1 0000000000000001 t - -1 1\nx",
            b"rw1 00000000000000001 t - - -\nx",
            b"rw1 0000000000000001 t - - -\n\xff",
        ];
        for case in cases {
            assert!(
                Envelope::parse(Bytes::from_static(case), 64).is_err(),
                "{:?}",
                String::from_utf8_lossy(case)
            );
        }
        // A head that never ends within the window.
        let mut long = b"rw1 ".to_vec();
        long.extend(std::iter::repeat_n(b'0', 4096));
        assert_eq!(Envelope::parse(Bytes::from(long), 64), Err(Malformed::Head));
        let big = encode(1, MessageKind::Binary, None, &[0; 65]);
        assert_eq!(Envelope::parse(big, 64), Err(Malformed::TooLarge));
    }
}
