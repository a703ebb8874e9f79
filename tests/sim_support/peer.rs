//! The scripted peer: the sans-IO `Connection` in the other role, sending a known sequence
//! of messages at known (virtual) times, answering as the protocol says, maybe echoing what
//! it receives, and ending the way its script says: a close handshake, a close and then a
//! hang-up or a reset, a hang-up or a reset without a close, or a half-close. It records
//! what it sent (with the offset in its byte stream where each frame ends, so that what
//! a cut transport let through is known exactly) and what it received.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use rapidws::Role;
use rapidws::codec::{CloseCode, MessageKind};
use rapidws::connection::{Config, Connection, Error, OwnedEvent, SendError};
use rapidws::deflate::{DeflateConfig, DeflateParams, PerMessageDeflate};

use super::msg::{self, Kind, Msg};
use super::rng::Rng;
use super::wire::{Net, PeerRead, Stepper};

/// How the peer's side of the connection ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// Its close, then the close handshake and the teardown of RFC 6455 7.1.1.
    Close { code: u16, then: AfterClose },
    /// It closes its socket without a close frame: once what it queued is written
    /// (`drain`), or at once, maybe inside a frame.
    HangUp { drain: bool },
    /// It shuts its write half down without a close frame, and reads on until the
    /// application's end.
    HalfClose { drain: bool },
    /// It resets the connection.
    Reset { drain: bool },
    /// It stops reading and writing, and keeps its socket open until the application's
    /// end: only the application's timers (keepalive, pong, close) end the connection.
    Freeze,
    /// It goes on reading but answers nothing (no pongs, no close: `auto_pong` and
    /// `auto_close` off from the start), never sends its close nor ends the transport:
    /// the application's keepalive or close timeout ends the connection.
    Silent,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AfterClose {
    /// The close handshake and the teardown.
    Handshake,
    /// It closes its socket once its close frame is written.
    HangUp,
    /// It resets the connection once its close frame is written.
    Reset,
}

#[derive(Clone, Debug)]
pub enum Action {
    /// A data message, in one frame or in fragments of these sizes.
    Send {
        kind: MessageKind,
        payload: bytes::Bytes,
        fragments: Vec<usize>,
    },
    Ping(Vec<u8>),
    Pong(Vec<u8>),
    /// Reading stops for this long (the application's sends meet backpressure).
    PauseRead(Duration),
    End(End),
}

/// The peer's script: actions at virtual times, ending with an [`End`].
#[derive(Clone, Debug)]
pub struct Script {
    pub actions: Vec<(Duration, Action)>,
    pub auto_close: bool,
    pub echo: bool,
}

impl Script {
    /// A script; `timers`: it may end by freezing or going silent, for a run whose
    /// timers are short.
    pub fn generate(rng: &mut Rng, tight: bool, timers: bool) -> Script {
        let n = match rng.weighted(&[10, 50, 30, 10]) {
            0 => 0,
            1 => rng.range(1, 8),
            2 => rng.range(8, 30),
            _ => rng.range(30, 120),
        };
        let mut t = Duration::ZERO;
        let mut actions = Vec::new();
        let mut sent = 0;
        for _ in 0..n {
            t += step(rng);
            let action = match rng.weighted(&[70, 10, 3, 7]) {
                0 => {
                    let kind = msg::kind(rng);
                    let len = if tight { rng.range(0, 200) } else { rng.size() };
                    let payload = msg::payload(rng, kind, &format!("p{sent}."), len);
                    sent += 1;
                    let fragments = if rng.chance(1, 4) {
                        msg::cuts(rng, payload.len())
                    } else {
                        vec![payload.len()]
                    };
                    Action::Send {
                        kind,
                        payload,
                        fragments,
                    }
                }
                1 => {
                    let p = format!("p{sent}.");
                    sent += 1;
                    Action::Ping(p.into_bytes())
                }
                2 => Action::Pong(b"unsolicited".to_vec()),
                _ => Action::PauseRead(Duration::from_micros(rng.range(1, 50_000) as u64)),
            };
            actions.push((t, action));
        }
        t += step(rng);
        let drain = rng.chance(2, 3);
        let end = match rng.weighted(&[55, 12, 12, 10, if timers { 40 } else { 0 }]) {
            0 => {
                let code = rng.pick(&[1000, 1000, 1001, 1008, 4000]);
                let then = match rng.weighted(&[40, 10, 5]) {
                    0 => AfterClose::Handshake,
                    1 => AfterClose::HangUp,
                    _ => AfterClose::Reset,
                };
                End::Close { code, then }
            }
            1 => End::HangUp { drain },
            2 => End::HalfClose { drain },
            3 => End::Reset { drain },
            _ if rng.chance(1, 2) => End::Freeze,
            _ => End::Silent,
        };
        actions.push((t, Action::End(end)));
        Script {
            actions,
            auto_close: rng.chance(3, 4),
            echo: rng.chance(1, 3),
        }
    }

    pub fn end(&self) -> End {
        match self.actions.last() {
            Some((_, Action::End(e))) => *e,
            _ => unreachable!("a script ends with its end"),
        }
    }
}

/// The time between two actions: often none (a burst), else up to 20 ms.
fn step(rng: &mut Rng) -> Duration {
    if rng.chance(1, 2) {
        Duration::ZERO
    } else {
        Duration::from_micros(rng.range(1, 20_000) as u64)
    }
}

/// A message the peer sent, and where its last frame ends in the peer's byte stream.
#[derive(Clone, Debug)]
pub struct Sent {
    pub msg: Msg,
    pub end: u64,
}

/// What the peer did and saw.
#[derive(Debug, Default)]
pub struct Record {
    /// Data messages and pings, in order.
    pub sent: Vec<Sent>,
    /// Its close frame, once queued, and where it ends.
    pub close_sent: Option<Sent>,
    /// Bytes it wrote into the transport.
    pub written: u64,
    /// Data messages received, in order.
    pub received: Vec<Msg>,
    /// Pings received.
    pub pings: usize,
    /// The application's close frame.
    pub close_received: Option<Msg>,
    /// The application's end of the transport arrived (its FIN).
    pub eof: bool,
    /// Errors its connection reported: the application's side broke the protocol.
    pub errors: Vec<String>,
    /// How it ended, when it did.
    pub ended: Option<&'static str>,
}

pub struct Peer {
    conn: Connection,
    start: Instant,
    script: VecDeque<(Duration, Action)>,
    /// The end action reached, carried out once its condition holds.
    ending: Option<End>,
    echo: bool,
    auto_close: bool,
    /// Encoded bytes not yet in the transport.
    out: VecDeque<u8>,
    /// Bytes taken from the connection in all.
    queued: u64,
    pause_until: Duration,
    /// The virtual time of the last step.
    last_now: Duration,
    /// Its FIN is out: nothing more is written.
    fin: bool,
    /// Its socket is closed or reset: nothing more happens.
    gone: bool,
    rng: Rng,
    pub record: Record,
}

impl Peer {
    pub fn new(role: Role, script: &Script, deflate: Option<DeflateAgreed>, rng: Rng) -> Peer {
        let start = Instant::now();
        let mut config = Config::default()
            .with_idle_timeout(None)
            .with_message_timeout(None)
            .with_budget(None)
            .with_linger(None, usize::MAX);
        config.keepalive_interval = None;
        config.close_timeout = None;
        config.auto_close = script.auto_close;
        if script.end() == End::Silent {
            // Silent from the start: a peer that answered pings would hold the
            // connection open for ever, as it may.
            config.auto_pong = false;
            config.auto_close = false;
        }
        let mut conn = Connection::new(role, config, start);
        if let Some(d) = deflate {
            conn.set_deflate(PerMessageDeflate::new(role, d.params, &d.settings));
        }
        Peer {
            conn,
            start,
            script: script.actions.iter().cloned().collect(),
            ending: None,
            echo: script.echo,
            auto_close: script.auto_close,
            out: VecDeque::new(),
            queued: 0,
            pause_until: Duration::ZERO,
            last_now: Duration::ZERO,
            fin: false,
            gone: false,
            rng,
            record: Record::default(),
        }
    }

    pub fn is_gone(&self) -> bool {
        self.gone
    }

    fn at(&self, now: Duration) -> Instant {
        self.start + now
    }

    /// Moves what the connection queued into `out`.
    fn take_output(&mut self) {
        let mut v = Vec::new();
        self.conn.write_pending(&mut v);
        if self.fin {
            return;
        }
        self.queued += v.len() as u64;
        self.out.extend(v);
    }

    fn act(&mut self, action: Action, now: Duration) {
        super::trace(|| match &action {
            Action::Send {
                kind,
                payload,
                fragments,
            } => format!(
                "{now:?} peer: send {:?} in {fragments:?}",
                Msg::data(*kind, payload.clone())
            ),
            other => format!("{now:?} peer: {other:?}"),
        });
        match action {
            Action::Send {
                kind,
                payload,
                fragments,
            } => {
                let r = if fragments.len() == 1 {
                    self.conn.send(kind, &payload)
                } else {
                    self.send_fragments(kind, &payload, &fragments)
                };
                if self.sent_ok(r) {
                    self.take_output();
                    let m = Msg::data(kind, payload);
                    self.record.sent.push(Sent {
                        msg: m,
                        end: self.queued,
                    });
                }
            }
            Action::Ping(p) => {
                let r = self.conn.ping(&p);
                if self.sent_ok(r) {
                    self.take_output();
                    self.record.sent.push(Sent {
                        msg: Msg {
                            kind: Kind::Ping,
                            data: p.into(),
                        },
                        end: self.queued,
                    });
                }
            }
            Action::Pong(p) => {
                let r = self.conn.pong(&p);
                if self.sent_ok(r) {
                    self.take_output();
                }
            }
            Action::PauseRead(d) => self.pause_until = now + d,
            Action::End(end) => {
                if let End::Close { code, .. } = end {
                    let reason = "script over";
                    let r = self.conn.close(self.at(now), CloseCode(code), reason);
                    if self.sent_ok(r) {
                        self.take_output();
                        self.record.close_sent = Some(Sent {
                            msg: Msg::close(code, reason),
                            end: self.queued,
                        });
                    }
                }
                self.ending = Some(end);
            }
        }
    }

    fn send_fragments(
        &mut self,
        kind: MessageKind,
        payload: &[u8],
        sizes: &[usize],
    ) -> Result<(), SendError> {
        self.conn.begin_message(kind)?;
        let mut at = 0;
        for (i, &n) in sizes.iter().enumerate() {
            let chunk = &payload[at..at + n];
            at += n;
            if i + 1 == sizes.len() {
                self.conn.end_message(chunk)?;
            } else {
                self.conn.send_chunk(chunk)?;
            }
        }
        Ok(())
    }

    /// Whether a send went through; `Closed` (the peer closed, or answered the
    /// application's close) is expected, anything else is a fault of the script.
    fn sent_ok(&mut self, r: Result<(), SendError>) -> bool {
        match r {
            Ok(()) => !self.fin,
            Err(SendError::Closed) => false,
            Err(e) => panic!("the peer's script made a bad send: {e:?}"),
        }
    }

    /// What the connection has for the peer.
    fn events(&mut self) {
        loop {
            let ev = self.conn.poll_event_owned();
            if let Some(ev) = &ev {
                super::trace(|| match ev {
                    Ok(OwnedEvent::Message { kind, data }) => {
                        format!("    peer got {:?}", Msg::data(*kind, data.clone()))
                    }
                    other => format!("    peer got {other:?}"),
                });
            }
            match ev {
                None => return,
                Some(Ok(OwnedEvent::Message { kind, data })) => {
                    let m = Msg::data(kind, data);
                    if self.echo && self.ending.is_none() {
                        let r = self.conn.send_bytes(kind, m.data.clone());
                        if self.sent_ok(r) {
                            self.take_output();
                            self.record.sent.push(Sent {
                                msg: m.clone(),
                                end: self.queued,
                            });
                        }
                    }
                    self.record.received.push(m);
                }
                Some(Ok(OwnedEvent::Ping(_))) => self.record.pings += 1,
                Some(Ok(OwnedEvent::Pong(_))) => {}
                Some(Ok(OwnedEvent::Close(c))) => {
                    let code = c.as_ref().map(|c| c.code.0);
                    self.record.close_received = Some(match c {
                        Some(c) => Msg::close(c.code.0, c.reason.as_str()),
                        None => Msg {
                            kind: Kind::Close,
                            data: Default::default(),
                        },
                    });
                    // The connection echoed it (its code, no reason): the peer's close.
                    if self.auto_close && self.record.close_sent.is_none() {
                        let before = self.queued;
                        self.take_output();
                        if self.queued > before {
                            let msg = match code {
                                Some(code) => Msg::close(code, ""),
                                None => Msg {
                                    kind: Kind::Close,
                                    data: Default::default(),
                                },
                            };
                            self.record.close_sent = Some(Sent {
                                msg,
                                end: self.queued,
                            });
                        }
                    }
                }
                Some(Ok(other)) => panic!("whole delivery gave {other:?}"),
                // The application went away without a close: allowed, the oracle judges it.
                Some(Err(Error::Eof)) => {}
                Some(Err(e)) => self.record.errors.push(format!("{e:?} ({e})")),
            }
        }
    }

    fn close_socket(&mut self, net: &mut Net, how: &'static str) {
        net.peer_close();
        self.gone = true;
        self.record.ended = Some(how);
        self.record.written = net.down.moved;
    }

    fn reset(&mut self, net: &mut Net, how: &'static str) {
        net.reset_both();
        self.gone = true;
        self.record.ended = Some(how);
        self.record.written = net.down.moved;
    }

    /// A one-line state, for a failure's report.
    pub fn describe(&self) -> String {
        format!(
            "peer: {:?}, ending {:?}, {} actions left (next at {:?}), {} B unwritten, \
             paused until {:?}, fin {}, gone {}",
            self.conn,
            self.ending,
            self.script.len(),
            self.script.front().map(|(t, _)| *t),
            self.out.len(),
            self.pause_until,
            self.fin,
            self.gone,
        )
    }
}

impl Stepper for Peer {
    /// One step at virtual time `now`: due actions, a read, a write, the teardown, the
    /// end. True when something happened.
    fn step(&mut self, net: &mut Net, now: Duration) -> bool {
        if self.gone {
            return false;
        }
        self.last_now = now;
        let mut progress = false;
        while self.ending.is_none() && self.script.front().is_some_and(|(at, _)| *at <= now) {
            let (_, action) = self.script.pop_front().expect("checked");
            self.act(action, now);
            net.moved();
            progress = true;
        }
        if self.ending == Some(End::Freeze) {
            // Frozen: it notices only that the application is gone.
            if net.app_dropped {
                self.close_socket(net, "froze, then saw the application go");
                return true;
            }
            return progress;
        }
        if now >= self.pause_until && self.conn.wants_read() {
            let max = self.rng.pick(&[1, 100, 4096, 1 << 20]);
            match net.peer_read(max) {
                PeerRead::Data(bytes) => {
                    self.conn.handle_bytes(self.at(now), &bytes);
                    progress = true;
                }
                PeerRead::Eof => {
                    self.conn.handle_eof(self.at(now));
                    self.record.eof = true;
                    progress = true;
                }
                PeerRead::Reset => {
                    self.conn.handle_transport_error();
                    progress = true;
                }
                PeerRead::Nothing => {}
            }
            self.events();
        }
        self.take_output();
        if !self.out.is_empty() {
            match net.peer_write(&self.out) {
                Ok(0) => {}
                Ok(n) => {
                    self.out.drain(..n);
                    progress = true;
                }
                Err(()) => {
                    self.out.clear();
                    self.conn.handle_transport_error();
                    self.events();
                    progress = true;
                }
            }
        }
        self.record.written = net.down.moved;
        if self.conn.wants_shutdown() && self.out.is_empty() {
            net.peer_fin();
            self.conn.handle_shutdown(self.at(now));
            progress = true;
        }
        let drained = self.out.is_empty();
        match self.ending {
            Some(End::HangUp { drain }) if drained || !drain => {
                self.close_socket(net, "hung up");
                return true;
            }
            Some(End::Reset { drain }) if drained || !drain => {
                self.reset(net, "reset");
                return true;
            }
            Some(End::HalfClose { drain }) if !self.fin && (drained || !drain) => {
                self.out.clear();
                self.fin = true;
                net.peer_fin();
                progress = true;
            }
            Some(End::Close {
                then: AfterClose::HangUp,
                ..
            }) if drained => {
                self.close_socket(net, "closed, then hung up");
                return true;
            }
            Some(End::Close {
                then: AfterClose::Reset,
                ..
            }) if drained => {
                self.reset(net, "closed, then reset");
                return true;
            }
            _ => {}
        }
        if self.conn.is_done() && (self.out.is_empty() || self.fin) {
            let how = if self.fin {
                "half-closed, then saw the end"
            } else {
                "connection done"
            };
            self.close_socket(net, how);
            return true;
        }
        if self.fin && self.record.eof {
            self.close_socket(net, "half-closed, then saw the end");
            return true;
        }
        progress
    }

    /// When the peer next has something to do on its own: its next action, or the end
    /// of a pause in reading.
    fn next_at(&self) -> Option<Duration> {
        if self.gone {
            return None;
        }
        let action = self
            .script
            .front()
            .filter(|_| self.ending.is_none())
            .map(|(t, _)| *t);
        let pause = Some(self.pause_until).filter(|&p| p > self.last_now);
        match (action, pause) {
            (Some(a), Some(p)) => Some(a.min(p)),
            (a, p) => a.or(p),
        }
    }
}

/// permessage-deflate as both ends agreed it.
#[derive(Clone)]
pub struct DeflateAgreed {
    pub params: DeflateParams,
    pub settings: DeflateConfig,
}
