//! WebSockets over HTTP/2 (RFC 8441) end to end on loopback: hyper's HTTP/2 client with the
//! rapidws HTTP/2 client (`rapidws::http2::connect`) on it, against rapidws served by hyper
//! (`rapidws::hyper::upgrade` under hyper-util's auto builder) and by axum (`axum::serve`
//! with `http2` on and the `rapidws::axum` extractor), over TLS with ALPN `h2` (rcgen
//! certificate) and over cleartext HTTP/2 with prior knowledge; with and without
//! permessage-deflate. The server reports how each WebSocket arrived and how it ended.
#![cfg(all(feature = "axum", feature = "http2", feature = "deflate"))]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::response::IntoResponse;
use axum::routing::any;
use bytes::Bytes;
use http_body_util::Empty;
use hyper::body::Incoming;
use hyper::client::conn::http2::SendRequest;
use hyper::{Method, Request, Response, StatusCode, Version};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rapidws::deflate::DeflateConfig;
use rapidws::hyper::HyperWebSocket;
use rapidws::tokio::{ClientConfig, Error, Message, ServerConfig, TrySendError};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::{TlsAcceptor, TlsConnector, rustls};

/// Every test finishes well within this; a hang fails instead of stalling the suite.
const LIMIT: Duration = Duration::from_secs(120);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Server {
    Hyper,
    Axum,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Transport {
    Tls,
    Cleartext,
}

/// What the server saw of one WebSocket.
#[derive(Debug)]
enum Report {
    /// Opened: over HTTP/2 or not, the path, the agreed subprotocol and extension.
    Opened {
        http2: bool,
        path: String,
        subprotocol: Option<String>,
        deflate: bool,
    },
    /// The flood route's send queue refused a message after this many bytes were taken.
    QueueFull(usize),
    /// The connection ended: `Ok` with the peer's close code, or the error.
    Ended(Result<Option<u16>, String>),
}

#[derive(Clone)]
struct Shared {
    config: Arc<ServerConfig>,
    reports: mpsc::UnboundedSender<Report>,
}

fn server_config(deflate: bool) -> ServerConfig {
    let mut config = ServerConfig::default();
    config.handshake = config
        .handshake
        .with_subprotocols(["superchat"])
        .with_deflate(deflate.then(DeflateConfig::default));
    config
}

fn certificate() -> (CertificateDer<'static>, PrivateKeyDer<'static>) {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let key = PrivatePkcs8KeyDer::from(ck.key_pair.serialize_der());
    (ck.cert.der().clone(), key.into())
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn tls_acceptor(cert: CertificateDer<'static>, key: PrivateKeyDer<'static>) -> TlsAcceptor {
    let mut server = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .unwrap();
    server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    TlsAcceptor::from(Arc::new(server))
}

fn tls_connector(cert: &CertificateDer<'static>, alpn: &[u8]) -> TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.clone()).unwrap();
    let mut client = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    client.alpn_protocols = vec![alpn.to_vec()];
    TlsConnector::from(Arc::new(client))
}

/// A stream that is TLS or plain TCP, for servers and clients that serve both.
enum Io {
    Plain(TcpStream),
    ServerTls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
    ClientTls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

macro_rules! each_io {
    ($self:expr, $s:ident => $e:expr) => {
        match $self.get_mut() {
            Io::Plain($s) => $e,
            Io::ServerTls($s) => $e,
            Io::ClientTls($s) => $e,
        }
    };
}

impl AsyncRead for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        each_io!(self, s => Pin::new(s).poll_read(cx, buf))
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        each_io!(self, s => Pin::new(s).poll_write(cx, buf))
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        each_io!(self, s => Pin::new(s).poll_flush(cx))
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        each_io!(self, s => Pin::new(s).poll_shutdown(cx))
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        each_io!(self, s => Pin::new(s).poll_write_vectored(cx, bufs))
    }
    fn is_write_vectored(&self) -> bool {
        match self {
            Io::Plain(s) => s.is_write_vectored(),
            Io::ServerTls(s) => s.is_write_vectored(),
            Io::ClientTls(s) => s.is_write_vectored(),
        }
    }
}

/// Accepted connections, TLS-handshaken (or not) off the accept loop, for `axum::serve`.
struct Accepted(mpsc::Receiver<(Io, SocketAddr)>, SocketAddr);

impl axum::serve::Listener for Accepted {
    type Io = Io;
    type Addr = SocketAddr;
    async fn accept(&mut self) -> (Io, SocketAddr) {
        match self.0.recv().await {
            Some(accepted) => accepted,
            // The accept loop is gone: nothing more will come.
            None => std::future::pending().await,
        }
    }
    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.1)
    }
}

/// Accepts on a free loopback port; each connection goes through TLS when `tls` is set.
async fn listen(tls: Option<TlsAcceptor>) -> Accepted {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        loop {
            let Ok((tcp, peer)) = listener.accept().await else {
                return;
            };
            let tls = tls.clone();
            let tx = tx.clone();
            tokio::spawn(async move {
                let io = match tls {
                    Some(acceptor) => match acceptor.accept(tcp).await {
                        Ok(s) => Io::ServerTls(Box::new(s)),
                        Err(_) => return,
                    },
                    None => Io::Plain(tcp),
                };
                let _ = tx.send((io, peer)).await;
            });
        }
    });
    Accepted(rx, addr)
}

/// A running server and what it reports.
struct Running {
    addr: SocketAddr,
    cert: CertificateDer<'static>,
    transport: Transport,
    reports: mpsc::UnboundedReceiver<Report>,
}

async fn start(server: Server, transport: Transport, config: ServerConfig) -> Running {
    let (cert, key) = certificate();
    let tls = (transport == Transport::Tls).then(|| tls_acceptor(cert.clone(), key));
    let mut accepted = listen(tls).await;
    let addr = accepted.1;
    let (reports_tx, reports) = mpsc::unbounded_channel();
    let shared = Shared {
        config: Arc::new(config),
        reports: reports_tx,
    };
    match server {
        Server::Hyper => {
            tokio::spawn(async move {
                loop {
                    let (io, _) = axum::serve::Listener::accept(&mut accepted).await;
                    let shared = shared.clone();
                    let service = hyper::service::service_fn(move |request| {
                        hyper_route(request, shared.clone())
                    });
                    let mut builder =
                        hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                    builder.http2().enable_connect_protocol();
                    tokio::spawn(async move {
                        let _ = builder
                            .serve_connection_with_upgrades(TokioIo::new(io), service)
                            .await;
                    });
                }
            });
        }
        Server::Axum => {
            let app = Router::new()
                .route("/", axum::routing::get(|| async { "hello" }))
                .route("/{route}", any(axum_route))
                .with_state(shared);
            tokio::spawn(async move { axum::serve(accepted, app).await });
        }
    }
    Running {
        addr,
        cert,
        transport,
        reports,
    }
}

async fn hyper_route(
    mut request: Request<Incoming>,
    shared: Shared,
) -> Result<Response<String>, Infallible> {
    let path = request.uri().path().to_owned();
    if path == "/" {
        return Ok(Response::new("hello".to_owned()));
    }
    let http2 = request.version() == Version::HTTP_2;
    Ok(
        match rapidws::hyper::upgrade(&mut request, &shared.config) {
            Ok((response, websocket)) => {
                tokio::spawn(async move {
                    let deflate = websocket.deflate().is_some();
                    if let Ok(ws) = websocket.await {
                        run(ws, http2, path, deflate, shared.reports).await;
                    }
                });
                response
            }
            Err(refusal) => refusal.response(),
        },
    )
}

async fn axum_route(
    ws: rapidws::axum::WebSocketUpgrade,
    State(shared): State<Shared>,
) -> impl IntoResponse {
    let http2 = ws.request().is_http2();
    let path = ws.request().path().to_owned();
    // The extractor does not say what it agreed; an offer meeting a deflate config is
    // accepted (the offers these tests send are all acceptable).
    let deflate = shared.config.handshake.deflate.is_some()
        && ws.request().header("sec-websocket-extensions").is_some();
    ws.config((*shared.config).clone())
        .on_upgrade(move |ws| run(ws, http2, path, deflate, shared.reports))
}

/// What each route does: `/echo` sends every data message back; `/flood` fills its send
/// queue without reading until the queue refuses, reports that, then sends `done`;
/// `/drop` reads one message and drops the WebSocket without a close (a stream reset).
async fn run(
    mut ws: HyperWebSocket,
    http2: bool,
    path: String,
    deflate: bool,
    reports: mpsc::UnboundedSender<Report>,
) {
    let _ = reports.send(Report::Opened {
        http2,
        path: path.clone(),
        subprotocol: ws.subprotocol().map(str::to_owned),
        deflate,
    });
    match path.as_str() {
        "/flood" => {
            let chunk = Bytes::from(vec![7u8; 1024]);
            let mut taken = 0usize;
            // Bounded: flow control must stop it long before 64 MiB.
            while taken < 64 << 20 {
                match ws.try_send(Message::Binary(chunk.clone())) {
                    Ok(()) => taken += chunk.len(),
                    Err(TrySendError::QueueFull(_)) => break,
                    Err(e) => panic!("flood: {e:?}"),
                }
                tokio::task::yield_now().await;
            }
            let _ = reports.send(Report::QueueFull(taken));
            let _ = ws.send(Message::text("done")).await;
        }
        "/drop" => {
            let _ = ws.recv().await;
            drop(ws);
            return;
        }
        _ => {}
    }
    let ended = loop {
        match ws.recv().await {
            Ok(Some(msg)) if msg.is_data() => {
                if let Err(e) = ws.send(msg).await {
                    break Err(format!("{e:?}"));
                }
            }
            Ok(Some(_)) => {}
            Ok(None) => break Ok(ws.close_frame().map(|c| c.code.0)),
            Err(e) => break Err(format!("{e:?}")),
        }
    };
    let _ = reports.send(Report::Ended(ended));
}

/// An HTTP/2 client connection to a running server: TLS with ALPN `h2`, or cleartext
/// with prior knowledge.
async fn h2_client(running: &Running) -> SendRequest<Empty<Bytes>> {
    let tcp = TcpStream::connect(running.addr).await.unwrap();
    let io = match running.transport {
        Transport::Tls => {
            let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
            let tls = tls_connector(&running.cert, b"h2")
                .connect(name, tcp)
                .await
                .unwrap();
            assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
            Io::ClientTls(Box::new(tls))
        }
        Transport::Cleartext => Io::Plain(tcp),
    };
    let (sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(io))
            .await
            .unwrap();
    tokio::spawn(connection);
    sender
}

fn url(running: &Running, path: &str) -> String {
    let scheme = match running.transport {
        Transport::Tls => "wss",
        Transport::Cleartext => "ws",
    };
    format!("{scheme}://localhost:{}{path}", running.addr.port())
}

fn client_config(deflate: bool) -> ClientConfig {
    let mut config = ClientConfig::default();
    config.handshake = config
        .handshake
        .with_deflate(deflate.then(DeflateConfig::default));
    config
}

async fn next_report(running: &mut Running) -> Report {
    tokio::time::timeout(Duration::from_secs(30), running.reports.recv())
        .await
        .expect("no report from the server within 30 s")
        .expect("the server is gone")
}

async fn expect_opened(running: &mut Running, want_path: &str, want_deflate: bool) {
    match next_report(running).await {
        Report::Opened {
            http2,
            path,
            deflate,
            ..
        } => {
            assert!(http2, "the server saw HTTP/1.1 for {path}");
            assert_eq!(path, want_path);
            assert_eq!(deflate, want_deflate);
        }
        other => panic!("expected an open, got {other:?}"),
    }
}

async fn expect_ended(running: &mut Running) -> Result<Option<u16>, String> {
    match next_report(running).await {
        Report::Ended(e) => e,
        other => panic!("expected an end, got {other:?}"),
    }
}

/// A 16 MiB text: compressible, every line numbered so a reordering would show.
fn big_text() -> String {
    let mut s = String::with_capacity(16 << 20);
    let mut i = 0u64;
    while s.len() < (16 << 20) - 64 {
        s.push_str(&format!("line {i:>10} — ✓ 日本語\n"));
        i += 1;
    }
    while s.len() < 16 << 20 {
        s.push('.');
    }
    s
}

/// The message scenario on one WebSocket stream of an HTTP/2 connection.
async fn scenario(server: Server, transport: Transport, deflate: bool) {
    let mut running = start(server, transport, server_config(deflate)).await;
    let mut sender = h2_client(&running).await;
    let mut ws = rapidws::http2::connect(
        &mut sender,
        &url(&running, "/echo"),
        &client_config(deflate),
    )
    .await
    .unwrap();
    expect_opened(&mut running, "/echo", deflate).await;

    let text = "héllo wörld — ✓ 𝄞 日本語 🚀";
    ws.send(Message::text(text)).await.unwrap();
    assert_eq!(ws.recv().await.unwrap(), Some(Message::text(text)));

    let binary: Vec<u8> = (0..=255u8).cycle().take(4096).collect();
    ws.send(Message::binary(binary.clone())).await.unwrap();
    assert_eq!(ws.recv().await.unwrap(), Some(Message::binary(binary)));

    // Empty messages: with deflate on they are sent compressed (RFC 7692 7.2.3.6).
    ws.send(Message::text("")).await.unwrap();
    assert_eq!(ws.recv().await.unwrap(), Some(Message::text("")));
    ws.send(Message::binary(Vec::new())).await.unwrap();
    assert_eq!(ws.recv().await.unwrap(), Some(Message::binary(Vec::new())));

    let big = big_text();
    ws.send(Message::text(big.clone())).await.unwrap();
    match ws.recv().await.unwrap() {
        Some(Message::Text(t)) => assert!(t.as_str() == big, "16 MiB echo differs"),
        other => panic!("expected the 16 MiB text, got {other:?}"),
    }

    ws.ping("are you there").await.unwrap();
    assert_eq!(
        ws.recv().await.unwrap(),
        Some(Message::Pong(Bytes::from_static(b"are you there")))
    );

    ws.close(1000, "done").await.unwrap();
    // The close handshake completes: the server's close arrives, then its END_STREAM.
    assert_eq!(ws.recv().await.unwrap(), None);
    assert_eq!(ws.close_frame().map(|c| c.code.0), Some(1000));
    assert_eq!(expect_ended(&mut running).await, Ok(Some(1000)));

    // The HTTP/2 connection outlives the stream: another WebSocket opens on it.
    let mut again = rapidws::http2::connect(
        &mut sender,
        &url(&running, "/echo"),
        &client_config(deflate),
    )
    .await
    .unwrap();
    expect_opened(&mut running, "/echo", deflate).await;
    again.send(Message::text("again")).await.unwrap();
    assert_eq!(again.recv().await.unwrap(), Some(Message::text("again")));
    again.close(1000, "").await.unwrap();
    assert_eq!(again.recv().await.unwrap(), None);
}

async fn bounded(test: impl Future<Output = ()>) {
    tokio::time::timeout(LIMIT, test)
        .await
        .expect("test timed out");
}

#[tokio::test]
async fn hyper_tls_messages_without_deflate() {
    bounded(scenario(Server::Hyper, Transport::Tls, false)).await;
}

#[tokio::test]
async fn hyper_tls_messages_with_deflate() {
    bounded(scenario(Server::Hyper, Transport::Tls, true)).await;
}

#[tokio::test]
async fn hyper_cleartext_messages_without_deflate() {
    bounded(scenario(Server::Hyper, Transport::Cleartext, false)).await;
}

#[tokio::test]
async fn hyper_cleartext_messages_with_deflate() {
    bounded(scenario(Server::Hyper, Transport::Cleartext, true)).await;
}

#[tokio::test]
async fn axum_tls_messages_without_deflate() {
    bounded(scenario(Server::Axum, Transport::Tls, false)).await;
}

#[tokio::test]
async fn axum_tls_messages_with_deflate() {
    bounded(scenario(Server::Axum, Transport::Tls, true)).await;
}

#[tokio::test]
async fn axum_cleartext_messages_without_deflate() {
    bounded(scenario(Server::Axum, Transport::Cleartext, false)).await;
}

#[tokio::test]
async fn axum_cleartext_messages_with_deflate() {
    bounded(scenario(Server::Axum, Transport::Cleartext, true)).await;
}

/// 8 WebSockets as concurrent streams of one HTTP/2 connection, 1,000 messages each,
/// every echo checked in order; half of them compressed.
async fn eight_streams(server: Server, transport: Transport) {
    const STREAMS: usize = 8;
    const MESSAGES: usize = 1000;
    let mut running = start(server, transport, server_config(true)).await;
    let sender = h2_client(&running).await;
    let mut tasks = Vec::new();
    for s in 0..STREAMS {
        let mut sender = sender.clone();
        let url = url(&running, "/echo");
        tasks.push(tokio::spawn(async move {
            let config = client_config(s % 2 == 0);
            let ws = rapidws::http2::connect(&mut sender, &url, &config)
                .await
                .unwrap();
            let (mut rx, mut tx) = ws.into_split();
            let writer = tokio::spawn(async move {
                for i in 0..MESSAGES {
                    tx.send(Message::text(format!("stream {s} message {i} ✓")))
                        .await
                        .unwrap();
                }
                tx
            });
            for i in 0..MESSAGES {
                let want = format!("stream {s} message {i} ✓");
                assert_eq!(rx.recv().await.unwrap(), Some(Message::text(want)));
            }
            let mut tx = writer.await.unwrap();
            tx.close(1000, "").await.unwrap();
            // A read half hands the peer's close over as a message, then ends.
            match rx.recv().await.unwrap() {
                Some(Message::Close(Some(c))) => assert_eq!(c.code, 1000),
                other => panic!("expected the close echo, got {other:?}"),
            }
            assert_eq!(rx.recv().await.unwrap(), None);
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let (mut opened, mut ended) = (0, 0);
    while opened < STREAMS || ended < STREAMS {
        match next_report(&mut running).await {
            Report::Opened { http2, .. } => {
                assert!(http2);
                opened += 1;
            }
            Report::Ended(e) => {
                assert_eq!(e, Ok(Some(1000)));
                ended += 1;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[tokio::test]
async fn hyper_tls_eight_streams_of_one_connection() {
    bounded(eight_streams(Server::Hyper, Transport::Tls)).await;
}

#[tokio::test]
async fn hyper_cleartext_eight_streams_of_one_connection() {
    bounded(eight_streams(Server::Hyper, Transport::Cleartext)).await;
}

#[tokio::test]
async fn axum_tls_eight_streams_of_one_connection() {
    bounded(eight_streams(Server::Axum, Transport::Tls)).await;
}

#[tokio::test]
async fn axum_cleartext_eight_streams_of_one_connection() {
    bounded(eight_streams(Server::Axum, Transport::Cleartext)).await;
}

async fn subprotocols(server: Server) {
    let mut running = start(server, Transport::Tls, server_config(false)).await;
    let mut sender = h2_client(&running).await;
    // Offered but not spoken by the server: the WebSocket opens without one.
    let mut config = client_config(false);
    config.subprotocols = vec!["chat".to_owned()];
    let ws = rapidws::http2::connect(&mut sender, &url(&running, "/echo"), &config)
        .await
        .unwrap();
    assert_eq!(ws.subprotocol(), None);
    match next_report(&mut running).await {
        Report::Opened { subprotocol, .. } => assert_eq!(subprotocol, None),
        other => panic!("{other:?}"),
    }
    // Offered and spoken: selected on both ends.
    config.subprotocols = vec!["chat".to_owned(), "superchat".to_owned()];
    let ws = rapidws::http2::connect(&mut sender, &url(&running, "/echo"), &config)
        .await
        .unwrap();
    assert_eq!(ws.subprotocol(), Some("superchat"));
    loop {
        match next_report(&mut running).await {
            Report::Opened { subprotocol, .. } => {
                assert_eq!(subprotocol.as_deref(), Some("superchat"));
                break;
            }
            Report::Ended(_) => {}
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test]
async fn hyper_unspoken_subprotocol_is_not_selected() {
    bounded(subprotocols(Server::Hyper)).await;
}

#[tokio::test]
async fn axum_unspoken_subprotocol_is_not_selected() {
    bounded(subprotocols(Server::Axum)).await;
}

/// RFC 8441 6: a reset stream is an abnormal closure, 1006 to the application: the side
/// that did not reset gets an IO error, and the connection's other streams go on.
async fn reset_streams(server: Server, transport: Transport) {
    let mut running = start(server, transport, server_config(true)).await;
    let mut sender = h2_client(&running).await;
    let mut survivor =
        rapidws::http2::connect(&mut sender, &url(&running, "/echo"), &client_config(true))
            .await
            .unwrap();
    expect_opened(&mut running, "/echo", true).await;

    // The client resets: dropping the stream mid-conversation sends RST_STREAM.
    let mut ws =
        rapidws::http2::connect(&mut sender, &url(&running, "/echo"), &client_config(true))
            .await
            .unwrap();
    expect_opened(&mut running, "/echo", true).await;
    ws.send(Message::text("hi")).await.unwrap();
    assert_eq!(ws.recv().await.unwrap(), Some(Message::text("hi")));
    drop(ws);
    match expect_ended(&mut running).await {
        Err(e) => assert!(e.starts_with("Io("), "{e}"),
        Ok(code) => panic!("a reset stream ended cleanly with {code:?}"),
    }

    // The server resets: its handler drops the WebSocket without a close.
    let mut ws =
        rapidws::http2::connect(&mut sender, &url(&running, "/drop"), &client_config(true))
            .await
            .unwrap();
    expect_opened(&mut running, "/drop", true).await;
    ws.send(Message::text("bye")).await.unwrap();
    match ws.recv().await {
        Err(Error::Io(_)) => {}
        other => panic!("expected an IO error (1006) after the reset, got {other:?}"),
    }

    // The other stream of the connection is unaffected.
    survivor.send(Message::text("still here")).await.unwrap();
    assert_eq!(
        survivor.recv().await.unwrap(),
        Some(Message::text("still here"))
    );
    survivor.close(1000, "").await.unwrap();
    assert_eq!(survivor.recv().await.unwrap(), None);
}

#[tokio::test]
async fn hyper_reset_stream_is_an_abnormal_close() {
    bounded(reset_streams(Server::Hyper, Transport::Tls)).await;
}

#[tokio::test]
async fn axum_reset_stream_is_an_abnormal_close() {
    bounded(reset_streams(Server::Axum, Transport::Cleartext)).await;
}

/// HTTP/2 flow control is the send queue's backpressure: a client that does not read
/// stops the server's writes once the stream window is spent, the server's queue fills and
/// refuses more; every message still arrives, in order, once the client reads.
#[tokio::test]
async fn flow_control_is_the_send_queues_backpressure() {
    bounded(async {
        let mut running = start(Server::Hyper, Transport::Cleartext, server_config(false)).await;
        let mut sender = h2_client(&running).await;
        let mut ws =
            rapidws::http2::connect(&mut sender, &url(&running, "/flood"), &client_config(false))
                .await
                .unwrap();
        expect_opened(&mut running, "/flood", false).await;
        let taken = match next_report(&mut running).await {
            Report::QueueFull(n) => n,
            other => panic!("expected the queue to fill, got {other:?}"),
        };
        // The stream and connection windows (hyper's client defaults are a few MiB) plus
        // the 256 KiB queue, not the 64 MiB the server would have sent.
        assert!(
            taken < 16 << 20,
            "{taken} bytes were taken before the queue filled"
        );
        let mut received = 0usize;
        loop {
            match ws.recv().await.unwrap() {
                Some(Message::Binary(b)) => {
                    assert!(b.iter().all(|&x| x == 7));
                    received += b.len();
                }
                Some(Message::Text(t)) => {
                    assert_eq!(t.as_str(), "done");
                    break;
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(received, taken);
        ws.close(1000, "").await.unwrap();
        assert_eq!(ws.recv().await.unwrap(), None);
    })
    .await;
}

/// HTTP/1.1 (ALPN `http/1.1`) and HTTP/2 (ALPN `h2`) WebSockets on one TLS port, both
/// served by the same route.
async fn both_versions(server: Server) {
    let mut running = start(server, Transport::Tls, server_config(true)).await;
    let tcp = TcpStream::connect(running.addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let tls = tls_connector(&running.cert, b"http/1.1")
        .connect(name, tcp)
        .await
        .unwrap();
    let host = format!("localhost:{}", running.addr.port());
    let mut h1 = rapidws::tokio::client_handshake(tls, &host, "/echo", &client_config(true))
        .await
        .unwrap();
    match next_report(&mut running).await {
        Report::Opened { http2, .. } => assert!(!http2),
        other => panic!("{other:?}"),
    }
    let mut sender = h2_client(&running).await;
    let mut h2 =
        rapidws::http2::connect(&mut sender, &url(&running, "/echo"), &client_config(true))
            .await
            .unwrap();
    expect_opened(&mut running, "/echo", true).await;
    for ws in [&mut h1] {
        ws.send(Message::text("one")).await.unwrap();
        assert_eq!(ws.recv().await.unwrap(), Some(Message::text("one")));
        ws.close(1000, "").await.unwrap();
        assert_eq!(ws.recv().await.unwrap(), None);
    }
    h2.send(Message::text("two")).await.unwrap();
    assert_eq!(h2.recv().await.unwrap(), Some(Message::text("two")));
    h2.close(1000, "").await.unwrap();
    assert_eq!(h2.recv().await.unwrap(), None);
}

#[tokio::test]
async fn hyper_serves_http1_and_http2_websockets_on_one_port() {
    bounded(both_versions(Server::Hyper)).await;
}

#[tokio::test]
async fn axum_serves_http1_and_http2_websockets_on_one_port() {
    bounded(both_versions(Server::Axum)).await;
}

/// Sends a raw HTTP/2 request (no rapidws client) and returns the status.
async fn raw_status(sender: &mut SendRequest<Empty<Bytes>>, request: Request<Empty<Bytes>>) -> u16 {
    sender.ready().await.unwrap();
    let response = sender.send_request(request).await.unwrap();
    response.status().as_u16()
}

fn extended_connect(
    running: &Running,
    protocol: Option<&'static str>,
) -> hyper::http::request::Builder {
    let mut b = Request::builder()
        .method(Method::CONNECT)
        .version(Version::HTTP_2)
        .uri(format!("https://localhost:{}/echo", running.addr.port()));
    if let Some(p) = protocol {
        b = b.extension(hyper::ext::Protocol::from_static(p));
    }
    b
}

/// Bad requests get the HTTP/2 answer that fits, and the connection goes on.
async fn refusals(server: Server) {
    let running = start(server, Transport::Tls, server_config(false)).await;
    let mut sender = h2_client(&running).await;
    let port = running.addr.port();

    // A GET over HTTP/2 to the WebSocket route: 405, it takes CONNECT (hyper's route; axum's
    // extractor says the same).
    let get = Request::builder()
        .uri(format!("https://localhost:{port}/echo"))
        .version(Version::HTTP_2)
        .header("sec-websocket-version", "13")
        .body(Empty::new())
        .unwrap();
    let response = {
        sender.ready().await.unwrap();
        sender.send_request(get).await.unwrap()
    };
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(response.headers()["allow"], "CONNECT");

    // :protocol other than websocket: 501.
    let other = extended_connect(&running, Some("webtransport"))
        .header("sec-websocket-version", "13")
        .body(Empty::new())
        .unwrap();
    assert_eq!(raw_status(&mut sender, other).await, 501);

    // A plain CONNECT (a tunnel request): 501.
    let tunnel = Request::builder()
        .method(Method::CONNECT)
        .version(Version::HTTP_2)
        .uri(format!("localhost:{port}"))
        .body(Empty::new())
        .unwrap();
    let status = raw_status(&mut sender, tunnel).await;
    // axum routes by path, and a tunnel request has none: its router answers 404 before
    // the extractor is reached.
    match server {
        Server::Hyper => assert_eq!(status, 501),
        Server::Axum => assert!(status == 404 || status == 501, "{status}"),
    }

    // Version 8: 400 naming 13.
    let old = extended_connect(&running, Some("websocket"))
        .header("sec-websocket-version", "8")
        .body(Empty::new())
        .unwrap();
    sender.ready().await.unwrap();
    let response = sender.send_request(old).await.unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_eq!(response.headers()["sec-websocket-version"], "13");

    // Header fields past the count limit: 431.
    let mut many =
        extended_connect(&running, Some("websocket")).header("sec-websocket-version", "13");
    for i in 0..120 {
        many = many.header(format!("x-filler-{i}"), "x");
    }
    assert_eq!(
        raw_status(&mut sender, many.body(Empty::new()).unwrap()).await,
        431
    );

    // The rapidws client sees a refusal as a status.
    let mut config = client_config(false);
    config.headers = (0..120)
        .map(|i| (format!("x-filler-{i}"), "x".to_owned()))
        .collect();
    match rapidws::http2::connect(&mut sender, &url(&running, "/echo"), &config).await {
        Err(Error::ClientHandshake(rapidws::handshake::ClientError::Status(r))) => {
            assert_eq!(r.status, 431)
        }
        other => panic!("expected a 431 refusal, got {:?}", other.map(|_| ())),
    }

    // An acceptable extended CONNECT: 200 with the negotiated extension, no accept key.
    let good = extended_connect(&running, Some("websocket"))
        .header("sec-websocket-version", "13")
        .header("sec-websocket-protocol", "superchat")
        .body(Empty::new())
        .unwrap();
    sender.ready().await.unwrap();
    let response = sender.send_request(good).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["sec-websocket-protocol"], "superchat");
    assert!(!response.headers().contains_key("sec-websocket-accept"));
    drop(response);

    // After all that, the connection still opens WebSockets.
    let mut ws =
        rapidws::http2::connect(&mut sender, &url(&running, "/echo"), &client_config(false))
            .await
            .unwrap();
    ws.send(Message::text("fine")).await.unwrap();
    assert_eq!(ws.recv().await.unwrap(), Some(Message::text("fine")));
}

#[tokio::test]
async fn hyper_refusals_fit_http2() {
    bounded(refusals(Server::Hyper)).await;
}

#[tokio::test]
async fn axum_refusals_fit_http2() {
    bounded(refusals(Server::Axum)).await;
}

/// Empty messages (and others) go compressed in both directions over an HTTP/2 stream:
/// the client end here is the sans-IO core on the upgraded stream, so every frame's first
/// bytes are seen as they leave and arrive. RFC 7692 7.2.3.6: an empty message compresses
/// to a single 0x00 byte (or nothing), with RSV1 set. The close then ends with END_STREAM
/// from both sides.
async fn compressed_on_the_wire(server: Server) {
    use rapidws::codec::MessageKind;
    use rapidws::connection::{Config as CoreConfig, Connection, OwnedEvent};
    use rapidws::deflate::PerMessageDeflate;
    use rapidws::handshake::{ClientConfig as HsConfig, ClientRequest, Http2ClientHandshake};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let everything = DeflateConfig::default()
        .min_size(0)
        .predict_incompressible(false);
    let mut config = ServerConfig::default();
    config.handshake = config.handshake.with_deflate(Some(everything.clone()));
    let mut running = start(server, Transport::Cleartext, config).await;
    let mut sender = h2_client(&running).await;

    let request = ClientRequest::new(format!("localhost:{}", running.addr.port()), "/echo");
    let (handshake, fields) = Http2ClientHandshake::new(
        &request,
        HsConfig::default().with_deflate(Some(everything.clone())),
    )
    .unwrap();
    let mut connect = extended_connect(&running, Some("websocket"));
    for (name, value) in &fields {
        connect = connect.header(name.as_str(), value.as_str());
    }
    sender.ready().await.unwrap();
    let mut response = sender
        .send_request(connect.body(Empty::new()).unwrap())
        .await
        .unwrap();
    let headers = response
        .headers()
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_bytes()));
    let upgraded = handshake
        .check(response.status().as_u16(), headers)
        .unwrap();
    let params = upgraded.deflate.expect("permessage-deflate agreed");
    let mut stream = TokioIo::new(hyper::upgrade::on(&mut response).await.unwrap());
    expect_opened(&mut running, "/echo", true).await;

    let now = std::time::Instant::now();
    let mut conn = Connection::new(rapidws::Role::Client, CoreConfig::default(), now);
    conn.set_deflate(PerMessageDeflate::new(
        rapidws::Role::Client,
        params,
        &everything,
    ));
    let messages: [(MessageKind, &[u8]); 4] = [
        (MessageKind::Text, b""),
        (MessageKind::Binary, b""),
        (MessageKind::Text, "héllo wörld — ✓ 日本語".as_bytes()),
        (MessageKind::Binary, &[0u8; 300]),
    ];
    let mut inbox = Vec::new();
    for (kind, payload) in messages {
        conn.send(kind, payload).unwrap();
        let mut out = Vec::new();
        conn.write_pending(&mut out);
        // Client to server: FIN, RSV1 (compressed), masked; an empty one carries <= 1 byte.
        assert_eq!(out[0] & 0xC0, 0xC0, "client frame header {:02x}", out[0]);
        if payload.is_empty() {
            assert!(
                out[1] & 0x7F <= 1,
                "empty message sent as {} bytes",
                out[1] & 0x7F
            );
        }
        stream.write_all(&out).await.unwrap();
        stream.flush().await.unwrap();
        // Server to client: the echo, one frame, compressed too.
        let mut head = [0u8; 2];
        stream.read_exact(&mut head).await.unwrap();
        assert_eq!(head[0] & 0xC0, 0xC0, "server frame header {:02x}", head[0]);
        assert_eq!(head[1] & 0x80, 0, "a server frame must not be masked");
        let len = match head[1] & 0x7F {
            126 => {
                let mut l = [0u8; 2];
                stream.read_exact(&mut l).await.unwrap();
                inbox.extend_from_slice(&head);
                inbox.extend_from_slice(&l);
                u16::from_be_bytes(l) as usize
            }
            n => {
                inbox.extend_from_slice(&head);
                n as usize
            }
        };
        if payload.is_empty() {
            assert!(len <= 1, "empty message echoed as {len} bytes");
        } else if payload.iter().all(|&b| b == 0) {
            // The 300 zero bytes shrink; the short text is compressed but not smaller.
            assert!(len < 16, "{len} bytes on the wire for {}", payload.len());
        }
        let mut body = vec![0u8; len];
        stream.read_exact(&mut body).await.unwrap();
        inbox.extend_from_slice(&body);
        conn.handle_bytes(now, &inbox);
        inbox.clear();
        match conn.poll_event_owned() {
            Some(Ok(OwnedEvent::Message { kind: k, data })) => {
                assert_eq!(k, kind);
                assert_eq!(&data[..], payload);
            }
            other => panic!("expected the echo, got {other:?}"),
        }
    }

    // RFC 8441 6: the close handshake, then END_STREAM in each direction. Our close goes
    // out; the server's close comes back and its END_STREAM follows (the stream reads EOF);
    // ours ends the stream, and the server's WebSocket reports a clean 1000.
    conn.close(now, rapidws::codec::CloseCode(1000), "bye")
        .unwrap();
    let mut out = Vec::new();
    conn.write_pending(&mut out);
    stream.write_all(&out).await.unwrap();
    stream.flush().await.unwrap();
    let mut rest = Vec::new();
    stream.read_to_end(&mut rest).await.unwrap();
    conn.handle_bytes(now, &rest);
    match conn.poll_event_owned() {
        Some(Ok(OwnedEvent::Close(Some(frame)))) => assert_eq!(frame.code, 1000),
        other => panic!("expected the server's close, got {other:?}"),
    }
    assert!(conn.is_closed());
    stream.shutdown().await.unwrap();
    assert_eq!(expect_ended(&mut running).await, Ok(Some(1000)));
}

#[tokio::test]
async fn hyper_empty_messages_go_compressed_both_ways_and_the_close_ends_the_stream() {
    bounded(compressed_on_the_wire(Server::Hyper)).await;
}

#[tokio::test]
async fn axum_empty_messages_go_compressed_both_ways_and_the_close_ends_the_stream() {
    bounded(compressed_on_the_wire(Server::Axum)).await;
}
