//! What a client sees of the URL scheme and of the handshake: `wss://` without TLS in the
//! build says what to enable; the server's 101 response and what it agreed come back;
//! connections opened over a handshake that ran elsewhere carry its agreements.
#![cfg(feature = "tokio")]

use rapidws::tokio::{ClientConfig, Error, ServerConfig, accept_with, connect_with_response};
use tokio::net::TcpListener;

#[cfg(not(feature = "tokio-rustls"))]
#[tokio::test]
async fn wss_without_tls_in_the_build_names_the_feature_to_enable() {
    let err = rapidws::tokio::connect("wss://127.0.0.1:1/", &ClientConfig::default())
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Url(rapidws::url::UrlError::TlsUnavailable)),
        "{err:?}"
    );
    assert!(err.to_string().contains("`tokio-rustls`"), "{err}");
}

#[cfg(all(feature = "blocking", not(feature = "rustls")))]
#[test]
fn blocking_wss_without_tls_in_the_build_names_the_feature_to_enable() {
    let err =
        rapidws::blocking::connect("wss://127.0.0.1:1/", &ClientConfig::default()).unwrap_err();
    assert!(
        matches!(err, Error::Url(rapidws::url::UrlError::TlsUnavailable)),
        "{err:?}"
    );
    assert!(err.to_string().contains("`rustls`"), "{err}");
}

#[test]
fn a_tls_client_hello_on_a_plain_port_is_refused_at_its_first_byte() {
    use rapidws::handshake::{ServerConfig, ServerError, ServerHandshake};
    // The first bytes of any TLS 1.2/1.3 ClientHello: a handshake record.
    let hello = [0x16, 0x03, 0x01, 0x02, 0x00, 0x01];
    let err = ServerHandshake::new(&ServerConfig::default())
        .feed(&hello)
        .unwrap_err();
    assert_eq!(err, ServerError::TlsOnPlainPort);
    assert_eq!(err.status(), 400);
    assert!(String::from_utf8_lossy(&err.response()).contains("ws://"));
    // A 0x16 later in a request is just a byte of it.
    let mut hs = ServerHandshake::new(&ServerConfig::default());
    assert_eq!(hs.feed(b"GET / HTTP/1.1\r\n").unwrap(), None);
    assert!(hs.feed(&[0x16]).unwrap().is_none());
}

#[tokio::test]
async fn the_client_gets_the_101_response_and_what_it_agreed() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let config = ServerConfig::default().with_subprotocols(["chat.v2"]);
        #[cfg(feature = "deflate")]
        let config = config.with_deflate(Some(rapidws::deflate::DeflateConfig::default()));
        let mut ws = accept_with(stream, &config, |req| {
            assert_eq!(req.path(), "/feed");
            Ok(vec![("Set-Cookie", "a=1"), ("Set-Cookie", "b=2")])
        })
        .await
        .unwrap();
        assert_eq!(ws.subprotocol(), Some("chat.v2"));
        while let Ok(Some(msg)) = ws.recv().await {
            if msg.is_data() {
                ws.send(msg).await.unwrap();
            }
        }
    });
    let config = ClientConfig::default().with_subprotocols(["chat.v1", "chat.v2"]);
    #[cfg(feature = "deflate")]
    let config = config.with_deflate(Some(rapidws::deflate::DeflateConfig::default()));
    let (mut ws, response) = connect_with_response(&format!("ws://{addr}/feed"), &config)
        .await
        .unwrap();
    assert_eq!(response.status, 101);
    assert_eq!(response.subprotocol(), Some("chat.v2"));
    assert_eq!(ws.subprotocol(), Some("chat.v2"));
    let cookies: Vec<&[u8]> = response.header_values("set-cookie").collect();
    assert_eq!(cookies, [&b"a=1"[..], b"b=2"]);
    assert!(response.header("sec-websocket-accept").is_some());
    #[cfg(feature = "deflate")]
    {
        assert!(response.is_deflate());
        let ext = response.header("sec-websocket-extensions").unwrap();
        assert!(ext.starts_with(b"permessage-deflate"), "{ext:?}");
    }
    #[cfg(not(feature = "deflate"))]
    assert!(!response.is_deflate());
    #[cfg(feature = "hyper")]
    {
        let http: http::Response<()> = response.clone().into();
        assert_eq!(http.status(), 101);
        assert_eq!(http.headers().get_all("set-cookie").iter().count(), 2);
    }
    let text = "compressible ".repeat(100);
    ws.send_text(text.as_str()).await.unwrap();
    assert_eq!(ws.recv().await.unwrap().unwrap().into_text().unwrap(), text);
    ws.close(1000, "").await.unwrap();
    server.await.unwrap();
}

#[tokio::test]
async fn a_hook_header_the_handshake_writes_itself_is_refused_with_500() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        accept_with(stream, &ServerConfig::default(), |_| {
            Ok(vec![("Sec-WebSocket-Accept", "forged")])
        })
        .await
    });
    let err = rapidws::tokio::connect(&format!("ws://{addr}/"), &ClientConfig::default())
        .await
        .unwrap_err();
    match err {
        Error::ClientHandshake(rapidws::handshake::ClientError::Status(r)) => {
            assert_eq!(r.status, 500)
        }
        other => panic!("expected a 500, got {other:?}"),
    }
    assert!(matches!(
        server.await.unwrap(),
        Err(Error::ServerHandshake(_))
    ));
}

/// Both ends opened with `from_handshake` over an in-memory pipe, as after a handshake
/// run by other code: the agreed subprotocol is visible and, when both sides agreed
/// permessage-deflate, compressed messages pass; a peer that did not agree refuses them
/// (RSV1 set without the extension), which shows the agreement really is in force.
#[cfg(feature = "deflate")]
#[tokio::test]
async fn from_handshake_carries_the_agreed_subprotocol_and_deflate() {
    use rapidws::Role;
    use rapidws::deflate::{DeflateConfig, DeflateParams};
    use rapidws::handshake::Negotiated;
    use rapidws::tokio::{Config, Message, from_handshake};

    let params = DeflateParams::default();
    let settings = DeflateConfig::default();
    let agreed = Negotiated::new()
        .with_subprotocol("v1")
        .with_deflate(params, settings.clone());
    let (a, b) = tokio::io::duplex(1 << 16);
    let mut server = from_handshake(a, Role::Server, &Config::default(), agreed.clone(), &[]);
    let mut client = from_handshake(b, Role::Client, &Config::default(), agreed, &[]);
    assert_eq!(server.subprotocol(), Some("v1"));
    let text = "deflate me ".repeat(200);
    server.send_text(text.as_str()).await.unwrap();
    assert_eq!(
        client.recv().await.unwrap(),
        Some(Message::text(text.as_str()))
    );

    let (a, b) = tokio::io::duplex(1 << 16);
    let agreed = Negotiated::new().with_deflate(params, settings);
    let mut server = from_handshake(a, Role::Server, &Config::default(), agreed, &[]);
    let mut client = from_handshake(b, Role::Client, &Config::default(), Negotiated::new(), &[]);
    server.send_text(text.as_str()).await.unwrap();
    let err = client.recv().await.unwrap_err();
    assert!(matches!(err, Error::Protocol(_)), "{err:?}");
}

#[cfg(feature = "blocking")]
#[test]
fn the_blocking_accept_hook_refuses_or_adds_headers_like_the_tokio_one() {
    use rapidws::blocking::{self, Reject};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        for _ in 0..2 {
            let (stream, _) = listener.accept().unwrap();
            stream
                .set_read_timeout(Some(std::time::Duration::from_secs(10)))
                .unwrap();
            let result = blocking::accept_with(stream, &ServerConfig::default(), |req| {
                if req.header("authorization").is_none() {
                    return Err(Reject::new(401, "log in first"));
                }
                Ok(vec![("X-Session", "s-1")])
            });
            if let Ok(mut ws) = result {
                while let Ok(Some(_)) = ws.read() {}
            }
        }
    });
    let url = format!("ws://{addr}/");
    let config = ClientConfig::default();
    match blocking::connect(&url, &config).unwrap_err() {
        Error::ClientHandshake(rapidws::handshake::ClientError::Status(r)) => {
            assert_eq!((r.status, r.body.as_slice()), (401, &b"log in first"[..]))
        }
        other => panic!("expected the 401, got {other:?}"),
    }
    let config = config.with_header("Authorization", "Bearer t");
    let (mut ws, response) = blocking::connect_with_response(&url, &config).unwrap();
    assert_eq!(response.header("x-session"), Some(&b"s-1"[..]));
    assert!(!ws.get_ref().is_tls());
    ws.close(1000, "").unwrap();
    server.join().unwrap();
}
