//! Sending publications: pipelined in batches (per slot in cluster mode), with backoff.

use super::*;

/// How a pipeline calls the record script: by its hash, or (on a node that lacks it)
/// with its text.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Call {
    Hash,
    Text,
}

/// The commands for one batch of publications.
pub(super) fn pipeline(
    inner: &Inner,
    history: Option<&HistoryConfig>,
    batch: &[Out],
    call: Call,
) -> redis::Pipeline {
    let mut pipe = redis::pipe();
    for o in batch {
        match o {
            Out::Plain { channel, envelope } => {
                pipe.cmd(inner.publish_command())
                    .arg(channel)
                    .arg(&envelope[..]);
            }
            Out::Recorded {
                topic,
                head,
                payload,
            } => {
                let (stream, meta) = inner.stream_keys(topic);
                let (capacity, ttl) = history.map_or((1000, 0), |h| (h.capacity, h.ttl.as_secs()));
                match call {
                    Call::Hash => pipe.cmd("EVALSHA").arg(inner.record.get_hash()),
                    Call::Text => pipe.cmd("EVAL").arg(RECORD),
                };
                pipe.arg(2)
                    .arg(stream)
                    .arg(meta)
                    .arg(head)
                    .arg(&payload[..])
                    .arg(capacity)
                    .arg(ttl)
                    .arg(inner.channel(topic))
                    .arg(inner.publish_command());
            }
        }
    }
    pipe
}

/// Publications that could not be sent: plain ones are counted, recorded ones go back
/// to the hub for local fan-out.
pub(super) fn give_back(link: &Link, items: impl IntoIterator<Item = Out>) {
    let mut dropped = 0;
    for o in items {
        match o {
            Out::Plain { .. } => dropped += 1,
            Out::Recorded {
                topic,
                head,
                payload,
            } => link.unrecorded(&topic, &head, payload),
        }
    }
    if dropped > 0 {
        link.count_dropped(dropped);
    }
}

/// The slot of a publication's channel (and of its topic's streams).
pub(super) fn slot_of(inner: &Inner, o: &Out) -> Slot {
    match o {
        Out::Plain { channel, .. } => Slot::for_key(channel),
        Out::Recorded { topic, .. } => Slot::for_key(inner.channel(topic)),
    }
}

/// A slot whose master failed a pipeline: skipped until `until`, then tried again.
pub(super) struct Pause {
    pub(super) until: tokio::time::Instant,
    pub(super) backoff: Duration,
}

/// Cluster mode: one pipeline per slot (a pipeline may not cross slots), each to the
/// master of its slot. A slot whose pipeline failed is paused with backoff, alone: the
/// other shards go on.
pub(super) async fn publish_sharded(
    inner: &Inner,
    link: &Link,
    history: Option<&HistoryConfig>,
    batch: &mut Vec<Out>,
    paused: &mut HashMap<Slot, Pause>,
) {
    let mut groups: Vec<(Slot, Vec<Out>)> = Vec::new();
    let mut index: HashMap<Slot, usize> = HashMap::new();
    for o in batch.drain(..) {
        let slot = slot_of(inner, &o);
        let i = *index.entry(slot).or_insert_with(|| {
            groups.push((slot, Vec::new()));
            groups.len() - 1
        });
        groups[i].1.push(o);
    }
    let now = tokio::time::Instant::now();
    for (slot, group) in groups {
        if paused.get(&slot).is_some_and(|p| now < p.until) {
            give_back(link, group);
            continue;
        }
        let failed = match inner.command().await {
            Ok(mut c) => send_slot(inner, &mut c, history, group).await,
            Err(_) => group,
        };
        if failed.is_empty() {
            paused.remove(&slot);
            continue;
        }
        give_back(link, failed);
        let p = paused.entry(slot).or_insert(Pause {
            until: now,
            backoff: inner.config.backoff_min,
        });
        p.until = tokio::time::Instant::now() + p.backoff;
        p.backoff = (p.backoff * 2).min(inner.config.backoff_max);
    }
}

/// Sends one slot's publications; returns those that failed, in order.
pub(super) async fn send_slot(
    inner: &Inner,
    c: &mut Conn,
    history: Option<&HistoryConfig>,
    group: Vec<Out>,
) -> Vec<Out> {
    let mut call = Call::Hash;
    let mut todo = group;
    loop {
        let replies: RedisResult<Vec<RedisResult<Value>>> = pipeline(inner, history, &todo, call)
            .ignore_errors()
            .query_async(c)
            .await;
        let Ok(replies) = replies else {
            return todo;
        };
        if replies.len() != todo.len() {
            return todo;
        }
        // A node that restarted lacks the script until the subscriber loads it again:
        // those calls are made again with its text, unless a later one went through
        // (that would reorder the topic's offsets).
        let mut failed = Vec::new();
        let mut missing = Vec::new();
        let mut later_ok = false;
        for (o, r) in todo.into_iter().zip(replies) {
            match r {
                Ok(_) => later_ok |= !missing.is_empty(),
                Err(e)
                    if call == Call::Hash
                        && e.kind() == ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
                {
                    missing.push(o)
                }
                Err(_) => failed.push(o),
            }
        }
        if missing.is_empty() || later_ok {
            failed.extend(missing);
            return failed;
        }
        if !failed.is_empty() {
            // Other errors too: no second round, keep the order of what is handed back.
            failed.extend(missing);
            return failed;
        }
        call = Call::Text;
        todo = missing;
    }
}

/// Sends publications, pipelined in batches; reconnects with backoff. Publications it
/// cannot send are counted (plain) or handed back to the hub for local fan-out
/// (recorded).
pub(super) async fn publisher(inner: Arc<Inner>, link: Link, mut rx: mpsc::Receiver<Out>) {
    let mut backoff = inner.config.backoff_min;
    let mut retry_at = tokio::time::Instant::now();
    let mut batch = Vec::with_capacity(inner.config.batch);
    let mut seen_recovered = inner.recovered.load(std::sync::atomic::Ordering::Acquire);
    let mut paused: HashMap<Slot, Pause> = HashMap::new();
    while let Some(first) = rx.recv().await {
        if link.is_closed() {
            return;
        }
        batch.clear();
        batch.push(first);
        while batch.len() < inner.config.batch.max(1) {
            match rx.try_recv() {
                Ok(o) => batch.push(o),
                Err(_) => break,
            }
        }
        let history = link.history_config();
        // The server came back since the last failure: no reason to wait out the pause.
        let recovered = inner.recovered.load(std::sync::atomic::Ordering::Acquire);
        if recovered != seen_recovered {
            seen_recovered = recovered;
            retry_at = tokio::time::Instant::now();
            paused.clear();
        }
        if inner.is_cluster() {
            publish_sharded(&inner, &link, history.as_ref(), &mut batch, &mut paused).await;
            continue;
        }
        // A cached connection may have died since it was last used (the server
        // restarted): one more try on a fresh one before giving up on the batch.
        let mut sent = false;
        for _ in 0..2 {
            if sent || tokio::time::Instant::now() < retry_at {
                break;
            }
            let Ok(mut c) = inner.command().await else {
                break;
            };
            sent = pipeline(&inner, history.as_ref(), &batch, Call::Hash)
                .query_async::<()>(&mut c)
                .await
                .is_ok();
            if !sent {
                inner.drop_command().await;
            }
        }
        if sent {
            backoff = inner.config.backoff_min;
            continue;
        }
        if tokio::time::Instant::now() >= retry_at {
            retry_at = tokio::time::Instant::now() + backoff;
            backoff = (backoff * 2).min(inner.config.backoff_max);
        }
        give_back(&link, batch.drain(..));
    }
}
