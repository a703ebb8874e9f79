// Blocking programs against tungstenite's API, included by `tests/blocking_oracle.rs`
// where `tungstenite` is the real tungstenite 0.30 (through tokio-tungstenite's
// re-export) and where it is this crate's module.

use std::net::{TcpListener, TcpStream};

use tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tungstenite::protocol::CloseFrame;
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::{Error, Message};

pub fn describe(r: &Result<Message, Error>) -> String {
    match r {
        Ok(m) => match m {
            Message::Text(t) => format!("Text({})", t.as_str()),
            Message::Binary(b) => format!("Binary({} bytes)", b.len()),
            Message::Ping(b) => format!("Ping({:?})", b),
            Message::Pong(b) => format!("Pong({:?})", b),
            Message::Close(None) => "Close(None)".into(),
            Message::Close(Some(f)) => format!("Close({}, {})", u16::from(f.code), f.reason.as_str()),
            Message::Frame(_) => "Frame".into(),
        },
        Err(e) => format!("Err({})", kind(e)),
    }
}

pub fn kind(e: &Error) -> String {
    match e {
        Error::ConnectionClosed => "ConnectionClosed".into(),
        Error::AlreadyClosed => "AlreadyClosed".into(),
        Error::Io(e) => format!("Io({:?})", e.kind()),
        Error::Protocol(p) => format!("Protocol({p:?})"),
        Error::Http(r) => format!("Http({})", r.status()),
        Error::Utf8(_) => "Utf8".into(),
        _ => "other".into(),
    }
}

/// Echoes until the end; then reads and sends once more. `hdr`: through `accept_hdr`
/// with a callback that adds a header.
pub fn echo_server(listener: TcpListener, hdr: bool) -> Vec<String> {
    let (tcp, _) = listener.accept().unwrap();
    let mut ws = if hdr {
        let cb = |req: &Request, mut resp: Response| -> Result<Response, ErrorResponse> {
            assert_eq!(req.uri().path(), "/blocking");
            resp.headers_mut().insert("x-blocking", "yes".parse().unwrap());
            Ok(resp)
        };
        tungstenite::accept_hdr(tcp, cb).unwrap()
    } else {
        tungstenite::accept(tcp).unwrap()
    };
    let mut log = Vec::new();
    loop {
        let r = ws.read();
        log.push(describe(&r));
        match r {
            Ok(m) if m.is_text() || m.is_binary() => ws.send(m).unwrap(),
            Ok(_) => {}
            Err(_) => break,
        }
    }
    log.push(format!("read again {}", describe(&ws.read())));
    log.push(format!("send again {:?}", ws.send(Message::text("late")).map_err(|e| kind(&e))));
    log
}

/// Sends `n` messages and a ping, reads the echoes, closes with `code` (`None`: no
/// code), reads to `ConnectionClosed`, then once more, and sends once more.
pub fn echo_client(port: u16, n: usize, code: Option<u16>) -> Vec<String> {
    let (mut ws, response) = tungstenite::connect(format!("ws://127.0.0.1:{port}/blocking")).unwrap();
    let mut log = vec![format!("status {} x-blocking={:?}", response.status(), response.headers().get("x-blocking"))];
    for i in 0..n {
        let m = if i % 2 == 0 {
            Message::text(format!("line {i}"))
        } else {
            Message::binary(vec![i as u8; 100 * i])
        };
        ws.send(m).unwrap();
        log.push(describe(&ws.read()));
    }
    ws.send(Message::Ping("p".into())).unwrap();
    log.push(describe(&ws.read()));
    let frame = code.map(|c| CloseFrame { code: CloseCode::from(c), reason: "done".into() });
    log.push(format!("close {:?}", ws.close(frame).map_err(|e| kind(&e))));
    loop {
        let r = ws.read();
        log.push(describe(&r));
        if r.is_err() {
            break;
        }
    }
    log.push(format!("read again {}", describe(&ws.read())));
    log.push(format!("send again {:?}", ws.send(Message::text("late")).map_err(|e| kind(&e))));
    log
}

/// Closes first, with 1001, after one message; reads to the end.
pub fn closing_server(listener: TcpListener) -> Vec<String> {
    let (tcp, _) = listener.accept().unwrap();
    let mut ws = tungstenite::accept(tcp).unwrap();
    let mut log = Vec::new();
    ws.send(Message::text("only")).unwrap();
    let frame = CloseFrame { code: CloseCode::Away, reason: "bye".into() };
    log.push(format!("close {:?}", ws.close(Some(frame)).map_err(|e| kind(&e))));
    loop {
        let r = ws.read();
        log.push(describe(&r));
        if r.is_err() {
            break;
        }
    }
    log
}

/// Reads to the end; the send after the peer's close is refused.
pub fn reading_client(port: u16) -> Vec<String> {
    let tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let (mut ws, _) = tungstenite::client(format!("ws://127.0.0.1:{port}/"), tcp).unwrap();
    let mut log = Vec::new();
    loop {
        let r = ws.read();
        log.push(describe(&r));
        match r {
            Ok(Message::Close(_)) => {
                log.push(format!("send after close {:?}", ws.send(Message::text("x")).map_err(|e| kind(&e))));
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    log
}

/// Reads to the first error (no read after it: tungstenite's connection would still be
/// open after some errors, and a read would wait).
pub fn reading_server(listener: TcpListener) -> Vec<String> {
    let (tcp, _) = listener.accept().unwrap();
    let mut ws = tungstenite::accept(tcp).unwrap();
    let mut log = Vec::new();
    loop {
        let r = ws.read();
        log.push(describe(&r));
        if r.is_err() {
            break;
        }
    }
    log
}

/// Sends two messages and drops the socket without a close.
pub fn vanishing_client(port: u16) -> Vec<String> {
    let (mut ws, _) = tungstenite::connect(format!("ws://127.0.0.1:{port}/")).unwrap();
    ws.send(Message::text("one")).unwrap();
    ws.send(Message::binary(vec![2u8; 10])).unwrap();
    drop(ws);
    vec!["dropped".into()]
}

/// Sends a text frame that is not UTF-8 (a raw frame: only tungstenite sends one), then
/// reads until an error.
pub fn bad_text_client(port: u16) -> Vec<String> {
    use tungstenite::protocol::frame::Frame;
    use tungstenite::protocol::frame::coding::{Data, OpCode};
    let (mut ws, _) = tungstenite::connect(format!("ws://127.0.0.1:{port}/")).unwrap();
    let bad = Frame::message(vec![0xffu8, 0xfe], OpCode::Data(Data::Text), true);
    let mut log = vec![format!("bad send {:?}", ws.send(Message::Frame(bad)).map_err(|e| kind(&e)))];
    loop {
        let r = ws.read();
        log.push(describe(&r));
        if r.is_err() {
            break;
        }
    }
    log
}
