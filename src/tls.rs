//! `wss://` over rustls (feature `rustls`): clients, a server helper, and the blocking
//! client (`blocking::connect_tls`, with feature `blocking`).
//!
//! The crypto provider (ring) is chosen when each rustls configuration is built, so no
//! process-wide `CryptoProvider` has to be installed first. [`default_client_config`]
//! trusts Mozilla's roots (webpki-roots); `native_roots_client_config` (feature
//! `rustls-native-roots`) trusts the operating system's; pass your own configuration to
//! [`connect_tls`] for private roots or client certificates.
//!
//! ```no_run
//! use rapidws::tokio::{ClientConfig, Message};
//!
//! # async fn run() -> Result<(), rapidws::tokio::Error> {
//! let mut ws = rapidws::tls::connect_tls("wss://example.com/chat", &ClientConfig::default(), None).await?;
//! ws.send(Message::text("hello")).await?;
//! # Ok(())
//! # }
//! ```
//!
//! A server builds a [`TlsAcceptor`] once (for example with [`server_config_from_pem`])
//! and hands each accepted TCP stream to [`accept`]:
//!
//! ```no_run
//! use rapidws::tokio::ServerConfig;
//! use rapidws::tls::{TlsAcceptor, server_config_from_pem};
//!
//! # async fn run(cert_pem: &[u8], key_pem: &[u8]) -> Result<(), Box<dyn std::error::Error>> {
//! let acceptor = TlsAcceptor::from(server_config_from_pem(cert_pem, key_pem)?);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:9443").await?;
//! let (tcp, _) = listener.accept().await?;
//! let mut ws = rapidws::tls::accept(&acceptor, tcp, &ServerConfig::default()).await?;
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::io;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use crate::handshake::ClientRequest;
use crate::tokio::{
    ClientConfig, Error, ServerConfig, Timeout, UrlError, WebSocket, client_handshake,
};

pub use tokio_rustls::TlsAcceptor;
pub use tokio_rustls::client::TlsStream;
/// The server side of a TLS stream, as [`accept`] returns it.
pub use tokio_rustls::server::TlsStream as ServerTlsStream;

/// The ring crypto provider every configuration here is built on.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A rustls client configuration on the ring provider that trusts Mozilla's roots.
pub fn default_client_config() -> Result<Arc<rustls::ClientConfig>, Error> {
    webpki_client_config().map_err(config_error)
}

/// [`default_client_config`] with the rustls error, for the blocking client.
pub(crate) fn webpki_client_config() -> Result<Arc<rustls::ClientConfig>, rustls::Error> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    build_client_config(roots)
}

/// A rustls client configuration on the ring provider that trusts `roots` only.
pub fn client_config_with_roots(
    roots: rustls::RootCertStore,
) -> Result<Arc<rustls::ClientConfig>, Error> {
    build_client_config(roots).map_err(config_error)
}

fn build_client_config(
    roots: rustls::RootCertStore,
) -> Result<Arc<rustls::ClientConfig>, rustls::Error> {
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// A rustls client configuration on the ring provider that trusts the operating
/// system's root certificates (feature `rustls-native-roots`, loaded with
/// `rustls-native-certs`: the system store on Linux (`SSL_CERT_FILE`/`SSL_CERT_DIR`
/// honoured), the keychain on macOS, the certificate store on Windows).
///
/// Certificates the platform lists but rustls cannot parse are skipped. It fails with
/// [`TlsConfigError::NoRoots`] when not one usable root was found, so a machine without
/// a trust store is told so instead of refusing every server later.
#[cfg(feature = "rustls-native-roots")]
pub fn native_roots_client_config() -> Result<Arc<rustls::ClientConfig>, TlsConfigError> {
    let loaded = rustls_native_certs::load_native_certs();
    let mut roots = rustls::RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(loaded.certs);
    if added == 0 {
        return Err(TlsConfigError::NoRoots);
    }
    build_client_config(roots).map_err(TlsConfigError::Rustls)
}

/// Why a TLS configuration could not be built.
#[derive(Debug)]
#[non_exhaustive]
pub enum TlsConfigError {
    /// The PEM text holds no certificate.
    NoCertificate,
    /// The PEM text holds no private key (PKCS#8, PKCS#1 or SEC1).
    NoPrivateKey,
    /// The PEM text is malformed.
    Pem(rustls::pki_types::pem::Error),
    /// rustls refused the configuration (for example a key that does not match the
    /// certificate, or an unsupported key type).
    Rustls(rustls::Error),
    /// No usable root certificate was found in the operating system's store.
    NoRoots,
}

impl fmt::Display for TlsConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsConfigError::NoCertificate => f.write_str("no certificate in the PEM input"),
            TlsConfigError::NoPrivateKey => f.write_str("no private key in the PEM input"),
            TlsConfigError::Pem(e) => write!(f, "malformed PEM: {e}"),
            TlsConfigError::Rustls(e) => write!(f, "TLS configuration refused: {e}"),
            TlsConfigError::NoRoots => {
                f.write_str("no usable root certificate in the platform's trust store")
            }
        }
    }
}

impl std::error::Error for TlsConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TlsConfigError::Pem(e) => Some(e),
            TlsConfigError::Rustls(e) => Some(e),
            _ => None,
        }
    }
}

/// A rustls server configuration on the ring provider presenting `cert_chain` (leaf
/// first) with `key`, without client authentication, advertising ALPN `http/1.1` (the
/// protocol WebSocket upgrades from, RFC 6455 4.1).
pub fn server_config(
    cert_chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<Arc<rustls::ServerConfig>, TlsConfigError> {
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(TlsConfigError::Rustls)?
        .with_no_client_auth()
        .with_single_cert(cert_chain, key)
        .map_err(TlsConfigError::Rustls)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// [`server_config`] from PEM text: every `CERTIFICATE` block of `cert_chain_pem` (leaf
/// first) and the first private key of `key_pem` (the two may be the same text).
pub fn server_config_from_pem(
    cert_chain_pem: &[u8],
    key_pem: &[u8],
) -> Result<Arc<rustls::ServerConfig>, TlsConfigError> {
    let chain = CertificateDer::pem_slice_iter(cert_chain_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(TlsConfigError::Pem)?;
    if chain.is_empty() {
        return Err(TlsConfigError::NoCertificate);
    }
    let key = match PrivateKeyDer::from_pem_slice(key_pem) {
        Ok(k) => k,
        Err(rustls::pki_types::pem::Error::NoItemsFound) => {
            return Err(TlsConfigError::NoPrivateKey);
        }
        Err(e) => return Err(TlsConfigError::Pem(e)),
    };
    server_config(chain, key)
}

/// Accepts a `wss://` connection on `stream` (a freshly accepted TCP stream, or any
/// byte stream): the TLS handshake with `acceptor`, then the WebSocket opening handshake
/// (see [`crate::tokio::accept`]), the two together within
/// [`Config::handshake_timeout`](crate::tokio::Config::handshake_timeout).
pub async fn accept<S>(
    acceptor: &TlsAcceptor,
    stream: S,
    config: &ServerConfig,
) -> Result<WebSocket<ServerTlsStream<S>>, Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let both = async {
        let tls = acceptor.accept(stream).await?;
        crate::tokio::accept(tls, config).await
    };
    match config.connection.handshake_timeout {
        Some(t) => tokio::time::timeout(t, both)
            .await
            .map_err(|_| Error::Timeout(Timeout::Handshake))?,
        None => both.await,
    }
}

/// Connects to a `wss://host[:port]/path` URL: TCP (directly, or through the
/// configured proxy with feature `proxy`; within [`ClientConfig::connect_timeout`]),
/// TLS with `tls` (or [`default_client_config`]) and the opening handshake (the two
/// within the handshake timeout). The certificate is checked against the URL's host.
pub async fn connect_tls(
    url: &str,
    config: &ClientConfig,
    tls: Option<Arc<rustls::ClientConfig>>,
) -> Result<WebSocket<TlsStream<TcpStream>>, Error> {
    let (request, target) = ClientRequest::from_url(url)?;
    if !target.secure {
        return Err(Error::Url(UrlError::UnsupportedScheme));
    }
    let tls = match tls {
        Some(t) => t,
        None => default_client_config()?,
    };
    let name =
        ServerName::try_from(target.host.clone()).map_err(|_| Error::Url(UrlError::BadHost))?;
    let tcp = crate::tokio::open_stream(&target.host, target.port, true, config).await?;
    let both = async {
        let stream = TlsConnector::from(tls).connect(name, tcp).await?;
        // `from_url` built the Host header and resource from the URL as written.
        client_handshake(stream, request.host(), request.path(), config).await
    };
    // `client_handshake` bounds its own part; this bounds the TLS handshake too.
    match config.connection.handshake_timeout {
        Some(t) => tokio::time::timeout(t, both)
            .await
            .map_err(|_| Error::Timeout(Timeout::Handshake))?,
        None => both.await,
    }
}

fn config_error(e: rustls::Error) -> Error {
    Error::Io(io::Error::other(e))
}
