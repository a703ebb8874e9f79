//! An echo server on hyper 1.x: `/ws` upgrades to a WebSocket that sends every text and
//! binary message back (permessage-deflate accepted unless `--no-deflate`); every other
//! request gets a plain HTTP answer from the same server.
//!
//! ```text
//! cargo run -p rapidws-integration --example hyper_server --features hyper [-- --port 9001] [--no-deflate]
//! ```

use std::convert::Infallible;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rapidws::deflate::DeflateConfig;
use rapidws::hyper::HyperWebSocket;
use rapidws::tokio::ServerConfig;
use tokio::net::TcpListener;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let port = port_arg().unwrap_or(9001);
    let listener = TcpListener::bind(("127.0.0.1", port)).await?;
    let deflate = !std::env::args().any(|a| a == "--no-deflate");
    println!(
        "hyper echo server listening on ws://{}/ws (permessage-deflate {})",
        listener.local_addr()?,
        if deflate { "on" } else { "off" }
    );
    let config =
        Arc::new(ServerConfig::default().with_deflate(deflate.then(DeflateConfig::default)));
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let config = config.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| handle(request, config.clone()));
            // `with_upgrades` lets hyper hand the connection over after the 101.
            let served = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades()
                .await;
            if let Err(e) = served {
                eprintln!("connection failed: {e}");
            }
        });
    }
}

async fn handle(
    mut request: Request<Incoming>,
    config: Arc<ServerConfig>,
) -> Result<Response<String>, Infallible> {
    if request.uri().path() != "/ws" {
        let mut response = Response::new("not found: the WebSocket endpoint is /ws\n".into());
        *response.status_mut() = StatusCode::NOT_FOUND;
        return Ok(response);
    }
    match rapidws::hyper::upgrade(&mut request, &config) {
        Ok((response, websocket)) => {
            tokio::spawn(async move {
                match websocket.await {
                    Ok(ws) => echo(ws).await,
                    Err(e) => eprintln!("upgrade failed: {e}"),
                }
            });
            Ok(response)
        }
        // Not a valid upgrade (a plain GET, a wrong Sec-WebSocket-Version, ...): the
        // matching HTTP refusal.
        Err(refusal) => Ok(refusal.response()),
    }
}

async fn echo(mut ws: HyperWebSocket) {
    loop {
        match ws.recv().await {
            Ok(Some(msg)) if msg.is_data() => {
                if let Err(e) = ws.send(msg).await {
                    eprintln!("send failed: {e}");
                    return;
                }
            }
            // Pings are answered and closes echoed by the library.
            Ok(Some(_)) => {}
            Ok(None) => return,
            Err(e) => {
                eprintln!("connection failed: {e}");
                return;
            }
        }
    }
}

fn port_arg() -> Option<u16> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == "--port")?;
    args.get(i + 1)?.parse().ok()
}
