//! The blocking IO layer: WebSocket connections over `std::net::TcpStream` or any
//! `Read + Write`, on the same sans-IO [`Connection`] as the tokio layer.
//!
//! ```
//! use std::net::TcpListener;
//!
//! use rapidws::blocking::{ClientConfig, Message, ServerConfig, accept, connect};
//!
//! # fn main() -> Result<(), rapidws::blocking::Error> {
//! # std::thread::spawn(|| {
//! #     std::thread::sleep(std::time::Duration::from_secs(30));
//! #     eprintln!("doctest timed out");
//! #     std::process::exit(1);
//! # });
//! // A server thread for one connection, on any free loopback port.
//! let listener = TcpListener::bind("127.0.0.1:0")?;
//! let url = format!("ws://{}/", listener.local_addr()?);
//! let server = std::thread::spawn(move || -> Result<(), rapidws::blocking::Error> {
//!     let mut ws = accept(listener.accept()?.0, &ServerConfig::default())?;
//!     ws.send_text("hi")?;
//!     while ws.read()?.is_some() {} // until the client's close, answered by `read`
//!     Ok(())
//! });
//!
//! let mut ws = connect(&url, &ClientConfig::default())?;
//! assert_eq!(ws.read()?, Some(Message::text("hi")));
//! ws.close(1000, "bye")?;
//! server.join().expect("server thread")?;
//! # Ok(())
//! # }
//! ```
//!
//! # Time
//!
//! A blocking call waits as long as the socket lets it: set the socket's own read and
//! write timeouts (`TcpStream::set_read_timeout`; [`ClientConfig::read_timeout`] does it
//! for [`connect`]). A read that times out returns [`Error::Io`] of kind `WouldBlock` or
//! `TimedOut`; the connection is unharmed and the call may be repeated. The core's timers
//! (keepalive ping, idle and close timeouts) are run at each [`WebSocket::read`] call and
//! after each timed-out socket read, so with a read timeout shorter than them they fire
//! on time.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use bytes::BytesMut;

use crate::codec::Role;
use crate::codec::{CloseCode, MessageKind, ProtocolError};
use crate::connection::{self, Connection, OwnedEvent, SendError};
#[cfg(feature = "deflate")]
use crate::deflate::{DeflateConfig, DeflateError, DeflateParams};
use crate::handshake::{self, ClientError, ClientHandshake, ClientRequest, ServerError};
use crate::handshake::{Request, ServerHandshake};

pub use crate::message::{CloseFrame, Message, Utf8Bytes};

/// Bytes read from the socket per call while a handshake is in progress.
const HANDSHAKE_READ: usize = 2048;
/// Largest read asked of the socket while a large message streams in.
const MAX_READ_CHUNK: usize = 256 * 1024;

/// Everything that can go wrong on a blocking connection. A normal close is not an
/// error: [`WebSocket::read`] returns `Ok(None)` after it.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The socket failed, or timed out (kind `WouldBlock`/`TimedOut`, which may be
    /// retried). The peer vanishing without a close frame is `UnexpectedEof`.
    Io(io::Error),
    /// The peer broke RFC 6455; a close frame with [`ProtocolError::close_code`] was sent.
    Protocol(ProtocolError),
    /// The peer's compressed data was invalid or inflated past the limit; a close frame
    /// with its code was sent.
    #[cfg(feature = "deflate")]
    Deflate(DeflateError),
    /// A timer of the connection ran out (keepalive pong, idle, close reply).
    Timeout(connection::Timeout),
    /// The server refused or botched the opening handshake (client side).
    ClientHandshake(ClientError),
    /// The client's upgrade request was invalid (server side); the refusal was sent.
    ServerHandshake(ServerError),
    /// The application refused the upgrade request with this HTTP status
    /// ([`accept_with`]); the refusal was sent.
    Rejected(u16),
    /// [`connect`] was given a `wss://` URL: use `connect_tls` (feature `rustls`), or
    /// connect TLS yourself and call [`client_handshake`].
    TlsUnsupported,
    /// The URL given to [`connect`] cannot be used.
    Url(crate::url::UrlError),
    /// The connection is closed; nothing more can be sent.
    Closed,
    /// A send was refused for another reason (control payload over 125 bytes, a close
    /// code that may not be sent, ...).
    Send(SendError),
    /// The proxy refused or botched opening the tunnel, or its URL is unusable
    /// (feature `proxy`).
    #[cfg(feature = "proxy")]
    Proxy(crate::proxy::ProxyError),
}

crate::layer::layer_error!(Error, |f| {
    Error::Timeout(t) => write!(f, "{}", connection::Error::Timeout(*t)), None;
    Error::TlsUnsupported => f.write_str("wss:// needs a TLS stream"), None;
    Error::Url(e) => e.fmt(f), Some(e);
});

impl Error {
    fn from_connection(e: connection::Error) -> Self {
        match e {
            connection::Error::Protocol(p) => Error::Protocol(p),
            #[cfg(feature = "deflate")]
            connection::Error::Deflate(d) => Error::Deflate(d),
            connection::Error::Timeout(t) => Error::Timeout(t),
            // `connection::Error` is non-exhaustive; a future variant still fails the
            // connection, reported with its close code as a protocol-level failure.
            #[allow(unreachable_patterns)]
            other => Error::Io(io::Error::other(other)),
        }
    }

    /// Whether this is a socket timeout (`WouldBlock` or `TimedOut`): nothing was lost
    /// and the call may be repeated.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Io(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut))
    }
}

/// Settings of one blocking connection (either role).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Config {
    /// Protocol settings of the core connection (limits, delivery, timers). The default
    /// has no keepalive (nothing runs between calls) and a 16 MiB message limit.
    pub protocol: connection::Config,
    /// Bytes asked of the socket per read at first; grows while a large message streams
    /// in (up to 256 KiB). Default 4 KiB.
    pub read_buffer_size: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            protocol: connection::Config {
                max_message_size: 16 << 20,
                ..connection::Config::default()
            },
            read_buffer_size: 4096,
        }
    }
}

impl Config {
    /// Sets the largest message accepted (inflated size when compressed).
    pub fn with_max_message_size(mut self, bytes: usize) -> Self {
        self.protocol.max_message_size = bytes;
        self
    }
    /// Sets the largest frame accepted.
    pub fn with_max_frame_size(mut self, bytes: usize) -> Self {
        self.protocol.max_frame_size = bytes;
        self
    }
}

/// Settings of a blocking server connection: connection and handshake settings.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct ServerConfig {
    /// Settings of the connection once open.
    pub connection: Config,
    /// Handshake settings: request limits, subprotocols, origin check, permessage-deflate.
    pub handshake: handshake::ServerConfig,
}

impl fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerConfig")
            .field("connection", &self.connection)
            .finish_non_exhaustive()
    }
}

impl ServerConfig {
    /// Sets the per-connection settings.
    pub fn with_connection(mut self, connection: Config) -> Self {
        self.connection = connection;
        self
    }
    /// Accepts permessage-deflate offers with these settings (`None`: ignore offers).
    #[cfg(feature = "deflate")]
    pub fn with_deflate(mut self, deflate: Option<DeflateConfig>) -> Self {
        self.handshake.deflate = deflate;
        self
    }
}

/// Settings of a blocking client: connection and handshake settings plus socket options.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ClientConfig {
    /// Settings of the connection once open.
    pub connection: Config,
    /// Handshake settings: response limits and the permessage-deflate offer.
    pub handshake: handshake::ClientConfig,
    /// Time allowed for each TCP connect attempt, and for a proxy to open its tunnel.
    /// Default 10 s.
    pub connect_timeout: Duration,
    /// The socket's read timeout, set by [`connect`] (it bounds the handshake too).
    /// Default 30 s; `None` waits forever.
    pub read_timeout: Option<Duration>,
    /// The socket's write timeout, set by [`connect`]. Default 30 s.
    pub write_timeout: Option<Duration>,
    /// Set `TCP_NODELAY`. Default true: each send is one write.
    pub nodelay: bool,
    /// Subprotocols to offer, most preferred first.
    pub subprotocols: Vec<String>,
    /// Extra request headers, for example `Authorization`.
    pub headers: Vec<(String, String)>,
    /// The proxy to connect through (feature `proxy`; the same [`Proxy`](crate::proxy::Proxy)
    /// as the tokio client). Default none. Opening the tunnel (TCP to the proxy excluded)
    /// must finish within [`ClientConfig::connect_timeout`].
    #[cfg(feature = "proxy")]
    pub proxy: crate::proxy::Proxy,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            connection: Config::default(),
            handshake: handshake::ClientConfig::default(),
            connect_timeout: Duration::from_secs(10),
            read_timeout: Some(Duration::from_secs(30)),
            write_timeout: Some(Duration::from_secs(30)),
            nodelay: true,
            subprotocols: Vec::new(),
            headers: Vec::new(),
            #[cfg(feature = "proxy")]
            proxy: crate::proxy::Proxy::none(),
        }
    }
}

impl ClientConfig {
    /// Sets the per-connection settings.
    pub fn with_connection(mut self, connection: Config) -> Self {
        self.connection = connection;
        self
    }
    /// Sets the socket read timeout.
    pub fn with_read_timeout(mut self, t: Option<Duration>) -> Self {
        self.read_timeout = t;
        self
    }
    /// Sets [`ClientConfig::connect_timeout`].
    pub fn with_connect_timeout(mut self, t: Duration) -> Self {
        self.connect_timeout = t;
        self
    }
    /// Sets [`ClientConfig::proxy`] (feature `proxy`).
    #[cfg(feature = "proxy")]
    pub fn with_proxy(mut self, proxy: crate::proxy::Proxy) -> Self {
        self.proxy = proxy;
        self
    }
    /// Offers permessage-deflate with these settings (`None`: no offer).
    #[cfg(feature = "deflate")]
    pub fn with_deflate(mut self, deflate: Option<DeflateConfig>) -> Self {
        self.handshake.deflate = deflate;
        self
    }
}

/// Connects to a `ws://host[:port]/path` URL over TCP (each resolved address in turn,
/// within [`ClientConfig::connect_timeout`] each), sets the socket options and runs the
/// opening handshake. For `wss://` use `connect_tls` (feature `rustls`). With feature
/// `proxy`, the connection goes through the [`ClientConfig::proxy`] named for the host.
pub fn connect(url: &str, config: &ClientConfig) -> Result<WebSocket<TcpStream>, Error> {
    let (request, target) = ClientRequest::from_url(url).map_err(Error::Url)?;
    if target.secure {
        return Err(Error::TlsUnsupported);
    }
    let stream = open_stream(&target.host, target.port, false, config)?;
    run_client_handshake(stream, request, config)
}

/// The TCP stream to `host:port` for a client: direct, or a tunnel through the proxy the
/// configuration names for it (feature `proxy`; `secure`: a `wss://` URL).
fn open_stream(
    host: &str,
    port: u16,
    secure: bool,
    config: &ClientConfig,
) -> Result<TcpStream, Error> {
    #[cfg(feature = "proxy")]
    if let Some(server) = config
        .proxy
        .for_target(host, secure)
        .map_err(Error::Proxy)?
    {
        let mut stream = connect_tcp(server.host(), server.port(), config)?;
        proxy_tunnel(&mut stream, &server, host, port, config)?;
        return Ok(stream);
    }
    #[cfg(not(feature = "proxy"))]
    let _ = secure;
    connect_tcp(host, port, config)
}

/// Opens the tunnel on `stream` (connected to the proxy) within the connect timeout: the
/// socket timeouts are set to what is left of it before each step, and put back after.
#[cfg(feature = "proxy")]
fn proxy_tunnel(
    stream: &mut TcpStream,
    server: &crate::proxy::ProxyServer,
    host: &str,
    port: u16,
    config: &ClientConfig,
) -> Result<(), Error> {
    use crate::proxy::{MAX_READ, Negotiation, Step};

    let max_head = config.proxy.max_response_head();
    let mut negotiation = Negotiation::new(server, host, port, max_head).map_err(Error::Proxy)?;
    let deadline = Instant::now() + config.connect_timeout;
    let mut buf = [0u8; MAX_READ];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Error::Io(io::Error::new(
                io::ErrorKind::TimedOut,
                "the proxy did not open the tunnel within the connect timeout",
            )));
        }
        stream.set_read_timeout(Some(left))?;
        stream.set_write_timeout(Some(left))?;
        match negotiation.poll().map_err(Error::Proxy)? {
            Step::Write(bytes) => stream.write_all(&bytes)?,
            Step::Read(n) => {
                let got = read_some(stream, &mut buf[..n.min(MAX_READ)])?;
                negotiation.feed(&buf[..got]);
            }
            Step::Done => break,
        }
    }
    stream.set_read_timeout(config.read_timeout)?;
    stream.set_write_timeout(config.write_timeout)?;
    Ok(())
}

/// TCP to `host:port`, each resolved address in turn, with the socket options set.
fn connect_tcp(host: &str, port: u16, config: &ClientConfig) -> Result<TcpStream, Error> {
    let mut last = None;
    let mut stream = None;
    for addr in (host, port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, config.connect_timeout) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let stream = match stream {
        Some(s) => s,
        None => {
            return Err(Error::Io(last.unwrap_or_else(|| {
                io::Error::new(io::ErrorKind::NotFound, "host name resolved to no address")
            })));
        }
    };
    stream.set_read_timeout(config.read_timeout)?;
    stream.set_write_timeout(config.write_timeout)?;
    stream.set_nodelay(config.nodelay)?;
    Ok(stream)
}

/// A blocking `wss://` stream: rustls's own blocking TLS stream over TCP (feature
/// `rustls`).
#[cfg(feature = "rustls")]
pub type TlsStream =
    tokio_rustls::rustls::StreamOwned<tokio_rustls::rustls::ClientConnection, TcpStream>;

/// Connects to a `wss://host[:port]/path` URL (feature `rustls`): TCP as [`connect`]
/// does (the socket's read and write timeouts bound the TLS handshake too), TLS with
/// `tls` (or [`tls::default_client_config`](crate::tls::default_client_config): ring
/// provider, Mozilla's roots), then the opening handshake. The certificate is checked
/// against the URL's host; a failed check is [`Error::Io`] (kind `InvalidData`) naming
/// the certificate problem.
#[cfg(feature = "rustls")]
pub fn connect_tls(
    url: &str,
    config: &ClientConfig,
    tls: Option<std::sync::Arc<tokio_rustls::rustls::ClientConfig>>,
) -> Result<WebSocket<TlsStream>, Error> {
    use tokio_rustls::rustls::{ClientConnection, StreamOwned, pki_types::ServerName};

    let (request, target) = ClientRequest::from_url(url).map_err(Error::Url)?;
    if !target.secure {
        return Err(Error::Url(crate::url::UrlError::UnsupportedScheme));
    }
    let tls = match tls {
        Some(t) => t,
        None => crate::tls::webpki_client_config().map_err(|e| Error::Io(io::Error::other(e)))?,
    };
    let name = ServerName::try_from(target.host.clone())
        .map_err(|_| Error::ClientHandshake(ClientError::InvalidRequest("invalid host for TLS")))?;
    let conn = ClientConnection::new(tls, name).map_err(|e| Error::Io(io::Error::other(e)))?;
    let tcp = open_stream(&target.host, target.port, true, config)?;
    let mut stream = StreamOwned::new(conn, tcp);
    // Finish the TLS handshake here, so a certificate problem is reported as such rather
    // than as a failed write of the upgrade request.
    while stream.conn.is_handshaking() {
        stream.conn.complete_io(&mut stream.sock)?;
    }
    run_client_handshake(stream, request, config)
}

/// Runs the client side of the opening handshake on a connected `stream` (TLS or other),
/// for `host` (the `Host` header) and `path` (with query).
pub fn client_handshake<S: Read + Write>(
    stream: S,
    host: &str,
    path: &str,
    config: &ClientConfig,
) -> Result<WebSocket<S>, Error> {
    run_client_handshake(stream, ClientRequest::new(host, path), config)
}

fn run_client_handshake<S: Read + Write>(
    mut stream: S,
    request: ClientRequest,
    config: &ClientConfig,
) -> Result<WebSocket<S>, Error> {
    let request =
        crate::layer::with_client_options(request, &config.subprotocols, &config.headers, None);
    let (mut hs, bytes) =
        ClientHandshake::new(&request, config.handshake.clone()).map_err(Error::ClientHandshake)?;
    stream.write_all(&bytes)?;
    stream.flush()?;
    let mut buf = [0u8; HANDSHAKE_READ];
    let upgraded = loop {
        let n = read_some(&mut stream, &mut buf)?;
        match hs.feed(&buf[..n]) {
            Ok(None) => {}
            Ok(Some(u)) => break u,
            Err(e) => return Err(Error::ClientHandshake(e)),
        }
    };
    Ok(WebSocket::open(
        stream,
        Role::Client,
        &config.connection,
        #[cfg(feature = "deflate")]
        upgraded.deflate.zip(config.handshake.deflate.as_ref()),
        &upgraded.leftover,
        upgraded.subprotocol,
    ))
}

/// Reads at least one byte; end of stream is `UnexpectedEof`.
fn read_some<S: Read>(stream: &mut S, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match stream.read(buf) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Runs the server side of the opening handshake on `stream`, accepting every valid
/// request. An invalid request is answered with its HTTP error response before
/// [`Error::ServerHandshake`] is returned. Bound the wait with the socket's read timeout.
pub fn accept<S: Read + Write>(stream: S, config: &ServerConfig) -> Result<WebSocket<S>, Error> {
    accept_with(stream, config, |_| Ok(()))
}

/// [`accept`], letting `check` inspect the request first (path, headers, origin) and
/// refuse it with an HTTP status and body; the refusal is sent and [`Error::Rejected`]
/// returned.
pub fn accept_with<S, F>(
    mut stream: S,
    config: &ServerConfig,
    check: F,
) -> Result<WebSocket<S>, Error>
where
    S: Read + Write,
    F: FnOnce(&Request) -> Result<(), (u16, String)>,
{
    let mut hs = ServerHandshake::new(&config.handshake);
    let mut buf = [0u8; HANDSHAKE_READ];
    let request = loop {
        let n = read_some(&mut stream, &mut buf)?;
        match hs.feed(&buf[..n]) {
            Ok(None) => {}
            Ok(Some(r)) => break r,
            Err(e) => {
                let _ = stream.write_all(&e.response());
                let _ = stream.flush();
                return Err(Error::ServerHandshake(e));
            }
        }
    };
    if let Err((status, body)) = check(&request) {
        let _ = stream.write_all(&request.reject(status, &[], &body));
        let _ = stream.flush();
        return Err(Error::Rejected(status));
    }
    let accepted = match request.accept(&config.handshake) {
        Ok(a) => a,
        Err(e) => {
            let _ = stream.write_all(&e.response());
            let _ = stream.flush();
            return Err(Error::ServerHandshake(e));
        }
    };
    stream.write_all(&accepted.response)?;
    stream.flush()?;
    Ok(WebSocket::open(
        stream,
        Role::Server,
        &config.connection,
        #[cfg(feature = "deflate")]
        accepted.deflate.zip(config.handshake.deflate.as_ref()),
        &accepted.leftover,
        accepted.subprotocol,
    ))
}

#[cfg(feature = "tracing")]
fn trace_open(role: Role) {
    tracing::debug!(target: "rapidws::blocking", ?role, "websocket open");
}
#[cfg(not(feature = "tracing"))]
fn trace_open(_: Role) {}

#[cfg(feature = "tracing")]
fn trace_end(role: Role, error: Option<&Error>, close: Option<&CloseFrame>) {
    match error {
        Some(e) => {
            tracing::debug!(target: "rapidws::blocking", ?role, error = %e, "websocket failed")
        }
        None => tracing::debug!(
            target: "rapidws::blocking",
            ?role,
            code = close.map(|c| c.code),
            "websocket closed"
        ),
    }
}
#[cfg(not(feature = "tracing"))]
fn trace_end(_: Role, _: Option<&Error>, _: Option<&CloseFrame>) {}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Open,
    /// Closed or failed: nothing more is read.
    Done,
}

/// A WebSocket connection over a blocking stream.
///
/// [`read`](Self::read) returns the next message (pings are answered and closes echoed
/// as they are read); [`send`](Self::send) writes one message and flushes. Output the
/// connection produces on its own (pongs, the close echo) is written during `read`.
pub struct WebSocket<S> {
    stream: S,
    conn: Connection,
    /// Encoded output not yet written (kept across a write timeout).
    out: Vec<u8>,
    out_pos: usize,
    gather: Option<(MessageKind, BytesMut)>,
    subprotocol: Option<String>,
    deflate: bool,
    read_buffer_size: usize,
    read_size: usize,
    eof: bool,
    state: State,
    peer_close: Option<CloseFrame>,
}

impl<S> fmt::Debug for WebSocket<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebSocket")
            .field("role", &self.conn.role())
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl<S: Read + Write> WebSocket<S> {
    /// Wraps a stream on which the opening handshake already happened; `leftover` are
    /// bytes read after the handshake head, if any.
    pub fn from_raw(stream: S, role: Role, config: &Config, leftover: &[u8]) -> Self {
        let conn = Connection::new(role, config.protocol.clone(), Instant::now());
        Self::from_connection(stream, conn, config, leftover, None)
    }

    /// The connection for a finished opening handshake (either role), with the agreed
    /// permessage-deflate parameters and this end's deflate settings, if any.
    fn open(
        stream: S,
        role: Role,
        config: &Config,
        #[cfg(feature = "deflate")] deflate: Option<(DeflateParams, &DeflateConfig)>,
        leftover: &[u8],
        subprotocol: Option<String>,
    ) -> Self {
        #[cfg(feature = "deflate")]
        let compressed = deflate.is_some();
        #[cfg(not(feature = "deflate"))]
        let compressed = false;
        let conn = crate::layer::open_connection(
            role,
            &config.protocol,
            Instant::now(),
            #[cfg(feature = "deflate")]
            deflate,
        );
        trace_open(role);
        let mut ws = Self::from_connection(stream, conn, config, leftover, subprotocol);
        ws.deflate = compressed;
        ws
    }

    fn from_connection(
        stream: S,
        mut conn: Connection,
        config: &Config,
        leftover: &[u8],
        subprotocol: Option<String>,
    ) -> Self {
        if !leftover.is_empty() {
            conn.handle_bytes(Instant::now(), leftover);
        }
        WebSocket {
            stream,
            conn,
            out: Vec::new(),
            out_pos: 0,
            gather: None,
            subprotocol,
            deflate: false,
            read_buffer_size: config.read_buffer_size.max(256),
            read_size: config.read_buffer_size.max(256),
            eof: false,
            state: State::Open,
            peer_close: None,
        }
    }

    /// The subprotocol agreed in the handshake, if any.
    pub fn subprotocol(&self) -> Option<&str> {
        self.subprotocol.as_deref()
    }

    /// This end's role.
    pub fn role(&self) -> Role {
        self.conn.role()
    }

    /// Whether permessage-deflate (RFC 7692) was agreed in the handshake.
    pub fn is_compressed(&self) -> bool {
        self.deflate
    }

    /// The peer's close frame, once received (code 1005 when it had none).
    pub fn close_frame(&self) -> Option<&CloseFrame> {
        self.peer_close.as_ref()
    }

    /// The underlying stream (to change its timeouts, for example).
    pub fn get_ref(&self) -> &S {
        &self.stream
    }

    /// The underlying stream, mutably. Reading or writing it corrupts the connection.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.stream
    }

    /// The sans-IO connection underneath, for inspection.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// The stream back (after a close, to shut it down).
    pub fn into_inner(self) -> S {
        self.stream
    }

    /// Writes all pending output and flushes the stream. After a write timeout the
    /// unwritten rest is kept and written by the next call.
    pub fn flush(&mut self) -> Result<(), Error> {
        if self.out_pos == self.out.len() {
            self.out.clear();
            self.out_pos = 0;
        }
        self.conn.write_pending(&mut self.out);
        while self.out_pos < self.out.len() {
            match self.stream.write(&self.out[self.out_pos..]) {
                Ok(0) => return Err(Error::Io(io::ErrorKind::WriteZero.into())),
                Ok(n) => self.out_pos += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::Io(e)),
            }
        }
        self.out.clear();
        self.out_pos = 0;
        if self.out.capacity() > MAX_READ_CHUNK {
            self.out = Vec::new();
        }
        self.stream.flush()?;
        Ok(())
    }

    /// Queues `msg` and writes it out. `Message::Close` starts the close handshake (then
    /// [`read`](Self::read) until `None`, or use [`close`](Self::close)).
    ///
    /// # Errors
    ///
    /// [`Error::Closed`] after the close handshake started or the connection failed;
    /// [`Error::Send`] for a control payload over 125 bytes or a close code that may not
    /// be sent; [`Error::Io`] when the write failed. After a write timeout the message
    /// stays queued and the next call (or [`flush`](Self::flush)) writes the rest.
    pub fn send(&mut self, msg: Message) -> Result<(), Error> {
        let r = match msg {
            Message::Text(t) => self.conn.send_bytes(MessageKind::Text, t.into_bytes()),
            Message::Binary(b) => self.conn.send_bytes(MessageKind::Binary, b),
            Message::Ping(p) => self.conn.ping(&p),
            Message::Pong(p) => self.conn.pong(&p),
            Message::Close(c) => {
                let (code, reason) = c.map_or((1000, Utf8Bytes::default()), |c| (c.code, c.reason));
                self.conn
                    .close(Instant::now(), CloseCode(code), reason.as_str())
            }
        };
        r.map_err(Error::from_send)?;
        self.flush()
    }

    /// Sends a text message (copied); fails like [`send`](Self::send).
    pub fn send_text(&mut self, text: &str) -> Result<(), Error> {
        self.conn.send_text(text).map_err(Error::from_send)?;
        self.flush()
    }

    /// Sends a binary message (copied); fails like [`send`](Self::send).
    pub fn send_binary(&mut self, data: &[u8]) -> Result<(), Error> {
        self.conn.send_binary(data).map_err(Error::from_send)?;
        self.flush()
    }

    /// Sends a ping (payload at most 125 bytes).
    pub fn ping(&mut self, payload: &[u8]) -> Result<(), Error> {
        self.conn.ping(payload).map_err(Error::from_send)?;
        self.flush()
    }

    /// Closes: sends a close frame with `code` and `reason` (at most 123 bytes), then
    /// reads (discarding data) until the peer's close arrives. With a socket read timeout
    /// shorter than the close timeout, a silent peer ends the wait with
    /// [`Error::Timeout`] when the close timeout passes. A client then waits for the
    /// server to close TCP (RFC 6455 7.1.1); a server returns and the stream is closed
    /// when dropped.
    pub fn close(&mut self, code: u16, reason: &str) -> Result<(), Error> {
        match self.conn.close(Instant::now(), CloseCode(code), reason) {
            Ok(()) | Err(SendError::Closed) => {}
            Err(e) => return Err(Error::Send(e)),
        }
        let _ = self.flush();
        loop {
            match self.read() {
                Ok(Some(_)) => {}
                Ok(None) => return Ok(()),
                // Our close went out; the peer closing TCP instead of answering ends it too.
                Err(e) if matches!(&e, Error::Io(io) if io.kind() == io::ErrorKind::UnexpectedEof) =>
                {
                    return Ok(());
                }
                // A socket timeout: keep waiting while the close timer (run at each
                // timed-out read) has not failed the connection.
                Err(e) if e.is_timeout() && self.conn.config().close_timeout.is_some() => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads the next message: text, binary, a ping or pong (already answered), or the
    /// peer's close (already echoed). `Ok(None)` once the connection has closed cleanly
    /// (and after an error has been returned).
    ///
    /// # Errors
    ///
    /// A socket timeout ([`Error::is_timeout`]) loses nothing: call again.
    /// [`Error::Protocol`] or `Error::Deflate` when the peer broke the protocol (our close
    /// with its code was sent), [`Error::Timeout`] when a connection timer ran out,
    /// [`Error::Io`] of kind `UnexpectedEof` when the peer closed TCP without a close
    /// frame. These end the connection.
    pub fn read(&mut self) -> Result<Option<Message>, Error> {
        loop {
            if self.state == State::Done {
                return Ok(None);
            }
            match self.conn.poll_event_owned() {
                Some(Ok(ev)) => {
                    if let OwnedEvent::Close(c) = &ev {
                        self.peer_close = Some(match c {
                            Some((code, reason)) => CloseFrame::new(code.0, reason.as_str()),
                            None => CloseFrame::new(1005, ""),
                        });
                    }
                    if self.conn.has_pending_output() {
                        self.flush()?;
                    }
                    if self.conn.is_closed() {
                        self.finish();
                    }
                    if let Some(m) = gather(&mut self.gather, ev) {
                        return Ok(Some(m));
                    }
                    continue;
                }
                Some(Err(e)) => {
                    // The close frame for the error is queued: send it, then stop.
                    let e = Error::from_connection(e);
                    let _ = self.flush();
                    trace_end(self.conn.role(), Some(&e), None);
                    self.state = State::Done;
                    return Err(e);
                }
                None => {}
            }
            if self.conn.is_closed() {
                self.flush()?;
                self.finish();
                continue;
            }
            if self.eof {
                // RFC 6455 7.1.5: TCP closed without a close frame (status 1006).
                self.state = State::Done;
                let e = Error::Io(io::ErrorKind::UnexpectedEof.into());
                trace_end(self.conn.role(), Some(&e), None);
                return Err(e);
            }
            self.run_timers();
            if self.conn.has_pending_output() {
                self.flush()?;
            }
            if let Err(e) = self.fill() {
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) {
                    // A socket timeout: due timers may now fail the connection (reported
                    // by the next loop) or queue a keepalive ping.
                    self.run_timers();
                    if self.conn.is_closed() {
                        continue;
                    }
                    if self.conn.has_pending_output() {
                        self.flush()?;
                    }
                }
                return Err(Error::Io(e));
            }
        }
    }

    fn run_timers(&mut self) {
        let now = Instant::now();
        if self.conn.poll_timeout().is_some_and(|t| t <= now) {
            self.conn.handle_timeout(now);
        }
    }

    /// The connection ended cleanly: a client waits (within the socket's read timeout)
    /// for the server to close TCP first (RFC 6455 7.1.1).
    fn finish(&mut self) {
        if self.state == State::Done {
            return;
        }
        self.state = State::Done;
        trace_end(self.conn.role(), None, self.peer_close.as_ref());
        if self.conn.role() == Role::Client && !self.eof {
            let mut buf = [0u8; 512];
            for _ in 0..64 {
                match self.stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
        }
        *self.conn.recv_buffer() = BytesMut::new();
    }

    /// Reads once into the connection's receive buffer.
    fn fill(&mut self) -> io::Result<()> {
        // Room for the rest of a large frame is reserved in one step; the read fills at
        // most `read_size` of it, so the zeroing below never covers more than one read.
        let buf = self.conn.reserve_recv(self.read_size);
        let start = buf.len();
        let want = self.read_size.min(buf.capacity() - start).max(1);
        buf.resize(start + want, 0);
        let r = loop {
            match self.stream.read(&mut buf[start..]) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => break r,
            }
        };
        match r {
            Ok(n) => {
                buf.truncate(start + n);
                if n == 0 {
                    self.eof = true;
                    if buf.is_empty() {
                        *buf = BytesMut::new();
                    }
                } else {
                    self.conn.handle_received(Instant::now());
                    self.read_size = if n == want {
                        (self.read_size * 2).min(MAX_READ_CHUNK)
                    } else {
                        self.read_buffer_size
                    };
                }
                Ok(())
            }
            Err(e) => {
                buf.truncate(start);
                Err(e)
            }
        }
    }
}

/// Gathers chunk events into whole messages (for [`Delivery::Chunks`](crate::connection::Delivery)).
fn gather(slot: &mut Option<(MessageKind, BytesMut)>, ev: OwnedEvent) -> Option<Message> {
    Some(match ev {
        OwnedEvent::Chunk {
            kind,
            data,
            first,
            fin,
        } => {
            if first || slot.is_none() {
                *slot = Some((kind, BytesMut::new()));
            }
            let (k, buf) = slot.as_mut()?;
            let k = *k;
            buf.extend_from_slice(&data);
            if !fin {
                return None;
            }
            let data = buf.split().freeze();
            *slot = None;
            return gather(slot, OwnedEvent::Message { kind: k, data });
        }
        OwnedEvent::Message {
            kind: MessageKind::Text,
            data,
        } => Message::Text(Utf8Bytes::from_validated(data)),
        OwnedEvent::Message { data, .. } => Message::Binary(data),
        OwnedEvent::Ping(p) => Message::Ping(p),
        OwnedEvent::Pong(p) => Message::Pong(p),
        OwnedEvent::Close(c) => Message::Close(c.map(|(code, reason)| CloseFrame {
            code: code.0,
            reason: Utf8Bytes::from(reason),
        })),
        #[allow(unreachable_patterns)]
        _ => return None,
    })
}
