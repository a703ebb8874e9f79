//! What the two IO layers, `tokio` and `blocking`, share: opening the core connection once a handshake is done, the options a client adds to its
//! upgrade request, and the part of their `Error` types that wraps the lower layers' errors.

use std::time::Instant;

use crate::codec::Role;
use crate::connection::{self, Connection};
#[cfg(feature = "deflate")]
use crate::deflate::{DeflateConfig, DeflateParams, PerMessageDeflate};
use crate::handshake::ClientRequest;

/// The core connection for a finished opening handshake: `role`, the protocol settings
/// and, when permessage-deflate was agreed, its parameters with this end's settings.
pub(crate) fn open_connection(
    role: Role,
    protocol: &connection::Config,
    now: Instant,
    #[cfg(feature = "deflate")] deflate: Option<(DeflateParams, &DeflateConfig)>,
) -> Connection {
    #[allow(unused_mut)]
    let mut conn = Connection::new(role, protocol.clone(), now);
    #[cfg(feature = "deflate")]
    if let Some((params, deflate)) = deflate {
        conn.set_deflate(PerMessageDeflate::new(role, params, deflate));
    }
    conn
}

/// `request` with what a client configuration adds to it: the subprotocols to offer (most
/// preferred first), extra header fields, and an `Origin`.
pub(crate) fn with_client_options(
    mut request: ClientRequest,
    subprotocols: &[String],
    headers: &[(String, String)],
    origin: Option<&str>,
) -> ClientRequest {
    for p in subprotocols {
        request = request.subprotocol(p.as_str());
    }
    for (name, value) in headers {
        request = request.header(name.as_str(), value.as_str());
    }
    if let Some(origin) = origin {
        request = request.origin(origin);
    }
    request
}

/// Implements, for an IO layer's `Error`, what both layers' errors have in common: the
/// variants wrapping the socket's, the codec's, permessage-deflate's, the handshake's and the
/// proxy's errors, `Rejected`, `Closed` and `Send`, displayed and sourced the same way in
/// both; `From<io::Error>`; and `from_send`. The layer's own variants follow as
/// `pattern => text, source;` rows, `$f` naming the formatter their text is written to.
macro_rules! layer_error {
    ($Error:ident, |$f:ident| { $($own:pat => $text:expr, $source:expr;)* }) => {
        impl ::std::fmt::Display for $Error {
            fn fmt(&self, $f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                match self {
                    $Error::Io(e) => write!($f, "IO error: {e}"),
                    $Error::Protocol(e) => write!($f, "protocol error: {e}"),
                    #[cfg(feature = "deflate")]
                    $Error::Deflate(e) => write!($f, "permessage-deflate error: {e}"),
                    $Error::ClientHandshake(e) => write!($f, "handshake failed: {e}"),
                    $Error::ServerHandshake(e) => write!($f, "handshake refused: {e}"),
                    $Error::Rejected(status) => write!($f, "upgrade refused with status {status}"),
                    $Error::Closed => $f.write_str("connection closed"),
                    $Error::Send(e) => write!($f, "send refused: {e}"),
                    #[cfg(feature = "proxy")]
                    $Error::Proxy(e) => ::std::fmt::Display::fmt(e, $f),
                    $($own => $text,)*
                }
            }
        }

        impl ::std::error::Error for $Error {
            fn source(&self) -> Option<&(dyn ::std::error::Error + 'static)> {
                match self {
                    $Error::Io(e) => Some(e),
                    $Error::Protocol(e) => Some(e),
                    #[cfg(feature = "deflate")]
                    $Error::Deflate(e) => Some(e),
                    $Error::ClientHandshake(e) => Some(e),
                    $Error::ServerHandshake(e) => Some(e),
                    $Error::Send(e) => Some(e),
                    #[cfg(feature = "proxy")]
                    $Error::Proxy(e) => Some(e),
                    $Error::Rejected(_) | $Error::Closed => None,
                    // A row's pattern may bind what only its text uses.
                    $(#[allow(unused_variables)] $own => $source,)*
                }
            }
        }

        impl From<::std::io::Error> for $Error {
            fn from(e: ::std::io::Error) -> Self {
                $Error::Io(e)
            }
        }

        impl $Error {
            /// A send the core refused: `Closed` once the connection is closed, `Send` for
            /// anything else.
            pub(crate) fn from_send(e: $crate::connection::SendError) -> Self {
                match e {
                    $crate::connection::SendError::Closed => $Error::Closed,
                    other => $Error::Send(other),
                }
            }
        }
    };
}
pub(crate) use layer_error;

#[cfg(test)]
mod tests {
    use std::error::Error as _;
    use std::io;

    use crate::connection::{SendError, Timeout};

    /// The variants every layer has, as `(Display, has a source)` for the layer's `Error`.
    macro_rules! shared_variants {
        ($Error:path) => {{
            use $Error as E;
            [
                E::from(io::Error::other("gone")),
                E::Rejected(403),
                E::from_send(SendError::Closed),
                E::from_send(SendError::ControlTooLong),
            ]
            .map(|e| (e.to_string(), e.source().is_some()))
        }};
    }

    #[cfg(all(feature = "tokio", feature = "blocking"))]
    #[test]
    fn shared_error_variants_read_the_same_in_both_layers() {
        let tokio = shared_variants!(crate::tokio::Error);
        assert_eq!(tokio, shared_variants!(crate::blocking::Error));
        assert_eq!(tokio[0], ("IO error: gone".to_owned(), true));
        assert_eq!(
            tokio[1],
            ("upgrade refused with status 403".to_owned(), false)
        );
        assert_eq!(tokio[2], ("connection closed".to_owned(), false));
        assert!(tokio[3].0.starts_with("send refused: ") && tokio[3].1);
    }

    #[cfg(feature = "tokio")]
    #[test]
    fn tokio_error_keeps_its_own_variants() {
        use crate::tokio::{Error, Timeout as T};
        let e = Error::from_connection(crate::connection::Error::Timeout(Timeout::Pong));
        assert!(matches!(e, Error::Timeout(T::Pong)));
        assert_eq!(e.to_string(), "no pong received for the keepalive ping");
        assert!(e.source().is_none());
    }

    #[cfg(feature = "blocking")]
    #[test]
    fn blocking_error_keeps_its_own_variants() {
        use crate::blocking::Error;
        let e = Error::Timeout(Timeout::Idle);
        assert_eq!(
            e.to_string(),
            crate::connection::Error::Timeout(Timeout::Idle).to_string()
        );
        assert!(e.source().is_none());
        assert_eq!(
            Error::TlsUnsupported.to_string(),
            "wss:// needs a TLS stream"
        );
        assert!(Error::TlsUnsupported.source().is_none());
    }
}
