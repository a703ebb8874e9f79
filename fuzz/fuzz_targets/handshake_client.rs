//! The client's response parser on arbitrary bytes: never panics, keeps its buffer within
//! the limit, and gives the same outcome however the input is split. With
//! permessage-deflate offered (the first byte's top bits pick the offer), an agreement
//! never grants the server more than was offered.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rapidws::deflate::DeflateConfig;
use rapidws::handshake::{ClientConfig, ClientError, ClientHandshake, ClientRequest, Upgraded};

/// What the client offers: nothing, the defaults, or limits on both windows and context.
fn offer(choice: u8) -> Option<DeflateConfig> {
    match choice & 3 {
        0 => None,
        1 => Some(DeflateConfig::default()),
        2 => Some(
            DeflateConfig::default()
                .client_no_context_takeover(true)
                .server_max_window_bits(10),
        ),
        _ => Some(
            DeflateConfig::default()
                .server_no_context_takeover(true)
                .client_max_window_bits(9),
        ),
    }
}

fn run(
    input: &[u8],
    chunk: usize,
    deflate: &Option<DeflateConfig>,
) -> Result<Option<Upgraded>, ClientError> {
    let request = ClientRequest::new("localhost", "/").subprotocol("chat");
    let mut config = ClientConfig::default().with_deflate(deflate.clone());
    config.max_response_size = 4096;
    config.max_headers = 32;
    // The RFC 6455 example key, so inputs can carry the matching accept value.
    let (mut handshake, _) = ClientHandshake::with_key(&request, config, *b"the sample nonce")?;
    let mut pieces = input.chunks(chunk);
    for piece in pieces.by_ref() {
        let fed = match handshake.feed(piece) {
            // The body that had arrived depends on the split: add what the caller would
            // read next, so every split gives the same body.
            Err(ClientError::Status(mut response)) => {
                for rest in pieces {
                    response.body.extend_from_slice(rest);
                }
                return Err(ClientError::Status(response));
            }
            other => other?,
        };
        match fed {
            None => assert!(handshake.buffered() <= 4096),
            Some(mut upgraded) => {
                for rest in pieces {
                    upgraded.leftover.extend_from_slice(rest);
                }
                assert!(upgraded.subprotocol.as_deref().is_none_or(|p| p == "chat"));
                if let Some(p) = upgraded.deflate {
                    // RFC 7692 7.1: only what was offered, within the offered windows.
                    let offered = deflate.as_ref().expect("an extension that was not offered");
                    assert!(p.server_max_window_bits <= offered.server_max_window_bits);
                    assert!(p.client_max_window_bits <= offered.client_max_window_bits);
                    assert!(p.server_max_window_bits >= 8 && p.client_max_window_bits >= 8);
                    assert!(p.server_no_context_takeover || !offered.server_no_context_takeover);
                    assert!(p.client_no_context_takeover || !offered.client_no_context_takeover);
                }
                return Ok(Some(upgraded));
            }
        }
    }
    Ok(None)
}

fuzz_target!(|data: &[u8]| {
    let Some((&split, input)) = data.split_first() else {
        return;
    };
    let deflate = offer(split >> 6);
    let whole = run(input, input.len().max(1), &deflate);
    let split = run(input, usize::from(split % 64) + 1, &deflate);
    assert_eq!(whole, split);
});
