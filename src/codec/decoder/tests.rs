//! Unit tests of the decoder's internals.

use super::*;

/// A masked (client) frame with first byte `b0` and `payload`; lengths up to 125.
fn frame(b0: u8, payload: &[u8]) -> Vec<u8> {
    assert!(payload.len() <= 125);
    let key = [0x37, 0xfa, 0x21, 0x3d];
    let mut f = vec![b0, 0x80 | payload.len() as u8];
    f.extend_from_slice(&key);
    f.extend(payload.iter().zip(key.iter().cycle()).map(|(b, k)| b ^ k));
    f
}

/// Decodes `buf` whole, as a burst: the payloads of the messages, then the error if any.
fn decode_all(buf: &mut [u8]) -> (Vec<Vec<u8>>, Option<ProtocolError>) {
    let mut d = Decoder::new(DecoderConfig::new(Role::Server));
    let (mut pos, mut out) = (0, Vec::new());
    loop {
        match d.decode(&mut buf[pos..]) {
            Ok(Decoded { consumed, item }) => {
                let start = pos;
                pos += consumed;
                match item {
                    Some(Item::Data(c)) => {
                        out.push(buf[start + c.payload.start..start + c.payload.end].to_vec())
                    }
                    Some(Item::Control(c)) => {
                        out.push(buf[start + c.payload.start..start + c.payload.end].to_vec())
                    }
                    None => return (out, None),
                }
            }
            Err(e) => return (out, Some(e)),
        }
    }
}

fn burst(n: usize, bad_at: usize, bad: &[u8]) -> Vec<u8> {
    let mut buf = Vec::new();
    for i in 0..n {
        if i == bad_at {
            buf.extend_from_slice(bad);
        } else {
            buf.extend(frame(0x81, format!("message {i}").as_bytes()));
        }
    }
    buf
}

/// Decodes `buf` and checks that it yields the `good` messages before the bad frame, then
/// fails with `want`.
fn fails_after(mut buf: Vec<u8>, good: usize, want: ProtocolError) {
    let (items, err) = decode_all(&mut buf);
    assert_eq!(items.len(), good);
    assert_eq!(err, Some(want));
}

#[test]
fn burst_of_small_frames_decodes_every_message_in_order() {
    // A ping among them.
    let mut buf = burst(25, 5, &frame(0x89, b"ping"));
    let (items, err) = decode_all(&mut buf);
    assert_eq!(err, None);
    assert_eq!(items.len(), 25);
    assert_eq!(items[5], b"ping");
    assert_eq!(items[24], b"message 24");
}

#[test]
fn reserved_bit_inside_a_burst_fails_after_the_frames_before_it() {
    fails_after(
        burst(12, 6, &frame(0xA1, b"rsv2")),
        6,
        ProtocolError::ReservedBits,
    );
}

#[test]
fn invalid_utf8_inside_a_burst_fails_at_that_frame() {
    fails_after(
        burst(12, 3, &frame(0x81, b"ok \xff")),
        3,
        ProtocolError::InvalidUtf8,
    );
}

#[test]
fn unmasked_frame_inside_a_burst_fails_on_the_server() {
    fails_after(
        burst(12, 9, &[0x82, 0x01, 0x00]),
        9,
        ProtocolError::UnmaskedFrame,
    );
}

#[test]
fn length_overflow_after_a_burst_is_reported() {
    // RFC 6455 5.2: the most significant bit of a 64-bit length MUST be 0.
    let mut buf = burst(4, 4, &[]);
    buf.extend_from_slice(&[0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4]);
    fails_after(buf, 4, ProtocolError::LengthOverflow);
}

#[test]
fn burst_ending_in_a_partial_frame_resumes_when_it_completes() {
    let whole = burst(10, 10, &[]);
    let cut = whole.len() - 3;
    let mut d = Decoder::new(DecoderConfig::new(Role::Server));
    let (mut payload, mut messages) = (Vec::new(), 0);
    // The last frame is cut 3 bytes short; then the rest arrives and the caller, having
    // dropped what was consumed, calls again.
    let mut buf = whole[..cut].to_vec();
    for last in [false, true] {
        let mut pos = 0;
        loop {
            let r = d.decode(&mut buf[pos..]).unwrap();
            match r.item {
                Some(Item::Data(c)) => {
                    payload.extend_from_slice(&buf[pos + c.payload.start..pos + c.payload.end]);
                    messages += usize::from(c.message_end);
                }
                Some(Item::Control(_)) => unreachable!(),
                None => {
                    pos += r.consumed;
                    break;
                }
            }
            pos += r.consumed;
        }
        if !last {
            assert_eq!(messages, 9);
            buf.drain(..pos);
            buf.extend_from_slice(&whole[cut..]);
        }
    }
    assert_eq!(messages, 10);
    let want: String = (0..10).map(|i| format!("message {i}")).collect();
    assert_eq!(payload, want.as_bytes());
}
