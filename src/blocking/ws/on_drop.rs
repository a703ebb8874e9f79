//! The drop of a [`WebSocket`]: our close, still queued, written once more; and the
//! stream, kept in an `Option` so that `into_inner` can take it although the socket has
//! a `Drop`.

use std::io::{self, IoSlice};

use crate::connection::Connection;

use super::{Transport, WebSocket};

impl<S: Transport> WebSocket<S> {
    /// For the drop of the socket: when our close (the answer to the peer's, or our own)
    /// is still queued, because a write ran out of the stream's own write timeout, the
    /// queue is written once more, each write waiting at most that timeout again, then
    /// flushed. A stream with no write timeout of its own is not written to: nothing
    /// would bound the wait (a blocking stream without one never leaves the answer
    /// queued, its write waits; a non-blocking one does, and keeps it). Nor is one whose
    /// write timeout this layer shortened to the send timeout: its writes go on until
    /// that fails the connection.
    pub(super) fn write_on_drop(&mut self) {
        if !self.conn.close_sent() || !self.conn.has_pending_output() || self.conn.is_done() {
            return;
        }
        let stream = live(&mut self.stream);
        if self.user_write_timeout.is_some() || !matches!(stream.write_timeout(), Ok(Some(_))) {
            return;
        }
        while self.conn.has_pending_output() {
            let mut slices = [IoSlice::new(&[]); Connection::WRITE_SLICES];
            let count = self.conn.io_slices(&mut slices);
            match stream.write_vectored(&slices[..count]) {
                Ok(0) => return,
                Ok(n) => self.conn.advance_output(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
        let _ = stream.flush();
    }
}

/// A socket dropped with our close still queued (a write ran out of the stream's own
/// write timeout) writes the queue once more, each write waiting at most that timeout,
/// as the tokio layer's does without waiting; a stream with no write timeout of its own
/// is not written to.
impl<S> Drop for WebSocket<S> {
    fn drop(&mut self) {
        if self.stream.is_some() {
            (self.write_on_drop)(self);
        }
    }
}

/// The stream in `slot`, there until [`WebSocket::into_inner`] takes it: one branch,
/// always taken.
#[inline(always)]
pub(super) fn live<S>(slot: &mut Option<S>) -> &mut S {
    match slot {
        Some(stream) => stream,
        None => taken(),
    }
}

/// Only `into_inner`, which consumes the socket, takes its stream: no call finds it gone.
#[cold]
#[inline(never)]
pub(super) fn taken() -> ! {
    unreachable!("a WebSocket's stream is taken only by `into_inner`, which consumes it")
}
