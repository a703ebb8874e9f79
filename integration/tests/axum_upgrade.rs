//! WebSocket upgrades on an axum 0.8 router (`rapidws::axum::WebSocketUpgrade`), driven by
//! the rapidws tokio client and by raw HTTP for the refusals.
#![cfg(all(feature = "axum", feature = "deflate"))]

mod upgrade_support;

use std::net::SocketAddr;

use axum::Router;
use axum::extract::State;
use axum::response::IntoResponse;
use axum::routing::get;
use rapidws::axum::WebSocketUpgrade;
use rapidws::deflate::DeflateConfig;
use rapidws::hyper::HyperWebSocket;
use rapidws::tokio::{ClientConfig, Message, connect};
use tokio::net::TcpListener;
use upgrade_support::*;

/// How the test route configures the extractor.
#[derive(Clone, Copy)]
struct Setup {
    deflate: bool,
    max_message_size: Option<usize>,
}

const PLAIN: Setup = Setup {
    deflate: false,
    max_message_size: None,
};
const DEFLATE: Setup = Setup {
    deflate: true,
    max_message_size: None,
};

/// An axum server on a free loopback port: `/ws` echoes over WebSocket, `/` is plain HTTP.
async fn axum_server(setup: Setup) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new()
        .route("/", get(|| async { "plain" }))
        .route("/ws", get(websocket))
        .with_state(setup);
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

async fn websocket(ws: WebSocketUpgrade, State(setup): State<Setup>) -> impl IntoResponse {
    let mut ws = ws
        .protocols(["mqtt", "chat"])
        .deflate(setup.deflate.then(DeflateConfig::default));
    if let Some(limit) = setup.max_message_size {
        ws = ws.max_message_size(limit);
    }
    ws.on_upgrade(echo)
}

async fn echo(mut ws: HyperWebSocket) {
    while let Ok(Some(msg)) = ws.recv().await {
        if msg.is_data() && ws.send(msg).await.is_err() {
            break;
        }
    }
}

/// Offers permessage-deflate in a raw upgrade request; returns the 101 response's
/// `Sec-WebSocket-Extensions`, if any.
async fn extension_answering_an_offer(addr: SocketAddr) -> Option<String> {
    let request = upgrade_request(
        "/ws",
        "13",
        "Sec-WebSocket-Extensions: permessage-deflate\r\n",
    );
    let (response, _stream) = exchange(addr, request.as_bytes()).await;
    assert_eq!(response.status, 101);
    response
        .header("sec-websocket-extensions")
        .map(str::to_owned)
}

#[tokio::test]
async fn echo_without_deflate_when_the_route_declines_it() {
    let addr = axum_server(PLAIN).await;
    echo_text_and_binary(addr, "/ws", &client(true)).await;
    assert_eq!(extension_answering_an_offer(addr).await, None);
}

#[tokio::test]
async fn echo_without_deflate_when_the_client_does_not_offer_it() {
    let addr = axum_server(DEFLATE).await;
    echo_text_and_binary(addr, "/ws", &client(false)).await;
}

#[tokio::test]
async fn echo_with_deflate_negotiated() {
    let addr = axum_server(DEFLATE).await;
    echo_text_and_binary(addr, "/ws", &client(true)).await;
    assert_eq!(
        extension_answering_an_offer(addr).await.as_deref(),
        Some("permessage-deflate")
    );
}

#[tokio::test]
async fn protocols_builder_selects_the_routes_most_preferred_offer() {
    let addr = axum_server(PLAIN).await;
    let client = ClientConfig::default().with_subprotocols(["chat", "mqtt"]);
    let ws = bounded(connect(&format!("ws://{addr}/ws"), &client))
        .await
        .unwrap();
    assert_eq!(ws.subprotocol(), Some("mqtt"));
}

#[tokio::test]
async fn max_message_size_builder_applies_to_the_connection() {
    let addr = axum_server(Setup {
        deflate: false,
        max_message_size: Some(1000),
    })
    .await;
    let mut ws = bounded(connect(&format!("ws://{addr}/ws"), &client(false)))
        .await
        .unwrap();
    bounded(ws.send(Message::text("x".repeat(999))))
        .await
        .unwrap();
    assert_eq!(
        bounded(ws.recv()).await.unwrap(),
        Some(Message::text("x".repeat(999)))
    );
    bounded(ws.send(Message::Binary(pattern(1001).into())))
        .await
        .unwrap();
    // RFC 6455 7.4.1: 1009, a message too big to process.
    match bounded(ws.recv()).await.unwrap() {
        Some(Message::Close(Some(frame))) => assert_eq!(frame.code, 1009),
        other => panic!("expected a 1009 close, got {other:?}"),
    }
}

#[tokio::test]
async fn frame_sent_right_after_the_request_is_not_lost() {
    let addr = axum_server(PLAIN).await;
    assert_early_frame_is_not_lost(addr).await;
}

#[tokio::test]
async fn plain_get_to_the_websocket_route_is_rejected_with_400() {
    let addr = axum_server(PLAIN).await;
    assert_plain_get_is_refused_with_400(addr).await;
    let (other, _stream) = exchange(addr, b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").await;
    assert_eq!((other.status, other.body.as_slice()), (200, &b"plain"[..]));
}

#[tokio::test]
async fn unsupported_websocket_version_is_rejected_with_426_naming_13() {
    let addr = axum_server(PLAIN).await;
    assert_version_8_is_refused_with_426(addr).await;
}

/// A route whose builder calls `.config(..)` last, after the finer setters, reads the
/// request through `http` types and adds a response header.
async fn configured_route(ws: WebSocketUpgrade) -> impl IntoResponse {
    let limit: usize = ws
        .uri()
        .query()
        .and_then(|q| q.strip_prefix("limit="))
        .and_then(|n| n.parse().ok())
        .unwrap_or(1000);
    let user = ws.headers().get("x-user").cloned();
    let mut response = ws
        .max_message_size(limit)
        .deflate(Some(DeflateConfig::default()))
        .protocols(["chat"])
        .config(rapidws::tokio::ServerConfig::default().with_max_connections(10))
        .on_upgrade(echo);
    if let Some(user) = user {
        response.headers_mut().insert("x-hello", user);
    }
    response
}

async fn configured_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new().route("/ws", get(configured_route));
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

#[tokio::test]
async fn config_after_the_finer_setters_keeps_them() {
    let addr = configured_server().await;
    let config = client(true)
        .with_subprotocols(["chat"])
        .with_header("X-User", "ada");
    let (mut ws, response) = bounded(rapidws::tokio::connect_with_response(
        &format!("ws://{addr}/ws"),
        &config,
    ))
    .await
    .unwrap();
    // .deflate() and .protocols() survived the later .config(..).
    assert!(response.is_deflate());
    assert_eq!(response.subprotocol(), Some("chat"));
    // The route read the request header and answered with its own.
    assert_eq!(response.header("x-hello"), Some(&b"ada"[..]));
    // .max_message_size(1000) survived too: 1001 bytes are refused with 1009.
    bounded(ws.send(Message::Binary(pattern(1001).into())))
        .await
        .unwrap();
    match bounded(ws.recv()).await.unwrap() {
        Some(Message::Close(Some(frame))) => assert_eq!(frame.code, 1009),
        other => panic!("expected a 1009 close, got {other:?}"),
    }
}

#[tokio::test]
async fn max_message_size_zero_means_the_default_not_refuse_everything() {
    let addr = configured_server().await;
    let url = format!("ws://{addr}/ws?limit=0");
    let mut ws = bounded(connect(&url, &client(false))).await.unwrap();
    let big = Message::Binary(pattern(100_000).into());
    bounded(ws.send(big.clone())).await.unwrap();
    assert_eq!(bounded(ws.recv()).await.unwrap(), Some(big));
    bounded(ws.close(1000, "")).await.unwrap();
}

/// axum's graceful shutdown does not reach the WebSockets its routes handed over; a route
/// that puts its upgrade under a `Shutdown` signal does: at the signal the client gets
/// what the route sent, then 1001, and `drained` sees the connection gone.
#[tokio::test]
async fn a_route_under_a_shutdown_signal_goes_away_with_axum() {
    let shutdown = rapidws::tokio::Shutdown::new();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let route = {
        let shutdown = shutdown.clone();
        get(move |ws: WebSocketUpgrade| async move {
            ws.shutdown(&shutdown).on_upgrade(|mut ws| async move {
                // Queued, not written: the receive writes it, then the close.
                ws.feed(Message::text("last words")).await.unwrap();
                while let Ok(Some(_)) = ws.recv().await {}
            })
        })
    };
    let app = Router::new().route("/ws", route);
    let server = tokio::spawn(
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.triggered())
            .into_future(),
    );
    let mut ws = bounded(connect(&format!("ws://{addr}/ws"), &client(false)))
        .await
        .unwrap();
    bounded(async {
        while shutdown.connections() == 0 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    shutdown.trigger();
    assert_eq!(
        bounded(ws.recv()).await.unwrap(),
        Some(Message::text("last words"))
    );
    match bounded(ws.recv()).await.unwrap() {
        Some(Message::Close(Some(frame))) => {
            assert_eq!((frame.code.0, frame.reason.as_str()), (1001, "going away"))
        }
        other => panic!("expected a 1001 close, got {other:?}"),
    }
    assert_eq!(bounded(ws.recv()).await.unwrap(), None);
    bounded(shutdown.drained()).await;
    bounded(server).await.unwrap().unwrap();
}
