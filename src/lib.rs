//! rapidws: a fast, strict WebSocket library (RFC 6455, RFC 7692).
//!
//! The protocol lives in a sans-IO core ([`codec`], [`handshake`], [`connection`] and,
//! with feature `deflate`, [`deflate`]): bytes and time go in, events and bytes come out.
//! IO layers (feature `tokio`) drive that one core.
#![forbid(unsafe_code)]

#[cfg(feature = "axum")]
pub mod axum;
#[cfg(feature = "blocking")]
pub mod blocking;
pub mod codec;
pub mod connection;
#[cfg(feature = "deflate")]
pub mod deflate;
#[cfg(feature = "tokio")]
pub mod handler;
pub mod handshake;
#[cfg(feature = "hyper")]
pub mod hyper;
#[cfg(any(feature = "tokio", feature = "blocking"))]
mod message;
pub mod prepared;
#[cfg(feature = "rustls")]
pub mod tls;
#[cfg(feature = "tokio")]
pub mod tokio;
#[cfg(feature = "tokio")]
pub mod tunnel;

pub use rapidws_simd as simd;

pub use codec::{CloseCode, MessageKind, ProtocolError};
pub use connection::{Config, Connection, Event};
pub use prepared::PreparedMessage;

/// Which end of the connection this is. Clients mask what they send; servers require it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// The end that sent the upgrade request.
    Client,
    /// The end that accepted it.
    Server,
}
