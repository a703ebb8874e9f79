//! The application on the tokio layer: tasks that make the calls applications make, in
//! an order the run's choices give, on one current-thread runtime with a virtual clock.
//!
//! One task starts with the whole `WebSocket`: it receives (`recv`, `recv_ref`, `next`,
//! each also cancelled by a short sleep or polled once and dropped), sends (`send`,
//! `feed`, `flush`, `try_send`, the `Sink` calls, fragmented messages, pings, each also
//! cancelled), closes, and splits, with `into_split` or `futures`' `StreamExt::split`.
//! After a split it keeps the receiving half, a new task takes the sending half (and may
//! share it with helper tasks behind a mutex, as `Arc<Mutex<SplitSink>>` code does); the
//! halves are reunited, or either is dropped, as the choices say. Between calls a task
//! yields or sleeps a little, so that the tasks interleave differently from run to run.
//!
//! Everything received is logged in the order the calls returned it, with how the
//! receiving ended; every message sent with the call's outcome. The oracle (check.rs)
//! compares the logs with the peer's record.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{FutureExt, SinkExt, StreamExt};
use rapidws::connection::PreparedMessage;
use rapidws::handler::{Handler, Socket};
use rapidws::tokio::{CloseFrame, Error, Message, ReadHalf, TrySendError, WebSocket, WriteHalf};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::msg::{self, Msg};
use super::rng::Rng;
use super::wire::{Progress, SimStream};

pub type Ws = WebSocket<SimStream>;

/// How a call that failed failed, as the oracle judges it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The peer went away without a close (`UnexpectedEof`).
    Eof,
    /// The transport was reset, or a write met the peer's closed socket.
    Reset,
    /// The connection is closed.
    Closed,
    /// A fragmented message this side was sending was abandoned.
    Abandoned,
    /// `try_send` found the queue full (nothing was queued).
    QueueFull,
    /// A timer of the connection ended it (allowed only in a run with short timers).
    Timeout(String),
    /// Anything else: a protocol error, a timer, a refused send (the peer and the calls
    /// are well-behaved, so none is expected).
    Other(String),
}

pub fn classify(e: &Error) -> Failure {
    use std::io::ErrorKind as K;
    match e {
        Error::Io(io) if io.kind() == K::UnexpectedEof => Failure::Eof,
        Error::Io(io)
            if matches!(
                io.kind(),
                K::ConnectionReset | K::BrokenPipe | K::NotConnected | K::ConnectionAborted
            ) =>
        {
            Failure::Reset
        }
        Error::Closed => Failure::Closed,
        Error::Abandoned => Failure::Abandoned,
        Error::Timeout(t) => Failure::Timeout(format!("{t:?}")),
        other => Failure::Other(format!("{other:?}")),
    }
}

/// How the receiving ended, as the first receive call that found the end saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecvEnd {
    /// `Ok(None)`: the close handshake (or the peer's close, then the transport's end).
    Clean,
    Failed(Failure),
    /// Inside the whole socket's `close()`, which receives and discards until the end.
    InClose(Result<(), Failure>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    Err(Failure),
    /// Accepted but not yet the connection's: `feed` on `futures`' `SplitSink` returned
    /// `Ok` with the message in the sink's own one-message buffer (the next call on the
    /// sink that returns `Ok` hands it over, and the outcome becomes `Ok` then; dropping
    /// or reuniting the sink drops it, as `futures` does), or a handler callback's
    /// `Socket::send`, which reports no outcome of its own. A maybe, as `Cancelled`.
    Buffered,
    /// The call was cancelled (dropped) before it returned: the message may have been
    /// queued or not.
    Cancelled,
}

#[derive(Clone, Debug)]
pub struct SendRec {
    pub task: usize,
    pub seq: usize,
    pub msg: Msg,
    pub outcome: Outcome,
}

/// What the application's calls returned.
#[derive(Debug, Default)]
pub struct Log {
    /// Every message a receive call returned, in order.
    pub received: Vec<Msg>,
    pub end: Option<RecvEnd>,
    /// A call that discards received data messages ran (the whole socket's `close`).
    pub discarded: bool,
    pub sends: Vec<SendRec>,
    /// A fragmented send failed part way, abandoning its message (the connection then
    /// fails with `Abandoned`, by design).
    pub abandoned: bool,
    /// Calls made.
    pub ops: usize,
    /// Splits, reunions, shared writers: how much of the plan's shapes a run saw.
    pub shapes: Vec<&'static str>,
    /// What broke a promise, noticed while the calls ran.
    pub violations: Vec<String>,
}

/// The application's shared state: its choices, its log, its tasks.
pub struct App {
    plan: Mutex<Rng>,
    log: Mutex<Log>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    next_id: AtomicUsize,
    /// What each task is doing now (for a hang's report).
    status: Mutex<BTreeMap<usize, String>>,
    /// Small messages and fewer calls (the CI seeds, the fuzzer).
    tight: bool,
    /// Touched at every call begun and ended.
    progress: Arc<Progress>,
}

fn guard<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl App {
    pub fn new(plan: Rng, tight: bool, progress: Arc<Progress>) -> Arc<App> {
        Arc::new(App {
            progress,
            plan: Mutex::new(plan),
            log: Mutex::default(),
            tasks: Mutex::default(),
            next_id: AtomicUsize::new(0),
            status: Mutex::default(),
            tight,
        })
    }

    pub fn log(&self) -> MutexGuard<'_, Log> {
        guard(&self.log)
    }

    pub fn task(self: &Arc<Self>) -> Task {
        Task {
            app: self.clone(),
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            seq: 0,
        }
    }

    /// Starts the application: one task with the whole socket.
    pub fn start(self: &Arc<Self>, ws: Ws) {
        let t = self.task();
        guard(&self.tasks).push(tokio::spawn(main_task(t, ws)));
    }

    /// Waits for every task, those started meanwhile too; a task's panic goes on here.
    pub async fn join(&self) {
        loop {
            let next = guard(&self.tasks).pop();
            let Some(h) = next else { return };
            if let Err(e) = h.await {
                std::panic::resume_unwind(e.into_panic());
            }
        }
    }

    /// What each task was doing, for a hang's report.
    pub fn describe(&self) -> String {
        guard(&self.status)
            .iter()
            .map(|(id, s)| format!("task {id}: {s}"))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// One task's handle on the application.
pub struct Task {
    app: Arc<App>,
    id: usize,
    seq: usize,
}

impl Task {
    fn rng<T>(&self, f: impl FnOnce(&mut Rng) -> T) -> T {
        f(&mut guard(&self.app.plan))
    }

    fn chance(&self, num: u64, den: u64) -> bool {
        self.rng(|r| r.chance(num, den))
    }

    fn weighted(&self, w: &[u32]) -> usize {
        self.rng(|r| r.weighted(w))
    }

    fn ops(&self) -> usize {
        let max = if self.app.tight { 30 } else { 80 };
        self.rng(|r| r.range(0, max))
    }

    fn short(&self) -> Duration {
        Duration::from_micros(self.rng(|r| r.range(0, 3000)) as u64)
    }

    fn status(&self, s: impl Into<String>) {
        let s = s.into();
        super::trace(|| format!("{:?} task {}: {s}", tokio::time::Instant::now(), self.id));
        guard(&self.app.status).insert(self.id, s);
        self.app.progress.touch();
        self.app.log().ops += 1;
    }

    fn shape(&self, s: &'static str) {
        self.app.log().shapes.push(s);
    }

    fn violation(&self, s: String) {
        self.app
            .log()
            .violations
            .push(format!("task {}: {s}", self.id));
    }

    /// Yields or sleeps a little between calls, or goes straight on.
    async fn between(&self) {
        match self.weighted(&[50, 30, 20]) {
            0 => {}
            1 => tokio::task::yield_now().await,
            _ => tokio::time::sleep(self.short()).await,
        }
    }

    /// The next message this task sends, tagged with the task and its place.
    fn message(&mut self) -> Msg {
        let tag = format!("a{}.{}.", self.id, self.seq);
        self.seq += 1;
        let tight = self.app.tight;
        self.rng(|r| {
            let kind = msg::kind(r);
            let len = if tight { r.range(0, 300) } else { r.size() };
            Msg::data(kind, msg::payload(r, kind, &tag, len))
        })
    }

    /// Logs the send of the message [`message`](Self::message) made last.
    fn sent(&self, msg: Msg, outcome: Outcome) -> bool {
        let seq = self.seq - 1;
        super::trace(|| format!("    task {}: sent {msg:?}: {outcome:?}", self.id));
        if let Outcome::Err(Failure::Other(e)) = &outcome {
            self.violation(format!("a send of {msg:?} failed: {e}"));
        }
        let ok = outcome == Outcome::Ok;
        self.app.log().sends.push(SendRec {
            task: self.id,
            seq,
            msg,
            outcome,
        });
        ok
    }

    /// Sets the outcome of the send of message `seq` of task `task`.
    fn set_outcome(&self, (task, seq): (usize, usize), outcome: Outcome) {
        let mut log = self.app.log();
        if let Some(s) = log
            .sends
            .iter_mut()
            .rev()
            .find(|s| s.task == task && s.seq == seq)
        {
            s.outcome = outcome;
        }
    }

    fn sent_result(&self, msg: Msg, r: Result<(), Error>) -> bool {
        let outcome = match r {
            Ok(()) => Outcome::Ok,
            Err(e) => Outcome::Err(self.failure(&e)),
        };
        self.sent(msg, outcome)
    }

    /// A failure of a call that is not a receive: judged, then returned.
    fn failure(&self, e: &Error) -> Failure {
        let f = classify(e);
        if f == Failure::Abandoned && !self.app.log().abandoned {
            self.violation(format!(
                "Abandoned with no fragmented send abandoned: {e:?}"
            ));
        }
        f
    }

    /// Judges the result of a call that is not a send or a receive; true for `Ok`.
    fn checked(&self, what: &str, r: Result<(), Error>) -> bool {
        super::trace(|| format!("    task {}: {what}: {r:?}", self.id));
        match r {
            Ok(()) => true,
            Err(e) => {
                if let Failure::Other(s) = self.failure(&e) {
                    self.violation(format!("{what} failed: {s}"));
                }
                false
            }
        }
    }

    /// Logs what a receive call returned.
    fn got(&self, r: Result<Option<Msg>, Error>) {
        super::trace(|| format!("    task {}: got {r:?}", self.id));
        let mut log = self.app.log();
        match r {
            Ok(Some(m)) => {
                if let Some(end) = &log.end {
                    let v = format!("task {}: {m:?} received after the end ({end:?})", self.id);
                    log.violations.push(v);
                }
                log.received.push(m);
            }
            Ok(None) => {
                if log.end.is_none() {
                    log.end = Some(RecvEnd::Clean);
                }
            }
            Err(e) => {
                let f = classify(&e);
                if f == Failure::Abandoned && !log.abandoned {
                    let v = format!("task {}: Abandoned, with nothing abandoned", self.id);
                    log.violations.push(v);
                }
                match &log.end {
                    Some(RecvEnd::InClose(_)) => {}
                    Some(end) => {
                        let v = format!(
                            "task {}: a second error {e:?} after the end ({end:?})",
                            self.id
                        );
                        log.violations.push(v);
                    }
                    None => log.end = Some(RecvEnd::Failed(f)),
                }
            }
        }
    }

    fn spawn(&self, f: impl Future<Output = ()> + Send + 'static) {
        guard(&self.app.tasks).push(tokio::spawn(f));
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        guard(&self.app.status).insert(self.id, "done".into());
    }
}

// ----- receiving -------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
enum ReadOp {
    Recv,
    RecvRef,
    Next,
    /// `recv` against a short sleep in `select!`.
    RecvCancel,
    /// `recv` polled once (a noop waker registered) and dropped.
    RecvOnce,
}

const READ_OPS: [ReadOp; 5] = [
    ReadOp::Recv,
    ReadOp::RecvRef,
    ReadOp::Next,
    ReadOp::RecvCancel,
    ReadOp::RecvOnce,
];
const READ_WEIGHTS: [u32; 5] = [20, 6, 6, 8, 3];

/// What receives: the whole socket, `into_split`'s half, or `futures`' half.
enum RRef<'a> {
    Whole(&'a mut Ws),
    Half(&'a mut ReadHalf<SimStream>),
    Stream(&'a mut SplitStream<Ws>),
}

type Received = Result<Option<Msg>, Error>;

fn owned(r: Result<Option<Message>, Error>) -> Received {
    r.map(|m| m.map(|m| Msg::from_message(&m)))
}

impl RRef<'_> {
    async fn recv(&mut self) -> Received {
        match self {
            RRef::Whole(ws) => owned(ws.recv().await),
            RRef::Half(h) => owned(h.recv().await),
            RRef::Stream(s) => owned(s.next().await.transpose()),
        }
    }

    async fn recv_ref(&mut self) -> Received {
        match self {
            RRef::Whole(ws) => ws.recv_ref().await.map(|m| m.map(|m| Msg::from_ref(&m))),
            RRef::Half(h) => h.recv_ref().await.map(|m| m.map(|m| Msg::from_ref(&m))),
            RRef::Stream(s) => owned(s.next().await.transpose()),
        }
    }

    async fn next(&mut self) -> Received {
        match self {
            RRef::Whole(ws) => owned(ws.next().await.transpose()),
            RRef::Half(h) => owned(h.next().await.transpose()),
            RRef::Stream(s) => owned(s.next().await.transpose()),
        }
    }
}

async fn read_op(t: &Task, mut r: RRef<'_>, op: ReadOp) {
    t.status(format!("{op:?}"));
    match op {
        ReadOp::Recv => t.got(r.recv().await),
        ReadOp::RecvRef => t.got(r.recv_ref().await),
        ReadOp::Next => t.got(r.next().await),
        ReadOp::RecvCancel => {
            let d = t.short();
            tokio::select! {
                biased;
                got = r.recv() => t.got(got),
                _ = tokio::time::sleep(d) => {}
            }
        }
        ReadOp::RecvOnce => {
            if let Some(got) = r.recv().now_or_never() {
                t.got(got);
            }
        }
    }
}

/// Receives until the end, as an application's last loop does.
async fn drain(t: &Task, mut r: RRef<'_>) {
    t.status("draining");
    for _ in 0..1_000_000 {
        let got = r.recv().await;
        let end = !matches!(got, Ok(Some(_)));
        t.got(got);
        if end {
            // Every later call returns `Ok(None)`.
            let again = r.recv().await;
            if !matches!(again, Ok(None)) {
                t.violation(format!("a receive after the end returned {again:?}"));
            }
            return;
        }
    }
    t.violation("the receive never ended".into());
}

// ----- sending ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
enum WriteOp {
    Send,
    Feed,
    Flush,
    TrySend,
    SinkSend,
    SinkFeed,
    SinkFlush,
    Ping,
    Fragmented,
    /// `send` against a short sleep in `select!`.
    SendCancel,
    /// `send` polled once and dropped.
    SendOnce,
    /// The close call of the type (the whole socket's receives until the end).
    Close,
    SinkClose,
    TryClose,
    /// `Message::Close` through `send`.
    CloseMessage,
    /// A prepared message: `send_prepared`, `feed_prepared` or `try_send_prepared`.
    Prepared,
    /// A fragmented message begun and abandoned: its writer dropped after a chunk (the
    /// connection then fails with `Abandoned` and close code 1011, by design).
    Abandon,
}

const WRITE_OPS: [WriteOp; 17] = [
    WriteOp::Send,
    WriteOp::Feed,
    WriteOp::Flush,
    WriteOp::TrySend,
    WriteOp::SinkSend,
    WriteOp::SinkFeed,
    WriteOp::SinkFlush,
    WriteOp::Ping,
    WriteOp::Fragmented,
    WriteOp::SendCancel,
    WriteOp::SendOnce,
    WriteOp::Close,
    WriteOp::SinkClose,
    WriteOp::TryClose,
    WriteOp::CloseMessage,
    WriteOp::Prepared,
    WriteOp::Abandon,
];
const WRITE_WEIGHTS: [u32; 17] = [14, 8, 5, 6, 5, 3, 3, 2, 3, 3, 2, 1, 1, 1, 1, 4, 1];

/// What sends: the whole socket, `into_split`'s half, or `futures`' half.
enum WRef<'a> {
    Whole(&'a mut Ws),
    Half(&'a mut WriteHalf<SimStream>),
    /// With the message in the sink's buffer, if any (see [`Outcome::Buffered`]).
    Sink(
        &'a mut SplitSink<Ws, Message>,
        &'a mut Option<(usize, usize)>,
    ),
}

/// The two fragmented-message writers (of a whole socket and of a write half), which the
/// library gives the same `send_chunk` and `finish` but no common trait.
trait FragmentWriter {
    async fn chunk(&mut self, data: &[u8]) -> Result<(), Error>;
    async fn end(self, data: &[u8]) -> Result<(), Error>;
}

impl FragmentWriter for rapidws::tokio::MessageWriter<'_, SimStream> {
    async fn chunk(&mut self, data: &[u8]) -> Result<(), Error> {
        self.send_chunk(data).await
    }
    async fn end(self, data: &[u8]) -> Result<(), Error> {
        self.finish(data).await
    }
}

impl FragmentWriter for rapidws::tokio::HalfMessageWriter<'_, SimStream> {
    async fn chunk(&mut self, data: &[u8]) -> Result<(), Error> {
        self.send_chunk(data).await
    }
    async fn end(self, data: &[u8]) -> Result<(), Error> {
        self.finish(data).await
    }
}

/// Sends `data` as one fragment per size in `sizes` (they add up to its length), the
/// last one finishing the message. A writer that fails part way is dropped unfinished.
async fn write_fragments(
    mut wr: impl FragmentWriter,
    data: &[u8],
    sizes: &[usize],
) -> Result<(), Error> {
    let (chunks, last) = sizes.split_at(sizes.len() - 1);
    let mut at = 0;
    for &n in chunks {
        wr.chunk(&data[at..at + n]).await?;
        at += n;
    }
    wr.end(&data[at..at + last[0]]).await
}

pub enum Writer {
    Half(WriteHalf<SimStream>),
    Sink(SplitSink<Ws, Message>, Option<(usize, usize)>),
}

impl Writer {
    fn as_ref(&mut self) -> WRef<'_> {
        match self {
            Writer::Half(h) => WRef::Half(h),
            Writer::Sink(s, slot) => WRef::Sink(s, slot),
        }
    }
}

impl WRef<'_> {
    async fn send(&mut self, m: Message) -> Result<(), Error> {
        match self {
            WRef::Whole(ws) => WebSocket::send(ws, m).await,
            WRef::Half(h) => WriteHalf::send(h, m).await,
            WRef::Sink(s, _) => SinkExt::send(&mut **s, m).await,
        }
    }

    async fn sink_send(&mut self, m: Message) -> Result<(), Error> {
        match self {
            WRef::Whole(ws) => SinkExt::send(&mut **ws, m).await,
            WRef::Half(h) => SinkExt::send(&mut **h, m).await,
            WRef::Sink(s, _) => SinkExt::send(&mut **s, m).await,
        }
    }

    async fn feed(&mut self, m: Message) -> Result<(), Error> {
        match self {
            WRef::Whole(ws) => WebSocket::feed(ws, m).await,
            WRef::Half(h) => WriteHalf::feed(h, m).await,
            WRef::Sink(s, _) => SinkExt::feed(&mut **s, m).await,
        }
    }

    async fn sink_feed(&mut self, m: Message) -> Result<(), Error> {
        match self {
            WRef::Whole(ws) => SinkExt::feed(&mut **ws, m).await,
            WRef::Half(h) => SinkExt::feed(&mut **h, m).await,
            WRef::Sink(s, _) => SinkExt::feed(&mut **s, m).await,
        }
    }

    async fn flush(&mut self) -> Result<(), Error> {
        match self {
            WRef::Whole(ws) => WebSocket::flush(ws).await,
            WRef::Half(h) => WriteHalf::flush(h).await,
            WRef::Sink(s, _) => SinkExt::flush(&mut **s).await,
        }
    }

    async fn sink_flush(&mut self) -> Result<(), Error> {
        match self {
            WRef::Whole(ws) => SinkExt::flush(&mut **ws).await,
            WRef::Half(h) => SinkExt::flush(&mut **h).await,
            WRef::Sink(s, _) => SinkExt::flush(&mut **s).await,
        }
    }

    async fn sink_close(&mut self) -> Result<(), Error> {
        match self {
            WRef::Whole(ws) => SinkExt::close(&mut **ws).await,
            WRef::Half(h) => SinkExt::close(&mut **h).await,
            WRef::Sink(s, _) => SinkExt::close(&mut **s).await,
        }
    }
}

async fn write_op(t: &mut Task, mut w: WRef<'_>, op: WriteOp) {
    let ok = write_op_inner(t, &mut w, op).await;
    if let WRef::Sink(_, slot) = w {
        // A call that returned `Ok` polled the sink ready: the message in its buffer went
        // to the connection. After an error or a cancellation it may have gone or not
        // (an error handing it over drops it): it stays `Buffered`.
        if let Some(id) = slot.take()
            && ok
        {
            t.set_outcome(id, Outcome::Ok);
        }
        if ok && matches!(op, WriteOp::Feed | WriteOp::SinkFeed | WriteOp::TrySend) {
            let id = (t.id, t.seq - 1);
            t.set_outcome(id, Outcome::Buffered);
            *slot = Some(id);
        }
    }
}

/// Runs the call; true when it returned `Ok`.
async fn write_op_inner(t: &mut Task, w: &mut WRef<'_>, op: WriteOp) -> bool {
    t.status(format!("{op:?}"));
    match op {
        WriteOp::Send => {
            let m = t.message();
            let r = w.send(m.to_message()).await;
            t.sent_result(m, r)
        }
        WriteOp::SinkSend => {
            let m = t.message();
            let r = w.sink_send(m.to_message()).await;
            t.sent_result(m, r)
        }
        WriteOp::Feed => {
            let m = t.message();
            let r = w.feed(m.to_message()).await;
            t.sent_result(m, r)
        }
        WriteOp::SinkFeed => {
            let m = t.message();
            let r = w.sink_feed(m.to_message()).await;
            t.sent_result(m, r)
        }
        WriteOp::Flush => t.checked("flush", w.flush().await),
        WriteOp::SinkFlush => t.checked("Sink::flush", w.sink_flush().await),
        WriteOp::TrySend => {
            let m = t.message();
            let r = match w {
                WRef::Whole(ws) => WebSocket::try_send(ws, m.to_message()),
                WRef::Half(h) => WriteHalf::try_send(h, m.to_message()),
                WRef::Sink(..) => {
                    let r = w.sink_feed(m.to_message()).await;
                    return t.sent_result(m, r);
                }
            };
            let outcome = match r {
                Ok(()) => Outcome::Ok,
                Err(TrySendError::QueueFull(_)) => Outcome::Err(Failure::QueueFull),
                Err(TrySendError::Failed(e)) => Outcome::Err(t.failure(&e)),
                Err(e) => Outcome::Err(Failure::Other(format!("{e:?}"))),
            };
            t.sent(m, outcome)
        }
        WriteOp::Ping => {
            let p = format!("ping from {}", t.id);
            let r = w.send(Message::Ping(p.into())).await;
            t.checked("ping", r)
        }
        WriteOp::Fragmented => {
            let m = t.message();
            let sizes = t.rng(|r| msg::cuts(r, m.data.len()));
            let kind = match m.kind {
                msg::Kind::Text => rapidws::tokio::MessageKind::Text,
                _ => rapidws::tokio::MessageKind::Binary,
            };
            let r = match w {
                WRef::Whole(ws) => match ws.begin_message(kind) {
                    Ok(wr) => write_fragments(wr, &m.data, &sizes).await,
                    Err(e) => Err(e),
                },
                WRef::Half(h) => match h.begin_message(kind) {
                    Ok(wr) => write_fragments(wr, &m.data, &sizes).await,
                    Err(e) => Err(e),
                },
                WRef::Sink(..) => w.send(m.to_message()).await,
            };
            // A writer that fails part way is dropped unfinished, and abandons its message
            // (documented): unless the transport failed, after which nothing is written
            // anyway and the transport's error is the one to report.
            if let Err(e) = &r
                && !matches!(classify(e), Failure::Reset | Failure::Eof)
            {
                t.app.log().abandoned = true;
            }
            t.sent_result(m, r)
        }
        WriteOp::SendCancel => {
            let m = t.message();
            let d = t.short();
            tokio::select! {
                biased;
                r = w.send(m.to_message()) => t.sent_result(m, r),
                _ = tokio::time::sleep(d) => t.sent(m, Outcome::Cancelled),
            }
        }
        WriteOp::SendOnce => {
            let m = t.message();
            match w.send(m.to_message()).now_or_never() {
                Some(r) => t.sent_result(m, r),
                None => t.sent(m, Outcome::Cancelled),
            }
        }
        WriteOp::Close => {
            let code = t.rng(|r| r.pick(&[1000u16, 1001, 4001]));
            match w {
                WRef::Whole(ws) => {
                    t.app.log().discarded = true;
                    let r = WebSocket::close(ws, code, "app close").await;
                    let mut log = t.app.log();
                    if log.end.is_none() {
                        let end = r.as_ref().map(|_| ()).map_err(classify);
                        log.end = Some(RecvEnd::InClose(end));
                    }
                    drop(log);
                    t.checked("close", r)
                }
                WRef::Half(h) => {
                    let r = WriteHalf::close(h, code, "half close").await;
                    t.checked("WriteHalf::close", r)
                }
                WRef::Sink(..) => t.checked("Sink::close", w.sink_close().await),
            }
        }
        WriteOp::SinkClose => t.checked("Sink::close", w.sink_close().await),
        WriteOp::TryClose => match w {
            WRef::Half(h) => t.checked("try_close", WriteHalf::try_close(h, 1000, "try close")),
            _ => t.checked("Sink::close", w.sink_close().await),
        },
        WriteOp::CloseMessage => {
            let frame = CloseFrame::new(1000, "message close");
            let r = w.send(Message::Close(Some(frame))).await;
            t.checked("send(Close)", r)
        }
        WriteOp::Prepared => {
            let m = t.message();
            let p = match m.kind {
                msg::Kind::Text => {
                    PreparedMessage::text(std::str::from_utf8(&m.data).expect("UTF-8"))
                }
                _ => PreparedMessage::binary(&m.data),
            };
            let how = t.rng(|r| r.below(3));
            let r = match (w, how) {
                (WRef::Whole(ws), 0) => ws.send_prepared(&p).await,
                (WRef::Whole(ws), 1) => ws.feed_prepared(&p).await,
                (WRef::Whole(ws), _) => match ws.try_send_prepared(&p) {
                    Ok(()) => Ok(()),
                    Err(TrySendError::QueueFull(_)) => {
                        return t.sent(m, Outcome::Err(Failure::QueueFull));
                    }
                    Err(TrySendError::Failed(e)) => Err(e),
                    Err(e) => return t.sent(m, Outcome::Err(Failure::Other(format!("{e:?}")))),
                },
                (WRef::Half(h), 0) => h.send_prepared(&p).await,
                (WRef::Half(h), 1) => h.feed_prepared(&p).await,
                (WRef::Half(h), _) => match h.try_send_prepared(&p) {
                    Ok(()) => Ok(()),
                    Err(TrySendError::QueueFull(_)) => {
                        return t.sent(m, Outcome::Err(Failure::QueueFull));
                    }
                    Err(TrySendError::Failed(e)) => Err(e),
                    Err(e) => return t.sent(m, Outcome::Err(Failure::Other(format!("{e:?}")))),
                },
                (w @ WRef::Sink(..), _) => w.send(m.to_message()).await,
            };
            t.sent_result(m, r)
        }
        WriteOp::Abandon => {
            let m = t.message();
            let kind = match m.kind {
                msg::Kind::Text => rapidws::tokio::MessageKind::Text,
                _ => rapidws::tokio::MessageKind::Binary,
            };
            let cut = t.rng(|r| r.range(1, m.data.len().max(1)));
            let first = &m.data[..cut.min(m.data.len())];
            let r = match w {
                WRef::Whole(ws) => match ws.begin_message(kind) {
                    Ok(mut wr) => {
                        let r = wr.send_chunk(first).await;
                        t.app.log().abandoned = true;
                        drop(wr);
                        r
                    }
                    Err(e) => Err(e),
                },
                WRef::Half(h) => match h.begin_message(kind) {
                    Ok(mut wr) => {
                        let r = wr.send_chunk(first).await;
                        t.app.log().abandoned = true;
                        drop(wr);
                        r
                    }
                    Err(e) => Err(e),
                },
                WRef::Sink(..) => return t.checked("Sink::flush", w.sink_flush().await),
            };
            t.checked("an abandoned message's chunk", r);
            t.sent(m, Outcome::Err(Failure::Abandoned))
        }
    }
}

// ----- the tasks -------------------------------------------------------------------------

// One per run, moved only when it is split or reunited.
#[allow(clippy::large_enum_variant)]
enum Reader {
    Whole(Ws),
    Half(ReadHalf<SimStream>),
    Stream(SplitStream<Ws>),
}

/// The first task: the whole socket, then the receiving half after a split; or, now and
/// then, the handler API's loop (`handler::run`) with callbacks that log and reply.
async fn main_task(mut t: Task, ws: Ws) {
    if t.chance(1, 8) {
        t.status("handler::run");
        t.shape("handler");
        let mut h = SimHandler { t, closing: false };
        if let Err(e) = rapidws::handler::run(ws, &mut h).await
            && matches!(e, rapidws::handler::Error::Panicked)
        {
            h.t.violation("a handler callback panicked".into());
        }
        return;
    }
    let mut r = Reader::Whole(ws);
    let mut back: Option<oneshot::Receiver<Writer>> = None;
    for _ in 0..t.ops() {
        t.between().await;
        r = match r {
            Reader::Whole(mut ws) => {
                // Receives, sends, the two splits, or the end.
                match t.weighted(&[45, 45, 4, 4, 1]) {
                    0 => {
                        let op = READ_OPS[t.weighted(&READ_WEIGHTS)];
                        read_op(&t, RRef::Whole(&mut ws), op).await;
                        Reader::Whole(ws)
                    }
                    1 => {
                        let op = WRITE_OPS[t.weighted(&WRITE_WEIGHTS)];
                        write_op(&mut t, WRef::Whole(&mut ws), op).await;
                        Reader::Whole(ws)
                    }
                    2 => {
                        t.status("into_split");
                        t.shape("into_split");
                        let (rd, wr) = ws.into_split();
                        let (tx, rx) = oneshot::channel();
                        back = Some(rx);
                        let w = t.app.task();
                        t.spawn(writer_task(w, Writer::Half(wr), tx));
                        Reader::Half(rd)
                    }
                    3 => {
                        t.status("StreamExt::split");
                        t.shape("futures split");
                        let (sink, stream) = ws.split();
                        let (tx, rx) = oneshot::channel();
                        back = Some(rx);
                        let w = t.app.task();
                        t.spawn(writer_task(w, Writer::Sink(sink, None), tx));
                        Reader::Stream(stream)
                    }
                    _ => {
                        t.status("dropped the socket");
                        return;
                    }
                }
            }
            Reader::Half(mut rd) => match t.weighted(&[90, 6, 1]) {
                0 => {
                    let op = READ_OPS[t.weighted(&READ_WEIGHTS)];
                    read_op(&t, RRef::Half(&mut rd), op).await;
                    Reader::Half(rd)
                }
                1 if back.is_some() => {
                    t.status("waiting for the WriteHalf to reunite");
                    match back.take().expect("checked").await {
                        Ok(Writer::Half(wr)) => match rd.reunite(wr) {
                            Ok(ws) => {
                                t.shape("reunite");
                                Reader::Whole(ws)
                            }
                            Err(_) => {
                                t.violation("reunite refused the halves of one socket".into());
                                return;
                            }
                        },
                        Ok(Writer::Sink(..)) => unreachable!("into_split gives a WriteHalf"),
                        // The writer dropped its half.
                        Err(_) => Reader::Half(rd),
                    }
                }
                1 => Reader::Half(rd),
                _ => {
                    t.status("dropped the ReadHalf");
                    t.shape("ReadHalf dropped");
                    return;
                }
            },
            Reader::Stream(mut st) => match t.weighted(&[90, 6, 1]) {
                0 => {
                    let op = READ_OPS[t.weighted(&READ_WEIGHTS)];
                    read_op(&t, RRef::Stream(&mut st), op).await;
                    Reader::Stream(st)
                }
                1 if back.is_some() => {
                    t.status("waiting for the SplitSink to reunite");
                    match back.take().expect("checked").await {
                        Ok(Writer::Sink(sink, _)) => match st.reunite(sink) {
                            Ok(ws) => {
                                t.shape("futures reunite");
                                Reader::Whole(ws)
                            }
                            Err(_) => {
                                t.violation("reunite refused the halves of one socket".into());
                                return;
                            }
                        },
                        Ok(Writer::Half(_)) => unreachable!("StreamExt::split gives a SplitSink"),
                        Err(_) => Reader::Stream(st),
                    }
                }
                1 => Reader::Stream(st),
                _ => {
                    t.status("dropped the SplitStream");
                    t.shape("SplitStream dropped");
                    return;
                }
            },
        };
    }
    // An application's last loop: receive until the end. Or stop here.
    if t.chance(2, 3) {
        match &mut r {
            Reader::Whole(ws) => drain(&t, RRef::Whole(ws)).await,
            Reader::Half(h) => drain(&t, RRef::Half(h)).await,
            Reader::Stream(s) => drain(&t, RRef::Stream(s)).await,
        }
    }
    t.status("done, dropping its handle");
}

/// A task with the sending half: sends, shares it with helpers, then hands it back for
/// a reunion or drops it.
async fn writer_task(mut t: Task, mut w: Writer, back: oneshot::Sender<Writer>) {
    for _ in 0..t.ops() {
        t.between().await;
        if t.chance(1, 30) {
            // Shared behind a mutex by a few tasks, as `Arc<Mutex<SplitSink>>` code does.
            t.status("sharing its half");
            t.shape("shared writer");
            let shared = Arc::new(tokio::sync::Mutex::new(w));
            let helpers: Vec<_> = (0..t.rng(|r| r.range(1, 3)))
                .map(|_| {
                    let h = t.app.task();
                    tokio::spawn(helper_task(h, shared.clone()))
                })
                .collect();
            for h in helpers {
                if let Err(e) = h.await {
                    std::panic::resume_unwind(e.into_panic());
                }
            }
            w = match Arc::try_unwrap(shared) {
                Ok(m) => m.into_inner(),
                Err(_) => unreachable!("the helpers are done"),
            };
            continue;
        }
        let op = WRITE_OPS[t.weighted(&WRITE_WEIGHTS)];
        write_op(&mut t, w.as_ref(), op).await;
    }
    if t.chance(1, 2) {
        t.status("handing its half back");
        let _ = back.send(w);
    } else {
        t.status("dropped its half");
        t.shape("writer dropped");
    }
}

async fn helper_task(mut t: Task, w: Arc<tokio::sync::Mutex<Writer>>) {
    for _ in 0..t.rng(|r| r.range(0, 10)) {
        t.between().await;
        let op = WRITE_OPS[t.weighted(&WRITE_WEIGHTS)];
        t.status(format!("waiting for the shared half to {op:?}"));
        let mut w = w.lock().await;
        write_op(&mut t, w.as_ref(), op).await;
    }
}

/// The handler API's callbacks: everything they are given is logged as a receive is; they
/// reply, close or do nothing as the choices say. A reply is logged as `Buffered` (a
/// maybe): `Socket::send` reports no outcome of its own, a refused send ends the run.
struct SimHandler {
    t: Task,
    /// It asked to close: the loop then closes as the whole socket's `close` does,
    /// discarding the data messages that still arrive.
    closing: bool,
}

impl SimHandler {
    fn act(&mut self, socket: &mut Socket<'_>) {
        match self.t.weighted(&[30, 3, 67]) {
            0 => {
                let m = self.t.message();
                socket.send(m.to_message());
                self.t.sent(m, Outcome::Buffered);
            }
            1 => {
                self.t.status("Socket::close");
                self.closing = true;
                self.t.app.log().discarded = true;
                socket.close(1000, "handler close");
            }
            _ => {}
        }
    }
}

impl Handler for SimHandler {
    fn on_open(&mut self, socket: &mut Socket<'_>) {
        self.act(socket);
    }
    fn on_message(&mut self, socket: &mut Socket<'_>, msg: Message) {
        self.t.got(Ok(Some(Msg::from_message(&msg))));
        self.act(socket);
    }
    fn on_ping(&mut self, socket: &mut Socket<'_>, payload: bytes::Bytes) {
        self.t
            .got(Ok(Some(Msg::from_message(&Message::Ping(payload)))));
        self.act(socket);
    }
    fn on_pong(&mut self, _: &mut Socket<'_>, payload: bytes::Bytes) {
        self.t
            .got(Ok(Some(Msg::from_message(&Message::Pong(payload)))));
    }
    fn on_close(&mut self, frame: Option<&CloseFrame>, error: Option<&Error>) {
        if let Some(f) = frame {
            self.t.got(Ok(Some(Msg::from_message(&Message::Close(Some(
                f.clone(),
            ))))));
        }
        let mut log = self.t.app.log();
        if log.end.is_none() {
            log.end = Some(match (self.closing, error) {
                (true, e) => RecvEnd::InClose(e.map_or(Ok(()), |e| Err(classify(e)))),
                (false, None) => RecvEnd::Clean,
                (false, Some(e)) => RecvEnd::Failed(classify(e)),
            });
        }
    }
}
