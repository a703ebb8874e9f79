//! tokio-tungstenite 0.30 as the oracle: the same programs (`tests/programs/mod.rs`,
//! written once against tokio-tungstenite's API) are compiled twice, once with the real
//! tokio-tungstenite and once with this crate in its place, and run on loopback in the
//! four pairings of server and client (theirs-theirs is the reference; ours-theirs,
//! theirs-ours and ours-ours must see the same thing, message by message, on both
//! sides). Each shape runs `RUNS` times (environment variable, default 10).
// The programs are written the way tokio-tungstenite's users write them (callbacks
// returning its large `ErrorResponse`, nested `if`s), not to this workspace's lints.
#![allow(
    clippy::result_large_err,
    clippy::collapsible_if,
    clippy::manual_is_multiple_of
)]

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpListener;

#[allow(dead_code)]
mod theirs {
    use oracle as tokio_tungstenite;
    include!("programs/mod.rs");
}

#[allow(dead_code)]
mod ours {
    use rapidws_tungstenite as tokio_tungstenite;
    include!("programs/mod.rs");
}

fn runs() -> usize {
    std::env::var("RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10)
}

/// Runs `f` to its end or fails the test after 30 s (a hang is a failure, not a wait).
async fn bounded<T>(what: &str, f: impl Future<Output = T>) -> T {
    match tokio::time::timeout(Duration::from_secs(30), f).await {
        Ok(t) => t,
        Err(_) => panic!("{what}: no end after 30 s"),
    }
}

type Log = Vec<String>;

/// One run of a shape: the server on a fresh loopback listener, the client on its
/// address; both transcripts.
async fn pair<S, SF, C, CF>(server: S, client: C) -> (Log, Log)
where
    S: FnOnce(TcpListener) -> SF,
    SF: Future<Output = Log> + Send + 'static,
    C: FnOnce(SocketAddr) -> CF,
    CF: Future<Output = Log>,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(server(listener));
    let client = bounded("client", client(addr)).await;
    let server = bounded("server", server).await.unwrap();
    (server, client)
}

/// Runs a shape in the four pairings, [`runs`] times, and checks each against the
/// reference (tokio-tungstenite on both sides, its first run).
macro_rules! compare {
    ($name:literal, |$l:ident| $server:expr, |$a:ident| $client:expr) => {{
        let mut reference: Option<(Log, Log)> = None;
        for run in 0..runs() {
            let tt = pair(
                |$l| {
                    use theirs as lib;
                    $server
                },
                |$a| {
                    use theirs as lib;
                    $client
                },
            )
            .await;
            let ot = pair(
                |$l| {
                    use ours as lib;
                    $server
                },
                |$a| {
                    use theirs as lib;
                    $client
                },
            )
            .await;
            let to = pair(
                |$l| {
                    use theirs as lib;
                    $server
                },
                |$a| {
                    use ours as lib;
                    $client
                },
            )
            .await;
            let oo = pair(
                |$l| {
                    use ours as lib;
                    $server
                },
                |$a| {
                    use ours as lib;
                    $client
                },
            )
            .await;
            let reference = reference.get_or_insert_with(|| tt.clone());
            assert_eq!(
                &tt, reference,
                "{}: run {run}: tokio-tungstenite differs from its own first run",
                $name
            );
            for (pairing, got) in [
                ("our server, their client", ot),
                ("their server, our client", to),
                ("ours on both sides", oo),
            ] {
                assert_eq!(
                    got.0, reference.0,
                    "{}: run {run}, {pairing}: the server saw something else",
                    $name
                );
                assert_eq!(
                    got.1, reference.1,
                    "{}: run {run}, {pairing}: the client saw something else",
                    $name
                );
            }
        }
    }};
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_whole_socket() {
    compare!(
        "echo",
        |l| lib::echo_server(l, false),
        |a| lib::echo_client(a, 40, false)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_split_halves() {
    compare!("echo split", |l| lib::echo_server(l, true), |a| {
        lib::echo_client(a, 40, true)
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_split_server_whole_client() {
    compare!("echo split/whole", |l| lib::echo_server(l, true), |a| {
        lib::echo_client(a, 40, false)
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_closes_normally() {
    compare!(
        "server close 1000",
        |l| lib::closing_server(l, 20, 1000),
        |a| lib::reading_client(a)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_closes_going_away() {
    compare!(
        "server close 1001",
        |l| lib::closing_server(l, 3, 1001),
        |a| lib::reading_client(a)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_vanishes() {
    compare!("client vanishes", |l| lib::reading_server(l), |a| {
        lib::vanishing_client(a, 5)
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_accept_with_headers() {
    compare!("custom accept", |l| lib::header_server(l, 2), |a| {
        lib::header_client(a)
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broadcast_chat() {
    compare!("chat", |l| lib::chat_server(l, 4), |a| lib::chat_clients(
        a, 4, 5
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interval_sends() {
    compare!("interval", |l| lib::interval_server(l, 30), |a| {
        lib::tick_client(a)
    });
}

/// For the shapes where a peer misbehaves: only the server is this crate or
/// tokio-tungstenite, the client is always tokio-tungstenite; the servers must see the
/// same. What the client sees differs by design where rapidws closes with a code
/// (1009, 1007) and tungstenite drops the connection: `client_expect` says what each
/// client sees, theirs first.
macro_rules! compare_servers {
    ($name:literal, |$l:ident| $server:expr, |$a:ident| $client:expr, $norm:expr, $check:expr) => {{
        for run in 0..runs() {
            let t = pair(
                |$l| {
                    use theirs as lib;
                    $server
                },
                |$a| {
                    use theirs as lib;
                    $client
                },
            )
            .await;
            let o = pair(
                |$l| {
                    use ours as lib;
                    $server
                },
                |$a| {
                    use theirs as lib;
                    $client
                },
            )
            .await;
            let norm: fn(&str) -> Option<String> = $norm;
            let (os, ts): (Log, Log) = (
                o.0.iter().filter_map(|s| norm(s)).collect(),
                t.0.iter().filter_map(|s| norm(s)).collect(),
            );
            assert_eq!(
                os, ts,
                "{}: run {run}: the server saw something else",
                $name
            );
            let check: fn(&Log, &Log) = $check;
            check(&t.1, &o.1);
        }
    }};
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_over_the_limit() {
    // rapidws refuses a frame at its header, before its size is known: the size reported
    // is the limit plus one (tungstenite: the frame's).
    let norm = |s: &str| {
        Some(match s.find("size: ") {
            Some(i) if s.contains("MessageTooLong") => {
                let end = s[i..].find(',').map_or(s.len(), |j| i + j);
                format!("{}size: _{}", &s[..i], &s[end..])
            }
            _ => s.to_owned(),
        })
    };
    compare_servers!(
        "limit",
        |l| lib::small_server(l),
        |a| lib::big_client(a),
        norm,
        |theirs, ours| {
            // tungstenite drops the connection; rapidws closes it with 1009 first.
            assert_eq!(theirs[0], "big send Ok(())", "{theirs:?}");
            assert_eq!(ours[0], "big send Ok(())", "{ours:?}");
            assert!(ours.iter().any(|s| s.starts_with("Close(1009")), "{ours:?}");
            assert_eq!(ours.last().map(String::as_str), Some("end"), "{ours:?}");
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_that_is_not_utf8() {
    // After the error, tungstenite still sends (to a peer that was told nothing);
    // rapidws has failed the connection (1007), and a send is `AlreadyClosed`.
    let norm = |s: &str| (!s.starts_with("late send")).then(|| s.to_owned());
    compare_servers!(
        "utf-8",
        |l| lib::reading_server(l),
        |a| lib::bad_text_client(a),
        norm,
        |theirs, ours| {
            assert_eq!(theirs[0], "bad send Ok(())", "{theirs:?}");
            assert_eq!(ours[0], "bad send Ok(())", "{ours:?}");
            // rapidws closes with 1007 (RFC 6455 8.1); tungstenite drops the connection.
            assert!(ours.iter().any(|s| s.starts_with("Close(1007")), "{ours:?}");
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subprotocols_through_the_callback_and_a_raw_frame() {
    // Only tokio-tungstenite's client sends a frame it is given as it is; this crate's
    // sends a whole-message frame as that message, which the server cannot tell apart.
    compare!("subprotocols", |l| lib::subprotocol_server(l, 2), |a| {
        lib::subprotocol_client(a)
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_sockets_without_a_handshake() {
    compare!("raw sockets", |l| lib::raw_server(l), |a| lib::raw_client(
        a
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_vanishes() {
    compare!("server vanishes", |l| lib::vanishing_server(l, 5), |a| {
        lib::reading_client(a)
    });
}

/// A peer's close with a code that may not be sent (1005): tungstenite answers 1002 and
/// yields the close rewritten to 1002; rapidws fails the connection with 1002 and yields
/// `Protocol(InvalidCloseSequence)`. Both clients see a 1002 close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_close_code_that_may_not_be_sent() {
    for _ in 0..runs() {
        let (t_server, t_client) = pair(theirs::reading_server, theirs::bad_close_client).await;
        let (o_server, o_client) = pair(ours::reading_server, theirs::bad_close_client).await;
        assert_eq!(
            t_server[0], "Close(1002, Protocol violation) len 18 to_text ok Protocol violation",
            "{t_server:?}"
        );
        assert_eq!(
            o_server[0], "error Protocol(InvalidCloseSequence)",
            "{o_server:?}"
        );
        for client in [&t_client, &o_client] {
            assert_eq!(client[0], "bad close Ok(())", "{client:?}");
            assert!(client[1].starts_with("Close(1002"), "{client:?}");
        }
    }
}

/// A ping over 125 bytes: tokio-tungstenite sends it and the server fails; this crate
/// refuses it at the send, and the connection goes on to a normal close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ping_over_125_bytes() {
    for _ in 0..runs() {
        let (t_server, t_client) = pair(theirs::reading_server, theirs::big_ping_client).await;
        assert_eq!(t_client[0], "big ping Ok(())", "{t_client:?}");
        assert_eq!(
            t_server[0], "error Protocol(ControlFrameTooBig)",
            "{t_server:?}"
        );
        let (_, with_theirs) = pair(theirs::reading_server, ours::big_ping_client).await;
        let (_, with_ours) = pair(ours::reading_server, ours::big_ping_client).await;
        for o_client in [with_theirs, with_ours] {
            assert_eq!(
                o_client[0], "big ping Err(\"Protocol(ControlFrameTooBig)\")",
                "{o_client:?}"
            );
            assert_eq!(o_client[1], "Close(None) len 0 to_text ok ", "{o_client:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_async_to_a_url_without_a_path() {
    compare!("no path", |l| lib::echo_server(l, false), |a| {
        lib::no_path_client(a)
    });
}
