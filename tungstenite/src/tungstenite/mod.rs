//! tungstenite's API on rapidws: the types (`Message`, `Error`, `CloseFrame`, ...), the
//! handshake's `http` types and callback, and the blocking [`WebSocket`] with
//! [`connect`], [`accept`] and [`accept_hdr`].
//!
//! `rapidws_tungstenite::tungstenite` stands where `tokio_tungstenite::tungstenite` does;
//! a program that depends on tungstenite itself keeps that dependency for its blocking
//! code, or renames this crate's module in (`use tokio_tungstenite::tungstenite;`).

pub mod client;
pub mod error;
pub mod handshake;
pub mod protocol;
mod server;
pub mod stream;
mod utf8;

pub use bytes::Bytes;
pub use http;

pub use client::{ClientRequestBuilder, client, client_with_config, connect, connect_with_config};
pub use error::{Error, Result};
pub use handshake::HandshakeError;
pub use handshake::client::ClientHandshake;
pub use handshake::server::ServerHandshake;
pub use protocol::frame::Utf8Bytes;
pub use protocol::{Message, WebSocket};
pub use server::{accept, accept_hdr, accept_hdr_with_config, accept_with_config};
