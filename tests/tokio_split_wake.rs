#![cfg(feature = "tokio")]
//! A message queued on a `WriteHalf` from another task, while the `ReadHalf` waits in
//! `recv` on a silent peer, leaves at once: queueing wakes the task that owns the socket.
mod tokio_support;

use std::time::Duration;

use rapidws::PreparedMessage;
use rapidws::tokio::{ClientConfig, Message, ServerConfig, accept, connect};
use tokio_support::*;

/// Far below the keepalive (30 s), the only other thing that would wake a silent reader.
const PROMPT: Duration = Duration::from_secs(3);

async fn queued_from_another_task_leaves_promptly(prepared: bool) {
    let (l, addr) = listener().await;
    let server = tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        let ws = accept(s, &ServerConfig::default()).await.unwrap();
        let (mut rd, wr) = ws.into_split();
        // The reader sits in `recv`: the client sends nothing until it has the message.
        let reader = tokio::spawn(async move { while let Ok(Some(_)) = rd.recv().await {} });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let sender = tokio::spawn(async move {
            if prepared {
                wr.try_send_prepared(&PreparedMessage::text("from afar"))
                    .unwrap();
            } else {
                wr.try_send(Message::text("from afar")).unwrap();
            }
            wr
        });
        let _wr = sender.await.unwrap();
        bounded(reader).await.unwrap();
    });
    let mut ws = connect(&format!("ws://{addr}/"), &ClientConfig::default())
        .await
        .unwrap();
    let got = tokio::time::timeout(PROMPT, ws.recv())
        .await
        .expect("the queued message did not leave while the reader waited");
    assert_eq!(got.unwrap(), Some(Message::text("from afar")));
    ws.close(1000, "").await.unwrap();
    bounded(server).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_send_from_another_task_wakes_the_waiting_reader() {
    queued_from_another_task_leaves_promptly(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_send_prepared_from_another_task_wakes_the_waiting_reader() {
    queued_from_another_task_leaves_promptly(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_close_sheds_a_peer_that_never_reads_even_with_a_full_queue() {
    use bytes::Bytes;
    use rapidws::tokio::{Config, TrySendError};

    let (l, addr) = listener().await;
    let config = ServerConfig::default().with_connection(
        Config::default()
            .with_send_queue_high_water(64 << 10)
            .with_close_timeout(Duration::from_millis(300)),
    );
    let server = tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        let ws = accept(s, &config).await.unwrap();
        let (mut rd, wr) = ws.into_split();
        let reader = tokio::spawn(async move { while let Ok(Some(_)) = rd.recv().await {} });
        let chunk = Bytes::from(vec![7u8; 16 << 10]);
        // Bounded: at most 128 MiB offered before the socket and the queue push back.
        let mut full = false;
        for _ in 0..8192 {
            match wr.try_send(Message::Binary(chunk.clone())) {
                Ok(()) => tokio::task::yield_now().await,
                Err(TrySendError::QueueFull(_)) => {
                    full = true;
                    break;
                }
                Err(e) => panic!("send failed: {e}"),
            }
        }
        assert!(full, "the queue never filled");
        wr.try_close(1013, "too slow").unwrap();
        assert!(wr.try_close(1013, "again").is_err(), "one close only");
        // The peer never answers: the close timeout ends the connection.
        bounded(reader).await.unwrap();
    });
    // A client that never reads: the server's queue fills.
    let _ws = connect(&format!("ws://{addr}/"), &ClientConfig::default())
        .await
        .unwrap();
    bounded(server).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reunited_halves_go_on_where_they_left_off() {
    let addr = echo_server(ServerConfig::default()).await;
    let ws = connect(format!("ws://{addr}/"), &ClientConfig::default())
        .await
        .unwrap();
    let (mut rd, mut wr) = ws.into_split();
    assert!(rd.is_pair_of(&wr));
    wr.send(Message::text("one")).await.unwrap();
    assert_eq!(
        bounded(rd.recv()).await.unwrap(),
        Some(Message::text("one"))
    );
    // A message in flight while the halves are put back together arrives on the whole.
    wr.send(Message::text("two")).await.unwrap();
    let mut ws = rd.reunite(wr).unwrap();
    assert_eq!(
        bounded(ws.recv()).await.unwrap(),
        Some(Message::text("two"))
    );
    ws.get_mut().get_mut().set_nodelay(true).unwrap();
    ws.send(Message::text("three")).await.unwrap();
    assert_eq!(
        bounded(ws.recv()).await.unwrap(),
        Some(Message::text("three"))
    );
    bounded(ws.close(1000, "")).await.unwrap();
    // The stream itself, once the connection is over.
    let _tcp = ws.into_inner();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn halves_of_different_connections_do_not_reunite() {
    let addr = echo_server(ServerConfig::default()).await;
    let url = format!("ws://{addr}/");
    let (rd_a, wr_a) = connect(&url, &ClientConfig::default())
        .await
        .unwrap()
        .into_split();
    let (rd_b, wr_b) = connect(&url, &ClientConfig::default())
        .await
        .unwrap()
        .into_split();
    assert!(!rd_a.is_pair_of(&wr_b));
    let rapidws::tokio::ReuniteError(rd_a, wr_b) = rd_a.reunite(wr_b).unwrap_err();
    // Both halves come back whole: each pair still reunites and works.
    let mut a = rd_a.reunite(wr_a).unwrap();
    let mut b = rd_b.reunite(wr_b).unwrap();
    for ws in [&mut a, &mut b] {
        ws.send(Message::text("still here")).await.unwrap();
        assert_eq!(
            bounded(ws.recv()).await.unwrap(),
            Some(Message::text("still here"))
        );
        bounded(ws.close(1000, "")).await.unwrap();
    }
}
