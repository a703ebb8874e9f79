//! RFC 6455 frame rules, each against the decoder or encoder, and the section 5.7 examples.

use rapidws::Role;
use rapidws::codec::{
    CloseCode, ControlKind, Decoder, DecoderConfig, Encoder, Item, MessageKind, OpCode,
    ProtocolError, encode_header,
};

#[derive(Debug, PartialEq, Eq)]
enum Ev {
    Message(MessageKind, Vec<u8>),
    Control(ControlKind, Vec<u8>),
}

/// Decodes `input` fed in pieces of `step` bytes, assembling messages.
fn decode_stepped(
    config: DecoderConfig,
    input: &[u8],
    step: usize,
) -> Result<Vec<Ev>, ProtocolError> {
    let mut dec = Decoder::new(config);
    let mut buf: Vec<u8> = Vec::new();
    let mut events = Vec::new();
    let mut msg: Vec<u8> = Vec::new();
    for piece in input.chunks(step.max(1)) {
        buf.extend_from_slice(piece);
        loop {
            let d = dec.decode(&mut buf)?;
            let item = d.item.clone();
            match item {
                Some(Item::Data(c)) => {
                    msg.extend_from_slice(&buf[c.payload.clone()]);
                    if c.message_end {
                        events.push(Ev::Message(c.kind, std::mem::take(&mut msg)));
                    }
                }
                Some(Item::Control(c)) => {
                    events.push(Ev::Control(c.kind, buf[c.payload.clone()].to_vec()))
                }
                None => {}
            }
            buf.drain(..d.consumed);
            if d.item.is_none() {
                break;
            }
        }
    }
    Ok(events)
}

fn decode(role: Role, input: &[u8]) -> Result<Vec<Ev>, ProtocolError> {
    decode_stepped(DecoderConfig::new(role), input, usize::MAX)
}

fn client() -> DecoderConfig {
    DecoderConfig::new(Role::Client)
}

fn masked(first: u8, payload: &[u8]) -> Vec<u8> {
    let key = [0x11, 0x22, 0x33, 0x44];
    let h = encode_header(
        first & 0x80 != 0,
        first & 0x40 != 0,
        OpCode::from_u8(first & 0xf).unwrap_or(OpCode::Binary),
        Some(key),
        payload.len() as u64,
    );
    let mut v = h.as_slice().to_vec();
    v[0] = first;
    v.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
    v
}

fn unmasked(first: u8, payload: &[u8]) -> Vec<u8> {
    let mut v = encode_header(true, false, OpCode::Binary, None, payload.len() as u64)
        .as_slice()
        .to_vec();
    v[0] = first;
    v.extend_from_slice(payload);
    v
}

// ----- RFC 6455 5.7 examples -----

#[test]
fn rfc_example_single_unmasked_text() {
    let frame = [0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f];
    assert_eq!(
        decode(Role::Client, &frame),
        Ok(vec![Ev::Message(MessageKind::Text, b"Hello".to_vec())])
    );
}

#[test]
fn rfc_example_single_masked_text() {
    let frame = [
        0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58,
    ];
    assert_eq!(
        decode(Role::Server, &frame),
        Ok(vec![Ev::Message(MessageKind::Text, b"Hello".to_vec())])
    );
}

#[test]
fn rfc_example_fragmented_unmasked_text() {
    let frames = [0x01, 0x03, 0x48, 0x65, 0x6c, 0x80, 0x02, 0x6c, 0x6f];
    assert_eq!(
        decode(Role::Client, &frames),
        Ok(vec![Ev::Message(MessageKind::Text, b"Hello".to_vec())])
    );
}

#[test]
fn rfc_example_unmasked_ping_and_masked_pong() {
    let ping = [0x89, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f];
    assert_eq!(
        decode(Role::Client, &ping),
        Ok(vec![Ev::Control(ControlKind::Ping, b"Hello".to_vec())])
    );
    let pong = [
        0x8a, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58,
    ];
    assert_eq!(
        decode(Role::Server, &pong),
        Ok(vec![Ev::Control(ControlKind::Pong, b"Hello".to_vec())])
    );
}

#[test]
fn rfc_example_256_byte_binary_uses_16_bit_length() {
    let payload: Vec<u8> = (0..=255u8).collect();
    let mut frame = vec![0x82, 0x7e, 0x01, 0x00];
    frame.extend_from_slice(&payload);
    assert_eq!(
        decode(Role::Client, &frame),
        Ok(vec![Ev::Message(MessageKind::Binary, payload.clone())])
    );
    let h = encode_header(true, false, OpCode::Binary, None, 256);
    assert_eq!(h.as_slice(), &[0x82, 0x7e, 0x01, 0x00]);
}

#[test]
fn rfc_example_64k_binary_uses_64_bit_length() {
    let payload = vec![0xabu8; 65536];
    let mut frame = vec![0x82, 0x7f, 0, 0, 0, 0, 0, 1, 0, 0];
    frame.extend_from_slice(&payload);
    assert_eq!(
        decode(Role::Client, &frame),
        Ok(vec![Ev::Message(MessageKind::Binary, payload)])
    );
    let h = encode_header(true, false, OpCode::Binary, None, 65536);
    assert_eq!(h.as_slice(), &[0x82, 0x7f, 0, 0, 0, 0, 0, 1, 0, 0]);
}

#[test]
fn encoder_reproduces_rfc_masked_example() {
    let h = encode_header(true, false, OpCode::Text, Some([0x37, 0xfa, 0x21, 0x3d]), 5);
    assert_eq!(h.as_slice(), &[0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d]);
}

#[test]
fn client_encoder_masks_and_server_encoder_does_not() {
    let mut out = Vec::new();
    Encoder::new(Role::Client)
        .encode_into(true, false, OpCode::Text, b"Hello", &mut out)
        .unwrap();
    assert_eq!(out[1], 0x85);
    assert_eq!(
        decode(Role::Server, &out),
        Ok(vec![Ev::Message(MessageKind::Text, b"Hello".to_vec())])
    );
    let mut out = Vec::new();
    Encoder::new(Role::Server)
        .encode_into(true, false, OpCode::Text, b"Hello", &mut out)
        .unwrap();
    assert_eq!(out, [0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f]);
}

#[test]
fn client_mask_keys_differ_between_frames() {
    let mut enc = Encoder::new(Role::Client);
    let keys: Vec<_> = (0..8)
        .map(|_| {
            enc.header(true, false, OpCode::Binary, 0)
                .unwrap()
                .1
                .unwrap()
        })
        .collect();
    let distinct: std::collections::HashSet<_> = keys.iter().collect();
    assert!(distinct.len() > 1, "keys repeat: {keys:?}");
}

// ----- reserved bits, opcodes -----

#[test]
fn rsv_bits_refused_without_extension() {
    for first in [0xc1, 0xa1, 0x91] {
        assert_eq!(
            decode(Role::Client, &unmasked(first, b"x")),
            Err(ProtocolError::ReservedBits),
            "{first:#x}"
        );
    }
}

#[test]
fn rsv1_allowed_on_first_data_frame_with_deflate() {
    let mut cfg = client();
    cfg.rsv1_allowed = true;
    let mut dec = Decoder::new(cfg);
    let mut frame = unmasked(0x41, b"ab"); // RSV1, text, no FIN
    let d = dec.decode(&mut frame).unwrap();
    match d.item {
        Some(Item::Data(c)) => assert!(c.compressed),
        other => panic!("{other:?}"),
    }
}

#[test]
fn rsv1_refused_on_continuation_and_control_even_with_deflate() {
    let mut cfg = client();
    cfg.rsv1_allowed = true;
    let mut stream = unmasked(0x41, b"ab");
    stream.extend(unmasked(0xc0, b"cd")); // RSV1 on a continuation
    assert_eq!(
        decode_stepped(cfg.clone(), &stream, usize::MAX),
        Err(ProtocolError::ReservedBits)
    );
    assert_eq!(
        decode_stepped(cfg.clone(), &unmasked(0xc9, b""), usize::MAX),
        Err(ProtocolError::ReservedBits)
    );
    // RSV2 and RSV3 stay refused.
    assert_eq!(
        decode_stepped(cfg, &unmasked(0xa1, b""), usize::MAX),
        Err(ProtocolError::ReservedBits)
    );
}

#[test]
fn unknown_opcodes_refused() {
    for op in [3u8, 4, 5, 6, 7, 0xb, 0xc, 0xd, 0xe, 0xf] {
        assert_eq!(
            decode(Role::Client, &unmasked(0x80 | op, b"")),
            Err(ProtocolError::UnknownOpcode(op))
        );
    }
}

// ----- control frames -----

#[test]
fn control_frame_over_125_bytes_refused() {
    assert_eq!(
        decode(Role::Client, &unmasked(0x89, &[0; 126])),
        Err(ProtocolError::ControlFrameTooLong)
    );
    assert!(decode(Role::Client, &unmasked(0x89, &[0; 125])).is_ok());
}

#[test]
fn fragmented_control_frame_refused() {
    assert_eq!(
        decode(Role::Client, &unmasked(0x09, b"")),
        Err(ProtocolError::FragmentedControlFrame)
    );
}

#[test]
fn control_frames_interleaved_in_fragmented_message_are_delivered() {
    let mut s = unmasked(0x01, b"Hel");
    s.extend(unmasked(0x89, b"p"));
    s.extend(unmasked(0x00, b"l"));
    s.extend(unmasked(0x8a, b"q"));
    s.extend(unmasked(0x80, b"o"));
    assert_eq!(
        decode(Role::Client, &s),
        Ok(vec![
            Ev::Control(ControlKind::Ping, b"p".to_vec()),
            Ev::Control(ControlKind::Pong, b"q".to_vec()),
            Ev::Message(MessageKind::Text, b"Hello".to_vec()),
        ])
    );
}

// ----- fragmentation -----

#[test]
fn continuation_without_start_refused() {
    assert_eq!(
        decode(Role::Client, &unmasked(0x80, b"x")),
        Err(ProtocolError::UnexpectedContinuation)
    );
}

#[test]
fn new_data_frame_inside_message_refused() {
    let mut s = unmasked(0x01, b"a");
    s.extend(unmasked(0x82, b"b"));
    assert_eq!(
        decode(Role::Client, &s),
        Err(ProtocolError::ExpectedContinuation)
    );
}

// ----- masking direction -----

#[test]
fn server_refuses_unmasked_frames() {
    assert_eq!(
        decode(Role::Server, &unmasked(0x82, b"x")),
        Err(ProtocolError::UnmaskedFrame)
    );
}

#[test]
fn client_refuses_masked_frames() {
    assert_eq!(
        decode(Role::Client, &masked(0x82, b"x")),
        Err(ProtocolError::MaskedFrame)
    );
}

// ----- lengths and limits -----

#[test]
fn length_with_high_bit_refused() {
    let frame = [0x82, 0x7f, 0x80, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(
        decode(Role::Client, &frame),
        Err(ProtocolError::LengthOverflow)
    );
}

#[test]
fn frame_over_max_frame_size_refused_at_header() {
    let mut cfg = client();
    cfg.max_frame_size = 1000;
    // Only the header is present: the refusal does not wait for (or buffer) the payload.
    let header = encode_header(true, false, OpCode::Binary, None, 1001);
    assert_eq!(
        decode_stepped(cfg, header.as_slice(), usize::MAX),
        Err(ProtocolError::FrameTooLarge)
    );
}

#[test]
fn huge_announced_length_refused_by_default_limits() {
    let header = encode_header(true, false, OpCode::Binary, None, 1 << 40);
    assert_eq!(
        decode(Role::Client, header.as_slice()),
        Err(ProtocolError::FrameTooLarge)
    );
}

#[test]
fn fragmented_message_refused_when_total_passes_limit() {
    let mut cfg = client();
    cfg.max_message_size = 10;
    let mut s = unmasked(0x02, &[0; 6]);
    let mut dec = Decoder::new(cfg.clone());
    assert!(dec.decode(&mut s).unwrap().item.is_some());
    // The second fragment's header alone pushes the total past 10.
    let mut h = encode_header(false, false, OpCode::Continuation, None, 5)
        .as_slice()
        .to_vec();
    assert_eq!(dec.decode(&mut h), Err(ProtocolError::MessageTooLarge));
    // Exactly at the limit is fine.
    let mut s = unmasked(0x02, &[0; 6]);
    s.extend(unmasked(0x80, &[0; 4]));
    assert!(decode_stepped(cfg, &s, usize::MAX).is_ok());
}

#[test]
fn size_errors_map_to_1009() {
    assert_eq!(
        ProtocolError::FrameTooLarge.close_code(),
        CloseCode::TOO_BIG
    );
    assert_eq!(ProtocolError::MessageTooLarge.close_code(), CloseCode(1009));
    assert_eq!(ProtocolError::InvalidUtf8.close_code(), CloseCode(1007));
    assert_eq!(ProtocolError::ReservedBits.close_code(), CloseCode(1002));
}

// ----- close frames -----

#[test]
fn close_with_one_byte_payload_refused() {
    assert_eq!(
        decode(Role::Client, &unmasked(0x88, &[0x03])),
        Err(ProtocolError::InvalidClosePayload)
    );
}

#[test]
fn empty_close_accepted() {
    assert_eq!(
        decode(Role::Client, &unmasked(0x88, b"")),
        Ok(vec![Ev::Control(ControlKind::Close, vec![])])
    );
}

#[test]
fn close_codes_checked() {
    let valid = [
        1000u16, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 3999,
        4000, 4999,
    ];
    let invalid = [
        0u16, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535,
    ];
    for code in valid {
        assert!(
            decode(Role::Client, &unmasked(0x88, &code.to_be_bytes())).is_ok(),
            "{code}"
        );
    }
    for code in invalid {
        assert_eq!(
            decode(Role::Client, &unmasked(0x88, &code.to_be_bytes())),
            Err(ProtocolError::InvalidCloseCode(code)),
            "{code}"
        );
    }
}

#[test]
fn close_reason_must_be_utf8() {
    let mut p = 1000u16.to_be_bytes().to_vec();
    p.extend_from_slice(b"ok \xce\xba");
    assert!(decode(Role::Client, &unmasked(0x88, &p)).is_ok());
    p.extend_from_slice(b"\xff");
    assert_eq!(
        decode(Role::Client, &unmasked(0x88, &p)),
        Err(ProtocolError::InvalidUtf8)
    );
}

// ----- UTF-8 -----

#[test]
fn invalid_utf8_text_fails_at_first_bad_fragment_before_fin() {
    let mut dec = Decoder::new(client());
    let mut f1 = unmasked(0x01, "héllo".as_bytes());
    assert!(dec.decode(&mut f1).is_ok());
    // Second fragment holds a byte that can never start a code point; FIN has not come.
    let mut f2 = unmasked(0x00, b"ab\xffcd");
    assert_eq!(dec.decode(&mut f2), Err(ProtocolError::InvalidUtf8));
}

#[test]
fn invalid_utf8_fails_inside_a_partially_received_frame() {
    let mut dec = Decoder::new(client());
    let frame = unmasked(0x81, b"abc\xc0\xafzzzzzzzzzzzzzzzz");
    // Only the header and first 6 payload bytes have arrived.
    let mut partial = frame[..8].to_vec();
    assert_eq!(dec.decode(&mut partial), Err(ProtocolError::InvalidUtf8));
}

#[test]
fn code_point_split_across_fragments_is_valid() {
    let bytes = "€".as_bytes();
    let mut s = unmasked(0x01, &bytes[..1]);
    s.extend(unmasked(0x00, &bytes[1..2]));
    s.extend(unmasked(0x80, &bytes[2..]));
    assert_eq!(
        decode(Role::Client, &s),
        Ok(vec![Ev::Message(MessageKind::Text, bytes.to_vec())])
    );
}

#[test]
fn text_ending_inside_code_point_refused() {
    assert_eq!(
        decode(Role::Client, &unmasked(0x81, &"€".as_bytes()[..2])),
        Err(ProtocolError::InvalidUtf8)
    );
}

#[test]
fn binary_is_not_utf8_checked() {
    assert!(decode(Role::Client, &unmasked(0x82, b"\xff\xfe")).is_ok());
}

#[test]
fn masked_text_split_at_every_byte_decodes_the_same() {
    let text = "Grüße, 世界! 🎉 ".repeat(5);
    let frame = masked(0x81, text.as_bytes());
    for step in 1..frame.len() {
        assert_eq!(
            decode_stepped(DecoderConfig::new(Role::Server), &frame, step),
            Ok(vec![Ev::Message(
                MessageKind::Text,
                text.as_bytes().to_vec()
            )]),
            "step {step}"
        );
    }
}

/// A single-frame message decodes the same whether its whole frame is in the buffer (one
/// step, no state kept) or arrives in pieces (the frame-at-a-time path): the size limit,
/// UTF-8 validation and the payload itself.
#[test]
fn single_frame_message_is_judged_alike_whole_or_in_pieces() {
    let mut cfg = client();
    cfg.max_message_size = 10;
    let cases: [(u8, &[u8], Result<(), ProtocolError>); 5] = [
        (0x82, &[7; 10], Ok(())),
        (0x82, &[7; 11], Err(ProtocolError::MessageTooLarge)),
        (0x81, "héllo".as_bytes(), Ok(())),
        (0x81, &[b'a', 0xc3], Err(ProtocolError::InvalidUtf8)),
        (0x81, &[0xff, b'a'], Err(ProtocolError::InvalidUtf8)),
    ];
    for (first, payload, expect) in cases {
        let frame = unmasked(first, payload);
        // Whole: one decode call sees the entire frame.
        let mut whole = frame.clone();
        let got = Decoder::new(cfg.clone()).decode(&mut whole);
        match (&expect, &got) {
            (Ok(()), Ok(d)) => {
                assert_eq!(d.consumed, frame.len());
                let Some(Item::Data(chunk)) = &d.item else {
                    panic!("{first:#x}: {got:?}")
                };
                assert!(chunk.first && chunk.message_end);
                assert_eq!(&whole[chunk.payload.clone()], payload);
            }
            (Err(e), Err(g)) => assert_eq!(e, g),
            _ => panic!("{first:#x} {payload:?}: whole gave {got:?}, expected {expect:?}"),
        }
        // In pieces: the header alone, then the payload a byte at a time.
        let mut dec = Decoder::new(cfg.clone());
        let mut head = frame[..2].to_vec();
        let mut result = dec.decode(&mut head).map(|_| ());
        let mut delivered = Vec::new();
        for &b in &frame[2..] {
            if result.is_err() {
                break;
            }
            let mut one = [b];
            result = dec.decode(&mut one).map(|d| {
                if let Some(Item::Data(chunk)) = d.item {
                    delivered.extend_from_slice(&one[chunk.payload]);
                }
            });
        }
        assert_eq!(result, expect, "{first:#x} {payload:?} in pieces");
        if expect.is_ok() {
            assert_eq!(delivered, payload);
        }
    }
}
