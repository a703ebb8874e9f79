//! The tokio IO layer: WebSocket connections over any `AsyncRead + AsyncWrite`, a client
//! ([`connect`]) and a server ([`accept`], [`serve`]).
//!
//! ```no_run
//! use rapidws::tokio::{ClientConfig, Message, connect};
//!
//! # async fn run() -> Result<(), rapidws::tokio::Error> {
//! let mut ws = connect("ws://127.0.0.1:9001/", &ClientConfig::default()).await?;
//! ws.send(Message::text("hello")).await?;
//! while let Some(msg) = ws.recv().await? {
//!     println!("{msg:?}");
//! }
//! # Ok(())
//! # }
//! ```
//!
//! Everything protocol-related happens in the sans-IO [`Connection`](crate::connection::Connection);
//! this layer reads into its buffer, writes its frames (header and payload in one
//! vectored write, many frames per write), and runs its timers on tokio's clock.
//!
//! Memory: whenever the socket has nothing to read, a connection gives back its empty
//! receive buffer and its queues' storage, so an idle connection holds only its fixed
//! state (about 2.4 KiB per idle server connection in all, task and socket included;
//! see `benches/RESULTS.md`).

mod client;
mod config;
mod engine;
mod error;
use crate::message;
mod net;
mod queue;
mod server;
mod url;
mod ws;

pub use client::{client_handshake, connect};
pub use config::{ClientConfig, Config, ServerConfig};
pub use error::{Error, Timeout, TrySendError};
pub use message::{CloseFrame, Message, MessageRef, Utf8Bytes};
pub use server::{Reject, accept, accept_with, serve};
pub use url::{UrlError, WsUrl};
pub use ws::{HalfMessageWriter, IncomingMessage, MessageWriter, ReadHalf, WebSocket, WriteHalf};

pub use crate::codec::MessageKind;
pub use crate::connection::Delivery;
