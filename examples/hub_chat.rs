//! A chat server on the fan-out hub: one process with the in-memory broker, or several
//! on different ports sharing a Redis or NATS server.
//!
//! ```text
//! cargo run --example hub_chat --features hub-redis,hub-nats -- --port 9001
//! cargo run --example hub_chat --features hub-redis,hub-nats -- --port 9001 --redis redis://127.0.0.1:6379/
//! cargo run --example hub_chat --features hub-redis,hub-nats -- --port 9002 --redis redis://127.0.0.1:6379/
//! cargo run --example hub_chat --features hub-redis,hub-nats -- --port 9003 --nats nats://127.0.0.1:4222
//! ```
//!
//! Connect to `ws://127.0.0.1:9001/<room>` (say with `websocat`); every text you send
//! goes to everyone else in the room, on every process. Messages arrive as
//! `{"offset":N,"epoch":E,"text":"..."}`; reconnect to `/<room>?since=N@E` to get what
//! you missed, or `{"resync":true}` when it is gone.

use std::time::Duration;

use rapidws::PreparedMessage;
use rapidws::deflate::DeflateConfig;
use rapidws::hub::{HistoryConfig, Hub, HubConfig, Position, Recovery, SlowConsumer};
use rapidws::tokio::{Message, Reject, ServerConfig, accept_with};
use tokio::net::TcpListener;

/// `s` as a JSON string literal.
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn build_hub(args: &[String]) -> Result<Hub, Box<dyn std::error::Error>> {
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let config = HubConfig::default()
        .with_history(Some(HistoryConfig::default().with_capacity(500)))
        .with_slow_consumer(SlowConsumer::close_try_again_later("reading too slowly"));
    let builder = Hub::builder().config(config).framer(|p| {
        let text = std::str::from_utf8(p.payload).ok()?;
        let json = match p.position {
            Some(pos) => format!(
                r#"{{"offset":{},"epoch":{},"text":{}}}"#,
                pos.offset,
                pos.epoch,
                json_string(text)
            ),
            None => format!(r#"{{"text":{}}}"#, json_string(text)),
        };
        Some(PreparedMessage::text(&json))
    });
    #[cfg(feature = "hub-redis")]
    if let Some(url) = value("--redis") {
        let broker = rapidws::hub::RedisBroker::new(rapidws::hub::RedisConfig::new(url))?;
        return Ok(builder.broker(broker).build()?);
    }
    #[cfg(feature = "hub-nats")]
    if let Some(url) = value("--nats") {
        let broker = rapidws::hub::NatsBroker::new(rapidws::hub::NatsConfig::new(url));
        return Ok(builder.broker(broker).build()?);
    }
    if value("--redis").is_some() || value("--nats").is_some() {
        return Err("built without the hub-redis / hub-nats feature".into());
    }
    Ok(builder.build()?)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let port = args
        .iter()
        .position(|a| a == "--port")
        .and_then(|i| args.get(i + 1))
        .map_or(Ok(9001), |p| p.parse())?;
    let hub = build_hub(&args)?;
    let listener = TcpListener::bind(("127.0.0.1", port)).await?;
    println!(
        "chat on ws://127.0.0.1:{port}/<room>, node {:016x}",
        hub.node_id()
    );
    let config = ServerConfig::default().with_deflate(Some(DeflateConfig::default()));
    loop {
        let (stream, _) = listener.accept().await?;
        let (hub, config) = (hub.clone(), config.clone());
        tokio::spawn(async move {
            let mut path = String::new();
            let ws = accept_with(stream, &config, |req| {
                path = req.path().to_string();
                Ok::<(), Reject>(())
            })
            .await?;
            let (room, since) = match path.trim_start_matches('/').split_once("?since=") {
                Some((room, s)) => {
                    let since = s.split_once('@').and_then(|(o, e)| {
                        Some(Position {
                            offset: o.parse().ok()?,
                            epoch: e.parse().ok()?,
                        })
                    });
                    (room.to_string(), since)
                }
                None => (path.trim_start_matches('/').to_string(), None),
            };
            let (mut rd, wr) = ws.into_split();
            let member = hub.join(wr);
            match since {
                Some(since) => {
                    let outcome = tokio::time::timeout(
                        Duration::from_secs(10),
                        member.subscribe_from(&room, since),
                    )
                    .await??;
                    if !matches!(outcome, Recovery::Recovered { .. }) {
                        member
                            .writer()
                            .try_send(Message::text(r#"{"resync":true}"#))?;
                    }
                }
                None => member.subscribe(&room)?,
            }
            while let Some(msg) = rd.recv().await? {
                if let Message::Text(text) = msg {
                    member.publish(&room, text.as_str())?;
                }
            }
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        });
    }
}
