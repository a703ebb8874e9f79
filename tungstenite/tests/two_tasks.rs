//! A stream polled from one task, then split between two (`StreamExt::split`): the
//! second task's polls must not strand the first one's waits.
//!
//! While one task polls, the stream runs rapidws's own polls with that task's waker; the
//! first poll from another task turns to rapidws's `Stream`/`Sink` impls (whose waits wake
//! both tasks) and wakes the first task so that it waits again through them. Here the
//! reader waits first, then a writer in another task fills the socket, and its blocked
//! writes read what arrives (the reader's messages) while they wait; or the writer is
//! blocked first, then a reader in another task answers a ping, and its pong waits for
//! the same socket. Both run [`split_between_two_tasks`], with the task that waits first.

use std::time::Duration;

use futures_util::{Sink, SinkExt, Stream, StreamExt};
use rapidws_tungstenite::tungstenite::Message;
use rapidws_tungstenite::{accept_async, client_async};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

const MESSAGES: usize = 256;
const SIZE: usize = 64 * 1024;
const INCOMING: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_reader_is_woken_when_a_second_task_writes() {
    split_between_two_tasks(First::Reader).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_writer_is_woken_when_a_second_task_reads() {
    split_between_two_tasks(First::Writer).await;
}

/// The task of the two that waits on the socket before the other starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum First {
    /// The reader waits for a message, then the writer fills the socket.
    Reader,
    /// The writer is blocked on a socket nobody reads, then the reader answers a ping.
    Writer,
}

/// The reading task: receives until [`INCOMING`] binary messages came; hands back how many
/// it got, and its half.
fn spawn_reader<R, E>(mut read: R) -> JoinHandle<(usize, R)>
where
    R: Stream<Item = Result<Message, E>> + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        let mut got = 0;
        while let Some(Ok(m)) = read.next().await {
            if m.is_binary() {
                got += 1;
                if got == INCOMING {
                    break;
                }
            }
        }
        (got, read)
    })
}

/// The writing task: sends [`MESSAGES`] binary messages of [`SIZE`] bytes; hands back its
/// half.
fn spawn_writer<W>(mut write: W) -> JoinHandle<W>
where
    W: Sink<Message> + Unpin + Send + 'static,
    W::Error: std::fmt::Debug,
{
    tokio::spawn(async move {
        for _ in 0..MESSAGES {
            write.send(Message::binary(vec![7u8; SIZE])).await.unwrap();
        }
        write
    })
}

async fn split_between_two_tasks(first: First) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let ws = accept_async(tcp).await.unwrap();
        let (write, read) = ws.split();
        let (reader, writer) = match first {
            First::Reader => {
                let reader = spawn_reader(read);
                // The reader is waiting before the writer starts.
                tokio::time::sleep(Duration::from_millis(50)).await;
                (reader, spawn_writer(write))
            }
            First::Writer => {
                // The client has read the handshake's answer, and nothing after it, before
                // the frames start (it reads the socket raw from then on).
                tokio::time::sleep(Duration::from_millis(50)).await;
                let writer = spawn_writer(write);
                // The writer is blocked (nobody reads the socket) before the reader starts.
                tokio::time::sleep(Duration::from_millis(100)).await;
                (spawn_reader(read), writer)
            }
        };
        let (got, _read) = reader.await.unwrap();
        let _write = writer.await.unwrap();
        got
    });

    let tcp = TcpStream::connect(addr).await.unwrap();
    let (ws, _) = client_async(format!("ws://{addr}/"), tcp).await.unwrap();
    let mut tcp = ws.into_inner();
    // The server's writes block on a socket nobody reads, then our frames arrive.
    tokio::time::sleep(Duration::from_millis(300)).await;
    if first == First::Writer {
        // A masked ping (the reader's receive queues the pong behind the blocked writes).
        tcp.write_all(&[0x89, 0x80 | 1, 0, 0, 0, 0, 9])
            .await
            .unwrap();
    }
    for _ in 0..INCOMING {
        // A masked binary frame of 3 bytes (mask 0: the payload as it is).
        tcp.write_all(&[0x82, 0x80 | 3, 0, 0, 0, 0, 1, 2, 3])
            .await
            .unwrap();
    }
    let reading = async {
        let mut buf = vec![0u8; 256 * 1024];
        let mut total = 0;
        while total < MESSAGES * SIZE {
            let n = tcp.read(&mut buf).await.unwrap();
            assert!(n > 0, "the server closed after {total} bytes");
            total += n;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), reading)
        .await
        .expect("the writer stalled");
    let got = tokio::time::timeout(Duration::from_secs(30), server)
        .await
        .expect(match first {
            First::Reader => "the reader was never woken",
            First::Writer => "the writer was never woken",
        })
        .unwrap();
    assert_eq!(got, INCOMING);
}
