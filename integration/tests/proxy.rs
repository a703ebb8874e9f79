//! Client connections through HTTP CONNECT and SOCKS5 proxies (feature `proxy`), against
//! tiny proxies started here on loopback, and hostile proxies that answer with garbage.
#![cfg(feature = "proxy")]

use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rapidws::tokio::{
    ClientConfig, Error, Message, Proxy, ProxyError, ProxyKind, ProxyServer, ServerConfig, Timeout,
    accept, connect, env_proxy,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const LIMIT: Duration = Duration::from_secs(10);

/// A rapidws echo server on 127.0.0.1; returns its port.
async fn echo_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(mut ws) = accept(tcp, &ServerConfig::default()).await else {
                    return;
                };
                while let Ok(Some(msg)) = ws.recv().await {
                    if msg.is_data() && ws.send(msg).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    port
}

/// Requests the tiny proxies saw: the CONNECT authority, or the SOCKS5 address as
/// `name:port` (domain) / `ip:port` (literal) with its ATYP.
type Seen = Arc<Mutex<Vec<String>>>;

/// A tiny HTTP CONNECT proxy; `auth` is the `Proxy-Authorization` value it requires.
async fn connect_proxy(auth: Option<&'static str>) -> (u16, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen: Seen = Arc::default();
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 {
                    if client.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let mut lines = head.split("\r\n");
                let mut request = lines.next().unwrap_or("").split(' ');
                let (Some("CONNECT"), Some(authority)) = (request.next(), request.next()) else {
                    let _ = client.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
                    return;
                };
                log.lock().unwrap().push(authority.to_owned());
                let given = lines.find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("proxy-authorization")
                        .then(|| value.trim().to_owned())
                });
                if let Some(want) = auth
                    && given.as_deref() != Some(want)
                {
                    let _ = client
                        .write_all(
                            b"HTTP/1.1 407 Proxy Authentication Required\r\n\
                              Proxy-Authenticate: Basic realm=\"test\"\r\n\
                              Content-Length: 0\r\n\r\n",
                        )
                        .await;
                    return;
                }
                let Ok(mut upstream) = TcpStream::connect(authority).await else {
                    let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n").await;
                    return;
                };
                client
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .await
                    .unwrap();
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            });
        }
    });
    (port, seen)
}

/// A tiny SOCKS5 proxy (RFC 1928); `auth` is the username and password it requires
/// (RFC 1929).
async fn socks5_proxy(auth: Option<(&'static str, &'static str)>) -> (u16, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen: Seen = Arc::default();
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let _ = socks5_session(client, auth, log).await;
            });
        }
    });
    (port, seen)
}

async fn socks5_session(
    mut client: TcpStream,
    auth: Option<(&str, &str)>,
    log: Seen,
) -> std::io::Result<()> {
    let mut hello = [0u8; 2];
    client.read_exact(&mut hello).await?;
    assert_eq!(hello[0], 5);
    let mut methods = vec![0u8; hello[1].into()];
    client.read_exact(&mut methods).await?;
    let wanted = if auth.is_some() { 2 } else { 0 };
    if !methods.contains(&wanted) {
        client.write_all(&[5, 0xFF]).await?;
        return Ok(());
    }
    client.write_all(&[5, wanted]).await?;
    if let Some((user, pass)) = auth {
        let mut v = [0u8; 2];
        client.read_exact(&mut v).await?;
        let mut u = vec![0u8; v[1].into()];
        client.read_exact(&mut u).await?;
        let mut plen = [0u8; 1];
        client.read_exact(&mut plen).await?;
        let mut p = vec![0u8; plen[0].into()];
        client.read_exact(&mut p).await?;
        if v[0] != 1 || u != user.as_bytes() || p != pass.as_bytes() {
            client.write_all(&[1, 1]).await?;
            return Ok(());
        }
        client.write_all(&[1, 0]).await?;
    }
    let mut req = [0u8; 4];
    client.read_exact(&mut req).await?;
    assert_eq!(&req[..3], &[5, 1, 0]);
    let host = match req[3] {
        1 => {
            let mut a = [0u8; 4];
            client.read_exact(&mut a).await?;
            Ipv4Addr::from(a).to_string()
        }
        4 => {
            let mut a = [0u8; 16];
            client.read_exact(&mut a).await?;
            format!("[{}]", Ipv6Addr::from(a))
        }
        3 => {
            let mut len = [0u8; 1];
            client.read_exact(&mut len).await?;
            let mut name = vec![0u8; len[0].into()];
            client.read_exact(&mut name).await?;
            String::from_utf8(name).unwrap()
        }
        t => panic!("client sent ATYP {t}"),
    };
    let mut port = [0u8; 2];
    client.read_exact(&mut port).await?;
    let target = format!("{host}:{}", u16::from_be_bytes(port));
    log.lock().unwrap().push(format!("atyp{} {target}", req[3]));
    match TcpStream::connect(&target).await {
        Ok(mut upstream) => {
            // Success, bound to a domain-name address, to exercise the client's skipping.
            client
                .write_all(&[5, 0, 0, 3, 4, b'b', b'n', b'd', b'x', 0x1F, 0x90])
                .await?;
            let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
        }
        Err(_) => client.write_all(&[5, 5, 0, 1, 0, 0, 0, 0, 0, 0]).await?,
    }
    Ok(())
}

async fn echo_once(url: &str, config: &ClientConfig) -> Result<(), Error> {
    let mut ws = tokio::time::timeout(LIMIT, connect(url, config))
        .await
        .expect("connect bounded")?;
    ws.send(Message::text("through the proxy")).await?;
    ws.send(Message::binary(vec![9u8; 100_000])).await?;
    assert_eq!(ws.recv().await?, Some(Message::text("through the proxy")));
    assert_eq!(ws.recv().await?, Some(Message::binary(vec![9u8; 100_000])));
    ws.close(1000, "").await?;
    Ok(())
}

#[tokio::test]
async fn echo_through_an_http_connect_proxy_names_the_host() {
    let echo = echo_server().await;
    let (proxy, seen) = connect_proxy(None).await;
    let config = ClientConfig::default()
        .with_proxy(Proxy::http(&format!("http://127.0.0.1:{proxy}")).unwrap());
    echo_once(&format!("ws://localhost:{echo}/chat"), &config)
        .await
        .unwrap();
    assert_eq!(*seen.lock().unwrap(), [format!("localhost:{echo}")]);
}

#[tokio::test]
async fn http_connect_with_the_right_basic_credentials_is_let_through() {
    let echo = echo_server().await;
    // base64("user:p@ss:w") = dXNlcjpwQHNzOnc=
    let (proxy, _) = connect_proxy(Some("Basic dXNlcjpwQHNzOnc=")).await;
    let url = format!("http://user:p%40ss%3Aw@127.0.0.1:{proxy}/");
    let config = ClientConfig::default().with_proxy(Proxy::http(&url).unwrap());
    echo_once(&format!("ws://127.0.0.1:{echo}/"), &config)
        .await
        .unwrap();
}

#[tokio::test]
async fn http_connect_refused_with_407_is_a_status_error() {
    let echo = echo_server().await;
    let (proxy, _) = connect_proxy(Some("Basic dXNlcjpwQHNzOnc=")).await;
    for url in [
        format!("http://127.0.0.1:{proxy}"),
        format!("http://user:wrong@127.0.0.1:{proxy}"),
    ] {
        let config = ClientConfig::default().with_proxy(Proxy::http(&url).unwrap());
        let err = echo_once(&format!("ws://127.0.0.1:{echo}/"), &config)
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::Proxy(ProxyError::Status(407))),
            "{err:?}"
        );
    }
}

#[tokio::test]
async fn echo_through_socks5_sends_the_host_name_for_the_proxy_to_resolve() {
    let echo = echo_server().await;
    let (proxy, seen) = socks5_proxy(None).await;
    let config = ClientConfig::default()
        .with_proxy(Proxy::socks5(&format!("socks5h://127.0.0.1:{proxy}")).unwrap());
    echo_once(&format!("ws://localhost:{echo}/"), &config)
        .await
        .unwrap();
    assert_eq!(*seen.lock().unwrap(), [format!("atyp3 localhost:{echo}")]);
}

#[tokio::test]
async fn socks5_sends_ip_literals_as_addresses() {
    let echo = echo_server().await;
    let (proxy, seen) = socks5_proxy(None).await;
    let config =
        ClientConfig::default().with_proxy(Proxy::socks5(&format!("127.0.0.1:{proxy}")).unwrap());
    echo_once(&format!("ws://127.0.0.1:{echo}/"), &config)
        .await
        .unwrap();
    assert_eq!(*seen.lock().unwrap(), [format!("atyp1 127.0.0.1:{echo}")]);
    // An IPv6 literal goes out as ATYP 4; nothing listens on [::1] here, so the proxy's
    // reply 5 (connection refused) comes back typed.
    let err = echo_once(&format!("ws://[::1]:{echo}/"), &config)
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Proxy(ProxyError::Socks5Reply(5))),
        "{err:?}"
    );
    assert_eq!(seen.lock().unwrap()[1], format!("atyp4 [::1]:{echo}"));
}

#[tokio::test]
async fn socks5_username_and_password_accepted() {
    let echo = echo_server().await;
    let (proxy, _) = socks5_proxy(Some(("alice", "s3cret"))).await;
    let url = format!("socks5://alice:s3cret@127.0.0.1:{proxy}");
    let config = ClientConfig::default().with_proxy(Proxy::socks5(&url).unwrap());
    echo_once(&format!("ws://localhost:{echo}/"), &config)
        .await
        .unwrap();
}

#[tokio::test]
async fn socks5_wrong_password_is_an_auth_failure_and_none_is_no_acceptable_method() {
    let echo = echo_server().await;
    let (proxy, _) = socks5_proxy(Some(("alice", "s3cret"))).await;
    let target = format!("ws://localhost:{echo}/");
    let wrong = Proxy::socks5(&format!("socks5://alice:guess@127.0.0.1:{proxy}")).unwrap();
    let err = echo_once(&target, &ClientConfig::default().with_proxy(wrong))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Proxy(ProxyError::Socks5AuthFailed(1))),
        "{err:?}"
    );
    let none = Proxy::socks5(&format!("socks5://127.0.0.1:{proxy}")).unwrap();
    let err = echo_once(&target, &ClientConfig::default().with_proxy(none))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Proxy(ProxyError::Socks5NoAcceptableMethod)),
        "{err:?}"
    );
}

#[tokio::test]
async fn socks5_failure_reply_carries_its_code() {
    // A port nothing listens on: bind, learn the port, close.
    let closed = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (proxy, _) = socks5_proxy(None).await;
    let config =
        ClientConfig::default().with_proxy(Proxy::socks5(&format!("127.0.0.1:{proxy}")).unwrap());
    let err = echo_once(&format!("ws://127.0.0.1:{closed}/"), &config)
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Proxy(ProxyError::Socks5Reply(5))),
        "{err:?}"
    );
    assert!(err.to_string().contains("connection refused"), "{err}");
}

/// A proxy that reads what the client sends first, answers `reply`, then keeps the
/// connection open without a word (or closes it when `close`).
async fn scripted_proxy(reply: Vec<u8>, close: bool) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let reply = reply.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let _ = client.read(&mut buf).await;
                let _ = client.write_all(&reply).await;
                if !close {
                    tokio::time::sleep(LIMIT).await;
                }
            });
        }
    });
    port
}

/// A connect timeout short enough for the tests that wait for it, long enough for a
/// loaded CI machine to finish every exchange that should succeed.
fn short_timeout() -> ClientConfig {
    ClientConfig::default().with_connect_timeout(Duration::from_secs(2))
}

#[tokio::test]
async fn oversized_connect_response_head_is_refused_at_the_limit() {
    let mut reply = b"HTTP/1.1 200 OK\r\n".to_vec();
    while reply.len() < 64 << 10 {
        reply.extend_from_slice(b"X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
    }
    let proxy = scripted_proxy(reply, false).await;
    let p = Proxy::http(&format!("http://127.0.0.1:{proxy}"))
        .unwrap()
        .with_max_response_head(1024);
    assert_eq!(p.max_response_head(), 1024);
    let err = echo_once("ws://localhost:9/", &short_timeout().with_proxy(p))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Proxy(ProxyError::ResponseTooLarge)),
        "{err:?}"
    );
}

#[tokio::test]
async fn silent_proxy_is_a_connect_timeout() {
    for kind in ["http", "socks5"] {
        let proxy = scripted_proxy(Vec::new(), false).await;
        let p = Proxy::url(&format!("{kind}://127.0.0.1:{proxy}")).unwrap();
        let config = ClientConfig::default()
            .with_connect_timeout(Duration::from_millis(500))
            .with_proxy(p);
        let start = std::time::Instant::now();
        let err = echo_once("ws://localhost:9/", &config).await.unwrap_err();
        assert!(
            matches!(err, Error::Timeout(Timeout::Connect)),
            "{kind}: {err:?}"
        );
        // Below the default connect timeout (10 s): the configured 500 ms ended it.
        assert!(start.elapsed() < Duration::from_secs(8), "{kind}");
    }
}

#[tokio::test]
async fn connect_response_that_is_not_http_is_malformed() {
    let proxy = scripted_proxy(b"SSH-2.0-OpenSSH\r\n\r\n".to_vec(), true).await;
    let p = Proxy::http(&format!("http://127.0.0.1:{proxy}")).unwrap();
    let err = echo_once("ws://localhost:9/", &short_timeout().with_proxy(p))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Proxy(ProxyError::MalformedResponse)),
        "{err:?}"
    );
}

#[tokio::test]
async fn socks5_reply_with_another_version_or_unoffered_method_is_malformed() {
    for reply in [vec![4u8, 0], vec![5, 2], vec![5, 0x80]] {
        let proxy = scripted_proxy(reply.clone(), true).await;
        let p = Proxy::socks5(&format!("127.0.0.1:{proxy}")).unwrap();
        let err = echo_once("ws://localhost:9/", &short_timeout().with_proxy(p))
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::Proxy(ProxyError::MalformedResponse)),
            "{reply:?}: {err:?}"
        );
    }
}

/// Deterministic pseudo-random bytes (xorshift64*), so a failure can be replayed.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8
        })
        .collect()
}

#[tokio::test]
async fn any_proxy_answer_is_an_error_or_a_tunnel_never_a_panic_or_a_hang() {
    let mut replies: Vec<Vec<u8>> = vec![
        Vec::new(),
        b"HTTP/1.1 200".to_vec(),
        b"HTTP/1.1 999 Odd\r\n\r\n".to_vec(),
        b"HTTP/1.1 200 OK\r\n\0\0\r\n\r\n".to_vec(),
        b"\r\n\r\n".to_vec(),
        vec![5, 0, 5, 0, 0, 3, 255],
        vec![5, 0, 5, 0, 0, 9],
        vec![5, 0xFF],
        vec![5, 0, 5, 0, 0, 1, 1, 2],
    ];
    for seed in 1..60u64 {
        let mut r = noise(seed, (seed as usize * 7) % 300);
        if seed % 3 == 0 {
            r.splice(0..0, b"HTTP/1.1 ".iter().copied());
        }
        if seed % 3 == 1 {
            r.splice(0..0, [5u8, 0, 5, 0]);
        }
        replies.push(r);
    }
    for reply in replies {
        let proxy = scripted_proxy(reply.clone(), true).await;
        for kind in [ProxyKind::Http, ProxyKind::Socks5] {
            let url = match kind {
                ProxyKind::Http => format!("http://127.0.0.1:{proxy}"),
                _ => format!("socks5://127.0.0.1:{proxy}"),
            };
            let p = Proxy::url(&url).unwrap();
            // The target does not exist behind these proxies: a "successful" tunnel ends
            // in the WebSocket handshake failing on the closed stream.
            let r = tokio::time::timeout(
                Duration::from_secs(5),
                connect("ws://localhost:9/", &short_timeout().with_proxy(p)),
            )
            .await
            .unwrap_or_else(|_| panic!("hang on {kind:?} {reply:?}"));
            assert!(r.is_err(), "{kind:?} {reply:?}");
        }
    }
}

fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k| map.get(k).cloned()
}

#[test]
fn env_picks_https_proxy_for_wss_and_http_proxy_for_ws_then_all_proxy() {
    let vars = env(&[
        ("HTTPS_PROXY", "http://secure:3128"),
        ("http_proxy", "http://plain:8080"),
        ("ALL_PROXY", "socks5://fallback"),
    ]);
    let wss = env_proxy("example.com", true, &vars).unwrap().unwrap();
    assert_eq!((wss.host(), wss.port()), ("secure", 3128));
    let ws = env_proxy("example.com", false, &vars).unwrap().unwrap();
    assert_eq!(
        (ws.host(), ws.port(), ws.kind()),
        ("plain", 8080, ProxyKind::Http)
    );
    let only_all = env(&[("all_proxy", "socks5h://fallback")]);
    let s = env_proxy("example.com", true, &only_all).unwrap().unwrap();
    assert_eq!(
        (s.kind(), s.host(), s.port()),
        (ProxyKind::Socks5, "fallback", 1080)
    );
    assert_eq!(env_proxy("example.com", false, env(&[])).unwrap(), None);
}

#[test]
fn env_lower_case_wins_and_empty_values_count_as_unset() {
    let vars = env(&[("https_proxy", "lower:1"), ("HTTPS_PROXY", "upper:2")]);
    assert_eq!(
        env_proxy("h", true, &vars).unwrap().unwrap().host(),
        "lower"
    );
    let vars = env(&[("https_proxy", " "), ("HTTPS_PROXY", "upper:2")]);
    assert_eq!(
        env_proxy("h", true, &vars).unwrap().unwrap().host(),
        "upper"
    );
}

#[test]
fn env_no_proxy_bypasses_listed_hosts_suffixes_and_star() {
    let vars = env(&[
        ("HTTPS_PROXY", "http://p:3128"),
        (
            "NO_PROXY",
            "localhost, .internal.example,127.0.0.1,[::1]:8080",
        ),
    ]);
    for direct in [
        "localhost",
        "db.internal.example",
        "internal.example",
        "127.0.0.1",
        "::1",
    ] {
        assert_eq!(env_proxy(direct, true, &vars).unwrap(), None, "{direct}");
    }
    for proxied in [
        "example.com",
        "notinternal.example",
        "127.0.0.2",
        "localhost.evil",
    ] {
        assert!(
            env_proxy(proxied, true, &vars).unwrap().is_some(),
            "{proxied}"
        );
    }
    let star = env(&[("http_proxy", "p:1"), ("no_proxy", "*")]);
    assert_eq!(env_proxy("anything", false, &star).unwrap(), None);
}

#[test]
fn env_with_a_malformed_proxy_url_is_an_error_not_a_direct_connection() {
    for bad in [
        "ftp://p:21",
        "http://:8080",
        "http://p:99999",
        "http://p/path",
        "https://p",
    ] {
        let vars = env(&[("ALL_PROXY", bad)]);
        assert!(
            matches!(env_proxy("h", true, &vars), Err(ProxyError::InvalidUrl(_))),
            "{bad}"
        );
    }
}

#[test]
fn from_env_resolves_through_the_lookup_and_none_ignores_it() {
    let vars = env(&[("all_proxy", "socks5://u:p@[::1]:1081")]);
    let s = Proxy::from_env()
        .for_target_with("example.com", false, &vars)
        .unwrap()
        .unwrap();
    assert_eq!((s.host(), s.port(), s.username()), ("::1", 1081, Some("u")));
    assert_eq!(
        Proxy::none()
            .for_target_with("example.com", false, &vars)
            .unwrap(),
        None
    );
    assert_eq!(ClientConfig::default().proxy, Proxy::none());
}

#[test]
fn proxy_urls_parse_with_defaults_and_debug_hides_the_password() {
    let s = ProxyServer::parse("http://bob:hunter2@proxy.example").unwrap();
    assert_eq!(
        (s.kind(), s.host(), s.port(), s.username()),
        (ProxyKind::Http, "proxy.example", 80, Some("bob"))
    );
    let shown = format!("{s:?} {:?}", Proxy::server(s.clone()));
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(Proxy::http("socks5://p").is_err());
    assert!(Proxy::socks5("http://p").is_err());
    assert_eq!(
        ProxyServer::parse("p:3128").unwrap().kind(),
        ProxyKind::Http
    );
}

#[tokio::test]
async fn socks5_host_name_longer_than_255_bytes_is_refused_before_sending() {
    let (proxy, seen) = socks5_proxy(None).await;
    let config =
        ClientConfig::default().with_proxy(Proxy::socks5(&format!("127.0.0.1:{proxy}")).unwrap());
    let host = format!("{}.example", "a".repeat(260));
    let err = echo_once(&format!("ws://{host}/"), &config)
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Proxy(ProxyError::Socks5FieldTooLong)),
        "{err:?}"
    );
    assert!(seen.lock().unwrap().is_empty());
}

/// A wss:// echo server (our TLS helper) with a fresh self-signed certificate for
/// `localhost`; returns its port and a client TLS configuration trusting it.
#[cfg(feature = "tokio-rustls")]
async fn wss_echo_server() -> (u16, Arc<tokio_rustls::rustls::ClientConfig>) {
    use rapidws::tls::{client_config_with_roots, server_config};
    use rapidws::tokio::{TlsAcceptor, accept_tls};
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::pki_types::PrivatePkcs8KeyDer;

    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let cert = ck.cert.der().clone();
    let key = PrivatePkcs8KeyDer::from(ck.key_pair.serialize_der()).into();
    let acceptor = TlsAcceptor::from(server_config(vec![cert.clone()], key).unwrap());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut ws = accept_tls(&acceptor, tcp, &ServerConfig::default())
            .await
            .unwrap();
        while let Ok(Some(msg)) = ws.recv().await {
            if msg.is_data() && ws.send(msg).await.is_err() {
                break;
            }
        }
    });
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert).unwrap();
    (port, client_config_with_roots(roots).unwrap())
}

#[cfg(feature = "tokio-rustls")]
#[tokio::test]
async fn wss_through_an_http_connect_proxy() {
    use rapidws::tokio::connect_tls;

    let (port, tls) = wss_echo_server().await;
    let (proxy, seen) = connect_proxy(None).await;
    let config = ClientConfig::default()
        .with_proxy(Proxy::http(&format!("http://127.0.0.1:{proxy}")).unwrap());
    let url = format!("wss://localhost:{port}/");
    let mut ws = tokio::time::timeout(LIMIT, connect_tls(&url, &config, Some(tls)))
        .await
        .unwrap()
        .unwrap();
    ws.send(Message::text("tls in a tunnel")).await.unwrap();
    assert_eq!(
        ws.recv().await.unwrap(),
        Some(Message::text("tls in a tunnel"))
    );
    ws.close(1000, "").await.unwrap();
    assert_eq!(*seen.lock().unwrap(), [format!("localhost:{port}")]);
}

#[cfg(feature = "blocking")]
mod blocking_client {
    use super::*;
    use rapidws::blocking;

    fn echo_blocking(url: &str, config: &blocking::ClientConfig) -> Result<(), blocking::Error> {
        let mut ws = blocking::connect(url, config)?;
        ws.send(blocking::Message::text("blocking, proxied"))?;
        ws.send_binary(&[5u8; 70_000])?;
        assert_eq!(
            ws.read()?,
            Some(blocking::Message::text("blocking, proxied"))
        );
        assert_eq!(
            ws.read()?,
            Some(blocking::Message::binary(vec![5u8; 70_000]))
        );
        ws.close(1000, "")?;
        Ok(())
    }

    fn quick() -> blocking::ClientConfig {
        blocking::ClientConfig::default()
            .with_read_timeout(Some(LIMIT))
            .with_connect_timeout(Duration::from_secs(2))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn blocking_client_echoes_through_both_proxy_kinds_with_credentials() {
        let echo = echo_server().await;
        let (http, http_seen) = connect_proxy(Some("Basic dXNlcjpwQHNzOnc=")).await;
        let (socks, socks_seen) = socks5_proxy(Some(("alice", "s3cret"))).await;
        tokio::task::spawn_blocking(move || {
            let url = format!("ws://localhost:{echo}/");
            let via_http = Proxy::http(&format!("http://user:p%40ss%3Aw@127.0.0.1:{http}"));
            echo_blocking(&url, &quick().with_proxy(via_http.unwrap())).unwrap();
            let via_socks = Proxy::socks5(&format!("socks5://alice:s3cret@127.0.0.1:{socks}"));
            echo_blocking(&url, &quick().with_proxy(via_socks.unwrap())).unwrap();
        })
        .await
        .unwrap();
        assert_eq!(*http_seen.lock().unwrap(), [format!("localhost:{echo}")]);
        assert_eq!(
            *socks_seen.lock().unwrap(),
            [format!("atyp3 localhost:{echo}")]
        );
    }

    #[cfg(feature = "tokio-rustls")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn blocking_wss_through_a_socks5_proxy() {
        let (port, tls) = wss_echo_server().await;
        let (socks, seen) = socks5_proxy(None).await;
        tokio::task::spawn_blocking(move || {
            let p = Proxy::socks5(&format!("127.0.0.1:{socks}")).unwrap();
            let url = format!("wss://localhost:{port}/");
            let mut ws = blocking::connect_tls(&url, &quick().with_proxy(p), Some(tls)).unwrap();
            ws.send_text("tls, blocking, socks").unwrap();
            assert_eq!(
                ws.read().unwrap(),
                Some(blocking::Message::text("tls, blocking, socks"))
            );
            ws.close(1000, "").unwrap();
        })
        .await
        .unwrap();
        assert_eq!(*seen.lock().unwrap(), [format!("atyp3 localhost:{port}")]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn blocking_client_gets_typed_proxy_refusals() {
        let echo = echo_server().await;
        let (http, _) = connect_proxy(Some("Basic dXNlcjpwQHNzOnc=")).await;
        let (socks, _) = socks5_proxy(Some(("alice", "s3cret"))).await;
        tokio::task::spawn_blocking(move || {
            let url = format!("ws://localhost:{echo}/");
            let no_creds = Proxy::http(&format!("http://127.0.0.1:{http}")).unwrap();
            let err = echo_blocking(&url, &quick().with_proxy(no_creds)).unwrap_err();
            assert!(
                matches!(err, blocking::Error::Proxy(ProxyError::Status(407))),
                "{err:?}"
            );
            let wrong = Proxy::socks5(&format!("socks5://alice:x@127.0.0.1:{socks}")).unwrap();
            let err = echo_blocking(&url, &quick().with_proxy(wrong)).unwrap_err();
            assert!(
                matches!(err, blocking::Error::Proxy(ProxyError::Socks5AuthFailed(1))),
                "{err:?}"
            );
        })
        .await
        .unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn blocking_client_gives_up_on_a_trickling_proxy_at_the_connect_timeout() {
        // One byte of an endless header every 100 ms: each read succeeds, so only the
        // overall deadline can end it.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut client, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 512];
            let _ = client.read(&mut buf).await;
            for _ in 0..100 {
                if client.write_all(b"x").await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        let start = std::time::Instant::now();
        let err = tokio::task::spawn_blocking(move || {
            let p = Proxy::http(&format!("http://127.0.0.1:{port}")).unwrap();
            let config = quick()
                .with_connect_timeout(Duration::from_millis(500))
                .with_proxy(p);
            echo_blocking("ws://localhost:9/", &config).unwrap_err()
        })
        .await
        .unwrap();
        assert!(err.is_would_block(), "{err:?}");
        // Below the default connect timeout (10 s): the configured 500 ms ended it.
        assert!(start.elapsed() < Duration::from_secs(8));
    }
}

#[tokio::test]
async fn the_reconnecting_client_goes_through_the_proxy_every_time() {
    use rapidws::tokio::Reconnect;
    let echo = echo_server().await;
    let (proxy, seen) = connect_proxy(None).await;
    let config = ClientConfig::default()
        .with_proxy(Proxy::http(&format!("http://127.0.0.1:{proxy}")).unwrap());
    let mut feed = Reconnect::new(format!("ws://localhost:{echo}/feed"), config)
        .unwrap()
        .with_backoff(rapidws::tokio::Backoff::new(
            Duration::from_millis(1),
            Duration::from_millis(10),
        ));
    for i in 0..2 {
        let mut ws = tokio::time::timeout(LIMIT, feed.next())
            .await
            .unwrap()
            .unwrap();
        ws.send(Message::text(format!("hop {i}"))).await.unwrap();
        assert_eq!(
            ws.recv().await.unwrap(),
            Some(Message::text(format!("hop {i}")))
        );
        ws.close(1000, "").await.unwrap();
    }
    assert_eq!(
        *seen.lock().unwrap(),
        [format!("localhost:{echo}"), format!("localhost:{echo}")]
    );
}
