#![cfg(feature = "tokio")]
//! `recv_chunk` (on a `WebSocket` and on a `ReadHalf`): a message passed on chunk by chunk
//! as it arrives is never held whole, and every limit of a whole receive holds across its
//! chunks.
//!
//! - A streaming echo (the one of `examples/stream_echo.rs`: `ReadHalf::recv_chunk`, each
//!   chunk sent on at once through the `WriteHalf`) runs on a thread of its own and echoes
//!   an 8 MiB message, byte for byte, while the bytes that thread holds at once stay a
//!   small fraction of it (the tests' counting allocator, per thread).
//! - Against a raw peer that writes frames by hand: the size limit counts the chunks of one
//!   message (1009 past it), text is checked across chunks (a code point split between
//!   fragments passes, a bad byte in a later fragment is 1007), a ping between two
//!   fragments is answered and the chunks around it delivered, and the message deadline
//!   ends a message that never finishes (1008).
//! - Under the default whole delivery each message comes as one chunk.
//!
//! The tests against a raw peer run twice: receiving on a `WebSocket` (`websocket::`) and
//! on a `ReadHalf` (`read_half::`).
mod alloc_count;
mod bounded_support;

use std::future::Future;
use std::time::Duration;

use bounded_support::{FrameReader, client_handshake, connect, frame, listener, read_close};
use rapidws::ProtocolError;
use rapidws::tokio::{
    ClientConfig, Delivery, Error, MessageChunk, MessageKind, ReadHalf, ServerConfig, Timeout,
    WebSocket, WriteHalf, accept, connect as ws_connect,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Every wait in these tests is bounded by this.
const STEP: Duration = Duration::from_secs(20);

/// The streamed message: larger than the echo may hold.
const BIG: usize = 8 << 20;
/// The most bytes the echo's thread may hold at once while it streams [`BIG`]: an eighth
/// of it. It holds a receive buffer (reads grow to 256 KiB), the chunk being sent on and
/// what of it waits in the send queue, the runtime and the connection (about 290 KB when
/// this was written).
const ECHO_HOLDS_AT_MOST: usize = 1 << 20;

/// Byte `i` of a streamed message: a pattern that a shifted or dropped byte breaks.
fn byte(i: usize) -> u8 {
    (i.wrapping_mul(2_654_435_761) >> 13) as u8
}

/// The streaming echo, as `examples/stream_echo.rs` writes it.
async fn echo_chunks(
    rd: &mut ReadHalf<TcpStream>,
    wr: &mut WriteHalf<TcpStream>,
) -> Result<(), Error> {
    while let Some(mut chunk) = rd.recv_chunk().await? {
        assert!(chunk.first, "a message starts with its first chunk");
        let mut out = wr.begin_message(chunk.kind)?;
        while !chunk.last {
            out.send_chunk_bytes(chunk.data).await?;
            chunk = match rd.recv_chunk().await? {
                Some(next) => next,
                None => return Ok(()),
            };
            assert!(!chunk.first, "the chunks of one message follow each other");
        }
        out.finish_bytes(chunk.data).await?;
    }
    Ok(())
}

fn chunk_config() -> ServerConfig {
    let config = ServerConfig::default();
    let connection = config
        .connection
        .clone()
        .with_delivery(Delivery::Chunks)
        .with_max_message_size(2 * BIG);
    config.with_connection(connection)
}

#[test]
fn a_streamed_echo_never_holds_the_message() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    l.set_nonblocking(true).unwrap();
    // The echo on a thread and runtime of its own, its heap counted there.
    let server = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (r, peak) = alloc_count::peak_during(|| {
            rt.block_on(async move {
                let l = tokio::net::TcpListener::from_std(l).unwrap();
                let (s, _) = l.accept().await.unwrap();
                let ws = accept(s, &chunk_config()).await.unwrap();
                let (mut rd, mut wr) = ws.into_split();
                echo_chunks(&mut rd, &mut wr).await
            })
        });
        r.expect("the echo ends cleanly");
        peak
    });
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async move {
        let config = ClientConfig::default();
        let connection = config
            .connection
            .clone()
            .with_delivery(Delivery::Chunks)
            .with_max_message_size(2 * BIG);
        let ws = ws_connect(
            &format!("ws://{addr}/"),
            &config.with_connection(connection),
        )
        .await
        .unwrap();
        let (mut rd, mut wr) = ws.into_split();
        // The message is written in 64 KiB fragments, made as they go, while the echo is
        // read and checked as it comes: neither end holds it either.
        let send = tokio::spawn(async move {
            let mut out = wr.begin_message(MessageKind::Binary).unwrap();
            let mut piece = vec![0u8; 64 << 10];
            let mut at = 0;
            while at < BIG {
                let n = piece.len().min(BIG - at);
                for (j, b) in piece[..n].iter_mut().enumerate() {
                    *b = byte(at + j);
                }
                out.send_chunk(&piece[..n]).await.unwrap();
                at += n;
            }
            out.finish(&[]).await.unwrap();
            wr
        });
        let mut got = 0;
        let mut chunks = 0;
        loop {
            let c = tokio::time::timeout(STEP, rd.recv_chunk())
                .await
                .expect("the echo in time")
                .unwrap()
                .expect("a chunk");
            assert_eq!(c.kind, MessageKind::Binary);
            assert_eq!(c.first, got == 0);
            for (j, &b) in c.data.iter().enumerate() {
                assert_eq!(b, byte(got + j), "byte {}", got + j);
            }
            got += c.data.len();
            chunks += 1;
            if c.last {
                break;
            }
        }
        assert_eq!(got, BIG);
        assert!(chunks > 1, "the echo came in chunks");
        let mut wr = send.await.unwrap();
        wr.close(1000, "done").await.unwrap();
        while rd.recv_chunk().await.unwrap().is_some() {}
    });
    let peak = server.join().unwrap();
    eprintln!("the echo held at most {peak} bytes at once for a message of {BIG}");
    assert!(
        peak < ECHO_HOLDS_AT_MOST,
        "the echo held {peak} bytes at once, streaming {BIG}"
    );
}

/// What receives the chunks in the tests against a raw peer: a [`WebSocket`], or the
/// [`ReadHalf`] of one (its [`WriteHalf`] kept alive beside it). Each of those tests runs
/// once for each (see [`on_both!`]).
trait Chunks: Send + Sized + 'static {
    /// For the assertions' messages.
    const NAME: &str;
    fn of(ws: WebSocket<TcpStream>) -> Self;
    fn next(&mut self) -> impl Future<Output = Result<Option<MessageChunk>, Error>> + Send;
}

impl Chunks for WebSocket<TcpStream> {
    const NAME: &str = "WebSocket";
    fn of(ws: WebSocket<TcpStream>) -> Self {
        ws
    }
    fn next(&mut self) -> impl Future<Output = Result<Option<MessageChunk>, Error>> + Send {
        self.recv_chunk()
    }
}

impl Chunks for (ReadHalf<TcpStream>, WriteHalf<TcpStream>) {
    const NAME: &str = "ReadHalf";
    fn of(ws: WebSocket<TcpStream>) -> Self {
        ws.into_split()
    }
    fn next(&mut self) -> impl Future<Output = Result<Option<MessageChunk>, Error>> + Send {
        self.0.recv_chunk()
    }
}

/// Each test body, generic over its [`Chunks`], run as a test on a `WebSocket` (in `mod
/// websocket`) and on a `ReadHalf` (in `mod read_half`).
macro_rules! on_both {
    ($($test:ident),* $(,)?) => {
        mod websocket {
            $(
                #[tokio::test]
                async fn $test() {
                    super::$test::<rapidws::tokio::WebSocket<tokio::net::TcpStream>>().await;
                }
            )*
        }
        mod read_half {
            use rapidws::tokio::{ReadHalf, WriteHalf};
            use tokio::net::TcpStream;
            $(
                #[tokio::test]
                async fn $test() {
                    super::$test::<(ReadHalf<TcpStream>, WriteHalf<TcpStream>)>().await;
                }
            )*
        }
    };
}

on_both!(
    the_size_limit_counts_every_chunk_of_a_message,
    text_is_checked_across_chunks,
    a_ping_between_chunks_is_answered,
    a_message_that_never_ends_meets_the_deadline,
    whole_delivery_hands_each_message_over_as_one_chunk,
);

/// What the server of [`raw_pair`] got: its chunks, and how its receive ended.
type Got = (Vec<MessageChunk>, Result<(), Error>);

/// A server under `config` on a free port, receiving with an `R` until the end, its chunks
/// and end sent back; and a raw client connected to it, past the handshake (with what
/// came after the response).
async fn raw_pair<R: Chunks>(
    config: ServerConfig,
) -> (TcpStream, Vec<u8>, tokio::task::JoinHandle<Got>) {
    let (l, addr) = listener().await;
    let server = tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        let mut rx = R::of(accept(s, &config).await.unwrap());
        let mut got = Vec::new();
        let end = loop {
            match tokio::time::timeout(STEP, rx.next()).await.unwrap() {
                Ok(Some(c)) => got.push(c),
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        (got, end)
    });
    let mut s = connect(addr).await;
    let rest = client_handshake(&mut s, false).await;
    (s, rest, server)
}

/// Reads our close from `s` and checks its code, then what the server got.
async fn closed_with<R: Chunks>(
    s: &mut TcpStream,
    server: tokio::task::JoinHandle<Got>,
    code: u16,
) -> Got {
    let got = read_close(s, &[], STEP).await;
    assert_eq!(got, Some(code), "{}", R::NAME);
    server.await.unwrap()
}

/// [`closed_with`] for a connection that failed with `error`: the chunks handed over.
async fn failed_with<R: Chunks>(
    s: &mut TcpStream,
    server: tokio::task::JoinHandle<Got>,
    code: u16,
    error: ProtocolError,
) -> Vec<MessageChunk> {
    let (got, end) = closed_with::<R>(s, server, code).await;
    assert!(
        matches!(end, Err(Error::Protocol(e)) if e == error),
        "{}: {end:?}",
        R::NAME
    );
    got
}

/// Where the first message of `got` ends.
fn first_message_end(got: &[MessageChunk]) -> usize {
    got.iter()
        .position(|c| c.last)
        .expect("the first message ended")
}

fn chunks_with(limit: usize) -> ServerConfig {
    let config = ServerConfig::default();
    let connection = config
        .connection
        .clone()
        .with_delivery(Delivery::Chunks)
        .with_max_message_size(limit)
        .with_message_timeout(Some(Duration::from_millis(600)));
    config.with_connection(connection)
}

/// The data bytes of `chunks`, joined.
fn joined(chunks: &[MessageChunk]) -> Vec<u8> {
    chunks.iter().flat_map(|c| c.data.iter().copied()).collect()
}

async fn the_size_limit_counts_every_chunk_of_a_message<R: Chunks>() {
    let (mut s, rest, server) = raw_pair::<R>(chunks_with(100_000)).await;
    assert!(rest.is_empty());
    // A message of 40,000 + 40,000 bytes fits; the third fragment takes the next past
    // 100,000.
    let a = vec![7u8; 40_000];
    for opcode in [0x02, 0x80, 0x02, 0x00, 0x80] {
        s.write_all(&frame(opcode, a.len() as u64, &a, true))
            .await
            .unwrap();
    }
    let got = failed_with::<R>(&mut s, server, 1009, ProtocolError::MessageTooLarge).await;
    // The first message came whole, in order; of the second no more than the limit.
    let last = first_message_end(&got);
    assert_eq!(joined(&got[..=last]).len(), 80_000);
    assert!(got[0].first);
    assert!(joined(&got[last + 1..]).len() <= 100_000);
}

async fn text_is_checked_across_chunks<R: Chunks>() {
    let (mut s, _, server) = raw_pair::<R>(chunks_with(1 << 20)).await;
    // "é" (C3 A9) split between two fragments: valid.
    s.write_all(&frame(0x01, 3, b"ab\xc3", true)).await.unwrap();
    s.write_all(&frame(0x80, 3, b"\xa9cd", true)).await.unwrap();
    // Then a message whose second fragment holds a byte that is never UTF-8.
    s.write_all(&frame(0x01, 2, b"ok", true)).await.unwrap();
    s.write_all(&frame(0x80, 2, b"x\xff", true)).await.unwrap();
    let got = failed_with::<R>(&mut s, server, 1007, ProtocolError::InvalidUtf8).await;
    let last = first_message_end(&got);
    assert_eq!(joined(&got[..=last]), "abécd".as_bytes());
    assert!(got.iter().all(|c| c.kind == MessageKind::Text));
    // The bad fragment's byte was never handed over.
    assert!(!joined(&got[last + 1..]).contains(&0xff));
}

async fn a_ping_between_chunks_is_answered<R: Chunks>() {
    let (mut s, _, server) = raw_pair::<R>(chunks_with(1 << 20)).await;
    s.write_all(&frame(0x02, 5, b"hello", true)).await.unwrap();
    s.write_all(&frame(0x89, 4, b"ping", true)).await.unwrap();
    // The pong comes while the message is still open.
    let mut pong = Vec::new();
    while pong.len() < 6 {
        let mut b = [0u8; 64];
        let n = tokio::time::timeout(STEP, s.read(&mut b))
            .await
            .expect("a pong in time")
            .unwrap();
        assert!(n > 0);
        pong.extend_from_slice(&b[..n]);
    }
    assert_eq!(&pong[..6], b"\x8a\x04ping", "{}", R::NAME);
    s.write_all(&frame(0x80, 6, b" world", true)).await.unwrap();
    s.write_all(&frame(0x88, 2, &1000u16.to_be_bytes(), true))
        .await
        .unwrap();
    let (got, end) = closed_with::<R>(&mut s, server, 1000).await;
    end.unwrap();
    assert_eq!(joined(&got), b"hello world");
    assert!(got[0].first && got.last().unwrap().last);
}

async fn a_message_that_never_ends_meets_the_deadline<R: Chunks>() {
    let (mut s, _, server) = raw_pair::<R>(chunks_with(1 << 20)).await;
    s.write_all(&frame(0x02, 5, b"start", true)).await.unwrap();
    // Pings keep the connection busy; the message never ends.
    let trickle = async {
        loop {
            tokio::time::sleep(Duration::from_millis(150)).await;
            if s.write_all(&frame(0x89, 0, b"", true)).await.is_err() {
                break;
            }
        }
    };
    let (got, end) = tokio::select! {
        r = server => r.unwrap(),
        _ = trickle => panic!("the peer's writes failed first"),
    };
    assert!(
        matches!(end, Err(Error::Timeout(Timeout::Message))),
        "{}: {end:?}",
        R::NAME
    );
    assert_eq!(joined(&got), b"start");
    let mut r = FrameReader::default();
    let mut b = vec![0u8; 4096];
    let code = loop {
        let n = tokio::time::timeout(STEP, s.read(&mut b))
            .await
            .expect("our close in time")
            .unwrap();
        assert!(n > 0, "ended without a close");
        if let Some(code) = r.feed(&b[..n]) {
            break code;
        }
    };
    assert_eq!(code, 1008);
}

async fn whole_delivery_hands_each_message_over_as_one_chunk<R: Chunks>() {
    let (mut s, _, server) = raw_pair::<R>(ServerConfig::default()).await;
    s.write_all(&frame(0x81, 3, b"one", true)).await.unwrap();
    s.write_all(&frame(0x02, 2, b"tw", true)).await.unwrap();
    s.write_all(&frame(0x80, 1, b"o", true)).await.unwrap();
    s.write_all(&frame(0x88, 2, &1000u16.to_be_bytes(), true))
        .await
        .unwrap();
    let (got, end) = closed_with::<R>(&mut s, server, 1000).await;
    end.unwrap();
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|c| c.first && c.last));
    assert_eq!(
        (got[0].kind, &got[0].data[..]),
        (MessageKind::Text, &b"one"[..])
    );
    assert_eq!(
        (got[1].kind, &got[1].data[..]),
        (MessageKind::Binary, &b"two"[..])
    );
}

/// A chunk is one read of at most the read size (16 KiB here), even when the receive
/// buffer has more room: the 64 KiB buffer that a connection reading 64 KiB at a time gave
/// to the thread's stock while it waited, and that the chunk-delivery connection's next
/// read on the same thread takes. Reading into all of that room made a 64 KiB chunk.
#[tokio::test(flavor = "current_thread")]
async fn a_chunk_is_one_read_of_the_read_size_even_from_a_larger_stocked_buffer() {
    use rapidws::Role;
    use rapidws::tokio::Config;
    // Both wait once for bytes that do not come: the read that would block gives their
    // buffers to the stock, the chunked one's first and the wide one's last, so that
    // the next read of the chunked one takes the wide one's.
    async fn wait_once(ws: &mut WebSocket<tokio::io::DuplexStream>) {
        let _ = tokio::time::timeout(Duration::from_millis(10), ws.recv()).await;
    }
    let (srv, mut chunked_peer) = tokio::io::duplex(1 << 20);
    let chunked_config = Config::default().with_delivery(Delivery::Chunks);
    let mut chunked = WebSocket::from_raw(srv, Role::Server, &chunked_config, &[]);
    chunked_peer
        .write_all(&frame(0x82, 3, b"one", true))
        .await
        .unwrap();
    let first = chunked.recv_chunk().await.unwrap().unwrap();
    assert_eq!(&first.data[..], b"one");
    drop(first);
    wait_once(&mut chunked).await;

    let (srv, mut wide_peer) = tokio::io::duplex(1 << 20);
    let mut wide_config = Config::default();
    wide_config.read_buffer_size = 64 * 1024;
    let mut wide = WebSocket::from_raw(srv, Role::Server, &wide_config, &[]);
    let payload = vec![9u8; 100 * 1024];
    wide_peer
        .write_all(&frame(0x82, payload.len() as u64, &payload, true))
        .await
        .unwrap();
    let m = tokio::time::timeout(STEP, wide.recv()).await.unwrap();
    assert_eq!(m.unwrap().unwrap().as_bytes().len(), payload.len());
    wait_once(&mut wide).await;

    let big = vec![7u8; 200 * 1024];
    chunked_peer
        .write_all(&frame(0x82, big.len() as u64, &big, true))
        .await
        .unwrap();
    let mut got = 0;
    let mut largest = 0;
    while got < big.len() {
        let chunk = tokio::time::timeout(STEP, chunked.recv_chunk())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        got += chunk.data.len();
        largest = largest.max(chunk.data.len());
    }
    assert_eq!(got, big.len());
    assert!(largest <= 16 * 1024, "the largest chunk: {largest} bytes");
}
