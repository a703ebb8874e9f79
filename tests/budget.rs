//! The memory budget shared by connections, on the sans-IO core: what a message being
//! received holds is charged as it arrives and given back when the message is handed
//! over, or the connection fails, closes or is dropped; past the limit the message is
//! refused with 1013, and past the message limit with 1009 whatever the budget.
//!
//! The real-socket shapes (thousands of connections holding open fragments) are in
//! `tests/bounded_tokio.rs` and `tests/bounded_blocking.rs`.

use std::time::Instant;

use rapidws::Role;
use rapidws::codec::{CloseCode, MessageKind, ProtocolError};
use rapidws::connection::{Budget, Config, Connection, Error, OwnedEvent};

mod alloc_count;
mod connection_support;
mod hostile_support;
use connection_support::drain;
use hostile_support::raw_frame;

fn server(config: Config) -> Connection {
    Connection::new(Role::Server, config, Instant::now())
}

fn feed(conn: &mut Connection, bytes: &[u8]) -> Vec<Result<OwnedEvent, Error>> {
    conn.handle_bytes(Instant::now(), bytes);
    drain(conn)
}

/// The close code of the first close frame in the (unmasked) output.
fn sent_close_code(conn: &mut Connection) -> Option<u16> {
    let mut out = Vec::new();
    conn.write_pending(&mut out);
    let mut pos = 0;
    while pos + 2 <= out.len() {
        let (op, len) = (out[pos] & 0x0f, (out[pos + 1] & 0x7f) as usize);
        if op == 0x8 {
            let p = &out[pos + 2..pos + 2 + len];
            return (p.len() >= 2).then(|| u16::from_be_bytes([p[0], p[1]]));
        }
        pos += 2 + len;
    }
    None
}

fn binary(data: &[u8]) -> Result<OwnedEvent, Error> {
    Ok(OwnedEvent::Message {
        kind: MessageKind::Binary,
        data: bytes::Bytes::copy_from_slice(data),
    })
}

#[test]
fn a_single_frame_message_arriving_in_pieces_is_charged_until_it_is_complete() {
    let budget = Budget::new(1 << 20);
    let mut conn = server(Config::default().with_budget(Some(budget.clone())));
    let payload = vec![7u8; 100_000];
    let wire = raw_frame(0x82, payload.len() as u64, &payload);
    assert!(feed(&mut conn, &wire[..60_000]).is_empty());
    // The frame so far, header included.
    assert_eq!(budget.held(), 60_000);
    assert_eq!(conn.budget_charge(), 60_000);
    assert_eq!(feed(&mut conn, &wire[60_000..]), vec![binary(&payload)]);
    assert_eq!((budget.held(), budget.peak()), (0, 60_000));
}

#[test]
fn a_message_arriving_whole_is_never_charged() {
    let budget = Budget::new(16);
    let mut conn = server(Config::default().with_budget(Some(budget.clone())));
    let payload = vec![1u8; 64 << 10];
    let events = feed(&mut conn, &raw_frame(0x82, payload.len() as u64, &payload));
    assert_eq!(events, vec![binary(&payload)]);
    assert_eq!((budget.peak(), budget.refused()), (0, 0));
}

#[test]
fn fragments_past_the_budget_are_refused_with_1013_and_counted() {
    let budget = Budget::new(10_000);
    let config = Config::default().with_budget(Some(budget.clone()));
    let mut first = server(config.clone());
    let mut second = server(config);
    // The first connection holds 6,000 bytes of an open message.
    assert!(feed(&mut first, &raw_frame(0x02, 6_000, &[0; 6_000])).is_empty());
    assert_eq!(budget.held(), 6_000);
    // The second one's open message needs 5,000 more: refused, the first one untouched.
    let events = feed(&mut second, &raw_frame(0x02, 5_000, &[0; 5_000]));
    assert_eq!(events, vec![Err(Error::OverBudget)]);
    assert_eq!(
        Error::OverBudget.close_code(),
        Some(CloseCode::TRY_AGAIN_LATER)
    );
    assert_eq!(sent_close_code(&mut second), Some(1013));
    assert!(second.is_closed());
    assert_eq!((budget.held(), budget.refused()), (6_000, 1));
    // The first one completes its message and gives everything back.
    let events = feed(&mut first, &raw_frame(0x80, 10, &[1; 10]));
    let mut want = vec![0u8; 6_000];
    want.extend_from_slice(&[1; 10]);
    assert_eq!(events, vec![binary(&want)]);
    assert_eq!(budget.held(), 0);
    assert!(budget.peak() <= budget.limit());
}

#[test]
fn a_message_over_the_message_limit_is_1009_even_with_budget_to_spare() {
    let budget = Budget::new(1 << 30);
    let config = Config::default()
        .with_max_message_size(1000)
        .with_budget(Some(budget.clone()));
    let mut conn = server(config);
    let mut wire = raw_frame(0x02, 600, &[0; 600]);
    wire.extend(raw_frame(0x80, 600, &[0; 600]));
    assert_eq!(
        feed(&mut conn, &wire),
        vec![Err(Error::Protocol(ProtocolError::MessageTooLarge))]
    );
    assert_eq!(sent_close_code(&mut conn), Some(1009));
    assert_eq!((budget.held(), budget.refused()), (0, 0));
}

#[test]
fn what_a_connection_charged_goes_back_when_it_fails_closes_or_is_dropped() {
    let budget = Budget::new(1 << 20);
    let config = Config::default().with_budget(Some(budget.clone()));
    let open = raw_frame(0x02, 1000, &[0; 1000]);

    // Dropped mid-message, without a close.
    let mut dropped = server(config.clone());
    feed(&mut dropped, &open);
    // Failed: a protocol error mid-message.
    let mut failed = server(config.clone());
    feed(&mut failed, &open);
    // Closed: the peer's close mid-message, answered.
    let mut closed = server(config.clone());
    feed(&mut closed, &open);
    // The transport ended mid-message (1006).
    let mut ended = server(config);
    feed(&mut ended, &open);
    assert_eq!(budget.held(), 4000);

    drop(dropped);
    assert_eq!(budget.held(), 3000);
    let events = feed(&mut failed, &raw_frame(0x83, 0, &[]));
    assert_eq!(
        events,
        vec![Err(Error::Protocol(ProtocolError::UnknownOpcode(3)))]
    );
    assert_eq!(budget.held(), 2000);
    feed(&mut closed, &raw_frame(0x88, 2, &1000u16.to_be_bytes()));
    closed.handle_eof(Instant::now());
    drain(&mut closed);
    closed.handle_shutdown(Instant::now());
    assert!(closed.is_done());
    ended.handle_eof(Instant::now());
    assert_eq!(drain(&mut ended), vec![Err(Error::Eof)]);
    assert_eq!(budget.held(), 0);
    drop((failed, closed, ended));
    assert_eq!((budget.held(), budget.refused()), (0, 0));
}

#[test]
fn without_a_budget_only_the_message_limit_applies() {
    let mut conn = server(Config::default().with_budget(None));
    assert!(feed(&mut conn, &raw_frame(0x02, 5000, &[0; 5000])).is_empty());
    assert_eq!(conn.budget_charge(), 0);
}

#[test]
fn the_default_is_the_process_wide_budget() {
    let config = Config::default();
    assert!(config.budget.as_ref().unwrap().same_as(&Budget::shared()));
    assert_eq!(
        Budget::shared().limit(),
        rapidws::connection::DEFAULT_BUDGET
    );
}

#[cfg(feature = "deflate")]
mod deflate {
    use super::*;
    use crate::alloc_count::peak_during;
    use rapidws::connection::Delivery;
    use rapidws::deflate::{DeflateConfig, DeflateError, DeflateParams, PerMessageDeflate};

    fn with_deflate(config: Config) -> Connection {
        let mut c = server(config);
        c.set_deflate(PerMessageDeflate::new(
            Role::Server,
            DeflateParams::default(),
            &DeflateConfig::new().min_size(0),
        ));
        c
    }

    /// `len` zero bytes compressed (about 1,000 to 1), as a client puts them in a frame.
    fn bomb(len: usize) -> Vec<u8> {
        let config = DeflateConfig::new().level(9);
        let mut sender = PerMessageDeflate::new(Role::Client, DeflateParams::default(), &config);
        let mut out = Vec::new();
        assert!(sender.compress(&vec![0u8; len], &mut out).unwrap());
        out
    }

    /// A compressed first fragment (FIN = 0) of `inflated` zero bytes.
    fn open_fragment(inflated: usize) -> Vec<u8> {
        let payload = bomb(inflated);
        raw_frame(0x40 | 0x02, payload.len() as u64, &payload)
    }

    #[test]
    fn inflated_output_is_charged_and_a_fragment_past_the_budget_gets_1013() {
        const MIB: usize = 1 << 20;
        let budget = Budget::new(10 * MIB);
        let config = Config::default().with_budget(Some(budget.clone()));
        let fragment = open_fragment(4 * MIB);
        assert!(fragment.len() < 8 << 10, "{} bytes", fragment.len());
        let mut conns: Vec<Connection> = (0..3).map(|_| with_deflate(config.clone())).collect();
        let mut refused = 0;
        for conn in &mut conns {
            match feed(conn, &fragment).as_slice() {
                [] => {}
                [Err(Error::OverBudget)] => {
                    assert_eq!(sent_close_code(conn), Some(1013));
                    refused += 1;
                }
                other => panic!("{other:?}"),
            }
        }
        // Two hold 4 MiB each; the third would pass 10 MiB.
        assert_eq!((refused, budget.refused()), (1, 1));
        assert_eq!(budget.held(), 8 * MIB);
        assert!(budget.peak() <= budget.limit());
        drop(conns);
        assert_eq!(budget.held(), 0);
    }

    #[test]
    fn a_refused_inflation_allocates_no_more_than_the_budget_granted() {
        const MIB: usize = 1 << 20;
        let budget = Budget::new(MIB);
        let mut conn = with_deflate(Config::default().with_budget(Some(budget.clone())));
        let fragment = open_fragment(12 * MIB);
        let (events, peak) = peak_during(|| feed(&mut conn, &fragment));
        assert_eq!(events, vec![Err(Error::OverBudget)]);
        // The grant (1 MiB), the inflater's state and the wire bytes: never the 12 MiB
        // the fragment inflates to.
        assert!(peak < 2 * MIB, "held {peak} bytes");
        assert_eq!(budget.held(), 0);
    }

    #[test]
    fn a_compressed_message_over_the_message_limit_is_still_1009() {
        let budget = Budget::new(1 << 30);
        let config = Config::default()
            .with_max_message_size(1 << 20)
            .with_budget(Some(budget.clone()));
        let mut conn = with_deflate(config);
        let payload = bomb(2 << 20);
        let wire = raw_frame(0x80 | 0x40 | 0x02, payload.len() as u64, &payload);
        assert_eq!(
            feed(&mut conn, &wire),
            vec![Err(Error::Deflate(DeflateError::TooLarge))]
        );
        assert_eq!(sent_close_code(&mut conn), Some(1009));
        assert_eq!((budget.held(), budget.refused()), (0, 0));
    }

    #[test]
    fn compressed_messages_are_charged_only_while_they_inflate() {
        let budget = Budget::new(1 << 20);
        let mut conn = with_deflate(Config::default().with_budget(Some(budget.clone())));
        let payload = bomb(100_000);
        let wire = raw_frame(0x80 | 0x40 | 0x02, payload.len() as u64, &payload);
        for _ in 0..3 {
            assert_eq!(feed(&mut conn, &wire), vec![binary(&[0; 100_000])]);
            assert_eq!(budget.held(), 0);
        }
        assert_eq!(budget.refused(), 0);
    }

    #[test]
    fn an_inflated_chunk_is_charged_until_the_next_one_replaces_it() {
        let budget = Budget::new(1 << 20);
        let config = Config::default()
            .with_delivery(Delivery::Chunks)
            .with_budget(Some(budget.clone()));
        let mut conn = with_deflate(config);
        let payload = bomb(300_000);
        let (a, b) = payload.split_at(payload.len() / 2);
        let mut wire = raw_frame(0x40 | 0x02, a.len() as u64, a);
        wire.extend(raw_frame(0x80, b.len() as u64, b));
        conn.handle_bytes(Instant::now(), &wire);
        let mut got = 0;
        while let Some(ev) = conn.poll_event_owned() {
            match ev {
                Ok(OwnedEvent::Chunk { data, .. }) => {
                    got += data.len();
                    // The chunk just inflated, lent until the next call.
                    assert!(budget.held() <= 300_000, "{}", budget.held());
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(got, 300_000);
        conn.release_idle_memory();
        assert_eq!(budget.held(), 0);
    }
}
