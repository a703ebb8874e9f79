//! The names tokio-tungstenite programs use (`tests/programs/surface.rs`), compiled
//! against tokio-tungstenite and against this crate; the parts that need no network run
//! and answer the same.

#![allow(clippy::result_large_err)]

#[allow(dead_code)]
mod theirs {
    use oracle as tokio_tungstenite;
    include!("programs/surface.rs");
}

#[allow(dead_code)]
mod ours {
    use rapidws_tungstenite as tokio_tungstenite;
    include!("programs/surface.rs");
}

#[test]
fn the_same_names_answer_the_same() {
    let t: Vec<String> = theirs::closes()
        .into_iter()
        .map(|m| format!("{:?}", theirs::handle(m).map(|m| m.to_string())))
        .collect();
    let o: Vec<String> = ours::closes()
        .into_iter()
        .map(|m| format!("{:?}", ours::handle(m).map(|m| m.to_string())))
        .collect();
    assert_eq!(o, t);
    let t: Vec<String> = theirs::requests()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{} {:?} {:?}",
                r.uri(),
                r.headers().get("host"),
                r.headers().get("sec-websocket-protocol")
            )
        })
        .collect();
    let o: Vec<String> = ours::requests()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{} {:?} {:?}",
                r.uri(),
                r.headers().get("host"),
                r.headers().get("sec-websocket-protocol")
            )
        })
        .collect();
    assert_eq!(o, t);
    let (t, o) = (theirs::config(), ours::config());
    assert_eq!(
        (
            o.max_message_size,
            o.max_frame_size,
            o.write_buffer_size,
            o.read_buffer_size
        ),
        (
            t.max_message_size,
            t.max_frame_size,
            t.write_buffer_size,
            t.read_buffer_size
        )
    );
}

#[test]
fn the_stream_is_send_sync_and_unpin_as_tokio_tungstenite_s() {
    fn send_sync_unpin<T: Send + Sync + Unpin>() {}
    send_sync_unpin::<oracle::WebSocketStream<tokio::net::TcpStream>>();
    send_sync_unpin::<rapidws_tungstenite::WebSocketStream<tokio::net::TcpStream>>();
    send_sync_unpin::<
        rapidws_tungstenite::WebSocketStream<
            rapidws_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
        >,
    >();
    send_sync_unpin::<rapidws_tungstenite::tungstenite::WebSocket<std::net::TcpStream>>();
    send_sync_unpin::<rapidws_tungstenite::tungstenite::Message>();
    send_sync_unpin::<rapidws_tungstenite::tungstenite::Error>();
}
