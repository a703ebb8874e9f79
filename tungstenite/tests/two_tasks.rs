//! A stream polled from one task, then split between two (`StreamExt::split`): the
//! second task's polls must not strand the first one's waits.
//!
//! While one task polls, the stream runs rapidws's own polls with that task's waker; the
//! first poll from another task turns to rapidws's `Stream`/`Sink` impls (whose waits wake
//! both tasks) and wakes the first task so that it waits again through them. Here the
//! reader waits first, then a writer in another task fills the socket, and its blocked
//! writes read what arrives (the reader's messages) while they wait; or the writer is
//! blocked first, then a reader in another task answers a ping, and its pong waits for
//! the same socket.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use rapidws_tungstenite::tungstenite::Message;
use rapidws_tungstenite::{accept_async, client_async};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const MESSAGES: usize = 256;
const SIZE: usize = 64 * 1024;
const INCOMING: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_reader_is_woken_when_a_second_task_writes() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let ws = accept_async(tcp).await.unwrap();
        let (mut write, mut read) = ws.split();
        let reader = tokio::spawn(async move {
            let mut got = 0;
            while let Some(Ok(m)) = read.next().await {
                if m.is_binary() {
                    got += 1;
                    if got == INCOMING {
                        break;
                    }
                }
            }
            got
        });
        // The reader is waiting before the writer starts.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let writer = tokio::spawn(async move {
            for _ in 0..MESSAGES {
                write.send(Message::binary(vec![7u8; SIZE])).await.unwrap();
            }
            write
        });
        let got = reader.await.unwrap();
        let _write = writer.await.unwrap();
        got
    });

    let tcp = TcpStream::connect(addr).await.unwrap();
    let (ws, _) = client_async(format!("ws://{addr}/"), tcp).await.unwrap();
    let mut tcp = ws.into_inner();
    // The server's writes block on a socket nobody reads, then our messages arrive.
    tokio::time::sleep(Duration::from_millis(300)).await;
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
        .expect("the reader was never woken")
        .unwrap();
    assert_eq!(got, INCOMING);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_writer_is_woken_when_a_second_task_reads() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let ws = accept_async(tcp).await.unwrap();
        let (mut write, mut read) = ws.split();
        // The client has read the handshake's answer, and nothing after it, before the
        // frames start (it reads the socket raw from then on).
        tokio::time::sleep(Duration::from_millis(50)).await;
        let writer = tokio::spawn(async move {
            for _ in 0..MESSAGES {
                write.send(Message::binary(vec![7u8; SIZE])).await.unwrap();
            }
            write
        });
        // The writer is blocked (nobody reads the socket) before the reader starts.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let reader = tokio::spawn(async move {
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
        });
        let _write = writer.await.unwrap();
        reader.await.unwrap().0
    });

    let tcp = TcpStream::connect(addr).await.unwrap();
    let (ws, _) = client_async(format!("ws://{addr}/"), tcp).await.unwrap();
    let mut tcp = ws.into_inner();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A masked ping (the reader's receive queues the pong behind the blocked writes),
    // then binary frames of 3 bytes (mask 0: payloads as they are).
    tcp.write_all(&[0x89, 0x80 | 1, 0, 0, 0, 0, 9])
        .await
        .unwrap();
    for _ in 0..INCOMING {
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
        .expect("the writer was never woken")
        .unwrap();
    assert_eq!(got, INCOMING);
}
