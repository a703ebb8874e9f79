//! The waker pair of two tasks that poll one connection: the split halves, or a
//! [`WebSocket`] polled from two tasks through `futures`' `StreamExt::split`.

use super::*;

/// The wakers of two tasks that poll one connection: a receiving one and a sending one
/// (split halves, or a [`WebSocket`] split with `futures`' `StreamExt::split`).
///
/// The socket remembers one waker per direction, and the connection's timer one: whichever
/// task polled last. Either task may read (a send that waits reads aside, so a pong to
/// the keepalive is seen), write (a receive writes pongs and what was queued) and poll the
/// timer; a wake-up registered by one and meant for the other would be lost. So the
/// writes and the timer register the pair's own waker, which wakes whichever of the two
/// waits now, and the reads a [`ReadWaker`], which wakes the task that reads (the
/// receiving one, or the sending one once no task receives): a send waiting for room is
/// not polled for every message that arrives. A task's waker is kept while its poll is
/// pending, and forgotten once it is ready, so a task busy elsewhere is not woken for
/// nothing (a `WebSocket`'s receiving task keeps it: it polls again at once, and then
/// needs no lock).
/// Which of the two tasks of a [`WakerPair`] polls.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Task {
    Receiving,
    Sending,
}

#[derive(Default)]
pub(super) struct WakerPair {
    pub(super) reader: Mutex<Option<Waker>>,
    pub(super) writer: Mutex<Option<Waker>>,
    /// A receiving task reads the socket (a [`ReadHalf`] lives; a `WebSocket`'s `Stream`
    /// was polled): the socket's read wake-ups are its alone ([`ReadWaker`]). Otherwise
    /// the sending task reads in its waits, and they are the sending task's.
    receiving: AtomicBool,
}

/// The waker the socket's reads register, made once per [`WakerPair`]: it wakes the task
/// that reads, not both. Input is what the receiving task waits for; a sending task
/// that waits for room or a flush waits for the socket's write readiness and the timer
/// (registered with the pair's own waker, which wakes both), and was polled, to no
/// avail, for every message that arrived while it waited.
pub(super) struct ReadWaker(pub(super) Arc<WakerPair>);

impl Wake for ReadWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        let pair = &self.0;
        if pair.receiving.load(Ordering::Acquire) {
            WakerPair::wake_slot(&pair.reader);
        } else {
            WakerPair::wake_slot(&pair.writer);
        }
    }
}

/// The socket of a poll whose reads register `waker` (a [`ReadWaker`]) rather than the
/// poll's context: its writes and everything else keep the context's.
pub(super) struct ReadsWaking<'a> {
    pub(super) io: &'a mut dyn Io,
    pub(super) waker: &'a Waker,
}

impl Io for ReadsWaking<'_> {
    fn rd(&mut self) -> Pin<&mut (dyn AsyncRead + Unpin + '_)> {
        Pin::new(self)
    }
    fn wr(&mut self) -> Pin<&mut (dyn tokio::io::AsyncWrite + Unpin + '_)> {
        self.io.wr()
    }
    fn reads(&self) -> bool {
        self.io.reads()
    }
}

impl AsyncRead for ReadsWaking<'_> {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.io
            .rd()
            .poll_read(&mut Context::from_waker(this.waker), buf)
    }
}

impl WakerPair {
    fn set(slot: &Mutex<Option<Waker>>, w: &Waker) {
        let mut g = slot.lock().unwrap_or_else(|e| e.into_inner());
        match g.as_ref() {
            Some(old) if old.will_wake(w) => {}
            _ => *g = Some(w.clone()),
        }
    }

    /// Wakes the task in `slot`, if any. Its waker stays until the task polls again with
    /// another or [leaves](Self::leave): a task's poll that stays pending does not have to
    /// store its waker again (see `WebSocket::poll_as`).
    pub(super) fn wake_slot(slot: &Mutex<Option<Waker>>) {
        let w = slot.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(w) = w {
            w.wake();
        }
    }

    /// Runs the poll `f` of `task` with `cx`'s waker kept while the poll is pending, and
    /// `combined` (a waker of this pair) as the context every registration is made with.
    pub(super) fn poll<T>(
        &self,
        task: Task,
        cx: &Context<'_>,
        combined: &Waker,
        f: impl FnOnce(&mut Context<'_>) -> Poll<T>,
    ) -> Poll<T> {
        self.enter(task, cx.waker());
        let r = f(&mut Context::from_waker(combined));
        if r.is_ready() {
            self.leave(task);
        }
        r
    }

    /// Whether a receiving task reads the socket (see [`ReadWaker`]).
    pub(super) fn set_receiving(&self, receiving: bool) {
        self.receiving.store(receiving, Ordering::Release);
    }

    /// `task` polls with `waker`: it is woken by the pair's waker until it
    /// [leaves](Self::leave).
    pub(super) fn enter(&self, task: Task, waker: &Waker) {
        Self::set(self.slot(task), waker);
    }

    /// `task`'s poll is ready: it waits no more, and is not woken for the other's sake.
    pub(super) fn leave(&self, task: Task) {
        self.slot(task)
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
    }

    fn slot(&self, task: Task) -> &Mutex<Option<Waker>> {
        match task {
            Task::Receiving => &self.reader,
            Task::Sending => &self.writer,
        }
    }
}

impl Wake for WakerPair {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        Self::wake_slot(&self.reader);
        Self::wake_slot(&self.writer);
    }
}
