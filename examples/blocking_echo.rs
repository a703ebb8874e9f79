//! A blocking echo server, one thread per connection, plus a client that talks to it.
//!
//! ```text
//! cargo run --example blocking_echo            # server on 127.0.0.1:9003 and a demo client
//! cargo run --example blocking_echo -- serve   # server only
//! ```

use std::net::TcpListener;
use std::thread;
use std::time::Duration;

use rapidws::blocking::{self, ClientConfig, Message, ServerConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listener = TcpListener::bind("127.0.0.1:9003")?;
    let serve_only = std::env::args().nth(1).as_deref() == Some("serve");
    let server = thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            // Bound every blocking wait with the socket's own timeouts.
            let _ = stream.set_read_timeout(Some(Duration::from_secs(60)));
            let _ = stream.set_write_timeout(Some(Duration::from_secs(10)));
            thread::spawn(move || {
                let config = ServerConfig::default();
                let Ok(mut ws) = blocking::accept(stream, &config) else {
                    return;
                };
                loop {
                    match ws.read() {
                        Ok(Some(msg)) if msg.is_data() => {
                            if ws.send(msg).is_err() {
                                break;
                            }
                        }
                        Ok(Some(_)) => {}
                        Ok(None) => break,
                        Err(e) => {
                            eprintln!("connection ended: {e}");
                            break;
                        }
                    }
                }
            });
        }
    });
    if serve_only {
        println!("echo server on ws://127.0.0.1:9003/");
        let _ = server.join();
        return Ok(());
    }
    let mut ws = blocking::connect("ws://127.0.0.1:9003/", &ClientConfig::default())?;
    for text in ["hello", "from", "a blocking client"] {
        ws.send(Message::text(text))?;
        println!("echoed: {:?}", ws.read()?);
    }
    ws.close(1000, "bye")?;
    println!("closed: {:?}", ws.close_frame());
    Ok(())
}
