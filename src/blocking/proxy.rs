//! Opening a proxy tunnel over a blocking TCP stream: the sans-IO negotiation of
//! [`crate::proxy`] driven with socket reads and writes, within the connect timeout.

use std::io::{self, Write};
use std::net::TcpStream;
use std::time::Instant;

use crate::config::ClientConfig;
use crate::error::Error;
use crate::proxy::{MAX_READ, Negotiation, ProxyServer, Step};

use super::net::read_some;

/// Opens the tunnel on `stream` (connected to the proxy) within the connect timeout: the
/// socket timeouts are set to what is left of it before each step, and put back after.
pub(super) fn proxy_tunnel(
    stream: &mut TcpStream,
    server: &ProxyServer,
    host: &str,
    port: u16,
    config: &ClientConfig,
) -> Result<(), Error> {
    let max_head = config.proxy.max_response_head();
    let mut negotiation = Negotiation::new(server, host, port, max_head).map_err(Error::Proxy)?;
    let deadline = Instant::now() + config.connect_timeout;
    let mut buf = [0u8; MAX_READ];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Error::Io(io::Error::new(
                io::ErrorKind::TimedOut,
                "the proxy did not open the tunnel within the connect timeout",
            )));
        }
        stream.set_read_timeout(Some(left))?;
        stream.set_write_timeout(Some(left))?;
        match negotiation.poll().map_err(Error::Proxy)? {
            Step::Write(bytes) => stream.write_all(&bytes)?,
            Step::Read(n) => {
                let got = read_some(stream, &mut buf[..n.min(MAX_READ)])?;
                negotiation.feed(&buf[..got]);
            }
            Step::Done => break,
        }
    }
    stream.set_read_timeout(config.read_timeout)?;
    stream.set_write_timeout(config.write_timeout)?;
    Ok(())
}
