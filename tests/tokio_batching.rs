//! Write batching: answers queued with `feed` between receives leave in one vectored
//! write, and the unsplit connection runs over any `AsyncRead + AsyncWrite` (here an
//! in-memory duplex pipe wrapped to count writes).
#![cfg(feature = "tokio")]

mod tokio_support;

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use rapidws::Role;
use rapidws::tokio::{Config, Message, WebSocket};
use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf};
use tokio_support::bounded;

/// An in-memory pipe end that counts the write calls that reached it. It takes at most
/// `limit` bytes per write, and with `refuse_every_other` answers every other write with
/// `Pending` (waking at once), as a congested socket does; with a `gate` that is shut, it
/// takes the first write only and answers `Pending` after that until the gate opens.
struct Pipe {
    inner: DuplexStream,
    writes: Arc<AtomicUsize>,
    limit: usize,
    refuse_every_other: bool,
    gate: Option<Arc<AtomicBool>>,
}

impl Pipe {
    /// Takes every byte offered, as a socket with room does.
    fn counted(inner: DuplexStream, writes: Arc<AtomicUsize>) -> Self {
        Pipe {
            inner,
            writes,
            limit: usize::MAX,
            refuse_every_other: false,
            gate: None,
        }
    }
}

impl AsyncRead for Pipe {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Pipe {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[io::IoSlice::new(buf)])
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let calls = self.writes.fetch_add(1, Ordering::Relaxed) + 1;
        let shut = |g: &Arc<AtomicBool>| !g.load(Ordering::Relaxed);
        if (self.refuse_every_other && calls.is_multiple_of(2))
            || (calls > 1 && self.gate.as_ref().is_some_and(shut))
        {
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        // One write of the inner pipe, as one `writev` is one operation of a socket
        // (a write per slice would spend the task's budget of tokio operations).
        let mut gathered = Vec::new();
        for b in bufs {
            let take = b.len().min(self.limit - gathered.len());
            gathered.extend_from_slice(&b[..take]);
        }
        Pin::new(&mut self.inner).poll_write(cx, &gathered)
    }
    fn is_write_vectored(&self) -> bool {
        true
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A client and a server over an in-memory pipe, with the server's writes counted.
fn counted_pair() -> (WebSocket<DuplexStream>, WebSocket<Pipe>, Arc<AtomicUsize>) {
    counted_pair_with(&Config::default())
}

/// [`counted_pair`] with the server's `config`.
fn counted_pair_with(
    config: &Config,
) -> (WebSocket<DuplexStream>, WebSocket<Pipe>, Arc<AtomicUsize>) {
    let (a, b) = tokio::io::duplex(1 << 20);
    let writes = Arc::new(AtomicUsize::new(0));
    let client = WebSocket::from_raw(a, Role::Client, &Config::default(), &[]);
    let server = WebSocket::from_raw(Pipe::counted(b, writes.clone()), Role::Server, config, &[]);
    (client, server, writes)
}

#[tokio::test]
async fn answers_fed_between_receives_share_one_write() {
    let (mut client, mut server, writes) = counted_pair();

    // A burst of 20 messages arrives at once.
    for i in 0..20 {
        client.feed(Message::text(format!("m{i}"))).await.unwrap();
    }
    bounded(client.flush()).await.unwrap();
    for _ in 0..20 {
        let m = bounded(server.recv()).await.unwrap().unwrap();
        server.feed(m).await.unwrap();
    }
    assert_eq!(
        writes.load(Ordering::Relaxed),
        0,
        "nothing is written while messages are ready"
    );
    // The next receive finds nothing ready: the answers leave before it waits.
    let waited = tokio::time::timeout(Duration::from_millis(100), server.recv()).await;
    assert!(waited.is_err());
    assert_eq!(
        writes.load(Ordering::Relaxed),
        1,
        "all 20 answers in one vectored write"
    );
    for i in 0..20 {
        assert_eq!(
            bounded(client.recv()).await.unwrap().unwrap(),
            Message::text(format!("m{i}"))
        );
    }
}

#[tokio::test]
async fn a_burst_of_large_answers_leaves_in_one_write() {
    // 1 KiB payloads are not copied into the queue: each answer is a header and a
    // payload slice, so 64 of them take 128 slices of one vectored write. Reads of up
    // to 128 KiB bring the burst in one read.
    let config = Config::default().with_read_buffer_size(128 << 10);
    let (mut client, mut server, writes) = counted_pair_with(&config);
    for i in 0..65u8 {
        client.feed(Message::binary(vec![i; 1024])).await.unwrap();
    }
    bounded(client.flush()).await.unwrap();
    // A connection that holds no receive buffer reads 2 KiB into the stack first: the
    // first message. Its answer leaves before the read that brings the other 64.
    let m = bounded(server.recv()).await.unwrap().unwrap();
    server.feed(m).await.unwrap();
    for _ in 0..64 {
        let m = bounded(server.recv()).await.unwrap().unwrap();
        server.feed(m).await.unwrap();
    }
    assert_eq!(writes.load(Ordering::Relaxed), 1, "the first answer");
    let waited = tokio::time::timeout(Duration::from_millis(100), server.recv()).await;
    assert!(waited.is_err());
    assert_eq!(writes.load(Ordering::Relaxed), 2, "64 answers in one write");
    for i in 0..65u8 {
        assert_eq!(
            bounded(client.recv()).await.unwrap().unwrap(),
            Message::binary(vec![i; 1024])
        );
    }
}

#[tokio::test]
async fn send_writes_at_once() {
    let (mut client, mut server, writes) = counted_pair();
    bounded(server.send(Message::binary(vec![1u8; 10])))
        .await
        .unwrap();
    assert_eq!(writes.load(Ordering::Relaxed), 1);
    assert_eq!(
        bounded(client.recv()).await.unwrap().unwrap(),
        Message::binary(vec![1u8; 10])
    );
}

/// A lone frame is written straight from the connection; what a partial or refused write
/// leaves must go out through the queue, whole and in order, with `send` and with `feed`.
#[tokio::test]
async fn messages_arrive_whole_through_partial_and_refused_writes() {
    let sizes = [0usize, 1, 125, 126, 513, 4096, 70_000];
    for limit in [1, 7, 600, 1 << 20] {
        let (a, b) = tokio::io::duplex(16 * 1024);
        let trickle = Pipe {
            limit,
            refuse_every_other: true,
            ..Pipe::counted(b, Arc::new(AtomicUsize::new(0)))
        };
        let mut server = WebSocket::from_raw(trickle, Role::Server, &Config::default(), &[]);
        let mut client = WebSocket::from_raw(a, Role::Client, &Config::default(), &[]);
        // A byte a write, every other write refused: 70,000 bytes would be 140,000 polls
        // per message, 10-15 s of a debug build on its own and past the step's bound on a
        // starved machine. The other limits take it; a byte a write takes the rest.
        let sizes: Vec<usize> = sizes
            .iter()
            .copied()
            .filter(|&n| limit > 1 || n <= 4096)
            .collect();
        let expected: Vec<Vec<u8>> = sizes
            .iter()
            .chain(sizes.iter())
            .enumerate()
            .map(|(i, &n)| (0..n).map(|j| (i * 31 + j) as u8).collect())
            .collect();
        let to_send = expected.clone();
        let sender = tokio::spawn(async move {
            let (one_by_one, fed) = to_send.split_at(sizes.len());
            for m in one_by_one {
                server.send(Message::binary(m.clone())).await.unwrap();
            }
            for m in fed {
                server.feed(Message::binary(m.clone())).await.unwrap();
            }
            server.flush().await.unwrap();
            server
        });
        for (i, want) in expected.iter().enumerate() {
            match bounded(client.recv()).await {
                Ok(Some(Message::Binary(got))) => {
                    assert_eq!(&got[..], &want[..], "limit {limit}, message {i}")
                }
                other => panic!("limit {limit}, message {i}: {other:?}"),
            }
        }
        let server = bounded(sender).await.unwrap();
        assert_eq!(server.queued_bytes(), 0);
    }
}

/// A frame the socket took only part of is finished before a pong is written, even when
/// the send was dropped after its first poll and the ping arrived meanwhile (RFC 6455
/// 5.4: control frames go between frames, never inside one).
#[tokio::test]
async fn a_partly_written_frame_finishes_before_a_pong() {
    let (a, b) = tokio::io::duplex(256 * 1024);
    let gate = Arc::new(AtomicBool::new(false));
    let trickle = Pipe {
        limit: 7,
        gate: Some(gate.clone()),
        ..Pipe::counted(b, Arc::new(AtomicUsize::new(0)))
    };
    let mut server = WebSocket::from_raw(trickle, Role::Server, &Config::default(), &[]);
    let mut client = WebSocket::from_raw(a, Role::Client, &Config::default(), &[]);
    let big: Vec<u8> = (0..70_000).map(|i| (i % 251) as u8).collect();
    {
        let mut send = std::pin::pin!(server.send(Message::binary(big.clone())));
        std::future::poll_fn(|cx| {
            assert!(send.as_mut().poll(cx).is_pending(), "7 bytes, then shut");
            Poll::Ready(())
        })
        .await;
    }
    assert!(server.queued_bytes() > 0 && server.queued_bytes() < big.len() + 4);
    bounded(client.send(Message::Ping(bytes::Bytes::from_static(b"hi"))))
        .await
        .unwrap();
    let server = tokio::spawn(async move {
        let got = server.recv().await.unwrap().unwrap();
        assert_eq!(got, Message::Ping(bytes::Bytes::from_static(b"hi")));
        // The pong waits behind the frame's rest; the socket takes them now.
        gate.store(true, Ordering::Relaxed);
        server.flush().await.unwrap();
        server
    });
    assert_eq!(
        bounded(client.recv()).await.unwrap().unwrap(),
        Message::binary(big)
    );
    assert_eq!(
        bounded(client.recv()).await.unwrap().unwrap(),
        Message::Pong(bytes::Bytes::from_static(b"hi"))
    );
    let server = bounded(server).await.unwrap();
    assert_eq!(server.queued_bytes(), 0);
}

/// The handler API's echo.
struct Echo;

impl rapidws::handler::Handler for Echo {
    fn on_message(&mut self, socket: &mut rapidws::handler::Socket, msg: Message) {
        socket.send(msg);
    }
}

/// The handler API writes the replies to a burst that arrived in one read in one write,
/// and a lone reply at once (straight from the message, when nothing more is buffered),
/// one write per message.
#[tokio::test]
async fn handler_replies_to_a_burst_share_one_write_and_a_lone_reply_leaves_at_once() {
    let (mut client, server, writes) = counted_pair();
    let task = tokio::spawn(async move { rapidws::handler::run(server, &mut Echo).await });

    for i in 0..20 {
        client.feed(Message::text(format!("b{i}"))).await.unwrap();
    }
    bounded(client.flush()).await.unwrap();
    for i in 0..20 {
        assert_eq!(
            bounded(client.recv()).await.unwrap().unwrap(),
            Message::text(format!("b{i}"))
        );
    }
    let burst = writes.load(Ordering::Relaxed);
    assert_eq!(burst, 1, "20 replies in one write");

    for i in 0..5 {
        bounded(client.send(Message::binary(vec![i as u8; 700])))
            .await
            .unwrap();
        assert_eq!(
            bounded(client.recv()).await.unwrap().unwrap(),
            Message::binary(vec![i as u8; 700])
        );
    }
    assert_eq!(
        writes.load(Ordering::Relaxed),
        burst + 5,
        "one write per lone reply"
    );
    bounded(client.close(rapidws::CloseCode::NORMAL, ""))
        .await
        .unwrap();
    while bounded(client.recv()).await.unwrap().is_some() {}
    bounded(task).await.unwrap().unwrap();
}
