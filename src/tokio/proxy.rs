//! Opening a proxy tunnel over a tokio stream: the sans-IO negotiation of
//! [`crate::proxy`] driven with async reads and writes.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::error::Error;
use crate::proxy::{MAX_READ, Negotiation, ProxyServer, Step};

/// Opens a tunnel to `host:port` through `server` on `stream`, a connection to the proxy.
/// On success the stream carries the target's bytes, and nothing of them has been read.
pub(crate) async fn open_tunnel<S>(
    stream: &mut S,
    server: &ProxyServer,
    host: &str,
    port: u16,
    max_response_head: usize,
) -> Result<(), Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut negotiation = Negotiation::new(server, host, port, max_response_head)?;
    let mut buf = [0u8; MAX_READ];
    loop {
        match negotiation.poll()? {
            Step::Write(bytes) => {
                stream.write_all(&bytes).await?;
                stream.flush().await?;
            }
            Step::Read(n) => {
                let got = stream.read(&mut buf[..n.min(MAX_READ)]).await?;
                if got == 0 {
                    return Err(Error::Io(std::io::ErrorKind::UnexpectedEof.into()));
                }
                negotiation.feed(&buf[..got]);
            }
            Step::Done => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// Runs `open_tunnel` against a proxy whose whole answer is `reply` followed by the
    /// target's first bytes, and returns what is left on the stream afterwards.
    async fn tunnel_leftover(kind: &str, reply: &[u8]) -> Result<Vec<u8>, Error> {
        let (mut client, mut proxy) = tokio::io::duplex(4096);
        let mut all = reply.to_vec();
        all.extend_from_slice(b"TARGET BYTES");
        proxy.write_all(&all).await.unwrap();
        let server = ProxyServer::parse(&format!("{kind}://u:p@proxy")).unwrap();
        open_tunnel(&mut client, &server, "example.com", 443, 1024).await?;
        drop(proxy);
        let mut rest = Vec::new();
        client.read_to_end(&mut rest).await.unwrap();
        Ok(rest)
    }

    #[tokio::test]
    async fn no_byte_after_the_proxy_answer_is_consumed() {
        let http = b"HTTP/1.1 200 Connection established\r\nVia: x\r\n\r\n";
        assert_eq!(
            tunnel_leftover("http", http).await.unwrap(),
            b"TARGET BYTES"
        );
        let http10 = b"HTTP/1.0 204 OK\r\n\r\n";
        assert_eq!(
            tunnel_leftover("http", http10).await.unwrap(),
            b"TARGET BYTES"
        );
        // Method 2, auth ok, success bound to a 5-byte domain name, port.
        let socks = [
            5, 2, 1, 0, 5, 0, 0, 3, 5, b'p', b'r', b'o', b'x', b'y', 0, 80,
        ];
        assert_eq!(
            tunnel_leftover("socks5", &socks).await.unwrap(),
            b"TARGET BYTES"
        );
        let socks_v6 = [[5u8, 0, 5, 0, 0, 4].as_slice(), &[0; 18]].concat();
        assert_eq!(
            tunnel_leftover("socks5", &socks_v6).await.unwrap(),
            b"TARGET BYTES"
        );
    }

    /// Runs `open_tunnel` to `host:port` through the proxy at `url`, whose whole answer
    /// is `reply`, and returns what the client sent it.
    async fn tunnel_request(url: &str, reply: &[u8], host: &str, port: u16) -> Vec<u8> {
        let (mut client, mut proxy) = tokio::io::duplex(4096);
        proxy.write_all(reply).await.unwrap();
        let server = ProxyServer::parse(url).unwrap();
        open_tunnel(&mut client, &server, host, port, 1024)
            .await
            .unwrap();
        drop(client);
        let mut sent = Vec::new();
        proxy.read_to_end(&mut sent).await.unwrap();
        sent
    }

    #[tokio::test]
    async fn connect_request_names_the_target_and_carries_basic_credentials() {
        let url = "http://Aladdin:open%20sesame@proxy:3128";
        let sent = tunnel_request(url, b"HTTP/1.1 200 OK\r\n\r\n", "::1", 9001).await;
        assert_eq!(
            String::from_utf8(sent).unwrap(),
            "CONNECT [::1]:9001 HTTP/1.1\r\nHost: [::1]:9001\r\n\
             Proxy-Authorization: Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==\r\n\r\n"
        );
    }

    #[tokio::test]
    async fn socks5_request_bytes_follow_rfc_1928_and_1929() {
        let reply = [5, 2, 1, 0, 5, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        let sent = tunnel_request("socks5://ab:c@proxy", &reply, "host.example", 8080).await;
        let mut want = vec![5, 2, 0, 2, 1, 2, b'a', b'b', 1, b'c', 5, 1, 0, 3, 12];
        want.extend_from_slice(b"host.example");
        want.extend_from_slice(&8080u16.to_be_bytes());
        assert_eq!(sent, want);
    }
}
