//! The oracle: what the application's calls returned against what the peer sent and
//! received.
//!
//! - Receiving: the application got a prefix of what the peer's transport let through,
//!   each message once, in order, unchanged; all of it when nothing destroyed bytes in
//!   flight (no reset), no call discarded data (the whole socket's `close` does, by
//!   design) and a receive saw the end. A clean end (`Ok(None)`) only after the peer's
//!   close; the end of the transport (`UnexpectedEof`) only when the peer's close could
//!   not arrive; a reset error only after a reset.
//! - Sending: every message the peer got was sent by a call, once, unchanged, in each
//!   task's order; a call that returned `Ok` got its message through unless the transport
//!   was cut before it, in which case none of that task's later messages got through
//!   either; all of them when the peer read to the application's close or FIN and no
//!   reset happened.

use std::collections::{BTreeMap, BTreeSet};

use super::app::{Failure, Log, Outcome, RecvEnd};
use super::msg::{Kind, Msg};
use super::peer::Record;

/// What a run ended with, for the oracle.
pub struct Facts<'a> {
    pub peer: &'a Record,
    pub log: &'a Log,
    /// A reset destroyed bytes in flight (see `wire::Net::reset`).
    pub reset: bool,
    /// The application shut its write half down (it does so once all is written).
    pub app_shutdown: bool,
    /// Short timers: a timer may end the connection (its failure drops what was
    /// received and not yet delivered, by design).
    pub timers: bool,
}

/// What the oracle could check in a run, for the coverage figures.
#[derive(Clone, Copy, Debug, Default)]
pub struct Checked {
    /// Messages the application received, of those the peer's transport let through.
    pub delivered: usize,
    pub deliverable: usize,
    /// Every deliverable message was owed, and arrived.
    pub all_delivered: bool,
    /// Messages the peer received, of those sent with `Ok`.
    pub received: usize,
    pub sent_ok: usize,
    /// Every message sent with `Ok` was owed, and arrived.
    pub all_received: bool,
}

pub fn check(f: &Facts<'_>, v: &mut Vec<String>) -> Checked {
    let mut c = Checked::default();
    v.extend(f.log.violations.iter().cloned());
    for e in &f.peer.errors {
        v.push(format!(
            "the peer's connection failed on what the application sent: {e}"
        ));
    }
    receiving(f, v, &mut c);
    sending(f, v, &mut c);
    c
}

fn receiving(f: &Facts<'_>, v: &mut Vec<String>, c: &mut Checked) {
    let written = f.peer.written;
    let deliverable: Vec<&Msg> = f
        .peer
        .sent
        .iter()
        .filter(|s| s.end <= written)
        .map(|s| &s.msg)
        .collect();
    let got: Vec<&Msg> = f.log.received.iter().filter(|m| m.is_compared()).collect();
    c.deliverable = deliverable.len();
    c.delivered = got.len();
    for (i, m) in got.iter().enumerate() {
        match deliverable.get(i) {
            Some(d) if d == m => {}
            Some(d) => {
                v.push(format!(
                    "received message {i} is {m:?}, the peer's was {d:?} (received: {got:?})"
                ));
                return;
            }
            None => {
                v.push(format!(
                    "received message {i} {m:?} beyond the {} the peer's transport let \
                     through",
                    deliverable.len()
                ));
                return;
            }
        }
    }
    let close_deliverable = f.peer.close_sent.as_ref().filter(|s| s.end <= written);
    let closes: Vec<usize> = (0..f.log.received.len())
        .filter(|&i| f.log.received[i].kind == Kind::Close)
        .collect();
    match (closes.as_slice(), close_deliverable) {
        ([], _) => {}
        ([i], Some(sent)) => {
            if f.log.received[*i] != sent.msg {
                v.push(format!(
                    "the close received {:?} is not the peer's {:?}",
                    f.log.received[*i], sent.msg
                ));
            }
            if *i + 1 != f.log.received.len() {
                v.push(format!(
                    "messages after the peer's close: {:?}",
                    &f.log.received[*i + 1..]
                ));
            }
        }
        ([_], None) => v.push("a close received that the peer never let through".into()),
        (many, _) => v.push(format!("{} closes received", many.len())),
    }
    let close_got = !closes.is_empty();
    match &f.log.end {
        None => {}
        Some(RecvEnd::Clean) => {
            if close_deliverable.is_none() {
                v.push("a clean end without the peer's close".into());
            } else if !close_got && !f.log.discarded {
                v.push("a clean end, but the peer's close was never received".into());
            }
        }
        Some(RecvEnd::Failed(fail)) => match fail {
            Failure::Eof if close_deliverable.is_some() && !f.reset && !f.log.discarded => v.push(
                "UnexpectedEof although the peer's close came before the transport's end".into(),
            ),
            Failure::Eof => {}
            Failure::Reset if !f.reset => v.push("a reset error with no reset".into()),
            Failure::Reset => {}
            Failure::Abandoned => {}
            Failure::Timeout(_) if f.timers => {}
            other => v.push(format!("the receiving ended with {other:?}")),
        },
        Some(RecvEnd::InClose(r)) => match r {
            Ok(()) | Err(Failure::Eof) => {}
            Err(Failure::Reset) if f.reset => {}
            Err(Failure::Timeout(_)) if f.timers => {}
            Err(Failure::Abandoned) if f.log.abandoned => {}
            Err(other) => v.push(format!("close() ended with {other:?}")),
        },
    }
    // Everything the transport let through was owed when a receive saw the end, nothing
    // was destroyed in flight, no call discarded data and no failure of this side cut
    // the receiving short.
    let saw_end = matches!(f.log.end, Some(RecvEnd::Clean | RecvEnd::Failed(_)));
    let timed_out = matches!(f.log.end, Some(RecvEnd::Failed(Failure::Timeout(_))));
    if saw_end && !f.reset && !f.log.discarded && !f.log.abandoned && !timed_out {
        c.all_delivered = true;
        if got.len() != deliverable.len() {
            v.push(format!(
                "{} of the {} messages the peer's transport let through were received, \
                 then {:?} (missing from {:?})",
                got.len(),
                deliverable.len(),
                f.log.end,
                deliverable.get(got.len()),
            ));
        }
    }
}

/// `a3.17.` -> (3, 17).
fn parse_tag(m: &Msg) -> Option<(usize, usize)> {
    let tag = std::str::from_utf8(m.tag()).ok()?;
    let rest = tag.strip_prefix('a')?.strip_suffix('.')?;
    let (task, seq) = rest.split_once('.')?;
    Some((task.parse().ok()?, seq.parse().ok()?))
}

fn sending(f: &Facts<'_>, v: &mut Vec<String>, c: &mut Checked) {
    let mut by_id: BTreeMap<(usize, usize), &super::app::SendRec> = BTreeMap::new();
    for s in &f.log.sends {
        by_id.insert((s.task, s.seq), s);
    }
    let mut seen = BTreeSet::new();
    let mut last: BTreeMap<usize, usize> = BTreeMap::new();
    for m in f.peer.received.iter().filter(|m| m.is_data()) {
        let Some(id) = parse_tag(m) else {
            v.push(format!("the peer received {m:?}, which no call sent"));
            continue;
        };
        match by_id.get(&id) {
            None => v.push(format!("the peer received {m:?}, which no call sent")),
            Some(s) if s.msg != *m => v.push(format!(
                "the peer received {m:?} altered (sent {:?})",
                s.msg
            )),
            Some(_) => {}
        }
        if !seen.insert(id) {
            v.push(format!("the peer received {m:?} twice"));
        }
        if let Some(&prev) = last.get(&id.0)
            && prev >= id.1
        {
            v.push(format!(
                "the peer received task {}'s message {} after its message {prev}",
                id.0, id.1
            ));
        }
        last.insert(id.0, id.1);
    }
    c.received = seen.len();
    // The peer read to the application's close, or to its FIN after a shutdown (which the
    // IO layers make only once everything queued is written).
    let owed = !f.reset && (f.peer.close_received.is_some() || (f.app_shutdown && f.peer.eof));
    c.all_received = owed;
    let mut tasks: BTreeMap<usize, Vec<&super::app::SendRec>> = BTreeMap::new();
    for s in &f.log.sends {
        tasks.entry(s.task).or_default().push(s);
    }
    for (task, mut sends) in tasks {
        sends.sort_by_key(|s| s.seq);
        let mut cut: Option<usize> = None;
        for s in sends {
            let arrived = seen.contains(&(task, s.seq));
            if s.outcome == Outcome::Ok {
                c.sent_ok += 1;
            }
            if let Some(at) = cut
                && arrived
            {
                v.push(format!(
                    "task {task}'s message {} arrived though its message {at}, sent with \
                     Ok before it, did not",
                    s.seq
                ));
            }
            if s.outcome == Outcome::Ok && !arrived {
                cut.get_or_insert(s.seq);
                if owed {
                    v.push(format!(
                        "task {task}'s message {} ({:?}) was sent with Ok and never arrived, \
                         though the peer read to the application's {}",
                        s.seq,
                        s.msg,
                        if f.peer.close_received.is_some() {
                            "close"
                        } else {
                            "FIN"
                        }
                    ));
                }
            }
        }
    }
}
