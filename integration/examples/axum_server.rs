//! An echo server on axum 0.8: `/ws` upgrades to a WebSocket that sends every text and
//! binary message back (permessage-deflate accepted unless `--no-deflate`), `/` answers
//! plain HTTP.
//!
//! ```text
//! cargo run -p rapidws-integration --example axum_server --features axum [-- --port 9001] [--no-deflate]
//! ```

use axum::Router;
use axum::extract::State;
use axum::response::IntoResponse;
use axum::routing::{any, get};
use rapidws::axum::WebSocketUpgrade;
use rapidws::deflate::DeflateConfig;
use rapidws::hyper::HyperWebSocket;
use tokio::net::TcpListener;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let port = port_arg().unwrap_or(9001);
    let listener = TcpListener::bind(("127.0.0.1", port)).await?;
    let deflate = !std::env::args().any(|a| a == "--no-deflate");
    println!(
        "axum echo server listening on ws://{}/ws (permessage-deflate {})",
        listener.local_addr()?,
        if deflate { "on" } else { "off" }
    );
    let app = Router::new()
        .route("/", get(|| async { "the WebSocket endpoint is /ws\n" }))
        // `any`: an HTTP/1.1 upgrade is a GET, an HTTP/2 one (RFC 8441, here over
        // cleartext HTTP/2 with prior knowledge) a CONNECT; the extractor refuses the rest.
        .route("/ws", any(websocket))
        .with_state(deflate);
    axum::serve(listener, app).await
}

/// A request that is not a valid upgrade never gets here: the extractor answers it with
/// the matching HTTP refusal (400, 405, 426 ...).
async fn websocket(ws: WebSocketUpgrade, State(deflate): State<bool>) -> impl IntoResponse {
    ws.deflate(deflate.then(DeflateConfig::default))
        .on_failed_upgrade(|e| eprintln!("upgrade failed: {e}"))
        .on_upgrade(echo)
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
