//! The broker's connection to each master and the shard channels subscribed on it:
//! opening it, `SSUBSCRIBE` with the hub's catch-up, `SUNSUBSCRIBE`.

use redis::ProtocolVersion;

use super::*;

/// The broker's connection to one master, and the topics held on it.
pub(super) struct Shard {
    conn: MultiplexedConnection,
    /// Tags the pushes of `conn` in the queue.
    pub(super) tag: u64,
    /// Subscribed on `conn` and caught up: what arrives for these is delivered.
    pub(super) held: HashSet<Topic>,
    /// `SUNSUBSCRIBE`s sent and not yet seen confirmed, per topic: a confirmation of one
    /// of these is not the server dropping the channel.
    pub(super) unsubscribing: HashMap<Topic, u32>,
}

/// What came back for one `SSUBSCRIBE`.
enum Reply {
    Confirmed,
    /// The master does not own the slot (any more): the slot map is stale.
    Moved,
    /// Refused otherwise (the master is loading, say): try again later.
    Refused,
    /// Not a confirmation of this channel (a reply out of step): the connection's state
    /// is unknown.
    Confused,
}

impl Sharded {
    /// Subscribes `topics` on `master`'s connection, then lets the hub catch them up;
    /// those confirmed and caught up are held, the others lost. False when any failed.
    pub(super) async fn subscribe(
        &mut self,
        master: &Master,
        topics: Vec<Topic>,
        reason: &str,
    ) -> bool {
        if topics.is_empty() {
            return true;
        }
        for t in &topics {
            self.lost.remove(t);
        }
        let Some(shard) = self.shards.get_mut(master) else {
            self.lose(topics, reason);
            return false;
        };
        let mut pipe = redis::pipe();
        let channels: Vec<String> = topics.iter().map(|t| self.inner.channel(t)).collect();
        for c in &channels {
            // One channel per command: one confirmation answers each.
            pipe.cmd("SSUBSCRIBE").arg(c);
        }
        let replies: RedisResult<Vec<RedisResult<Value>>> =
            pipe.ignore_errors().query_async(&mut shard.conn).await;
        let replies = match replies {
            Ok(r) if r.len() == topics.len() => r,
            _ => {
                self.drop_shard(master, reason);
                self.lose(topics, reason);
                return false;
            }
        };
        let mut confirmed = Vec::new();
        let mut refused = Vec::new();
        let mut confused = false;
        for ((t, c), r) in topics.into_iter().zip(&channels).zip(replies) {
            match confirmation(&r, c) {
                Reply::Confirmed => confirmed.push(t),
                Reply::Moved => {
                    self.map_stale = true;
                    refused.push(t);
                }
                Reply::Refused => refused.push(t),
                Reply::Confused => {
                    confused = true;
                    refused.push(t);
                }
            }
        }
        if confused {
            // What the connection holds is not known: start it again.
            self.drop_shard(master, reason);
            self.lose(confirmed, reason);
            self.lose(refused, reason);
            return false;
        }
        self.lose(refused.clone(), reason);
        // Subscribed; nothing is delivered for them before the hub caught them up.
        let failed = self.link.restored(confirmed.clone()).await;
        self.inner.recovered.fetch_add(1, Ordering::Release);
        let Some(shard) = self.shards.get_mut(master) else {
            self.lose(confirmed, reason);
            return false;
        };
        for t in &confirmed {
            if !failed.contains(t) {
                shard.held.insert(t.clone());
            }
        }
        // The history did not answer: unsubscribed again, still lost, tried later.
        self.lost.extend(failed.iter().cloned());
        let unanswered = !failed.is_empty();
        self.unsubscribe(master, failed).await;
        refused.is_empty() && !unanswered
    }

    /// `SUNSUBSCRIBE`s `topics` (no longer held) on `master`'s connection; a failure ends
    /// the connection.
    pub(super) async fn unsubscribe(&mut self, master: &Master, topics: Vec<Topic>) {
        let Some(shard) = self.shards.get_mut(master) else {
            return;
        };
        if topics.is_empty() {
            return;
        }
        let mut pipe = redis::pipe();
        for t in &topics {
            pipe.cmd("SUNSUBSCRIBE").arg(self.inner.channel(t));
            *shard.unsubscribing.entry(t.clone()).or_default() += 1;
        }
        let sent: RedisResult<Vec<RedisResult<Value>>> =
            pipe.ignore_errors().query_async(&mut shard.conn).await;
        if !sent.is_ok_and(|r| r.len() == topics.len()) {
            self.drop_shard(master, "redis cluster sunsubscribe failed");
        }
    }

    /// Opens the connection to `master` (and checks that the node there is the one the
    /// map names). False when it could not.
    pub(super) async fn connect(&mut self, master: &Master) -> bool {
        let timeout = self.inner.config.timeout;
        let tag = self.next_tag;
        self.next_tag += 1;
        let (tx, flag, link) = (self.tx.clone(), self.overflow.clone(), self.link.clone());
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            .set_push_sender(move |push: redis::PushInfo| {
                // Subscription confirmations answer their commands; only these matter here.
                let wanted = matches!(
                    push.kind,
                    PushKind::SMessage | PushKind::SUnsubscribe | PushKind::Disconnection
                );
                if wanted && tx.try_send((tag, push)).is_err() {
                    flag.store(true, Ordering::Relaxed);
                    link.count_dropped(1);
                }
                Ok::<(), std::convert::Infallible>(())
            });
        let info = node_info(
            &self.seed,
            &master.host,
            master.port,
            ProtocolVersion::RESP3,
        );
        let attempt = async {
            let mut conn = Client::open(info)?
                .get_multiplexed_async_connection_with_config(&config)
                .await?;
            let id: String = redis::cmd("CLUSTER")
                .arg("MYID")
                .query_async(&mut conn)
                .await?;
            Ok::<_, redis::RedisError>((conn, id))
        };
        match tokio::time::timeout(timeout, attempt).await {
            Ok(Ok((conn, id))) if id == master.id => {
                self.tags.insert(tag, master.clone());
                self.shards.insert(
                    master.clone(),
                    Shard {
                        conn,
                        tag,
                        held: HashSet::new(),
                        unsubscribing: HashMap::new(),
                    },
                );
                true
            }
            // Another node answers there now: the map is stale.
            Ok(Ok(_)) => {
                self.map_stale = true;
                false
            }
            _ => false,
        }
    }
}

/// What one `SSUBSCRIBE channel` got back.
fn confirmation(r: &RedisResult<Value>, channel: &str) -> Reply {
    match r {
        Ok(Value::Push {
            kind: PushKind::SSubscribe,
            data,
        }) if data.first().and_then(bulk) == Some(channel.as_bytes()) => Reply::Confirmed,
        Ok(_) => Reply::Confused,
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::Server(redis::ServerErrorKind::Moved | redis::ServerErrorKind::Ask)
            ) =>
        {
            Reply::Moved
        }
        Err(e) if matches!(e.kind(), ErrorKind::Server(_)) => Reply::Refused,
        Err(_) => Reply::Confused,
    }
}

/// How to reach the node at `host:port`: the configured node's settings (credentials,
/// TLS) with that address, speaking `protocol`.
pub(super) fn node_info(
    seed: &ConnectionInfo,
    host: &str,
    port: u16,
    protocol: ProtocolVersion,
) -> ConnectionInfo {
    let addr = match seed.addr() {
        ConnectionAddr::TcpTls {
            insecure,
            tls_params,
            ..
        } => ConnectionAddr::TcpTls {
            host: host.to_owned(),
            port,
            insecure: *insecure,
            tls_params: tls_params.clone(),
        },
        _ => ConnectionAddr::Tcp(host.to_owned(), port),
    };
    let redis = seed.redis_settings().clone().set_protocol(protocol);
    seed.clone().set_addr(addr).set_redis_settings(redis)
}
