//! The blocking IO layer: WebSocket connections over `std::net::TcpStream` or any
//! `Read + Write`, on the same sans-IO [`Connection`](crate::Connection) as the tokio layer,
//! with the same settings ([`ClientConfig`], [`ServerConfig`], [`Config`]), messages and
//! [`Error`]. It never uses an async runtime: it builds without feature `tokio`.
//!
//! The files mirror the tokio layer's: `client.rs` (connect and the client handshake),
//! `server.rs` (the server handshake), `net.rs` (TCP), `proxy.rs` (the proxy tunnel),
//! `tls.rs` (`wss://`, feature `rustls`), `stream.rs` (one stream type for `ws://` and
//! `wss://`) and `ws.rs` (the [`WebSocket`]).
//!
//! ```
//! use std::net::TcpListener;
//!
//! use rapidws::blocking::{ClientConfig, Message, ServerConfig, accept, connect};
//!
//! # fn main() -> Result<(), rapidws::blocking::Error> {
//! # std::thread::spawn(|| {
//! #     std::thread::sleep(std::time::Duration::from_secs(30));
//! #     eprintln!("doctest timed out");
//! #     std::process::exit(1);
//! # });
//! // A server thread for one connection, on any free loopback port.
//! let listener = TcpListener::bind("127.0.0.1:0")?;
//! let url = format!("ws://{}/", listener.local_addr()?);
//! let server = std::thread::spawn(move || -> Result<(), rapidws::blocking::Error> {
//!     let mut ws = accept(listener.accept()?.0, &ServerConfig::default())?;
//!     ws.send_text("hi")?;
//!     while ws.read()?.is_some() {} // until the client's close, answered by `read`
//!     Ok(())
//! });
//!
//! let mut ws = connect(&url, &ClientConfig::default())?;
//! assert_eq!(ws.read()?, Some(Message::text("hi")));
//! ws.close(1000, "bye")?;
//! server.join().expect("server thread")?;
//! # Ok(())
//! # }
//! ```
//!
//! # Time
//!
//! A blocking call waits as long as the socket lets it: set the socket's own read and
//! write timeouts (`TcpStream::set_read_timeout`; [`ClientConfig::read_timeout`] does it
//! for [`connect`]). A read that times out returns [`Error::Io`] of kind `WouldBlock` or
//! `TimedOut` ([`Error::is_would_block`]); the connection is unharmed and the call may be
//! repeated. The core's timers
//! (keepalive ping, idle and close timeouts) are run at each [`WebSocket::read`] call and
//! after each timed-out socket read, so with a read timeout shorter than them they fire
//! on time.

mod client;
mod net;
#[cfg(feature = "proxy")]
mod proxy;
mod server;
mod stream;
#[cfg(feature = "rustls")]
mod tls;
mod ws;

pub use crate::handshake::{
    ClientError, Negotiated, Reject, Request, Response, ResponseHeaders, ServerError,
};
#[cfg(feature = "rustls")]
pub use client::connect_tls;
pub use client::{
    client_handshake, client_handshake_with_response, connect, connect_with_response,
    from_handshake,
};
pub use net::Transport;
pub use server::{accept, accept_with};
pub use stream::MaybeTlsStream;
#[cfg(feature = "rustls")]
pub use tls::TlsStream;
pub use ws::WebSocket;

pub use crate::codec::{CloseCode, MessageKind};
pub use crate::config::{ClientConfig, ServerConfig};
pub use crate::connection::{Batch, Config, Delivery};
pub use crate::error::{Error, Timeout};
pub use crate::message::{CloseFrame, Compression, FromUtf8Error, Message, MessageRef, Utf8Bytes};
