//! Unit tests of the proxy configuration and the negotiation.

use super::*;

#[test]
fn no_proxy_matches_names_suffixes_and_star() {
    assert!(no_proxy_matches("*", "anything.example"));
    assert!(no_proxy_matches("example.com", "example.com"));
    assert!(no_proxy_matches("example.com", "a.b.EXAMPLE.com"));
    assert!(no_proxy_matches(" .example.com ", "a.example.com"));
    assert!(no_proxy_matches("*.example.com", "a.example.com"));
    assert!(!no_proxy_matches("example.com", "badexample.com"));
    assert!(no_proxy_matches("localhost:8080,127.0.0.1", "127.0.0.1"));
    assert!(!no_proxy_matches("0.0.1", "127.0.0.1"));
    assert!(no_proxy_matches("[::1]:80", "::1"));
    assert!(no_proxy_matches("::1", "[::1]"));
    assert!(!no_proxy_matches(",, ,", "example.com"));
}

/// Drives a negotiation with `answer`, handing over `chunk` bytes at most per read.
fn drive(server: &str, answer: &[u8], chunk: usize) -> Result<usize, ProxyError> {
    let server = ProxyServer::parse(server).unwrap();
    let mut n = Negotiation::new(&server, "example.com", 443, 1024)?;
    let mut pos = 0;
    loop {
        match n.poll()? {
            Step::Write(bytes) => assert!(!bytes.is_empty()),
            Step::Read(want) => {
                assert!((1..=MAX_READ).contains(&want));
                let end = (pos + want.min(chunk)).min(answer.len());
                assert!(end > pos, "asked for more than the whole answer");
                n.feed(&answer[pos..end]);
                pos = end;
            }
            Step::Done => return Ok(pos),
        }
    }
}

#[test]
fn answers_split_anywhere_give_the_same_result_and_are_read_exactly() {
    let socks = [5, 2, 1, 0, 5, 0, 0, 3, 3, b'a', b'b', b'c', 1, 187];
    let http = b"HTTP/1.1 200 OK\r\nX: \r\r\n\n\r\n\r\n";
    for chunk in [1, 2, 3, 5, MAX_READ] {
        assert_eq!(drive("socks5://u:p@s", &socks, chunk), Ok(socks.len()));
        assert_eq!(
            drive("http://s", http, chunk),
            Err(ProxyError::MalformedResponse)
        );
        let ok = b"HTTP/1.1 200 OK\r\nVia: 1.1 p\r\n\r\n";
        assert_eq!(drive("http://s", ok, chunk), Ok(ok.len()));
        let refused = [5, 2, 1, 7];
        assert_eq!(
            drive("socks5://u:p@s", &refused, chunk),
            Err(ProxyError::Socks5AuthFailed(7))
        );
    }
}

#[test]
fn percent_decoding_of_credentials() {
    assert_eq!(percent_decode("p%40ss%3Aw").unwrap(), "p@ss:w");
    assert!(percent_decode("%4").is_err());
    assert!(percent_decode("%zz").is_err());
    assert!(percent_decode("%ff").is_err());
}
