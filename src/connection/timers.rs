//! The connection's timers: keepalive ping, pong, idle and close timeouts.

use std::time::Instant;

use bytes::Bytes;

use crate::codec::OpCode;

use super::{Connection, Error, Timeout};

impl Connection {
    /// When [`handle_timeout`](Self::handle_timeout) should next be called, if ever.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.is_closed() {
            return None;
        }
        let c = &self.config;
        let mut next: Option<Instant> = None;
        let mut add = |t: Option<Instant>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        if self.close_sent {
            add(self.close_sent_at.zip(c.close_timeout).map(|(t, d)| t + d));
            return next;
        }
        match self.ping_sent_at {
            Some(at) => add(c.pong_timeout.map(|d| at + d)),
            None => add(c.keepalive_interval.map(|d| self.last_rx + d)),
        }
        add(c.idle_timeout.map(|d| self.last_rx + d));
        next
    }

    /// Runs the timers due at `now`: a keepalive ping is queued, or a timeout fails the
    /// connection (reported by the next [`poll_event`](Self::poll_event)).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = now;
        if self.is_closed() {
            return;
        }
        let c = &self.config;
        let due = |t: Option<Instant>| t.is_some_and(|t| t <= now);
        if self.close_sent {
            if due(self.close_sent_at.zip(c.close_timeout).map(|(t, d)| t + d)) {
                self.failed = true;
                self.pending_error = Some(Error::Timeout(Timeout::Close));
            }
            return;
        }
        if due(c.idle_timeout.map(|d| self.last_rx + d)) {
            let e = self.fail(Error::Timeout(Timeout::Idle));
            self.pending_error = Some(e);
            return;
        }
        match self.ping_sent_at {
            Some(at) => {
                if due(c.pong_timeout.map(|d| at + d)) {
                    let e = self.fail(Error::Timeout(Timeout::Pong));
                    self.pending_error = Some(e);
                }
            }
            None => {
                if due(c.keepalive_interval.map(|d| self.last_rx + d))
                    && self.queue_control(OpCode::Ping, Bytes::new()).is_ok()
                {
                    self.ping_sent_at = Some(now);
                }
            }
        }
    }
}
