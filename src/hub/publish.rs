//! Publishing: one prepared message per publication, fanned out to every local subscriber without waiting on any.

use super::*;

impl Shared {
    pub(super) fn frame(
        &self,
        topic: &str,
        kind: MessageKind,
        payload: &[u8],
        position: Option<Position>,
    ) -> Option<PreparedMessage> {
        match &self.framer {
            Some(f) => f(&PublicationRef {
                topic,
                kind,
                payload,
                position,
            }),
            None => {
                let m = PreparedMessage::new(kind, payload).ok()?;
                #[cfg(feature = "deflate")]
                let m = if self.config.compression_level == DEFAULT_PREPARED_LEVEL {
                    m
                } else {
                    m.with_compression_level(self.config.compression_level)
                };
                Some(m)
            }
        }
    }

    pub(super) fn publish(
        &self,
        topic: &str,
        payload: Payload,
        except: Option<u64>,
    ) -> Result<(), HubError> {
        if !valid_topic(topic, self.config.max_topic_len) {
            return Err(HubError::InvalidTopic);
        }
        if payload.data.len() > self.config.max_message_size {
            return Err(HubError::TooLarge);
        }
        self.counters.publications.fetch_add(1, Relaxed);
        let state = read(&self.topics).get(topic).cloned();
        if let Some(history) = self.records() {
            // Fanned out when it comes back from the broker, with its position.
            let name = state.map_or_else(|| Arc::from(topic), |s| s.name.clone());
            history.publish_recorded(
                &name,
                envelope::head(self.node, payload.kind, except),
                payload.data,
            );
            return Ok(());
        }
        let envelope = envelope::encode(self.node, payload.kind, except, &payload.data);
        // With history in the node's ring, a topic without subscribers keeps it too (for
        // clients that come back), so it comes to exist here.
        let state = match state {
            None if self.config.history.is_some() => self.topic_for_history(topic),
            s => s,
        };
        let Some(state) = state else {
            // No local subscriber: only other nodes may want it.
            self.broker.publish(&Arc::from(topic), envelope);
            return Ok(());
        };
        let reuse = |position: Option<Position>| match (&payload.prepared, position, &self.framer) {
            (Some(m), None, None) => Some(m.clone()),
            // Framed again for its position: the published message's choice of
            // compression still holds here.
            (Some(m), Some(_), None) => self
                .frame(topic, payload.kind, &payload.data, position)
                .map(|f| f.with_compression(m.compression())),
            _ => self.frame(topic, payload.kind, &payload.data, position),
        };
        if self.config.history.is_some() {
            // The ring's numbering and the fan-out happen under one lock, so every
            // subscriber gets the offsets in order.
            let mut order = lock(&state.order);
            let position = order.ring.as_ref().map(Ring::next_position);
            if let Some(ring) = order.ring.as_mut() {
                ring.push(envelope.clone(), Instant::now());
            }
            if let Some(msg) = reuse(position) {
                self.fan_out(&state, &msg, position, except);
            }
        } else if let Some(msg) = reuse(None) {
            self.fan_out(&state, &msg, None, except);
        }
        self.broker.publish(&state.name, envelope);
        Ok(())
    }

    /// Queues `msg` to every subscriber of `state` but `except`; keeps it for those
    /// waiting for a replay. Subscribers whose sends fail, or that are closed as slow
    /// consumers, leave every topic afterwards.
    pub(super) fn fan_out(
        &self,
        state: &TopicState,
        msg: &PreparedMessage,
        position: Option<Position>,
        except: Option<u64>,
    ) {
        let mut gone = Vec::new();
        let mut delivered = 0u64;
        let mut dropped = 0u64;
        {
            let subs = read(&state.subs);
            for c in &subs.live {
                if Some(c.id) == except {
                    continue;
                }
                match self.deliver_to(c, msg) {
                    Delivered::Yes => delivered += 1,
                    Delivered::Dropped => dropped += 1,
                    Delivered::Gone => gone.push(c.clone()),
                }
            }
            for p in &subs.pending {
                if Some(p.conn.id) != except {
                    lock(&p.buffer).push((position, msg.clone()));
                }
            }
        }
        self.counters.deliveries.fetch_add(delivered, Relaxed);
        if dropped > 0 {
            self.counters.dropped.fetch_add(dropped, Relaxed);
        }
        for c in gone {
            self.leave_all(&c);
        }
    }

    pub(super) fn deliver_to(&self, c: &Conn, msg: &PreparedMessage) -> Delivered {
        if c.gone.load(Relaxed) {
            return Delivered::Gone;
        }
        match c.outlet.try_send_prepared(msg) {
            Ok(()) => Delivered::Yes,
            Err(Refused::Full) => match &self.config.slow_consumer {
                SlowConsumer::Drop => Delivered::Dropped,
                SlowConsumer::Close { code, reason } => {
                    if !c.gone.swap(true, Relaxed) {
                        c.outlet.try_close(*code, reason);
                        self.counters.closed_slow.fetch_add(1, Relaxed);
                    }
                    Delivered::Gone
                }
            },
            Err(Refused::Closed) => {
                c.gone.store(true, Relaxed);
                Delivered::Gone
            }
        }
    }

    /// A publication from the broker.
    pub(super) fn deliver_remote(&self, topic: &str, data: Bytes) {
        let env = match Envelope::parse(data, self.config.max_message_size) {
            Ok(e) => e,
            Err(_) => {
                self.counters.broker_invalid.fetch_add(1, Relaxed);
                return;
            }
        };
        let own = env.origin == self.node;
        let recorded = self.records().is_some();
        if own && !(recorded && env.position.is_some()) {
            // Our own echo: local subscribers had it when it was published.
            return;
        }
        if !own {
            self.counters.remote_publications.fetch_add(1, Relaxed);
        }
        let Some(state) = read(&self.topics).get(topic).cloned() else {
            return;
        };
        let except = if own { env.exclude } else { None };
        let mut order = lock(&state.order);
        let position = if recorded {
            let Some(pos) = env.position else {
                // A plain publication on a hub with recorded history (a node without
                // history on the same broker): deliver it as it is.
                drop(order);
                if let Some(msg) = self.frame(topic, env.kind, &env.payload, None) {
                    self.fan_out(&state, &msg, None, except);
                }
                return;
            };
            match order.last {
                Some(last) if last.epoch == pos.epoch && pos.offset <= last.offset => return,
                Some(last) if last.epoch != pos.epoch => {
                    self.counters.epoch_changes.fetch_add(1, Relaxed);
                    self.emit(HubEvent::EpochChanged {
                        topic: state.name.clone(),
                        previous: last,
                        current: pos,
                    });
                }
                _ => {}
            }
            order.last = Some(pos);
            Some(pos)
        } else if let Some(ring) = order.ring.as_mut() {
            let pos = ring.next_position();
            let local = envelope::encode(env.origin, env.kind, None, &env.payload);
            ring.push(local, Instant::now());
            Some(pos)
        } else {
            None
        };
        if let Some(msg) = self.frame(topic, env.kind, &env.payload, position) {
            self.fan_out(&state, &msg, position, except);
        }
        drop(order);
    }

    /// A recorded publication the broker could not record: local subscribers get it,
    /// without a position.
    pub(super) fn deliver_unrecorded(&self, topic: &Topic, head: &str, payload: Bytes) {
        self.counters.unrecorded.fetch_add(1, Relaxed);
        let mut full = head.as_bytes().to_vec();
        full.extend_from_slice(b"- -\n");
        full.extend_from_slice(&payload);
        let Ok(env) = Envelope::parse(Bytes::from(full), usize::MAX) else {
            return;
        };
        let Some(state) = read(&self.topics).get(topic).cloned() else {
            return;
        };
        let order = lock(&state.order);
        if let Some(msg) = self.frame(topic, env.kind, &env.payload, None) {
            self.fan_out(&state, &msg, None, env.exclude);
        }
        drop(order);
    }
}

pub(super) enum Delivered {
    Yes,
    Dropped,
    Gone,
}
