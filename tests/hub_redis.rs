//! The hub across nodes through a real Redis (started by the test on a free loopback
//! port): exactly-once fan-out with 1,000 clients, history recovery, and Redis killed
//! and restarted mid-run, with and without its data.
mod hub_support;

use std::time::Duration;

use hub_support::*;
use rapidws::hub::{HistoryConfig, Hub, HubConfig, HubEvent, Position, RedisBroker, RedisConfig};
use rapidws::tokio::Message;

fn redis_hub(url: String, history: bool) -> rapidws::hub::HubBuilder {
    let broker = RedisBroker::new(
        RedisConfig::new(url).with_backoff(Duration::from_millis(50), Duration::from_millis(400)),
    )
    .unwrap();
    let mut config = HubConfig::default().with_recovery_timeout(Duration::from_secs(10));
    if history {
        config = config.with_history(Some(HistoryConfig::default().with_capacity(1000)));
    }
    let b = Hub::builder().broker(broker).config(config);
    if history {
        b.framer(position_framer)
    } else {
        b
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_through_redis_deliver_every_publication_once_in_order() {
    let Some(redis) = Server::redis(false) else {
        return;
    };
    let url = redis.url("redis");
    three_nodes_exactly_once(move || redis_hub(url.clone(), false)).await;
}

/// Receives `n` publications; returns their texts.
async fn take(
    ws: &mut rapidws::tokio::WebSocket<rapidws::tokio::MaybeTlsStream<tokio::net::TcpStream>>,
    n: usize,
) -> Vec<String> {
    let mut out = Vec::new();
    while out.len() < n {
        match tokio::time::timeout(LIMIT, ws.recv())
            .await
            .expect("publication timed out")
        {
            Ok(Some(Message::Text(t))) => out.push(t.as_str().to_string()),
            Ok(Some(_)) => {}
            other => panic!("connection ended: {other:?}"),
        }
    }
    out
}

fn publish_range(hub: &Hub, node: u32, seqs: std::ops::Range<u64>) {
    for s in seqs {
        hub.publish("t", payload(node, s, 50).as_str()).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_and_restarted_mid_run_then_recovery_and_epoch() {
    let Some(mut redis) = Server::redis(true) else {
        return;
    };
    let url = redis.url("redis");
    let (ua, ub) = (url.clone(), url.clone());
    let a = Node::start(move || redis_hub(ua, true), server_config());
    let b = Node::start(move || redis_hub(ub, true), server_config());
    let mut events_a = a.hub.events();
    let mut ca = subscriber(a.addr, "t", true).await;
    let mut cb = subscriber(b.addr, "t", false).await;
    until("both nodes subscribed", || {
        a.hub.broker_ready("t") && b.hub.broker_ready("t")
    })
    .await;

    // Recorded publications from both nodes reach both, numbered alike.
    publish_range(&a.hub, 0, 0..10);
    publish_range(&b.hub, 1, 0..10);
    let got_a = take(&mut ca, 20).await;
    let got_b = take(&mut cb, 20).await;
    assert_eq!(got_a, got_b, "every node delivers in stream order");
    let seen = framed_position(got_a.last().unwrap()).unwrap();
    assert_eq!(seen.offset, 20);

    // Redis dies: reported, and local fan-out goes on without positions.
    redis.kill();
    until("both nodes saw the loss", || {
        !a.hub.metrics().broker_up && !b.hub.metrics().broker_up
    })
    .await;
    publish_range(&a.hub, 0, 10..15);
    let local = take(&mut ca, 5).await;
    assert!(local.iter().all(|t| t.starts_with("-@- ")), "{local:?}");
    assert!(a.hub.metrics().unrecorded >= 5);
    loop {
        match tokio::time::timeout(LIMIT, events_a.recv())
            .await
            .unwrap()
            .unwrap()
        {
            HubEvent::BrokerDown { .. } => break,
            _ => continue,
        }
    }

    // Back with its data (append-only file): both nodes resubscribe, the epoch holds.
    redis.start();
    until("both nodes back", || {
        let (ma, mb) = (a.hub.metrics(), b.hub.metrics());
        ma.broker_up && mb.broker_up && a.hub.broker_ready("t") && b.hub.broker_ready("t")
    })
    .await;
    assert!(a.hub.metrics().broker_disconnects >= 1);
    publish_range(&b.hub, 1, 10..20);
    let after_a = take(&mut ca, 10).await;
    let after_b = take(&mut cb, 10).await;
    assert_eq!(after_a, after_b);
    let p = framed_position(after_a.last().unwrap()).unwrap();
    assert_eq!(
        p,
        Position {
            offset: 30,
            epoch: seen.epoch
        },
        "data retained: same epoch"
    );

    // A client that saw up to offset 20 comes back (to the other node): exactly the ten
    // it missed, in order, then live ones.
    let (replayed, outcome, mut cr) = recovering_subscriber(a.addr, "t", seen).await;
    assert_eq!(outcome, "recovered 10");
    assert_eq!(replayed, after_b);
    publish_range(&a.hub, 0, 15..16);
    let live = take(&mut cr, 1).await;
    assert_eq!(framed_position(&live[0]).unwrap().offset, 31);
    assert_eq!(take(&mut cb, 1).await, live);

    // Redis comes back empty: the epoch marks the gap.
    let mut events_b = b.hub.events();
    redis.kill();
    until("loss seen", || {
        !a.hub.metrics().broker_up && !b.hub.metrics().broker_up
    })
    .await;
    redis.wipe_data();
    redis.start();
    until("back again", || {
        a.hub.metrics().broker_up && b.hub.metrics().broker_up && b.hub.broker_ready("t")
    })
    .await;
    publish_range(&a.hub, 0, 16..17);
    let fresh = take(&mut cb, 1).await;
    let now = framed_position(fresh.last().unwrap()).unwrap();
    assert_ne!(now.epoch, seen.epoch, "a new epoch");
    assert_eq!(now.offset, 1);
    // B says so: when its catch-up found the history gone (then where it stands is
    // "nothing yet"), or at the fresh publication if that came first.
    loop {
        let e = tokio::time::timeout(LIMIT, events_b.recv())
            .await
            .expect("an epoch change")
            .unwrap();
        if let HubEvent::EpochChanged {
            previous, current, ..
        } = e
        {
            assert_eq!(previous.epoch, seen.epoch);
            let gone = Position {
                offset: 0,
                epoch: 0,
            };
            assert!(current == now || current == gone, "{current:?}");
            break;
        }
    }
    let (_, outcome, _c) = recovering_subscriber(b.addr, "t", p).await;
    assert_eq!(outcome, "epoch-changed");
    assert!(b.hub.metrics().epoch_changes >= 1);
}
