//! The small part of URL parsing a WebSocket client needs (RFC 6455 3): `ws://` and
//! `wss://` URLs, for every client of the crate (tokio, blocking, TLS, proxies).

use std::fmt;

/// A parsed `ws://` or `wss://` URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WsUrl {
    /// `wss://`: the connection runs over TLS.
    pub secure: bool,
    /// Host name or IP literal, without brackets.
    pub host: String,
    /// Port; the scheme's default (80 for `ws`, 443 for `wss`) when the URL names none.
    pub port: u16,
    /// Path and query, starting with `/`.
    pub resource: String,
}

/// Why a URL was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum UrlError {
    /// Neither `ws://` nor `wss://`.
    UnsupportedScheme,
    /// A `wss://` URL in a build without TLS: enable feature `tokio-rustls` (tokio) or
    /// `rustls` (blocking), with which `connect` takes `wss://` URLs, or open your own TLS
    /// stream and run the client handshake over it.
    TlsUnavailable,
    /// A `ws://` URL given to a TLS client (`connect_tls`): it needs `wss://`; `connect`
    /// takes both.
    NotSecure,
    /// The host is missing or malformed.
    BadHost,
    /// The port is not a number in 1..=65535.
    BadPort,
    /// RFC 6455 3: fragment identifiers are not allowed in WebSocket URIs.
    Fragment,
    /// User information (`user@host`) is not supported.
    UserInfo,
    /// The path or query holds a byte a request target cannot carry (a space, a control
    /// character or non-ASCII: percent-encode it).
    BadPath,
}

impl fmt::Display for UrlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            UrlError::UnsupportedScheme => "unsupported URL scheme (expected ws:// or wss://)",
            UrlError::NotSecure => {
                "connect_tls needs a wss:// URL (connect takes ws:// and wss://)"
            }
            UrlError::TlsUnavailable => {
                "wss:// needs TLS, which this build of rapidws lacks: enable its feature \
                 `tokio-rustls` (tokio) or `rustls` (blocking), or run the client handshake \
                 over your own TLS stream"
            }
            UrlError::BadHost => "missing or malformed host in URL",
            UrlError::BadPort => "invalid port in URL",
            UrlError::Fragment => "URL fragments are not allowed in WebSocket URIs",
            UrlError::UserInfo => "user information in URL is not supported",
            UrlError::BadPath => "URL path or query holds a space, control or non-ASCII byte",
        })
    }
}

impl std::error::Error for UrlError {}

impl WsUrl {
    /// Parses `ws[s]://host[:port][/path][?query]`; the port defaults to the scheme's (80
    /// or 443) and the path to `/`. [`UrlError`] says what is wrong: another scheme, a
    /// fragment, user information, or a bad host or port.
    pub fn parse(url: &str) -> Result<WsUrl, UrlError> {
        let (secure, rest) = if let Some(rest) = strip_prefix_ignore_case(url, "ws://") {
            (false, rest)
        } else if let Some(rest) = strip_prefix_ignore_case(url, "wss://") {
            (true, rest)
        } else {
            return Err(UrlError::UnsupportedScheme);
        };
        // RFC 6455 3: "Fragment identifiers are meaningless in the context of WebSocket
        // URIs and MUST NOT be used on these URIs."
        if rest.contains('#') {
            return Err(UrlError::Fragment);
        }
        let split = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, resource) = rest.split_at(split);
        if authority.contains('@') {
            return Err(UrlError::UserInfo);
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let end = v6.find(']').ok_or(UrlError::BadHost)?;
            let host = &v6[..end];
            host.parse::<std::net::Ipv6Addr>()
                .map_err(|_| UrlError::BadHost)?;
            let after = &v6[end + 1..];
            let port = match after.strip_prefix(':') {
                Some(p) => Some(p),
                None if after.is_empty() => None,
                None => return Err(UrlError::BadHost),
            };
            (host, port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        if host.is_empty()
            || !host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._:".contains(&b))
        {
            return Err(UrlError::BadHost);
        }
        let port = match port {
            None | Some("") => default_port(secure),
            Some(p) => match p.parse::<u16>() {
                Ok(0) | Err(_) => return Err(UrlError::BadPort),
                Ok(p) => p,
            },
        };
        // RFC 3986 3.3/3.4: a request target is visible ASCII; anything else would break
        // the request line.
        if !resource.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(UrlError::BadPath);
        }
        let resource = match resource {
            "" => "/".to_owned(),
            r if r.starts_with('?') => format!("/{r}"),
            r => r.to_owned(),
        };
        Ok(WsUrl {
            secure,
            host: host.to_owned(),
            port,
            resource,
        })
    }

    /// The `Host` header value (RFC 7230 5.4, RFC 6455 4.1): the port is left out when it
    /// is the scheme's default.
    pub fn host_header(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == default_port(self.secure) {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }
}

/// The port a URL without one means (RFC 6455 3).
fn default_port(secure: bool) -> u16 {
    if secure { 443 } else { 80 }
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_host_port_path_and_query() {
        let u = WsUrl::parse("ws://127.0.0.1:9002/runCase?case=3&agent=rapidws").unwrap();
        assert_eq!(u.host, "127.0.0.1");
        assert_eq!(u.port, 9002);
        assert_eq!(u.resource, "/runCase?case=3&agent=rapidws");
        assert_eq!(u.host_header(), "127.0.0.1:9002");
    }

    #[test]
    fn defaults_port_80_and_root_path() {
        let u = WsUrl::parse("WS://example.com").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.resource.as_str()),
            ("example.com", 80, "/")
        );
        assert_eq!(u.host_header(), "example.com");
        assert_eq!(WsUrl::parse("ws://h?x=1").unwrap().resource, "/?x=1");
    }

    #[test]
    fn wss_defaults_to_443_and_keeps_other_ports_in_the_host_header() {
        let u = WsUrl::parse("WSS://example.com/feed").unwrap();
        assert!(u.secure);
        assert_eq!((u.port, u.host_header().as_str()), (443, "example.com"));
        let u = WsUrl::parse("wss://[::1]:9443/chat?room=1").unwrap();
        assert_eq!((u.host.as_str(), u.port), ("::1", 9443));
        assert_eq!(u.host_header(), "[::1]:9443");
        let u = WsUrl::parse("wss://h:80/").unwrap();
        assert_eq!(u.host_header(), "h:80");
        assert!(!WsUrl::parse("ws://h/").unwrap().secure);
    }

    #[test]
    fn parses_bracketed_ipv6() {
        let u = WsUrl::parse("ws://[::1]:8080/a").unwrap();
        assert_eq!((u.host.as_str(), u.port), ("::1", 8080));
        assert_eq!(u.host_header(), "[::1]:8080");
    }

    #[test]
    fn refuses_what_it_cannot_honour() {
        assert_eq!(WsUrl::parse("http://h/"), Err(UrlError::UnsupportedScheme));
        assert_eq!(WsUrl::parse("ws://h/#frag"), Err(UrlError::Fragment));
        assert_eq!(WsUrl::parse("ws://:80/"), Err(UrlError::BadHost));
        assert_eq!(WsUrl::parse("ws://h:0/"), Err(UrlError::BadPort));
        assert_eq!(WsUrl::parse("ws://h:99999/"), Err(UrlError::BadPort));
        assert_eq!(WsUrl::parse("ws://u@h/"), Err(UrlError::UserInfo));
        assert_eq!(WsUrl::parse("ws://h\r\nX: y/"), Err(UrlError::BadHost));
        assert_eq!(WsUrl::parse("ws://h/a b"), Err(UrlError::BadPath));
        assert_eq!(WsUrl::parse("ws://h/\u{e9}"), Err(UrlError::BadPath));
    }
}
