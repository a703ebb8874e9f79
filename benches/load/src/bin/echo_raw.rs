//! Raw TCP echo, the upper bound: after the opening handshake it sends every byte back as
//! it came, without looking at frames. The echoes are therefore the client's own masked
//! frames; the load tool is run with `--raw`, which accepts a masked echo when its bytes
//! equal the frame it sent. So this measures the socket and runtime cost alone.

use rapidws_load::{ServerArgs, accept_loop, bind, runtime, server_handshake};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
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
    // Reserved, never zeroed: an idle connection has touched only the pages its reads
    // wrote to. `read_buf` goes through tokio's `poll_read`, which
    // clears readiness after a short read, so an echo costs one read and one write (no
    // extra read that ends in EWOULDBLOCK), as in the libraries.
    let mut buf: Vec<u8> = Vec::with_capacity(READ_SIZE);
    loop {
        buf.clear();
        match stream.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                if stream.write_all(&buf).await.is_err() {
                    return;
                }
            }
        }
    }
}
