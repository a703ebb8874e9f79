//! A WebSocket tunnel carries bytes both ways at once, intact, with half-close.
#![cfg(feature = "tokio")]

use std::time::Duration;

use rapidws::tokio::{ClientConfig, ServerConfig, accept, connect};
use rapidws::tunnel::Tunnel;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

mod noise;
use noise::noise;

/// FNV-1a 64.
fn checksum(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Writes `data` in uneven pieces, shuts down, and reads the other direction to its end.
async fn pump<S>(tunnel: Tunnel<S>, data: Vec<u8>) -> Vec<u8>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut rd, mut wr) = tokio::io::split(tunnel);
    let writer = async move {
        for piece in data.chunks(100_003) {
            wr.write_all(piece).await.unwrap();
        }
        wr.shutdown().await.unwrap();
    };
    let reader = async move {
        let mut got = Vec::new();
        rd.read_to_end(&mut got).await.unwrap();
        got
    };
    let ((), got) = tokio::join!(writer, reader);
    got
}

#[tokio::test]
async fn copies_mebibytes_both_ways_with_matching_checksums() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/", listener.local_addr().unwrap());
    let up = noise(5 << 20, 1);
    let down = noise((3 << 20) + 17, 2);
    let (up_sum, down_sum) = (checksum(&up), checksum(&down));
    let down_for_server = down.clone();
    let server = tokio::spawn(async move {
        let (s, _) = listener.accept().await.unwrap();
        let ws = accept(s, &ServerConfig::default()).await.unwrap();
        pump(Tunnel::new(ws), down_for_server).await
    });
    let ws = connect(&url, &ClientConfig::default()).await.unwrap();
    let client = pump(Tunnel::new(ws), up.clone());
    let (got_down, got_up) = tokio::time::timeout(Duration::from_secs(60), async {
        let d = client.await;
        (d, server.await.unwrap())
    })
    .await
    .unwrap();
    assert_eq!(got_up.len(), up.len());
    assert_eq!(got_down.len(), down.len());
    assert_eq!(checksum(&got_up), up_sum);
    assert_eq!(checksum(&got_down), down_sum);
}

#[tokio::test]
async fn shutdown_ends_one_direction_while_the_other_keeps_flowing() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        let (s, _) = listener.accept().await.unwrap();
        let mut t = Tunnel::new(accept(s, &ServerConfig::default()).await.unwrap());
        // Read the request to its end (the client half-closed), then answer.
        let mut req = Vec::new();
        t.read_to_end(&mut req).await.unwrap();
        t.write_all(&req.to_ascii_uppercase()).await.unwrap();
        t.shutdown().await.unwrap();
        t.close().await
    });
    let mut t = Tunnel::new(connect(&url, &ClientConfig::default()).await.unwrap());
    t.write_all(b"hello ").await.unwrap();
    t.write_all(b"tunnel").await.unwrap();
    t.shutdown().await.unwrap();
    let mut reply = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), t.read_to_end(&mut reply))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(reply, b"HELLO TUNNEL");
    assert!(matches!(
        t.write(b"late").await.unwrap_err().kind(),
        std::io::ErrorKind::BrokenPipe
    ));
    // Both ends close the WebSocket once both directions are done.
    tokio::time::timeout(Duration::from_secs(10), t.close())
        .await
        .unwrap()
        .unwrap();
    let r = tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .unwrap()
        .unwrap();
    assert!(r.is_ok(), "{r:?}");
}
