//! The opening handshake's types: the `http` request and response of each side, the
//! server's [`Callback`](server::Callback), [`derive_accept_key`], and the blocking
//! functions' [`HandshakeError`].

use std::fmt;
use std::marker::PhantomData;

use super::error::Error;

pub mod client {
    //! The client side's request and response.

    use std::marker::PhantomData;

    /// The upgrade request a client sends.
    pub type Request = http::Request<()>;
    /// The server's answer (its body is `None` for a 101).
    pub type Response = http::Response<Option<Vec<u8>>>;

    pub use crate::tungstenite::client::generate_key;

    /// The client side of a blocking handshake (named in
    /// [`HandshakeError`](super::HandshakeError)'s type; the handshake runs to its end in
    /// one call).
    #[derive(Debug)]
    pub struct ClientHandshake<S>(PhantomData<S>);
}

pub mod server {
    //! The server side's request and response, and the [`Callback`] that sees the
    //! request and may add to the response or refuse.

    use std::marker::PhantomData;

    /// The upgrade request a server receives.
    pub type Request = http::Request<()>;
    /// The 101 a server answers with.
    pub type Response = http::Response<()>;
    /// A refusal: its status (not a success), headers and body.
    pub type ErrorResponse = http::Response<Option<String>>;

    /// Sees the upgrade request with the 101 about to be sent: returns it (with headers
    /// added, a `Sec-WebSocket-Protocol` say) to accept, or an [`ErrorResponse`] to refuse.
    pub trait Callback: Sized {
        /// Called once the request has been read and checked.
        fn on_request(
            self,
            request: &Request,
            response: Response,
        ) -> Result<Response, ErrorResponse>;
    }

    impl<F> Callback for F
    where
        F: FnOnce(&Request, Response) -> Result<Response, ErrorResponse>,
    {
        fn on_request(
            self,
            request: &Request,
            response: Response,
        ) -> Result<Response, ErrorResponse> {
            self(request, response)
        }
    }

    /// The callback that accepts every request as it is.
    #[derive(Clone, Copy, Debug)]
    pub struct NoCallback;

    impl Callback for NoCallback {
        fn on_request(
            self,
            _request: &Request,
            response: Response,
        ) -> Result<Response, ErrorResponse> {
            Ok(response)
        }
    }

    /// The server side of a blocking handshake (named in
    /// [`HandshakeError`](super::HandshakeError)'s type).
    #[derive(Debug)]
    pub struct ServerHandshake<S, C>(PhantomData<(S, C)>);
}

/// Why a blocking handshake did not finish. Its handshakes run to their end in one call,
/// so [`Interrupted`](HandshakeError::Interrupted) is only returned for a non-blocking
/// stream that would block, and cannot be resumed.
pub enum HandshakeError<Role> {
    /// The stream would block (a non-blocking stream); the handshake cannot be resumed.
    Interrupted(MidHandshake<Role>),
    /// The handshake failed.
    Failure(Error),
}

/// A handshake interrupted by a non-blocking stream.
#[derive(Debug)]
pub struct MidHandshake<Role>(PhantomData<Role>);

impl<Role> fmt::Debug for HandshakeError<Role> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandshakeError::Interrupted(_) => f.write_str("HandshakeError::Interrupted(...)"),
            HandshakeError::Failure(e) => write!(f, "HandshakeError::Failure({e:?})"),
        }
    }
}

impl<Role> fmt::Display for HandshakeError<Role> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandshakeError::Interrupted(_) => f.write_str("Interrupted handshake (WouldBlock)"),
            HandshakeError::Failure(e) => write!(f, "{e}"),
        }
    }
}

impl<Role> std::error::Error for HandshakeError<Role> {}

impl<Role> From<Error> for HandshakeError<Role> {
    fn from(e: Error) -> Self {
        HandshakeError::Failure(e)
    }
}

/// The `Sec-WebSocket-Accept` value for a `Sec-WebSocket-Key` (RFC 6455 4.2.2).
pub fn derive_accept_key(request_key: &[u8]) -> String {
    rapidws::handshake::accept_key(request_key)
}
