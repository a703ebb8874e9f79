//! Client connections through proxies (feature `proxy`): HTTP `CONNECT` (RFC 9110 9.3.6)
//! and SOCKS5 (RFC 1928, with RFC 1929 username/password authentication).
//!
//! The public face is [`Proxy`], set on a client's configuration; the exchange itself is
//! the sans-IO `Negotiation` here (no IO, no runtime), driven over a socket by the tokio
//! client and by the blocking client.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use base64::Engine;

/// Default for [`Proxy::max_response_head`]: 8 KiB.
pub const DEFAULT_MAX_RESPONSE_HEAD: usize = 8 << 10;

/// The protocol spoken to a proxy server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProxyKind {
    /// An HTTP proxy, asked with `CONNECT host:port` (URL scheme `http://`).
    Http,
    /// A SOCKS5 proxy (URL schemes `socks5://` and `socks5h://`). The target host name is
    /// always sent as a name, so DNS resolution happens at the proxy.
    Socks5,
}

/// One proxy server: its kind, address and optional credentials.
///
/// Its `Debug` output leaves the password out.
#[derive(Clone, PartialEq, Eq)]
pub struct ProxyServer {
    kind: ProxyKind,
    host: String,
    port: u16,
    credentials: Option<(String, String)>,
}

impl fmt::Debug for ProxyServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProxyServer")
            .field("kind", &self.kind)
            .field("host", &self.host)
            .field("port", &self.port)
            .field("username", &self.username())
            .finish_non_exhaustive()
    }
}

impl ProxyServer {
    /// Parses a proxy URL: `http://`, `socks5://` or `socks5h://`, then optional
    /// `user:password@` (percent-encoded), a host (`[v6]` in brackets) and an optional
    /// port (default 80 for `http`, 1080 for SOCKS5). A URL without a scheme is taken as
    /// `http://`, as curl does. A trailing `/` is allowed; other paths are refused.
    pub fn parse(url: &str) -> Result<ProxyServer, ProxyError> {
        let (kind, rest) = match url.split_once("://") {
            Some((scheme, rest)) => {
                let kind = if scheme.eq_ignore_ascii_case("http") {
                    ProxyKind::Http
                } else if scheme.eq_ignore_ascii_case("socks5")
                    || scheme.eq_ignore_ascii_case("socks5h")
                {
                    ProxyKind::Socks5
                } else {
                    return Err(ProxyError::InvalidUrl("unsupported proxy scheme"));
                };
                (kind, rest)
            }
            None => (ProxyKind::Http, url),
        };
        let authority = match rest.find(['/', '?', '#']) {
            Some(i) if &rest[i..] == "/" => &rest[..i],
            Some(_) => return Err(ProxyError::InvalidUrl("a proxy URL has no path")),
            None => rest,
        };
        let (userinfo, hostport) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let credentials = match userinfo {
            None => None,
            Some(u) => {
                let (user, pass) = u.split_once(':').unwrap_or((u, ""));
                Some((percent_decode(user)?, percent_decode(pass)?))
            }
        };
        let default_port = match kind {
            ProxyKind::Http => 80,
            ProxyKind::Socks5 => 1080,
        };
        let (host, port) = split_host_port(hostport)?;
        let port = match port {
            None => default_port,
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|&p| p != 0)
                .ok_or(ProxyError::InvalidUrl("invalid proxy port"))?,
        };
        Ok(ProxyServer {
            kind,
            host: host.to_owned(),
            port,
            credentials,
        })
    }

    /// The protocol spoken to this proxy.
    pub fn kind(&self) -> ProxyKind {
        self.kind
    }

    /// The proxy's host name or IP literal (without brackets).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The proxy's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The user name sent to the proxy, if the URL had credentials.
    pub fn username(&self) -> Option<&str> {
        self.credentials.as_ref().map(|(u, _)| u.as_str())
    }
}

fn split_host_port(hostport: &str) -> Result<(&str, Option<&str>), ProxyError> {
    let bad = ProxyError::InvalidUrl("missing or malformed proxy host");
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let (host, after) = v6.split_once(']').ok_or(bad.clone())?;
        host.parse::<Ipv6Addr>().map_err(|_| bad.clone())?;
        match after {
            "" => (host, None),
            a => (host, Some(a.strip_prefix(':').ok_or(bad.clone())?)),
        }
    } else {
        match hostport.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        }
    };
    let name_ok = host
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b));
    if host.is_empty() || !(name_ok || hostport.starts_with('[')) {
        return Err(bad);
    }
    if let Some(p) = port
        && (p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(ProxyError::InvalidUrl("invalid proxy port"));
    }
    Ok((host, port))
}

fn percent_decode(s: &str) -> Result<String, ProxyError> {
    let bad = ProxyError::InvalidUrl("invalid percent-encoding in proxy credentials");
    let mut out = Vec::with_capacity(s.len());
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        if b == b'%' {
            let hi = bytes.next().and_then(|c| (c as char).to_digit(16));
            let lo = bytes.next().and_then(|c| (c as char).to_digit(16));
            match (hi, lo) {
                (Some(h), Some(l)) => out.push((h * 16 + l) as u8),
                _ => return Err(bad),
            }
        } else {
            out.push(b);
        }
    }
    String::from_utf8(out).map_err(|_| bad)
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Mode {
    None,
    Env,
    Server(ProxyServer),
}

/// Which proxy a client connects through: none (the default), a fixed server, or the one
/// the environment names ([`Proxy::from_env`], read at each connect). Set it with
/// [`ClientConfig::with_proxy`](super::ClientConfig::with_proxy) (or the blocking
/// client's `with_proxy`).
///
/// The tunnel is opened within the client's `connect_timeout` (reaching the proxy and
/// its answer), then TLS (for `wss://`) and the WebSocket handshake run through it
/// unchanged.
///
#[cfg_attr(feature = "tokio", doc = "```no_run")]
#[cfg_attr(not(feature = "tokio"), doc = "```ignore")]
/// use rapidws::tokio::{ClientConfig, Proxy, connect};
///
/// # async fn run() -> Result<(), rapidws::tokio::Error> {
/// let config = ClientConfig::default().with_proxy(Proxy::socks5("socks5://127.0.0.1:1080")?);
/// let ws = connect("ws://example.com/chat", &config).await?;
/// # Ok(())
/// # }
/// ```
///
/// The proxy is an untrusted peer like any other: its answer is read into at most
/// [`Proxy::max_response_head`] bytes and never past its end, and every failure is a
/// [`ProxyError`] carrying the HTTP status or SOCKS5 reply code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proxy {
    mode: Mode,
    max_response_head: usize,
}

impl Default for Proxy {
    fn default() -> Self {
        Proxy::none()
    }
}

impl Proxy {
    /// Connect directly, ignoring the environment.
    pub fn none() -> Proxy {
        Proxy {
            mode: Mode::None,
            max_response_head: DEFAULT_MAX_RESPONSE_HEAD,
        }
    }

    /// Use the proxy the environment names for each connection (read at connect time):
    /// `https_proxy`/`HTTPS_PROXY` for `wss://`, `http_proxy`/`HTTP_PROXY` for `ws://`,
    /// else `all_proxy`/`ALL_PROXY`; none for hosts matched by `no_proxy`/`NO_PROXY`.
    /// See [`env_proxy`] for the exact rules.
    pub fn from_env() -> Proxy {
        Proxy {
            mode: Mode::Env,
            ..Proxy::none()
        }
    }

    /// An HTTP `CONNECT` proxy: `http://[user:password@]host[:port]` (credentials are
    /// sent as `Proxy-Authorization: Basic`).
    pub fn http(url: &str) -> Result<Proxy, ProxyError> {
        let server = ProxyServer::parse(url)?;
        if server.kind != ProxyKind::Http {
            return Err(ProxyError::InvalidUrl("expected an http:// proxy URL"));
        }
        Ok(Proxy::server(server))
    }

    /// A SOCKS5 proxy: `socks5://[user:password@]host[:port]` (or `socks5h://`, or no
    /// scheme). Credentials use RFC 1929 username/password authentication.
    pub fn socks5(url: &str) -> Result<Proxy, ProxyError> {
        let server = if url.contains("://") {
            ProxyServer::parse(url)?
        } else {
            ProxyServer::parse(&format!("socks5://{url}"))?
        };
        if server.kind != ProxyKind::Socks5 {
            return Err(ProxyError::InvalidUrl("expected a socks5:// proxy URL"));
        }
        Ok(Proxy::server(server))
    }

    /// A proxy of the kind its URL's scheme names (see [`ProxyServer::parse`]).
    pub fn url(url: &str) -> Result<Proxy, ProxyError> {
        ProxyServer::parse(url).map(Proxy::server)
    }

    /// A fixed proxy server, used for every host.
    pub fn server(server: ProxyServer) -> Proxy {
        Proxy {
            mode: Mode::Server(server),
            ..Proxy::none()
        }
    }

    /// Sets [`Proxy::max_response_head`] (at least 64 bytes).
    pub fn with_max_response_head(mut self, bytes: usize) -> Self {
        self.max_response_head = bytes.max(64);
        self
    }

    /// The largest HTTP `CONNECT` response head (status line and headers) read from the
    /// proxy; a longer one fails with [`ProxyError::ResponseTooLarge`]. Default 8 KiB.
    pub fn max_response_head(&self) -> usize {
        self.max_response_head
    }

    /// The proxy to use for `host` (`secure`: a `wss://` URL), reading the process
    /// environment when this is [`Proxy::from_env`].
    pub fn for_target(&self, host: &str, secure: bool) -> Result<Option<ProxyServer>, ProxyError> {
        self.for_target_with(host, secure, |name| std::env::var(name).ok())
    }

    /// [`Proxy::for_target`] with the environment read through `lookup`.
    pub fn for_target_with(
        &self,
        host: &str,
        secure: bool,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<ProxyServer>, ProxyError> {
        match &self.mode {
            Mode::None => Ok(None),
            Mode::Server(s) => Ok(Some(s.clone())),
            Mode::Env => env_proxy(host, secure, lookup),
        }
    }
}

/// The proxy the environment names for a connection to `host` (`secure`: a `wss://`
/// URL), with variables read through `lookup` (pass `|k| std::env::var(k).ok()` for the
/// process environment). Pure: it reads nothing else.
///
/// - `wss://` uses `https_proxy`, then `HTTPS_PROXY`; `ws://` uses `http_proxy`, then
///   `HTTP_PROXY`; either falls back to `all_proxy`, then `ALL_PROXY`. Empty values
///   count as unset; the lower-case name wins, as in curl.
/// - `no_proxy` (or `NO_PROXY`) is a comma-separated list: `*` matches every host; a
///   name matches itself and its subdomains (`example.com` and `.example.com` both
///   match `a.example.com`); an IP literal matches only itself. Ports in entries are
///   ignored; CIDR ranges are not supported.
/// - The value is a proxy URL as [`ProxyServer::parse`] takes it; a malformed one is an
///   error rather than a silent direct connection.
pub fn env_proxy(
    host: &str,
    secure: bool,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Option<ProxyServer>, ProxyError> {
    let get = |lower: &str, upper: &str| {
        lookup(lower)
            .filter(|v| !v.trim().is_empty())
            .or_else(|| lookup(upper).filter(|v| !v.trim().is_empty()))
    };
    let value = if secure {
        get("https_proxy", "HTTPS_PROXY")
    } else {
        get("http_proxy", "HTTP_PROXY")
    }
    .or_else(|| get("all_proxy", "ALL_PROXY"));
    let Some(value) = value else {
        return Ok(None);
    };
    if let Some(list) = get("no_proxy", "NO_PROXY")
        && no_proxy_matches(&list, host)
    {
        return Ok(None);
    }
    ProxyServer::parse(value.trim()).map(Some)
}

/// Whether `host` is listed in a `no_proxy` value.
fn no_proxy_matches(list: &str, host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let host = host.strip_suffix('.').unwrap_or(host);
    let host_is_ip = host.parse::<IpAddr>().is_ok();
    for entry in list.split(',') {
        let entry = entry.trim();
        if entry == "*" {
            return true;
        }
        let entry = strip_entry_port(entry);
        let entry = entry.strip_prefix("*.").unwrap_or(entry);
        let entry = entry.trim_start_matches('.');
        let entry = entry.strip_suffix('.').unwrap_or(entry);
        if entry.is_empty() {
            continue;
        }
        if host.eq_ignore_ascii_case(entry) {
            return true;
        }
        if !host_is_ip && host.len() > entry.len() {
            let (head, tail) = host.split_at(host.len() - entry.len());
            if head.ends_with('.') && tail.eq_ignore_ascii_case(entry) {
                return true;
            }
        }
    }
    false
}

/// `[v6]:port` -> `v6`, `name:port` -> `name`; a bare IPv6 literal stays as it is.
fn strip_entry_port(entry: &str) -> &str {
    if let Some(v6) = entry.strip_prefix('[') {
        return v6.split_once(']').map_or(v6, |(h, _)| h);
    }
    match entry.split_once(':') {
        Some((h, p)) if !p.contains(':') => h,
        _ => entry,
    }
}

/// A proxy refused or botched opening the tunnel, or its settings are unusable.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProxyError {
    /// The proxy URL (given, or from the environment) cannot be used; the reason says why.
    InvalidUrl(&'static str),
    /// The HTTP proxy answered `CONNECT` with this non-2xx status (407: authentication
    /// required or refused).
    Status(u16),
    /// The HTTP proxy's response head passed [`Proxy::max_response_head`].
    ResponseTooLarge,
    /// The proxy's answer is not valid HTTP or SOCKS5 (wrong version, a method we did
    /// not offer, an unknown address type, an unparsable status line, ...).
    MalformedResponse,
    /// The SOCKS5 proxy accepts none of the authentication methods offered (reply
    /// `0xFF`): it wants credentials and none were given, or another method.
    Socks5NoAcceptableMethod,
    /// The SOCKS5 proxy refused the username and password (RFC 1929) with this status.
    Socks5AuthFailed(u8),
    /// The SOCKS5 proxy failed the `CONNECT` request with this reply code (RFC 1928 6:
    /// 1 general failure, 2 not allowed, 3 network unreachable, 4 host unreachable,
    /// 5 connection refused, 6 TTL expired, 7 command not supported, 8 address type not
    /// supported).
    Socks5Reply(u8),
    /// A field does not fit SOCKS5's one-byte length: a host name, user name or password
    /// longer than 255 bytes (or an empty user name).
    Socks5FieldTooLong,
}

impl fmt::Display for ProxyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProxyError::InvalidUrl(why) => write!(f, "invalid proxy URL: {why}"),
            ProxyError::Status(s) => write!(f, "proxy refused CONNECT with status {s}"),
            ProxyError::ResponseTooLarge => f.write_str("proxy response head too large"),
            ProxyError::MalformedResponse => f.write_str("malformed proxy response"),
            ProxyError::Socks5NoAcceptableMethod => {
                f.write_str("SOCKS5 proxy accepts none of the offered authentication methods")
            }
            ProxyError::Socks5AuthFailed(s) => {
                write!(f, "SOCKS5 proxy refused the credentials (status {s})")
            }
            ProxyError::Socks5Reply(code) => {
                let what = match code {
                    1 => "general failure",
                    2 => "connection not allowed by ruleset",
                    3 => "network unreachable",
                    4 => "host unreachable",
                    5 => "connection refused",
                    6 => "TTL expired",
                    7 => "command not supported",
                    8 => "address type not supported",
                    _ => "unknown reply code",
                };
                write!(f, "SOCKS5 proxy failed the connect: {what} ({code})")
            }
            ProxyError::Socks5FieldTooLong => {
                f.write_str("host name or credentials do not fit a SOCKS5 request")
            }
        }
    }
}

impl std::error::Error for ProxyError {}

// RFC 1928 3 and 4: version 5, methods 0x00 (no authentication) and 0x02
// (username/password), command 0x01 CONNECT, address types 1 (IPv4), 3 (domain name),
// 4 (IPv6).
const SOCKS5: u8 = 0x05;
const NO_AUTH: u8 = 0x00;
const USER_PASS: u8 = 0x02;
const NO_ACCEPTABLE: u8 = 0xFF;
const CMD_CONNECT: u8 = 0x01;
const ATYP_V4: u8 = 0x01;
const ATYP_DOMAIN: u8 = 0x03;
const ATYP_V6: u8 = 0x04;

/// Largest read the negotiation ever asks for: a SOCKS5 bound domain name and port.
pub const MAX_READ: usize = 255 + 2;

/// What the negotiation needs next from its driver.
#[derive(Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Step {
    /// Write these bytes (all of them) and flush.
    Write(Vec<u8>),
    /// Read at least one and at most this many bytes (never more: what follows the
    /// proxy's answer belongs to the tunnel) and [`Negotiation::feed`] them.
    Read(usize),
    /// The tunnel is open.
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    SendConnect,
    HttpHead,
    SendGreeting,
    MethodChoice,
    SendAuth,
    AuthReply,
    SendRequest,
    ReplyHead,
    DomainLen,
    BoundAddr(usize),
    Done,
}

/// The client side of opening a tunnel, sans IO: [`poll`](Self::poll) says what to
/// write or how much may be read, [`feed`](Self::feed) takes what was read. The tokio
/// and blocking layers drive the same machine; drive it yourself for another runtime.
///
/// ```
/// use rapidws::proxy::{Negotiation, ProxyServer, Step};
///
/// let server = ProxyServer::parse("http://proxy.example:3128").unwrap();
/// let mut n = Negotiation::new(&server, "example.com", 443, 8192).unwrap();
/// let Ok(Step::Write(request)) = n.poll() else { panic!() };
/// assert!(request.starts_with(b"CONNECT example.com:443 HTTP/1.1\r\n"));
/// // Write it, then read what the proxy answers, at most as much as `Read` allows.
/// let Ok(Step::Read(max)) = n.poll() else { panic!() };
/// let answer = b"HTTP/1.1 200 Connection established\r\n\r\n";
/// for chunk in answer.chunks(max) {
///     n.feed(chunk);
///     if let Ok(Step::Done) = n.poll() { break; }
/// }
/// assert_eq!(n.poll().unwrap(), Step::Done);
/// ```
pub struct Negotiation {
    state: State,
    /// The next message to write: the CONNECT request or the SOCKS5 greeting.
    out: Vec<u8>,
    /// The SOCKS5 username/password message, when there are credentials.
    auth: Option<Vec<u8>>,
    /// The SOCKS5 CONNECT request.
    request: Vec<u8>,
    /// Bytes of the current answer read so far.
    buf: Vec<u8>,
    max_head: usize,
}

impl Negotiation {
    /// A tunnel through `server` to `host:port`, refusing a proxy answer head over
    /// `max_head` bytes. Builds every message up front, so a name or credential that
    /// cannot be sent fails before any byte goes out.
    pub fn new(
        server: &ProxyServer,
        host: &str,
        port: u16,
        max_head: usize,
    ) -> Result<Negotiation, ProxyError> {
        let mut n = Negotiation {
            state: State::Done,
            out: Vec::new(),
            auth: None,
            request: Vec::new(),
            buf: Vec::new(),
            max_head,
        };
        match server.kind {
            ProxyKind::Http => {
                n.out = connect_request(server, host, port)?;
                n.state = State::SendConnect;
            }
            ProxyKind::Socks5 => {
                n.request = socks5_request(host, port)?;
                n.auth = server
                    .credentials
                    .as_ref()
                    .map(|(u, p)| socks5_auth(u, p))
                    .transpose()?;
                // RFC 1928 3: VER, NMETHODS, METHODS.
                n.out = match n.auth {
                    Some(_) => vec![SOCKS5, 2, NO_AUTH, USER_PASS],
                    None => vec![SOCKS5, 1, NO_AUTH],
                };
                n.state = State::SendGreeting;
            }
        }
        Ok(n)
    }

    /// Bytes read from the proxy: at least one, at most what [`Step::Read`] allowed.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next step.
    pub fn poll(&mut self) -> Result<Step, ProxyError> {
        loop {
            match self.state {
                State::SendConnect => {
                    self.state = State::HttpHead;
                    return Ok(Step::Write(std::mem::take(&mut self.out)));
                }
                State::HttpHead => {
                    // Each read asks for the fewest bytes that could complete
                    // "\r\n\r\n", so no read can run past the end of the head.
                    const END: &[u8; 4] = b"\r\n\r\n";
                    let matched = (1..=4)
                        .rev()
                        .find(|&k| self.buf.ends_with(&END[..k]))
                        .unwrap_or(0);
                    if matched < 4 {
                        let want = 4 - matched;
                        if self.buf.len() + want > self.max_head {
                            return Err(ProxyError::ResponseTooLarge);
                        }
                        return Ok(Step::Read(want));
                    }
                    check_connect_response(&self.buf)?;
                    self.state = State::Done;
                }
                State::SendGreeting => {
                    self.state = State::MethodChoice;
                    return Ok(Step::Write(std::mem::take(&mut self.out)));
                }
                State::MethodChoice => {
                    let Some([ver, method]) = self.take::<2>() else {
                        return Ok(self.read_rest(2));
                    };
                    if ver != SOCKS5 {
                        return Err(ProxyError::MalformedResponse);
                    }
                    self.state = match (method, &self.auth) {
                        (NO_AUTH, _) => State::SendRequest,
                        (USER_PASS, Some(_)) => State::SendAuth,
                        // RFC 1928 3: "If the selected METHOD is X'FF', none of the
                        // methods listed by the client are acceptable, and the client MUST
                        // close the connection."
                        (NO_ACCEPTABLE, _) => return Err(ProxyError::Socks5NoAcceptableMethod),
                        // A method we did not offer.
                        _ => return Err(ProxyError::MalformedResponse),
                    };
                }
                State::SendAuth => {
                    self.state = State::AuthReply;
                    return Ok(Step::Write(self.auth.take().unwrap_or_default()));
                }
                State::AuthReply => {
                    let Some([ver, status]) = self.take::<2>() else {
                        return Ok(self.read_rest(2));
                    };
                    // RFC 1929 2: "A STATUS field of X'00' indicates success. If the
                    // server returns a `failure' (STATUS value other than X'00') status,
                    // it MUST close the connection."
                    if ver != 0x01 {
                        return Err(ProxyError::MalformedResponse);
                    }
                    if status != 0x00 {
                        return Err(ProxyError::Socks5AuthFailed(status));
                    }
                    self.state = State::SendRequest;
                }
                State::SendRequest => {
                    self.state = State::ReplyHead;
                    return Ok(Step::Write(std::mem::take(&mut self.request)));
                }
                State::ReplyHead => {
                    // RFC 1928 6: VER, REP, RSV, ATYP, BND.ADDR, BND.PORT.
                    let Some([ver, rep, _, atyp]) = self.take::<4>() else {
                        return Ok(self.read_rest(4));
                    };
                    if ver != SOCKS5 {
                        return Err(ProxyError::MalformedResponse);
                    }
                    if rep != 0x00 {
                        return Err(ProxyError::Socks5Reply(rep));
                    }
                    // The bound address is read to its end (and dropped) so no byte of it
                    // is taken for the tunnel; its size comes from the address type.
                    self.state = match atyp {
                        ATYP_V4 => State::BoundAddr(4 + 2),
                        ATYP_V6 => State::BoundAddr(16 + 2),
                        ATYP_DOMAIN => State::DomainLen,
                        _ => return Err(ProxyError::MalformedResponse),
                    };
                }
                State::DomainLen => {
                    let Some([len]) = self.take::<1>() else {
                        return Ok(self.read_rest(1));
                    };
                    self.state = State::BoundAddr(usize::from(len) + 2);
                }
                State::BoundAddr(n) => {
                    if self.buf.len() < n {
                        return Ok(self.read_rest(n));
                    }
                    self.buf.clear();
                    self.state = State::Done;
                }
                State::Done => return Ok(Step::Done),
            }
        }
    }

    /// The first `N` bytes once that many were read (the buffer is then emptied).
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let got: [u8; N] = self.buf.get(..N)?.try_into().ok()?;
        self.buf.clear();
        Some(got)
    }

    /// A read for the rest of an `n`-byte field.
    fn read_rest(&self, n: usize) -> Step {
        Step::Read(n - self.buf.len())
    }
}

fn connect_request(server: &ProxyServer, host: &str, port: u16) -> Result<Vec<u8>, ProxyError> {
    // RFC 9110 9.3.6: "the request-target consists of only the host and port number of
    // the tunnel destination"; IPv6 literals in brackets (RFC 3986 3.2.2).
    let authority = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    if authority.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        return Err(ProxyError::InvalidUrl("invalid target host"));
    }
    let mut request = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n");
    if let Some((user, pass)) = &server.credentials {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
        request.push_str("Proxy-Authorization: Basic ");
        request.push_str(&token);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    Ok(request.into_bytes())
}

fn check_connect_response(head: &[u8]) -> Result<(), ProxyError> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut response = httparse::Response::new(&mut headers);
    match response.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return Err(ProxyError::MalformedResponse),
    }
    let status = response.code.ok_or(ProxyError::MalformedResponse)?;
    // RFC 9110 9.3.6: "Any 2xx (Successful) response indicates that the sender (and all
    // inbound proxies) will switch to tunnel mode immediately after the response header
    // section"; any other status means the tunnel was not opened.
    if !(200..300).contains(&status) {
        return Err(ProxyError::Status(status));
    }
    Ok(())
}

fn socks5_request(host: &str, port: u16) -> Result<Vec<u8>, ProxyError> {
    let mut request = vec![SOCKS5, CMD_CONNECT, 0x00];
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(v4) = bare.parse::<Ipv4Addr>() {
        request.push(ATYP_V4);
        request.extend_from_slice(&v4.octets());
    } else if let Ok(v6) = bare.parse::<Ipv6Addr>() {
        request.push(ATYP_V6);
        request.extend_from_slice(&v6.octets());
    } else {
        // RFC 1928 5: "the address field contains a fully-qualified domain name. The
        // first octet of the address field contains the number of octets of name that
        // follow". Sending the name lets the proxy resolve it.
        let len = u8::try_from(host.len()).map_err(|_| ProxyError::Socks5FieldTooLong)?;
        if len == 0 {
            return Err(ProxyError::InvalidUrl("empty target host"));
        }
        request.push(ATYP_DOMAIN);
        request.push(len);
        request.extend_from_slice(host.as_bytes());
    }
    request.extend_from_slice(&port.to_be_bytes());
    Ok(request)
}

fn socks5_auth(user: &str, pass: &str) -> Result<Vec<u8>, ProxyError> {
    // RFC 1929 2: VER 1, ULEN, UNAME, PLEN, PASSWD; the lengths are one octet each and
    // a user name has at least one.
    let ulen = u8::try_from(user.len()).map_err(|_| ProxyError::Socks5FieldTooLong)?;
    let plen = u8::try_from(pass.len()).map_err(|_| ProxyError::Socks5FieldTooLong)?;
    if ulen == 0 {
        return Err(ProxyError::Socks5FieldTooLong);
    }
    let mut msg = vec![0x01, ulen];
    msg.extend_from_slice(user.as_bytes());
    msg.push(plen);
    msg.extend_from_slice(pass.as_bytes());
    Ok(msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_proxy_matches_names_suffixes_and_star() {
        assert!(no_proxy_matches("*", "anything.example"));
        assert!(no_proxy_matches("example.com", "example.com"));
        assert!(no_proxy_matches("example.com", "a.b.EXAMPLE.com"));
        assert!(no_proxy_matches(" .example.com ", "a.example.com"));
        assert!(no_proxy_matches("*.example.com", "a.example.com"));
        assert!(!no_proxy_matches("example.com", "badexample.com"));
        assert!(no_proxy_matches("localhost:8080,127.0.0.1", "127.0.0.1"));
        assert!(!no_proxy_matches("0.0.1", "127.0.0.1"));
        assert!(no_proxy_matches("[::1]:80", "::1"));
        assert!(no_proxy_matches("::1", "[::1]"));
        assert!(!no_proxy_matches(",, ,", "example.com"));
    }

    /// Drives a negotiation with `answer`, handing over `chunk` bytes at most per read.
    fn drive(server: &str, answer: &[u8], chunk: usize) -> Result<usize, ProxyError> {
        let server = ProxyServer::parse(server).unwrap();
        let mut n = Negotiation::new(&server, "example.com", 443, 1024)?;
        let mut pos = 0;
        loop {
            match n.poll()? {
                Step::Write(bytes) => assert!(!bytes.is_empty()),
                Step::Read(want) => {
                    assert!((1..=MAX_READ).contains(&want));
                    let end = (pos + want.min(chunk)).min(answer.len());
                    assert!(end > pos, "asked for more than the whole answer");
                    n.feed(&answer[pos..end]);
                    pos = end;
                }
                Step::Done => return Ok(pos),
            }
        }
    }

    #[test]
    fn answers_split_anywhere_give_the_same_result_and_are_read_exactly() {
        let socks = [5, 2, 1, 0, 5, 0, 0, 3, 3, b'a', b'b', b'c', 1, 187];
        let http = b"HTTP/1.1 200 OK\r\nX: \r\r\n\n\r\n\r\n";
        for chunk in [1, 2, 3, 5, MAX_READ] {
            assert_eq!(drive("socks5://u:p@s", &socks, chunk), Ok(socks.len()));
            assert_eq!(
                drive("http://s", http, chunk),
                Err(ProxyError::MalformedResponse)
            );
            let ok = b"HTTP/1.1 200 OK\r\nVia: 1.1 p\r\n\r\n";
            assert_eq!(drive("http://s", ok, chunk), Ok(ok.len()));
            let refused = [5, 2, 1, 7];
            assert_eq!(
                drive("socks5://u:p@s", &refused, chunk),
                Err(ProxyError::Socks5AuthFailed(7))
            );
        }
    }

    #[test]
    fn percent_decoding_of_credentials() {
        assert_eq!(percent_decode("p%40ss%3Aw").unwrap(), "p@ss:w");
        assert!(percent_decode("%4").is_err());
        assert!(percent_decode("%zz").is_err());
        assert!(percent_decode("%ff").is_err());
    }
}
