//! The hub across nodes through a real Redis Cluster (three masters the test starts on
//! free loopback ports) with sharded pub/sub: topics spread over the shards, every
//! publication delivered once and in order on both nodes with its history offset, the
//! master that owns a topic killed and restarted, with and without its data; and each
//! master restarted empty in turn, twenty times, under steady publishing from three
//! nodes.
mod hub_support;

use std::collections::HashSet;
use std::time::Duration;

use hub_support::*;
use rapidws::hub::{HistoryConfig, Hub, HubConfig, HubEvent, Position, RedisBroker, RedisConfig};
use rapidws::tokio::Message;

const TOPICS: usize = 12;
const PER_NODE: u64 = 5;

type Ws = rapidws::tokio::WebSocket<rapidws::tokio::MaybeTlsStream<tokio::net::TcpStream>>;

fn cluster_hub(nodes: Vec<String>) -> rapidws::hub::HubBuilder {
    let config = RedisConfig::cluster(nodes)
        .with_backoff(Duration::from_millis(50), Duration::from_millis(400));
    let broker = RedisBroker::new(config).unwrap();
    Hub::builder()
        .broker(broker)
        .config(
            HubConfig::default()
                .with_recovery_timeout(Duration::from_secs(10))
                .with_history(Some(HistoryConfig::default().with_capacity(1000))),
        )
        .framer(position_framer)
}

/// Receives `n` publications; returns their texts.
async fn take(ws: &mut Ws, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + LIMIT;
    while out.len() < n {
        match tokio::time::timeout_at(deadline, ws.recv())
            .await
            .unwrap_or_else(|_| panic!("publication timed out after {out:?}"))
        {
            Ok(Some(Message::Text(t))) => out.push(t.as_str().to_string()),
            Ok(Some(_)) => {}
            other => panic!("connection ended: {other:?}"),
        }
    }
    out
}

/// The publication text after the `<offset>@<epoch> ` the framer put first.
fn body(framed: &str) -> &str {
    framed.split_once(' ').map_or(framed, |(_, b)| b)
}

/// Checks what one client got on one topic: offsets `from..` consecutive in one epoch,
/// and each publisher's sequence numbers `seqs` in order, each once.
fn check_topic(got: &[String], from: u64, publishers: &[(u32, std::ops::Range<u64>)]) -> u64 {
    let positions: Vec<Position> = got.iter().map(|t| framed_position(t).unwrap()).collect();
    let epoch = positions[0].epoch;
    for (i, p) in positions.iter().enumerate() {
        assert_eq!(
            *p,
            Position {
                offset: from + i as u64,
                epoch
            },
            "{got:?}"
        );
    }
    for (node, seqs) in publishers {
        let mine: Vec<u64> = got
            .iter()
            .filter_map(|t| parse(body(t)))
            .filter(|(n, _)| n == node)
            .map(|(_, s)| s)
            .collect();
        assert_eq!(
            mine,
            seqs.clone().collect::<Vec<_>>(),
            "node {node}: {got:?}"
        );
    }
    epoch
}

fn publish(hub: &Hub, node: u32, topic: &str, seqs: std::ops::Range<u64>) {
    for s in seqs {
        hub.publish(topic, payload(node, s, 40).as_str()).unwrap();
    }
}

/// Waits for the broker's `want` event ("degraded" or "up"); returns every event received
/// up to it. A broker down (one master away is not that) fails the test.
async fn wait_event(
    events: &mut tokio::sync::broadcast::Receiver<HubEvent>,
    want: &str,
) -> Vec<HubEvent> {
    let deadline = tokio::time::Instant::now() + LIMIT;
    let mut seen = Vec::new();
    loop {
        let e = tokio::time::timeout_at(deadline, events.recv())
            .await
            .unwrap_or_else(|_| panic!("no broker {want} event"))
            .expect("events");
        assert!(
            !matches!(e, HubEvent::BrokerDown { .. }),
            "one master away is not the broker down: {e:?}"
        );
        let hit = matches!(
            (&e, want),
            (HubEvent::BrokerDegraded { .. }, "degraded") | (HubEvent::BrokerUp, "up")
        );
        seen.push(e);
        if hit {
            return seen;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_pubsub_over_a_cluster_with_a_master_restarted() {
    let Some(mut cluster) = RedisCluster::start() else {
        return;
    };
    let topics: Vec<String> = (0..TOPICS).map(|i| format!("room:{i}")).collect();
    // The topics spread over all three shards.
    let owner: Vec<usize> = topics
        .iter()
        .map(|t| cluster.owner(cluster.keyslot(&format!("rapidws:{{{t}}}"))))
        .collect();
    let shards: HashSet<usize> = owner.iter().copied().collect();
    assert_eq!(shards.len(), 3, "owners {owner:?}");

    let urls = cluster.urls();
    let (ua, ub) = (urls.clone(), urls.clone());
    let a = Node::start(move || cluster_hub(ua), server_config());
    let b = Node::start(move || cluster_hub(ub), server_config());
    let mut events_a = a.hub.events();
    let mut events_b = b.hub.events();
    let mut on_a = Vec::new();
    let mut on_b = Vec::new();
    for (i, t) in topics.iter().enumerate() {
        on_a.push(subscriber(a.addr, t, i % 2 == 0).await);
        on_b.push(subscriber(b.addr, t, i % 2 == 1).await);
    }
    until("both nodes subscribed to every topic", || {
        topics
            .iter()
            .all(|t| a.hub.broker_ready(t) && b.hub.broker_ready(t))
    })
    .await;

    // Both nodes publish on every topic: every client gets all of them, once each, in
    // stream order (the same on both nodes), offsets 1.. in one epoch.
    for t in &topics {
        publish(&a.hub, 0, t, 0..PER_NODE);
        publish(&b.hub, 1, t, 0..PER_NODE);
    }
    let mut epochs = Vec::new();
    for i in 0..TOPICS {
        let got_a = take(&mut on_a[i], 2 * PER_NODE as usize).await;
        let got_b = take(&mut on_b[i], 2 * PER_NODE as usize).await;
        assert_eq!(
            got_a, got_b,
            "{}: both nodes deliver in stream order",
            topics[i]
        );
        epochs.push(check_topic(
            &got_a,
            1,
            &[(0, 0..PER_NODE), (1, 0..PER_NODE)],
        ));
    }
    for n in [&a, &b] {
        let m = n.hub.metrics();
        assert_eq!(m.remote_publications, PER_NODE * TOPICS as u64);
        assert_eq!(m.broker_invalid, 0);
        assert_eq!(m.unrecorded, 0);
    }

    // The master that owns topic 0 dies: its topics are reported lost on both nodes (the
    // broker degraded, not down), and a publication on one of them is still delivered
    // locally, without a position. The other masters' topics stay subscribed and go on
    // live, in the same epoch.
    let victim = owner[0];
    let other = (0..TOPICS).find(|&i| owner[i] != victim).unwrap();
    let victims: Vec<&String> = (0..TOPICS)
        .filter(|&i| owner[i] == victim)
        .map(|i| &topics[i])
        .collect();
    cluster.masters[victim].kill();
    wait_event(&mut events_a, "degraded").await;
    wait_event(&mut events_b, "degraded").await;
    until("both nodes report the lost master's topics", || {
        [&a, &b].iter().all(|n| {
            let m = n.hub.metrics();
            !m.broker_up
                && m.broker_lost_topics == victims.len()
                && victims.iter().all(|t| !n.hub.broker_ready(t))
        })
    })
    .await;
    for (i, t) in topics.iter().enumerate() {
        if owner[i] != victim {
            assert!(a.hub.broker_ready(t) && b.hub.broker_ready(t), "{t}");
        }
    }
    publish(&a.hub, 0, &topics[0], PER_NODE..PER_NODE + 1);
    let local = take(&mut on_a[0], 1).await;
    assert!(local[0].starts_with("-@- "), "{local:?}");
    publish(&b.hub, 1, &topics[other], 100..101);
    let live = take(&mut on_a[other], 1).await;
    assert_eq!(take(&mut on_b[other], 1).await, live);
    assert_eq!(
        framed_position(&live[0]).unwrap(),
        Position {
            offset: 2 * PER_NODE + 1,
            epoch: epochs[other]
        }
    );

    // Back with its data: both nodes come up again, every topic subscribed again, and
    // the numbering goes on in the same epoch on the restarted shard and on the others.
    cluster.masters[victim].start();
    wait_event(&mut events_a, "up").await;
    wait_event(&mut events_b, "up").await;
    until("every topic subscribed again", || {
        topics
            .iter()
            .all(|t| a.hub.broker_ready(t) && b.hub.broker_ready(t))
    })
    .await;
    assert!(a.hub.metrics().broker_disconnects >= 1);
    assert!(a.hub.metrics().broker_up && b.hub.metrics().broker_up);
    for (i, from) in [(0, 2 * PER_NODE + 1), (other, 2 * PER_NODE + 2)] {
        publish(&b.hub, 1, &topics[i], PER_NODE..PER_NODE + 3);
        let got_a = take(&mut on_a[i], 3).await;
        let got_b = take(&mut on_b[i], 3).await;
        assert_eq!(got_a, got_b);
        assert_eq!(
            check_topic(&got_a, from, &[(1, PER_NODE..PER_NODE + 3)]),
            epochs[i],
            "{}: data retained, same epoch",
            topics[i]
        );
    }
    // A client that saw up to offset 10 of topic 0 comes back: exactly the three it
    // missed, then live ones.
    let seen = Position {
        offset: 2 * PER_NODE,
        epoch: epochs[0],
    };
    let (replayed, outcome, _c) = recovering_subscriber(a.addr, &topics[0], seen).await;
    assert_eq!(outcome, "recovered 3");
    assert_eq!(replayed.len(), 3);
    assert_eq!(
        framed_position(&replayed[2]).unwrap().offset,
        2 * PER_NODE + 3
    );

    // Killed again and back empty: the epoch of its topics marks the gap; the other
    // shards' topics keep theirs.
    // Both nodes must see the loss and the return: a node that had not noticed it yet
    // would still look subscribed, and what it missed meanwhile went into the epoch that
    // the wipe ends (it is told so, but its plain subscriber here would wait in vain).
    while events_a.try_recv().is_ok() {}
    while events_b.try_recv().is_ok() {}
    cluster.masters[victim].kill();
    wait_event(&mut events_a, "degraded").await;
    let mut seen_b = wait_event(&mut events_b, "degraded").await;
    cluster.masters[victim].wipe_aof();
    cluster.masters[victim].start();
    wait_event(&mut events_a, "up").await;
    seen_b.extend(wait_event(&mut events_b, "up").await);
    until("every topic subscribed again", || {
        topics
            .iter()
            .all(|t| a.hub.broker_ready(t) && b.hub.broker_ready(t))
    })
    .await;
    publish(&a.hub, 0, &topics[0], 100..101);
    let fresh = take(&mut on_b[0], 1).await;
    let now = framed_position(&fresh[0]).unwrap();
    assert_ne!(now.epoch, epochs[0], "a new epoch");
    assert_eq!(now.offset, 1);
    // B said so: when its catch-up found the history gone, or when the fresh
    // publication came first.
    let mut seen_b = seen_b.into_iter();
    loop {
        let e = match seen_b.next() {
            Some(e) => e,
            None => tokio::time::timeout(LIMIT, events_b.recv())
                .await
                .expect("an epoch change on B")
                .unwrap(),
        };
        if let HubEvent::EpochChanged {
            topic,
            previous,
            current,
        } = e
            && &*topic == topics[0].as_str()
        {
            assert_eq!(previous.epoch, epochs[0]);
            let gone = Position {
                offset: 0,
                epoch: 0,
            };
            assert!(current == now || current == gone, "{current:?}");
            break;
        }
    }
    let (_, outcome, _c) = recovering_subscriber(b.addr, &topics[0], seen).await;
    assert_eq!(outcome, "epoch-changed");
    publish(&a.hub, 0, &topics[other], 100..101);
    let kept = take(&mut on_b[other], 1).await;
    assert_eq!(
        framed_position(&kept[0]).unwrap(),
        Position {
            offset: 2 * PER_NODE + 5,
            epoch: epochs[other]
        }
    );
    // Nothing came twice: the next message on topic 0 at A is the new one.
    let next_a = tokio::time::timeout(Duration::from_secs(20), take(&mut on_a[0], 1))
        .await
        .unwrap_or_else(|_| panic!("A never got its own publication: {:?}", a.hub.metrics()));
    assert_eq!(next_a, fresh);
    assert_eq!(a.hub.metrics().broker_invalid, 0);
}

/// Restarts of [`each_master_restarted_empty_in_turn`].
const RESTARTS: usize = 20;
/// How long after a master's restart every node must report every topic subscribed again
/// and have received, on every topic, a recorded publication from every node made after
/// that. A master restarted empty serves its slots again after Redis's 2 s writable
/// delay; a round takes about 3 s here, and this bounds it on a loaded 2-core machine.
const RESUME: Duration = Duration::from_secs(30);

/// What one WebSocket client received, in order, shared with the test.
type Inbox = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

fn spawn_inbox(mut ws: Ws) -> Inbox {
    let inbox: Inbox = Default::default();
    let i = inbox.clone();
    tokio::spawn(async move {
        while let Ok(Some(m)) = ws.recv().await {
            if let Message::Text(t) = m {
                i.lock().unwrap().push(t.as_str().to_string());
            }
        }
    });
    inbox
}

/// Every event of `hub` from now on, in order (the test fails if it fell behind).
fn spawn_events(hub: &Hub) -> std::sync::Arc<std::sync::Mutex<Vec<HubEvent>>> {
    let log: std::sync::Arc<std::sync::Mutex<Vec<HubEvent>>> = Default::default();
    let (l, mut rx) = (log.clone(), hub.events());
    tokio::spawn(async move {
        loop {
            match rx.recv().await {
                Ok(e) => l.lock().unwrap().push(e),
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    panic!("{n} hub events missed")
                }
                Err(_) => return,
            }
        }
    });
    log
}

/// What the test knows of one client: how far it has checked the inbox, the last recorded
/// position seen, the epochs it saw change (old, new) in the current round, and the
/// latest sequence number of each publisher among the recorded publications.
#[derive(Default)]
struct Cursor {
    read: usize,
    last: Option<Position>,
    changes: Vec<(u64, u64)>,
    latest: Vec<u64>,
}

/// Checks what arrived since `c` last looked: recorded publications numbered one after
/// another within each epoch (a gap would be a loss nobody reported); epoch changes are
/// collected for the round's checks.
fn read_inbox(inbox: &Inbox, c: &mut Cursor, what: &str) {
    let got = inbox.lock().unwrap();
    for m in &got[c.read..] {
        let Some(p) = framed_position(m) else {
            // Delivered locally, unrecorded (its master was away): no position.
            assert!(m.starts_with("-@- "), "{what}: {m}");
            continue;
        };
        match c.last {
            Some(l) if l.epoch == p.epoch => {
                assert_eq!(
                    p.offset,
                    l.offset + 1,
                    "{what}: unreported gap {l:?} -> {p:?}"
                )
            }
            Some(l) => c.changes.push((l.epoch, p.epoch)),
            None => {}
        }
        c.last = Some(p);
        if let Some((node, seq)) = parse(body(m)) {
            let node = node as usize;
            if c.latest.len() <= node {
                c.latest.resize(node + 1, 0);
            }
            c.latest[node] = c.latest[node].max(seq);
        }
    }
    c.read = got.len();
}

/// Six topics, two on each master (by the slot of the key the broker uses), and the
/// master of each.
fn two_topics_per_master(cluster: &RedisCluster) -> (Vec<String>, Vec<usize>) {
    let mut topics: Vec<String> = Vec::new();
    let mut owner: Vec<usize> = Vec::new();
    for i in 0.. {
        let t = format!("room:{i}");
        let o = cluster.owner(cluster.keyslot(&format!("rapidws:{{{t}}}")));
        if owner.iter().filter(|&&x| x == o).count() < 2 {
            topics.push(t);
            owner.push(o);
        }
        if topics.len() == 6 {
            break;
        }
    }
    (topics, owner)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_master_restarted_empty_in_turn() {
    const NODES: usize = 3;
    let Some(mut cluster) = RedisCluster::start() else {
        return;
    };
    let began = std::time::Instant::now();
    let (topics, owner) = two_topics_per_master(&cluster);
    let urls = cluster.urls();
    let nodes: Vec<Node> = (0..NODES)
        .map(|_| {
            let u = urls.clone();
            Node::start(move || cluster_hub(u), server_config())
        })
        .collect();
    let events: Vec<_> = nodes.iter().map(|n| spawn_events(&n.hub)).collect();
    let mut inboxes: Vec<Vec<(Inbox, Cursor)>> = Vec::new();
    for n in &nodes {
        let mut row = Vec::new();
        for t in &topics {
            row.push((
                spawn_inbox(subscriber(n.addr, t, false).await),
                Cursor::default(),
            ));
        }
        inboxes.push(row);
    }
    until("every node subscribed to every topic", || {
        nodes
            .iter()
            .all(|n| n.hub.metrics().broker_up && topics.iter().all(|t| n.hub.broker_ready(t)))
    })
    .await;
    // Every node publishes on every topic every 50 ms, throughout.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seqs: Vec<std::sync::Arc<std::sync::atomic::AtomicU64>> =
        (0..NODES).map(|_| Default::default()).collect();
    let publishers: Vec<_> = nodes
        .iter()
        .enumerate()
        .map(|(k, n)| {
            let (hub, topics, stop, seq) =
                (n.hub.clone(), topics.clone(), stop.clone(), seqs[k].clone());
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let s = seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    for t in &topics {
                        hub.publish(t, payload(k as u32, s, 8).as_str()).unwrap();
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
            })
        })
        .collect();
    // Every client has a recorded publication (an epoch to see change) before the first.
    let mut waited = 0;
    while inboxes.iter().flatten().any(|(inbox, _)| {
        !inbox
            .lock()
            .unwrap()
            .iter()
            .any(|m| framed_position(m).is_some())
    }) {
        assert!(
            waited < 6000,
            "no recorded publication reached every client"
        );
        waited += 1;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut slowest = Duration::ZERO;
    for round in 0..RESTARTS {
        let victim = round % 3;
        let victims: HashSet<&str> = (0..topics.len())
            .filter(|&j| owner[j] == victim)
            .map(|j| topics[j].as_str())
            .collect();
        let seen: Vec<usize> = events.iter().map(|e| e.lock().unwrap().len()).collect();
        // Down for no time, a little, or a while: the nodes may notice before or after
        // it is back.
        let down = [0, 200, 700][(round / 3) % 3];
        cluster.masters[victim].kill();
        tokio::time::sleep(Duration::from_millis(down)).await;
        cluster.masters[victim].wipe_aof();
        cluster.masters[victim].start();
        let restarted = std::time::Instant::now();
        // Every node noticed, and reports every topic subscribed again.
        let reported = |k: usize| {
            events[k].lock().unwrap()[seen[k]..]
                .iter()
                .any(|e| matches!(e, HubEvent::BrokerDegraded { .. }))
        };
        while !(0..NODES).all(|k| {
            let n = &nodes[k].hub;
            reported(k) && n.metrics().broker_up && topics.iter().all(|t| n.broker_ready(t))
        }) {
            assert!(
                restarted.elapsed() < RESUME,
                "round {round}: not every node up again within {RESUME:?}: {:?}",
                nodes.iter().map(|n| n.hub.metrics()).collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Delivery resumed: each client gets, from every node, a recorded publication
        // made after every node reported up.
        let after: Vec<u64> = seqs
            .iter()
            .map(|s| s.load(std::sync::atomic::Ordering::Relaxed) + 1)
            .collect();
        loop {
            let mut behind = Vec::new();
            for (k, row) in inboxes.iter_mut().enumerate() {
                for (j, (inbox, cursor)) in row.iter_mut().enumerate() {
                    read_inbox(inbox, cursor, &format!("node {k}, {}", topics[j]));
                    for (p, &a) in after.iter().enumerate() {
                        if cursor.latest.get(p).is_none_or(|&s| s < a) {
                            behind.push((k, topics[j].clone(), p));
                        }
                    }
                }
            }
            if behind.is_empty() {
                break;
            }
            assert!(
                restarted.elapsed() < RESUME,
                "round {round}: delivery did not resume within {RESUME:?} for (node, topic, \
                 publisher) {behind:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        slowest = slowest.max(restarted.elapsed());
        // Every loss was reported, and only the victim's: each node said which topics it
        // lost (all of the victim's, no other), and each epoch a client saw change is the
        // victim's, announced by that node.
        for k in 0..NODES {
            let log = events[k].lock().unwrap();
            let round_events = &log[seen[k]..];
            let mut lost: HashSet<&str> = HashSet::new();
            for e in round_events {
                match e {
                    HubEvent::BrokerDegraded { topics: t, .. } => {
                        lost.extend(t.iter().map(|t| &**t))
                    }
                    HubEvent::BrokerDown { reason } => {
                        panic!("round {round}, node {k}: down ({reason}) with two masters up")
                    }
                    HubEvent::EpochChanged { topic, .. } => assert!(
                        victims.contains(&**topic),
                        "round {round}, node {k}: epoch of {topic} changed"
                    ),
                    _ => {}
                }
            }
            assert_eq!(
                lost, victims,
                "round {round}, node {k}: topics reported lost"
            );
            for (j, (_, cursor)) in inboxes[k].iter_mut().enumerate() {
                let t = topics[j].as_str();
                for &(old, new) in &cursor.changes {
                    assert!(
                        victims.contains(t),
                        "round {round}, node {k}: {t} {old} -> {new}"
                    );
                    let announced = round_events.iter().any(|e| {
                        matches!(e, HubEvent::EpochChanged { topic, previous, .. }
                            if &**topic == t && previous.epoch == old)
                    });
                    assert!(
                        announced,
                        "round {round}, node {k}: {t} {old} -> {new} unannounced"
                    );
                }
                // Emptied: the numbering of the victim's topics restarted, which the
                // clients saw.
                if victims.contains(t) {
                    assert!(
                        !cursor.changes.is_empty(),
                        "round {round}, node {k}: {t} kept its epoch through an empty restart"
                    );
                }
                cursor.changes.clear();
            }
        }
        eprintln!(
            "round {round}: master {victim} down {down} ms, every node delivering again {:?} \
             after its restart",
            restarted.elapsed()
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for p in publishers {
        p.join().unwrap();
    }
    for n in &nodes {
        assert_eq!(n.hub.metrics().broker_invalid, 0);
    }
    eprintln!(
        "{RESTARTS} empty restarts in {:?}; slowest recovery {slowest:?} (bound {RESUME:?})",
        began.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_move_and_a_failover_keep_every_topic_delivered() {
    let Some(cluster) = RedisCluster::start() else {
        return;
    };
    let (topics, owner) = two_topics_per_master(&cluster);
    let urls = cluster.urls();
    let (ua, ub) = (urls.clone(), urls);
    let a = Node::start(move || cluster_hub(ua), server_config());
    let b = Node::start(move || cluster_hub(ub), server_config());
    let mut events_a = a.hub.events();
    let mut events_b = b.hub.events();
    let mut on_a = Vec::new();
    let mut on_b = Vec::new();
    for t in &topics {
        on_a.push(subscriber(a.addr, t, false).await);
        on_b.push(subscriber(b.addr, t, true).await);
    }
    until("both nodes subscribed to every topic", || {
        topics
            .iter()
            .all(|t| a.hub.broker_ready(t) && b.hub.broker_ready(t))
    })
    .await;
    // Offset 1 on every topic; the epochs the data moves with.
    let mut epochs = Vec::new();
    for (i, t) in topics.iter().enumerate() {
        publish(&a.hub, 0, t, 0..1);
        let got = take(&mut on_a[i], 1).await;
        assert_eq!(take(&mut on_b[i], 1).await, got);
        epochs.push(check_topic(&got, 1, &[(0, 0..1)]));
    }
    // Publishes `seq` on topic `i` from B; both nodes get it at `offset`, in the epoch the
    // topic had.
    async fn next(
        (a, b): (&mut Vec<Ws>, &mut Vec<Ws>),
        hub: &Hub,
        topic: &str,
        i: usize,
        (seq, offset, epoch): (u64, u64, u64),
    ) {
        publish(hub, 1, topic, seq..seq + 1);
        let got = take(&mut a[i], 1).await;
        assert_eq!(take(&mut b[i], 1).await, got);
        assert_eq!(
            framed_position(&got[0]).unwrap(),
            Position { offset, epoch },
            "{topic}"
        );
    }

    // The slot of topic 0 moves, with its stream, to another master: both nodes lose that
    // topic (the old master drops its channel), report it, subscribe it at the new owner
    // and go on in the same epoch. The other topics are never lost.
    let slot = cluster.keyslot(&format!("rapidws:{{{}}}", topics[0]));
    let to = (owner[0] + 1) % 3;
    cluster.move_slot(slot, owner[0], to);
    for events in [&mut events_a, &mut events_b] {
        let seen = wait_event(events, "degraded").await;
        let Some(HubEvent::BrokerDegraded { topics: lost, .. }) = seen.last() else {
            unreachable!()
        };
        assert_eq!(lost.iter().map(|t| &**t).collect::<Vec<_>>(), [&*topics[0]]);
        wait_event(events, "up").await;
    }
    until("topic 0 subscribed at its new master", || {
        a.hub.broker_ready(&topics[0]) && b.hub.broker_ready(&topics[0])
    })
    .await;
    assert_eq!(cluster.owner(slot), to);
    next(
        (&mut on_a, &mut on_b),
        &b.hub,
        &topics[0],
        0,
        (1, 2, epochs[0]),
    )
    .await;

    // A replica of the master of topic 2 takes over (manual failover: a new node id and
    // address for its slots; the old master stays up, as a replica): both nodes report
    // that master's topics lost, subscribe them at the new master, and go on in the same
    // epochs (the data was replicated).
    let failing = owner[2];
    let replica = cluster.add_replica(failing);
    cluster.failover(&replica);
    // Topic 0 lives where its slot moved to.
    let moved: HashSet<&str> = (0..topics.len())
        .filter(|&i| {
            if i == 0 {
                to == failing
            } else {
                owner[i] == failing
            }
        })
        .map(|i| topics[i].as_str())
        .collect();
    for events in [&mut events_a, &mut events_b] {
        let mut lost: HashSet<String> = HashSet::new();
        while !moved.iter().all(|t| lost.contains(*t)) {
            for e in wait_event(events, "degraded").await {
                if let HubEvent::BrokerDegraded { topics, .. } = e {
                    lost.extend(topics.iter().map(|t| t.to_string()));
                }
            }
        }
        assert_eq!(
            lost.iter().map(|t| t.as_str()).collect::<HashSet<_>>(),
            moved
        );
    }
    until("every topic subscribed again", || {
        [&a, &b]
            .iter()
            .all(|n| n.hub.metrics().broker_up && topics.iter().all(|t| n.hub.broker_ready(t)))
    })
    .await;
    for (i, t) in topics.iter().enumerate() {
        let offset = if i == 0 { 3 } else { 2 };
        next((&mut on_a, &mut on_b), &b.hub, t, i, (2, offset, epochs[i])).await;
    }
    for n in [&a, &b] {
        let m = n.hub.metrics();
        assert_eq!(m.epoch_changes, 0, "nothing was lost: {m:?}");
        assert_eq!(m.broker_invalid, 0);
    }
}
