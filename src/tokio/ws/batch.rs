//! [`ReadHalf::recv_batch`]: a batch lent from the reading half, moved out of the shared
//! connection so that the lock is not held while it is read.

use bytes::BytesMut;

use super::*;
use crate::connection::{Batch, Detached};

/// Buffers larger than this are not kept by a reading half between batches.
const RETAIN: usize = 64 * 1024;

/// What [`ReadHalf::recv_batch`] lends: the connection's receive buffer as it held the
/// batch (the connection and the half take turns with two buffers, so neither is copied
/// nor allocated per batch), and how much of the run in it was handed out.
#[derive(Default)]
pub(crate) struct HalfBatch {
    buf: BytesMut,
    run: core::ops::Range<usize>,
    consumed: usize,
    /// How much of the run the batch decoded (unmasked in place), handed out or not: kept
    /// as it goes, so a leaked batch leaves it right too.
    decoded: usize,
}

/// What one poll of [`ReadHalf::recv_batch`] got under the lock.
enum Got {
    /// A batch moved into the half's buffer.
    Run(Detached),
    /// One message, copied into the half's `Lent` buffer (as `recv_ref` copies it).
    Lent,
}

impl<S: AsyncRead + AsyncWrite + Unpin> ReadHalf<S> {
    /// Receives every whole message buffered at once, as [`WebSocket::recv_batch`] does,
    /// lent from this half until the next call on it; `Ok(None)` after the connection
    /// closed. Cancel-safe.
    ///
    /// The batch is moved out of the connection the halves share (the lock is not held
    /// while it is read): the receive buffer that holds it comes to this half, and the
    /// connection reads on into the buffer this half kept from the batch before, the
    /// few bytes after the batch (a partial frame) copied into it. No message is copied,
    /// allocated or reference-counted. A message that does not arrive with others (or
    /// ends a batch) is copied once into this half's buffer, as
    /// [`recv_ref`](Self::recv_ref) copies it. Messages of a batch dropped before its
    /// end go back to the connection (copied) at the next call. The half keeps the
    /// buffer of its last batch (up to 64 KiB of it) for the next one.
    pub async fn recv_batch(&mut self) -> Result<Option<Batch<'_>>, Error> {
        self.give_back();
        let got = poll_fn(|cx| self.poll_batch(cx)).await?;
        Ok(Some(match got {
            None => return Ok(None),
            Some(Got::Lent) => Batch::one(self.lent.get()),
            Some(Got::Run(d)) => {
                let b = &mut self.batch;
                b.run = d.run.clone();
                b.consumed = 0;
                let (front, rest) = b.buf.split_at_mut(d.run.start);
                let first = MessageRef::from_data(d.kind, &front[d.first]);
                Batch::with_run(
                    first,
                    &mut rest[..d.run.len()],
                    d.rules,
                    &mut b.consumed,
                    &mut b.decoded,
                )
            }
        }))
    }

    fn poll_batch(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Got>, Error>> {
        let (lent, batch) = (&mut self.lent, &mut self.batch);
        Self::locked(&self.shared, cx, |engine, cx, io| {
            let Some(raw) = ready!(engine.poll_recv_raw(cx, io, true))? else {
                return Poll::Ready(Ok(None));
            };
            if let Some(d) = engine.conn.detach_run(&raw, &mut batch.buf) {
                return Poll::Ready(Ok(Some(Got::Run(d))));
            }
            lent.store(engine.conn.raw_ref(&raw));
            Poll::Ready(Ok(Some(Got::Lent)))
        })
    }
}

impl HalfBatch {
    /// Gives the messages of the last batch that were not handed out back to `conn`,
    /// ahead of what it holds, and forgets the batch.
    pub(super) fn give_back(&mut self, conn: &mut crate::connection::Connection) {
        let at = self.run.start + self.consumed;
        if at < self.run.end {
            // What the batch decoded and did not hand out goes back as it arrived first.
            let decoded = (self.run.start + self.decoded).clamp(at, self.run.end);
            conn.remask(&mut self.buf[at..decoded]);
            conn.unread(&self.buf[at..self.run.end]);
        }
        self.run = 0..0;
        self.consumed = 0;
        self.decoded = 0;
        if self.buf.capacity() > RETAIN {
            self.buf = BytesMut::new();
        }
    }

    /// Whether the last batch left messages that were not handed out.
    pub(super) fn has_rest(&self) -> bool {
        self.run.start + self.consumed < self.run.end
    }
}

impl<S> ReadHalf<S> {
    /// Gives the messages of the last batch that were not handed out back to the
    /// connection, ahead of what it holds (see [`HalfBatch::give_back`]).
    pub(super) fn give_back(&mut self) {
        if self.batch.has_rest() {
            let mut inner = self.shared.lock();
            self.batch.give_back(&mut inner.engine.conn);
        }
    }
}
