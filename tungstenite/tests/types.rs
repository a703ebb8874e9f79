//! The message, text, close-code and error types against tungstenite's own: the same
//! calls on the same values give the same answers.

// Comparing with an owned `String` on purpose: `PartialEq<String>` is part of the API.
#![allow(clippy::cmp_owned)]

use oracle::tungstenite as theirs;
use rapidws_tungstenite::tungstenite as ours;

/// The same expression on a value of each crate, compared as text.
macro_rules! same {
    ($v:ident => $e:expr, $theirs:expr, $ours:expr) => {{
        let t = {
            let $v = $theirs;
            format!("{:?}", $e)
        };
        let o = {
            let $v = $ours;
            format!("{:?}", $e)
        };
        assert_eq!(o, t, "{}", stringify!($e));
    }};
}

fn payloads() -> Vec<Vec<u8>> {
    vec![
        b"".to_vec(),
        b"hello".to_vec(),
        "h\u{e9}llo \u{1f600}".as_bytes().to_vec(),
        vec![0xff, 0xfe],
        b"ok\xe2\x82".to_vec(),
    ]
}

#[test]
fn messages_answer_the_same() {
    for p in payloads() {
        let b = bytes::Bytes::from(p.clone());
        for kind in 0..4 {
            let t = match kind {
                0 => theirs::Message::Binary(b.clone()),
                1 => theirs::Message::Ping(b.clone()),
                2 => theirs::Message::Pong(b.clone()),
                _ => theirs::Message::from(p.clone()),
            };
            let o = match kind {
                0 => ours::Message::Binary(b.clone()),
                1 => ours::Message::Ping(b.clone()),
                2 => ours::Message::Pong(b.clone()),
                _ => ours::Message::from(p.clone()),
            };
            same!(m => (m.len(), m.is_empty(), m.is_text(), m.is_binary(), m.is_ping(), m.is_pong(), m.is_close()), t.clone(), o.clone());
            same!(m => m.to_text().map_err(|e| e.to_string()), t.clone(), o.clone());
            same!(m => m.clone().into_text().map(|t| t.to_string()).map_err(|e| e.to_string()), t.clone(), o.clone());
            same!(m => m.clone().into_data(), t.clone(), o.clone());
            same!(m => m.to_string(), t.clone(), o.clone());
        }
        if let Ok(s) = String::from_utf8(p.clone()) {
            same!(m => (m.len(), m.to_text().map(str::to_owned).map_err(|e| e.to_string()), m.to_string(), m.is_text()), theirs::Message::text(s.clone()), ours::Message::text(s.clone()));
            same!(m => m.into_data(), theirs::Message::from(s.as_str()), ours::Message::from(s.as_str()));
        }
    }
}

#[test]
fn close_messages_answer_the_same() {
    for code in [
        1000u16, 1001, 1002, 1005, 1006, 1015, 1016, 3000, 4000, 999, 5000,
    ] {
        same!(c => (u16::from(c), c.is_allowed(), c.to_string()), theirs::protocol::frame::coding::CloseCode::from(code), ours::protocol::frame::coding::CloseCode::from(code));
        let t = theirs::Message::Close(Some(theirs::protocol::CloseFrame {
            code: code.into(),
            reason: "why".into(),
        }));
        let o = ours::Message::Close(Some(ours::protocol::CloseFrame {
            code: code.into(),
            reason: "why".into(),
        }));
        same!(m => (m.len(), m.to_text().map(str::to_owned).ok(), m.to_string(), m.clone().into_data()), t.clone(), o.clone());
        same!(m => match m { theirs::Message::Close(Some(f)) => f.to_string(), _ => unreachable!() }, t, theirs::Message::Close(Some(theirs::protocol::CloseFrame { code: code.into(), reason: "why".into() })));
        let _ = o;
    }
    same!(m => (m.len(), m.to_text().map(str::to_owned).ok(), m.to_string()), theirs::Message::Close(None), ours::Message::Close(None));
}

#[test]
fn text_answers_the_same() {
    for p in payloads() {
        same!(r => r.map(|t| (t.as_str().to_owned(), t.len())).map_err(|e| e.to_string()), theirs::Utf8Bytes::try_from(p.clone()), ours::Utf8Bytes::try_from(p.clone()));
        same!(r => r.map(|t| t.to_string()).is_ok(), theirs::Utf8Bytes::try_from(bytes::Bytes::from(p.clone())), ours::Utf8Bytes::try_from(bytes::Bytes::from(p.clone())));
    }
    let (t, o) = (
        theirs::Utf8Bytes::from_static("static"),
        ours::Utf8Bytes::from_static("static"),
    );
    assert_eq!(
        (o == "static", o == "static".to_owned(), o.as_str()),
        (t == "static", t == "static".to_owned(), t.as_str())
    );
    assert_eq!(format!("{o}"), format!("{t}"));
    assert_eq!(ours::Utf8Bytes::default(), "");
}

#[test]
fn errors_read_the_same() {
    use ours::error::{CapacityError as OC, ProtocolError as OP, UrlError as OU};
    use theirs::error::{CapacityError as TC, ProtocolError as TP, UrlError as TU};
    let pairs: Vec<(theirs::Error, ours::Error)> = vec![
        (
            theirs::Error::ConnectionClosed,
            ours::Error::ConnectionClosed,
        ),
        (theirs::Error::AlreadyClosed, ours::Error::AlreadyClosed),
        (
            TP::ResetWithoutClosingHandshake.into(),
            OP::ResetWithoutClosingHandshake.into(),
        ),
        (TP::SendAfterClosing.into(), OP::SendAfterClosing.into()),
        (
            TP::UnmaskedFrameFromClient.into(),
            OP::UnmaskedFrameFromClient.into(),
        ),
        (
            TC::MessageTooLong {
                size: 2,
                max_size: 1,
            }
            .into(),
            OC::MessageTooLong {
                size: 2,
                max_size: 1,
            }
            .into(),
        ),
        (
            TU::UnsupportedUrlScheme.into(),
            OU::UnsupportedUrlScheme.into(),
        ),
        (
            theirs::Error::Utf8("x".into()),
            ours::Error::Utf8("x".into()),
        ),
    ];
    for (t, o) in pairs {
        assert_eq!(o.to_string(), t.to_string());
        assert_eq!(format!("{o:?}"), format!("{t:?}"));
    }
}

#[test]
fn accept_keys_and_client_requests_are_the_same() {
    use ours::client::IntoClientRequest as _;
    assert_eq!(
        ours::handshake::derive_accept_key(b"dGhlIHNhbXBsZSBub25jZQ=="),
        theirs::handshake::derive_accept_key(b"dGhlIHNhbXBsZSBub25jZQ==")
    );
    for url in [
        "ws://localhost:9001/path?q=1",
        "wss://user:pw@example.com/",
        "http://example.com/",
        "ws:///x",
    ] {
        let t = theirs::client::IntoClientRequest::into_client_request(url);
        let o = url.into_client_request();
        assert_eq!(o.is_ok(), t.is_ok(), "{url}");
        if let (Ok(o), Ok(t)) = (o, t) {
            assert_eq!(o.uri(), t.uri());
            let names = |h: &http::HeaderMap| {
                h.iter()
                    .map(|(k, _)| k.as_str().to_owned())
                    .collect::<Vec<_>>()
            };
            assert_eq!(names(o.headers()), names(t.headers()));
            assert_eq!(o.headers().get("host"), t.headers().get("host"));
        }
    }
    let b = ours::ClientRequestBuilder::new("ws://h/".parse().unwrap())
        .with_header("a", "b")
        .with_sub_protocol("p1")
        .with_sub_protocol("p2");
    let tb = theirs::ClientRequestBuilder::new("ws://h/".parse().unwrap())
        .with_header("a", "b")
        .with_sub_protocol("p1")
        .with_sub_protocol("p2");
    let (o, t) = (
        b.into_client_request().unwrap(),
        theirs::client::IntoClientRequest::into_client_request(tb).unwrap(),
    );
    assert_eq!(
        o.headers().get("sec-websocket-protocol"),
        t.headers().get("sec-websocket-protocol")
    );
    assert_eq!(o.headers().get("a"), t.headers().get("a"));
}
