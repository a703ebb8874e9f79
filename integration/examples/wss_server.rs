//! A `wss://` echo server on rustls (feature `rustls`).
//!
//! ```text
//! cargo run -p rapidws-integration --example wss_server --features tokio-rustls -- [ADDR] [--cert CERT.pem --key KEY.pem]
//! ```
//!
//! ADDR defaults to `127.0.0.1:9443`. With `--cert` and `--key` it serves that
//! certificate chain (PEM, leaf first) and private key (PEM: PKCS#8, PKCS#1 or SEC1).
//! Without them it makes a self-signed certificate for `localhost` and `127.0.0.1` at
//! start (rcgen, a dev-dependency) and writes it to `wss_server_cert.pem` in the system
//! temporary directory, so a client can trust it, for example:
//!
//! ```text
//! websocat --ca-file "${TMPDIR:-/tmp}/wss_server_cert.pem" wss://localhost:9443/
//! ```
//!
//! The TLS configuration is built with the ring provider chosen explicitly
//! (`rapidws::tls::server_config_from_pem`), so no process-wide `CryptoProvider` is
//! installed. Each connection gets the TLS and WebSocket handshakes within the
//! handshake timeout (`rapidws::tokio::accept_tls`), then echoes every data message.

use std::error::Error;
use std::sync::Arc;

use rapidws::tls::server_config_from_pem;
use rapidws::tokio::{ServerConfig, TlsAcceptor, accept_tls};
use tokio::net::TcpListener;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let mut addr = "127.0.0.1:9443".to_owned();
    let (mut cert_path, mut key_path) = (None, None);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--cert" => cert_path = Some(args.next().ok_or("--cert needs a file")?),
            "--key" => key_path = Some(args.next().ok_or("--key needs a file")?),
            "-h" | "--help" => {
                println!("usage: wss_server [ADDR] [--cert CERT.pem --key KEY.pem]");
                return Ok(());
            }
            other => addr = other.to_owned(),
        }
    }
    let (cert_pem, key_pem) = match (cert_path, key_path) {
        (Some(c), Some(k)) => (std::fs::read(c)?, std::fs::read(k)?),
        (None, None) => {
            let ck = rcgen::generate_simple_self_signed(vec![
                "localhost".to_owned(),
                "127.0.0.1".to_owned(),
            ])?;
            let path = std::env::temp_dir().join("wss_server_cert.pem");
            std::fs::write(&path, ck.cert.pem())?;
            println!("self-signed certificate written to {}", path.display());
            (
                ck.cert.pem().into_bytes(),
                ck.key_pair.serialize_pem().into_bytes(),
            )
        }
        _ => return Err("give both --cert and --key, or neither".into()),
    };
    let acceptor = TlsAcceptor::from(server_config_from_pem(&cert_pem, &key_pem)?);
    let config = Arc::new(ServerConfig::default());
    let listener = TcpListener::bind(&addr).await?;
    println!("wss echo server on wss://{}", listener.local_addr()?);
    loop {
        let (tcp, peer) = listener.accept().await?;
        let (acceptor, config) = (acceptor.clone(), config.clone());
        tokio::spawn(async move {
            let mut ws = match accept_tls(&acceptor, tcp, &config).await {
                Ok(ws) => ws,
                Err(e) => {
                    eprintln!("{peer}: handshake failed: {e}");
                    return;
                }
            };
            loop {
                match ws.recv().await {
                    Ok(Some(msg)) if msg.is_data() => {
                        if let Err(e) = ws.send(msg).await {
                            eprintln!("{peer}: {e}");
                            return;
                        }
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => return,
                    Err(e) => {
                        eprintln!("{peer}: {e}");
                        return;
                    }
                }
            }
        });
    }
}
