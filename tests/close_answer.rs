//! The peer's close is answered on the wire before `recv` hands it over (issue 42): a
//! program that stops at the `Close` and drops the socket, as axum's chat example does
//! (`while let Some(Ok(Message::Text(t)))`), still sends the close answer, on every
//! layer. A raw client (the handshake and frames written by hand) sends a text message
//! and a close with code 4321, then reads what comes back: the answer, a close frame
//! with the same code, must arrive before the end of the stream.
#![cfg(all(feature = "tokio", feature = "blocking"))]

mod bounded_support;

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use bounded_support::{client_handshake, frame, read_close, text_then_close};
use futures_util::StreamExt;
use rapidws::handler::{Handler, Socket, run};
use rapidws::tokio::{Message, MessageRef, ReadHalf, ServerConfig, WebSocket, WriteHalf, accept};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

/// The code the raw client closes with (the answer echoes it).
const CODE: u16 = 4321;

/// A bound on the raw client's wait for the answer: a hang guard only (the answer comes
/// at once or, before the fix, never: the stream ends).
const LIMIT: Duration = Duration::from_secs(20);

/// Runs `serve` on the one connection a raw client makes: the client sends "hi" and a
/// close with [`CODE`] in one write, and returns the close code it read back (`None`: the
/// stream ended without a close frame).
async fn close_answer<F, Fut>(serve: F) -> Option<u16>
where
    F: FnOnce(WebSocket<TcpStream>) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let ws = accept(stream, &ServerConfig::default()).await.unwrap();
        serve(ws).await;
    });
    let code = raw_client(addr).await;
    server.await.unwrap();
    code
}

/// The raw client of [`close_answer`].
async fn raw_client(addr: SocketAddr) -> Option<u16> {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let leftover = client_handshake(&mut s, false).await;
    s.write_all(&text_then_close("hi", CODE, "bye"))
        .await
        .unwrap();
    read_close(&mut s, &leftover, LIMIT).await
}

#[tokio::test]
async fn recv_answers_the_close_before_handing_it_over() {
    let code = close_answer(|mut ws| async move {
        while let Ok(Some(Message::Text(_))) = ws.recv().await {}
        // Dropped here, right after the `Close`.
    })
    .await;
    assert_eq!(code, Some(CODE));
}

#[tokio::test]
async fn the_stream_answers_the_close_before_handing_it_over() {
    let code =
        close_answer(
            |mut ws| async move { while let Some(Ok(Message::Text(_))) = ws.next().await {} },
        )
        .await;
    assert_eq!(code, Some(CODE));
}

#[tokio::test]
async fn recv_ref_answers_the_close_before_handing_it_over() {
    let code = close_answer(|mut ws| async move {
        while let Ok(Some(MessageRef::Text(_))) = ws.recv_ref().await {}
    })
    .await;
    assert_eq!(code, Some(CODE));
}

#[tokio::test]
async fn recv_batch_answers_the_close_before_handing_it_over() {
    let code = close_answer(|mut ws| async move {
        'outer: while let Ok(Some(batch)) = ws.recv_batch().await {
            for msg in batch {
                if !matches!(msg, MessageRef::Text(_)) {
                    break 'outer;
                }
            }
        }
    })
    .await;
    assert_eq!(code, Some(CODE));
}

#[tokio::test]
async fn the_reading_half_answers_the_close_before_handing_it_over() {
    let code = close_answer(|ws| async move {
        let (mut rd, wr) = ws.into_split();
        while let Ok(Some(Message::Text(_))) = rd.recv().await {}
        // The writing half is dropped first: the reading half's receive wrote the answer.
        drop(wr);
    })
    .await;
    assert_eq!(code, Some(CODE));
}

#[tokio::test]
async fn futures_split_halves_answer_the_close_before_handing_it_over() {
    let code = close_answer(|ws| async move {
        let (sink, mut stream) = ws.split();
        while let Some(Ok(Message::Text(_))) = stream.next().await {}
        drop(sink);
    })
    .await;
    assert_eq!(code, Some(CODE));
}

/// A handler that counts what it saw.
struct Counting;

impl Handler for Counting {
    fn on_message(&mut self, _: &mut Socket<'_>, _: Message) {}
}

struct CountingBorrowed;

impl Handler for CountingBorrowed {
    const BORROWED: bool = true;
    fn on_message_ref(&mut self, _: &mut Socket<'_>, _: MessageRef<'_>) {}
}

#[tokio::test]
async fn the_handler_api_answers_the_close() {
    let code = close_answer(|ws| async move {
        let _ = run(ws, &mut Counting).await;
    })
    .await;
    assert_eq!(code, Some(CODE));
    let code = close_answer(|ws| async move {
        let _ = run(ws, &mut CountingBorrowed).await;
    })
    .await;
    assert_eq!(code, Some(CODE));
}

#[test]
fn the_blocking_read_answers_the_close_before_handing_it_over() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut ws = rapidws::blocking::accept(stream, &ServerConfig::default()).unwrap();
        while let Ok(Some(Message::Text(_))) = ws.read() {}
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let code = rt.block_on(raw_client(addr));
    server.join().unwrap();
    assert_eq!(code, Some(CODE));
}

/// How the server of [`dropped_with_the_answer_queued`] holds its connection: whole, or
/// split into halves.
enum Held {
    Whole(Box<WebSocket<TcpStream>>),
    Halves(ReadHalf<TcpStream>, WriteHalf<TcpStream>),
}

impl Held {
    fn try_send(&mut self, msg: Message) -> bool {
        match self {
            Held::Whole(ws) => ws.try_send(msg).is_ok(),
            Held::Halves(_, wr) => wr.try_send(msg).is_ok(),
        }
    }

    /// Whether a flush would wait (polled once: the socket is full).
    async fn flush_would_wait(&mut self) -> bool {
        match self {
            Held::Whole(ws) => polled_once_pending(ws.flush()).await,
            Held::Halves(_, wr) => polled_once_pending(wr.flush()).await,
        }
    }

    async fn recv(&mut self) -> Result<Option<Message>, rapidws::tokio::Error> {
        match self {
            Held::Whole(ws) => ws.recv().await,
            Held::Halves(rd, _) => rd.recv().await,
        }
    }

    fn queued_bytes(&self) -> usize {
        match self {
            Held::Whole(ws) => ws.queued_bytes(),
            Held::Halves(_, wr) => wr.queued_bytes(),
        }
    }
}

/// Whether `f`, polled once, is pending (it is dropped then).
async fn polled_once_pending<F: Future>(f: F) -> bool {
    let mut f = std::pin::pin!(f);
    std::future::poll_fn(|cx| std::task::Poll::Ready(f.as_mut().poll(cx).is_pending())).await
}

/// The payload of the data messages the servers of the drop tests fill the socket with.
const PAYLOAD: usize = 16 << 10;
/// A frame of [`PAYLOAD`] bytes from a server: a 4-byte header.
const FRAME: u64 = PAYLOAD as u64 + 4;
/// The payload of the blocking server's last data message (a 10-byte header).
const LARGE: usize = 1 << 20;

/// The raw client's end of a drop test, once the server's `recv` or `read` handed the
/// close over: reads the `written` bytes the server's socket took (the bytes after the
/// handshake head, `leftover`, first), so that the socket is empty, then runs `drop`
/// (which lets the server drop its connection and waits for it) while it reads on.
/// Returns the close code read (`None`: the stream ended without a close frame); a close
/// frame must come behind `data` bytes of data payload.
async fn read_across_the_drop(
    s: &mut TcpStream,
    leftover: &[u8],
    written: u64,
    data: u64,
    drop: impl Future<Output = ()>,
) -> Option<u16> {
    let mut frames = bounded_support::FrameReader::default();
    let mut code = frames.feed(leftover);
    let mut read = leftover.len() as u64;
    let mut buf = vec![0u8; 64 << 10];
    while read < written && code.is_none() {
        let want = buf.len().min((written - read) as usize);
        let n = tokio::io::AsyncReadExt::read(s, &mut buf[..want])
            .await
            .unwrap();
        assert!(n > 0, "the stream ended after {read} of {written} bytes");
        read += n as u64;
        code = frames.feed(&buf[..n]);
    }
    assert_eq!(code, None, "the answer left before the drop");
    // The runtime's reactor learns that the server's socket has room on its next turn,
    // which a wait on the timer gives it (not a bound on anything: the room is there).
    tokio::time::sleep(Duration::from_millis(50)).await;
    let read_on = async {
        while code.is_none() {
            let n = tokio::time::timeout(LIMIT, tokio::io::AsyncReadExt::read(s, &mut buf))
                .await
                .expect("a hang")
                .unwrap();
            if n == 0 {
                break;
            }
            code = frames.feed(&buf[..n]);
        }
    };
    tokio::join!(read_on, drop);
    if code.is_some() {
        // The data queued before the answer went out first.
        assert_eq!(frames.data as u64, data);
    }
    code
}

/// A socket dropped with the close answer still queued (the peer had stopped reading, so
/// the socket took none of it when the close was handed over) tries once more in its
/// `Drop`, without waiting: a peer that has read what was written by then gets the
/// answer, behind the data that was queued before it. The server holds the connection
/// whole, or as halves when `split`; returns the close code the raw client read
/// (`None`: the stream ended without a close frame).
async fn dropped_with_the_answer_queued(split: bool) -> Option<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (saturated, saturated_rx) = tokio::sync::oneshot::channel::<()>();
    let (written, written_rx) = tokio::sync::oneshot::channel::<(u64, u64)>();
    let (may_drop, may_drop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let mut config = ServerConfig::default();
        config.connection.send_queue_high_water = 64 << 10;
        let ws = accept(stream, &config).await.unwrap();
        let mut held = if split {
            let (rd, wr) = ws.into_split();
            Held::Halves(rd, wr)
        } else {
            Held::Whole(Box::new(ws))
        };
        // Fill the socket, then the queue: the peer does not read yet.
        let chunk = bytes::Bytes::from(vec![7u8; PAYLOAD]);
        let mut sent = 0u64;
        loop {
            while held.try_send(Message::Binary(chunk.clone())) {
                sent += 1;
            }
            if held.flush_would_wait().await {
                break;
            }
        }
        saturated.send(()).unwrap();
        loop {
            match held.recv().await {
                Ok(Some(Message::Close(_))) | Ok(None) | Err(_) => break,
                Ok(Some(_)) => {}
            }
        }
        let queued = held.queued_bytes() as u64;
        // Our data frames and the 4-byte answer, less what is still queued.
        written.send((sent, sent * FRAME + 4 - queued)).unwrap();
        may_drop_rx.await.unwrap();
        match held {
            Held::Whole(ws) => drop(ws),
            Held::Halves(rd, wr) => {
                drop(rd);
                drop(wr);
            }
        }
    });
    let mut s = TcpStream::connect(addr).await.unwrap();
    let leftover = client_handshake(&mut s, false).await;
    saturated_rx.await.unwrap();
    let mut close = CODE.to_be_bytes().to_vec();
    close.extend_from_slice(b"bye");
    s.write_all(&frame(0x88, close.len() as u64, &close, true))
        .await
        .unwrap();
    let (sent, written) = written_rx.await.unwrap();
    read_across_the_drop(
        &mut s,
        &leftover,
        written,
        sent * PAYLOAD as u64,
        async move {
            may_drop.send(()).unwrap();
            server.await.unwrap();
        },
    )
    .await
}

#[tokio::test]
async fn split_halves_dropped_with_the_answer_queued_write_it_once_more() {
    assert_eq!(dropped_with_the_answer_queued(true).await, Some(CODE));
}

#[tokio::test]
async fn a_whole_socket_dropped_with_the_answer_queued_writes_it_once_more() {
    assert_eq!(dropped_with_the_answer_queued(false).await, Some(CODE));
}

/// The blocking layer's `read` writes the close answer as far as the stream's own write
/// timeout lets it; a socket dropped with the answer still queued then writes the queue
/// once more, waiting at most that timeout again. The raw client sends a text and the
/// close in one write; the server reads the text (the close is buffered behind it),
/// fills the socket until a send times out, reads the close, and drops the connection
/// once the client has read what its socket took (the client reads on meanwhile: the
/// drop's write may wait for room as the stream's write timeout lets it).
#[tokio::test]
async fn a_blocking_socket_dropped_with_the_answer_queued_writes_it_once_more() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (written, written_rx) = tokio::sync::oneshot::channel::<(u64, u64)>();
    let (may_drop, may_drop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        // The stream's own write timeout, shorter than the send timeout (kept as it is).
        stream
            .set_write_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let mut ws = rapidws::blocking::accept(stream, &ServerConfig::default()).unwrap();
        assert!(matches!(ws.read(), Ok(Some(Message::Text(_)))));
        let chunk = vec![7u8; PAYLOAD];
        let mut sent = 0u64;
        loop {
            sent += 1;
            match ws.send_binary(&chunk) {
                Ok(()) => {}
                Err(e) if e.is_would_block() => break,
                Err(e) => panic!("send: {e}"),
            }
        }
        // One large message more, so that the answer still waits behind data once the
        // read wrote what it could (the kernel's send buffer grows meanwhile).
        ws.send_binary(&vec![7u8; LARGE]).unwrap_err();
        assert!(matches!(ws.read(), Ok(Some(Message::Close(_)))));
        let queued = ws.connection().pending_output_len() as u64;
        assert!(queued > 0, "the socket took the answer");
        let total = sent * FRAME + LARGE as u64 + 10 + 4;
        let data = sent * PAYLOAD as u64 + LARGE as u64;
        written.send((data, total - queued)).unwrap();
        may_drop_rx.blocking_recv().unwrap();
        drop(ws);
    });
    let mut s = TcpStream::connect(addr).await.unwrap();
    let leftover = client_handshake(&mut s, false).await;
    s.write_all(&text_then_close("hi", CODE, "bye"))
        .await
        .unwrap();
    let (data, written) = written_rx.await.unwrap();
    let code = read_across_the_drop(&mut s, &leftover, written, data, async move {
        may_drop.send(()).unwrap();
        tokio::task::spawn_blocking(move || server.join().unwrap())
            .await
            .unwrap();
    })
    .await;
    assert_eq!(code, Some(CODE));
}
