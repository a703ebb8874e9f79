//! The client's response parser on arbitrary bytes: never panics, keeps its buffer within
//! the limit, and gives the same outcome however the input is split.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rapidws::handshake::{ClientConfig, ClientError, ClientHandshake, ClientRequest, Upgraded};

fn run(input: &[u8], chunk: usize) -> Result<Option<Upgraded>, ClientError> {
    let request = ClientRequest::new("localhost", "/").subprotocol("chat");
    let mut config = ClientConfig::default();
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
    let whole = run(input, input.len().max(1));
    let split = run(input, usize::from(split % 64) + 1);
    assert_eq!(whole, split);
});
