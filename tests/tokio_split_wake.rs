#![cfg(feature = "tokio")]
//! A message queued on a `WriteHalf` from another task, while the `ReadHalf` waits in
//! `recv` on a silent peer, leaves at once: queueing wakes the task that owns the socket.
mod tokio_support;

use std::future::Future;
use std::time::Duration;

use futures_core::Stream;
use rapidws::PreparedMessage;
use rapidws::tokio::{ClientConfig, Error, Message, ServerConfig, WebSocket, accept, connect};
use tokio::net::TcpStream;
use tokio_support::*;

/// Half the keepalive (30 s), the only other thing that would wake a silent reader: a
/// bound that a starved machine meets, not a measure of speed.
const PROMPT: Duration = Duration::from_secs(15);

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

/// A future that counts its polls, and says when it was first polled.
struct Counted<F> {
    fut: std::pin::Pin<Box<F>>,
    polls: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    first: Option<tokio::sync::oneshot::Sender<()>>,
}

impl<F: std::future::Future> std::future::Future for Counted<F> {
    type Output = F::Output;
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        self.polls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Some(first) = self.first.take() {
            let _ = first.send(());
        }
        self.fut.as_mut().poll(cx)
    }
}

/// Queues and writes until the socket takes no more (the client does not read) and the
/// queue is full.
async fn saturate<S>(ws: &mut rapidws::tokio::WebSocket<S>, chunk: &bytes::Bytes)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    loop {
        while ws.try_send(Message::Binary(chunk.clone())).is_ok() {}
        let mut flush = std::pin::pin!(ws.flush());
        let pending =
            std::future::poll_fn(|cx| std::task::Poll::Ready(flush.as_mut().poll(cx).is_pending()))
                .await;
        if pending {
            return;
        }
    }
}

/// How often a send waiting for room in a full queue (the peer never reads) was polled
/// while the receiving task got 500 messages, on the halves `split` makes of the server's
/// socket: the sending one, whose `send` (a future that gives it back) waits, and the
/// receiving one, as a stream.
async fn polls_of_a_waiting_send<W, R, F>(
    split: impl FnOnce(WebSocket<TcpStream>) -> (W, R) + Send + 'static,
    send: impl FnOnce(W, Message) -> F + Send + 'static,
) -> usize
where
    W: Send + 'static,
    R: Stream<Item = Result<Message, Error>> + Send,
    F: Future<Output = W> + Send + 'static,
{
    use futures_util::StreamExt;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const MESSAGES: usize = 500;
    let (l, addr) = listener().await;
    let config = ServerConfig::default()
        .with_connection(rapidws::tokio::Config::default().with_send_queue_high_water(64 << 10));
    let (waiting, waiting_rx) = tokio::sync::oneshot::channel();
    // The server says when it got each message: the client sends the next only then, so
    // that every message is a read of its own.
    let (got, mut got_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let server = tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        let mut ws = accept(s, &config).await.unwrap();
        let chunk = bytes::Bytes::from(vec![7u8; 16 << 10]);
        saturate(&mut ws, &chunk).await;
        let polls = Arc::new(AtomicUsize::new(0));
        let (first, first_rx) = tokio::sync::oneshot::channel();
        let counted = polls.clone();
        let msg = Message::Binary(chunk);
        let (tx, stream) = split(ws);
        let mut stream = std::pin::pin!(stream);
        let sender = tokio::spawn(async move {
            Counted {
                fut: Box::pin(send(tx, msg)),
                polls: counted,
                first: Some(first),
            }
            .await
        });
        first_rx.await.unwrap();
        waiting.send(()).unwrap();
        let mut received = 0;
        while received < MESSAGES {
            match stream.next().await {
                Some(Ok(Message::Text(_))) => {
                    received += 1;
                    let _ = got.send(());
                }
                other => panic!("{other:?}"),
            }
        }
        sender.abort();
        assert_eq!(received, MESSAGES);
        polls.load(Ordering::Relaxed)
    });
    // A client that sends 500 messages, each once the one before it was received, and
    // never reads.
    let mut ws = connect(&format!("ws://{addr}/"), &ClientConfig::default())
        .await
        .unwrap();
    waiting_rx.await.unwrap();
    for i in 0..MESSAGES {
        ws.send(Message::text(format!("message {i}")))
            .await
            .unwrap();
        got_rx.recv().await.unwrap();
    }
    let polls = bounded(server).await.unwrap();
    drop(ws);
    polls
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_waiting_for_room_on_split_halves_is_not_woken_by_every_read() {
    // `into_split` halves: the `WriteHalf`'s own `send`, the `ReadHalf`'s `recv`.
    let polls = polls_of_a_waiting_send(
        |ws| {
            let (rd, wr) = ws.into_split();
            let recv = futures_util::stream::unfold(rd, |mut rd| async move {
                rd.recv().await.transpose().map(|m| (m, rd))
            });
            (wr, recv)
        },
        |mut wr, msg| async move {
            let _ = wr.send(msg).await;
            wr
        },
    )
    .await;
    assert!(polls < 20, "the waiting send was polled {polls} times");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_waiting_for_room_on_futures_split_halves_is_not_woken_by_every_read() {
    use futures_util::{SinkExt, StreamExt};
    // `futures`' `StreamExt::split` halves of the socket: the `Sink`'s `send`, the `Stream`.
    let polls = polls_of_a_waiting_send(StreamExt::split, |mut sink, msg| async move {
        let _ = sink.send(msg).await;
        sink
    })
    .await;
    assert!(polls < 20, "the waiting send was polled {polls} times");
}
