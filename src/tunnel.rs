//! A WebSocket connection as a byte stream: [`Tunnel`] implements `AsyncRead` and
//! `AsyncWrite`, so `tokio::io::copy_bidirectional` can carry any TCP protocol over a
//! WebSocket port.
//!
//! Each write sends one binary message (at most [`Tunnel::MAX_WRITE`] bytes, so the
//! peer's message limit is never hit); reads ignore message boundaries. Shutting down the
//! write side sends an empty binary message, which the peer's tunnel reads as end of
//! stream: each direction ends on its own, as with TCP's half-close. Pings are answered
//! and pongs skipped while reading.
//!
//! To carry a local service, `tokio::io::copy_bidirectional(&mut tcp_stream, &mut tunnel)`.
//! Here both ends are tunnels and the server echoes the stream it reads:
//!
//! ```
//! use rapidws::tokio::{ClientConfig, ServerConfig, accept, connect};
//! use rapidws::tunnel::Tunnel;
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # std::thread::spawn(|| {
//! #     std::thread::sleep(std::time::Duration::from_secs(30));
//! #     eprintln!("doctest timed out");
//! #     std::process::exit(1);
//! # });
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let url = format!("ws://{}/", listener.local_addr()?);
//! tokio::spawn(async move {
//!     let (stream, _) = listener.accept().await?;
//!     let mut tunnel = Tunnel::new(accept(stream, &ServerConfig::default()).await?);
//!     let mut data = Vec::new();
//!     tunnel.read_to_end(&mut data).await?; // until the client shuts its side down
//!     tunnel.write_all(&data).await?;
//!     tunnel.shutdown().await?;
//!     tunnel.close().await?;
//!     Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
//! });
//!
//! let mut tunnel = Tunnel::new(connect(&url, &ClientConfig::default()).await?);
//! tunnel.write_all(b"SSH-2.0-any byte stream\r\n").await?;
//! tunnel.shutdown().await?; // half-close: the server reads end of stream
//! let mut echoed = Vec::new();
//! tunnel.read_to_end(&mut echoed).await?;
//! assert_eq!(echoed, b"SSH-2.0-any byte stream\r\n");
//! tunnel.close().await?;
//! # Ok(())
//! # }
//! ```

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::tokio::{Error, Message, WebSocket, read_chunk};

/// A WebSocket connection read and written as a byte stream.
#[derive(Debug)]
pub struct Tunnel<S> {
    ws: WebSocket<S>,
    /// The rest of the message being read.
    chunk: Bytes,
    read_eof: bool,
    write_eof: bool,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Tunnel<S> {
    /// Largest message one write sends: 64 KiB.
    pub const MAX_WRITE: usize = 64 * 1024;

    /// Wraps an open connection.
    pub fn new(ws: WebSocket<S>) -> Self {
        Tunnel {
            ws,
            chunk: Bytes::new(),
            read_eof: false,
            write_eof: false,
        }
    }

    /// The connection back (unread bytes of the current message are dropped).
    pub fn into_inner(self) -> WebSocket<S> {
        self.ws
    }

    /// Closes the WebSocket (code 1000) once both directions are done, waiting for the
    /// peer's close within the close timeout.
    pub async fn close(mut self) -> Result<(), Error> {
        self.ws.close(1000, "").await
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for Tunnel<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        while this.chunk.is_empty() {
            if this.read_eof || buf.remaining() == 0 {
                return Poll::Ready(Ok(()));
            }
            match ready!(this.ws.poll_recv(cx)).map_err(io::Error::from)? {
                Some(Message::Binary(b)) if b.is_empty() => this.read_eof = true,
                Some(Message::Binary(b)) => this.chunk = b,
                Some(Message::Text(t)) => this.chunk = t.into_bytes(),
                Some(Message::Ping(_) | Message::Pong(_)) => {}
                // The peer closed the WebSocket: end of stream both ways.
                Some(Message::Close(_)) | None => this.read_eof = true,
            }
        }
        read_chunk(&mut this.chunk, buf);
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Tunnel<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let n = buf.len().min(Self::MAX_WRITE);
        if n == 0 && !this.write_eof {
            // Nothing to send: an empty message would end the stream.
            return Poll::Ready(Ok(0));
        }
        this.ws
            .poll_write_io(cx, this.write_eof, n, |c| c.send_binary(&buf[..n]))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().ws.poll_flush_io(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        // End of stream in this direction: an empty binary message.
        this.ws.poll_shutdown_io(cx, &mut this.write_eof, |ws, cx| {
            ws.poll_send_io(cx, 0, |c| c.send_binary(&[]))
        })
    }
}
