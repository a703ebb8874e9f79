//! Arbitrary bytes, fed to the decoder in arbitrary chunks: never a panic, and the
//! outcome (messages, control frames, or the error) equals decoding the input whole, with
//! the batch decode path and without it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rapidws::Role;
use rapidws::codec::{Decoder, DecoderConfig, Item, ProtocolError};

#[derive(Debug, PartialEq, Eq)]
enum Ev {
    Data {
        text: bool,
        compressed: bool,
        bytes: Vec<u8>,
    },
    Control(rapidws::codec::ControlKind, Vec<u8>),
}

fn run(config: &DecoderConfig, input: &[u8], cuts: &[usize]) -> (Vec<Ev>, Option<ProtocolError>) {
    let mut dec = Decoder::new(config.clone());
    let mut buf = Vec::new();
    let mut events = Vec::new();
    let mut msg = Vec::new();
    let mut pos = 0;
    for &cut in cuts.iter().chain(std::iter::once(&input.len())) {
        let cut = cut.clamp(pos, input.len());
        buf.extend_from_slice(&input[pos..cut]);
        pos = cut;
        loop {
            let d = match dec.decode(&mut buf) {
                Ok(d) => d,
                Err(e) => return (events, Some(e)),
            };
            assert!(d.consumed <= buf.len());
            let more = d.item.is_some();
            match d.item {
                Some(Item::Data(c)) => {
                    assert!(c.payload.end <= d.consumed);
                    msg.extend_from_slice(&buf[c.payload]);
                    // A size limit holds for uncompressed messages at every step.
                    if !c.compressed {
                        assert!(msg.len() <= config.max_message_size);
                    }
                    if c.message_end {
                        let bytes = std::mem::take(&mut msg);
                        if c.kind == rapidws::codec::MessageKind::Text && !c.compressed {
                            assert!(std::str::from_utf8(&bytes).is_ok());
                        }
                        events.push(Ev::Data {
                            text: c.kind == rapidws::codec::MessageKind::Text,
                            compressed: c.compressed,
                            bytes,
                        });
                    }
                }
                Some(Item::Control(c)) => {
                    assert!(c.payload.len() <= 125);
                    events.push(Ev::Control(c.kind, buf[c.payload].to_vec()));
                }
                None => {}
            }
            buf.drain(..d.consumed);
            if !more {
                break;
            }
        }
    }
    (events, None)
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let Some((&ncuts, rest)) = rest.split_first() else {
        return;
    };
    let ncuts = (ncuts % 16) as usize;
    if rest.len() < ncuts * 2 {
        return;
    }
    let (cut_bytes, input) = rest.split_at(ncuts * 2);
    let mut cuts: Vec<usize> = cut_bytes
        .chunks(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]) as usize % (input.len() + 1))
        .collect();
    cuts.sort_unstable();

    let role = if selector & 1 == 0 {
        Role::Server
    } else {
        Role::Client
    };
    let mut config = DecoderConfig::new(role);
    config.rsv1_allowed = selector & 2 != 0;
    if selector & 4 != 0 {
        // Small limits, so the fuzzer reaches them.
        config.max_frame_size = 64;
        config.max_message_size = 200;
    }
    let whole = run(&config, input, &[]);
    let split = run(&config, input, &cuts);
    assert_eq!(whole, split);
    // The batch path (on by default) and the frame-at-a-time path agree exactly.
    let mut single = config.clone();
    single.batch = false;
    assert_eq!(run(&single, input, &[]), whole);
    assert_eq!(run(&single, input, &cuts), split);
});
