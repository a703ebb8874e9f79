//! A shutdown signal shared by many connections ([`Shutdown`]), and what a connection
//! does when it is given: it goes away.
//!
//! Going away is a close like any other (RFC 6455 7.4.1, 1001: "an endpoint is going
//! away, such as a server going down"): the connection queues it behind what is already
//! queued, so the peer reads every message sent before it, then waits for the peer's
//! close within [`Config::close_timeout`](super::Config::close_timeout), as after
//! [`Connection::close`]. Nothing else changes: the lifecycle (lifecycle.rs) carries it
//! out, and the IO layers write and read as they always do.
//!
//! The signal is a flag, read with one atomic load where a connection looks for it (its
//! timer pass, [`Connection::poll_timeout`]/[`Connection::handle_timeout`], and an IO
//! layer's wait). To wake a task that waits on a connection when the signal is given, the
//! connection keeps a slot in the handle's registry holding the waker of its last wait:
//! written (under the registry's lock) only when that waker changes, which for a
//! connection polled by one task is once. The registry holds a slot per live connection
//! and per pending [`Shutdown::triggered`] or [`Shutdown::drained`] future: a connection
//! gives its slot back when it is dropped, so the registry is as large as the most
//! connections it ever held at once, and empties when they are gone.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use crate::codec::CloseCode;

use super::Connection;

/// The reason our going-away close carries.
const GOING_AWAY_REASON: &str = "going away";

/// A shutdown signal for many connections: give it once ([`trigger`](Self::trigger)) and
/// every connection opened with it in its [`Config`](super::Config)
/// ([`Config::shutdown`](super::Config::shutdown)) goes away: it sends what it has
/// queued, then a close with 1001 ("going away"), and waits for the peer's close within
/// the close timeout. Cheap to clone; clones share one signal.
///
/// Waiting connections (in a receive, a send, a flush) are woken by the signal; a task
/// awaiting something else sees it when it next uses its connection (or selects on
/// [`triggered`](Self::triggered)). The accept loops (`tokio::serve`,
/// `handler::serve_handler`) stop accepting at the signal and return once their
/// connections have gone. A connection opened after the signal goes away at once.
///
/// ```
/// use rapidws::connection::{Config, Connection, Shutdown};
/// use rapidws::Role;
/// # use std::time::Instant;
///
/// let shutdown = Shutdown::new();
/// let config = Config::default().with_shutdown(&shutdown);
/// let mut conn = Connection::new(Role::Server, config, Instant::now());
/// conn.send_text("last words")?;
/// assert_eq!(shutdown.connections(), 1);
///
/// shutdown.trigger();
/// // The connection's next timer pass sees it.
/// let now = Instant::now();
/// assert!(conn.poll_timeout().is_some_and(|t| t <= now));
/// conn.handle_timeout(now);
/// assert!(conn.close_sent());
/// let mut wire = Vec::new();
/// conn.write_pending(&mut wire);
/// // The text frame, then the close: 1001 "going away".
/// assert_eq!(&wire[2..12], b"last words");
/// assert_eq!(&wire[12..16], &[0x88, 12, 0x03, 0xe9]);
///
/// drop(conn);
/// assert_eq!(shutdown.connections(), 0);
/// # Ok::<(), rapidws::connection::SendError>(())
/// ```
#[derive(Clone, Default)]
pub struct Shutdown {
    inner: Arc<Registry>,
}

#[derive(Default)]
struct Registry {
    /// The signal was given. Set once, never cleared.
    triggered: AtomicBool,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Connections and `triggered` futures: their wakers are woken (and taken) by the
    /// signal.
    waiting: Slots,
    /// `drained` futures: woken once the signal was given and no connection is left.
    draining: Slots,
    /// Connections enrolled and not dropped.
    connections: usize,
}

/// Waker slots, reused: a slot is taken by one owner (a connection, a future) and given
/// back when the owner is dropped.
#[derive(Default)]
struct Slots {
    wakers: Vec<Option<Waker>>,
    free: Vec<usize>,
}

impl Slots {
    fn take(&mut self) -> usize {
        match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.wakers.push(None);
                self.wakers.len() - 1
            }
        }
    }

    fn give_back(&mut self, slot: usize) {
        self.wakers[slot] = None;
        self.free.push(slot);
        if self.free.len() == self.wakers.len() {
            // Nobody holds a slot: the storage goes too.
            *self = Slots::default();
        }
    }

    fn set(&mut self, slot: usize, waker: &Waker) {
        match &mut self.wakers[slot] {
            Some(w) => w.clone_from(waker),
            none => *none = Some(waker.clone()),
        }
    }

    fn take_wakers(&mut self, into: &mut Vec<Waker>) {
        into.extend(self.wakers.iter_mut().filter_map(Option::take));
    }
}

impl fmt::Debug for Shutdown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shutdown")
            .field("triggered", &self.is_triggered())
            .field("connections", &self.connections())
            .finish()
    }
}

impl Shutdown {
    /// A signal not given yet, with no connection.
    pub fn new() -> Self {
        Shutdown::default()
    }

    /// Gives the signal: every connection under it goes away, and so does every one
    /// opened from now on. Giving it again does nothing.
    pub fn trigger(&self) {
        if self.inner.triggered.swap(true, Ordering::SeqCst) {
            return;
        }
        let mut wakers = Vec::new();
        {
            let mut state = self.inner.lock();
            state.waiting.take_wakers(&mut wakers);
            if state.connections == 0 {
                state.draining.take_wakers(&mut wakers);
            }
        }
        // Woken outside the lock: a waker may run code that takes it again.
        for w in wakers {
            w.wake();
        }
    }

    /// Whether the signal was given.
    pub fn is_triggered(&self) -> bool {
        self.inner.triggered.load(Ordering::Acquire)
    }

    /// The connections under this signal now: opened with it and not dropped yet.
    pub fn connections(&self) -> usize {
        self.inner.lock().connections
    }

    /// A future that completes once the signal is given, for a task that awaits
    /// something else than its connection, and as the signal of an HTTP server's own
    /// graceful shutdown (axum's `with_graceful_shutdown`). It owns a clone of the handle.
    pub fn triggered(&self) -> impl Future<Output = ()> + Send + Sync + Unpin + 'static {
        self.wait(Until::Signal)
    }

    /// A future that completes once the signal was given and every connection under it
    /// has been dropped. The accept loops wait for their own connections (bounded, see
    /// `tokio::serve`); for those they do not own (an axum or hyper route's), await this,
    /// bounded by a timeout of yours: a connection whose task awaits something else
    /// forever is never dropped.
    pub fn drained(&self) -> impl Future<Output = ()> + Send + Sync + Unpin + 'static {
        self.wait(Until::Drained)
    }

    fn wait(&self, until: Until) -> Wait {
        Wait {
            shutdown: self.clone(),
            slot: None,
            until,
        }
    }

    /// A connection's slot (from [`Connection::new`]).
    fn enroll(&self) -> Enrolled {
        let mut state = self.inner.lock();
        state.connections += 1;
        let slot = state.waiting.take();
        drop(state);
        Enrolled {
            shutdown: self.clone(),
            slot,
            waker: None,
        }
    }
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Every critical section leaves the state consistent: go on after a panic.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A connection's place under a [`Shutdown`]: its slot in the registry and the waker it
/// last put there. Given back when dropped.
pub(super) struct Enrolled {
    shutdown: Shutdown,
    slot: usize,
    /// The waker in the slot, to see without the lock whether a wait's waker is already
    /// there.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    waker: Option<Waker>,
}

impl Enrolled {
    #[inline]
    fn is_triggered(&self) -> bool {
        self.shutdown.is_triggered()
    }

    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    /// Puts `waker` in the slot; true when the signal was given (it wakes nobody then:
    /// the caller acts on it).
    ///
    /// The caller looks first, without the lock, whether the waker is already there: the
    /// signal takes the slot's waker and wakes it, so a waker put there before still
    /// wakes its task for a signal given after the caller's last look.
    fn register(&mut self, waker: &Waker) -> bool {
        let mut state = self.shutdown.inner.lock();
        // Under the lock: a signal given before it was taken has taken the slot's wakers
        // already, and is seen here.
        if self.is_triggered() {
            return true;
        }
        state.waiting.set(self.slot, waker);
        drop(state);
        self.waker = Some(waker.clone());
        false
    }
}

impl Drop for Enrolled {
    fn drop(&mut self) {
        let mut wakers = Vec::new();
        {
            let mut state = self.shutdown.inner.lock();
            state.waiting.give_back(self.slot);
            state.connections -= 1;
            if state.connections == 0 && self.is_triggered() {
                state.draining.take_wakers(&mut wakers);
            }
        }
        for w in wakers {
            w.wake();
        }
    }
}

impl fmt::Debug for Enrolled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Enrolled")
            .field("slot", &self.slot)
            .finish_non_exhaustive()
    }
}

/// What a [`Wait`] waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Until {
    /// The signal ([`Shutdown::triggered`]).
    Signal,
    /// The signal, and no connection left ([`Shutdown::drained`]).
    Drained,
}

impl State {
    /// Where the wakers of the futures waiting `until` are kept: the signal wakes
    /// `waiting`, the last connection `draining`.
    fn slots(&mut self, until: Until) -> &mut Slots {
        match until {
            Until::Signal => &mut self.waiting,
            Until::Drained => &mut self.draining,
        }
    }
}

/// The future of [`Shutdown::triggered`] and [`Shutdown::drained`]: a slot taken at its
/// first pending poll, given back when it is dropped.
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
struct Wait {
    shutdown: Shutdown,
    slot: Option<usize>,
    until: Until,
}

impl Future for Wait {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if this.until == Until::Signal && this.shutdown.is_triggered() {
            return Poll::Ready(());
        }
        let mut state = this.shutdown.inner.lock();
        // Under the lock: the signal and the last connection wake the slots under it.
        let left = state.connections;
        if this.shutdown.is_triggered() && (this.until == Until::Signal || left == 0) {
            return Poll::Ready(());
        }
        let slots = state.slots(this.until);
        let slot = *this.slot.get_or_insert_with(|| slots.take());
        slots.set(slot, cx.waker());
        Poll::Pending
    }
}

impl Drop for Wait {
    fn drop(&mut self) {
        if let Some(slot) = self.slot {
            self.shutdown.inner.lock().slots(self.until).give_back(slot);
        }
    }
}

impl Connection {
    /// A connection's place under its config's shutdown signal, if it has one.
    pub(super) fn enroll(config: &super::Config) -> Option<Box<Enrolled>> {
        config.shutdown.as_ref().map(|s| Box::new(s.enroll()))
    }

    /// Whether the shutdown signal ([`Config::shutdown`](super::Config::shutdown)) was
    /// given and this connection has not started closing: going away is due. One branch
    /// for a connection without a signal, an atomic load for one with it.
    #[inline]
    pub(crate) fn going_away_due(&self) -> bool {
        match &self.shutdown {
            None => false,
            Some(e) => e.is_triggered() && !self.close_queued && !self.is_closed(),
        }
    }

    /// Goes away: our close with 1001 ("going away") is queued behind what is queued,
    /// and the close handshake starts at `now` (the close timeout counts from here).
    pub(crate) fn go_away(&mut self, now: Instant) {
        let _ = self.close(now, CloseCode::GOING_AWAY, GOING_AWAY_REASON);
    }

    /// For an IO layer about to wait: goes away when the shutdown signal was given
    /// (`true`: there is a close to write now), else makes sure that `waker` is woken
    /// when it is. `now` is read only to go away.
    ///
    /// Inlined, the usual case (no signal, the same waker as the last wait) is a few
    /// loads and compares; the rest is out of line.
    #[inline]
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn poll_going_away(&mut self, waker: &Waker, now: impl FnOnce() -> Instant) -> bool {
        let Some(enrolled) = self.shutdown.as_deref() else {
            return false;
        };
        if !enrolled.is_triggered() && enrolled.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
            return false;
        }
        self.going_away_or_register(waker, now())
    }

    /// [`poll_going_away`](Self::poll_going_away) past its usual case: a new waker to
    /// register, or the signal given.
    #[cold]
    #[inline(never)]
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    fn going_away_or_register(&mut self, waker: &Waker, now: Instant) -> bool {
        let Some(enrolled) = self.shutdown.as_deref_mut() else {
            return false;
        };
        if !enrolled.is_triggered() && !enrolled.register(waker) {
            return false;
        }
        if !self.going_away_due() {
            return false;
        }
        self.go_away(now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::Role;
    use crate::connection::Config;
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counter() -> (Arc<Count>, Waker) {
        let c = Arc::new(Count(AtomicUsize::new(0)));
        (c.clone(), Waker::from(c))
    }

    fn slots(s: &Shutdown) -> (usize, usize) {
        let state = s.inner.lock();
        (state.waiting.wakers.len(), state.draining.wakers.len())
    }

    #[test]
    fn the_registry_holds_the_live_connections_only() {
        let shutdown = Shutdown::new();
        let config = Config::default().with_shutdown(&shutdown);
        let now = Instant::now();
        let mut conns: Vec<_> = (0..100)
            .map(|_| Connection::new(Role::Server, config.clone(), now))
            .collect();
        assert_eq!(shutdown.connections(), 100);
        assert_eq!(slots(&shutdown), (100, 0));
        conns.truncate(10);
        // Slots are reused, not added.
        conns.extend((0..50).map(|_| Connection::new(Role::Server, config.clone(), now)));
        assert_eq!(shutdown.connections(), 60);
        assert_eq!(slots(&shutdown), (100, 0));
        drop(conns);
        assert_eq!(shutdown.connections(), 0);
        assert_eq!(
            slots(&shutdown),
            (0, 0),
            "the storage went with the last one"
        );
    }

    #[test]
    fn a_waiting_connection_is_woken_once_and_goes_away() {
        let shutdown = Shutdown::new();
        let config = Config::default().with_shutdown(&shutdown);
        let now = Instant::now();
        let mut conn = Connection::new(Role::Server, config, now);
        let (count, waker) = counter();
        // Registered once; the same waker again takes no lock and changes nothing.
        assert!(!conn.poll_going_away(&waker, || now));
        assert!(!conn.poll_going_away(&waker, || now));
        assert!(!conn.close_sent());
        shutdown.trigger();
        shutdown.trigger();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(conn.poll_going_away(&waker, || now));
        assert!(conn.close_sent());
        // Once: the close is queued.
        assert!(!conn.poll_going_away(&waker, || now));
        assert!(!conn.going_away_due());
    }

    #[test]
    fn a_connection_without_the_signal_is_not_touched() {
        let now = Instant::now();
        let mut conn = Connection::new(Role::Server, Config::default(), now);
        let (_, waker) = counter();
        assert!(!conn.poll_going_away(&waker, || now));
        assert!(!conn.going_away_due());
    }

    #[test]
    fn futures_complete_at_the_signal_and_once_drained() {
        let shutdown = Shutdown::new();
        let config = Config::default().with_shutdown(&shutdown);
        let conn = Connection::new(Role::Client, config, Instant::now());
        let (count, waker) = counter();
        let mut cx = Context::from_waker(&waker);
        let mut triggered = shutdown.triggered();
        let mut drained = shutdown.drained();
        assert!(Pin::new(&mut triggered).poll(&mut cx).is_pending());
        assert!(Pin::new(&mut drained).poll(&mut cx).is_pending());
        assert_eq!(slots(&shutdown), (2, 1));
        shutdown.trigger();
        assert_eq!(
            count.0.load(Ordering::SeqCst),
            1,
            "the trigger woke `triggered`"
        );
        assert!(Pin::new(&mut triggered).poll(&mut cx).is_ready());
        assert!(Pin::new(&mut drained).poll(&mut cx).is_pending());
        drop(conn);
        assert_eq!(
            count.0.load(Ordering::SeqCst),
            2,
            "the last connection woke `drained`"
        );
        assert!(Pin::new(&mut drained).poll(&mut cx).is_ready());
        drop((triggered, drained));
        assert_eq!(slots(&shutdown), (0, 0));
        // After the signal a new connection is due to go away at once.
        let conn = Connection::new(
            Role::Server,
            Config::default().with_shutdown(&shutdown),
            Instant::now(),
        );
        assert!(conn.going_away_due());
    }
}
