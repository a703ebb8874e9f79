//! What a [`WebSocket`] holds while it is one, the stream and the engine ([`Link`]), kept
//! in an `Option` so that the calls that consume the socket can take them although it
//! has a `Drop`, and that `Drop`: the close answer written once more.

use super::*;

/// What a [`WebSocket`] holds while it is one: the stream and the engine.
pub(super) struct Link<S> {
    pub(super) io: S,
    pub(super) engine: Engine,
}

impl<S: AsyncWrite + Unpin> Link<S> {
    /// See [`Engine::write_on_drop`]: when the socket is dropped with our close still
    /// queued (the answer to the peer's), one more write without waiting.
    pub(super) fn write_on_drop(&mut self) {
        self.engine.write_on_drop(Pin::new(&mut self.io));
    }
}

impl<S> Link<S> {
    /// The link in `link`, which is there until the socket is consumed: one branch,
    /// always taken.
    #[inline(always)]
    pub(super) fn of(link: &mut Option<Self>) -> &mut Self {
        match link {
            Some(link) => link,
            None => taken(),
        }
    }
}

/// Only the calls that consume a [`WebSocket`] take its [`Link`]: no call can find it gone.
#[cold]
#[inline(never)]
pub(super) fn taken() -> ! {
    unreachable!("a WebSocket's stream is taken only by the calls that consume it")
}

impl<S> WebSocket<S> {
    #[inline(always)]
    pub(super) fn engine(&self) -> &Engine {
        match &self.link {
            Some(link) => &link.engine,
            None => taken(),
        }
    }

    #[inline(always)]
    pub(super) fn engine_mut(&mut self) -> &mut Engine {
        &mut Link::of(&mut self.link).engine
    }

    /// Asks for the socket's state from memory, all of its cache lines at once
    /// ([`rapidws_simd::prefetch`]), at the start of a receive's poll: what runs when a
    /// task wakes after waiting for its peer. A connection that sends now and then finds
    /// its state out of cache then (10,000 of them take more cache than a CPU has), and
    /// the receive reads it a line at a time with a system call between the reads. At
    /// 10,000 connections x 2.5 messages a second the hint took the server's user-space
    /// share of its CPU from 14.7-16.4 % to 13.9-14.9 % (`perf record`, four pairs of
    /// rounds), for about 40 instructions per echo where everything is in cache. Not in
    /// the polls that send: they follow a receive, with the state in cache.
    #[inline(always)]
    pub(super) fn warm(&self) {
        rapidws_simd::prefetch(&self.link);
    }

    /// The engine and the stream, for a poll.
    #[inline(always)]
    pub(super) fn parts(&mut self) -> (&mut Engine, &mut S) {
        let link = Link::of(&mut self.link);
        (&mut link.engine, &mut link.io)
    }

    /// [`parts`](Self::parts) for a receive's poll, the state asked for first
    /// ([`warm`](Self::warm)).
    #[inline(always)]
    pub(super) fn receiving_parts(&mut self) -> (&mut Engine, &mut S) {
        self.warm();
        self.parts()
    }
}

/// A socket dropped with our close still queued (the answer to the peer's close, which
/// `recv` hands over once the socket took what it would without waiting) writes the
/// queue once more, without waiting, as the halves do.
impl<S> Drop for WebSocket<S> {
    fn drop(&mut self) {
        if let Some(link) = &mut self.link {
            (self.write_on_drop)(link);
        }
    }
}
