//! Autobahn testsuite testee (server role) written against tokio-tungstenite's API and
//! run on this crate: every text and binary message echoed, 64 MiB limits. No
//! permessage-deflate (tungstenite 0.30 has none), so wstest reports cases 12.* and 13.*
//! as unimplemented.
//!
//! (Named apart from rapidws's own `autobahn_*` examples: the workspace shares one
//! `target/*/examples`.)
//!
//! ```text
//! cargo run --release -p rapidws-tungstenite --example tungstenite_autobahn_server [-- --port 9001]
//! AUTOBAHN_SERVER_CMD='target/release/examples/tungstenite_autobahn_server --port $AUTOBAHN_PORT' \
//!     bash autobahn/run.sh server --quick
//! ```

use futures_util::{SinkExt, StreamExt};
use rapidws_tungstenite as tokio_tungstenite;
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

async fn echo(tcp: TcpStream) {
    let config = WebSocketConfig::default()
        .max_message_size(Some(64 << 20))
        .max_frame_size(Some(64 << 20));
    let Ok(mut ws) = tokio_tungstenite::accept_async_with_config(tcp, Some(config)).await else {
        return;
    };
    while let Some(Ok(msg)) = ws.next().await {
        if (msg.is_text() || msg.is_binary()) && ws.send(msg).await.is_err() {
            break;
        }
    }
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let port = args
        .iter()
        .position(|a| a == "--port")
        .and_then(|i| args.get(i + 1))
        .and_then(|p| p.parse().ok())
        .unwrap_or(9001u16);
    let listener = TcpListener::bind(("127.0.0.1", port)).await?;
    println!(
        "autobahn testee server (rapidws-tungstenite) on ws://{}/",
        listener.local_addr()?
    );
    loop {
        let (tcp, _) = listener.accept().await?;
        tokio::spawn(echo(tcp));
    }
}
