//! WebSocket clients over an HTTP/2 connection (RFC 8441, feature `http2`), on hyper's
//! HTTP/2 client.
//!
//! A client that holds an HTTP/2 connection to a server (hyper's [`SendRequest`]) opens
//! each WebSocket as one stream of it: [`connect`] sends the extended CONNECT
//! (`:protocol = websocket`, `sec-websocket-version: 13`, the configured subprotocols,
//! origin, headers and permessage-deflate offer), checks the 200 answer with the same
//! rules as over HTTP/1.1, and runs the usual [`WebSocket`] on the stream. Clone the
//! `SendRequest` to open several at once; they share the connection (and its TCP
//! connection and TLS session).
//!
//! ```no_run
//! use hyper_util::rt::{TokioExecutor, TokioIo};
//! use rapidws::tokio::{ClientConfig, Message};
//! use tokio::net::TcpStream;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // Cleartext HTTP/2 with prior knowledge; over TLS, negotiate ALPN `h2` first.
//! let tcp = TcpStream::connect("127.0.0.1:8080").await?;
//! let (mut sender, connection) = hyper::client::conn::http2::handshake::<_, _, String>(
//!     TokioExecutor::new(),
//!     TokioIo::new(tcp),
//! )
//! .await?;
//! tokio::spawn(connection);
//! let config = ClientConfig::default();
//! let mut chat = rapidws::http2::connect(&mut sender.clone(), "ws://127.0.0.1:8080/chat", &config).await?;
//! let mut feed = rapidws::http2::connect(&mut sender, "ws://127.0.0.1:8080/feed", &config).await?;
//! chat.send(Message::text("hello")).await?;
//! let _ = feed.recv().await?;
//! # Ok(())
//! # }
//! ```
//!
//! RFC 8441 3 lets a client send the extended CONNECT only once the server has sent
//! `SETTINGS_ENABLE_CONNECT_PROTOCOL = 1`. hyper's `SendRequest` does not say whether it
//! has; its `Connection::is_extended_connect_protocol_enabled` does, for a caller that wants
//! to check first. A server that has not enabled it resets the stream, which comes back as
//! [`Error::Io`].
//!
//! What differs on a stream, and what to expect from head-of-line blocking and per-stream
//! memory, is described in [`crate::hyper`]'s HTTP/2 section; it holds for both ends.

use std::io;

use ::hyper::body::Body;
use ::hyper::client::conn::http2::SendRequest;
use ::hyper::ext::Protocol;
use http::header::{HeaderName, HeaderValue};
use http::{Method, Request, Version};
use hyper_util::rt::TokioIo;

use crate::codec::Role;
use crate::config::ClientConfig;
use crate::connection::Connection;
use crate::error::Error;
use crate::handshake::{ClientError, Http2ClientHandshake};
use crate::hyper::HyperWebSocket;
use crate::tokio::WebSocket;
use crate::url::WsUrl;

/// Opens a WebSocket to `url` (`ws://` or `wss://`; the scheme only sets `:scheme`, `http`
/// or `https`: the connection behind `sender` is what it is) as a new stream of the HTTP/2
/// connection behind `sender`, within the configured handshake timeout.
///
/// The request carries what `config` asks for: its subprotocols, headers, origin and
/// permessage-deflate offer (`config.handshake.deflate`); the connection runs with
/// `config.connection`. `connect_timeout`, `nodelay` and the proxy do not apply: the
/// connection is already open. A URL that cannot be used is [`Error::Url`]; a refusal
/// (any status but 2xx) is [`Error::ClientHandshake`] holding [`ClientError::Status`];
/// hyper's errors (the connection is gone, the server reset the stream) are
/// [`Error::Io`].
pub async fn connect<B>(
    sender: &mut SendRequest<B>,
    url: impl AsRef<str>,
    config: &ClientConfig,
) -> Result<HyperWebSocket, Error>
where
    B: Body + Default + Send + Unpin + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    // One deadline over the whole exchange: request, answer and upgrade.
    crate::tokio::within(config.handshake_timeout, async {
        let target = WsUrl::parse(url.as_ref())?;
        let request = config.request(&target.host_header(), &target.resource);
        let (handshake, fields) = Http2ClientHandshake::new(&request, config.handshake.clone())
            .map_err(Error::ClientHandshake)?;
        let scheme = if target.secure { "https" } else { "http" };
        // RFC 8441 4-5: CONNECT with :protocol, :scheme, :authority and :path; hyper turns the
        // absolute URI into the last three and the extension into :protocol.
        let mut builder = Request::builder()
            .method(Method::CONNECT)
            .version(Version::HTTP_2)
            .uri(format!("{scheme}://{}{}", request.host(), request.path()))
            .extension(Protocol::from_static("websocket"));
        for (name, value) in &fields {
            let invalid = || Error::ClientHandshake(ClientError::InvalidRequest("invalid header"));
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| invalid())?;
            let value = HeaderValue::from_str(value).map_err(|_| invalid())?;
            builder = builder.header(name, value);
        }
        let connect = builder
            .body(B::default())
            .map_err(|_| Error::ClientHandshake(ClientError::InvalidRequest("invalid URL")))?;

        sender.ready().await.map_err(hyper_error)?;
        let mut response = sender.send_request(connect).await.map_err(hyper_error)?;
        let headers = response
            .headers()
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_bytes()));
        let upgraded = handshake
            .check(response.status().as_u16(), headers)
            .map_err(Error::ClientHandshake)?;
        let stream = ::hyper::upgrade::on(&mut response)
            .await
            .map_err(hyper_error)?;
        let conn = Connection::open(
            Role::Client,
            std::sync::Arc::new(config.connection.clone()),
            tokio::time::Instant::now().into_std(),
            #[cfg(feature = "deflate")]
            upgraded.deflate.zip(config.handshake.deflate.as_ref()),
        );
        #[cfg(feature = "tracing")]
        tracing::debug!(
            target: "rapidws::tokio",
            role = "client",
            subprotocol = upgraded.subprotocol.as_deref(),
            http2 = true,
            "websocket open"
        );
        Ok(WebSocket::from_connection(
            TokioIo::new(stream),
            conn,
            // The stream's data is the WebSocket's from the first byte.
            &[],
            upgraded.subprotocol,
        ))
    })
    .await
}

fn hyper_error(e: ::hyper::Error) -> Error {
    Error::Io(io::Error::other(e))
}
