//! A reply written alone that fails: the lone path (an owned reply, `reply_alone`) and
//! the borrowed handler's (the lent message itself, `reply_lent` and `recv_raw_after`)
//! end the transport alike, and the receive reports it alike.

use std::time::Instant;

use super::*;

/// A transport whose first write fails with `BrokenPipe` and whose later writes would
/// go through (they take everything): only the connection's own bookkeeping ends it
/// after the failure. Reads find nothing (pending).
#[derive(Default)]
struct Gone {
    failed: bool,
}

impl Gone {
    fn write(&mut self, len: usize) -> Poll<io::Result<usize>> {
        if std::mem::replace(&mut self.failed, true) {
            return Poll::Ready(Ok(len));
        }
        Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()))
    }
}

impl AsyncRead for Gone {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        _: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Poll::Pending
    }
}

impl AsyncWrite for Gone {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().write(buf.len())
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().write(bufs.iter().map(|b| b.len()).sum())
    }
    fn is_write_vectored(&self) -> bool {
        true
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// How each poll came out, as text (`Error` has no `PartialEq`).
fn shown<T: std::fmt::Debug>(p: Poll<Result<T, Error>>) -> String {
    match p {
        Poll::Ready(Ok(v)) => format!("{v:?}"),
        Poll::Ready(Err(Error::Io(e))) => format!("Io({:?}, {e})", e.kind()),
        Poll::Ready(Err(e)) => format!("{e:?}"),
        Poll::Pending => "pending".into(),
    }
}

/// A server over [`Gone`] that has received "one" and "two": `reply` answers "one" (its
/// write fails); then three receives. What the reply and the receives gave. The lent
/// reply used to return the error without ending the transport, and queued the frame:
/// the receive wrote it and went on as if nothing had failed (pending after "two").
fn after_a_failed_reply(
    reply: impl FnOnce(&mut WebSocket<Gone>, &mut Context<'_>) -> Poll<Result<(), Error>>,
) -> Vec<String> {
    let mut client = Connection::new(Role::Client, Config::default(), Instant::now());
    client.send_text("one").unwrap();
    client.send_text("two").unwrap();
    let mut frames = Vec::new();
    client.write_pending(&mut frames);
    let mut ws = WebSocket::from_raw(Gone::default(), Role::Server, &Config::default(), &frames);
    let mut cx = Context::from_waker(Waker::noop());
    let mut seen = vec![shown(reply(&mut ws, &mut cx))];
    for _ in 0..3 {
        seen.push(shown(ws.poll_recv(&mut cx)));
    }
    seen
}

// A runtime for the timers a receive that waits arms.
#[tokio::test]
async fn a_failed_lent_reply_ends_the_transport_as_a_failed_lone_one_does() {
    let lone = after_a_failed_reply(|ws, cx| {
        let Poll::Ready(Ok(Some(msg))) = ws.poll_recv(cx) else {
            panic!("no message")
        };
        let mut reply = std::pin::pin!(ws.reply_alone(msg, Compression::Auto));
        reply.as_mut().poll(cx)
    });
    let broken = "Io(BrokenPipe, broken pipe)";
    let text = r#"Some(Text("two"))"#;
    assert_eq!(lone, [broken, text, broken, "None"]);
    // The lent message, as the borrowed handler has it.
    let lent = |ws: &mut WebSocket<Gone>| ws.engine_mut().conn.poll_short().expect("one");
    let reply_lent = after_a_failed_reply(|ws, cx| {
        let (kind, at) = lent(ws);
        let mut reply = std::pin::pin!(ws.reply_lent(kind, at));
        reply.as_mut().poll(cx)
    });
    assert_eq!(reply_lent, lone);
    // The reply written by the receive that follows it, which reports its error.
    let recv_after = after_a_failed_reply(|ws, cx| {
        let (kind, at) = lent(ws);
        let mut recv = std::pin::pin!(ws.recv_raw_after(Some((kind, at))));
        recv.as_mut().poll(cx).map_ok(drop)
    });
    assert_eq!(recv_after, lone);
}
