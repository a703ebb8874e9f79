//! Carries a TCP service over a WebSocket port, both ways, all on loopback:
//!
//! ```text
//! client --TCP--> entry (127.0.0.1:E) ==WebSocket==> exit (127.0.0.1:W) --TCP--> service
//! ```
//!
//! The service upper-cases what it reads. The demo sends three requests through the
//! tunnel and prints the answers, then exits.
//!
//! ```text
//! cargo run --example tunnel
//! ```

use rapidws::tokio::{ClientConfig, ServerConfig, accept, connect};
use rapidws::tunnel::Tunnel;
use tokio::io::{AsyncReadExt, AsyncWriteExt, copy_bidirectional};
use tokio::net::{TcpListener, TcpStream};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The TCP service: reads to end of stream, answers upper-cased.
    let service = TcpListener::bind("127.0.0.1:0").await?;
    let service_addr = service.local_addr()?;
    tokio::spawn(async move {
        while let Ok((mut s, _)) = service.accept().await {
            tokio::spawn(async move {
                let mut req = Vec::new();
                if s.read_to_end(&mut req).await.is_ok() {
                    let _ = s.write_all(&req.to_ascii_uppercase()).await;
                }
            });
        }
    });

    // The exit: a WebSocket server whose connections are piped to the service.
    let exit = TcpListener::bind("127.0.0.1:0").await?;
    let ws_url = format!("ws://{}/", exit.local_addr()?);
    tokio::spawn(async move {
        while let Ok((s, _)) = exit.accept().await {
            tokio::spawn(async move {
                let Ok(ws) = accept(s, &ServerConfig::default()).await else {
                    return;
                };
                let Ok(mut backend) = TcpStream::connect(service_addr).await else {
                    return;
                };
                let mut tunnel = Tunnel::new(ws);
                if copy_bidirectional(&mut tunnel, &mut backend).await.is_ok() {
                    let _ = tunnel.close().await;
                }
            });
        }
    });

    // The entry: a TCP port whose connections go out as WebSocket connections.
    let entry = TcpListener::bind("127.0.0.1:0").await?;
    let entry_addr = entry.local_addr()?;
    tokio::spawn(async move {
        while let Ok((mut local, _)) = entry.accept().await {
            let url = ws_url.clone();
            tokio::spawn(async move {
                let Ok(ws) = connect(&url, &ClientConfig::default()).await else {
                    return;
                };
                let mut tunnel = Tunnel::new(ws);
                if copy_bidirectional(&mut local, &mut tunnel).await.is_ok() {
                    let _ = tunnel.close().await;
                }
            });
        }
    });

    for request in ["hello", "through a websocket", "and back"] {
        let mut s = TcpStream::connect(entry_addr).await?;
        s.write_all(request.as_bytes()).await?;
        s.shutdown().await?;
        let mut answer = String::new();
        tokio::time::timeout(
            std::time::Duration::from_secs(10),
            s.read_to_string(&mut answer),
        )
        .await??;
        println!("{request:?} -> {answer:?}");
    }
    Ok(())
}
