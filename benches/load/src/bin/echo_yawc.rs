//! yawc echo server. The handshake is done by `rapidws_load::server_handshake` (yawc's own
//! server upgrade runs inside a hyper server), and the stream is handed to
//! `WebSocket::from_stream_with_extensions` with the agreed extension string, which yawc
//! documents for exactly that. `--deflate` uses `Options::with_low_latency_compression`
//! (level 1, context takeover, like rapidws' default).

use futures_util::SinkExt;
use rapidws_load::{ServerArgs, accept_loop, bind, runtime, server_handshake};
use tokio::net::TcpStream;
use yawc::{OpCode, Options, Role, WebSocket};

fn main() -> std::io::Result<()> {
    let args = ServerArgs::parse();
    if args.split {
        eprintln!("yawc: --split is not supported");
        std::process::exit(2);
    }
    let deflate = args.deflate;
    let level = args.level;
    runtime().block_on(async move {
        accept_loop(bind(args.port).await?, move |s| echo(s, deflate, level)).await
    })
}

async fn echo(mut stream: TcpStream, deflate: bool, level: Option<u32>) {
    let Ok(up) = server_handshake(&mut stream, deflate).await else {
        return;
    };
    let mut options = Options::default();
    if deflate {
        options = options.with_low_latency_compression();
        if let Some(level) = level {
            options = options.with_compression_level(yawc::CompressionLevel::new(level));
        }
    }
    let Ok(mut ws) = WebSocket::from_stream_with_extensions(
        stream,
        Role::Server,
        up.extensions.as_deref(),
        options,
    ) else {
        return;
    };
    loop {
        let Ok(frame) = ws.next_frame().await else {
            return;
        };
        match frame.opcode() {
            OpCode::Close => return,
            // Pings are answered by yawc itself.
            OpCode::Text | OpCode::Binary => {}
            _ => continue,
        }
        if ws.send(frame).await.is_err() {
            return;
        }
    }
}
