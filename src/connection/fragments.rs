//! Sending a message in fragments: begun, sent chunk by chunk (borrowed and copied, or
//! given away and queued as it is), ended or abandoned.

use std::time::Instant;

use bytes::Bytes;

use crate::codec::{MessageKind, OpCode};
use crate::message::Compression;

use super::{Connection, OutMessage, SendError};

impl Connection {
    /// Starts a fragmented message; send its parts with [`send_chunk`](Self::send_chunk)
    /// and finish with [`end_message`](Self::end_message). Control frames may be sent in
    /// between; other messages may not. Nothing is queued until the first chunk.
    ///
    /// # Errors
    ///
    /// [`SendError::Closed`] after our close; [`SendError::MessageInProgress`] when a
    /// fragmented message is already open.
    pub fn begin_message(&mut self, kind: MessageKind) -> Result<(), SendError> {
        self.begin_message_with(kind, Compression::Auto)
    }

    /// [`begin_message`](Self::begin_message) with the choice of whether the message is
    /// compressed, made for all its fragments at once (RFC 7692 6.1: RSV1 on the first
    /// frame marks the whole message). With permessage-deflate, [`Compression::Never`]
    /// sends the fragments as they are, RSV1 clear; [`Compression::Auto`] and
    /// [`Compression::Always`] compress them (the size and content tests need the whole
    /// message, which a fragmented one does not give). Fails like `begin_message`.
    pub fn begin_message_with(
        &mut self,
        kind: MessageKind,
        compression: Compression,
    ) -> Result<(), SendError> {
        self.check_open()?;
        if self.sending.is_some() {
            return Err(SendError::MessageInProgress);
        }
        #[cfg(not(feature = "deflate"))]
        let _ = compression;
        self.sending = Some(OutMessage {
            kind,
            first: true,
            fed: false,
            #[cfg(feature = "deflate")]
            compressed: self.deflate.is_some() && compression != Compression::Never,
        });
        Ok(())
    }

    /// Sends one non-final fragment of the message begun with
    /// [`begin_message`](Self::begin_message). A text message's chunks may split a code
    /// point; the whole must be UTF-8. With permessage-deflate the chunk is compressed
    /// and a frame is queued only once the compressor has output.
    ///
    /// # Errors
    ///
    /// [`SendError::NoMessageInProgress`] without `begin_message`, and the errors of
    /// [`send`](Self::send) but `MessageInProgress`.
    pub fn send_chunk(&mut self, data: &[u8]) -> Result<(), SendError> {
        self.fragment(Chunk::Borrowed(data), false)
    }

    /// Sends the final fragment (possibly empty) and ends the message; fails like
    /// [`send_chunk`](Self::send_chunk).
    pub fn end_message(&mut self, data: &[u8]) -> Result<(), SendError> {
        self.fragment(Chunk::Borrowed(data), true)
    }

    /// [`send_chunk`](Self::send_chunk) with a payload the caller gives away: a server
    /// queues a large one as it is, never copied (a chunk received with
    /// [`Delivery::Chunks`](super::Delivery::Chunks) and passed on shares its receive
    /// buffer until it is written). A client masks it, which copies it as `send_chunk`
    /// does; so does permessage-deflate, which compresses it.
    pub fn send_chunk_bytes(&mut self, data: Bytes) -> Result<(), SendError> {
        self.fragment(Chunk::Owned(data), false)
    }

    /// [`end_message`](Self::end_message) with a payload the caller gives away (see
    /// [`send_chunk_bytes`](Self::send_chunk_bytes)).
    pub fn end_message_bytes(&mut self, data: Bytes) -> Result<(), SendError> {
        self.fragment(Chunk::Owned(data), true)
    }

    fn fragment(&mut self, chunk: Chunk<'_>, fin: bool) -> Result<(), SendError> {
        self.check_open()?;
        let Some(mut m) = self.sending else {
            return Err(SendError::NoMessageInProgress);
        };
        // RFC 6455 5.4: the first fragment carries the opcode, the rest are continuations.
        let opcode = if m.first {
            m.kind.opcode()
        } else {
            OpCode::Continuation
        };
        #[cfg(feature = "deflate")]
        if m.compressed {
            let data = chunk.as_slice();
            let mut out = Vec::new();
            if let Some(pmd) = self.deflate_mut() {
                pmd.compress_chunk(data, fin, &mut out)
                    .map_err(SendError::Deflate)?;
            }
            m.fed |= !data.is_empty();
            if out.is_empty() && !fin {
                // Nothing flushed yet: no frame needed.
                self.sending = Some(m);
                return Ok(());
            }
            // RFC 7692 6: RSV1 on the first frame of a compressed message only.
            self.queue_owned(fin, m.first, opcode, Bytes::from(out))?;
        } else {
            self.queue_chunk(fin, opcode, chunk)?;
        }
        #[cfg(not(feature = "deflate"))]
        self.queue_chunk(fin, opcode, chunk)?;
        m.first = false;
        self.sending = if fin { None } else { Some(m) };
        Ok(())
    }

    /// Abandons the fragmented message begun with [`begin_message`](Self::begin_message);
    /// the IO layers call it when a message writer is dropped (or its send cancelled)
    /// before the message was finished. Returns whether the connection goes on.
    ///
    /// When nothing of the message was queued (nor, with permessage-deflate, given to the
    /// compressor), nothing of it reaches the peer and the connection goes on (`true`).
    /// Otherwise the peer has part of a message that cannot be completed truthfully:
    /// ending it short would hand the peer a truncated message as whole, and a compressor
    /// with context takeover has taken its bytes into its window. The connection then
    /// fails with [`Error::Abandoned`](super::Error::Abandoned), close code 1011
    /// (`false`). Without an open message, nothing happens (`true`).
    pub fn abort_message(&mut self, now: Instant) -> bool {
        let Some(m) = self.sending.take() else {
            return true;
        };
        if m.first && !m.fed {
            return true;
        }
        self.now = now;
        self.fail(super::Error::Abandoned);
        false
    }

    /// Queues a data frame of a fragmented message: copied when borrowed, as it is when
    /// owned (see [`queue_owned`](Self::queue_owned)).
    #[inline]
    fn queue_chunk(
        &mut self,
        fin: bool,
        opcode: OpCode,
        chunk: Chunk<'_>,
    ) -> Result<(), SendError> {
        match chunk {
            Chunk::Borrowed(data) => self.queue_slice(fin, false, opcode, data),
            Chunk::Owned(data) => self.queue_owned(fin, false, opcode, data),
        }
    }
}

/// A fragment's payload: the caller's to copy, or given away to be queued as it is.
enum Chunk<'a> {
    Borrowed(&'a [u8]),
    Owned(Bytes),
}

impl Chunk<'_> {
    #[cfg(feature = "deflate")]
    fn as_slice(&self) -> &[u8] {
        match self {
            Chunk::Borrowed(data) => data,
            Chunk::Owned(data) => data,
        }
    }
}
