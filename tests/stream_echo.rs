//! `examples/stream_echo.rs` run as its own process on a free loopback port: messages
//! of one byte to 256 KiB, text and binary, come back as they were sent, in order, while
//! the server reads each through `recv_stream` under chunk delivery and answers it in
//! 16 KiB fragments.
//!
//! The example is the binary `cargo test` builds next to this test (or `cargo build
//! --example stream_echo`); when it is missing the test prints a SKIP notice and passes
//! without running.
#![cfg(feature = "tokio")]

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use bytes::Bytes;
use rapidws::tokio::{ClientConfig, Message, connect};
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

#[tokio::test]
async fn stream_echo_sends_every_message_back_as_it_was() {
    let Some(bin) = example() else { return };
    let mut child = Command::new(&bin)
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
