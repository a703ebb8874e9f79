// Names a tokio-tungstenite program uses, in the ways it uses them: compiled against
// tokio-tungstenite and against this crate by `tests/surface.rs` (and run, where it
// does not need a network).

use std::time::Duration;

use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt, future};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::error::{CapacityError, ProtocolError, UrlError};
use tokio_tungstenite::tungstenite::handshake::client::{Request as ClientRequest, Response as ClientResponse};
use tokio_tungstenite::tungstenite::handshake::server::{Callback, ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::{HeaderValue, StatusCode, Uri};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::frame::{Frame, Utf8Bytes as FrameUtf8Bytes};
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{self, Bytes, ClientRequestBuilder, Error, Message, Result, Utf8Bytes};
use tokio_tungstenite::{
    MaybeTlsStream, WebSocketStream, accept_async, accept_async_with_config, accept_hdr_async,
    accept_hdr_async_with_config, client_async, client_async_with_config, connect_async,
    connect_async_with_config,
};

pub type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;
pub type Writer = SplitSink<Ws, Message>;
pub type Reader = SplitStream<Ws>;

/// What a program does with an error from the stream.
pub fn classify(e: &Error) -> &'static str {
    match e {
        Error::ConnectionClosed | Error::AlreadyClosed => "closed",
        Error::Io(_) => "io",
        Error::Protocol(ProtocolError::ResetWithoutClosingHandshake) => "reset",
        Error::Protocol(_) => "protocol",
        Error::Capacity(CapacityError::MessageTooLong { .. }) => "too long",
        Error::Capacity(_) => "capacity",
        Error::Utf8(_) => "utf8",
        Error::Url(UrlError::UnsupportedUrlScheme) => "scheme",
        Error::Url(_) => "url",
        Error::Http(response) if response.status() == StatusCode::UNAUTHORIZED => "401",
        Error::Http(_) => "http",
        Error::HttpFormat(_) => "format",
        _ => "other",
    }
}

/// What a program does with a message.
pub fn handle(msg: Message) -> Option<Message> {
    match msg {
        Message::Text(text) => {
            let s: &str = &text;
            let owned: String = text.to_string();
            let u: Utf8Bytes = owned.into();
            Some(Message::Text(format!("{s}/{}", u.as_str()).into()))
        }
        Message::Binary(bytes) => Some(Message::Binary(Bytes::from(bytes.to_vec()))),
        Message::Ping(_) | Message::Pong(_) => None,
        Message::Close(Some(CloseFrame { code, reason })) => {
            let _: u16 = code.into();
            let _: &str = reason.as_ref();
            None
        }
        Message::Close(None) => None,
        Message::Frame(frame) => Some(Message::binary(frame.into_payload())),
    }
}

/// The callback shapes programs write.
pub fn auth(req: &Request, mut response: Response) -> std::result::Result<Response, ErrorResponse> {
    match req.headers().get("authorization") {
        Some(v) if v == "Bearer ok" => {
            response.headers_mut().insert("x-user", HeaderValue::from_static("me"));
            Ok(response)
        }
        _ => {
            let mut refusal = ErrorResponse::new(Some("unauthorized".to_owned()));
            *refusal.status_mut() = StatusCode::UNAUTHORIZED;
            Err(refusal)
        }
    }
}

pub fn takes_callback<C: Callback + Unpin>(c: C) -> C {
    c
}

/// A client built the ways programs build them.
pub fn requests() -> Result<Vec<ClientRequest>> {
    let mut with_header = "wss://example.com/feed?x=1".into_client_request()?;
    with_header
        .headers_mut()
        .insert("authorization", HeaderValue::from_static("Bearer ok"));
    let uri: Uri = "ws://example.com:9000/".parse().unwrap();
    let built = ClientRequestBuilder::new(uri.clone())
        .with_header("x-a", "b")
        .with_sub_protocol("v1")
        .into_client_request()?;
    Ok(vec![with_header, built, uri.into_client_request()?, String::from("ws://h/").into_client_request()?])
}

pub fn config() -> WebSocketConfig {
    let mut c = WebSocketConfig::default()
        .max_message_size(Some(1 << 20))
        .max_frame_size(Some(1 << 18))
        .write_buffer_size(0)
        .read_buffer_size(4096);
    c.max_write_buffer_size = usize::MAX;
    c
}

pub fn closes() -> Vec<Message> {
    vec![
        Message::Close(Some(CloseFrame { code: CloseCode::Normal, reason: "bye".into() })),
        Message::Close(Some(CloseFrame { code: CloseCode::Away, reason: FrameUtf8Bytes::from_static("away") })),
        Message::Close(Some(CloseFrame { code: CloseCode::from(4000), reason: Utf8Bytes::default() })),
        Message::Close(None),
        Message::Frame(Frame::ping(Bytes::from_static(b"p"))),
        Message::text("t"),
        Message::binary(vec![1, 2, 3]),
        Message::from("s"),
        Message::from(vec![0u8]),
        Message::Ping(Bytes::new()),
        Message::Pong(vec![1].into()),
    ]
}

/// Every async entry point, as a program calls it (not run: no network).
#[allow(clippy::too_many_arguments)]
pub async fn entry_points<S: AsyncRead + AsyncWrite + Unpin>(s1: S, s2: S, s3: S, s4: S, s5: S, s6: S) -> Result<()> {
    let (ws, response): (Ws, ClientResponse) = connect_async("ws://localhost:1/").await?;
    let _ = (response.status(), response.headers().get("sec-websocket-protocol"));
    let _ = ws.get_ref();
    let (ws2, _) = connect_async_with_config("ws://localhost:1/", Some(config()), true).await?;
    let _ = ws2.get_config().max_message_size;
    let (_c1, _) = client_async("ws://localhost/", s1).await?;
    let (_c2, _) = client_async_with_config(requests()?.remove(0), s2, None).await?;
    let _a1 = accept_async(s3).await?;
    let _a2 = accept_async_with_config(s4, Some(config())).await?;
    let _a3 = accept_hdr_async(s5, auth).await?;
    let _a4 = accept_hdr_async_with_config(s6, takes_callback(auth), None).await?;
    let (mut writer, reader): (Writer, Reader) = ws.split();
    let forwarded = reader
        .filter_map(|m| future::ready(m.ok().and_then(handle).map(Ok)))
        .forward(&mut writer);
    tokio::time::timeout(Duration::from_secs(1), forwarded).await.ok();
    writer.send(Message::text("x")).await?;
    writer.close().await?;
    Ok(())
}

/// Raw sockets and the stream underneath.
pub async fn raw<S: AsyncRead + AsyncWrite + Unpin>(s: S, t: S) {
    let mut a = WebSocketStream::from_raw_socket(s, Role::Server, None).await;
    let b = WebSocketStream::from_partially_read(t, vec![], Role::Client, Some(config())).await;
    let _ = a.get_mut();
    let _ = b.into_inner();
    let _ = a.close(None).await;
    let _ = tungstenite::handshake::derive_accept_key(b"key");
}

/// Blocking names.
pub fn blocking(stream: std::net::TcpStream) -> Result<()> {
    let mut ws = tungstenite::accept(stream).map_err(|e| match e {
        tungstenite::HandshakeError::Failure(e) => e,
        tungstenite::HandshakeError::Interrupted(_) => Error::AlreadyClosed,
    })?;
    let msg = ws.read()?;
    ws.send(msg)?;
    ws.write(Message::text("w"))?;
    ws.flush()?;
    ws.close(None)?;
    let (_client, _resp) = tungstenite::connect("ws://localhost:1/")?;
    Ok(())
}
