//! `examples/stream_echo.rs` run as its own process on a free loopback port: messages
//! of one byte to 256 KiB, text and binary, come back as they were sent, in order, while
//! the server passes each on chunk by chunk (`ReadHalf::recv_chunk` under chunk delivery,
//! each chunk a fragment of the answer through the `WriteHalf`); and the answer to a
//! message starts before the message has ended, so the server does not hold it.
//!
//! The example is the binary `cargo test` builds next to this test (or `cargo build
//! --example stream_echo`); when it is missing the test prints a SKIP notice and passes
//! without running.
#![cfg(feature = "tokio")]

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use bytes::Bytes;
use rapidws::tokio::{ClientConfig, Delivery, Message, MessageKind, connect};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

/// Every wait in this test is bounded by this.
const STEP: Duration = Duration::from_secs(10);

/// `examples/stream_echo` as `cargo test` built it (next to this test's `deps/`), or
/// `None` with a SKIP notice.
fn example() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let bin = exe.parent()?.parent()?.join("examples").join("stream_echo");
    if bin.exists() {
        return Some(bin);
    }
    eprintln!(
        "SKIP stream_echo: {} is missing; `cargo build --example stream_echo` builds it",
        bin.display()
    );
    None
}

/// The example running on a free port: the child (killed when dropped) and its address.
async fn start(bin: &std::path::Path) -> (tokio::process::Child, String) {
    let mut child = Command::new(bin)
        .args(["--port", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawning the example");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(STEP, lines.next_line())
        .await
        .expect("a listening line in time")
        .unwrap()
        .expect("a listening line");
    let addr = line
        .split("ws://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_owned();
    (child, addr)
}

#[tokio::test]
async fn stream_echo_answers_before_the_message_ends() {
    let Some(bin) = example() else { return };
    let (_child, addr) = start(&bin).await;
    let config = ClientConfig::default();
    let connection = config.connection.clone().with_delivery(Delivery::Chunks);
    let ws = tokio::time::timeout(
        STEP,
        connect(
            &format!("ws://{addr}/"),
            &config.with_connection(connection),
        ),
    )
    .await
    .expect("connected in time")
    .expect("connected");
    let (mut rd, mut wr) = ws.into_split();
    let mut out = wr.begin_message(MessageKind::Binary).expect("begun");
    out.send_chunk(&[1u8; 64 * 1024]).await.expect("sent");
    // The message is open: what comes back now was sent on before its end.
    let mut early = 0;
    while early < 64 * 1024 {
        let c = tokio::time::timeout(STEP, rd.recv_chunk())
            .await
            .expect("the start of the echo before the message ended")
            .expect("no error")
            .expect("a chunk");
        assert!(!c.last, "the echo cannot end before the message");
        assert!(c.data.iter().all(|&b| b == 1));
        early += c.data.len();
    }
    out.finish(&[2u8; 1000]).await.expect("finished");
    let mut rest = Vec::new();
    loop {
        let c = tokio::time::timeout(STEP, rd.recv_chunk())
            .await
            .expect("the rest in time")
            .expect("no error")
            .expect("a chunk");
        rest.extend_from_slice(&c.data);
        if c.last {
            break;
        }
    }
    assert_eq!(rest, vec![2u8; 1000]);
    wr.close(1000, "done").await.expect("closed");
}

#[tokio::test]
async fn stream_echo_sends_every_message_back_as_it_was() {
    let Some(bin) = example() else { return };
    let (_child, addr) = start(&bin).await;
    let mut ws = tokio::time::timeout(
        STEP,
        connect(&format!("ws://{addr}/"), &ClientConfig::default()),
    )
    .await
    .expect("connected in time")
    .expect("connected");
    let sizes = [1usize, 100, 16 * 1024, 16 * 1024 + 1, 100_000, 256 * 1024];
    for (i, &size) in sizes.iter().enumerate() {
        let data: Vec<u8> = (0..size).map(|j| (j * 31 + i) as u8).collect();
        let msg = if i % 2 == 0 {
            Message::Binary(Bytes::from(data))
        } else {
            let text: String = data.iter().map(|b| char::from(b'a' + b % 26)).collect();
            Message::Text(text.into())
        };
        ws.send(msg.clone()).await.expect("sent");
        let echo = tokio::time::timeout(STEP, ws.recv())
            .await
            .expect("an echo in time")
            .expect("no error")
            .expect("an echo");
        assert_eq!(echo, msg, "message {i} of {size} bytes");
    }
    ws.close(1000, "done").await.expect("closed");
}
