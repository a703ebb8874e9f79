//! Autobahn testsuite testee (client role) written against tokio-tungstenite's API and
//! run on this crate: asks wstest for the case count, runs every case echoing what it
//! receives, then asks for the report.
//!
//! (Named apart from rapidws's own `autobahn_*` examples: the workspace shares one
//! `target/*/examples`.)
//!
//! ```text
//! cargo run --release -p rapidws-tungstenite --example tungstenite_autobahn_client [-- --url ws://127.0.0.1:9002]
//! AUTOBAHN_CLIENT_CMD='target/release/examples/tungstenite_autobahn_client --url $AUTOBAHN_URL' \
//!     bash autobahn/run.sh client --quick
//! ```

use futures_util::{SinkExt, StreamExt};
use rapidws_tungstenite as tokio_tungstenite;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{Error, Message};

const AGENT: &str = "rapidws-tungstenite";

async fn run_case(base: &str, case: u32) -> Result<(), Error> {
    let config = WebSocketConfig::default()
        .max_message_size(Some(64 << 20))
        .max_frame_size(Some(64 << 20));
    let url = format!("{base}/runCase?case={case}&agent={AGENT}");
    let (mut ws, _) = tokio_tungstenite::connect_async_with_config(url, Some(config), true).await?;
    while let Some(msg) = ws.next().await {
        let msg = msg?;
        if msg.is_text() || msg.is_binary() {
            ws.send(msg).await?;
        }
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    let base = args
        .iter()
        .position(|a| a == "--url")
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| "ws://127.0.0.1:9002".to_owned());
    let base = base.trim_end_matches('/').to_owned();

    let (mut ws, _) = tokio_tungstenite::connect_async(format!("{base}/getCaseCount")).await?;
    let count: u32 = match ws.next().await {
        Some(Ok(Message::Text(t))) => t.parse().unwrap_or(0),
        other => {
            eprintln!("no case count: {other:?}");
            std::process::exit(1);
        }
    };
    let _ = ws.close(None).await;
    while ws.next().await.is_some() {}

    for case in 1..=count {
        // A case that fails the connection is wstest's to judge; the next one goes on.
        if let Err(e) = run_case(&base, case).await {
            eprintln!("case {case}: {e}");
        }
    }

    let (mut ws, _) =
        tokio_tungstenite::connect_async(format!("{base}/updateReports?agent={AGENT}")).await?;
    let _ = ws.close(None).await;
    while ws.next().await.is_some() {}
    Ok(())
}
