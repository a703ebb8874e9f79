//! Subscriptions: joining and leaving topics, the topic table and its sweep.

use super::*;

impl Shared {
    pub(super) fn topic_state(
        name: Topic,
        now: Instant,
        config: &HubConfig,
        ring: bool,
    ) -> TopicState {
        TopicState {
            name,
            subs: RwLock::default(),
            order: Mutex::new(Order {
                ring: config
                    .history
                    .as_ref()
                    .filter(|_| ring)
                    .map(|h| Ring::new(h.capacity, now)),
                last: None,
            }),
            ready: AtomicBool::new(false),
            ready_notify: Notify::new(),
        }
    }

    /// Adds `conn` to `topic`, live or (`pending`) waiting for a replay.
    pub(super) fn subscribe(
        &self,
        conn: &Arc<Conn>,
        topic: &str,
        pending: bool,
    ) -> Result<(Arc<TopicState>, Option<Arc<Pending>>), HubError> {
        if !valid_topic(topic, self.config.max_topic_len) {
            return Err(HubError::InvalidTopic);
        }
        if conn.gone.load(Relaxed) {
            return Err(HubError::Left);
        }
        let mut created = false;
        let result = {
            let mut map = write(&self.topics);
            {
                let topics = lock(&conn.topics);
                if !topics.contains(topic) && topics.len() >= self.config.max_topics_per_connection
                {
                    return Err(HubError::TooManyTopics);
                }
            }
            let state = match map.get(topic) {
                Some(s) => s.clone(),
                None => {
                    created = true;
                    self.add_topic(&mut map, topic, self.broker.history().is_none())
                }
            };
            let mut subs = write(&state.subs);
            let p = if pending {
                subs.remove(conn.id);
                let p = Arc::new(Pending {
                    conn: conn.clone(),
                    buffer: Mutex::default(),
                });
                subs.pending.push(p.clone());
                Some(p)
            } else {
                if !subs.contains(conn.id) {
                    subs.add_live(conn.clone());
                }
                None
            };
            drop(subs);
            lock(&conn.topics).insert(state.name.clone());
            (state, p)
        };
        if created {
            self.broker.interest_changed();
        }
        Ok(result)
    }

    /// Adds the state of a new topic to `map` (with a history ring when `ring`) and notes
    /// the broker's interest in it; the caller tells the broker once the map is unlocked.
    fn add_topic(
        &self,
        map: &mut HashMap<Topic, Arc<TopicState>>,
        topic: &str,
        ring: bool,
    ) -> Arc<TopicState> {
        let name: Topic = Arc::from(topic);
        let s = Arc::new(Self::topic_state(
            name.clone(),
            Instant::now(),
            &self.config,
            ring,
        ));
        map.insert(name.clone(), s.clone());
        self.note_interest(&name, true);
        s
    }

    /// The topic's state, made (with its ring, and the broker's interest) if missing.
    pub(super) fn topic_for_history(&self, topic: &str) -> Option<Arc<TopicState>> {
        let state = {
            let mut map = write(&self.topics);
            if let Some(s) = map.get(topic) {
                return Some(s.clone());
            }
            self.add_topic(&mut map, topic, true)
        };
        self.broker.interest_changed();
        self.maybe_sweep();
        Some(state)
    }

    pub(super) fn unsubscribe(&self, conn: &Arc<Conn>, topic: &str) {
        let removed = {
            let mut map = write(&self.topics);
            lock(&conn.topics).remove(topic);
            let Some(state) = map.get(topic).cloned() else {
                return;
            };
            let mut subs = write(&state.subs);
            subs.remove(conn.id);
            let empty = subs.is_empty();
            drop(subs);
            empty && self.drop_if_idle(&mut map, &state, Instant::now())
        };
        if removed {
            self.broker.interest_changed();
        }
        self.maybe_sweep();
    }

    /// Removes an empty topic from the map unless its ring is still within its time to
    /// live; true when removed (interest noted).
    pub(super) fn drop_if_idle(
        &self,
        map: &mut HashMap<Topic, Arc<TopicState>>,
        state: &Arc<TopicState>,
        now: Instant,
    ) -> bool {
        if let Some(h) = &self.config.history {
            let order = lock(&state.order);
            if order
                .ring
                .as_ref()
                .is_some_and(|r| r.top().offset > 0 && now.duration_since(r.touched) < h.ttl)
            {
                return false;
            }
        }
        if !read(&state.subs).is_empty() {
            return false;
        }
        map.remove(&state.name);
        self.note_interest(&state.name, false);
        self.unlose(&mut lock(&self.lost), &state.name);
        true
    }

    /// Drops topics whose rings expired, at most once a second (called from
    /// subscription changes: an idle hub holds at most what it held).
    pub(super) fn maybe_sweep(&self) {
        if self.config.history.is_none() {
            return;
        }
        let now = Instant::now();
        {
            let Ok(mut last) = self.last_sweep.try_lock() else {
                return;
            };
            if now.duration_since(*last) < Duration::from_secs(1) {
                return;
            }
            *last = now;
        }
        let mut removed = false;
        {
            let mut map = write(&self.topics);
            let idle: Vec<Arc<TopicState>> = map
                .values()
                .filter(|t| read(&t.subs).is_empty())
                .cloned()
                .collect();
            for t in idle {
                removed |= self.drop_if_idle(&mut map, &t, now);
            }
        }
        if removed {
            self.broker.interest_changed();
        }
    }

    pub(super) fn leave_all(&self, conn: &Arc<Conn>) {
        let topics: Vec<Topic> = lock(&conn.topics).iter().cloned().collect();
        for t in topics {
            self.unsubscribe(conn, &t);
        }
    }
}
