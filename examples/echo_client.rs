//! Sends a few messages to an echo server and prints what comes back.
//!
//! ```text
//! cargo run --example echo_server &
//! cargo run --example echo_client [-- ws://127.0.0.1:9001/]
//! ```

use rapidws::deflate::DeflateConfig;
use rapidws::tokio::{ClientConfig, Message, connect};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "ws://127.0.0.1:9001/".to_owned());
    let config = ClientConfig::default().with_deflate(Some(DeflateConfig::default()));
    let mut ws = connect(&url, &config).await?;
    println!("connected to {url}");
    for i in 0..3 {
        ws.send(Message::text(format!("hello #{i}"))).await?;
    }
    ws.send(Message::binary(vec![0xAB; 1000])).await?;
    let mut echoed = 0;
    while echoed < 4 {
        match ws.recv().await? {
            Some(Message::Text(t)) => println!("text:   {t}"),
            Some(Message::Binary(b)) => println!("binary: {} bytes", b.len()),
            Some(other) => {
                println!("other:  {other:?}");
                continue;
            }
            None => break,
        }
        echoed += 1;
    }
    ws.close(1000, "bye").await?;
    println!("closed");
    Ok(())
}
