//! With feature `tracing`, connection open, close and protocol failures are logged by
//! the blocking and tokio layers.
#![cfg(all(feature = "tracing", feature = "blocking", feature = "tokio"))]

use std::io::Write;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// Records every event as "target: message field=value ...".
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<String>>>);

struct Line(String);

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0.push_str(&format!(" {value:?}"));
        } else {
            self.0.push_str(&format!(" {}={value:?}", field.name()));
        }
    }
}

impl Subscriber for Log {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut line = Line(event.metadata().target().to_owned() + ":");
        event.record(&mut line);
        self.0.lock().unwrap().push(line.0);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

impl Log {
    fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

#[test]
fn blocking_layer_logs_open_and_the_protocol_error_with_its_cause() {
    let log = Log::default();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server_log = log.clone();
    let server = thread::spawn(move || {
        tracing::subscriber::with_default(server_log, || {
            let (s, _) = listener.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut ws =
                rapidws::blocking::accept(s, &rapidws::blocking::ServerConfig::default()).unwrap();
            ws.read().unwrap_err()
        })
    });
    let mut raw = std::net::TcpStream::connect(addr).unwrap();
    raw.write_all(UPGRADE).unwrap();
    // An unmasked frame from a client (RFC 6455 5.1).
    raw.write_all(&[0x82, 0x00]).unwrap();
    server.join().unwrap();
    let lines = log.lines();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("rapidws::blocking: websocket open")),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("rapidws::blocking: websocket failed") && l.contains("protocol")),
        "{lines:?}"
    );
}

const UPGRADE: &[u8] =
    b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
    Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";

#[test]
fn tokio_layer_logs_open_close_and_the_failure_close_code() {
    use tokio::io::AsyncWriteExt;
    let log = Log::default();
    let _guard = tracing::subscriber::set_default(log.clone());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let mut results = Vec::new();
            for _ in 0..2 {
                let (s, _) = listener.accept().await.unwrap();
                let mut ws = rapidws::tokio::accept(s, &Default::default())
                    .await
                    .unwrap();
                let clean = loop {
                    match ws.recv().await {
                        Ok(Some(_)) => {}
                        Ok(None) => break true,
                        Err(_) => break false,
                    }
                };
                results.push(clean);
            }
            results
        });
        // A clean close from a real client.
        let mut ws = rapidws::tokio::connect(&format!("ws://{addr}/"), &Default::default())
            .await
            .unwrap();
        ws.close(1000, "").await.unwrap();
        // An unmasked frame from a raw client (RFC 6455 5.1): 1002.
        let mut raw = tokio::net::TcpStream::connect(addr).await.unwrap();
        raw.write_all(UPGRADE).await.unwrap();
        raw.write_all(&[0x82, 0x00]).await.unwrap();
        let results = tokio::time::timeout(Duration::from_secs(10), server)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(results, [true, false]);
    });
    let lines = log.lines();
    let has = |prefix: &str, part: &str| {
        lines
            .iter()
            .any(|l| l.starts_with(prefix) && l.contains(part))
    };
    assert!(
        has("rapidws::tokio: websocket open", "role=\"server\""),
        "{lines:?}"
    );
    assert!(
        has("rapidws::tokio: websocket open", "role=\"client\""),
        "{lines:?}"
    );
    assert!(
        has(
            "rapidws::tokio: websocket closed",
            "peer_code=1000 failed=false"
        ),
        "{lines:?}"
    );
    assert!(
        has("rapidws::tokio: websocket failed", "close_code=1002"),
        "{lines:?}"
    );
}
