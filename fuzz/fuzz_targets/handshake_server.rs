//! The server's request parser on arbitrary bytes: never panics, keeps its buffer within
//! the limit, and gives the same outcome however the input is split.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rapidws::handshake::{ServerConfig, ServerError, ServerHandshake};

/// The outcome of feeding `input` in chunks of `chunk` bytes, with any bytes after the
/// completed head appended to the leftover as a caller would hand them to the codec.
fn run(config: &ServerConfig, input: &[u8], chunk: usize) -> Result<Option<Vec<u8>>, ServerError> {
    let mut handshake = ServerHandshake::new(config);
    let mut pieces = input.chunks(chunk);
    for piece in pieces.by_ref() {
        match handshake.feed(piece)? {
            None => assert!(handshake.buffered() <= config.max_request_size),
            Some(request) => {
                // The accessors must be usable on anything the parser let through.
                let _ = (request.path(), request.host(), request.origin(), request.key());
                let _ = request.subprotocols().count() + request.headers().count();
                let mut accepted = request.accept(config)?;
                assert!(accepted.response.starts_with(b"HTTP/1.1 101 Switching Protocols\r\n"));
                assert!(accepted.response.ends_with(b"\r\n\r\n"));
                for rest in pieces {
                    accepted.leftover.extend_from_slice(rest);
                }
                let mut out = accepted.response;
                out.push(0);
                out.extend_from_slice(&accepted.leftover);
                return Ok(Some(out));
            }
        }
    }
    Ok(None)
}

fuzz_target!(|data: &[u8]| {
    let Some((&split, input)) = data.split_first() else {
        return;
    };
    let mut config = ServerConfig::default()
        .with_subprotocols(["chat", "superchat"])
        .with_origin_check(|origin| origin.is_none_or(|o| !o.contains("evil")));
    config.max_request_size = 4096;
    config.max_headers = 32;

    let whole = run(&config, input, input.len().max(1));
    let split = run(&config, input, usize::from(split % 64) + 1);
    assert_eq!(whole, split);
    if let Err(e) = whole {
        let response = e.response();
        let status = format!("HTTP/1.1 {} ", e.status());
        assert!(response.starts_with(status.as_bytes()));
    }
});
