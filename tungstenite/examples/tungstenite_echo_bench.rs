//! Loopback echo throughput of the same program on tokio-tungstenite and on this crate:
//! a client pipelines `COUNT` messages of `SIZE` bytes through an echo server (split
//! halves, `forward` on the server) and waits for every echo.
//!
//! ```text
//! cargo run --release -p rapidws-tungstenite --example tungstenite_echo_bench [-- COUNT SIZE]
//! ```

macro_rules! program {
    ($name:ident, $lib:path) => {
        mod $name {
            use futures_util::{SinkExt, StreamExt, TryStreamExt};
            use tokio::net::{TcpListener, TcpStream};
            use $lib as tokio_tungstenite;
            use tokio_tungstenite::tungstenite::Message;

            pub async fn run(count: usize, size: usize, text: bool) -> std::time::Duration {
                let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
                let addr = listener.local_addr().unwrap();
                tokio::spawn(async move {
                    let (tcp, _) = listener.accept().await.unwrap();
                    tcp.set_nodelay(true).unwrap();
                    let ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
                    let (write, read) = ws.split();
                    let _ = read
                        .try_filter(|m| std::future::ready(m.is_text() || m.is_binary()))
                        .forward(write)
                        .await;
                });
                let tcp = TcpStream::connect(addr).await.unwrap();
                tcp.set_nodelay(true).unwrap();
                let (ws, _) = tokio_tungstenite::client_async(format!("ws://{addr}/"), tcp)
                    .await
                    .unwrap();
                let (mut write, mut read) = ws.split();
                let msg = if text {
                    Message::text("é".repeat(size / 2))
                } else {
                    Message::binary(vec![7u8; size])
                };
                let start = std::time::Instant::now();
                let writer = tokio::spawn(async move {
                    for _ in 0..count {
                        write.feed(msg.clone()).await.unwrap();
                    }
                    write.flush().await.unwrap();
                    write
                });
                let mut got = 0;
                while got < count {
                    match read.next().await {
                        Some(Ok(m)) if m.is_text() || m.is_binary() => got += 1,
                        Some(Ok(_)) => {}
                        other => panic!("echo ended early: {other:?}"),
                    }
                }
                let elapsed = start.elapsed();
                let mut write = writer.await.unwrap();
                let _ = write.close().await;
                elapsed
            }
        }
    };
}

program!(theirs, oracle);
program!(ours, rapidws_tungstenite);

#[tokio::main]
async fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let count = args.first().copied().unwrap_or(200_000);
    let size = args.get(1).copied().unwrap_or(128);
    for text in [false, true] {
        // Best of three rounds each, alternating, on a machine others share.
        let (mut t_best, mut o_best) = (f64::MAX, f64::MAX);
        for _ in 0..3 {
            t_best = t_best.min(theirs::run(count, size, text).await.as_secs_f64());
            o_best = o_best.min(ours::run(count, size, text).await.as_secs_f64());
        }
        println!(
            "{} x {size} B {}: tokio-tungstenite {:.0} msg/s, rapidws-tungstenite {:.0} msg/s ({:.2}x)",
            count,
            if text { "text" } else { "binary" },
            count as f64 / t_best,
            count as f64 / o_best,
            t_best / o_best
        );
    }
}
