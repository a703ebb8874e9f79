//! The memory budget shared by connections, on the sans-IO core: what a message being
//! received holds is charged as it arrives and given back when the message is handed
//! over, or the connection fails, closes or is dropped; past the limit the connection
//! waits (reading nothing) until memory comes back, or is refused with 1013 once
//! `Config::budget_wait` has passed, and past the message limit gets 1009 whatever the
//! budget.
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

/// Two connections on a budget of 10,000 bytes: the first holds 6,000 of an open
/// message, the second's open message needs 5,000 more and waits.
fn second_waits_for_the_first(config: Config) -> (Budget, Connection, Connection) {
    let budget = config.budget.clone().unwrap();
    let mut first = server(config.clone());
    let mut second = server(config);
    assert!(feed(&mut first, &raw_frame(0x02, 6_000, &[0; 6_000])).is_empty());
    assert_eq!(budget.held(), 6_000);
    assert!(feed(&mut second, &raw_frame(0x02, 5_000, &[2; 5_000])).is_empty());
    assert!(second.waits_for_budget());
    assert!(!second.wants_read(), "a waiting connection reads nothing");
    assert_eq!(
        (budget.held(), budget.waiting(), budget.waited()),
        (6_000, 1, 1)
    );
    assert_eq!(budget.refused(), 0);
    (budget, first, second)
}

#[test]
fn fragments_past_the_budget_wait_and_go_on_when_memory_comes_back() {
    let budget = Budget::new(10_000);
    let config = Config::default().with_budget(Some(budget.clone()));
    let (budget, mut first, mut second) = second_waits_for_the_first(config);
    // More bytes for the waiting connection are not decoded (an IO layer would not even
    // read them).
    assert!(feed(&mut second, &raw_frame(0x80, 3, &[3; 3])).is_empty());
    // The first one completes its message and gives everything back.
    let events = feed(&mut first, &raw_frame(0x80, 10, &[1; 10]));
    let mut want = vec![0u8; 6_000];
    want.extend_from_slice(&[1; 10]);
    assert_eq!(events, vec![binary(&want)]);
    // The second goes on where it stopped.
    let mut want = vec![2u8; 5_000];
    want.extend_from_slice(&[3; 3]);
    assert_eq!(drain(&mut second), vec![binary(&want)]);
    assert!(!second.waits_for_budget() && second.wants_read());
    assert_eq!(
        (budget.held(), budget.waiting(), budget.refused()),
        (0, 0, 0)
    );
    assert!(budget.peak() <= budget.limit());
}

/// The IO layer's order: a poll finds the budget short, memory comes back, then the IO
/// layer registers its waker: it is told to poll again, and that poll takes the memory
/// (the wake must not be spent on the registration).
#[test]
fn a_wake_that_comes_before_the_waker_is_registered_is_not_lost() {
    let budget = Budget::new(10_000);
    let config = Config::default().with_budget(Some(budget.clone()));
    let (budget, mut first, mut second) = second_waits_for_the_first(config);
    let waker = std::task::Waker::noop();
    assert!(second.register_budget_waker(waker), "waits");
    assert!(drain(&mut second).is_empty());
    assert_eq!(feed(&mut first, &raw_frame(0x80, 0, &[])).len(), 1);
    assert!(!second.register_budget_waker(waker), "poll again now");
    assert!(
        !second.register_budget_waker(waker),
        "still: the poll has not tried yet"
    );
    assert!(second.waits_for_budget());
    assert!(
        drain(&mut second).is_empty(),
        "the rest of its message has not come"
    );
    assert!(!second.waits_for_budget() && second.wants_read());
    assert_eq!((budget.held(), budget.waiting()), (5_000, 0));
}

#[test]
fn a_wait_past_budget_wait_is_refused_with_1013_and_counted() {
    let budget = Budget::new(10_000);
    let wait = std::time::Duration::from_secs(3);
    let config = Config::default()
        .with_budget(Some(budget.clone()))
        .with_budget_wait(wait);
    let start = Instant::now();
    let (budget, mut first, mut second) = second_waits_for_the_first(config);
    let deadline = second.poll_timeout().expect("the wait has a deadline");
    assert!(deadline <= Instant::now() + wait && deadline + wait >= start + wait);
    second.handle_timeout(deadline);
    assert_eq!(drain(&mut second), vec![Err(Error::OverBudget)]);
    assert_eq!(
        Error::OverBudget.close_code(),
        Some(CloseCode::TRY_AGAIN_LATER)
    );
    assert_eq!(sent_close_code(&mut second), Some(1013));
    assert!(second.is_closed());
    assert_eq!(
        (budget.held(), budget.refused(), budget.waiting()),
        (6_000, 1, 0)
    );
    // The first is untouched.
    assert_eq!(feed(&mut first, &raw_frame(0x80, 0, &[])).len(), 1);
    assert_eq!(budget.held(), 0);
}

#[test]
fn a_budget_wait_of_zero_refuses_at_once() {
    let budget = Budget::new(10_000);
    let config = Config::default()
        .with_budget(Some(budget.clone()))
        .with_budget_wait(std::time::Duration::ZERO);
    let mut first = server(config.clone());
    let mut second = server(config);
    assert!(feed(&mut first, &raw_frame(0x02, 6_000, &[0; 6_000])).is_empty());
    let events = feed(&mut second, &raw_frame(0x02, 5_000, &[0; 5_000]));
    assert_eq!(events, vec![Err(Error::OverBudget)]);
    assert_eq!(sent_close_code(&mut second), Some(1013));
    assert_eq!(
        (budget.held(), budget.refused(), budget.waiting()),
        (6_000, 1, 0)
    );
}

#[test]
fn a_message_larger_than_the_whole_budget_is_refused_at_once() {
    let budget = Budget::new(10_000);
    let mut conn = server(Config::default().with_budget(Some(budget.clone())));
    assert!(feed(&mut conn, &raw_frame(0x02, 6_000, &[0; 6_000])).is_empty());
    let events = feed(&mut conn, &raw_frame(0x00, 5_000, &[0; 5_000]));
    assert_eq!(events, vec![Err(Error::OverBudget)]);
    assert_eq!(sent_close_code(&mut conn), Some(1013));
    assert_eq!(
        (budget.held(), budget.refused(), budget.waiting()),
        (0, 1, 0)
    );
}

/// Eight connections, each holding part of a message and needing more than is left:
/// all would wait for ever. The oldest waiter is let past the limit, finishes, gives
/// back, and so on: every message completes, none is refused.
#[test]
fn waiters_that_hold_the_whole_budget_do_not_deadlock() {
    let budget = Budget::new(64_000);
    let config = Config::default().with_budget(Some(budget.clone()));
    let mut conns: Vec<Connection> = (0..8).map(|_| server(config.clone())).collect();
    // Each holds 8,000 bytes of a fragmented message: the budget is full.
    for (i, c) in conns.iter_mut().enumerate() {
        assert!(feed(c, &raw_frame(0x02, 8_000, &vec![i as u8; 8_000])).is_empty());
    }
    assert_eq!(budget.held(), 64_000);
    // Each gets its last 8,000 bytes: none fits.
    let mut done = vec![None; 8];
    for (i, c) in conns.iter_mut().enumerate() {
        for ev in feed(c, &raw_frame(0x80, 8_000, &vec![i as u8; 8_000])) {
            done[i] = Some(ev);
        }
    }
    for _ in 0..100 {
        for (i, c) in conns.iter_mut().enumerate() {
            for ev in drain(c) {
                done[i] = Some(ev);
            }
        }
    }
    for (i, ev) in done.into_iter().enumerate() {
        assert_eq!(ev, Some(binary(&vec![i as u8; 16_000])), "connection {i}");
    }
    assert_eq!(
        (budget.held(), budget.waiting(), budget.refused()),
        (0, 0, 0)
    );
    assert!(budget.waited() >= 7, "{budget:?}");
    // Past the limit by one message at most.
    assert!(budget.peak() <= budget.limit() + 16_000, "{budget:?}");
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
    fn inflated_output_is_charged_and_a_fragment_past_the_budget_waits_then_gets_1013() {
        const MIB: usize = 1 << 20;
        let budget = Budget::new(10 * MIB);
        let config = Config::default().with_budget(Some(budget.clone()));
        let fragment = open_fragment(4 * MIB);
        assert!(fragment.len() < 8 << 10, "{} bytes", fragment.len());
        let mut conns: Vec<Connection> = (0..3).map(|_| with_deflate(config.clone())).collect();
        for conn in &mut conns {
            assert_eq!(feed(conn, &fragment), vec![]);
        }
        // Two hold 4 MiB each; the third inflated what was left (2 MiB) and waits.
        assert!(!conns[0].waits_for_budget() && !conns[1].waits_for_budget());
        assert!(conns[2].waits_for_budget());
        assert_eq!(conns[2].budget_charge(), 2 * MIB);
        assert_eq!(
            (budget.held(), budget.waiting(), budget.refused()),
            (10 * MIB, 1, 0)
        );
        assert!(budget.peak() <= budget.limit());
        // Nothing comes back within the wait: 1013, and its grant goes back.
        let deadline = conns[2].poll_timeout().unwrap();
        conns[2].handle_timeout(deadline);
        assert_eq!(drain(&mut conns[2]), vec![Err(Error::OverBudget)]);
        assert_eq!(sent_close_code(&mut conns[2]), Some(1013));
        assert_eq!((budget.held(), budget.refused()), (8 * MIB, 1));
        drop(conns);
        assert_eq!(budget.held(), 0);
    }

    #[test]
    fn an_inflation_paused_at_its_grant_goes_on_when_memory_comes_back() {
        const MIB: usize = 1 << 20;
        let budget = Budget::new(5 * MIB);
        let config = Config::default().with_budget(Some(budget.clone()));
        let mut holder = server(config.clone());
        assert!(
            feed(
                &mut holder,
                &raw_frame(0x02, 3 * MIB as u64, &vec![1; 3 * MIB])
            )
            .is_empty()
        );
        let mut conn = with_deflate(config);
        let payload = bomb(4 * MIB);
        let wire = raw_frame(0x80 | 0x40 | 0x02, payload.len() as u64, &payload);
        assert_eq!(feed(&mut conn, &wire), vec![]);
        assert!(conn.waits_for_budget());
        assert_eq!(conn.budget_charge(), 2 * MIB);
        // The holder's message completes: the inflater goes on where it paused.
        assert_eq!(feed(&mut holder, &raw_frame(0x80, 0, &[])).len(), 1);
        assert_eq!(drain(&mut conn), vec![binary(&vec![0; 4 * MIB])]);
        assert_eq!(
            (budget.held(), budget.refused(), budget.waiting()),
            (0, 0, 0)
        );
        // And the inflater is in step for the next message.
        assert_eq!(feed(&mut conn, &wire), vec![binary(&vec![0; 4 * MIB])]);
    }

    #[test]
    fn inflated_chunks_paused_at_the_grant_are_handed_over_and_go_on() {
        const MIB: usize = 1 << 20;
        let budget = Budget::new(2 * MIB);
        let config = Config::default()
            .with_delivery(Delivery::Chunks)
            .with_budget(Some(budget.clone()));
        let mut holder = server(Config::default().with_budget(Some(budget.clone())));
        let mut conn = with_deflate(config);
        assert!(feed(&mut holder, &raw_frame(0x02, MIB as u64, &vec![1; MIB])).is_empty());
        let payload = bomb(3 * MIB);
        let wire = raw_frame(0x80 | 0x40 | 0x02, payload.len() as u64, &payload);
        conn.handle_bytes(Instant::now(), &wire);
        let mut got = 0;
        let mut fin = false;
        for _ in 0..1000 {
            match conn.poll_event_owned() {
                Some(Ok(OwnedEvent::Chunk { data, fin: f, .. })) => {
                    assert!(data.iter().all(|&b| b == 0));
                    got += data.len();
                    fin = f;
                    assert!(budget.held() <= budget.limit(), "{budget:?}");
                }
                None if fin => break,
                None => {}
                other => panic!("{other:?}"),
            }
        }
        assert!(fin);
        assert_eq!(got, 3 * MIB);
        assert_eq!(budget.refused(), 0);
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
