//! The life of a connection after the opening handshake: the close handshake, failure,
//! and the teardown of the transport (RFC 6455 7.1). One phase enum, its transitions, the
//! error latch and the peer's close frame; the IO layers only carry out what it asks
//! (flush, shut the write half down, read on, drop the transport).
//!
//! ```text
//!                 our close queued                 peer's close (echoed)
//!   Open ────────────────────────▶ CloseSent ────────────────────────────┐
//!    │ │                             │  │                                │
//!    │ │ peer's close, auto_close    │  │ close_timeout: Timeout::Close  │
//!    │ └─────────────────────────────┼──┼───────────────────────┐        ▼
//!    │ peer's close, no auto_close   │  │                       │   Teardown (clean)
//!    ▼                               │  ▼                       │        │
//!  CloseReceived ── our close ───────┼─▶ Teardown (failed) ◀────┼── protocol error,
//!    (sends allowed)                 │    flush our close,      │   timer, bad data
//!                                    │    shut down, linger     │        │
//!          transport EOF in Open, CloseSent or CloseReceived:   ▼        ▼
//!          RFC 6455 7.1.5, abnormal (1006) ───────────────────▶ Done ◀───┘
//!          (in CloseReceived the peer's close came first: no error)
//! ```
//!
//! "Our close queued" is the application's [`Connection::close`], the close a failure
//! queues with its code, or going away at the shutdown signal (shutdown.rs: 1001, behind
//! what is queued).
//!
//! Teardown, one rule for both IO layers (RFC 6455 7.1.1): "The underlying TCP connection,
//! in most normal cases, SHOULD be closed first by the server, so that it holds the
//! TIME_WAIT state and not the client". After a clean close handshake the output is
//! flushed, then the server shuts its write half down at once and waits for the client's
//! FIN; the client waits for the server's FIN, then shuts its own write half down. Both
//! waits are bounded by [`Config::close_timeout`]. After a failure (RFC 6455 7.1.7: "the
//! endpoint MUST _Fail the WebSocket Connection_") our close frame, when there is one, is
//! flushed, the write half shut down, and what the peer still sends is read and
//! discarded for at most [`Config::linger_timeout`] and [`Config::linger_bytes`] (or
//! until its FIN): closing a socket with unread data makes the kernel send a reset,
//! which would destroy our close frame before the peer reads it.

use std::time::Instant;

use crate::codec::{CloseCode, Role};
use crate::message::CloseFrame;

#[cfg(doc)]
use super::Config;
use super::{Connection, Error};

/// Where a connection is in its life.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    /// Both directions carry data.
    Open,
    /// RFC 6455 7.1.2: our close is queued ("the WebSocket Closing Handshake is Started");
    /// the peer's close is awaited, from `since` for at most [`Config::close_timeout`],
    /// and what it sends until then is still delivered.
    CloseSent { since: Instant },
    /// RFC 6455 7.1.3: the peer's close arrived and ours is not queued yet (auto_close is
    /// off): nothing more is received; sends are still allowed until `close`.
    CloseReceived,
    /// Both closes have passed, or the connection failed: carry out the teardown.
    Teardown(Teardown),
    /// Nothing more: drop the transport.
    Done,
}

/// What is left to do with the transport.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Teardown {
    /// When the teardown started (its deadline counts from here).
    since: Instant,
    /// The close handshake completed (RFC 6455 7.1.4); false after a failure.
    clean: bool,
    /// Our write half is shut down.
    shut_down: bool,
    /// The peer's FIN arrived.
    eof: bool,
    /// Bytes read and discarded since the teardown started.
    discarded: usize,
}

impl Connection {
    /// True once both closes have passed, a protocol error or timeout failed the
    /// connection, or the transport ended: nothing more is received, and what is left is
    /// the teardown ([`is_done`](Self::is_done) once it is over).
    #[inline]
    pub fn is_closed(&self) -> bool {
        matches!(self.phase, Phase::Teardown(_) | Phase::Done)
    }

    /// True once the teardown is over: drop (close) the transport. Until then an IO layer
    /// writes the output, shuts its write half down when
    /// [`wants_shutdown`](Self::wants_shutdown) says so, and keeps reading.
    #[inline]
    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// True once our close frame was queued (sends are refused from then on).
    #[inline]
    pub fn close_sent(&self) -> bool {
        self.close_queued
    }

    /// True once the peer's close frame was received.
    pub fn close_received(&self) -> bool {
        self.close_in
    }

    /// The peer's close frame, once received (code 1005, "no status", when it had none).
    pub fn peer_close(&self) -> Option<&CloseFrame> {
        self.peer_close.as_deref()
    }

    /// The error that failed the connection, if one did and it was not taken yet.
    pub fn failure(&self) -> Option<&Error> {
        self.failure.as_ref()
    }

    /// The error that failed the connection, if one did: kept (after
    /// [`poll_event`](Self::poll_event) reported it) until taken, so that an IO layer can
    /// report it once the teardown is over.
    pub fn take_failure(&mut self) -> Option<Error> {
        self.failure.take()
    }

    /// Whether the transport should be read: until [`is_done`](Self::is_done) (during the
    /// teardown what arrives is read and discarded) or the transport's end, except while
    /// [`Config::control_queue_capacity`](super::Config::control_queue_capacity) control
    /// frames (pongs, the close echo) wait for the transport: a ping flood from a peer that
    /// does not read then meets TCP backpressure instead of a growing queue. Nor while it
    /// [waits for memory from its budget](Self::waits_for_budget): its peer then meets
    /// TCP backpressure until the budget grants the connection more.
    ///
    /// Once the peer's end has been read, reading again would only find it again: an IO
    /// layer whose shutdown is still in progress (an HTTP/2 stream's end waits for the
    /// task that sends it) then waits for the shutdown or the deadline, not for a read
    /// that is always ready.
    #[inline]
    pub fn wants_read(&self) -> bool {
        !self.is_done()
            && !self.input_eof
            && !matches!(&self.phase, Phase::Teardown(t) if t.eof)
            && self.out.control_frames() < self.config.control_queue_capacity.max(1)
            && self.stall.is_none()
    }

    /// Whether the IO layer should shut the transport's write half down now (a TCP FIN,
    /// a TLS close_notify): the output is flushed, and the teardown rule says so.
    pub fn wants_shutdown(&self) -> bool {
        match &self.phase {
            Phase::Teardown(t) => {
                !t.shut_down
                    && !self.has_pending_output()
                    && (self.role == Role::Server || !t.clean || t.eof)
            }
            _ => false,
        }
    }

    /// The IO layer shut the write half down (or could not: the peer is gone either way).
    pub fn handle_shutdown(&mut self, now: Instant) {
        if let Phase::Teardown(t) = &mut self.phase {
            t.shut_down = true;
        }
        self.advance_teardown(now);
    }

    /// The transport reached its end (a read returned 0 bytes) at `now`.
    ///
    /// Before the close handshake completed this is RFC 6455 7.1.5's abnormal closure
    /// ("_The WebSocket Connection is Closed_" without a close frame, code 1006): once
    /// what arrived before it has been delivered, the connection fails with
    /// [`Error::Eof`], reported by [`poll_event`](Self::poll_event). During the teardown
    /// it is the peer's FIN.
    pub fn handle_eof(&mut self, now: Instant) {
        self.now = now;
        match &mut self.phase {
            Phase::Teardown(t) => {
                t.eof = true;
                self.advance_teardown(now);
            }
            Phase::Done => {}
            _ => self.input_eof = true,
        }
    }

    /// The input after the transport's end is used up: the abnormal closure, reported
    /// once (after a transport error the IO layer reports its own instead). After the
    /// peer's close (`auto_close` off, ours not sent) the connection is done without an
    /// error: the peer said goodbye, and nothing more could be received.
    pub(super) fn end_of_input(&mut self) -> Option<Error> {
        if !self.input_eof || self.is_closed() {
            return None;
        }
        self.clear_input();
        self.phase = Phase::Done;
        if self.transport_lost || self.close_in {
            return None;
        }
        self.latch(Error::Eof);
        self.failure_reported = true;
        Some(Error::Eof)
    }

    /// The transport failed (a read or write error): nothing more can be written or read,
    /// and what is queued to be written is dropped. What was received before the failure
    /// is still delivered, in order, as after the transport's end
    /// ([`handle_eof`](Self::handle_eof)): a peer that sent a few frames and hung up,
    /// whose hang-up made our answer to the first of them fail, is still heard out. Then
    /// the connection is done, with no error of its own: the IO layer reports the
    /// transport's. During the teardown it is done at once.
    pub fn handle_transport_error(&mut self) {
        self.transport_lost = true;
        self.out = super::OutQueue::default();
        self.sending = None;
        self.timers.write_blocked = None;
        if matches!(self.phase, Phase::Teardown(_) | Phase::Done) {
            self.phase = Phase::Done;
            self.clear_input();
        } else {
            self.input_eof = true;
        }
    }

    /// Received bytes during the teardown: counted and dropped (see the module docs).
    pub(super) fn discard_received(&mut self, n: usize) {
        if let Phase::Teardown(t) = &mut self.phase {
            t.discarded = t.discarded.saturating_add(n);
        }
        self.advance_teardown(self.now);
    }

    /// The deadline of the teardown, when it has one.
    pub(super) fn teardown_deadline(&self) -> Option<Instant> {
        match &self.phase {
            Phase::Teardown(t) => {
                let wait = if t.clean {
                    self.config.close_timeout
                } else {
                    self.config.linger_timeout
                };
                wait.map(|d| t.since + d)
            }
            _ => None,
        }
    }

    /// Ends the teardown when there is nothing left to wait for, or its deadline passed.
    pub(super) fn advance_teardown(&mut self, now: Instant) {
        let deadline = self.teardown_deadline();
        let Phase::Teardown(t) = &self.phase else {
            return;
        };
        let expired = deadline.is_some_and(|d| d <= now);
        let drained = !t.clean && t.discarded >= self.config.linger_bytes;
        // A peer that stops reading must not keep a connection whose output can never be
        // flushed: past the deadline it is dropped as it is.
        if expired || (t.shut_down && (t.eof || drained)) {
            self.phase = Phase::Done;
            self.clear_input();
        }
    }

    /// RFC 6455 7.1.2/7.1.4: our close was queued at `now`.
    pub(super) fn on_close_queued(&mut self, now: Instant) {
        self.close_queued = true;
        self.phase = match self.phase {
            Phase::Open if !self.close_in => Phase::CloseSent { since: now },
            Phase::Open | Phase::CloseReceived => Phase::Teardown(self.teardown(now, true)),
            ref other => other.clone(),
        };
        self.teardown_if_lost();
    }

    /// RFC 6455 7.1.3/7.1.4: the peer's close arrived.
    pub(super) fn on_close_received(&mut self, code: Option<CloseCode>, reason: &str) {
        self.close_in = true;
        self.peer_close = Some(Box::new(match code {
            Some(code) => CloseFrame::new(code, reason),
            // RFC 6455 7.1.5: "If this Close control frame contains no status code, _The
            // WebSocket Connection Close Code_ is considered to be 1005."
            None => CloseFrame::new(CloseCode(1005), ""),
        }));
        self.phase = match self.phase {
            Phase::CloseSent { .. } => Phase::Teardown(self.teardown(self.now, true)),
            ref other => other.clone(),
        };
        self.teardown_if_lost();
        if self.phase == Phase::Open {
            // RFC 6455 5.5.1: "If an endpoint receives a Close frame and did not
            // previously send a Close frame, the endpoint MUST send a Close frame in
            // response", typically echoing the status code.
            if self.config.auto_close {
                let _ = self.queue_close(code, "");
            } else {
                self.phase = Phase::CloseReceived;
            }
        }
    }

    /// RFC 6455 7.1.7: fails the connection with `e`: our close with the error's code and
    /// reason is queued when we have not sent one, and the teardown starts. The error is
    /// kept: the next [`poll_event`](Self::poll_event) reports it, and
    /// [`take_failure`](Self::take_failure) hands it over.
    pub(super) fn fail(&mut self, e: Error) {
        if self.is_closed() {
            return;
        }
        if !self.close_queued
            && let Some(code) = e.close_code()
        {
            let _ = self.queue_close(Some(code), e.close_reason());
        }
        // Our close went out long ago and the peer did not answer: lingering for it to
        // read our close would wait on a peer that is not there.
        let unanswered = e == Error::Timeout(super::Timeout::Close);
        self.latch(e);
        self.clear_input();
        let now = self.now;
        self.phase = if unanswered {
            Phase::Done
        } else {
            Phase::Teardown(self.teardown(now, false))
        };
        self.teardown_if_lost();
    }

    /// The teardown, begun at `now`, after a close handshake (`clean`) or a failure. The
    /// transport's end may have been read already, before the frames in front of it were
    /// decoded (a write that waits reads ahead): then the peer's FIN is not awaited
    /// again. Without this, a client whose read found the server's close echo and FIN in
    /// one go waited out the close timeout for a FIN that had come.
    fn teardown(&self, now: Instant, clean: bool) -> Teardown {
        Teardown {
            eof: self.input_eof,
            ..Teardown::new(now, clean)
        }
    }

    /// A teardown begun after the transport failed has nothing to carry out: done.
    fn teardown_if_lost(&mut self) {
        if self.transport_lost && matches!(self.phase, Phase::Teardown(_)) {
            self.phase = Phase::Done;
            self.clear_input();
        }
    }

    /// The latched error, the first time it is asked for (the event polls report it once).
    pub(super) fn report_failure(&mut self) -> Option<Error> {
        if self.failure_reported {
            return None;
        }
        let e = self.failure.clone()?;
        self.failure_reported = true;
        Some(e)
    }

    /// Keeps the first error that ended the connection.
    fn latch(&mut self, e: Error) {
        if self.failure.is_none() && !self.failure_reported {
            self.failure = Some(e);
        }
    }
}

impl Teardown {
    fn new(since: Instant, clean: bool) -> Self {
        Teardown {
            since,
            clean,
            shut_down: false,
            eof: false,
            discarded: 0,
        }
    }
}
