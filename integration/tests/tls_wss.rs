//! wss:// over loopback with a self-signed certificate (feature `rustls`).
#![cfg(feature = "tokio-rustls")]

use std::sync::Arc;
use std::time::Duration;

use rapidws::tls::client_config_with_roots;
use rapidws::tokio::{ClientConfig, Error, Message, ServerConfig, WebSocket, accept};
use rapidws::tokio::{accept_tls, connect_tls};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

fn certificate() -> (CertificateDer<'static>, PrivateKeyDer<'static>) {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let key = PrivatePkcs8KeyDer::from(ck.key_pair.serialize_der());
    (ck.cert.der().clone(), key.into())
}

/// `connect_tls` with the default client settings, failing the test if it has not finished
/// within 10 s.
async fn connect_bounded(
    url: &str,
    tls: Option<Arc<rustls::ClientConfig>>,
) -> Result<WebSocket<TlsStream<TcpStream>>, Error> {
    tokio::time::timeout(
        Duration::from_secs(10),
        connect_tls(url, &ClientConfig::default(), tls),
    )
    .await
    .expect("connect_tls timed out")
}

async fn tls_echo_server(cert: CertificateDer<'static>, key: PrivateKeyDer<'static>) -> u16 {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(server));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let Ok(tls) = acceptor.accept(tcp).await else {
            return;
        };
        let mut ws = accept(tls, &ServerConfig::default()).await.unwrap();
        while let Ok(Some(msg)) = ws.recv().await {
            if msg.is_data() {
                ws.send(msg).await.unwrap();
            }
        }
    });
    port
}

#[tokio::test]
async fn wss_echo_with_a_trusted_self_signed_certificate() {
    let (cert, key) = certificate();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.clone()).unwrap();
    let port = tls_echo_server(cert, key).await;
    let tls = client_config_with_roots(roots).unwrap();
    let url = format!("wss://localhost:{port}/echo?x=1");
    let mut ws = connect_bounded(&url, Some(tls)).await.unwrap();
    let big = vec![7u8; 1 << 20];
    ws.send(Message::text("over tls")).await.unwrap();
    ws.send(Message::binary(big.clone())).await.unwrap();
    assert_eq!(ws.recv().await.unwrap(), Some(Message::text("over tls")));
    assert_eq!(ws.recv().await.unwrap(), Some(Message::binary(big)));
    ws.close(1000, "").await.unwrap();
}

#[tokio::test]
async fn untrusted_certificate_is_refused() {
    let (cert, key) = certificate();
    let port = tls_echo_server(cert, key).await;
    // Mozilla's roots do not include our self-signed certificate.
    let url = format!("wss://localhost:{port}/");
    let err = connect_bounded(&url, None).await.unwrap_err();
    assert!(matches!(&err, rapidws::tokio::Error::Io(_)), "{err:?}");
    assert!(err.to_string().contains("certificate"), "{err}");
}

#[tokio::test]
async fn ws_url_is_refused_by_the_tls_connector() {
    let err = connect_tls("ws://127.0.0.1:1/", &ClientConfig::default(), None)
        .await
        .unwrap_err();
    assert!(matches!(err, rapidws::tokio::Error::Url(_)), "{err:?}");
}

/// PEM text of a fresh self-signed certificate for `localhost`, and of its key.
fn pem_certificate() -> (String, String) {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    (ck.cert.pem(), ck.key_pair.serialize_pem())
}

/// Our wss:// echo server helper (`server_config_from_pem` + `tls::accept`) for
/// `connections` connections; returns its port.
async fn helper_echo_server(cert_pem: &str, key_pem: &str, connections: usize) -> u16 {
    let config =
        rapidws::tls::server_config_from_pem(cert_pem.as_bytes(), key_pem.as_bytes()).unwrap();
    assert_eq!(config.alpn_protocols, [b"http/1.1".to_vec()]);
    let acceptor = TlsAcceptor::from(config);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        for _ in 0..connections {
            let (tcp, _) = listener.accept().await.unwrap();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut ws) = accept_tls(&acceptor, tcp, &ServerConfig::default()).await else {
                    return;
                };
                while let Ok(Some(msg)) = ws.recv().await {
                    if msg.is_data() && ws.send(msg).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    port
}

fn roots_of(cert_pem: &str) -> rustls::RootCertStore {
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(cert_pem.as_bytes()).unwrap())
        .unwrap();
    roots
}

#[tokio::test]
async fn wss_server_helper_from_pem_echoes_to_our_client() {
    let (cert, key) = pem_certificate();
    let port = helper_echo_server(&cert, &key, 1).await;
    let tls = client_config_with_roots(roots_of(&cert)).unwrap();
    let url = format!("wss://localhost:{port}/");
    let mut ws = connect_bounded(&url, Some(tls)).await.unwrap();
    for i in 0..20u32 {
        let msg = Message::binary(vec![i as u8; 1000 * i as usize]);
        ws.send(msg.clone()).await.unwrap();
        assert_eq!(ws.recv().await.unwrap(), Some(msg));
    }
    ws.close(1000, "").await.unwrap();
}

#[test]
fn server_config_from_pem_names_what_is_missing_or_wrong() {
    use rapidws::tls::{TlsConfigError, server_config_from_pem};
    let (cert, key) = pem_certificate();
    let (_, other_key) = pem_certificate();
    assert!(matches!(
        server_config_from_pem(b"", key.as_bytes()),
        Err(TlsConfigError::NoCertificate)
    ));
    assert!(matches!(
        server_config_from_pem(cert.as_bytes(), cert.as_bytes()),
        Err(TlsConfigError::NoPrivateKey)
    ));
    assert!(matches!(
        server_config_from_pem(cert.as_bytes(), other_key.as_bytes()),
        Err(TlsConfigError::Rustls(_))
    ));
    // One PEM text holding both works too.
    let both = format!("{cert}{key}");
    assert!(server_config_from_pem(both.as_bytes(), both.as_bytes()).is_ok());
}

#[tokio::test]
async fn silent_tls_peers_are_a_handshake_timeout_on_both_sides() {
    use rapidws::tokio::{Error, Timeout};
    let quick = Some(Duration::from_millis(300));
    // A "server" that accepts TCP and never answers the ClientHello.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hold = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        tokio::time::sleep(Duration::from_secs(5)).await;
        drop(tcp);
    });
    let config = ClientConfig::default().with_handshake_timeout(quick);
    let err = tokio::time::timeout(
        Duration::from_secs(5),
        connect_tls(&format!("wss://localhost:{port}/"), &config, None),
    )
    .await
    .unwrap()
    .unwrap_err();
    assert!(matches!(err, Error::Timeout(Timeout::Handshake)), "{err:?}");
    hold.abort();

    // A client that connects TCP and never sends a ClientHello.
    let (cert, key) = pem_certificate();
    let acceptor = TlsAcceptor::from(
        rapidws::tls::server_config_from_pem(cert.as_bytes(), key.as_bytes()).unwrap(),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let _client = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (tcp, _) = listener.accept().await.unwrap();
    let server = ServerConfig::default().with_handshake_timeout(quick);
    let err = tokio::time::timeout(Duration::from_secs(5), accept_tls(&acceptor, tcp, &server))
        .await
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, Error::Timeout(Timeout::Handshake)), "{err:?}");
}

#[cfg(feature = "blocking")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocking_wss_client_echoes_with_the_tokio_wss_server() {
    use rapidws::blocking;
    let (cert, key) = pem_certificate();
    let port = helper_echo_server(&cert, &key, 1).await;
    let tls = client_config_with_roots(roots_of(&cert)).unwrap();
    let url = format!("wss://localhost:{port}/blocking");
    tokio::task::spawn_blocking(move || {
        let config =
            blocking::ClientConfig::default().with_read_timeout(Some(Duration::from_secs(10)));
        let mut ws = blocking::connect_tls(&url, &config, Some(tls)).unwrap();
        let big = vec![3u8; 300_000];
        ws.send(blocking::Message::text("blocking over tls"))
            .unwrap();
        ws.send_binary(&big).unwrap();
        assert_eq!(
            ws.read().unwrap(),
            Some(blocking::Message::text("blocking over tls"))
        );
        assert_eq!(ws.read().unwrap(), Some(blocking::Message::binary(big)));
        ws.close(1000, "done").unwrap();
        assert_eq!(ws.read().unwrap(), None);
    })
    .await
    .unwrap();
}

#[cfg(feature = "blocking")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocking_wss_client_refuses_an_untrusted_certificate_and_ws_urls() {
    use rapidws::blocking;
    let (cert, key) = pem_certificate();
    let port = helper_echo_server(&cert, &key, 1).await;
    let url = format!("wss://localhost:{port}/");
    tokio::task::spawn_blocking(move || {
        let config =
            blocking::ClientConfig::default().with_read_timeout(Some(Duration::from_secs(10)));
        // Mozilla's roots (the default) do not include our self-signed certificate.
        let err = blocking::connect_tls(&url, &config, None).unwrap_err();
        assert!(matches!(&err, blocking::Error::Io(_)), "{err:?}");
        assert!(err.to_string().contains("certificate"), "{err}");
        let err = blocking::connect_tls("ws://127.0.0.1:1/", &config, None).unwrap_err();
        assert!(
            matches!(err, blocking::Error::Url(rapidws::url::UrlError::NotSecure)),
            "{err:?}"
        );
    })
    .await
    .unwrap();
}

#[cfg(feature = "rustls-native-roots")]
#[tokio::test]
async fn native_roots_do_not_trust_a_self_signed_certificate() {
    use rapidws::tls::{TlsConfigError, native_roots_client_config};
    let tls = match native_roots_client_config() {
        Ok(tls) => tls,
        // A machine without a trust store is told so, by name.
        Err(TlsConfigError::NoRoots) => return,
        Err(e) => panic!("{e}"),
    };
    let (cert, key) = pem_certificate();
    let port = helper_echo_server(&cert, &key, 1).await;
    let err = connect_bounded(&format!("wss://localhost:{port}/"), Some(tls))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("certificate"), "{err}");
}

#[tokio::test]
async fn connect_takes_wss_urls_with_the_tls_config_set_on_the_client_config() {
    let (cert, key) = pem_certificate();
    let port = helper_echo_server(&cert, &key, 2).await;
    let tls = client_config_with_roots(roots_of(&cert)).unwrap();
    let config = ClientConfig::default().with_tls(tls);
    let url = format!("wss://localhost:{port}/one");
    let connect = rapidws::tokio::connect(&url, &config);
    let mut ws = tokio::time::timeout(Duration::from_secs(10), connect)
        .await
        .unwrap()
        .unwrap();
    assert!(ws.get_ref().is_tls());
    let session = ws.get_ref().tls().expect("a TLS session");
    assert_eq!(session.alpn_protocol(), None);
    ws.send(Message::text("one stream type")).await.unwrap();
    assert_eq!(
        ws.recv().await.unwrap(),
        Some(Message::text("one stream type"))
    );
    ws.close(1000, "").await.unwrap();

    // The same configuration serves a ws:// URL: the same type, plain.
    let plain = tokio_support_plain_echo().await;
    let mut ws = rapidws::tokio::connect(&format!("ws://{plain}/"), &config)
        .await
        .unwrap();
    assert!(!ws.get_ref().is_tls());
    ws.send(Message::text("plain")).await.unwrap();
    assert_eq!(ws.recv().await.unwrap(), Some(Message::text("plain")));
    ws.close(1000, "").await.unwrap();
}

/// A plain ws:// echo server for any number of connections; returns its address.
async fn tokio_support_plain_echo() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(rapidws::tokio::serve(
        listener,
        ServerConfig::default(),
        |mut ws| async move {
            while let Ok(Some(msg)) = ws.recv().await {
                if msg.is_data() && ws.send(msg).await.is_err() {
                    break;
                }
            }
        },
    ));
    addr
}

/// Asserts that `err` is the explained "not TLS" failure, not the handshake timeout.
fn assert_not_tls(err: &Error) {
    assert!(matches!(err, Error::Io(_)), "{err:?}");
    assert!(
        err.to_string().contains("server did not answer TLS"),
        "{err}"
    );
}

#[tokio::test]
async fn a_wss_client_against_a_plain_ws_server_fails_at_once_saying_so() {
    // Our own plain server refuses the ClientHello at its first byte with a 400, which
    // rustls reads as a corrupt record: the client fails without waiting out its 10 s
    // handshake timeout (a wait would end in Error::Timeout, which this rules out).
    let addr = tokio_support_plain_echo().await;
    let url = format!("wss://localhost:{}/", addr.port());
    let config = ClientConfig::default();
    assert_eq!(config.handshake_timeout, Some(Duration::from_secs(10)));
    let err = tokio::time::timeout(
        Duration::from_secs(9),
        rapidws::tokio::connect(&url, &config),
    )
    .await
    .expect("the client waited for its handshake timeout")
    .unwrap_err();
    assert_not_tls(&err);
    let err = connect_bounded(&url, None).await.unwrap_err();
    assert_not_tls(&err);
}

#[tokio::test]
async fn a_wss_client_against_a_plain_http_server_fails_at_once_saying_so() {
    // Any HTTP server answers a request it cannot parse with a 400.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut tcp, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 512];
        let _ = tcp.read(&mut buf).await;
        let _ = tcp
            .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            .await;
        tokio::time::sleep(Duration::from_secs(20)).await;
    });
    let url = format!("wss://localhost:{port}/");
    let err = tokio::time::timeout(
        Duration::from_secs(9),
        rapidws::tokio::connect(&url, &ClientConfig::default()),
    )
    .await
    .expect("the client waited for its handshake timeout")
    .unwrap_err();
    assert_not_tls(&err);
}

#[cfg(feature = "blocking")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocking_connect_takes_wss_and_fails_at_once_on_a_plain_server() {
    use rapidws::blocking;
    let (cert, key) = pem_certificate();
    let port = helper_echo_server(&cert, &key, 1).await;
    let plain = tokio_support_plain_echo().await;
    let tls = client_config_with_roots(roots_of(&cert)).unwrap();
    tokio::task::spawn_blocking(move || {
        let config = blocking::ClientConfig::default()
            .with_read_timeout(Some(Duration::from_secs(10)))
            .with_tls(tls);
        let mut ws = blocking::connect(format!("wss://localhost:{port}/"), &config).unwrap();
        assert!(ws.get_ref().is_tls());
        ws.send_text("blocking, one call").unwrap();
        assert_eq!(
            ws.read().unwrap(),
            Some(blocking::Message::text("blocking, one call"))
        );
        ws.close(1000, "").unwrap();

        let url = format!("wss://localhost:{}/", plain.port());
        let err = blocking::connect(&url, &config).unwrap_err();
        assert!(!err.is_would_block(), "{err:?}");
        assert_not_tls(&err);
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn accept_tls_with_adds_response_headers_and_refuses_with_a_status() {
    use rapidws::tokio::{Reject, accept_tls_with, connect_with_response};
    let (cert, key) = pem_certificate();
    let acceptor = TlsAcceptor::from(
        rapidws::tls::server_config_from_pem(cert.as_bytes(), key.as_bytes()).unwrap(),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        for _ in 0..2 {
            let (tcp, _) = listener.accept().await.unwrap();
            let result = accept_tls_with(&acceptor, tcp, &ServerConfig::default(), |req| {
                if req.path() != "/room" {
                    return Err(Reject::new(404, "no such room"));
                }
                Ok(vec![("Set-Cookie", "seat=7"), ("X-Room", "lobby")])
            })
            .await;
            if let Ok(mut ws) = result {
                while let Ok(Some(_)) = ws.recv().await {}
            }
        }
    });
    let config =
        ClientConfig::default().with_tls(client_config_with_roots(roots_of(&cert)).unwrap());
    let (mut ws, response) =
        connect_with_response(&format!("wss://localhost:{port}/room"), &config)
            .await
            .unwrap();
    assert_eq!(response.status, 101);
    assert_eq!(response.header("set-cookie"), Some(&b"seat=7"[..]));
    assert_eq!(response.header("x-room"), Some(&b"lobby"[..]));
    assert!(!response.is_deflate());
    ws.close(1000, "").await.unwrap();
    let err = rapidws::tokio::connect(&format!("wss://localhost:{port}/elsewhere"), &config)
        .await
        .unwrap_err();
    match err {
        Error::ClientHandshake(rapidws::handshake::ClientError::Status(r)) => {
            assert_eq!(r.status, 404)
        }
        other => panic!("expected the 404, got {other:?}"),
    }
}

#[tokio::test]
async fn the_reconnecting_client_takes_wss_urls() {
    use rapidws::tokio::{Backoff, Reconnect};
    let (cert, key) = pem_certificate();
    let port = helper_echo_server(&cert, &key, 2).await;
    let tls = client_config_with_roots(roots_of(&cert)).unwrap();
    let mut feed = Reconnect::new(
        format!("wss://localhost:{port}/"),
        ClientConfig::default().with_tls(tls),
    )
    .unwrap()
    .with_backoff(Backoff::new(
        Duration::from_millis(1),
        Duration::from_millis(10),
    ))
    .on_connect(async |ws| ws.send_text("hello again").await);
    for _ in 0..2 {
        let mut ws = tokio::time::timeout(Duration::from_secs(10), feed.next())
            .await
            .unwrap()
            .unwrap();
        assert!(ws.get_ref().is_tls());
        assert_eq!(ws.recv().await.unwrap(), Some(Message::text("hello again")));
        ws.close(1000, "").await.unwrap();
    }
}
