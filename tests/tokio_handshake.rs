//! Handshake outcomes over loopback: refusals reach the peer as HTTP responses and the
//! caller as typed errors; subprotocols are agreed.
#![cfg(feature = "tokio")]

mod tokio_support;

use rapidws::handshake::ClientError;
use rapidws::tokio::{Error, Reject, accept, accept_with, connect};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_support::*;

#[tokio::test]
async fn application_refusal_status_reaches_the_client() {
    let (l, addr) = listener().await;
    let server = tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        accept_with(s, &server_config(), |req| {
            if req.path() == "/chat" {
                Ok(())
            } else {
                Err(Reject::new(404, "no such room"))
            }
        })
        .await
        .map(|_| ())
    });
    let r = bounded(connect(&format!("ws://{addr}/elsewhere"), &client_config())).await;
    match r {
        Err(Error::ClientHandshake(ClientError::Status(resp))) => {
            assert_eq!(resp.status, 404);
        }
        other => panic!("expected a 404 refusal, got {other:?}"),
    }
    assert!(matches!(
        bounded(server).await.unwrap(),
        Err(Error::Rejected(404))
    ));
}

#[tokio::test]
async fn plain_http_request_gets_an_http_error_response() {
    let (l, addr) = listener().await;
    let server = tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        accept(s, &server_config()).await.map(|_| ())
    });
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut resp = Vec::new();
    bounded(s.read_to_end(&mut resp)).await.unwrap();
    assert!(
        resp.starts_with(b"HTTP/1.1 4"),
        "{}",
        String::from_utf8_lossy(&resp)
    );
    assert!(matches!(
        bounded(server).await.unwrap(),
        Err(Error::ServerHandshake(_))
    ));
}

#[tokio::test]
async fn subprotocol_is_agreed() {
    let addr = echo_server(server_config().with_subprotocols(["chat.v2", "chat.v1"])).await;
    let client = client_config().with_subprotocols(["chat.v1", "chat.v2"]);
    let ws = bounded(connect(&format!("ws://{addr}/"), &client))
        .await
        .unwrap();
    assert_eq!(ws.subprotocol(), Some("chat.v2"));
}

/// Only a build without TLS refuses `wss://` as a URL; with feature `tokio-rustls` it dials.
#[cfg(not(feature = "tokio-rustls"))]
#[tokio::test]
async fn bad_url_is_a_typed_error() {
    let r = connect("wss://127.0.0.1:1/", &client_config()).await;
    assert!(matches!(r, Err(Error::Url(_))), "{r:?}");
}

#[tokio::test]
async fn connection_refused_is_an_io_error() {
    let (l, addr) = listener().await;
    drop(l);
    let r = bounded(connect(&format!("ws://{addr}/"), &client_config())).await;
    assert!(matches!(r, Err(Error::Io(_))), "{r:?}");
}
