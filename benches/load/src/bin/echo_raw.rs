//! Raw TCP echo, the upper bound: after the opening handshake it sends every byte back as
//! it came, without looking at frames. The echoes are therefore the client's own masked
//! frames; the load tool is run with `--raw`, which accepts a masked echo when its bytes
//! equal the frame it sent. So this measures the socket and runtime cost alone.

use rapidws_load::{ServerArgs, accept_loop, bind, runtime, server_handshake};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// Bytes read per call, like a WebSocket library's read buffer.
const READ_SIZE: usize = 64 * 1024;

fn main() -> std::io::Result<()> {
    let args = ServerArgs::parse();
    if args.deflate || args.split {
        eprintln!("raw: --deflate and --split are not supported");
        std::process::exit(2);
    }
    runtime().block_on(async move { accept_loop(bind(args.port).await?, echo).await })
}

async fn echo(mut stream: TcpStream) {
    if server_handshake(&mut stream, false).await.is_err() {
        return;
    }
    // The buffer is allocated on the first byte, so an idle connection holds none (as the
    // best WebSocket libraries manage).
    let mut buf: Vec<u8> = Vec::new();
    loop {
        if stream.readable().await.is_err() {
            return;
        }
        if buf.capacity() == 0 {
            buf.reserve_exact(READ_SIZE);
        }
        buf.clear();
        match stream.try_read_buf(&mut buf) {
            Ok(0) => return,
            Ok(_) => {
                if stream.write_all(&buf).await.is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                buf = Vec::new();
            }
            Err(_) => return,
        }
    }
}
