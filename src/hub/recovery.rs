//! History: catching a subscriber up from an offset, and the node up after a broker gap.

use super::publish::Delivered;
use super::*;

impl Shared {
    pub(super) async fn fetch_history(
        &self,
        topic: &str,
        offset: u64,
        limit: usize,
    ) -> Result<HistoryPage, HubError> {
        if self.config.history.is_none() {
            return Err(HubError::NoHistory);
        }
        if !valid_topic(topic, self.config.max_topic_len) {
            return Err(HubError::InvalidTopic);
        }
        if let Some(h) = self.broker.history() {
            let name: Topic = Arc::from(topic);
            let fut = h.since(&name, offset, limit);
            return match tokio::time::timeout(self.config.recovery_timeout, fut).await {
                Ok(r) => r.map_err(HubError::Broker),
                Err(_) => Err(HubError::Broker(BrokerError::Unavailable)),
            };
        }
        let state = read(&self.topics).get(topic).cloned();
        let Some(state) = state else {
            // No ring: nothing was kept here.
            return Ok(HistoryPage::default());
        };
        let order = lock(&state.order);
        Ok(order
            .ring
            .as_ref()
            .map(|r| r.since(offset, limit))
            .unwrap_or_default())
    }

    pub(super) async fn wait_ready(&self, state: &TopicState) -> Result<(), HubError> {
        let wait = async {
            loop {
                let notified = state.ready_notify.notified();
                let mut notified = std::pin::pin!(notified);
                notified.as_mut().enable();
                if state.ready.load(Relaxed) {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(self.config.recovery_timeout, wait)
            .await
            .map_err(|_| HubError::Broker(BrokerError::Unavailable))
    }

    pub(super) async fn subscribe_from(
        &self,
        conn: &Arc<Conn>,
        topic: &str,
        since: Position,
    ) -> Result<Recovery, HubError> {
        let Some(history) = self.config.history.clone() else {
            return Err(HubError::NoHistory);
        };
        let (state, pending) = self.subscribe(conn, topic, true)?;
        let Some(pending) = pending else {
            return Err(HubError::Left);
        };
        let page = async {
            if self.records().is_some() {
                self.wait_ready(&state).await?;
            }
            self.fetch_history(topic, since.offset, history.max_replay)
                .await
        }
        .await;
        let page = match page {
            Ok(p) => p,
            Err(e) => {
                // Not subscribed after all.
                self.unsubscribe(conn, topic);
                return Err(e);
            }
        };
        // Order, then the subscriber list: no publication passes while the replay and
        // the kept live ones are queued.
        let _order = lock(&state.order);
        let mut subs = write(&state.subs);
        let top = page.top.unwrap_or(Position {
            offset: 0,
            epoch: 0,
        });
        let first = page.entries.first().map(|(o, _)| *o);
        let outcome = if top.epoch != since.epoch {
            Recovery::EpochChanged { position: top }
        } else if top.offset > since.offset && first != Some(since.offset + 1) {
            Recovery::Trimmed { position: top }
        } else {
            Recovery::Recovered {
                replayed: page.entries.len(),
                position: top,
            }
        };
        let mut sent = since.offset;
        let mut ok = true;
        if let Recovery::Recovered { .. } = outcome {
            for (offset, data) in &page.entries {
                let Ok(env) = Envelope::parse(data.clone(), self.config.max_message_size) else {
                    self.counters.broker_invalid.fetch_add(1, Relaxed);
                    continue;
                };
                let position = Position {
                    offset: *offset,
                    epoch: top.epoch,
                };
                if let Some(msg) = self.frame(topic, env.kind, &env.payload, Some(position)) {
                    match self.deliver_to(conn, &msg) {
                        Delivered::Yes => {}
                        Delivered::Dropped => {
                            self.counters.dropped.fetch_add(1, Relaxed);
                        }
                        Delivered::Gone => {
                            ok = false;
                            break;
                        }
                    }
                }
                sent = *offset;
            }
            self.counters
                .recovered
                .fetch_add(page.entries.len() as u64, Relaxed);
        }
        // Live publications kept meanwhile: those the replay did not already carry.
        let kept = std::mem::take(&mut *lock(&pending.buffer));
        for (position, msg) in kept {
            if !ok {
                break;
            }
            if let Some(p) = position
                && p.epoch == top.epoch
                && p.offset <= sent
            {
                continue;
            }
            match self.deliver_to(conn, &msg) {
                Delivered::Yes => {}
                Delivered::Dropped => {
                    self.counters.dropped.fetch_add(1, Relaxed);
                }
                Delivered::Gone => ok = false,
            }
        }
        let still_pending = subs.pending.iter().any(|p| Arc::ptr_eq(p, &pending));
        subs.pending.retain(|p| !Arc::ptr_eq(p, &pending));
        if ok && still_pending {
            subs.add_live(conn.clone());
        }
        drop(subs);
        drop(_order);
        if !ok {
            self.leave_all(conn);
            return Err(HubError::Left);
        }
        Ok(outcome)
    }

    /// After the broker reconnected: catch up from the broker's history, or start new
    /// epochs in the node's rings.
    pub(super) async fn recover_gap(self: Arc<Self>) {
        let topics: Vec<Arc<TopicState>> = read(&self.topics).values().cloned().collect();
        if self.config.history.is_some() {
            self.catch_up(&topics).await;
        }
        self.mark_ready(&self.wanted_topics());
        self.broker_up();
    }

    /// After [`Link::lost`]: catches `topics` up and marks them ready; returns those whose
    /// history did not answer (still lost, not ready).
    pub(super) async fn restore(self: Arc<Self>, topics: Vec<Topic>) -> Vec<Topic> {
        let states: Vec<Arc<TopicState>> = {
            let map = read(&self.topics);
            topics.iter().filter_map(|t| map.get(t).cloned()).collect()
        };
        let failed = if self.config.history.is_some() {
            self.catch_up(&states).await
        } else {
            Vec::new()
        };
        let done: Vec<Topic> = states
            .iter()
            .map(|s| s.name.clone())
            .filter(|t| !failed.contains(t))
            .collect();
        // The topic map first, then the lost set (the order drop_if_idle takes them in).
        let map = read(&self.topics);
        let mut lost = lock(&self.lost);
        for t in &done {
            if let Some(state) = map.get(t) {
                state.ready.store(true, Relaxed);
                state.ready_notify.notify_waiters();
            }
            self.unlose(&mut lost, t);
        }
        failed
    }

    /// Catches each of `topics` up on what the node may have missed while the broker was
    /// away: with the broker's history, the publications after the last one delivered
    /// (in order, before anything newer), or an epoch change when the history no longer
    /// covers the gap (it was lost, trimmed, or holds more than one replay); with the
    /// node's rings, a new epoch. Returns the topics whose history did not answer.
    async fn catch_up(&self, topics: &[Arc<TopicState>]) -> Vec<Topic> {
        let limit = self.config.history.as_ref().map_or(0, |h| h.max_replay);
        let mut failed = Vec::new();
        for state in topics {
            if self.records().is_none() {
                let mut order = lock(&state.order);
                if let Some(ring) = order.ring.as_mut() {
                    let previous = ring.top();
                    ring.break_epoch();
                    if previous.offset > 0 {
                        self.counters.epoch_changes.fetch_add(1, Relaxed);
                        self.emit(HubEvent::EpochChanged {
                            topic: state.name.clone(),
                            previous,
                            current: ring.top(),
                        });
                    }
                }
                continue;
            }
            let Some(last) = lock(&state.order).last else {
                continue;
            };
            let Ok(page) = self.fetch_history(&state.name, last.offset, limit).await else {
                failed.push(state.name.clone());
                continue;
            };
            let mut order = lock(&state.order);
            let Some(last) = order.last else { continue };
            let first = page.entries.first().map(|(o, _)| *o);
            let top = match page.top {
                Some(top)
                    if top.epoch == last.epoch
                        && (top.offset <= last.offset || first == Some(last.offset + 1)) =>
                {
                    top
                }
                // The history is gone (the server lost its data, or it expired), or no
                // longer reaches back to the last one delivered: the gap cannot be filled.
                other => {
                    let current = other.unwrap_or(Position {
                        offset: 0,
                        epoch: 0,
                    });
                    self.epoch_changed(state, last, current);
                    order.last = other;
                    continue;
                }
            };
            for (offset, data) in page.entries {
                if offset <= order.last.map_or(0, |l| l.offset) {
                    continue;
                }
                let Ok(env) = Envelope::parse(data, self.config.max_message_size) else {
                    self.counters.broker_invalid.fetch_add(1, Relaxed);
                    continue;
                };
                let position = Position {
                    offset,
                    epoch: top.epoch,
                };
                order.last = Some(position);
                let except = (env.origin == self.node).then_some(env.exclude).flatten();
                if let Some(msg) = self.frame(&state.name, env.kind, &env.payload, Some(position)) {
                    self.fan_out(state, &msg, Some(position), except);
                }
            }
            // More missed than one replay holds: the rest cannot be delivered in order.
            if let Some(reached) = order.last
                && reached.offset < top.offset
            {
                self.epoch_changed(state, reached, top);
                order.last = Some(top);
            }
        }
        failed
    }

    fn epoch_changed(&self, state: &TopicState, previous: Position, current: Position) {
        self.counters.epoch_changes.fetch_add(1, Relaxed);
        self.emit(HubEvent::EpochChanged {
            topic: state.name.clone(),
            previous,
            current,
        });
    }
}
