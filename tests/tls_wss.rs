//! wss:// over loopback with a self-signed certificate (feature `rustls`).
#![cfg(feature = "rustls")]

use std::sync::Arc;
use std::time::Duration;

use rapidws::tls::{client_config_with_roots, connect_tls};
use rapidws::tokio::{ClientConfig, Message, ServerConfig, accept};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

fn certificate() -> (CertificateDer<'static>, PrivateKeyDer<'static>) {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let key = PrivatePkcs8KeyDer::from(ck.key_pair.serialize_der());
    (ck.cert.der().clone(), key.into())
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
    let mut ws = tokio::time::timeout(
        Duration::from_secs(10),
        connect_tls(&url, &ClientConfig::default(), Some(tls)),
    )
    .await
    .unwrap()
    .unwrap();
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
    let err = tokio::time::timeout(
        Duration::from_secs(10),
        connect_tls(&url, &ClientConfig::default(), None),
    )
    .await
    .unwrap()
    .unwrap_err();
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
