//! tokio-websockets echo server: `ServerBuilder::accept`, then `next()`/`send()` on the
//! `Stream + Sink`, as its README's echo server.

use futures_util::{SinkExt, StreamExt};
use rapidws_load::{ServerArgs, accept_loop, bind, runtime};
use tokio::net::TcpStream;
use tokio_websockets::ServerBuilder;

fn main() -> std::io::Result<()> {
    let args = ServerArgs::parse();
    if args.deflate || args.split {
        eprintln!("tokio-websockets: --deflate and --split are not supported");
        std::process::exit(2);
    }
    runtime().block_on(async move { accept_loop(bind(args.port).await?, echo).await })
}

async fn echo(stream: TcpStream) {
    let Ok((_request, mut ws)) = ServerBuilder::new().accept(stream).await else {
        return;
    };
    while let Some(Ok(msg)) = ws.next().await {
        if (msg.is_text() || msg.is_binary()) && ws.send(msg).await.is_err() {
            return;
        }
    }
}
