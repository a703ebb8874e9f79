//! rustls for `wss://` (features `rustls-tls-*`), through rapidws's configurations.

use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::rustls;

use crate::tungstenite::error::{Error, TlsError};

/// The client configuration of the feature chosen: the operating system's roots with
/// `rustls-tls-native-roots`, else Mozilla's.
pub(crate) fn client_config() -> Result<Arc<rustls::ClientConfig>, Error> {
    #[cfg(feature = "rustls-tls-native-roots")]
    let config = rapidws::tls::native_roots_client_config();
    #[cfg(not(feature = "rustls-tls-native-roots"))]
    let config = rapidws::tls::default_client_config();
    config.map_err(|e| Error::Io(std::io::Error::other(e)))
}

/// TLS over `stream` for `host`.
pub(crate) async fn wrap<S: AsyncRead + AsyncWrite + Unpin>(
    stream: S,
    host: &str,
    config: Arc<rustls::ClientConfig>,
) -> Result<tokio_rustls::client::TlsStream<S>, Error> {
    let name = rustls::pki_types::ServerName::try_from(host.to_owned())
        .map_err(|_| Error::Tls(TlsError::InvalidDnsName))?;
    Ok(tokio_rustls::TlsConnector::from(config)
        .connect(name, stream)
        .await?)
}
