//! rapidws-tungstenite echo server: tokio-tungstenite's echo loop (`accept_async` with the
//! default configuration, then `next()`/`send()` on the `Stream + Sink`) compiled against
//! the drop-in crate, as a program switched with one line in its Cargo.toml runs. Beside
//! `echo_tungstenite` (the same code on tokio-tungstenite) and `echo_rapidws` (rapidws's
//! own `recv`/`send`) it says what the switch keeps of rapidws's speed
//! (`bash benches/callgrind.sh echo_rapidws_tungstenite 16`).

use futures_util::{SinkExt, StreamExt};
use rapidws_load::{ServerArgs, accept_loop, bind, runtime};
use rapidws_tungstenite as tokio_tungstenite;
use tokio::net::TcpStream;

fn main() -> std::io::Result<()> {
    let args = ServerArgs::parse();
    if args.deflate || args.split {
        eprintln!("rapidws-tungstenite: --deflate and --split are not supported");
        std::process::exit(2);
    }
    runtime().block_on(async move { accept_loop(bind(args.port).await?, echo).await })
}

async fn echo(stream: TcpStream) {
    let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
        return;
    };
    while let Some(Ok(msg)) = ws.next().await {
        if (msg.is_text() || msg.is_binary()) && ws.send(msg).await.is_err() {
            return;
        }
    }
}
