//! A market-data ticker client, as a tokio-tungstenite program is usually written (a
//! hand-made reconnect loop around `connect_async`, a subscribe message after each
//! connect, a timeout on every read), ported to rapidws: one [`Reconnect`] takes `ws://`
//! and `wss://` URLs alike, backs off with jitter between attempts, resubscribes in its
//! `on_connect` hook, and says why each attempt failed.
//!
//! It prints one line per event on standard output: `connected N URL tls=BOOL`, `tick
//! PAYLOAD`, `stale after MS ms`, `lost: WHY`, and at the end `done N ticks` or
//! `gave up: ERROR` (exit status 1). Failed attempts go to standard error.
//!
//! ```text
//! cargo run -p rapidws-integration --example port_ticker [-- URL] [--symbol BTC-USD] [--stale-ms 5000]
//!     [--ticks N] [--give-up-s 60] [--ca ROOT.pem]
//! ```
//!
//! `URL` defaults to `ws://127.0.0.1:9003/ticker`. `wss://` URLs need feature
//! `tokio-rustls`; `--ca` trusts that PEM certificate instead of Mozilla's roots (for a
//! private or self-signed server).

use std::process::ExitCode;
use std::time::Duration;

use rapidws::deflate::DeflateConfig;
use rapidws::tokio::{Backoff, ClientConfig, CloseCode, Message, Reconnect, ReconnectingWebSocket};

struct Args {
    url: String,
    symbol: String,
    stale: Duration,
    ticks: Option<u64>,
    give_up: Duration,
    ca: Option<String>,
}

fn args() -> Args {
    let mut args = Args {
        url: "ws://127.0.0.1:9003/ticker".to_owned(),
        symbol: "BTC-USD".to_owned(),
        stale: Duration::from_secs(5),
        ticks: None,
        give_up: Duration::from_secs(60),
        ca: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || {
            it.next()
                .unwrap_or_else(|| usage(&format!("{a} needs a value")))
        };
        match a.as_str() {
            "--symbol" => args.symbol = value(),
            "--stale-ms" => args.stale = Duration::from_millis(number(&value())),
            "--ticks" => args.ticks = Some(number(&value())),
            "--give-up-s" => args.give_up = Duration::from_secs(number(&value())),
            "--ca" => args.ca = Some(value()),
            url if !url.starts_with("--") => args.url = url.to_owned(),
            other => usage(&format!("unknown option {other}")),
        }
    }
    args
}

fn number(s: &str) -> u64 {
    s.parse()
        .unwrap_or_else(|_| usage(&format!("{s} is not a number")))
}

fn usage(problem: &str) -> ! {
    eprintln!("port_ticker: {problem}");
    eprintln!(
        "usage: port_ticker [URL] [--symbol S] [--stale-ms MS] [--ticks N] [--give-up-s S] [--ca ROOT.pem]"
    );
    std::process::exit(2)
}

/// The client settings: bounded connect and handshake, permessage-deflate offered
/// (ticks compress well), the library's keepalive (a ping after 30 s of silence).
fn client_config(ca: Option<&str>) -> ClientConfig {
    let config = ClientConfig::default()
        .with_connect_timeout(Duration::from_secs(5))
        .with_handshake_timeout(Some(Duration::from_secs(5)))
        .with_deflate(Some(DeflateConfig::default()));
    match ca {
        None => config,
        Some(path) => with_root(config, path),
    }
}

/// Trusts the certificate in the PEM file at `path` for `wss://`.
#[cfg(feature = "tokio-rustls")]
fn with_root(config: ClientConfig, path: &str) -> ClientConfig {
    use rapidws::tls::rustls::RootCertStore;
    use rapidws::tls::rustls::pki_types::CertificateDer;
    use rapidws::tls::rustls::pki_types::pem::PemObject;

    let pem = std::fs::read(path).unwrap_or_else(|e| usage(&format!("{path}: {e}")));
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.unwrap_or_else(|e| usage(&format!("{path}: {e}")));
        roots
            .add(cert)
            .unwrap_or_else(|e| usage(&format!("{path}: {e}")));
    }
    let tls = rapidws::tls::client_config_with_roots(roots)
        .unwrap_or_else(|e| usage(&format!("{path}: {e}")));
    config.with_tls(tls)
}

#[cfg(not(feature = "tokio-rustls"))]
fn with_root(_: ClientConfig, _: &str) -> ClientConfig {
    usage("--ca needs wss://, which this build lacks (feature tokio-rustls)")
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = args();
    let subscribe = format!(r#"{{"op":"subscribe","symbol":"{}"}}"#, args.symbol);
    let mut feed = match Reconnect::new(&args.url, client_config(args.ca.as_deref())) {
        Ok(feed) => feed,
        Err(e) => usage(&format!("{}: {e}", args.url)),
    }
    .with_backoff(Backoff::new(
        Duration::from_millis(100),
        Duration::from_secs(5),
    ))
    // Give up when no connection could be made for this long.
    .with_deadline(Some(args.give_up))
    .on_failure(|failure| {
        let retry = match failure.retry_in {
            Some(wait) => format!("retry in {} ms", wait.as_millis()),
            None => "giving up".to_owned(),
        };
        eprintln!(
            "attempt {} failed: {}; {retry}",
            failure.attempt, failure.error
        );
    })
    // Every new connection subscribes before it is handed out.
    .on_connect(async |ws: &mut ReconnectingWebSocket| ws.send_text(subscribe.as_str()).await);

    let mut ticks = 0u64;
    let mut connections = 0u64;
    while let Some(mut ws) = feed.next().await {
        connections += 1;
        println!(
            "connected {connections} {} tls={}",
            args.url,
            ws.get_ref().is_tls()
        );
        let why = loop {
            match tokio::time::timeout(args.stale, ws.recv()).await {
                Ok(Ok(Some(Message::Text(tick)))) => {
                    println!("tick {tick}");
                    ticks += 1;
                    if args.ticks == Some(ticks) {
                        let _ = ws.close(CloseCode::NORMAL, "done").await;
                        println!("done {ticks} ticks");
                        return ExitCode::SUCCESS;
                    }
                }
                // Pings are answered by the library; the feed sends text only.
                Ok(Ok(Some(_))) => {}
                Ok(Ok(None)) => break closed_by_server(&ws),
                Ok(Err(e)) => break e.to_string(),
                Err(_) => {
                    // A feed that has gone quiet is as good as lost: close it (1001) and
                    // let the loop reconnect.
                    println!("stale after {} ms", args.stale.as_millis());
                    let _ = ws.close(CloseCode::GOING_AWAY, "stale feed").await;
                    break "stale".to_owned();
                }
            }
        };
        println!("lost: {why}");
    }
    match feed.last_error() {
        Some(e) => println!("gave up: {e}"),
        None => println!("gave up"),
    }
    ExitCode::FAILURE
}

/// How the server closed: its close frame's code and reason.
fn closed_by_server(ws: &ReconnectingWebSocket) -> String {
    match ws.close_frame() {
        Some(frame) => format!("closed by the server ({} {})", frame.code, frame.reason),
        None => "closed".to_owned(),
    }
}
