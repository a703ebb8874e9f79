//! fastwebsockets echo server: the handshake is done by `rapidws_load::server_handshake`
//! (fastwebsockets' own server handshake needs hyper; its README's echo server starts from
//! `WebSocket::after_handshake` just like this), then a `FragmentCollector` so that
//! fragmented messages are whole, with auto pong and auto close on.

use fastwebsockets::{FragmentCollector, OpCode, Role, WebSocket};
use rapidws_load::{ServerArgs, accept_loop, bind, runtime, server_handshake};
use tokio::net::TcpStream;

fn main() -> std::io::Result<()> {
    let args = ServerArgs::parse();
    if args.deflate || args.split {
        eprintln!("fastwebsockets: --deflate and --split are not supported");
        std::process::exit(2);
    }
    runtime().block_on(async move { accept_loop(bind(args.port).await?, echo).await })
}

async fn echo(mut stream: TcpStream) {
    if server_handshake(&mut stream, false).await.is_err() {
        return;
    }
    let mut ws = WebSocket::after_handshake(stream, Role::Server);
    ws.set_auto_close(true);
    ws.set_auto_pong(true);
    let mut ws = FragmentCollector::new(ws);
    loop {
        let Ok(frame) = ws.read_frame().await else {
            return;
        };
        match frame.opcode {
            OpCode::Close => return,
            OpCode::Text | OpCode::Binary => {}
            _ => continue,
        }
        if ws.write_frame(frame).await.is_err() {
            return;
        }
    }
}
