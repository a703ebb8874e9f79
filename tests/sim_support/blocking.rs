//! The application on the blocking layer: one thread's calls (`read`, `send` and its
//! forms, `ping`, `flush`, `close`, a `Close` message) in an order the run's choices
//! give, over [`SimStd`], which runs the peer whenever a call would wait. A socket
//! timeout (`WouldBlock`) is injected now and then, and is retried as applications do.

use rapidws::blocking::{CloseFrame, Error, Message, WebSocket};

use super::app::{Failure, Log, Outcome, RecvEnd, SendRec, classify};
use super::msg::{self, Msg};
use super::peer::Peer;
use super::rng::Rng;
use super::wire::SimStd;

pub type Sim = SimStd<Peer>;

struct App<'a> {
    plan: &'a mut Rng,
    log: Log,
    seq: usize,
    tight: bool,
}

impl App<'_> {
    fn message(&mut self) -> Msg {
        let tag = format!("a0.{}.", self.seq);
        self.seq += 1;
        let kind = msg::kind(self.plan);
        let len = if self.tight {
            self.plan.range(0, 300)
        } else {
            self.plan.size()
        };
        Msg::data(kind, msg::payload(self.plan, kind, &tag, len))
    }

    fn sent(&mut self, msg: Msg, r: Result<(), Error>) {
        let outcome = match r {
            Ok(()) => Outcome::Ok,
            // A socket timeout: the rest stays queued for the next call.
            Err(e) if e.is_would_block() => Outcome::Cancelled,
            Err(e) => {
                let f = classify(&e);
                if let Failure::Other(s) = &f {
                    self.log
                        .violations
                        .push(format!("a send of {msg:?} failed: {s}"));
                }
                Outcome::Err(f)
            }
        };
        self.log.sends.push(SendRec {
            task: 0,
            seq: self.seq - 1,
            msg,
            outcome,
        });
    }

    fn checked(&mut self, what: &str, r: Result<(), Error>) {
        if let Err(e) = r
            && !e.is_would_block()
            && let Failure::Other(s) = classify(&e)
        {
            self.log.violations.push(format!("{what} failed: {s}"));
        }
    }

    /// Logs what a `read` returned; true at the end.
    fn got(&mut self, r: Result<Option<Message>, Error>) -> bool {
        match r {
            Ok(Some(m)) => {
                let m = Msg::from_message(&m);
                if let Some(end) = &self.log.end {
                    let v = format!("{m:?} received after the end ({end:?})");
                    self.log.violations.push(v);
                }
                self.log.received.push(m);
                false
            }
            Ok(None) => {
                self.log.end.get_or_insert(RecvEnd::Clean);
                true
            }
            Err(e) if e.is_would_block() => false,
            Err(e) => {
                match &self.log.end {
                    Some(RecvEnd::InClose(_)) => {}
                    Some(end) => {
                        let v = format!("a second error {e:?} after the end ({end:?})");
                        self.log.violations.push(v);
                    }
                    None => self.log.end = Some(RecvEnd::Failed(classify(&e))),
                }
                true
            }
        }
    }
}

/// Runs the calls; returns the log and the transport (with the peer) to finish.
pub fn run(mut ws: WebSocket<Sim>, plan: &mut Rng, tight: bool) -> (Log, Sim) {
    let mut app = App {
        plan,
        log: Log::default(),
        seq: 0,
        tight,
    };
    let ops = app.plan.range(0, if tight { 30 } else { 80 });
    for _ in 0..ops {
        app.log.ops += 1;
        match app.plan.weighted(&[40, 14, 6, 6, 3, 5, 1, 1, 1]) {
            0 => {
                let r = ws.read();
                app.got(r);
            }
            1 => {
                let m = app.message();
                let r = ws.send(m.to_message());
                app.sent(m, r);
            }
            2 => {
                let m = app.message();
                let r = match m.kind {
                    msg::Kind::Text => ws.send_text(std::str::from_utf8(&m.data).expect("UTF-8")),
                    _ => ws.send_binary(&m.data),
                };
                app.sent(m, r);
            }
            3 => {
                let r = ws.flush();
                app.checked("flush", r);
            }
            4 => {
                let r = ws.ping(b"blocking ping");
                app.checked("ping", r);
            }
            5 => {
                // Sends fed through a small loop without reading, as a producer does.
                for _ in 0..app.plan.range(1, 8) {
                    let m = app.message();
                    let r = ws.send(m.to_message());
                    app.sent(m, r);
                }
            }
            6 => {
                app.log.discarded = true;
                let code = app.plan.pick(&[1000u16, 1001, 4001]);
                let r = ws.close(code, "blocking close");
                if app.log.end.is_none() {
                    app.log.end = Some(RecvEnd::InClose(r.as_ref().map(|_| ()).map_err(classify)));
                }
                app.checked("close", r);
            }
            7 => {
                let r = ws.send(Message::Close(Some(CloseFrame::new(1000, "message close"))));
                app.checked("send(Close)", r);
            }
            _ => break,
        }
    }
    if app.plan.chance(2, 3) {
        // Read until the end, as an application's last loop does.
        let mut ended = false;
        for _ in 0..1_000_000 {
            let r = ws.read();
            if app.got(r) {
                ended = true;
                break;
            }
        }
        if !ended {
            app.log.violations.push("the reads never ended".into());
        } else {
            loop {
                match ws.read() {
                    Err(e) if e.is_would_block() => continue,
                    Ok(None) => break,
                    other => {
                        let v = format!("a read after the end returned {other:?}");
                        app.log.violations.push(v);
                        break;
                    }
                }
            }
        }
    }
    let log = app.log;
    (log, ws.into_inner())
}
