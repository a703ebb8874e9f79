//! The firehose benchmark's server: after the opening handshake it writes one block of
//! pre-encoded text frames ([`rapidws_load::firehose_block`], 256 KiB of whole frames)
//! again and again, as fast as the socket takes it, so that the client reading them is
//! the bottleneck and the server never is: one `write` per 256 KiB, no framing, no
//! copies. The message sizes come from the request path (`GET /64`, `GET /50-500`;
//! default 64).
//!
//! ```text
//! firehose_server [--port P]
//! ```
//!
//! Prints `READY <port>` once it listens on 127.0.0.1, like the echo servers, and serves
//! until killed.

use rapidws_load::{
    ServerArgs, SizeSpec, accept_loop, bind, firehose_block, runtime, server_handshake,
};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

fn main() -> std::io::Result<()> {
    let args = ServerArgs::parse();
    runtime().block_on(async move { accept_loop(bind(args.port).await?, serve).await })
}

async fn serve(mut stream: TcpStream) {
    let Ok(up) = server_handshake(&mut stream, false).await else {
        return;
    };
    let spec = up.path.rsplit('/').next().unwrap_or("");
    let spec = if spec.is_empty() {
        SizeSpec { lo: 64, hi: 64 }
    } else {
        match SizeSpec::parse(spec) {
            Some(s) => s,
            None => return,
        }
    };
    let (block, _) = firehose_block(spec);
    // Until the client goes away (it exits after measuring; the write then fails).
    while stream.write_all(&block).await.is_ok() {}
}
