//! The hub across nodes through a real NATS server (started by the test on a free
//! loopback port): exactly-once fan-out with 1,000 clients, and the server killed and
//! restarted mid-run.
mod hub_support;

use std::time::Duration;

use hub_support::*;
use rapidws::hub::{HistoryConfig, Hub, HubConfig, HubEvent, NatsBroker, NatsConfig};
use rapidws::tokio::Message;

fn nats_hub(url: String, history: bool) -> rapidws::hub::HubBuilder {
    let broker = NatsBroker::new(NatsConfig::new(url).with_backoff_max(Duration::from_millis(300)));
    let mut config = HubConfig::default();
    if history {
        config = config.with_history(Some(HistoryConfig::default()));
    }
    let b = Hub::builder().broker(broker).config(config);
    if history {
        b.framer(position_framer)
    } else {
        b
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_through_nats_deliver_every_publication_once_in_order() {
    let Some(nats) = Server::nats() else { return };
    let url = nats.url("nats");
    three_nodes_exactly_once(move || nats_hub(url.clone(), false)).await;
}

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
async fn nats_killed_and_restarted_mid_run() {
    let Some(mut nats) = Server::nats() else {
        return;
    };
    let url = nats.url("nats");
    let (ua, ub) = (url.clone(), url.clone());
    let a = Node::start(move || nats_hub(ua, true), server_config());
    let b = Node::start(move || nats_hub(ub, true), server_config());
    let mut ca = subscriber(a.addr, "t", true).await;
    let mut cb = subscriber(b.addr, "t", false).await;
    until("both nodes subscribed", || {
        a.hub.broker_ready("t") && b.hub.broker_ready("t")
    })
    .await;
    publish_range(&b.hub, 1, 0..10);
    let before = take(&mut ca, 10).await;
    assert_eq!(take(&mut cb, 10).await.len(), 10);
    let old = framed_position(before.last().unwrap()).unwrap();
    assert_eq!(old.offset, 10);
    let mut events = a.hub.events();

    nats.kill();
    until("both nodes saw the loss", || {
        !a.hub.metrics().broker_up && !b.hub.metrics().broker_up
    })
    .await;
    // Local fan-out goes on.
    publish_range(&a.hub, 0, 0..5);
    let local = take(&mut ca, 5).await;
    assert_eq!(framed_position(&local[4]).unwrap().offset, 15);

    nats.start();
    until("both nodes back", || {
        a.hub.metrics().broker_up && b.hub.metrics().broker_up
    })
    .await;
    // The gap is marked: a new epoch in a's ring.
    let changed = loop {
        match tokio::time::timeout(LIMIT, events.recv())
            .await
            .unwrap()
            .unwrap()
        {
            HubEvent::EpochChanged {
                previous, current, ..
            } => break (previous, current),
            _ => continue,
        }
    };
    assert_eq!(changed.0.epoch, old.epoch);
    assert_ne!(changed.1.epoch, old.epoch);
    // Resubscribed: b's publications reach a's client again (publish until one does;
    // the first few may meet the server before it has a's subscription back).
    let mut seq = 10;
    let first = loop {
        publish_range(&b.hub, 1, seq..seq + 1);
        seq += 1;
        if let Ok(got) = tokio::time::timeout(Duration::from_millis(200), take(&mut ca, 1)).await {
            break got;
        }
        assert!(seq < 200, "a never heard from b again");
    };
    let resumed = framed_position(&first[0]).unwrap();
    assert_ne!(
        resumed.epoch, old.epoch,
        "publications after the gap are in the new epoch"
    );
    publish_range(&b.hub, 1, seq..seq + 5);
    let after = take(&mut ca, 5).await;

    // A client with a position from before the gap is told; one from after it recovers
    // exactly what it missed.
    let (_, outcome, _c) = recovering_subscriber(a.addr, "t", old).await;
    assert_eq!(outcome, "epoch-changed");
    let (replayed, outcome, _c) = recovering_subscriber(a.addr, "t", resumed).await;
    assert_eq!(outcome, "recovered 5");
    assert_eq!(replayed, after);
    assert!(a.hub.metrics().broker_disconnects >= 1);
    assert!(a.hub.metrics().epoch_changes >= 1);
}
