//! rapidws: a fast, strict WebSocket library for client and server: RFC 6455 and RFC 7692
//! (permessage-deflate).
//!
//! The protocol lives in a sans-IO core ([`codec`], [`handshake`], [`connection`] and,
//! with feature `deflate`, [`deflate`]): bytes and time go in, events and bytes come out;
//! it never touches a socket or reads a clock. The IO layers ([`tokio`][tokio-layer]
//! and [`blocking`]) drive that one core. The hot paths (masking, UTF-8 validation, and
//! the batch decoder that checks, unmasks and validates the whole messages of a read in
//! one call for the batch receives, [`Connection::poll_batch`] and `recv_batch`) are SIMD
//! kernels from [`rapidws_simd`](simd), the only crate with `unsafe` code; this one is
//! `#![forbid(unsafe_code)]`.
//!
//! Hostile input gives a typed error and the right close code (1002 protocol error,
//! 1007 invalid UTF-8, 1009 too big), never a panic or an allocation the peer sized: every
//! limit is a config value with a safe default (frame 16 MiB, message 16 MiB, handshake
//! head 16 KiB and 100 header fields).
//!
//! What applications see is defined once for every layer: one [`Config`] per connection
//! (with [`ServerConfig`] and [`ClientConfig`] around it), one [`Message`] (and the
//! borrowed [`MessageRef`]), one [`Error`].
//!
//! # Feature flags
//!
//! | feature    | default | what it gives |
//! |------------|---------|---------------|
//! | `simd`     | yes     | the AVX2, AVX-512 and NEON kernels of [`rapidws_simd`](simd); without it the portable scalar code runs |
//! | `deflate`  | yes     | permessage-deflate (RFC 7692), own level 1, zlib-rs: [`deflate`] |
//! | `tokio`    | yes     | the async layer: [`tokio::serve`], [`tokio::connect`], split halves, send queues, timeouts; [`handler`] callbacks and [`tunnel`] byte streams |
//! | `blocking` | yes     | a blocking layer over any `std::io::Read + Write`: [`blocking`] |
//! | `rustls`   | no      | rustls configurations for `wss://`, ring provider chosen explicitly ([`tls::default_client_config`], [`tls::server_config_from_pem`]), and the blocking `wss://` client ([`blocking::connect_tls`]); no async runtime |
//! | `tokio-rustls` | no  | `wss://` on tokio: [`tokio::connect`] takes `wss://` URLs ([`tokio::MaybeTlsStream`]), [`tokio::connect_tls`], [`tokio::accept_tls`]; implies `tokio` and `rustls` |
//! | `rustls-native-roots` | no | the operating system's trust store for `wss://` clients ([`tls::native_roots_client_config`]) |
//! | `proxy`    | no      | client connections through HTTP CONNECT and SOCKS5 proxies, explicit or from `https_proxy`/`http_proxy`/`all_proxy`/`no_proxy` ([`proxy::Proxy`], [`ClientConfig::with_proxy`]), for both layers; no async runtime of its own |
//! | `hyper`    | no      | upgrade a hyper 1.x request into a WebSocket ([`hyper::upgrade`]): HTTP/1.1 upgrades and HTTP/2 extended CONNECT (RFC 8441) |
//! | `axum`     | no      | an axum extractor, [`axum::WebSocketUpgrade`], both HTTP versions; implies `hyper` |
//! | `http2`    | no      | WebSocket clients as streams of a hyper HTTP/2 connection ([`http2::connect`], RFC 8441); implies `hyper` |
//! | `hub`      | no      | a fan-out hub: topics, prepared-message fan-out, slow-consumer policy, metrics, history: [`hub`][hub-mod] |
//! | `hub-redis` | no     | the hub's Redis broker: pub/sub between nodes, history in Redis Streams ([`hub::RedisBroker`]) |
//! | `hub-nats` | no      | the hub's NATS broker over core subjects ([`hub::NatsBroker`]) |
//! | `tracing`  | no      | `tracing` events at connection open and close and on protocol errors |
//!
//! With `default-features = false` the sans-IO core alone is built: no async runtime, no
//! zlib, and the portable scalar kernels.
//!
//! # Where to start
//!
//! | you want | use |
//! |----------|-----|
//! | a server on tokio | [`tokio::serve`], or [`tokio::accept`] on a stream you accepted |
//! | a client on tokio | [`tokio::connect`], or [`tokio::client_handshake`] on a stream you opened |
//! | a `wss://` client or server | [`tokio::connect`] with a `wss://` URL, [`tokio::connect_tls`] and [`tokio::accept_tls`] (feature `tokio-rustls`); [`blocking::connect`] and [`blocking::connect_tls`] (feature `rustls`) |
//! | a client that reconnects | [`tokio::Reconnect`]: a connection after each loss, with backoff and jitter, attempt limits, a deadline and a resubscribe hook |
//! | what the server answered and agreed | [`tokio::connect_with_response`]: the 101 response's headers, subprotocol, permessage-deflate |
//! | your own handshake, then this library | [`tokio::from_handshake`] with the agreed subprotocol and deflate parameters |
//! | a client behind a proxy | [`ClientConfig::with_proxy`] (feature `proxy`) |
//! | a route in a hyper or axum app | [`hyper::upgrade`], [`axum::WebSocketUpgrade`] (features `hyper`, `axum`), over HTTP/1.1 and HTTP/2 |
//! | WebSockets on an HTTP/2 connection you hold | [`http2::connect`] (feature `http2`) |
//! | callbacks instead of a receive loop | [`handler::serve_handler`] and [`handler::dial_handler`]; messages lent to the callback with [`handler::Handler::BORROWED`] |
//! | a stream of small messages (market data) | [`tokio::WebSocket::recv_batch`] (and [`blocking::WebSocket::read_batch`], [`Connection::poll_batch`]): every whole message of a read lent at once |
//! | one message to many peers | [`PreparedMessage`]: framed (and compressed) once, shared by every send |
//! | to compress one message, or not | [`Compression`]: `Never` or `Always` for one send (`send_with`, `feed_with`, `try_send_with`, `begin_message_with`, [`Connection::send_with`], [`PreparedMessage::with_compression`]) |
//! | no async runtime | [`blocking::accept`] and [`blocking::connect`] |
//! | another runtime, or full control | the sans-IO [`Connection`] with the [`handshake`] parsers |
//! | to port a program from tokio-tungstenite, axum's `ws`, fastwebsockets, tokio-websockets, gws/ews/uWS | the [migration guide](guide::migration): each type and call mapped, and three ported programs |
//! | what changed since the version you built against, and where moved items went | the [changelog](guide::changelog) |
//!
//! The examples below run as doctests; the ones with sockets start their server on
//! `127.0.0.1:0` in the same program.
//!
//! ## An echo server (tokio)
//!
//! [`tokio::serve`] accepts connections, runs the handshake on each and hands every open
//! [`tokio::WebSocket`] to its own task. Pings are answered and the peer's
//! close echoed by the library; `recv` returns `Ok(None)` once the connection has closed.
//!
#![cfg_attr(feature = "tokio", doc = "```")]
#![cfg_attr(not(feature = "tokio"), doc = "```ignore")]
//! use rapidws::tokio::{ClientConfig, Message, ServerConfig, WebSocket, connect, serve};
//! use tokio::net::{TcpListener, TcpStream};
//!
//! async fn echo(mut ws: WebSocket<TcpStream>) {
//!     while let Ok(Some(msg)) = ws.recv().await {
//!         if msg.is_data() && ws.send(msg).await.is_err() {
//!             return;
//!         }
//!     }
//! }
//!
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! #   std::thread::spawn(|| {
//! #       std::thread::sleep(std::time::Duration::from_secs(30));
//! #       eprintln!("doctest timed out");
//! #       std::process::exit(1);
//! #   });
//!     let listener = TcpListener::bind("127.0.0.1:0").await?;
//!     let addr = listener.local_addr()?;
//!     tokio::spawn(serve(listener, ServerConfig::default(), echo));
//!
//!     // Try it.
//!     let mut ws = connect(&format!("ws://{addr}/"), &ClientConfig::default()).await?;
//!     ws.send(Message::text("hello")).await?;
//!     assert_eq!(ws.recv().await?, Some(Message::text("hello")));
//!     ws.close(1000, "done").await?;
//!     Ok(())
//! }
//! ```
//!
//! permessage-deflate is off until asked for: `ServerConfig::default().with_deflate(
//! Some(DeflateConfig::default()))` accepts clients' offers, and the same call on a
//! [`ClientConfig`] makes one.
//!
//! ## A client (tokio)
//!
//! [`tokio::connect`] resolves the host, connects (within
//! [`ClientConfig::connect_timeout`]) and runs the handshake. The
//! server here is the plainest one: [`tokio::accept`] on a stream from a
//! `TcpListener`, sending one greeting.
//!
#![cfg_attr(feature = "tokio", doc = "```")]
#![cfg_attr(not(feature = "tokio"), doc = "```ignore")]
//! use rapidws::tokio::{ClientConfig, Message, ServerConfig, accept, connect};
//! use tokio::net::TcpListener;
//!
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! #   std::thread::spawn(|| {
//! #       std::thread::sleep(std::time::Duration::from_secs(30));
//! #       eprintln!("doctest timed out");
//! #       std::process::exit(1);
//! #   });
//!     let listener = TcpListener::bind("127.0.0.1:0").await?;
//!     let url = format!("ws://{}/greeting", listener.local_addr()?);
//!     tokio::spawn(async move {
//!         let (stream, _) = listener.accept().await?;
//!         let mut ws = accept(stream, &ServerConfig::default()).await?;
//!         ws.send_text("welcome").await?;
//!         // Wait for the client's close: `recv` answers it and returns `Ok(None)`.
//!         while ws.recv().await?.is_some() {}
//!         Ok::<_, rapidws::tokio::Error>(())
//!     });
//!
//!     let config = ClientConfig::default().with_header("Authorization", "Bearer t0ken");
//!     let mut ws = connect(&url, &config).await?;
//!     match ws.recv().await? {
//!         Some(Message::Text(text)) => assert_eq!(text, "welcome"),
//!         other => panic!("expected a greeting, got {other:?}"),
//!     }
//!     // Sends our close, waits for the server's answer and for it to close TCP.
//!     ws.close(1000, "bye").await?;
//!     Ok(())
//! }
//! ```
//!
//! ## The sans-IO core, driven by hand
//!
//! No socket, no runtime: the bytes a client writes are handed to a server and back
//! through plain buffers. This is the whole protocol; the IO layers do exactly this with a
//! socket and a clock.
//!
//! - The [`handshake`] parsers take the bytes read and return the request or response,
//!   with any bytes that followed the head (the first frames) in `leftover`.
//! - A [`Connection`] takes received bytes ([`Connection::handle_bytes`]), yields events
//!   ([`Connection::poll_event`] borrowed, [`Connection::poll_event_owned`] owned) and
//!   frames to write ([`Connection::poll_transmit`], or
//!   [`Connection::write_pending`] into one buffer). Time is passed in as an [`Instant`](std::time::Instant):
//!   call [`Connection::handle_timeout`] when [`Connection::poll_timeout`] says.
//!
//! ```
//! use std::time::Instant;
//!
//! use rapidws::connection::OwnedEvent;
//! use rapidws::handshake::{
//!     ClientConfig, ClientHandshake, ClientRequest, ServerConfig, ServerHandshake,
//! };
//! use rapidws::{Config, Connection, Event, Role};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let now = Instant::now();
//!
//! // The opening handshake: the client's request goes to the server, the answer back.
//! let request = ClientRequest::new("example.com", "/echo");
//! let (mut client_hs, request_bytes) = ClientHandshake::new(&request, ClientConfig::default())?;
//! let server_config = ServerConfig::default();
//! let request = ServerHandshake::new(&server_config)
//!     .feed(&request_bytes)?
//!     .expect("the whole request head was fed");
//! assert_eq!(request.path(), "/echo");
//! let accepted = request.accept(&server_config)?;
//! let upgraded = client_hs
//!     .feed(&accepted.response)?
//!     .expect("the whole response head was fed");
//!
//! let mut client = Connection::new(Role::Client, Config::default(), now);
//! let mut server = Connection::new(Role::Server, Config::default(), now);
//! // Bytes that arrived after a head are the peer's first frames.
//! client.handle_bytes(now, &upgraded.leftover);
//! server.handle_bytes(now, &accepted.leftover);
//!
//! // The client sends a message; its (masked) frame crosses the "wire".
//! client.send_text("hello")?;
//! let mut wire = Vec::new();
//! client.write_pending(&mut wire);
//! server.handle_bytes(now, &wire);
//!
//! // The server echoes every data message, handing the received payload back without
//! // a copy.
//! while let Some(event) = server.poll_event_owned() {
//!     if let OwnedEvent::Message { kind, data } = event? {
//!         server.send_bytes(kind, data)?;
//!     }
//! }
//!
//! // Frame by frame this time: a header and a payload, for one vectored write.
//! let mut wire = Vec::new();
//! while let Some(frame) = server.poll_transmit() {
//!     wire.extend_from_slice(frame.header());
//!     wire.extend_from_slice(frame.payload());
//! }
//! client.handle_bytes(now, &wire);
//!
//! match client.poll_event() {
//!     Some(Ok(Event::Message(msg))) => assert_eq!(msg.as_text(), Some("hello")),
//!     other => panic!("expected the echo, got {other:?}"),
//! }
//! assert!(client.poll_event().is_none(), "nothing else arrived");
//! # Ok(())
//! # }
//! ```
//!
//! With permessage-deflate, `Accepted::deflate` and `Upgraded::deflate` hold the agreed
//! parameters; give each end a [`deflate::PerMessageDeflate`] made from them with
//! [`Connection::set_deflate`] before any frame passes (the [`connection`] module shows it).
//!
//! ## Broadcast with `PreparedMessage`
//!
//! A [`PreparedMessage`] is framed once (and, for peers with permessage-deflate,
//! compressed once per window size); sending it to a server connection queues a shared
//! reference to the same bytes: no copy, no allocation, no compression per recipient.
//! `try_send_prepared` never waits: past the send queue's limit it answers `QueueFull`,
//! the way to drop a slow consumer instead of stalling everyone (see
//! `examples/broadcast.rs`).
//!
#![cfg_attr(feature = "tokio", doc = "```")]
#![cfg_attr(not(feature = "tokio"), doc = "```ignore")]
//! use rapidws::PreparedMessage;
//! use rapidws::tokio::{ClientConfig, Message, ServerConfig, accept, connect};
//! use tokio::net::TcpListener;
//!
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! #   std::thread::spawn(|| {
//! #       std::thread::sleep(std::time::Duration::from_secs(30));
//! #       eprintln!("doctest timed out");
//! #       std::process::exit(1);
//! #   });
//!     const CLIENTS: usize = 3;
//!     let listener = TcpListener::bind("127.0.0.1:0").await?;
//!     let url = format!("ws://{}/", listener.local_addr()?);
//!     let hub = tokio::spawn(async move {
//!         let mut peers = Vec::new();
//!         for _ in 0..CLIENTS {
//!             let (stream, _) = listener.accept().await?;
//!             peers.push(accept(stream, &ServerConfig::default()).await?);
//!         }
//!         let news = PreparedMessage::text(r#"{"price":42}"#);
//!         for ws in &mut peers {
//!             ws.send_prepared(&news).await?;
//!         }
//!         for ws in &mut peers {
//!             while ws.recv().await?.is_some() {}
//!         }
//!         Ok::<_, rapidws::tokio::Error>(())
//!     });
//!
//!     for _ in 0..CLIENTS {
//!         let mut ws = connect(&url, &ClientConfig::default()).await?;
//!         tokio::spawn(async move {
//!             let msg = ws.recv().await?;
//!             assert_eq!(msg, Some(Message::text(r#"{"price":42}"#)));
//!             ws.close(1000, "").await
//!         });
//!     }
//!     hub.await??;
//!     Ok(())
//! }
//! ```
//!
//! ## Blocking
//!
//! The [`blocking`] layer runs the same core over `std::net::TcpStream` or any
//! `Read + Write`, one thread per connection. Bound every wait with the socket's read
//! timeout ([`ClientConfig::read_timeout`] sets it for `connect`, 30 s by
//! default).
//!
#![cfg_attr(feature = "blocking", doc = "```")]
#![cfg_attr(not(feature = "blocking"), doc = "```ignore")]
//! use std::net::TcpListener;
//! use std::time::Duration;
//!
//! use rapidws::blocking::{ClientConfig, Message, ServerConfig, accept, connect};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # std::thread::spawn(|| {
//! #     std::thread::sleep(Duration::from_secs(30));
//! #     eprintln!("doctest timed out");
//! #     std::process::exit(1);
//! # });
//! let listener = TcpListener::bind("127.0.0.1:0")?;
//! let url = format!("ws://{}/", listener.local_addr()?);
//! let server = std::thread::spawn(move || -> Result<(), rapidws::blocking::Error> {
//!     let (stream, _) = listener.accept()?;
//!     stream.set_read_timeout(Some(Duration::from_secs(10)))?;
//!     let mut ws = accept(stream, &ServerConfig::default())?;
//!     // Echo until the client closes: `read` answers the close and returns `Ok(None)`.
//!     while let Some(msg) = ws.read()? {
//!         if msg.is_data() {
//!             ws.send(msg)?;
//!         }
//!     }
//!     Ok(())
//! });
//!
//! let config = ClientConfig::default().with_read_timeout(Some(Duration::from_secs(10)));
//! let mut ws = connect(&url, &config)?;
//! ws.send_text("hello")?;
//! assert_eq!(ws.read()?, Some(Message::text("hello")));
//! ws.close(1000, "done")?;
//! server.join().expect("server thread")?;
//! # Ok(())
//! # }
//! ```
//!
// Links to items behind features: with the feature, rustdoc resolves them; without it, they
// point at docs.rs, which documents every feature (`cargo doc` with any feature set stays
// free of broken links).
#![cfg_attr(feature = "hub", doc = "[hub-mod]: mod@crate::hub")]
#![cfg_attr(not(feature = "hub"), doc = concat!("[hub-mod]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/hub/index.html"))]
#![cfg_attr(not(feature = "hub-redis"), doc = concat!("[`hub::RedisBroker`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/hub/struct.RedisBroker.html"))]
#![cfg_attr(not(feature = "hub-nats"), doc = concat!("[`hub::NatsBroker`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/hub/struct.NatsBroker.html"))]
#![cfg_attr(feature = "tokio", doc = "[tokio-layer]: mod@crate::tokio")]
#![cfg_attr(not(feature = "tokio"), doc = concat!("[tokio-layer]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/tokio/index.html"))]
#![cfg_attr(not(feature = "deflate"), doc = concat!("[`deflate`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/deflate/index.html"))]
#![cfg_attr(not(feature = "deflate"), doc = concat!("[`deflate::PerMessageDeflate`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/deflate/struct.PerMessageDeflate.html"))]
#![cfg_attr(not(feature = "deflate"), doc = concat!("[`Connection::set_deflate`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/connection/struct.Connection.html#method.set_deflate"))]
#![cfg_attr(not(feature = "blocking"), doc = concat!("[`blocking`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/blocking/index.html"))]
#![cfg_attr(not(feature = "blocking"), doc = concat!("[`blocking::accept`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/blocking/fn.accept.html"))]
#![cfg_attr(not(feature = "blocking"), doc = concat!("[`blocking::connect`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/blocking/fn.connect.html"))]
#![cfg_attr(not(all(feature = "blocking", feature = "rustls")), doc = concat!("[`blocking::connect_tls`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/blocking/fn.connect_tls.html"))]
#![cfg_attr(not(feature = "tokio"), doc = concat!("[`handler`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/handler/index.html"))]
#![cfg_attr(not(feature = "tokio"), doc = concat!("[`handler::serve_handler`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/handler/fn.serve_handler.html"))]
#![cfg_attr(not(feature = "tokio"), doc = concat!("[`handler::dial_handler`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/handler/fn.dial_handler.html"))]
#![cfg_attr(not(feature = "tokio"), doc = concat!("[`handler::Handler::BORROWED`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/handler/trait.Handler.html#associatedconstant.BORROWED"))]
#![cfg_attr(not(feature = "tokio"), doc = concat!("[`tokio::WebSocket::recv_batch`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/tokio/struct.WebSocket.html#method.recv_batch"))]
#![cfg_attr(not(feature = "blocking"), doc = concat!("[`blocking::WebSocket::read_batch`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/blocking/struct.WebSocket.html#method.read_batch"))]
#![cfg_attr(not(feature = "tokio"), doc = concat!("[`tunnel`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/tunnel/index.html"))]
#![cfg_attr(not(feature = "tokio"), doc = concat!("[`tokio::serve`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/tokio/fn.serve.html"))]
#![cfg_attr(not(feature = "tokio"), doc = concat!("[`tokio::accept`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/tokio/fn.accept.html"))]
#![cfg_attr(not(feature = "tokio"), doc = concat!("[`tokio::connect`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/tokio/fn.connect.html"))]
#![cfg_attr(not(feature = "tokio"), doc = concat!("[`tokio::client_handshake`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/tokio/fn.client_handshake.html"))]
#![cfg_attr(not(feature = "tokio"), doc = concat!("[`tokio::WebSocket`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/tokio/struct.WebSocket.html"))]
#![cfg_attr(not(feature = "tokio"), doc = concat!("[`tokio::Reconnect`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/tokio/struct.Reconnect.html"))]
#![cfg_attr(not(feature = "tokio"), doc = concat!("[`tokio::MaybeTlsStream`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/tokio/enum.MaybeTlsStream.html"))]
#![cfg_attr(not(feature = "tokio"), doc = concat!("[`tokio::connect_with_response`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/tokio/fn.connect_with_response.html"))]
#![cfg_attr(not(feature = "tokio"), doc = concat!("[`tokio::from_handshake`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/tokio/fn.from_handshake.html"))]
#![cfg_attr(not(feature = "tokio-rustls"), doc = concat!("[`tokio::connect_tls`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/tokio/fn.connect_tls.html"))]
#![cfg_attr(not(feature = "tokio-rustls"), doc = concat!("[`tokio::accept_tls`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/tokio/fn.accept_tls.html"))]
#![cfg_attr(not(feature = "rustls"), doc = concat!("[`tls::default_client_config`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/tls/fn.default_client_config.html"))]
#![cfg_attr(not(feature = "rustls"), doc = concat!("[`tls::server_config_from_pem`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/tls/fn.server_config_from_pem.html"))]
#![cfg_attr(not(feature = "rustls-native-roots"), doc = concat!("[`tls::native_roots_client_config`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/tls/fn.native_roots_client_config.html"))]
#![cfg_attr(not(feature = "proxy"), doc = concat!("[`proxy::Proxy`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/proxy/struct.Proxy.html"))]
#![cfg_attr(not(feature = "proxy"), doc = concat!("[`ClientConfig::with_proxy`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/config/struct.ClientConfig.html#method.with_proxy"))]
#![cfg_attr(
    feature = "hyper",
    doc = "[`hyper::upgrade`]: fn@crate::hyper::upgrade"
)]
#![cfg_attr(not(feature = "hyper"), doc = concat!("[`hyper::upgrade`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/hyper/fn.upgrade.html"))]
#![cfg_attr(
    feature = "axum",
    doc = "[`axum::WebSocketUpgrade`]: crate::axum::WebSocketUpgrade"
)]
#![cfg_attr(not(feature = "axum"), doc = concat!("[`axum::WebSocketUpgrade`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/axum/struct.WebSocketUpgrade.html"))]
#![cfg_attr(
    feature = "http2",
    doc = "[`http2::connect`]: fn@crate::http2::connect"
)]
#![cfg_attr(not(feature = "http2"), doc = concat!("[`http2::connect`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/http2/fn.connect.html"))]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

/// Link definitions for items behind a feature, on the item that follows: with the
/// feature, an intra-doc link; without it, the item's page on docs.rs (which documents
/// every feature), so that `cargo doc` has no broken link in any set of features.
///
/// ```text
/// feature_links! {
///     [
///         "deflate" "[`DeflateConfig`]": "crate::deflate::DeflateConfig", "deflate/struct.DeflateConfig.html";
///     ]
///     pub enum Compression { ... }
/// }
/// ```
macro_rules! feature_links {
    ([$( $feature:literal $text:literal: $path:literal, $page:literal; )*] $item:item) => {
        $(
            #[cfg_attr(feature = $feature, doc = concat!($text, ": ", $path))]
            #[cfg_attr(
                not(feature = $feature),
                doc = concat!($text, ": https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/", $page)
            )]
        )*
        $item
    };
}

/// `Display` for an error enum, one message a variant: the pattern, then `write!`'s
/// format string and arguments.
///
/// ```text
/// display! { SendError {
///     SendError::Closed => "the connection is closing or closed";
///     SendError::InvalidCloseCode(c) => "close code {c} may not be sent";
/// } }
/// ```
macro_rules! display {
    ($ty:ident { $( $(#[$attr:meta])* $pat:pat => $fmt:literal $(, $arg:expr)*; )* }) => {
        impl core::fmt::Display for $ty {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                match self {
                    $( $(#[$attr])* $pat => write!(f, $fmt $(, $arg)*), )*
                }
            }
        }
    };
}

/// A settings struct and its `Default` from one list, each field's default written beside
/// its docs and type:
///
/// ```text
/// settings! {
///     /// Client handshake settings.
///     #[derive(Clone, Debug)]
///     pub struct ClientConfig {
///         /// Most header fields accepted in the response (default 100).
///         pub max_headers: usize = DEFAULT_MAX_HEADERS,
///         #[cfg(feature = "deflate")]
///         pub deflate: Option<DeflateConfig> = None,
///     }
/// }
/// ```
///
/// Doc comments come first on a field, then at most one `#[cfg]`, which the `Default`
/// follows too. The struct is `#[non_exhaustive]`, as every config type is.
macro_rules! settings {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $(
                $(#[doc = $doc:literal])*
                $(#[cfg($cfg:meta)])?
                pub $field:ident: $ty:ty = $default:expr,
            )*
        }
    ) => {
        $(#[$meta])*
        #[non_exhaustive]
        pub struct $name {
            $(
                $(#[doc = $doc])*
                $(#[cfg($cfg)])?
                pub $field: $ty,
            )*
        }

        impl Default for $name {
            fn default() -> Self {
                $name {
                    $(
                        $(#[cfg($cfg)])?
                        $field: $default,
                    )*
                }
            }
        }
    };
}

/// `with_*` setters for a config struct, one line each:
///
/// ```text
/// setters! { Config {
///     /// Sets [`Config::max_frame_size`].
///     with_max_frame_size(bytes: usize) => max_frame_size;
///     /// Sets [`Config::read_buffer_size`] (at least 256).
///     with_read_buffer_size(bytes: usize) => read_buffer_size = bytes.max(256);
/// } }
/// ```
///
/// makes `pub fn with_max_frame_size(mut self, bytes: usize) -> Self`, which sets the
/// field to `bytes` (or to the expression after `=`) and returns `self`. Attributes (doc
/// comments, `#[cfg]`) go with their setter. A setter that does more is written out.
macro_rules! setters {
    ($ty:ty { $( $(#[$attr:meta])* $name:ident($arg:ident: $t:ty) => $field:ident $(= $value:expr)?; )* }) => {
        impl $ty {
            $(
                $(#[$attr])*
                pub fn $name(mut self, $arg: $t) -> Self {
                    self.$field = setters!(@value $arg $(, $value)?);
                    self
                }
            )*
        }
    };
    (@value $arg:ident) => { $arg };
    (@value $arg:ident, $value:expr) => { $value };
}

#[cfg(feature = "axum")]
pub mod axum;
#[cfg(feature = "blocking")]
pub mod blocking;
pub mod codec;
pub mod config;
// The module's own docs link `Connection::set_deflate`, which exists with feature `deflate`
// only; without it the link points at docs.rs (a definition here joins the module's docs).
#[cfg_attr(
    not(feature = "deflate"),
    doc = concat!("[`Connection::set_deflate`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/connection/struct.Connection.html#method.set_deflate")
)]
pub mod connection;
#[cfg(feature = "deflate")]
pub mod deflate;
mod deque;
pub mod error;
#[cfg(feature = "tokio")]
pub mod handler;
pub mod handshake;
#[cfg(feature = "http2")]
pub mod http2;
#[cfg(feature = "hub")]
pub mod hub;
#[cfg(feature = "hyper")]
pub mod hyper;
mod message;
#[cfg(feature = "proxy")]
pub mod proxy;
#[cfg(feature = "rustls")]
pub mod tls;
#[cfg(feature = "tokio")]
pub mod tokio;
#[cfg(feature = "tokio")]
pub mod tunnel;
pub mod url;

pub use rapidws_simd as simd;

/// Guides that are not about one item: porting from other WebSocket libraries, and what
/// changed between releases.
pub mod guide {
    // The changelog is the one at the crate's root, where registry readers look; the
    // package carries it (`include` in Cargo.toml).
    #[doc = include_str!("../CHANGELOG.md")]
    pub mod changelog {}

    // The guide links to the layers of the default features by path; items behind other
    // features are reference links, to the item with its feature and to docs.rs (which
    // documents every feature) without it, so `cargo doc` stays free of broken links in
    // every feature set. Without the default layers the guide is a pointer to docs.rs.
    feature_links! {
        [
            "axum" "[axum-mod]": "mod@crate::axum", "axum/index.html";
            "axum" "[axum-upgrade]": "crate::axum::WebSocketUpgrade", "axum/struct.WebSocketUpgrade.html";
            "axum" "[axum-headers]": "crate::axum::WebSocketUpgrade::headers", "axum/struct.WebSocketUpgrade.html#method.headers";
            "axum" "[axum-shutdown]": "crate::axum::WebSocketUpgrade::shutdown", "axum/struct.WebSocketUpgrade.html#method.shutdown";
            "hyper" "[hyper-ws]": "crate::hyper::HyperWebSocket", "hyper/type.HyperWebSocket.html";
            "hyper" "[hyper-upgrade]": "fn@crate::hyper::upgrade", "hyper/fn.upgrade.html";
            "hyper" "[hyper-is-deflate]": "crate::hyper::UpgradeFuture::is_deflate", "hyper/struct.UpgradeFuture.html#method.is_deflate";
            "hyper" "[hyper-refusal]": "crate::hyper::Refusal", "hyper/struct.Refusal.html";
            "rustls" "[tls-mod]": "mod@crate::tls", "tls/index.html";
            "rustls" "[with-tls]": "crate::ClientConfig::with_tls", "config/struct.ClientConfig.html#method.with_tls";
            "tokio-rustls" "[connect-tls]": "crate::tokio::connect_tls", "tokio/fn.connect_tls.html";
            "tokio-rustls" "[accept-tls]": "crate::tokio::accept_tls", "tokio/fn.accept_tls.html";
            "hub" "[hub-mod]": "mod@crate::hub", "hub/index.html";
            "hub" "[hub-join]": "crate::hub::Hub::join", "hub/struct.Hub.html#method.join";
        ]
        // Its examples run as doc tests of the integration package
        // (`integration/src/lib.rs`): several rows compare rapidws with tungstenite, which
        // only that package depends on.
        #[cfg(all(feature = "tokio", feature = "blocking", feature = "deflate"))]
        #[cfg_attr(not(doctest), doc = include_str!("docs/MIGRATION.md"))]
        pub mod migration {}
    }

    #[cfg(not(all(feature = "tokio", feature = "blocking", feature = "deflate")))]
    #[doc = concat!(
        "# Migrating to rapidws\n\nPorting from tokio-tungstenite, axum's `extract::ws`, ",
        "fastwebsockets, tokio-websockets, gws, ews and uWebSockets. The guide needs the ",
        "default features (`tokio`, `blocking`, `deflate`), which this build lacks: read it ",
        "on [docs.rs](https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"),
        "/rapidws/guide/migration/index.html)."
    )]
    pub mod migration {}
}

pub use codec::{CloseCode, MessageKind, ProtocolError, Role};
pub use config::{ClientConfig, ServerConfig};
pub use connection::{Budget, Config, Connection, Delivery, Event, PreparedMessage, Shutdown};
pub use error::{Error, Timeout, TrySendError};
pub use message::{CloseFrame, Compression, FromUtf8Error, Message, MessageRef, Utf8Bytes};
