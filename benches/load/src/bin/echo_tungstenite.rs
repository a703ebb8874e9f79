//! tokio-tungstenite echo server: `accept_async` with the default configuration, then
//! `next()`/`send()` on the `Stream + Sink`, as its README's echo loop.

use futures_util::{SinkExt, StreamExt};
use rapidws_load::{ServerArgs, accept_loop, bind, runtime};
use tokio::net::TcpStream;

fn main() -> std::io::Result<()> {
    let args = ServerArgs::parse();
    if args.deflate || args.split {
        eprintln!("tokio-tungstenite: --deflate and --split are not supported");
        std::process::exit(2);
    }
    runtime().block_on(async move { accept_loop(bind(args.port).await?, echo).await })
}

async fn echo(stream: TcpStream) {
    let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
        return;
    };
    while let Some(Ok(msg)) = ws.next().await {
        // Pings are answered by tungstenite on the next read or write.
        if (msg.is_text() || msg.is_binary()) && ws.send(msg).await.is_err() {
            return;
        }
    }
}
