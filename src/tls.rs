//! rustls configurations for `wss://` (feature `rustls`), for every IO layer: the client
//! side ([`tokio::connect_tls`] with feature `tokio-rustls`, [`blocking::connect_tls`] with
//! feature `blocking`) and the server side ([`tokio::accept_tls`]).
//!
//! The crypto provider (ring) is chosen when each rustls configuration is built, so no
//! process-wide `CryptoProvider` has to be installed first. [`default_client_config`]
//! trusts Mozilla's roots (webpki-roots); [`native_roots_client_config`] (feature
//! `rustls-native-roots`) trusts the operating system's; build your own configuration
//! (with [`client_config_with_roots`], or with the re-exported [`rustls`]) for private
//! roots or client certificates. [`server_config_from_pem`] builds a server's from PEM
//! text.
//!
//! ```
//! # fn main() -> Result<(), rapidws::tls::TlsConfigError> {
//! let config = rapidws::tls::default_client_config()?;
//! assert!(config.alpn_protocols.is_empty());
//! # Ok(())
//! # }
//! ```
//!
#![cfg_attr(
    feature = "tokio-rustls",
    doc = "[`tokio::connect_tls`]: crate::tokio::connect_tls"
)]
#![cfg_attr(not(feature = "tokio-rustls"), doc = concat!("[`tokio::connect_tls`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/tokio/fn.connect_tls.html"))]
#![cfg_attr(
    feature = "tokio-rustls",
    doc = "[`tokio::accept_tls`]: crate::tokio::accept_tls"
)]
#![cfg_attr(not(feature = "tokio-rustls"), doc = concat!("[`tokio::accept_tls`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/tokio/fn.accept_tls.html"))]
#![cfg_attr(
    feature = "blocking",
    doc = "[`blocking::connect_tls`]: crate::blocking::connect_tls"
)]
#![cfg_attr(not(feature = "blocking"), doc = concat!("[`blocking::connect_tls`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/blocking/fn.connect_tls.html"))]
#![cfg_attr(not(feature = "rustls-native-roots"), doc = concat!("[`native_roots_client_config`]: https://docs.rs/rapidws/", env!("CARGO_PKG_VERSION"), "/rapidws/tls/fn.native_roots_client_config.html"))]

use std::fmt;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The rustls crate this module builds on, so that a configuration of your own is made
/// with the same version.
pub use rustls;

/// The ring crypto provider every configuration here is built on.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A rustls client configuration on the ring provider that trusts Mozilla's roots.
pub fn default_client_config() -> Result<Arc<rustls::ClientConfig>, TlsConfigError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    build_client_config(roots).map_err(TlsConfigError::Rustls)
}

/// A rustls client configuration on the ring provider that trusts `roots` only.
pub fn client_config_with_roots(
    roots: rustls::RootCertStore,
) -> Result<Arc<rustls::ClientConfig>, TlsConfigError> {
    build_client_config(roots).map_err(TlsConfigError::Rustls)
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

/// Explains a failed client TLS handshake: when the server answered the ClientHello with
/// bytes that are not TLS (rustls sees a corrupt record at once: a plain `ws://` or HTTP
/// server answering with `HTTP/1.1 400`), the error says "server did not answer TLS"
/// instead of rustls's bare "received corrupt message". Other errors pass unchanged.
#[cfg_attr(
    not(any(feature = "tokio-rustls", feature = "blocking")),
    allow(dead_code)
)]
pub(crate) fn explain_handshake_error(e: std::io::Error) -> std::io::Error {
    let is_not_tls = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .is_some_and(|r| matches!(r, rustls::Error::InvalidMessage(_)));
    if !is_not_tls {
        return e;
    }
    let kind = e.kind();
    match e
        .into_inner()
        .map(|inner| inner.downcast::<rustls::Error>())
    {
        Some(Ok(rustls_error)) => std::io::Error::new(kind, NotTls(*rustls_error)),
        // Checked above; unreachable, and harmless.
        Some(Err(inner)) => std::io::Error::new(kind, inner),
        None => std::io::Error::from(kind),
    }
}

/// A `wss://` server that did not answer in TLS.
#[derive(Debug)]
#[cfg_attr(
    not(any(feature = "tokio-rustls", feature = "blocking")),
    allow(dead_code)
)]
struct NotTls(rustls::Error);

impl fmt::Display for NotTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "server did not answer TLS (is it a plain ws:// or HTTP server? use a ws:// URL \
             for it): {}",
            self.0
        )
    }
}

impl std::error::Error for NotTls {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
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

display! { TlsConfigError {
    TlsConfigError::NoCertificate => "no certificate in the PEM input";
    TlsConfigError::NoPrivateKey => "no private key in the PEM input";
    TlsConfigError::Pem(e) => "malformed PEM: {e}";
    TlsConfigError::Rustls(e) => "TLS configuration refused: {e}";
    TlsConfigError::NoRoots => "no usable root certificate in the platform's trust store";
} }

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
