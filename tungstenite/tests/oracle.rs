//! tokio-tungstenite 0.30 as the oracle: the same programs (`tests/programs/mod.rs`,
//! written once against tokio-tungstenite's API) are compiled twice, once with the real
//! tokio-tungstenite and once with this crate in its place, and run on loopback in the
//! four pairings of server and client (theirs-theirs is the reference; ours-theirs,
//! theirs-ours and ours-ours must see the same thing, message by message, on both
//! sides). Each shape runs `RUNS` times (environment variable, default 10).

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
