//! Autobahn testsuite testee (client role), agent `rapidws`: asks the fuzzing server for
//! the case count, runs every case (echoing each message until the close), then asks it
//! to write the reports. permessage-deflate is offered.
//!
//! ```text
//! wstest -m fuzzingserver -s autobahn/fuzzingserver.json &
//! cargo run --release --example autobahn_client [-- --url ws://127.0.0.1:9002] [--batch]
//! ```
//!
//! `--batch` receives with `recv_batch` (the whole messages of a read decoded by the batch
//! kernel and lent at once) and echoes copies of them.

use std::time::Duration;

use rapidws::deflate::DeflateConfig;
use rapidws::tokio::{ClientConfig, Config, Message, connect};

const AGENT: &str = "rapidws";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let base = args
        .iter()
        .position(|a| a == "--url")
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| "ws://127.0.0.1:9002".to_owned());
    let base = base.trim_end_matches('/');
    let batch = args.iter().any(|a| a == "--batch");
    let connection = Config::default()
        .with_max_message_size(64 << 20)
        .with_max_frame_size(64 << 20)
        .with_keepalive(None, Duration::from_secs(30))
        .with_close_timeout(Duration::from_secs(3));
    let config = ClientConfig::default()
        .with_connection(connection)
        .with_deflate(Some(DeflateConfig::default()));

    let mut ws = connect(&format!("{base}/getCaseCount"), &config).await?;
    let count: u32 = loop {
        match ws.recv().await? {
            Some(Message::Text(t)) => break t.trim().parse()?,
            Some(_) => {}
            None => return Err("no case count".into()),
        }
    };
    while ws.recv().await?.is_some() {}
    println!("{count} cases");

    for case in 1..=count {
        let url = format!("{base}/runCase?case={case}&agent={AGENT}");
        match connect(&url, &config).await {
            Ok(mut ws) if batch => loop {
                // The lent messages borrow `ws`: copies are kept to send them back.
                let echoes: Vec<Message> = match ws.recv_batch().await {
                    Ok(Some(lent)) => lent
                        .filter(|m| m.is_data())
                        .map(|m| m.to_message())
                        .collect(),
                    Ok(None) | Err(_) => break,
                };
                let mut sent = true;
                for msg in echoes {
                    sent = ws.send(msg).await.is_ok();
                    if !sent {
                        break;
                    }
                }
                if !sent {
                    break;
                }
            },
            Ok(mut ws) => loop {
                match ws.recv().await {
                    Ok(Some(msg)) if msg.is_data() => {
                        if ws.send(msg).await.is_err() {
                            break;
                        }
                    }
                    Ok(Some(_)) => {}
                    Ok(None) | Err(_) => break,
                }
            },
            Err(e) => eprintln!("case {case}: connect failed: {e}"),
        }
        if case % 50 == 0 {
            println!("{case}/{count}");
        }
    }

    let mut ws = connect(&format!("{base}/updateReports?agent={AGENT}"), &config).await?;
    while ws.recv().await?.is_some() {}
    println!("reports updated");
    Ok(())
}
