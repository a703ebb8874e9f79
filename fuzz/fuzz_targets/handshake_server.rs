//! The server's request parser on arbitrary bytes: never panics, keeps its buffer within
//! the limit, and gives the same outcome however the input is split. With
//! permessage-deflate on (the first byte's top bits pick the server's settings), the
//! extension the response states is the agreement itself: a client reads it back as the
//! same parameters.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rapidws::deflate::negotiate::client_accept;
use rapidws::deflate::{CompressorPolicy, CompressorPool, DeflateConfig};
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
                let _ = (
                    request.path(),
                    request.host(),
                    request.origin(),
                    request.key(),
                );
                let _ = request.subprotocols().count() + request.headers().count();
                let mut accepted = request.accept(config)?;
                assert!(
                    accepted
                        .response
                        .starts_with(b"HTTP/1.1 101 Switching Protocols\r\n")
                );
                assert!(accepted.response.ends_with(b"\r\n\r\n"));
                check_extension(&accepted.response, accepted.deflate);
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

/// The response's `Sec-WebSocket-Extensions` states `agreed`: a client that offered
/// everything reads it back as the same parameters, and it is absent when nothing was agreed.
fn check_extension(response: &[u8], agreed: Option<rapidws::deflate::DeflateParams>) {
    let head = std::str::from_utf8(response).expect("our response head is ASCII");
    let values: Vec<&[u8]> = head
        .split("\r\n")
        .filter_map(|line| line.split_once(": "))
        .filter(|(name, _)| name.eq_ignore_ascii_case("sec-websocket-extensions"))
        .map(|(_, value)| value.as_bytes())
        .collect();
    match agreed {
        None => assert!(
            values.is_empty(),
            "an extension header without an agreement"
        ),
        Some(params) => {
            assert_eq!(values.len(), 1);
            let read = client_accept(&DeflateConfig::default(), &values);
            assert_eq!(read, Ok(Some(params)), "{:?}", head);
        }
    }
}

/// The server's permessage-deflate settings: off, the defaults, limits that the agreement
/// must respect, and pooled compressors (which demand `server_no_context_takeover`).
fn deflate(choice: u8) -> Option<DeflateConfig> {
    match choice & 3 {
        0 => None,
        1 => Some(DeflateConfig::default()),
        2 => Some(
            DeflateConfig::default()
                .client_no_context_takeover(true)
                .server_max_window_bits(10)
                .client_max_window_bits(9),
        ),
        _ => Some(
            DeflateConfig::default().policy(CompressorPolicy::Pooled(std::sync::Arc::new(
                CompressorPool::new(1),
            ))),
        ),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&split, input)) = data.split_first() else {
        return;
    };
    let mut config = ServerConfig::default()
        .with_subprotocols(["chat", "superchat"])
        .with_origin_check(|origin| origin.is_none_or(|o| !o.contains("evil")))
        .with_deflate(deflate(split >> 6));
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
