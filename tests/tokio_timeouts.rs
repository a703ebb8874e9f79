//! Every configured deadline fires: handshake, keepalive pong, idle, close.
#![cfg(feature = "tokio")]

mod tokio_support;

use std::time::{Duration, Instant};

use rapidws::tokio::{Error, MaybeTlsStream, Message, Timeout, WebSocket, accept, connect};
use tokio::net::TcpStream;
use tokio_support::*;

const QUICK: Option<Duration> = Some(Duration::from_millis(300));

#[tokio::test]
async fn silent_client_hits_the_handshake_timeout() {
    let (l, addr) = listener().await;
    let server = tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        let config = server_config()
            .with_connection(big_config())
            .with_handshake_timeout(QUICK);
        let start = Instant::now();
        let r = accept(s, &config).await;
        (r.map(|_| ()), start.elapsed())
    });
    let _silent = TcpStream::connect(addr).await.unwrap();
    let (r, took) = bounded(server).await.unwrap();
    assert!(
        matches!(r, Err(Error::Timeout(Timeout::Handshake))),
        "{r:?}"
    );
    assert!(took >= Duration::from_millis(250) && took < Duration::from_secs(5));
}

#[tokio::test]
async fn peer_that_never_answers_pings_hits_the_pong_timeout() {
    let (l, addr) = listener().await;
    let server = tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        let c = big_config()
            .with_keepalive(Some(Duration::from_millis(100)), Duration::from_millis(200));
        let mut ws = accept(s, &server_config().with_connection(c))
            .await
            .unwrap();
        let start = Instant::now();
        loop {
            match ws.recv().await {
                Ok(Some(_)) => {}
                other => return (other.map(|_| ()), start.elapsed()),
            }
        }
    });
    // A client that is never polled answers nothing.
    let client =
        client_config().with_connection(big_config().with_keepalive(None, Duration::from_secs(30)));
    let _ws = bounded(connect(&format!("ws://{addr}/"), &client))
        .await
        .unwrap();
    let (r, took) = bounded(server).await.unwrap();
    assert!(matches!(r, Err(Error::Timeout(Timeout::Pong))), "{r:?}");
    assert!(took >= Duration::from_millis(250), "fired after {took:?}");
}

#[tokio::test]
async fn keepalive_pings_keep_a_quiet_but_live_connection_open() {
    // The connection stays open for twice the pong timeout and at least three pongs: it is
    // the answered pings that keep it. Waits for those events rather than for a fixed
    // window, and leaves the client 1 s to answer each ping (a starved machine's share),
    // where 200 ms and an 800 ms window failed when the client task was not scheduled.
    const PONG_TIMEOUT: Duration = Duration::from_secs(1);
    let (l, addr) = listener().await;
    let server = tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        let c = big_config().with_keepalive(Some(Duration::from_millis(50)), PONG_TIMEOUT);
        let mut ws = accept(s, &server_config().with_connection(c))
            .await
            .unwrap();
        let start = Instant::now();
        let mut pongs = 0;
        while pongs < 3 || start.elapsed() < 2 * PONG_TIMEOUT {
            match ws.recv().await {
                Ok(Some(Message::Pong(_))) => pongs += 1,
                other => panic!("the connection should still be open: {other:?}"),
            }
        }
    });
    let mut ws = bounded(connect(&format!("ws://{addr}/"), &client_config()))
        .await
        .unwrap();
    // The client keeps receiving, so it answers the server's pings, until the server has
    // seen enough.
    let client = tokio::spawn(async move {
        while let Ok(Some(m)) = ws.recv().await {
            assert!(matches!(m, Message::Ping(_)), "{m:?}");
        }
    });
    bounded(server).await.unwrap();
    client.abort();
}

#[tokio::test]
async fn idle_connection_is_closed_with_1001() {
    let (l, addr) = listener().await;
    let server = tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        let c = big_config()
            .with_keepalive(None, Duration::from_secs(1))
            .with_idle_timeout(Some(Duration::from_millis(200)));
        let mut ws = accept(s, &server_config().with_connection(c))
            .await
            .unwrap();
        ws.recv().await.map(|_| ())
    });
    let mut ws = bounded(connect(&format!("ws://{addr}/"), &client_config()))
        .await
        .unwrap();
    let r = bounded(server).await.unwrap();
    assert!(matches!(r, Err(Error::Timeout(Timeout::Idle))), "{r:?}");
    match bounded(ws.recv()).await.unwrap() {
        Some(Message::Close(Some(f))) => assert_eq!(f.code, 1001),
        other => panic!("expected close 1001, got {other:?}"),
    }
}

#[tokio::test]
async fn idle_timeout_counts_from_the_last_message() {
    let (l, addr) = listener().await;
    let server = tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        let c = big_config()
            .with_keepalive(None, Duration::from_secs(1))
            .with_idle_timeout(Some(Duration::from_millis(300)));
        let mut ws = accept(s, &server_config().with_connection(c))
            .await
            .unwrap();
        let start = Instant::now();
        let mut received = 0;
        loop {
            match ws.recv().await {
                Ok(Some(_)) => received += 1,
                other => return (other.map(|_| ()), received, start.elapsed()),
            }
        }
    });
    let mut ws = bounded(connect(&format!("ws://{addr}/"), &client_config()))
        .await
        .unwrap();
    // Six messages 100 ms apart: each moves the idle deadline past the timer armed for
    // the one before, which must fire without effect and re-arm.
    for i in 0..6 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        bounded(ws.send(Message::text(format!("{i}"))))
            .await
            .unwrap();
    }
    let (r, received, took) = bounded(server).await.unwrap();
    assert!(matches!(r, Err(Error::Timeout(Timeout::Idle))), "{r:?}");
    assert_eq!(received, 6, "no message is lost to an early timer");
    // Last message at ~600 ms, timeout 300 ms after it.
    assert!(
        took >= Duration::from_millis(850),
        "timed out after {took:?}"
    );
}

#[tokio::test]
async fn close_handshake_gives_up_when_the_peer_never_answers() {
    let (l, addr) = listener().await;
    tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        let ws = accept(s, &server_config()).await.unwrap();
        // Never polled again: the close is never answered.
        tokio::time::sleep(Duration::from_secs(10)).await;
        drop(ws);
    });
    let mut ws = connect_with_close_timeout(addr).await;
    close_times_out(&mut ws).await;
}

/// A client to `addr` with a 300 ms close timeout.
async fn connect_with_close_timeout(
    addr: std::net::SocketAddr,
) -> WebSocket<MaybeTlsStream<TcpStream>> {
    let c = big_config().with_close_timeout(Duration::from_millis(300));
    bounded(connect(
        &format!("ws://{addr}/"),
        &client_config().with_connection(c),
    ))
    .await
    .unwrap()
}

/// Closing `ws` ends with the close timeout (300 ms), before the default one (5 s) would
/// have: a bound that leaves a starved machine 4 s, not a measure of speed.
async fn close_times_out<S>(ws: &mut WebSocket<S>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let start = Instant::now();
    let r = bounded(ws.close(1000, "")).await;
    assert!(matches!(r, Err(Error::Timeout(Timeout::Close))), "{r:?}");
    assert!(
        start.elapsed() < Duration::from_millis(4500),
        "{:?}",
        start.elapsed()
    );
}

#[tokio::test]
async fn peer_vanishing_without_close_is_an_unexpected_eof() {
    let (l, addr) = listener().await;
    tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        let ws = accept(s, &server_config()).await.unwrap();
        drop(ws);
    });
    let mut ws = bounded(connect(&format!("ws://{addr}/"), &client_config()))
        .await
        .unwrap();
    let r = bounded(ws.recv()).await;
    assert!(matches!(&r, Err(e) if e.is_unexpected_eof()), "{r:?}");
}

#[tokio::test]
async fn close_handshake_gives_up_on_a_peer_that_keeps_sending_data() {
    let (l, addr) = listener().await;
    tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        let mut ws = accept(s, &server_config()).await.unwrap();
        // Sends data without pause and never reads, so our close is never answered;
        // bounded in time so the test cannot hang.
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if ws.send(Message::binary(vec![1u8; 1024])).await.is_err() {
                return;
            }
        }
    });
    let mut ws = connect_with_close_timeout(addr).await;
    // Let the flood start, so that the reads of the closing handshake find data.
    tokio::time::sleep(Duration::from_millis(100)).await;
    close_times_out(&mut ws).await;
}
