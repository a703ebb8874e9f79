//! An echo server written as an event handler, and a client handler that reconnects.
//!
//! What a callback sends is written, with backpressure, before the next message is read,
//! and the connection's timers run meanwhile: a peer that stops reading its echoes is
//! dropped after the keepalive interval plus the pong timeout (set short here), one that
//! trickles bytes at the idle timeout. Messages are limited to what a chat line needs
//! (the library's advice: limits fit the application, SECURITY.md).
//!
//! ```text
//! cargo run --example handler_echo
//! ```

use std::time::Duration;

use rapidws::handler::{Handler, Socket, dial_handler, serve_handler};
use rapidws::tokio::{ClientConfig, CloseFrame, Config, Error, Message, ServerConfig};

/// Server side: per-connection state lives in the handler's fields.
struct Echo {
    peer: std::net::SocketAddr,
    messages: u64,
}

impl Handler for Echo {
    fn on_message(&mut self, socket: &mut Socket, msg: Message) {
        self.messages += 1;
        socket.send(msg);
    }
    fn on_close(&mut self, _: Option<&CloseFrame>, error: Option<&Error>) {
        println!(
            "{} left after {} messages ({error:?})",
            self.peer, self.messages
        );
    }
}

/// Client side: sends a few messages, closes after the last echo.
struct Client {
    left: usize,
}

impl Handler for Client {
    fn on_open(&mut self, socket: &mut Socket) {
        for i in 0..self.left {
            socket.send_text(format!("message {i}"));
        }
    }
    fn on_message(&mut self, socket: &mut Socket, msg: Message) {
        println!("echoed: {msg:?}");
        self.left -= 1;
        if self.left == 0 {
            socket.close(1000, "done");
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("ws://{}/", listener.local_addr()?);
    let connection = Config::default()
        .with_max_message_size(64 * 1024)
        .with_keepalive(Some(Duration::from_secs(15)), Duration::from_secs(15))
        .with_idle_timeout(Some(Duration::from_secs(60)));
    let config = ServerConfig::default().with_connection(connection);
    tokio::spawn(serve_handler(listener, config, |peer| Echo {
        peer,
        messages: 0,
    }));
    let mut client = Client { left: 3 };
    // A reconnect loop is a loop: `dial_handler` returns when the connection ends.
    for attempt in 0..3 {
        match dial_handler(&url, &ClientConfig::default(), &mut client).await {
            Ok(()) => break,
            Err(e) => eprintln!("attempt {attempt} ended: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Let the server print its on_close line.
    tokio::time::sleep(Duration::from_millis(100)).await;
    Ok(())
}
