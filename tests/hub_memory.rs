//! The hub on one node and across hubs of one process (the in-memory broker), with real
//! WebSocket clients on loopback: fan-out, exclusion, slow consumers, history recovery
//! and bad broker input.
mod hub_support;
mod tap_support;

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use hub_support::*;
use rapidws::hub::{
    Broker, HistoryConfig, Hub, HubConfig, Link, MemoryBroker, Position, Recovery, SlowConsumer,
    Topic,
};
use rapidws::tokio::{Config, Message, ServerConfig, client_handshake};
use tokio::net::TcpSocket;

async fn bounded<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(LIMIT, f)
        .await
        .expect("test step timed out")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_reaches_every_subscriber_once_except_the_publisher() {
    let node = Node::start(Hub::builder, server_config());
    let mut a = subscriber(node.addr, "room", true).await;
    let mut b = subscriber(node.addr, "room", false).await;
    let mut other = subscriber(node.addr, "elsewhere", false).await;
    until("3 subscribers", || {
        let m = node.hub.metrics();
        m.subscribers("room") == 2 && m.subscribers("elsewhere") == 1
    })
    .await;
    // From a connection: everyone on the topic but the publisher.
    a.send(Message::text("pub hello")).await.unwrap();
    assert_eq!(
        bounded(b.recv()).await.unwrap(),
        Some(Message::text("hello"))
    );
    // From the server: everyone.
    node.hub.publish("room", "to all").unwrap();
    assert_eq!(
        bounded(a.recv()).await.unwrap(),
        Some(Message::text("to all"))
    );
    assert_eq!(
        bounded(b.recv()).await.unwrap(),
        Some(Message::text("to all"))
    );
    // Nothing else arrived anywhere: the next message each sees is a marker.
    node.hub.publish("elsewhere", "marker").unwrap();
    assert_eq!(
        bounded(other.recv()).await.unwrap(),
        Some(Message::text("marker"))
    );
    node.hub.publish("room", "marker").unwrap();
    assert_eq!(
        bounded(a.recv()).await.unwrap(),
        Some(Message::text("marker"))
    );
    assert_eq!(
        bounded(b.recv()).await.unwrap(),
        Some(Message::text("marker"))
    );
    let m = node.hub.metrics();
    assert_eq!(m.publications, 4);
    assert_eq!(m.deliveries, 6);
    // Closing a connection leaves its topics.
    a.close(1000, "").await.unwrap();
    until("a left", || node.hub.metrics().subscribers("room") == 1).await;
    assert!(
        node.hub
            .metrics()
            .to_prometheus()
            .contains("rapidws_hub_subscribers{topic=\"room\"} 1")
    );
    assert!(matches!(
        node.hub.publish("bad topic", "x"),
        Err(rapidws::hub::HubError::InvalidTopic)
    ));
}

/// A client whose socket buffers are small and that never reads.
async fn stuck_client(
    addr: std::net::SocketAddr,
) -> rapidws::tokio::WebSocket<tokio::net::TcpStream> {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let stream = socket.connect(addr).await.unwrap();
    let mut ws = client_handshake(stream, &addr.to_string(), "/t", &client_config(false))
        .await
        .unwrap();
    let first = bounded(ws.recv()).await.unwrap();
    assert_eq!(first, Some(Message::text("ready")));
    ws
}

/// The two 1,000-subscriber runs one at a time: together on two cores they would measure
/// the machine, not the hub.
static HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn slow_consumers(policy: SlowConsumer) {
    let _one_at_a_time = HEAVY.lock().await;
    raise_fd_limit();
    const READERS: usize = 900;
    const STUCK: usize = 100;
    const PUBLICATIONS: u64 = 400;
    // Far above what a reader that the machine starves for a few milliseconds falls
    // behind (the readers share the test's two cores with the server), far below the
    // 360 KB each stuck subscriber is sent: only the stuck ones reach it.
    const HIGH_WATER: usize = 128 << 10;
    // Without the send timeout (30 s): the Drop policy keeps a stuck subscriber, and on a
    // loaded machine the run may last long enough for the send timeout to close the
    // stuck ones, which is tested in tests/send_timeout.rs.
    let server = server_config().with_connection(
        Config::default()
            .with_send_queue_high_water(HIGH_WATER)
            .with_send_timeout(None),
    );
    let config = HubConfig::default().with_slow_consumer(policy.clone());
    let node = Node::start_with(move || Hub::builder().config(config), server, Some(8 << 10));
    let done = Arc::new(AtomicUsize::new(0));
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let mut readers = Vec::new();
    for i in 0..READERS {
        let ws = subscriber(node.addr, "t", i % 2 == 0).await;
        let want = PUBLICATIONS as usize;
        readers.push(tokio::spawn(collect_then(
            ws,
            want,
            done.clone(),
            stop.clone(),
            true,
        )));
    }
    let mut stuck = Vec::new();
    for _ in 0..STUCK {
        stuck.push(stuck_client(node.addr).await);
    }
    until("1,000 subscribers", || {
        node.hub.metrics().subscribers("t") == READERS + STUCK
    })
    .await;
    let started = std::time::Instant::now();
    let mut max_queued = 0;
    for seq in 0..PUBLICATIONS {
        node.hub
            .publish("t", payload(0, seq, 900).as_str())
            .unwrap();
        if seq % 4 == 0 {
            // Let the readers' tasks run; the stuck ones fall behind.
            tokio::time::sleep(Duration::from_millis(1)).await;
            max_queued = max_queued.max(node.hub.metrics().queued_bytes);
        }
    }
    until("every reader has everything", || {
        done.load(std::sync::atomic::Ordering::Relaxed) == READERS
    })
    .await;
    let elapsed = started.elapsed();
    let m = node.hub.metrics();
    let left = m.subscribers("t");
    stop_tx.send(true).unwrap();
    for r in readers {
        let seen = bounded(r).await.unwrap();
        check_sequence(&seen.per_publisher[&0], PUBLICATIONS, true).unwrap();
    }
    eprintln!(
        "slow consumers ({policy:?}): {READERS} readers got {PUBLICATIONS} each in {elapsed:?}; \
         dropped {}, closed {}, max queued {max_queued} B",
        m.dropped, m.closed_slow
    );
    // Memory: every queue stays within its high-water mark plus one message.
    let bound = (READERS + STUCK) as u64 * (HIGH_WATER as u64 + 1024);
    assert!(max_queued <= bound, "queued {max_queued} > {bound}");
    match policy {
        SlowConsumer::Drop => {
            assert!(
                m.dropped > 0,
                "the stuck subscribers' deliveries were dropped"
            );
            assert_eq!(m.closed_slow, 0);
            assert_eq!(left, READERS + STUCK);
            assert_eq!(
                m.deliveries + m.dropped,
                (READERS + STUCK) as u64 * PUBLICATIONS
            );
        }
        SlowConsumer::Close { .. } => {
            assert_eq!(
                m.closed_slow, STUCK as u64,
                "every stuck subscriber was closed"
            );
            assert_eq!(m.dropped, 0);
            assert_eq!(left, READERS, "the closed ones left the topic");
        }
        _ => unreachable!(),
    }
    drop(stuck);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_consumers_are_dropped_and_counted_while_the_others_get_everything() {
    slow_consumers(SlowConsumer::Drop).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_consumers_are_closed_with_1013_while_the_others_get_everything() {
    slow_consumers(SlowConsumer::close_try_again_later("too slow")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_slow_consumer_receives_its_close_code() {
    // One subscriber stops reading, then reads again after it was shed: what it gets
    // ends with our close frame, code 1013.
    let server =
        server_config().with_connection(Config::default().with_send_queue_high_water(4 << 10));
    let config =
        HubConfig::default().with_slow_consumer(SlowConsumer::close_try_again_later("behind"));
    let node = Node::start(move || Hub::builder().config(config), server);
    let mut ws = stuck_client(node.addr).await;
    until("subscribed", || node.hub.metrics().subscribers("t") == 1).await;
    let mut n = 0;
    while node.hub.metrics().closed_slow == 0 {
        node.hub.publish("t", payload(0, n, 1000).as_str()).unwrap();
        n += 1;
        assert!(n < 100_000, "never shed");
        if n % 64 == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    let code = loop {
        match bounded(ws.recv()).await {
            Ok(Some(Message::Close(Some(c)))) => break c.code,
            Ok(Some(_)) => {}
            other => panic!("expected our close, got {other:?}"),
        }
    };
    assert_eq!(code, 1013);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hubs_on_one_memory_bus_deliver_every_publication_once_in_order() {
    const NODES: u32 = 3;
    const PER_NODE: usize = 20;
    const PUBLICATIONS: u64 = 200;
    let bus = MemoryBroker::new();
    let nodes: Vec<Node> = (0..NODES)
        .map(|_| {
            let b = bus.connect();
            Node::start(move || Hub::builder().broker(b), server_config())
        })
        .collect();
    let done = Arc::new(AtomicUsize::new(0));
    let (_stop_tx, stop) = tokio::sync::watch::channel(false);
    let mut clients = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        for j in 0..PER_NODE {
            let ws = subscriber(node.addr, "t", (i + j) % 2 == 0).await;
            let want = (PUBLICATIONS * u64::from(NODES)) as usize;
            clients.push(tokio::spawn(collect(ws, want, done.clone(), stop.clone())));
        }
    }
    until("interest everywhere", || {
        nodes.iter().all(|n| n.hub.broker_ready("t"))
    })
    .await;
    // Publishers on every node at once.
    let publishers: Vec<_> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let hub = n.hub.clone();
            std::thread::spawn(move || {
                for seq in 0..PUBLICATIONS {
                    hub.publish("t", payload(i as u32, seq, 100).as_str())
                        .unwrap();
                }
            })
        })
        .collect();
    for p in publishers {
        p.join().unwrap();
    }
    for c in clients {
        let seen = bounded(c).await.unwrap();
        for n in 0..NODES {
            check_sequence(&seen.per_publisher[&n], PUBLICATIONS, true).unwrap();
        }
    }
    for n in &nodes {
        let m = n.hub.metrics();
        assert_eq!(m.publications, PUBLICATIONS);
        assert_eq!(m.remote_publications, PUBLICATIONS * u64::from(NODES - 1));
        assert_eq!(
            m.deliveries,
            PER_NODE as u64 * PUBLICATIONS * u64::from(NODES)
        );
    }
}

/// Recovery with the node's ring: what a client missed, exactly; or why not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_recovers_exactly_what_it_missed_from_the_ring() {
    let config =
        HubConfig::default().with_history(Some(HistoryConfig::default().with_capacity(50)));
    // The framer puts the position in front of the payload: "<offset>@<epoch> <payload>".
    let hub = Hub::builder()
        .config(config)
        .framer(|p| {
            let pos = p.position?;
            let text = format!(
                "{}@{} {}",
                pos.offset,
                pos.epoch,
                std::str::from_utf8(p.payload).ok()?
            );
            Some(rapidws::PreparedMessage::text(&text))
        })
        .build()
        .unwrap();
    let (l, addr) = {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = l.local_addr().unwrap();
        (l, a)
    };
    let server_hub = hub.clone();
    let (since_tx, mut since_rx) =
        tokio::sync::mpsc::unbounded_channel::<(Position, tokio::sync::oneshot::Sender<Recovery>)>(
        );
    tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        let (mut rd, wr) = rapidws::tokio::accept(s, &ServerConfig::default())
            .await
            .unwrap()
            .into_split();
        let member = server_hub.join(wr);
        let (since, reply) = since_rx.recv().await.unwrap();
        let r = member.subscribe_from("t", since).await.unwrap();
        reply.send(r).unwrap();
        while let Ok(Some(_)) = rd.recv().await {}
    });
    for i in 0..30 {
        hub.publish("t", format!("m{i}")).unwrap();
    }
    let top = hub.position("t").await.unwrap();
    assert_eq!(top.offset, 30);
    let mut ws = rapidws::tokio::connect(&format!("ws://{addr}/"), &client_config(false))
        .await
        .unwrap();
    // The client saw up to offset 20.
    let (tx, rx) = tokio::sync::oneshot::channel();
    since_tx
        .send((
            Position {
                offset: 20,
                epoch: top.epoch,
            },
            tx,
        ))
        .unwrap();
    let r = bounded(rx).await.unwrap();
    assert_eq!(
        r,
        Recovery::Recovered {
            replayed: 10,
            position: top
        }
    );
    hub.publish("t", "live").unwrap();
    for i in 21..=30 {
        let got = bounded(ws.recv()).await.unwrap();
        assert_eq!(
            got,
            Some(Message::text(format!("{i}@{} m{}", top.epoch, i - 1)))
        );
    }
    assert_eq!(
        bounded(ws.recv()).await.unwrap(),
        Some(Message::text(format!("31@{} live", top.epoch)))
    );
    ws.close(1000, "").await.unwrap();
}

#[tokio::test]
async fn recovery_says_when_the_epoch_changed_or_the_history_was_trimmed() {
    let config = HubConfig::default().with_history(Some(HistoryConfig::default().with_capacity(5)));
    let hub = Hub::builder().config(config).build().unwrap();
    let (l, addr) = {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = l.local_addr().unwrap();
        (l, a)
    };
    let client = tokio::spawn(async move {
        rapidws::tokio::connect(&format!("ws://{addr}/"), &client_config(false))
            .await
            .unwrap()
    });
    let (s, _) = l.accept().await.unwrap();
    let (_rd, wr) = rapidws::tokio::accept(s, &ServerConfig::default())
        .await
        .unwrap()
        .into_split();
    let _ws = client.await.unwrap();
    let member = hub.join(wr);
    for i in 0..20 {
        hub.publish("t", format!("m{i}")).unwrap();
    }
    let top = hub.position("t").await.unwrap();
    let r = member
        .subscribe_from(
            "t",
            Position {
                offset: 3,
                epoch: top.epoch ^ 1,
            },
        )
        .await
        .unwrap();
    assert_eq!(r, Recovery::EpochChanged { position: top });
    let r = member
        .subscribe_from(
            "t",
            Position {
                offset: 3,
                epoch: top.epoch,
            },
        )
        .await
        .unwrap();
    assert_eq!(r, Recovery::Trimmed { position: top });
    let r = member
        .subscribe_from(
            "t",
            Position {
                offset: 20,
                epoch: top.epoch,
            },
        )
        .await
        .unwrap();
    assert_eq!(
        r,
        Recovery::Recovered {
            replayed: 0,
            position: top
        }
    );
    assert_eq!(hub.metrics().subscribers("t"), 1);
}

/// A broker that hands us its link, to feed the hub what a hostile broker might.
#[derive(Clone, Default)]
struct Capture(Arc<OnceLock<Link>>);

impl Broker for Capture {
    fn start(&self, link: Link) {
        let _ = self.0.set(link);
    }
    fn interest_changed(&self) {
        if let Some(l) = self.0.get() {
            let i = l.take_interest(usize::MAX);
            l.subscribed(&i.subscribe);
        }
    }
    fn publish(&self, _: &Topic, _: Bytes) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_broker_input_is_dropped_and_counted() {
    let capture = Capture::default();
    let b = capture.clone();
    let config = HubConfig::default().with_max_message_size(64);
    let node = Node::start(
        move || Hub::builder().broker(b).config(config),
        server_config(),
    );
    let mut ws = subscriber(node.addr, "t", false).await;
    let link = capture.0.get().unwrap().clone();
    let hostile: Vec<Bytes> = vec![
        Bytes::new(),
        Bytes::from_static(b"garbage"),
        Bytes::from_static(b"rw1 0000000000000001 t - - -"),
        Bytes::from_static(b"rw1 0000000000000001 t - - -\n\xff\xfe"),
        Bytes::from(format!("rw1 0000000000000001 b - - -\n{}", "x".repeat(65))),
        Bytes::from_static(b"rw1 0000000000000001 t - 12 \nx"),
    ];
    let n = hostile.len() as u64;
    for h in hostile {
        link.deliver("t", h);
    }
    link.deliver(
        "t",
        Bytes::from_static(b"rw1 0000000000000001 t - - -\nfine"),
    );
    assert_eq!(
        bounded(ws.recv()).await.unwrap(),
        Some(Message::text("fine"))
    );
    let m = node.hub.metrics();
    assert_eq!(m.broker_invalid, n);
    assert_eq!(m.remote_publications, 1);
}

/// A prepared message published with `Compression::Never` reaches a subscriber that
/// agreed permessage-deflate with RSV1 clear (also when the hub frames it again for its
/// position in the history ring), and the compressed publications after it still inflate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_published_prepared_message_keeps_its_choice_of_compression() {
    use rapidws::{Compression, PreparedMessage};
    for history in [false, true] {
        let config = if history {
            HubConfig::default().with_history(Some(HistoryConfig::default().with_capacity(50)))
        } else {
            HubConfig::default()
        };
        let node = Node::start(move || Hub::builder().config(config), server_config());
        let relay = tap_support::tap(node.addr);
        let mut ws = subscriber(relay.addr, "room", true).await;
        until("subscribed", || node.hub.metrics().subscribers("room") == 1).await;
        let text = "{\"sym\":\"ACME\",\"bid\":101.25,\"ask\":101.5}".repeat(20);
        let plain = PreparedMessage::text(&text).with_compression(Compression::Never);
        node.hub.publish("room", plain).unwrap();
        node.hub
            .publish("room", PreparedMessage::text(&text))
            .unwrap();
        node.hub.publish("room", text.as_str()).unwrap();
        for _ in 0..3 {
            assert_eq!(
                bounded(ws.recv()).await.unwrap(),
                Some(Message::text(text.as_str()))
            );
        }
        let rsv1: Vec<bool> = tap_support::messages(&relay.down.lock().unwrap())
            .iter()
            .map(|m| m.rsv1)
            .collect();
        // "ready" (short: uncompressed), then the three publications.
        assert_eq!(rsv1, [false, false, true, true], "history {history}");
        bounded(ws.close(1000, "")).await.unwrap();
    }
}

/// A broker that confirms every subscription and records the topics the hub gives up.
#[derive(Clone, Default)]
struct Recording {
    link: Arc<OnceLock<Link>>,
    unsubscribed: Arc<std::sync::Mutex<Vec<Topic>>>,
}

impl Broker for Recording {
    fn start(&self, link: Link) {
        let _ = self.link.set(link);
    }
    fn interest_changed(&self) {
        if let Some(l) = self.link.get() {
            let i = l.take_interest(usize::MAX);
            l.subscribed(&i.subscribe);
            self.unsubscribed.lock().unwrap().extend(i.unsubscribe);
        }
    }
    fn publish(&self, _: &Topic, _: Bytes) {}
}

/// At the shutdown signal every subscriber gets what was published to it, then 1001; its
/// connection leaves its topics, and the broker is told to unsubscribe from them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_tells_every_subscriber_and_unsubscribes_the_broker() {
    const SUBSCRIBERS: usize = 20;
    const PUBLICATIONS: u64 = 10;
    let shutdown = rapidws::tokio::Shutdown::new();
    let broker = Recording::default();
    let b = broker.clone();
    let node = Node::start(
        move || Hub::builder().broker(b),
        server_config().with_shutdown(&shutdown),
    );
    let topic = |i: usize| if i.is_multiple_of(2) { "a" } else { "b" };
    let mut clients = Vec::new();
    for i in 0..SUBSCRIBERS {
        clients.push(subscriber(node.addr, topic(i), i % 4 < 2).await);
    }
    until("every subscriber", || {
        let m = node.hub.metrics();
        m.subscribers("a") + m.subscribers("b") == SUBSCRIBERS
    })
    .await;
    // Published, not read yet: on the server when the signal comes.
    for seq in 0..PUBLICATIONS {
        for t in ["a", "b"] {
            node.hub.publish(t, payload(0, seq, 100).as_str()).unwrap();
        }
    }
    shutdown.trigger();
    for mut ws in clients {
        let mut seqs = Vec::new();
        let close = loop {
            match bounded(ws.recv()).await.unwrap() {
                Some(Message::Text(t)) => seqs.push(parse(t.as_str()).unwrap().1),
                Some(Message::Close(frame)) => break frame.expect("a close frame"),
                other => panic!("unexpected {other:?}"),
            }
        };
        check_sequence(&seqs, PUBLICATIONS, true).unwrap();
        assert_eq!((close.code.0, close.reason.as_str()), (1001, "going away"));
        assert_eq!(bounded(ws.recv()).await.unwrap(), None);
    }
    until("every subscriber left", || {
        let m = node.hub.metrics();
        m.subscribers("a") + m.subscribers("b") == 0 && m.connections == 0
    })
    .await;
    until("the broker unsubscribed", || {
        let mut gone = broker.unsubscribed.lock().unwrap().clone();
        gone.sort();
        gone.iter().map(|t| &**t).eq(["a", "b"])
    })
    .await;
    until("every connection dropped", || shutdown.connections() == 0).await;
}
