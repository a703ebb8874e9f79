//! Close codes where users look for them: the named constants of every registered code,
//! reachable from the root, `tokio` and `blocking`, used in real closes.
#![cfg(all(feature = "tokio", feature = "blocking"))]

use rapidws::connection::SendError;
use rapidws::tokio::{ClientConfig, CloseCode, Error, ServerConfig, accept, connect};
use tokio::net::TcpListener;

#[test]
fn the_layers_name_the_same_close_code_type() {
    let from_tokio: rapidws::tokio::CloseCode = CloseCode::GOING_AWAY;
    let from_blocking: rapidws::blocking::CloseCode = from_tokio;
    let from_root: rapidws::CloseCode = from_blocking;
    assert_eq!(from_root, 1001);
}

#[tokio::test]
async fn a_named_code_travels_and_a_reserved_one_is_refused_before_sending() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let mut ws = accept(stream, &ServerConfig::default()).await.unwrap();
        // 1006 names a connection that ended without a close frame: never sent.
        match ws.close(CloseCode::ABNORMAL, "").await {
            Err(Error::Send(SendError::InvalidCloseCode(code))) => {
                assert_eq!(code, CloseCode::ABNORMAL)
            }
            other => panic!("expected the close to be refused, got {other:?}"),
        }
        ws.close(CloseCode::GOING_AWAY, "restarting").await.unwrap();
    });
    let mut ws = connect(&url, &ClientConfig::default()).await.unwrap();
    assert_eq!(ws.recv().await.unwrap().map(|m| m.is_close()), Some(true));
    assert_eq!(ws.recv().await.unwrap(), None);
    let frame = ws.close_frame().expect("the server's close frame");
    assert_eq!(
        (frame.code, frame.reason.as_str()),
        (CloseCode::GOING_AWAY, "restarting")
    );
    server.await.unwrap();
}
