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

/// The short-header path decides every frame it takes exactly as the general path would:
/// every first and second byte, both roles, with and without permessage-deflate, under a
/// small and the default limits, between messages and inside a fragmented one, with the
/// frame whole, cut short, or followed by more bytes; text payloads valid and invalid.
#[test]
fn short_headers_are_decided_as_the_general_path_decides_them() {
    let limits = [(16 << 20, 16 << 20), (100, 40), (30, 125)];
    let mut cases = 0usize;
    for role in [Role::Server, Role::Client] {
        for rsv1_allowed in [false, true] {
            for (max_frame_size, max_message_size) in limits {
                for in_message in [false, true] {
                    let mut config = DecoderConfig::new(role);
                    config.max_frame_size = max_frame_size;
                    config.max_message_size = max_message_size;
                    config.rsv1_allowed = rsv1_allowed;
                    let fresh = || {
                        let mut d = Decoder::new(config.clone());
                        if in_message {
                            // The first frame of a fragmented binary message.
                            let mut first = [0x02, 0x80 | 1, 1, 2, 3, 4, 9];
                            if role == Role::Client {
                                first = [0x02, 1, 9, 0, 0, 0, 0];
                            }
                            let n = if role == Role::Client { 3 } else { 7 };
                            d.decode(&mut first[..n]).expect("a first fragment");
                            assert!(d.in_message());
                        }
                        d
                    };
                    for b0 in 0..=255u8 {
                        for (b1, ext) in seconds() {
                            let len = match ext.len() {
                                0 => usize::from(b1 & 0x7F),
                                _ => ext.iter().fold(0usize, |n, &b| n << 8 | usize::from(b)),
                            };
                            // Extended length, key, payload (text: "é" then ASCII), and a
                            // few more bytes.
                            let mut wire = vec![b0, b1];
                            wire.extend_from_slice(&ext);
                            if b1 & 0x80 != 0 {
                                wire.extend_from_slice(&[0x11, 0x22, 0x33, 0x44]);
                            }
                            wire.extend((0..len).map(|i| match i {
                                0 => 0xC3,
                                1 => 0xA9,
                                _ => b'a' + (i % 26) as u8,
                            }));
                            wire.extend_from_slice(&[0x81, 0x00, 0, 0, 0, 0, 0, 0]);
                            for cut in [wire.len(), wire.len() - 8, wire.len() - 9, 1] {
                                let (mut a, mut b) = (wire[..cut].to_vec(), wire[..cut].to_vec());
                                let (mut fast, mut general) = (fresh(), fresh());
                                let got = fast.decode(&mut a);
                                let want = if general.frame.is_some() {
                                    general.payload(&mut b, 0)
                                } else {
                                    general.decode_frame(&mut b)
                                };
                                assert_eq!(got, want, "{role:?} {b0:#x} {b1:#x} cut {cut}");
                                assert_eq!(a, b, "the same bytes unmasked");
                                assert!(
                                    same_state(&fast, &general),
                                    "the same state after {b0:#x} {b1:#x}: {fast:?} {general:?}"
                                );
                                cases += 1;
                            }
                        }
                    }
                }
            }
        }
    }
    assert_eq!(cases, 2 * 2 * 3 * 2 * 256 * seconds().len() * 4);
}

/// Whether two decoders hold the same state between calls: the frame and message under
/// way, and inside a text message the UTF-8 validator's carry (compared field by field:
/// formatting both decoders for each of the millions of cases above took most of the
/// test's time).
fn same_state(a: &Decoder, b: &Decoder) -> bool {
    let text = |d: &Decoder| d.message.is_some_and(|m| m.kind == MessageKind::Text);
    a.frame == b.frame
        && a.message == b.message
        && (!text(a) || format!("{:?}", a.utf8) == format!("{:?}", b.utf8))
}

/// Every second header byte with what follows it: the 7-bit lengths as they are; 126
/// with 16-bit lengths of 125 (not minimal, still accepted), 126, 300 and 1,000; 127
/// with a 64-bit length of 300.
fn seconds() -> Vec<(u8, Vec<u8>)> {
    let mut v = Vec::new();
    for b1 in 0..=255u8 {
        match b1 & 0x7F {
            126 => {
                for len in [125u16, 126, 300, 1000] {
                    v.push((b1, len.to_be_bytes().to_vec()));
                }
            }
            127 => v.push((b1, 300u64.to_be_bytes().to_vec())),
            _ => v.push((b1, Vec::new())),
        }
    }
    v
}
