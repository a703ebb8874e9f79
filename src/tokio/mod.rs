//! The tokio IO layer: WebSocket connections over any `AsyncRead + AsyncWrite`, a client
//! ([`connect`], for `ws://` and `wss://`; [`Reconnect`] to come back after every loss)
//! and a server ([`accept`], [`serve`]).
//!
//! ```
//! use rapidws::tokio::{ClientConfig, Message, ServerConfig, accept, connect};
//! use tokio::net::TcpListener;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), rapidws::tokio::Error> {
//! # std::thread::spawn(|| {
//! #     std::thread::sleep(std::time::Duration::from_secs(30));
//! #     eprintln!("doctest timed out");
//! #     std::process::exit(1);
//! # });
//! // A server for one connection, on any free loopback port.
//! let listener = TcpListener::bind("127.0.0.1:0").await?;
//! let url = format!("ws://{}/", listener.local_addr()?);
//! tokio::spawn(async move {
//!     let (stream, _) = listener.accept().await?;
//!     let mut ws = accept(stream, &ServerConfig::default()).await?;
//!     while let Some(msg) = ws.recv().await? {
//!         if msg.is_data() {
//!             ws.send(msg).await?;
//!         }
//!     }
//!     Ok::<_, rapidws::tokio::Error>(())
//! });
//!
//! let mut ws = connect(&url, &ClientConfig::default()).await?;
//! ws.send(Message::text("hello")).await?;
//! assert_eq!(ws.recv().await?, Some(Message::text("hello")));
//! ws.close(1000, "").await?;
//! # Ok(())
//! # }
//! ```
//!
//! Everything protocol-related happens in the sans-IO [`Connection`](crate::connection::Connection);
//! this layer reads into its buffer, writes its frames (header and payload in one
//! vectored write, many frames per write), and runs its timers on tokio's clock.
//!
//! Memory: a connection that sends now and then gives its empty receive buffer and output
//! chunk to a per-thread stock whenever the socket has nothing more to read, and takes one
//! back with its next message; a busy one keeps them between messages and gives them back
//! a moment after it goes quiet. So an idle connection holds only its fixed state (about
//! 2.4 KiB per idle server connection in all, task and socket included; see
//! `benches/RESULTS.md`), and one that sends now and then neither allocates nor arms a
//! timer per message.

mod client;
mod engine;
mod net;
#[cfg(feature = "proxy")]
mod proxy;
mod reconnect;
mod server;
mod stream;
#[cfg(feature = "tokio-rustls")]
mod tls;
mod ws;

pub use crate::config::{ClientConfig, ServerConfig};
pub use crate::connection::{Batch, Config, Shutdown};
pub use crate::error::{Error, Timeout, TrySendError};
pub use crate::handshake::{
    ClientError, Negotiated, Reject, Request, Response, ResponseHeaders, ServerError,
};
pub use crate::message::{CloseFrame, Compression, FromUtf8Error, Message, MessageRef, Utf8Bytes};
#[cfg(feature = "proxy")]
pub use crate::proxy::{
    DEFAULT_MAX_RESPONSE_HEAD, Proxy, ProxyError, ProxyKind, ProxyServer, env_proxy,
};
pub use crate::url::{UrlError, WsUrl};
pub use client::{
    client_handshake, client_handshake_with_response, connect, connect_with_response,
};
#[cfg(feature = "tokio-rustls")]
pub use client::{connect_tls, connect_tls_with_response};
pub(crate) use engine::now;
pub(crate) use net::Acceptor;
#[cfg(feature = "http2")]
pub(crate) use net::within;
pub use reconnect::{Backoff, Failure, NoHook, Reconnect, ReconnectingWebSocket};
#[cfg(feature = "hyper")]
pub(crate) use server::open_server;
pub use server::{accept, accept_with, from_handshake, serve};
#[cfg(feature = "tokio-rustls")]
pub use server::{accept_tls, accept_tls_with};
pub use stream::MaybeTlsStream;
#[cfg(feature = "tokio-rustls")]
pub use tls::{ServerTlsStream, TlsAcceptor, TlsStream};
pub(crate) use ws::read_chunk;
pub use ws::{
    HalfMessageWriter, IncomingMessage, MessageChunk, MessageWriter, ReadHalf, ReuniteError,
    WebSocket, WriteHalf,
};

pub use crate::codec::{CloseCode, MessageKind};
pub use crate::connection::Delivery;
