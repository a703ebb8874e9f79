//! tungstenite 0.30 (blocking) as the oracle: the programs of
//! `tests/programs/blocking.rs` compiled with the real tungstenite and with this crate's
//! `tungstenite` module, run on loopback in the four pairings of server and client,
//! `RUNS` times (default 10); all must see what tungstenite on both sides sees.
// The programs are written the way tokio-tungstenite's users write them (callbacks
// returning its large `ErrorResponse`, nested `if`s), not to this workspace's lints.
#![allow(
    clippy::result_large_err,
    clippy::collapsible_if,
    clippy::manual_is_multiple_of
)]

use std::net::TcpListener;

#[allow(dead_code)]
mod theirs {
    use oracle::tungstenite;
    include!("programs/blocking.rs");
}

#[allow(dead_code)]
mod ours {
    use rapidws_tungstenite::tungstenite;
    include!("programs/blocking.rs");
}

fn runs() -> usize {
    std::env::var("RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10)
}

type Log = Vec<String>;

fn pair(server: fn(TcpListener) -> Log, client: impl FnOnce(u16) -> Log) -> (Log, Log) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || server(listener));
    let client = client(port);
    (server.join().unwrap(), client)
}

macro_rules! compare {
    ($name:literal, $server:ident $(($($sarg:expr),*))?, $client:ident($($carg:expr),*)) => {{
        let mut reference = None;
        for run in 0..runs() {
            let all = [
                ("theirs-theirs", pair(|l| theirs::$server(l $($(, $sarg)*)?), |p| theirs::$client(p, $($carg),*))),
                ("ours-theirs", pair(|l| ours::$server(l $($(, $sarg)*)?), |p| theirs::$client(p, $($carg),*))),
                ("theirs-ours", pair(|l| theirs::$server(l $($(, $sarg)*)?), |p| ours::$client(p, $($carg),*))),
                ("ours-ours", pair(|l| ours::$server(l $($(, $sarg)*)?), |p| ours::$client(p, $($carg),*))),
            ];
            let reference = reference.get_or_insert_with(|| all[0].1.clone());
            for (pairing, got) in all {
                assert_eq!(&got.0, &reference.0, "{}: run {run}, {pairing} (server, client): the server saw something else", $name);
                assert_eq!(&got.1, &reference.1, "{}: run {run}, {pairing} (server, client): the client saw something else", $name);
            }
        }
    }};
}

#[test]
fn echo_then_the_client_closes_without_a_code() {
    compare!("blocking echo", echo_server(false), echo_client(6, None));
}

#[test]
fn echo_through_accept_hdr_then_a_close_with_a_code() {
    compare!(
        "blocking echo hdr",
        echo_server(true),
        echo_client(6, Some(1000))
    );
}

#[test]
fn the_server_closes_first() {
    compare!("blocking server close", closing_server, reading_client());
}

#[test]
fn the_client_vanishes() {
    compare!(
        "blocking client vanishes",
        reading_server,
        vanishing_client()
    );
}

/// Text that is not UTF-8: both servers report `Utf8`; rapidws closes with 1007 where
/// tungstenite drops the connection, so only tungstenite's client sends it.
#[test]
fn text_that_is_not_utf8() {
    for _ in 0..runs() {
        let (t_server, t_client) = pair(theirs::reading_server, theirs::bad_text_client);
        let (o_server, o_client) = pair(ours::reading_server, theirs::bad_text_client);
        assert_eq!(o_server, t_server);
        assert_eq!(
            t_server.last().map(String::as_str),
            Some("Err(Utf8)"),
            "{t_server:?}"
        );
        assert_eq!(o_client[0], t_client[0]);
        assert!(o_client[1].starts_with("Close(1007"), "{o_client:?}");
    }
}
