//! Client connections through proxies (feature `proxy`): HTTP `CONNECT` (RFC 9110 9.3.6)
//! and SOCKS5 (RFC 1928, with RFC 1929 username/password authentication).
//!
//! The public face is [`Proxy`], set on a client's configuration; the exchange itself is
//! the sans-IO `Negotiation` here (no IO, no runtime), driven over a socket by the tokio
//! client and by the blocking client.

use std::fmt;
use std::net::{IpAddr, Ipv6Addr};

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

display! { ProxyError {
    ProxyError::InvalidUrl(why) => "invalid proxy URL: {why}";
    ProxyError::Status(s) => "proxy refused CONNECT with status {s}";
    ProxyError::ResponseTooLarge => "proxy response head too large";
    ProxyError::MalformedResponse => "malformed proxy response";
    ProxyError::Socks5NoAcceptableMethod =>
        "SOCKS5 proxy accepts none of the offered authentication methods";
    ProxyError::Socks5AuthFailed(s) => "SOCKS5 proxy refused the credentials (status {s})";
    ProxyError::Socks5Reply(code) =>
        "SOCKS5 proxy failed the connect: {} ({code})", socks5_reply(*code);
    ProxyError::Socks5FieldTooLong => "host name or credentials do not fit a SOCKS5 request";
} }

/// RFC 1928 6: what a SOCKS5 reply code other than 0 (succeeded) means.
fn socks5_reply(code: u8) -> &'static str {
    match code {
        1 => "general failure",
        2 => "connection not allowed by ruleset",
        3 => "network unreachable",
        4 => "host unreachable",
        5 => "connection refused",
        6 => "TTL expired",
        7 => "command not supported",
        8 => "address type not supported",
        _ => "unknown reply code",
    }
}

impl std::error::Error for ProxyError {}

mod negotiate;

pub use negotiate::{MAX_READ, Negotiation, Step};

#[cfg(test)]
mod tests;
