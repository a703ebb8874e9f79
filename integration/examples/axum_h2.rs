//! An axum 0.8 app over TLS with HTTP/1.1 and HTTP/2 on, whose WebSocket routes take both
//! forms: the HTTP/1.1 upgrade and the HTTP/2 extended CONNECT (RFC 8441) that browsers
//! send once the page came over HTTP/2. `/` is a page that opens `wss://` to the same
//! origin; `/ws` echoes with permessage-deflate accepted, `/ws/plain` without it. Each
//! opened WebSocket is logged with the form it came in.
//!
//! ```text
//! cargo run -p rapidws-integration --example axum_h2 --features axum,tokio-rustls -- [--port 9443]
//!     [--cert cert.pem --key key.pem]   # default: a new self-signed one for localhost
//!     [--write-cert PATH]               # writes the self-signed certificate's PEM there
//! ```
//!
//! Then open <https://localhost:9443/> (the self-signed certificate needs an exception).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::response::{Html, IntoResponse};
use axum::routing::{any, get};
use rapidws::axum::WebSocketUpgrade;
use rapidws::deflate::DeflateConfig;
use rapidws::hyper::HyperWebSocket;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let port: u16 = arg("--port").map_or(Ok(9443), |p| p.parse())?;
    let (cert_pem, key_pem) = match (arg("--cert"), arg("--key")) {
        (Some(cert), Some(key)) => (
            std::fs::read_to_string(cert)?,
            std::fs::read_to_string(key)?,
        ),
        _ => {
            let ck = rcgen::generate_simple_self_signed(vec![
                "localhost".to_owned(),
                "127.0.0.1".to_owned(),
            ])?;
            (ck.cert.pem(), ck.key_pair.serialize_pem())
        }
    };
    if let Some(path) = arg("--write-cert") {
        std::fs::write(path, &cert_pem)?;
    }
    // rapidws's server config with ALPN for both versions: h2 first, as browsers prefer.
    let mut tls =
        (*rapidws::tls::server_config_from_pem(cert_pem.as_bytes(), key_pem.as_bytes())?).clone();
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];

    // `any`: an HTTP/1.1 upgrade is a GET, an HTTP/2 one a CONNECT; the extractor takes
    // both and refuses every other request with the fitting status.
    let app = Router::new()
        .route("/", get(|| async { Html(PAGE) }))
        .route("/ws", any(|ws: WebSocketUpgrade| open(ws, true)))
        .route("/ws/plain", any(|ws: WebSocketUpgrade| open(ws, false)));
    let listener = TlsListener::bind(("127.0.0.1", port), TlsAcceptor::from(Arc::new(tls))).await?;
    println!("listening on https://localhost:{port}/ (HTTP/1.1 and HTTP/2)");
    // With axum's `http2` feature, `serve` speaks HTTP/2 on connections that chose it and
    // advertises SETTINGS_ENABLE_CONNECT_PROTOCOL, which is what lets browsers send their
    // WebSockets over it.
    axum::serve(listener, app).await?;
    Ok(())
}

async fn open(ws: WebSocketUpgrade, deflate: bool) -> impl IntoResponse {
    let form = if ws.request().is_http2() {
        "HTTP/2 extended CONNECT"
    } else {
        "HTTP/1.1 upgrade"
    };
    println!(
        "websocket open: {form} {} (permessage-deflate {})",
        ws.request().path(),
        if deflate { "accepted" } else { "declined" }
    );
    ws.deflate(deflate.then(DeflateConfig::default))
        .on_upgrade(echo)
}

async fn echo(mut ws: HyperWebSocket) {
    loop {
        match ws.recv().await {
            Ok(Some(msg)) if msg.is_data() => {
                if ws.send(msg).await.is_err() {
                    return;
                }
            }
            Ok(Some(_)) => {}
            Ok(None) => {
                println!("websocket closed: {:?}", ws.close_frame().map(|c| c.code.0));
                return;
            }
            Err(e) => {
                println!("websocket failed: {e}");
                return;
            }
        }
    }
}

/// Accepts TCP connections and runs each TLS handshake on its own task, handing finished
/// ones to `axum::serve`: a slow or silent client never holds up the others.
struct TlsListener {
    accepted: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    async fn bind(addr: (&str, u16), acceptor: TlsAcceptor) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        let (tx, accepted) = mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let Ok((tcp, peer)) = listener.accept().await else {
                    continue;
                };
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    let handshake = acceptor.accept(tcp);
                    let timeout = std::time::Duration::from_secs(10);
                    if let Ok(Ok(tls)) = tokio::time::timeout(timeout, handshake).await {
                        let _ = tx.send((tls, peer)).await;
                    }
                });
            }
        });
        Ok(TlsListener { accepted, local })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.accepted.recv().await {
            Some(accepted) => accepted,
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.local)
    }
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == name)?;
    args.get(i + 1).cloned()
}

const PAGE: &str = r#"<!doctype html>
<meta charset="utf-8">
<title>rapidws over HTTP/2</title>
<p>This page came over <b id="proto">?</b>. <input id="text" value="héllo ✓">
<button id="send">send</button></p>
<pre id="log"></pre>
<script>
const log = (line) => { document.getElementById('log').textContent += line + '\n'; };
const nav = performance.getEntriesByType('navigation')[0];
document.getElementById('proto').textContent = nav ? nav.nextHopProtocol : 'unknown';
let ws = null;
document.getElementById('send').onclick = () => {
  const text = document.getElementById('text').value;
  if (ws) { ws.send(text); return; }
  // Opened on the first click, over the connection this page came on.
  ws = new WebSocket(`wss://${location.host}/ws`);
  ws.onopen = () => { log('open, extensions: ' + (ws.extensions || 'none')); ws.send(text); };
  ws.onmessage = (e) => log('echo: ' + e.data);
  ws.onclose = (e) => log('closed: ' + e.code);
};
</script>
"#;
