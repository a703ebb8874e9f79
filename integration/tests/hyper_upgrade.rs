//! WebSocket upgrades on a hyper 1.x server (`rapidws::hyper`), driven by the rapidws tokio
//! client and by raw HTTP for the refusals.
#![cfg(all(feature = "hyper", feature = "deflate"))]

mod upgrade_support;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rapidws::deflate::{DeflateConfig, DeflateParams};
use rapidws::handshake::accept_key;
use rapidws::tokio::{ClientConfig, ServerConfig};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use upgrade_support::*;

/// What the server saw of each accepted upgrade: the agreed deflate parameters.
type Seen = mpsc::UnboundedReceiver<Option<DeflateParams>>;

/// A hyper server on a free loopback port: `/ws` echoes over WebSocket, anything else is
/// answered 404.
async fn hyper_server(config: ServerConfig) -> (SocketAddr, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config = Arc::new(config);
    let (seen_tx, seen) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let config = config.clone();
            let seen_tx = seen_tx.clone();
            let service =
                service_fn(move |request| handle(request, config.clone(), seen_tx.clone()));
            tokio::spawn(
                http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .with_upgrades(),
            );
        }
    });
    (addr, seen)
}

async fn handle(
    mut request: Request<Incoming>,
    config: Arc<ServerConfig>,
    seen: mpsc::UnboundedSender<Option<DeflateParams>>,
) -> Result<Response<String>, Infallible> {
    if request.uri().path() != "/ws" {
        let mut response = Response::new("not here".to_owned());
        *response.status_mut() = StatusCode::NOT_FOUND;
        return Ok(response);
    }
    // The request is hyper's own: read it through `http` types before upgrading.
    let user = request.headers().get("x-user").cloned();
    match rapidws::hyper::upgrade(&mut request, &config) {
        Ok((mut response, websocket)) => {
            // And the 101 response is the service's own to add headers to.
            if let Some(user) = user {
                response.headers_mut().insert("x-hello", user);
            }
            let _ = seen.send(websocket.deflate().copied());
            tokio::spawn(async move {
                let Ok(mut ws) = websocket.await else { return };
                while let Ok(Some(msg)) = ws.recv().await {
                    if msg.is_data() && ws.send(msg).await.is_err() {
                        break;
                    }
                }
            });
            Ok(response)
        }
        Err(refusal) => Ok(refusal.response()),
    }
}

fn deflate_server() -> ServerConfig {
    ServerConfig::default().with_deflate(Some(DeflateConfig::default()))
}

#[tokio::test]
async fn echo_without_deflate_when_the_server_declines_it() {
    let (addr, mut seen) = hyper_server(ServerConfig::default()).await;
    echo_text_and_binary(addr, "/ws", &client(true)).await;
    assert_eq!(bounded(seen.recv()).await, Some(None));
}

#[tokio::test]
async fn echo_without_deflate_when_the_client_does_not_offer_it() {
    let (addr, mut seen) = hyper_server(deflate_server()).await;
    echo_text_and_binary(addr, "/ws", &client(false)).await;
    assert_eq!(bounded(seen.recv()).await, Some(None));
}

#[tokio::test]
async fn echo_with_deflate_negotiated() {
    let (addr, mut seen) = hyper_server(deflate_server()).await;
    echo_text_and_binary(addr, "/ws", &client(true)).await;
    assert_eq!(
        bounded(seen.recv()).await,
        Some(Some(DeflateParams::default()))
    );
}

#[tokio::test]
async fn switching_protocols_response_carries_accept_key_and_extension() {
    let (addr, _seen) = hyper_server(deflate_server()).await;
    let request = upgrade_request(
        "/ws",
        "13",
        "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n",
    );
    let (response, _stream) = exchange(addr, request.as_bytes()).await;
    assert_eq!(response.status, 101);
    assert_eq!(response.header("upgrade"), Some("websocket"));
    assert_eq!(
        response.header("sec-websocket-accept"),
        Some(accept_key(b"dGhlIHNhbXBsZSBub25jZQ==").as_str())
    );
    assert_eq!(
        response.header("sec-websocket-extensions"),
        Some("permessage-deflate")
    );
}

#[tokio::test]
async fn server_selects_its_most_preferred_offered_subprotocol() {
    let config = ServerConfig::default().with_subprotocols(["mqtt", "chat"]);
    let (addr, _seen) = hyper_server(config).await;
    let client = ClientConfig::default().with_subprotocols(["chat", "mqtt"]);
    let ws = bounded(rapidws::tokio::connect(&format!("ws://{addr}/ws"), &client))
        .await
        .unwrap();
    assert_eq!(ws.subprotocol(), Some("mqtt"));
}

#[tokio::test]
async fn frame_sent_right_after_the_request_is_not_lost() {
    let (addr, _seen) = hyper_server(ServerConfig::default()).await;
    assert_early_frame_is_not_lost(addr).await;
}

#[tokio::test]
async fn plain_get_to_the_websocket_route_is_refused_with_400() {
    let (addr, mut seen) = hyper_server(ServerConfig::default()).await;
    assert_plain_get_is_refused_with_400(addr).await;
    // The other route still answers as plain HTTP.
    let (other, _stream) = exchange(addr, b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").await;
    assert_eq!(other.status, 404);
    assert!(seen.try_recv().is_err(), "nothing was upgraded");
}

#[tokio::test]
async fn post_to_the_websocket_route_is_refused_with_405_allowing_get() {
    let (addr, _seen) = hyper_server(ServerConfig::default()).await;
    let request = upgrade_request("/ws", "13", "").replacen("GET", "POST", 1);
    let (response, _stream) = exchange(addr, request.as_bytes()).await;
    assert_eq!(response.status, 405);
    assert_eq!(response.header("allow"), Some("GET"));
}

#[tokio::test]
async fn unsupported_websocket_version_is_refused_with_426_naming_13() {
    let (addr, mut seen) = hyper_server(ServerConfig::default()).await;
    assert_version_8_is_refused_with_426(addr).await;
    assert!(seen.try_recv().is_err(), "nothing was upgraded");
}

#[tokio::test]
async fn refused_origin_gets_403() {
    let mut config = ServerConfig::default();
    config.handshake = config
        .handshake
        .with_origin_check(|origin| origin == Some("https://good.example"));
    let (addr, _seen) = hyper_server(config).await;
    let request = upgrade_request("/ws", "13", "Origin: https://evil.example\r\n");
    let (response, _stream) = exchange(addr, request.as_bytes()).await;
    assert_eq!(response.status, 403);
}

#[tokio::test]
async fn the_service_reads_the_request_and_adds_response_headers() {
    let (addr, mut seen) = hyper_server(deflate_server()).await;
    let config = client(true).with_header("X-User", "grace");
    let (mut ws, response) = bounded(rapidws::tokio::connect_with_response(
        &format!("ws://{addr}/ws"),
        &config,
    ))
    .await
    .unwrap();
    assert_eq!(response.header("x-hello"), Some(&b"grace"[..]));
    assert!(response.is_deflate());
    assert!(seen.recv().await.unwrap().is_some());
    bounded(ws.close(1000, "")).await.unwrap();
}
