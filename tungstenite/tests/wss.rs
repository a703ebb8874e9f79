//! `wss://` on loopback with a self-signed certificate: `connect_async_tls_with_config`
//! with a `Connector::Rustls` that trusts it, against a TLS server accepting with
//! `accept_async` (feature `rustls-tls-webpki-roots`).

use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use rapidws_tungstenite::tungstenite::Message;
use rapidws_tungstenite::{Connector, MaybeTlsStream, accept_async, connect_async_tls_with_config};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer};

#[tokio::test]
async fn wss_with_a_connector_that_trusts_the_certificate() {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let cert: CertificateDer<'static> = ck.cert.der().clone();
    let key = PrivatePkcs8KeyDer::from(ck.key_pair.serialize_der());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.clone()], key.into())
        .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(server));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let tls = acceptor.accept(tcp).await.unwrap();
        let mut ws = accept_async(tls).await.unwrap();
        while let Some(Ok(m)) = ws.next().await {
            if m.is_text() || m.is_binary() {
                ws.send(m).await.unwrap();
            }
        }
    });

    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert).unwrap();
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let url = format!("wss://localhost:{port}/");
    let (mut ws, response) =
        connect_async_tls_with_config(url, None, true, Some(Connector::Rustls(Arc::new(client))))
            .await
            .unwrap();
    assert_eq!(response.status(), 101);
    assert!(matches!(ws.get_ref(), MaybeTlsStream::Rustls(_)));
    ws.send(Message::text("over tls")).await.unwrap();
    assert_eq!(ws.next().await.unwrap().unwrap(), Message::text("over tls"));
    ws.close(None).await.unwrap();
    while ws.next().await.is_some() {}
    server.await.unwrap();
}

#[tokio::test]
async fn wss_with_the_default_roots_refuses_a_self_signed_certificate() {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let key = PrivatePkcs8KeyDer::from(ck.key_pair.serialize_der());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![ck.cert.der().clone()], key.into())
        .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(server));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let _ = acceptor.accept(tcp).await;
    });
    let r = rapidws_tungstenite::connect_async(format!("wss://localhost:{port}/")).await;
    assert!(
        matches!(r, Err(rapidws_tungstenite::tungstenite::Error::Io(_))),
        "{:?}",
        r.map(|_| ())
    );
}
