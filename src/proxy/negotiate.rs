//! The proxy exchange itself, sans-IO: HTTP `CONNECT` and SOCKS5 as a state machine that
//! says what it needs next ([`Step`]) and takes what the driver read.

use std::net::{Ipv4Addr, Ipv6Addr};

use base64::Engine;

use super::{ProxyError, ProxyKind, ProxyServer};

// RFC 1928 3 and 4: version 5, methods 0x00 (no authentication) and 0x02
// (username/password), command 0x01 CONNECT, address types 1 (IPv4), 3 (domain name),
// 4 (IPv6).
const SOCKS5: u8 = 0x05;
const NO_AUTH: u8 = 0x00;
const USER_PASS: u8 = 0x02;
const NO_ACCEPTABLE: u8 = 0xFF;
const CMD_CONNECT: u8 = 0x01;
const ATYP_V4: u8 = 0x01;
const ATYP_DOMAIN: u8 = 0x03;
const ATYP_V6: u8 = 0x04;

/// Largest read the negotiation ever asks for: a SOCKS5 bound domain name and port.
pub const MAX_READ: usize = 255 + 2;

/// What the negotiation needs next from its driver.
#[derive(Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Step {
    /// Write these bytes (all of them) and flush.
    Write(Vec<u8>),
    /// Read at least one and at most this many bytes (never more: what follows the
    /// proxy's answer belongs to the tunnel) and [`Negotiation::feed`] them.
    Read(usize),
    /// The tunnel is open.
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    SendConnect,
    HttpHead,
    SendGreeting,
    MethodChoice,
    SendAuth,
    AuthReply,
    SendRequest,
    ReplyHead,
    DomainLen,
    BoundAddr(usize),
    Done,
}

/// The client side of opening a tunnel, sans IO: [`poll`](Self::poll) says what to
/// write or how much may be read, [`feed`](Self::feed) takes what was read. The tokio
/// and blocking layers drive the same machine; drive it yourself for another runtime.
///
/// ```
/// use rapidws::proxy::{Negotiation, ProxyServer, Step};
///
/// let server = ProxyServer::parse("http://proxy.example:3128").unwrap();
/// let mut n = Negotiation::new(&server, "example.com", 443, 8192).unwrap();
/// let Ok(Step::Write(request)) = n.poll() else { panic!() };
/// assert!(request.starts_with(b"CONNECT example.com:443 HTTP/1.1\r\n"));
/// // Write it, then read what the proxy answers, at most as much as `Read` allows.
/// let Ok(Step::Read(max)) = n.poll() else { panic!() };
/// let answer = b"HTTP/1.1 200 Connection established\r\n\r\n";
/// for chunk in answer.chunks(max) {
///     n.feed(chunk);
///     if let Ok(Step::Done) = n.poll() { break; }
/// }
/// assert_eq!(n.poll().unwrap(), Step::Done);
/// ```
pub struct Negotiation {
    state: State,
    /// The next message to write: the CONNECT request or the SOCKS5 greeting.
    out: Vec<u8>,
    /// The SOCKS5 username/password message, when there are credentials.
    auth: Option<Vec<u8>>,
    /// The SOCKS5 CONNECT request.
    request: Vec<u8>,
    /// Bytes of the current answer read so far.
    buf: Vec<u8>,
    max_head: usize,
}

impl Negotiation {
    /// A tunnel through `server` to `host:port`, refusing a proxy answer head over
    /// `max_head` bytes. Builds every message up front, so a name or credential that
    /// cannot be sent fails before any byte goes out.
    pub fn new(
        server: &ProxyServer,
        host: &str,
        port: u16,
        max_head: usize,
    ) -> Result<Negotiation, ProxyError> {
        let mut n = Negotiation {
            state: State::Done,
            out: Vec::new(),
            auth: None,
            request: Vec::new(),
            buf: Vec::new(),
            max_head,
        };
        match server.kind {
            ProxyKind::Http => {
                n.out = connect_request(server, host, port)?;
                n.state = State::SendConnect;
            }
            ProxyKind::Socks5 => {
                n.request = socks5_request(host, port)?;
                n.auth = server
                    .credentials
                    .as_ref()
                    .map(|(u, p)| socks5_auth(u, p))
                    .transpose()?;
                // RFC 1928 3: VER, NMETHODS, METHODS.
                n.out = match n.auth {
                    Some(_) => vec![SOCKS5, 2, NO_AUTH, USER_PASS],
                    None => vec![SOCKS5, 1, NO_AUTH],
                };
                n.state = State::SendGreeting;
            }
        }
        Ok(n)
    }

    /// Bytes read from the proxy: at least one, at most what [`Step::Read`] allowed.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next step.
    pub fn poll(&mut self) -> Result<Step, ProxyError> {
        loop {
            match self.state {
                State::SendConnect => {
                    self.state = State::HttpHead;
                    return Ok(Step::Write(std::mem::take(&mut self.out)));
                }
                State::HttpHead => {
                    // Each read asks for the fewest bytes that could complete
                    // "\r\n\r\n", so no read can run past the end of the head.
                    const END: &[u8; 4] = b"\r\n\r\n";
                    let matched = (1..=4)
                        .rev()
                        .find(|&k| self.buf.ends_with(&END[..k]))
                        .unwrap_or(0);
                    if matched < 4 {
                        let want = 4 - matched;
                        if self.buf.len() + want > self.max_head {
                            return Err(ProxyError::ResponseTooLarge);
                        }
                        return Ok(Step::Read(want));
                    }
                    check_connect_response(&self.buf)?;
                    self.state = State::Done;
                }
                State::SendGreeting => {
                    self.state = State::MethodChoice;
                    return Ok(Step::Write(std::mem::take(&mut self.out)));
                }
                State::MethodChoice => {
                    let Some([ver, method]) = self.take::<2>() else {
                        return Ok(self.read_rest(2));
                    };
                    if ver != SOCKS5 {
                        return Err(ProxyError::MalformedResponse);
                    }
                    self.state = match (method, &self.auth) {
                        (NO_AUTH, _) => State::SendRequest,
                        (USER_PASS, Some(_)) => State::SendAuth,
                        // RFC 1928 3: "If the selected METHOD is X'FF', none of the
                        // methods listed by the client are acceptable, and the client MUST
                        // close the connection."
                        (NO_ACCEPTABLE, _) => return Err(ProxyError::Socks5NoAcceptableMethod),
                        // A method we did not offer.
                        _ => return Err(ProxyError::MalformedResponse),
                    };
                }
                State::SendAuth => {
                    self.state = State::AuthReply;
                    return Ok(Step::Write(self.auth.take().unwrap_or_default()));
                }
                State::AuthReply => {
                    let Some([ver, status]) = self.take::<2>() else {
                        return Ok(self.read_rest(2));
                    };
                    // RFC 1929 2: "A STATUS field of X'00' indicates success. If the
                    // server returns a `failure' (STATUS value other than X'00') status,
                    // it MUST close the connection."
                    if ver != 0x01 {
                        return Err(ProxyError::MalformedResponse);
                    }
                    if status != 0x00 {
                        return Err(ProxyError::Socks5AuthFailed(status));
                    }
                    self.state = State::SendRequest;
                }
                State::SendRequest => {
                    self.state = State::ReplyHead;
                    return Ok(Step::Write(std::mem::take(&mut self.request)));
                }
                State::ReplyHead => {
                    // RFC 1928 6: VER, REP, RSV, ATYP, BND.ADDR, BND.PORT.
                    let Some([ver, rep, _, atyp]) = self.take::<4>() else {
                        return Ok(self.read_rest(4));
                    };
                    if ver != SOCKS5 {
                        return Err(ProxyError::MalformedResponse);
                    }
                    if rep != 0x00 {
                        return Err(ProxyError::Socks5Reply(rep));
                    }
                    // The bound address is read to its end (and dropped) so no byte of it
                    // is taken for the tunnel; its size comes from the address type.
                    self.state = match atyp {
                        ATYP_V4 => State::BoundAddr(4 + 2),
                        ATYP_V6 => State::BoundAddr(16 + 2),
                        ATYP_DOMAIN => State::DomainLen,
                        _ => return Err(ProxyError::MalformedResponse),
                    };
                }
                State::DomainLen => {
                    let Some([len]) = self.take::<1>() else {
                        return Ok(self.read_rest(1));
                    };
                    self.state = State::BoundAddr(usize::from(len) + 2);
                }
                State::BoundAddr(n) => {
                    if self.buf.len() < n {
                        return Ok(self.read_rest(n));
                    }
                    self.buf.clear();
                    self.state = State::Done;
                }
                State::Done => return Ok(Step::Done),
            }
        }
    }

    /// The first `N` bytes once that many were read (the buffer is then emptied).
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let got: [u8; N] = self.buf.get(..N)?.try_into().ok()?;
        self.buf.clear();
        Some(got)
    }

    /// A read for the rest of an `n`-byte field.
    fn read_rest(&self, n: usize) -> Step {
        Step::Read(n - self.buf.len())
    }
}

fn connect_request(server: &ProxyServer, host: &str, port: u16) -> Result<Vec<u8>, ProxyError> {
    // RFC 9110 9.3.6: "the request-target consists of only the host and port number of
    // the tunnel destination"; IPv6 literals in brackets (RFC 3986 3.2.2).
    let authority = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    if authority.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        return Err(ProxyError::InvalidUrl("invalid target host"));
    }
    let mut request = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n");
    if let Some((user, pass)) = &server.credentials {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
        request.push_str("Proxy-Authorization: Basic ");
        request.push_str(&token);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    Ok(request.into_bytes())
}

fn check_connect_response(head: &[u8]) -> Result<(), ProxyError> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut response = httparse::Response::new(&mut headers);
    match response.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return Err(ProxyError::MalformedResponse),
    }
    let status = response.code.ok_or(ProxyError::MalformedResponse)?;
    // RFC 9110 9.3.6: "Any 2xx (Successful) response indicates that the sender (and all
    // inbound proxies) will switch to tunnel mode immediately after the response header
    // section"; any other status means the tunnel was not opened.
    if !(200..300).contains(&status) {
        return Err(ProxyError::Status(status));
    }
    Ok(())
}

fn socks5_request(host: &str, port: u16) -> Result<Vec<u8>, ProxyError> {
    let mut request = vec![SOCKS5, CMD_CONNECT, 0x00];
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(v4) = bare.parse::<Ipv4Addr>() {
        request.push(ATYP_V4);
        request.extend_from_slice(&v4.octets());
    } else if let Ok(v6) = bare.parse::<Ipv6Addr>() {
        request.push(ATYP_V6);
        request.extend_from_slice(&v6.octets());
    } else {
        // RFC 1928 5: "the address field contains a fully-qualified domain name. The
        // first octet of the address field contains the number of octets of name that
        // follow". Sending the name lets the proxy resolve it.
        let len = u8::try_from(host.len()).map_err(|_| ProxyError::Socks5FieldTooLong)?;
        if len == 0 {
            return Err(ProxyError::InvalidUrl("empty target host"));
        }
        request.push(ATYP_DOMAIN);
        request.push(len);
        request.extend_from_slice(host.as_bytes());
    }
    request.extend_from_slice(&port.to_be_bytes());
    Ok(request)
}

fn socks5_auth(user: &str, pass: &str) -> Result<Vec<u8>, ProxyError> {
    // RFC 1929 2: VER 1, ULEN, UNAME, PLEN, PASSWD; the lengths are one octet each and
    // a user name has at least one.
    let ulen = u8::try_from(user.len()).map_err(|_| ProxyError::Socks5FieldTooLong)?;
    let plen = u8::try_from(pass.len()).map_err(|_| ProxyError::Socks5FieldTooLong)?;
    if ulen == 0 {
        return Err(ProxyError::Socks5FieldTooLong);
    }
    let mut msg = vec![0x01, ulen];
    msg.extend_from_slice(user.as_bytes());
    msg.push(plen);
    msg.extend_from_slice(pass.as_bytes());
    Ok(msg)
}
