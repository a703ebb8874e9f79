#![cfg(all(feature = "tokio", feature = "blocking"))]
//! What the IO layers do when the transport misbehaves as real ones do. Each test here went
//! wrong once: the simulated transport (tests/sim_support, run over fixed seeds by
//! tests/simulated_transport.rs and by a fuzz target) found it, and the test is the
//! smallest form of that run, over an in-memory stream (`tokio::io::duplex`, or a
//! scripted blocking stream).

use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use rapidws::Role;
use rapidws::connection::{Config, Connection, OwnedEvent};
use rapidws::handshake::Negotiated;
use rapidws::tokio::{Error, Message, MessageKind, Timeout, from_handshake};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The peer's side, through the sans-IO core.
fn peer(role: Role) -> Connection {
    Connection::new(role, Config::default(), Instant::now())
}

fn wire(conn: &mut Connection) -> Vec<u8> {
    let mut out = Vec::new();
    conn.write_pending(&mut out);
    out
}

/// A blocking stream that reads a fixed script and whose first `refuse` writes time out
/// (`WouldBlock`, as a socket with a write timeout does); reads past the script time out.
struct Scripted {
    input: io::Cursor<Vec<u8>>,
    refuse: usize,
    written: Vec<u8>,
}

impl Read for Scripted {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match Read::read(&mut self.input, buf)? {
            0 => Err(io::ErrorKind::WouldBlock.into()),
            n => Ok(n),
        }
    }
}

impl Write for Scripted {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.refuse > 0 {
            self.refuse -= 1;
            return Err(io::ErrorKind::WouldBlock.into());
        }
        self.written.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl rapidws::blocking::Transport for Scripted {}

/// A write timeout while `read` writes the pong to a ping loses nothing: the ping is
/// returned, the pong stays queued and goes out with the next call, and the connection
/// goes on. It used to count as the transport's failure: the next `read` reported the
/// timeout (which says "call again") and the one after it a clean end, with the rest of
/// what the peer sent dropped.
#[test]
fn a_write_timeout_while_a_read_answers_a_ping_loses_nothing() {
    let mut server = peer(Role::Server);
    server.ping(b"one").unwrap();
    server.ping(b"two").unwrap();
    server.send_text("after the pings").unwrap();
    let stream = Scripted {
        input: io::Cursor::new(wire(&mut server)),
        refuse: 1,
        written: Vec::new(),
    };
    let mut ws = rapidws::blocking::from_handshake(
        stream,
        Role::Client,
        &Config::default(),
        Negotiated::new(),
        &[],
    );
    assert_eq!(ws.read().unwrap(), Some(Message::Ping("one".into())));
    assert_eq!(ws.read().unwrap(), Some(Message::Ping("two".into())));
    assert_eq!(ws.read().unwrap(), Some(Message::text("after the pings")));
    let timeout = ws.read().unwrap_err();
    assert!(timeout.is_would_block(), "{timeout:?}");
    // Both pongs reached the peer.
    let written = std::mem::take(&mut ws.get_mut().written);
    server.handle_bytes(Instant::now(), &written);
    let mut pongs = Vec::new();
    while let Some(ev) = server.poll_event_owned() {
        pongs.push(ev.unwrap());
    }
    assert_eq!(
        pongs,
        [
            OwnedEvent::Pong("one".into()),
            OwnedEvent::Pong("two".into())
        ]
    );
}

/// With `futures`' `StreamExt::split`, a reading task whose `next()` went pending before
/// the writing task first polled the sink is woken by a message the writer's wait read
/// for it. The socket keeps one waker per direction: the writer's wait, reading aside,
/// registered the waker pair's waker in place of the reader's own, and the pair did not
/// know the reader yet. The reader slept for ever.
#[tokio::test]
async fn a_futures_split_reader_that_waited_first_is_woken_by_what_the_writer_read() {
    let (ours, mut theirs) = tokio::io::duplex(64);
    let ws = from_handshake(
        ours,
        Role::Client,
        &Config::default(),
        Negotiated::new(),
        &[],
    );
    let (mut sink, mut stream) = ws.split();
    let reader = tokio::spawn(async move { stream.next().await });
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    // More than the pipe holds: the send waits, and reads aside while it does.
    let writer = tokio::spawn(async move { sink.send(Message::binary(vec![7u8; 4096])).await });
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    let mut server = peer(Role::Server);
    server.send_text("for the reader").unwrap();
    theirs.write_all(&wire(&mut server)).await.unwrap();
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    // Then the peer takes the message, and the send ends.
    let mut frame = vec![0u8; 8 + 4096];
    theirs.read_exact(&mut frame).await.unwrap();
    writer.await.unwrap().unwrap();
    let got = tokio::time::timeout(Duration::from_secs(5), reader)
        .await
        .expect("the reading task was never woken")
        .unwrap();
    assert_eq!(got.unwrap().unwrap(), Message::text("for the reader"));
}

/// A send whose write fails (the peer is gone) under a message being sent in fragments:
/// the writer, dropped by `?`, abandons the message, but the transport's failure is the
/// connection's end, not `Abandoned`, and what arrived before it is still delivered. The
/// engine used to keep a send's write error to the sender: the drop then failed the
/// connection with `Abandoned`, which dropped the two messages received and read.
#[tokio::test]
async fn a_failed_send_under_a_fragmented_message_leaves_what_arrived_to_the_receive() {
    let (ours, mut theirs) = tokio::io::duplex(1 << 16);
    let config = Config::default().with_send_queue_high_water(1024);
    let mut ws = from_handshake(ours, Role::Client, &config, Negotiated::new(), &[]);
    let mut server = peer(Role::Server);
    for text in ["one", "two", "three"] {
        server.send_text(text).unwrap();
    }
    theirs.write_all(&wire(&mut server)).await.unwrap();
    assert_eq!(ws.recv().await.unwrap(), Some(Message::text("one")));
    drop(theirs);
    let sent = async {
        let mut w = ws.begin_message(MessageKind::Binary)?;
        w.send_chunk(&[1; 2048]).await?;
        // Past the high-water mark: this chunk waits for room, and the write fails.
        w.send_chunk(&[2; 2048]).await?;
        w.finish(&[]).await
    };
    let err = sent.await.unwrap_err();
    assert!(
        matches!(&err, Error::Io(e) if e.kind() == io::ErrorKind::BrokenPipe),
        "{err:?}"
    );
    assert_eq!(ws.recv().await.unwrap(), Some(Message::text("two")));
    assert_eq!(ws.recv().await.unwrap(), Some(Message::text("three")));
    let end = ws.recv().await.unwrap_err();
    assert!(
        matches!(&end, Error::Io(e) if e.kind() == io::ErrorKind::BrokenPipe),
        "{end:?}"
    );
    assert!(ws.recv().await.unwrap().is_none());
}

/// A peer that stops reading and answering: the keepalive's pong timeout ends the
/// connection with frames still queued (the data, the ping, our close), and the reading
/// half reports it. A send on the writing half after that fails at once, and a flush too:
/// they used to wait for room and for the socket for ever, with no timer left to end the
/// wait (the whole socket's waits, which read, saw the end).
#[tokio::test(start_paused = true)]
async fn sends_and_flushes_on_a_connection_a_timer_ended_fail_at_once() {
    let (ours, _theirs) = tokio::io::duplex(64);
    let second = Duration::from_secs(1);
    let config = Config::default()
        .with_keepalive(Some(second), second)
        .with_linger(Some(second), 1 << 20)
        .with_send_queue_high_water(1);
    let ws = from_handshake(ours, Role::Client, &config, Negotiated::new(), &[]);
    let (mut rd, mut wr) = ws.into_split();
    wr.feed(Message::binary(vec![0u8; 1000])).await.unwrap();
    let bound = Duration::from_secs(30);
    let end = tokio::time::timeout(bound, rd.recv()).await.unwrap();
    assert!(matches!(end, Err(Error::Timeout(Timeout::Pong))), "{end:?}");
    let sent = tokio::time::timeout(bound, wr.send(Message::text("late")))
        .await
        .expect("the send waited for room on a connection that is over");
    assert!(matches!(sent, Err(Error::Closed)), "{sent:?}");
    let flushed = tokio::time::timeout(bound, wr.flush())
        .await
        .expect("the flush waited on a connection that is over");
    assert!(matches!(flushed, Err(Error::Closed)), "{flushed:?}");
}
