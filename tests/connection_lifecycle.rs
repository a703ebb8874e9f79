//! The life of a connection after the handshake, sans IO, on a virtual clock: the close
//! handshake, the teardown of RFC 6455 7.1.1 (who shuts TCP down first, how long the FIN
//! is awaited), failures during the close, and the linger after a failure.

use std::time::{Duration, Instant};

use rapidws::codec::{CloseCode, ProtocolError};
use rapidws::connection::{Config, Connection, Error, OwnedEvent, Timeout};
use rapidws::{CloseFrame, Role};

mod connection_support;
use connection_support::drain;

struct Pair {
    client: Connection,
    server: Connection,
    now: Instant,
}

fn quiet() -> Config {
    Config::default()
        .with_keepalive(None, Duration::from_secs(30))
        .with_idle_timeout(None)
}

impl Pair {
    fn new() -> Self {
        Self::with(quiet(), quiet())
    }

    fn with(client: Config, server: Config) -> Self {
        let now = Instant::now();
        Pair {
            client: Connection::new(Role::Client, client, now),
            server: Connection::new(Role::Server, server, now),
            now,
        }
    }
}

fn wire(from: &mut Connection) -> Vec<u8> {
    let mut out = Vec::new();
    from.write_pending(&mut out);
    out
}

/// A close handshake the client starts, both closes delivered.
fn client_closes(p: &mut Pair) {
    p.client.close(p.now, CloseCode::NORMAL, "bye").unwrap();
    let w = wire(&mut p.client);
    p.server.handle_bytes(p.now, &w);
    assert_eq!(drain(&mut p.server).len(), 1, "the client's close");
    let w = wire(&mut p.server);
    p.client.handle_bytes(p.now, &w);
    assert_eq!(drain(&mut p.client).len(), 1, "the echo");
}

#[test]
fn after_the_close_handshake_the_server_shuts_down_first_and_the_client_waits_for_it() {
    let mut p = Pair::new();
    client_closes(&mut p);
    assert!(p.server.is_closed() && p.client.is_closed());
    // RFC 6455 7.1.1: the server closes the TCP connection first.
    assert!(p.server.wants_shutdown());
    assert!(
        !p.client.wants_shutdown(),
        "the client waits for the server's FIN"
    );
    p.server.handle_shutdown(p.now);
    assert!(
        !p.server.is_done(),
        "then the server waits for the client's FIN"
    );
    // The server's FIN reaches the client: it shuts down in turn and is done. Until its
    // shutdown is over there is nothing more to read: the end would only be found again.
    assert!(p.client.wants_read());
    p.client.handle_eof(p.now);
    assert!(p.client.wants_shutdown());
    assert!(!p.client.wants_read(), "the end was read");
    p.client.handle_shutdown(p.now);
    assert!(p.client.is_done());
    assert_eq!(
        p.client.take_failure(),
        None,
        "a clean close is not an error"
    );
    p.server.handle_eof(p.now);
    assert!(p.server.is_done());
    assert_eq!(p.server.take_failure(), None);
}

#[test]
fn the_wait_for_the_fin_ends_at_the_close_timeout() {
    let mut p = Pair::new();
    client_closes(&mut p);
    p.server.handle_shutdown(p.now);
    // The client never closes its end: the server gives up at the close timeout.
    let deadline = p.now + Duration::from_secs(5);
    assert_eq!(p.server.poll_timeout(), Some(deadline));
    p.server.handle_timeout(deadline - Duration::from_millis(1));
    assert!(!p.server.is_done());
    p.server.handle_timeout(deadline);
    assert!(p.server.is_done());
    assert_eq!(
        p.server.take_failure(),
        None,
        "the handshake itself completed"
    );
    // Likewise a client whose server never closes TCP.
    assert_eq!(p.client.poll_timeout(), Some(deadline));
    p.client.handle_timeout(deadline);
    assert!(p.client.is_done());
}

#[test]
fn an_unanswered_close_is_a_close_timeout_and_ends_at_once() {
    let mut p = Pair::new();
    p.client.close(p.now, CloseCode::NORMAL, "").unwrap();
    let _ = wire(&mut p.client);
    let deadline = p.now + Duration::from_secs(5);
    assert_eq!(p.client.poll_timeout(), Some(deadline));
    p.client.handle_timeout(deadline);
    assert_eq!(
        drain(&mut p.client),
        vec![Err(Error::Timeout(Timeout::Close))]
    );
    // Our close went out long ago: no linger for a peer that is not answering.
    assert!(p.client.is_done());
    assert_eq!(
        p.client.take_failure(),
        Some(Error::Timeout(Timeout::Close))
    );
    assert_eq!(p.client.take_failure(), None, "taken once");
}

#[test]
fn a_close_timeout_of_none_waits_for_the_peer_without_a_limit() {
    let mut config = quiet();
    config.close_timeout = None;
    let mut p = Pair::with(config.clone(), config);
    p.client.close(p.now, CloseCode::NORMAL, "").unwrap();
    assert_eq!(p.client.poll_timeout(), None);
    p.client.handle_timeout(p.now + Duration::from_secs(3600));
    assert!(!p.client.is_closed());
}

#[test]
fn a_protocol_error_during_the_close_fails_without_a_second_close_frame() {
    let mut p = Pair::new();
    p.client.close(p.now, CloseCode::NORMAL, "").unwrap();
    let _ = wire(&mut p.client);
    // Instead of its close, the "server" sends a masked frame (RFC 6455 5.1: 1002).
    p.client
        .handle_bytes(p.now, &[0x81, 0x81, 1, 2, 3, 4, b'x' ^ 1]);
    assert_eq!(
        drain(&mut p.client),
        vec![Err(Error::Protocol(ProtocolError::MaskedFrame))]
    );
    assert!(p.client.is_closed() && !p.client.is_done());
    // Our close is already out: nothing more is sent.
    assert!(wire(&mut p.client).is_empty());
    // The failed connection shuts down at once and lingers for the peer's FIN.
    assert!(p.client.wants_shutdown());
    p.client.handle_shutdown(p.now);
    p.client.handle_eof(p.now);
    assert!(p.client.is_done());
    assert_eq!(
        p.client.take_failure(),
        Some(Error::Protocol(ProtocolError::MaskedFrame))
    );
}

#[test]
fn after_a_failure_what_the_peer_still_sends_is_read_and_dropped_within_bounds() {
    let server = quiet().with_linger(Some(Duration::from_secs(1)), 10_000);
    let mut p = Pair::with(quiet(), server);
    // A frame over the message limit is refused at its header with 1009 ...
    p.server
        .handle_bytes(p.now, &[0x82, 0xff, 0, 0, 0, 0, 0x10, 0, 0, 0, 1, 2, 3, 4]);
    assert_eq!(
        drain(&mut p.server),
        vec![Err(Error::Protocol(ProtocolError::FrameTooLarge))]
    );
    let close = wire(&mut p.server);
    p.client.handle_bytes(p.now, &close);
    assert_eq!(
        drain(&mut p.client),
        vec![Ok(OwnedEvent::Close(Some(CloseFrame::new(
            CloseCode::TOO_BIG,
            "message too big"
        ))))]
    );
    // ... then the server shuts down and goes on reading, so the peer still sending its
    // frame reads that close instead of a reset.
    assert!(p.server.wants_shutdown());
    p.server.handle_shutdown(p.now);
    for _ in 0..9 {
        p.server.handle_bytes(p.now, &[0; 1000]);
        assert!(!p.server.is_done());
        assert!(drain(&mut p.server).is_empty(), "nothing is delivered");
    }
    // Up to `linger_bytes` (here 10,000), then the transport is closed.
    p.server.handle_bytes(p.now, &[0; 1000]);
    assert!(p.server.is_done());
    assert_eq!(
        p.server.take_failure(),
        Some(Error::Protocol(ProtocolError::FrameTooLarge))
    );
}

#[test]
fn the_linger_ends_at_its_deadline() {
    let mut p = Pair::new();
    p.server.handle_bytes(p.now, &[0x82, 0x00]); // unmasked to a server: 1002
    assert_eq!(drain(&mut p.server).len(), 1);
    let _ = wire(&mut p.server);
    p.server.handle_shutdown(p.now);
    let deadline = p.now + Duration::from_secs(1);
    assert_eq!(p.server.poll_timeout(), Some(deadline));
    p.server.handle_timeout(deadline);
    assert!(p.server.is_done());
}

#[test]
fn the_transport_ending_before_the_close_is_an_abnormal_closure() {
    let mut p = Pair::new();
    p.client.send_text("hi").unwrap();
    let w = wire(&mut p.client);
    p.server.handle_bytes(p.now, &w);
    p.server.handle_eof(p.now);
    // RFC 6455 7.1.5: what arrived first is still delivered, then 1006.
    let events = drain(&mut p.server);
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[1], Err(Error::Eof));
    assert!(p.server.is_done());
}

#[test]
fn the_peer_close_frame_is_kept_by_the_connection() {
    let mut p = Pair::new();
    client_closes(&mut p);
    assert_eq!(
        p.server.peer_close(),
        Some(&CloseFrame::new(CloseCode::NORMAL, "bye"))
    );
    assert_eq!(
        p.client.peer_close(),
        Some(&CloseFrame::new(CloseCode::NORMAL, ""))
    );
    // A close without a status code is kept as 1005 (RFC 6455 7.1.5).
    let mut p = Pair::new();
    p.server.handle_bytes(p.now, &[0x88, 0x80, 0, 0, 0, 0]);
    let _ = drain(&mut p.server);
    assert_eq!(p.server.peer_close().map(|c| c.code), Some(CloseCode(1005)));
}

#[test]
fn the_keepalive_ping_goes_out_and_its_pong_timeout_sends_1001() {
    let config = Config::default()
        .with_keepalive(Some(Duration::from_secs(10)), Duration::from_secs(5))
        .with_idle_timeout(None);
    let mut p = Pair::with(quiet(), config);
    let t10 = p.now + Duration::from_secs(10);
    assert_eq!(p.server.poll_timeout(), Some(t10));
    p.server.handle_timeout(t10);
    assert_eq!(wire(&mut p.server), [0x89, 0x00]);
    p.server.handle_timeout(t10 + Duration::from_secs(5));
    assert_eq!(
        drain(&mut p.server),
        vec![Err(Error::Timeout(Timeout::Pong))]
    );
    let w = wire(&mut p.server);
    p.client.handle_bytes(t10, &w);
    assert_eq!(
        drain(&mut p.client),
        vec![Ok(OwnedEvent::Close(Some(CloseFrame::new(
            CloseCode::GOING_AWAY,
            "no pong to the keepalive ping"
        ))))]
    );
}

/// With `auto_close` off, the peer's close leaves the connection in CloseReceived until
/// the application answers. The transport ending there (the peer hung up after its close,
/// or a read or write failed) ends the connection, without an error: the peer's close
/// came. It used to stay open forever, every event poll returning `None` (found by the
/// simulated transport, tests/simulated_transport.rs: a peer with `auto_close` off that
/// the application closed, then dropped, never finished).
#[test]
fn the_transport_ending_after_the_peer_close_ends_a_connection_that_did_not_answer_it() {
    for failed in [false, true] {
        let mut config = quiet();
        config.auto_close = false;
        let mut p = Pair::with(quiet(), config);
        p.client.send_text("before the close").unwrap();
        p.client.close(p.now, CloseCode::NORMAL, "bye").unwrap();
        let w = wire(&mut p.client);
        p.server.handle_bytes(p.now, &w);
        let events = drain(&mut p.server);
        assert_eq!(events.len(), 2, "{events:?}");
        assert!(matches!(events[1], Ok(OwnedEvent::Close(Some(_)))));
        assert!(
            !p.server.is_closed(),
            "our close is the application's to send"
        );
        if failed {
            p.server.handle_transport_error();
        } else {
            p.server.handle_eof(p.now);
        }
        assert_eq!(drain(&mut p.server), [], "failed: {failed}");
        assert!(p.server.is_done(), "failed: {failed}");
        assert_eq!(p.server.take_failure(), None, "failed: {failed}");
        assert!(!p.server.wants_read());
    }
}

/// The server's close echo and its FIN read in one go, before the echo is decoded (the
/// tokio layer's write waits read ahead without decoding): the client shuts down at once
/// instead of waiting out the close timeout for a FIN that came. Found by the simulated
/// transport (tests/simulated_transport.rs): a client whose `Sink::close` read the echo
/// and the FIN waited for the close timeout.
#[test]
fn a_fin_read_with_the_close_echo_ends_the_teardown_at_once() {
    let mut p = Pair::new();
    p.client.close(p.now, CloseCode::NORMAL, "bye").unwrap();
    let w = wire(&mut p.client);
    p.server.handle_bytes(p.now, &w);
    assert_eq!(drain(&mut p.server).len(), 1, "the client's close");
    let echo = wire(&mut p.server);
    assert!(p.server.wants_shutdown());
    p.server.handle_shutdown(p.now);
    // The echo and the FIN, both read before the client polls.
    p.client.handle_bytes(p.now, &echo);
    p.client.handle_eof(p.now);
    let events = drain(&mut p.client);
    assert!(
        matches!(events[..], [Ok(OwnedEvent::Close(Some(_)))]),
        "{events:?}"
    );
    assert!(p.client.wants_shutdown(), "the server's FIN came");
    assert!(!p.client.wants_read());
    p.client.handle_shutdown(p.now);
    assert!(p.client.is_done());
    assert_eq!(p.client.take_failure(), None);
}
