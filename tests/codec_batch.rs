//! The batch decode path (`DecoderConfig::batch`, `Config::batch_decode`) against the
//! frame-at-a-time path: on random frame sequences, valid or not, both give the same items,
//! events and errors, however the bytes are split.

use std::time::Instant;

use proptest::prelude::*;
use rapidws::Role;
use rapidws::codec::{Decoder, DecoderConfig, Item, ProtocolError};
use rapidws::connection::{Config, Connection, Delivery, Error, OwnedEvent};
use rapidws::simd::frame::parse_header;

/// One frame as it goes on the wire, possibly breaking any rule.
#[derive(Clone, Debug)]
struct RawFrame {
    fin: bool,
    rsv: u8,
    opcode: u8,
    key: Option<[u8; 4]>,
    payload: Vec<u8>,
    /// 0: shortest length form; 1: 16-bit; 2: 64-bit; 3: 64-bit with the top bit set.
    length_form: u8,
}

impl RawFrame {
    fn write(&self, out: &mut Vec<u8>) {
        out.push(u8::from(self.fin) << 7 | (self.rsv & 7) << 4 | (self.opcode & 0xf));
        let mask_bit = if self.key.is_some() { 0x80 } else { 0 };
        let len = self.payload.len();
        match self.length_form {
            0 if len < 126 => out.push(mask_bit | len as u8),
            0 | 1 if len <= 0xffff => {
                out.push(mask_bit | 126);
                out.extend_from_slice(&(len as u16).to_be_bytes());
            }
            form => {
                out.push(mask_bit | 127);
                let top = if form == 3 { 1u64 << 63 } else { 0 };
                out.extend_from_slice(&(top | len as u64).to_be_bytes());
            }
        }
        if let Some(key) = self.key {
            out.extend_from_slice(&key);
            out.extend(
                self.payload
                    .iter()
                    .zip(key.iter().cycle())
                    .map(|(b, k)| b ^ k),
            );
        } else {
            out.extend_from_slice(&self.payload);
        }
    }
}

fn payload() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        // ASCII text, short and around the batch's ASCII cut-off (256 bytes).
        proptest::collection::vec(0x20u8..0x7f, 0..40),
        proptest::collection::vec(0x20u8..0x7f, 240..300),
        // Valid UTF-8 with multi-byte code points.
        any::<String>().prop_map(String::into_bytes),
        ".{250,270}".prop_map(String::into_bytes),
        // Anything, mostly invalid as text.
        proptest::collection::vec(any::<u8>(), 0..300),
        // A close payload: code and a short reason.
        (any::<u16>(), "[a-z]{0,10}").prop_map(|(code, reason)| {
            let mut p = code.to_be_bytes().to_vec();
            p.extend_from_slice(reason.as_bytes());
            p
        }),
    ]
}

fn raw_frame(masked_by_default: bool) -> impl Strategy<Value = RawFrame> {
    (
        prop::bool::weighted(0.85),
        prop_oneof![8 => Just(0u8), 1 => 0u8..8],
        prop_oneof![
            4 => Just(1u8),
            3 => Just(2u8),
            2 => Just(0u8),
            1 => Just(8u8),
            2 => Just(9u8),
            2 => Just(10u8),
            1 => 0u8..16,
        ],
        prop::bool::weighted(0.95),
        any::<[u8; 4]>(),
        payload(),
        prop_oneof![12 => Just(0u8), 2 => Just(1u8), 1 => Just(2u8), 1 => Just(3u8)],
    )
        .prop_map(
            move |(fin, rsv, opcode, usual, key, payload, length_form)| RawFrame {
                fin,
                rsv,
                opcode,
                key: (usual == masked_by_default).then_some(key),
                payload,
                length_form,
            },
        )
}

fn wire(frames: &[RawFrame]) -> Vec<u8> {
    let mut out = Vec::new();
    for f in frames {
        f.write(&mut out);
    }
    out
}

/// Sorted cut points inside `len`, ending with `len`.
fn cut_points(len: usize, cuts: &[usize]) -> Vec<usize> {
    let mut c: Vec<usize> = cuts.iter().map(|c| c % (len + 1)).collect();
    c.sort_unstable();
    c.push(len);
    c
}

/// Items (with their payload bytes) and the error ending the stream, decoding `bytes`
/// arriving in pieces, the caller dropping consumed bytes as the decoder asks.
fn decode(
    mut cfg: DecoderConfig,
    batch: bool,
    bytes: &[u8],
    cuts: &[usize],
) -> (Vec<(Item, Vec<u8>)>, Option<ProtocolError>) {
    cfg.batch = batch;
    let mut d = Decoder::new(cfg);
    let mut buf = Vec::new();
    let mut items = Vec::new();
    let mut pos = 0;
    for cut in cut_points(bytes.len(), cuts) {
        buf.extend_from_slice(&bytes[pos..cut]);
        pos = cut;
        loop {
            match d.decode(&mut buf) {
                Ok(r) => {
                    if let Some(item) = r.item {
                        let range = match &item {
                            Item::Data(c) => c.payload.clone(),
                            Item::Control(c) => c.payload.clone(),
                        };
                        items.push((item, buf[range].to_vec()));
                        buf.drain(..r.consumed);
                    } else {
                        buf.drain(..r.consumed);
                        break;
                    }
                }
                Err(e) => return (items, Some(e)),
            }
        }
    }
    (items, None)
}

fn receive(
    role: Role,
    delivery: Delivery,
    batch: bool,
    bytes: &[u8],
    cuts: &[usize],
) -> (Vec<OwnedEvent>, Option<Error>, Vec<u8>) {
    let mut cfg = Config::default();
    cfg.delivery = delivery;
    cfg.batch_decode = batch;
    cfg.max_message_size = 1000;
    let now = Instant::now();
    let mut conn = Connection::new(role, cfg, now);
    let mut events = Vec::new();
    let mut pos = 0;
    for cut in cut_points(bytes.len(), cuts) {
        conn.handle_bytes(now, &bytes[pos..cut]);
        pos = cut;
        while let Some(e) = conn.poll_event_owned() {
            match e {
                Ok(e) => events.push(e),
                Err(e) => {
                    let mut out = Vec::new();
                    conn.write_pending(&mut out);
                    return (events, Some(e), unmask_all(out));
                }
            }
        }
    }
    let mut out = Vec::new();
    conn.write_pending(&mut out);
    (events, None, unmask_all(out))
}

/// Output frames with their mask keys dropped and payloads unmasked (a client masks with
/// random keys).
fn unmask_all(mut bytes: Vec<u8>) -> Vec<u8> {
    let mut out = Vec::new();
    let mut pos = 0;
    while let Ok(Some(h)) = parse_header(&bytes[pos..]) {
        let start = pos + usize::from(h.header_len);
        let end = start + h.payload_len as usize;
        out.extend_from_slice(&bytes[pos..pos + 2]);
        if let Some(mut key) = h.mask {
            rapidws::simd::mask::apply(&mut bytes[start..end], &mut key);
        }
        out.extend_from_slice(&bytes[start..end]);
        pos = end;
    }
    out
}

/// `frames` as a peer of `role` sends them: a server receives them as generated, a client
/// expects unmasked frames, so the usual masking is flipped (`key` for the unmasked ones).
fn as_sent_to(role: Role, frames: Vec<RawFrame>, key: [u8; 4]) -> Vec<RawFrame> {
    if role == Role::Server {
        return frames;
    }
    frames
        .into_iter()
        .map(|mut f| {
            f.key = if f.key.is_some() { None } else { Some(key) };
            f
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn batch_and_frame_at_a_time_decode_the_same_items_and_errors(
        server in any::<bool>(),
        rsv1_allowed in any::<bool>(),
        max_frame_size in prop_oneof![Just(usize::MAX), 0usize..400],
        max_message_size in prop_oneof![Just(usize::MAX), 0usize..400],
        frames in proptest::collection::vec(raw_frame(true), 0..40),
        cuts in proptest::collection::vec(any::<usize>(), 0..6),
    ) {
        let role = if server { Role::Server } else { Role::Client };
        let frames = as_sent_to(role, frames, [1, 2, 3, 4]);
        let bytes = wire(&frames);
        let mut cfg = DecoderConfig::new(role);
        cfg.rsv1_allowed = rsv1_allowed;
        cfg.max_frame_size = max_frame_size;
        cfg.max_message_size = max_message_size;
        let single = decode(cfg.clone(), false, &bytes, &[]);
        prop_assert_eq!(&decode(cfg.clone(), true, &bytes, &[]), &single);
        prop_assert_eq!(
            &decode(cfg.clone(), true, &bytes, &cuts),
            &decode(cfg, false, &bytes, &cuts)
        );
    }

    #[test]
    fn batch_and_frame_at_a_time_give_the_same_connection_events(
        server in any::<bool>(),
        chunks in any::<bool>(),
        frames in proptest::collection::vec(raw_frame(true), 0..40),
        cuts in proptest::collection::vec(any::<usize>(), 0..6),
    ) {
        let role = if server { Role::Server } else { Role::Client };
        let frames = as_sent_to(role, frames, [9, 8, 7, 6]);
        let delivery = if chunks { Delivery::Chunks } else { Delivery::Whole };
        let bytes = wire(&frames);
        let single = receive(role, delivery, false, &bytes, &cuts);
        let batch = receive(role, delivery, true, &bytes, &cuts);
        prop_assert_eq!(format!("{:?}", batch.0), format!("{:?}", single.0));
        prop_assert_eq!(format!("{:?}", batch.1), format!("{:?}", single.1));
        prop_assert_eq!(batch.2, single.2);
    }
}

#[test]
fn a_burst_of_valid_small_frames_is_decoded_in_batches() {
    // 100 masked text frames of 16 B, some not ASCII: every one comes out whole and in
    // order, the same as frame at a time.
    let frames: Vec<RawFrame> = (0..100)
        .map(|i| RawFrame {
            fin: true,
            rsv: 0,
            opcode: 1,
            key: Some([i as u8, 0x5a, 0xa5, 0x11]),
            payload: if i % 7 == 0 {
                "héllo wörld 16 B".into()
            } else {
                format!("message {i:>8}").into_bytes()
            },
            length_form: 0,
        })
        .collect();
    let bytes = wire(&frames);
    let (items, err) = decode(DecoderConfig::new(Role::Server), true, &bytes, &[]);
    assert_eq!(err, None);
    assert_eq!(items.len(), 100);
    for (f, (_, payload)) in frames.iter().zip(&items) {
        assert_eq!(&f.payload, payload);
    }
    assert_eq!(
        (items, err),
        decode(DecoderConfig::new(Role::Server), false, &bytes, &[])
    );
}
