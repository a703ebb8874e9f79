//! wtx echo server: `WebSocketAcceptor::default().accept` (wtx's own handshake), then
//! `read_frame`/`write_frame` on the split borrowed halves, as in wtx's own echo
//! benchmarks. `WebSocketPayloadOrigin::Adaptive` lends a single-frame message from the
//! network buffer (no copy); pings are answered and closes echoed by wtx. No `--deflate`:
//! wtx compresses only with its `flate2` feature, which would also switch yawc's flate2
//! backend in this workspace.

use rapidws_load::{ServerArgs, accept_loop, bind, runtime};
use tokio::net::TcpStream;
use wtx::collection::Vector;
use wtx::web_socket::{OpCode, WebSocketAcceptor, WebSocketPayloadOrigin};

fn main() -> std::io::Result<()> {
    let args = ServerArgs::parse();
    if args.deflate || args.split || args.feed {
        eprintln!("wtx: --deflate, --split and --feed are not supported");
        std::process::exit(2);
    }
    runtime().block_on(async move { accept_loop(bind(args.port).await?, echo).await })
}

async fn echo(stream: TcpStream) {
    // The default acceptor also agrees to wtx's "no-masking" extension when a client
    // offers it; the load tool does not, so client frames stay masked (RFC 6455).
    let Ok(mut ws) = WebSocketAcceptor::default().accept(stream).await else {
        return;
    };
    let mut buffer = Vector::new();
    let (mut common, mut reader, mut writer) = ws.split_mut();
    loop {
        let Ok(mut frame) = reader
            .read_frame(&mut buffer, &mut common, WebSocketPayloadOrigin::Adaptive)
            .await
        else {
            return;
        };
        match frame.op_code() {
            OpCode::Binary | OpCode::Text => {}
            OpCode::Close => return,
            _ => continue,
        }
        if writer.write_frame(&mut common, &mut frame).await.is_err() {
            return;
        }
    }
}
