// The programs the oracle test runs, written once against tokio-tungstenite's API and
// included twice by `tests/oracle.rs`: in a module where `tokio_tungstenite` is the real
// tokio-tungstenite 0.30, and in one where it is this crate. Each returns a transcript of
// what it saw, written without either library's types, so the two can be compared.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use futures_util::{SinkExt, StreamExt, TryStreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error, Message};
use tokio_tungstenite::{WebSocketStream, accept_async, accept_hdr_async, client_async};

/// A message, described: its kind and its payload (long ones by length and a checksum).
pub fn seen(m: &Message) -> String {
    fn payload(b: &[u8]) -> String {
        if b.len() <= 32 {
            String::from_utf8_lossy(b).into_owned()
        } else {
            let sum = b.iter().fold(0u32, |a, &x| a.wrapping_mul(31).wrapping_add(x as u32));
            format!("{} bytes, sum {sum:08x}", b.len())
        }
    }
    // `to_text` and `len`, as programs call them, on every message.
    let text = match m.to_text() {
        Ok(t) => format!("ok {}", payload(t.as_bytes())),
        Err(e) => format!("err {}", kind(&e)),
    };
    let what = match m {
        Message::Text(t) => format!("Text({})", payload(t.as_bytes())),
        Message::Binary(b) => format!("Binary({})", payload(b)),
        Message::Ping(b) => format!("Ping({})", payload(b)),
        Message::Pong(b) => format!("Pong({})", payload(b)),
        Message::Close(None) => "Close(None)".to_owned(),
        Message::Close(Some(f)) => format!("Close({}, {})", u16::from(f.code), f.reason.as_str()),
        Message::Frame(_) => "Frame".to_owned(),
    };
    format!("{what} len {} to_text {text}", m.len())
}

/// An error, described by what programs match on.
pub fn kind(e: &Error) -> String {
    match e {
        Error::ConnectionClosed => "ConnectionClosed".into(),
        Error::AlreadyClosed => "AlreadyClosed".into(),
        Error::Io(e) => format!("Io({:?})", e.kind()),
        Error::Protocol(p) => format!("Protocol({p:?})"),
        Error::Capacity(c) => format!("Capacity({c:?})"),
        Error::Utf8(_) => "Utf8".into(),
        Error::Url(u) => format!("Url({u:?})"),
        Error::Http(r) => format!(
            "Http({}, body {:?})",
            r.status(),
            r.body().as_deref().map(String::from_utf8_lossy)
        ),
        Error::HttpFormat(_) => "HttpFormat".into(),
        Error::WriteBufferFull(_) => "WriteBufferFull".into(),
        _ => "other".into(),
    }
}

/// The `i`th message of a sequence: text (some of it non-ASCII) or binary, 1 to 70,000
/// bytes.
pub fn nth(i: usize) -> Message {
    let n = 1 + (i * 7919) % (if i % 7 == 6 { 70_000 } else { 3_000 });
    if i % 3 == 0 {
        Message::text(format!("{i}:{}", "é".repeat(n / 2)))
    } else {
        Message::binary(vec![(i % 251) as u8; n])
    }
}

/// Reads `ws` to its end, each message and the error, if any, described.
pub async fn drain<S>(ws: &mut WebSocketStream<S>, log: &mut Vec<String>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    while let Some(m) = ws.next().await {
        match m {
            Ok(m) => log.push(seen(&m)),
            Err(e) => {
                log.push(format!("error {}", kind(&e)));
                break;
            }
        }
    }
    log.push("end".into());
}

pub async fn server_one(listener: &TcpListener) -> WebSocketStream<TcpStream> {
    let (tcp, _) = listener.accept().await.unwrap();
    accept_async(tcp).await.unwrap()
}

pub async fn client_one(addr: SocketAddr) -> WebSocketStream<TcpStream> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    client_async(format!("ws://{addr}/"), tcp).await.unwrap().0
}

// ---- echo ------------------------------------------------------------------------

/// The echo server of tokio-tungstenite's examples: every message back, with `forward`
/// on the split halves (`split`) or a loop on the whole socket.
pub async fn echo_server(listener: TcpListener, split: bool) -> Vec<String> {
    let ws = server_one(&listener).await;
    let log = Arc::new(Mutex::new(Vec::new()));
    if split {
        let (write, read) = ws.split();
        let l = log.clone();
        let r = read
            .inspect_ok(move |m| l.lock().unwrap().push(seen(m)))
            .try_filter(|m| std::future::ready(m.is_text() || m.is_binary()))
            .forward(write)
            .await;
        log.lock().unwrap().push(format!("forward {:?}", r.map_err(|e| kind(&e))));
    } else {
        let mut ws = ws;
        let mut l = Vec::new();
        loop {
            match ws.next().await {
                Some(Ok(m)) => {
                    l.push(seen(&m));
                    if m.is_text() || m.is_binary() {
                        if let Err(e) = ws.send(m).await {
                            l.push(format!("send error {}", kind(&e)));
                        }
                    }
                }
                Some(Err(e)) => {
                    l.push(format!("error {}", kind(&e)));
                    break;
                }
                None => break,
            }
        }
        l.push("end".into());
        // A send after the end.
        let r = ws.send(Message::text("late")).await;
        l.push(format!("late send {:?}", r.map_err(|e| kind(&e))));
        log.lock().unwrap().extend(l);
    }
    Arc::try_unwrap(log).unwrap().into_inner().unwrap()
}

/// Sends `n` messages and a ping, reads the echoes, then `SinkExt::close` and reads to
/// the end; `split`: a writer task and a reader task.
pub async fn echo_client(addr: SocketAddr, n: usize, split: bool) -> Vec<String> {
    let ws = client_one(addr).await;
    let mut log = Vec::new();
    if split {
        let (mut write, mut read) = ws.split();
        let writer = tokio::spawn(async move {
            for i in 0..n {
                write.feed(nth(i)).await.unwrap();
            }
            write.send(Message::Ping("p".into())).await.unwrap();
            write
        });
        let mut got = 0;
        // Where the pong falls among the echoes is the scheduler's choice: it is logged
        // after them.
        let mut control = Vec::new();
        while got < n {
            match read.next().await {
                Some(Ok(m)) => {
                    if m.is_text() || m.is_binary() {
                        got += 1;
                        log.push(seen(&m));
                    } else {
                        control.push(seen(&m));
                    }
                }
                other => {
                    log.push(format!("early end {:?}", other.map(|r| r.map_err(|e| kind(&e)).map(|m| seen(&m)))));
                    break;
                }
            }
        }
        let mut write = writer.await.unwrap();
        log.extend(control);
        let r = write.close().await;
        log.push(format!("close {:?}", r.map_err(|e| kind(&e))));
        while let Some(m) = read.next().await {
            match m {
                Ok(m) => log.push(seen(&m)),
                Err(e) => {
                    log.push(format!("error {}", kind(&e)));
                    break;
                }
            }
        }
        log.push("end".into());
        let r = write.send(Message::text("late")).await;
        log.push(format!("late send {:?}", r.map_err(|e| kind(&e))));
    } else {
        let mut ws = ws;
        for i in 0..n {
            ws.send(nth(i)).await.unwrap();
            // Pongs and pings the peer sends in between are part of the transcript.
            loop {
                let m = ws.next().await.unwrap().unwrap();
                log.push(seen(&m));
                if m.is_text() || m.is_binary() {
                    break;
                }
            }
        }
        ws.send(Message::Ping("p".into())).await.unwrap();
        let r = SinkExt::close(&mut ws).await;
        log.push(format!("close {:?}", r.map_err(|e| kind(&e))));
        drain(&mut ws, &mut log).await;
        let r = ws.send(Message::text("late")).await;
        log.push(format!("late send {:?}", r.map_err(|e| kind(&e))));
    }
    log
}

// ---- the server closes -----------------------------------------------------------

/// Sends `n` messages, then closes with `code` through `WebSocketStream::close`, then
/// reads to the end and tries one more send.
pub async fn closing_server(listener: TcpListener, n: usize, code: u16) -> Vec<String> {
    let mut ws = server_one(&listener).await;
    let mut log = Vec::new();
    for i in 0..n {
        ws.send(nth(i)).await.unwrap();
    }
    let frame = CloseFrame {
        code: CloseCode::from(code),
        reason: "bye".into(),
    };
    let r = ws.close(Some(frame)).await;
    log.push(format!("close {:?}", r.map_err(|e| kind(&e))));
    drain(&mut ws, &mut log).await;
    let r = ws.send(Message::text("late")).await;
    log.push(format!("late send {:?}", r.map_err(|e| kind(&e))));
    log
}

/// Reads everything to the end, then tries a send and a close.
pub async fn reading_client(addr: SocketAddr) -> Vec<String> {
    let mut ws = client_one(addr).await;
    let mut log = Vec::new();
    drain(&mut ws, &mut log).await;
    let r = ws.send(Message::text("late")).await;
    log.push(format!("late send {:?}", r.map_err(|e| kind(&e))));
    let r = ws.close(None).await;
    log.push(format!("late close {:?}", r.map_err(|e| kind(&e))));
    log
}

// ---- the peer goes away ----------------------------------------------------------

/// Reads to the end (the client drops its socket after `n` messages).
pub async fn reading_server(listener: TcpListener) -> Vec<String> {
    let mut ws = server_one(&listener).await;
    let mut log = Vec::new();
    drain(&mut ws, &mut log).await;
    let r = ws.send(Message::text("late")).await;
    log.push(format!("late send {:?}", r.map_err(|e| kind(&e))));
    log
}

/// Sends `n` messages and drops the connection without a close.
pub async fn vanishing_client(addr: SocketAddr, n: usize) -> Vec<String> {
    let mut ws = client_one(addr).await;
    for i in 0..n {
        ws.send(nth(i)).await.unwrap();
    }
    drop(ws);
    vec!["dropped".into()]
}

// ---- custom accept ---------------------------------------------------------------

/// tokio-tungstenite's `server-custom-accept` shape: a callback that reads the path and a
/// header, refuses without the header (403 with a body) and adds a response header.
pub async fn header_server(listener: TcpListener, connections: usize) -> Vec<String> {
    let mut log = Vec::new();
    for _ in 0..connections {
        let (tcp, _) = listener.accept().await.unwrap();
        let seen_req = Arc::new(Mutex::new(String::new()));
        let s = seen_req.clone();
        let callback = move |req: &Request, mut response: Response| {
            *s.lock().unwrap() = format!(
                "{} {} token={:?} version={:?}",
                req.method(),
                req.uri(),
                req.headers().get("x-token"),
                req.headers().get("sec-websocket-version"),
            );
            if req.headers().get("x-token").is_none() {
                let mut refusal = ErrorResponse::new(Some("no token".into()));
                *refusal.status_mut() = tokio_tungstenite::tungstenite::http::StatusCode::FORBIDDEN;
                return Err(refusal);
            }
            response
                .headers_mut()
                .append("x-server", "tested".parse().unwrap());
            Ok(response)
        };
        match accept_hdr_async(tcp, callback).await {
            Ok(mut ws) => {
                log.push(format!("accepted {}", seen_req.lock().unwrap()));
                if let Some(Ok(m)) = ws.next().await {
                    log.push(seen(&m));
                    ws.send(m).await.unwrap();
                }
                drain(&mut ws, &mut log).await;
            }
            Err(e) => log.push(format!("refused {} {}", seen_req.lock().unwrap(), kind(&e))),
        }
    }
    log
}

/// Connects without the header (refused), then with it through an `http::Request` built
/// from the URL (`IntoClientRequest`).
pub async fn header_client(addr: SocketAddr) -> Vec<String> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut log = Vec::new();
    let tcp = TcpStream::connect(addr).await.unwrap();
    match client_async(format!("ws://{addr}/no-token"), tcp).await {
        Ok(_) => log.push("accepted without a token".into()),
        Err(e) => log.push(format!("refused {}", kind(&e))),
    }
    let mut request = format!("ws://{addr}/room/1?x=y").into_client_request().unwrap();
    request
        .headers_mut()
        .insert("x-token", "secret".parse().unwrap());
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (mut ws, response) = client_async(request, tcp).await.unwrap();
    log.push(format!(
        "response {} x-server={:?} upgrade={:?}",
        response.status(),
        response.headers().get("x-server"),
        response.headers().get("upgrade").map(|v| v.to_str().unwrap().to_ascii_lowercase()),
    ));
    ws.send(Message::text("hi")).await.unwrap();
    log.push(seen(&ws.next().await.unwrap().unwrap()));
    ws.close(Some(CloseFrame {
        code: CloseCode::Away,
        reason: "gone".into(),
    }))
    .await
    .unwrap();
    drain(&mut ws, &mut log).await;
    log
}

// ---- broadcast chat --------------------------------------------------------------

/// tokio-tungstenite's chat `server` example: each connection's messages go to every other
/// connection through a channel per peer; the first `peers` connections are served.
pub async fn chat_server(listener: TcpListener, peers: usize) -> Vec<String> {
    type Peers = Arc<Mutex<Vec<(usize, mpsc::UnboundedSender<Message>)>>>;
    let map: Peers = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for id in 0..peers {
        let (tcp, _) = listener.accept().await.unwrap();
        let map = map.clone();
        tasks.push(tokio::spawn(async move {
            let ws = accept_async(tcp).await.unwrap();
            let (tx, mut rx) = mpsc::unbounded_channel();
            map.lock().unwrap().push((id, tx));
            let (mut outgoing, mut incoming) = ws.split();
            let forward = tokio::spawn(async move {
                while let Some(m) = rx.recv().await {
                    if outgoing.send(m).await.is_err() {
                        break;
                    }
                }
                outgoing
            });
            let mut log = Vec::new();
            while let Some(m) = incoming.next().await {
                match m {
                    Ok(m) if m.is_text() => {
                        for (other, tx) in map.lock().unwrap().iter() {
                            if *other != id {
                                let _ = tx.send(m.clone());
                            }
                        }
                    }
                    Ok(m) => log.push(format!("peer {id}: {}", seen(&m))),
                    Err(e) => {
                        log.push(format!("peer {id}: error {}", kind(&e)));
                        break;
                    }
                }
            }
            map.lock().unwrap().retain(|(other, _)| *other != id);
            forward.abort();
            log.push(format!("peer {id}: end"));
            log
        }));
    }
    // Everyone hears "ready" once everyone is in the map: a line sent after it reaches
    // every other peer.
    loop {
        {
            let map = map.lock().unwrap();
            if map.len() == peers {
                for (_, tx) in map.iter() {
                    let _ = tx.send(Message::text("ready"));
                }
                break;
            }
        }
        tokio::task::yield_now().await;
    }
    let mut log = Vec::new();
    for t in tasks {
        log.extend(t.await.unwrap());
    }
    log
}

/// `peers` clients join; once all have, each sends `rounds` lines; each reads what the
/// others sent (sorted: the interleaving is the scheduler's), then closes.
pub async fn chat_clients(addr: SocketAddr, peers: usize, rounds: usize) -> Vec<String> {
    let mut sockets = Vec::new();
    for _ in 0..peers {
        sockets.push(client_one(addr).await);
    }
    for ws in &mut sockets {
        ws.send(Message::Pong("hello".into())).await.unwrap();
    }
    for ws in &mut sockets {
        let ready = ws.next().await.unwrap().unwrap();
        assert_eq!(ready.to_text().unwrap(), "ready");
    }
    let mut tasks = Vec::new();
    for (id, ws) in sockets.into_iter().enumerate() {
        tasks.push(tokio::spawn(async move {
            let (mut write, mut read) = ws.split();
            for r in 0..rounds {
                write.send(Message::text(format!("{id}/{r}"))).await.unwrap();
            }
            let mut got = Vec::new();
            while got.len() < (peers - 1) * rounds {
                match read.next().await {
                    Some(Ok(m)) => got.push(seen(&m)),
                    other => {
                        got.push(format!("early {:?}", other.map(|r| r.map_err(|e| kind(&e)).map(|m| seen(&m)))));
                        break;
                    }
                }
            }
            got.sort();
            write.close().await.unwrap();
            let mut rest = Vec::new();
            while let Some(m) = read.next().await {
                match m {
                    Ok(m) => rest.push(seen(&m)),
                    Err(e) => {
                        rest.push(format!("error {}", kind(&e)));
                        break;
                    }
                }
            }
            got.extend(rest);
            got.into_iter().map(|s| format!("client {id}: {s}")).collect::<Vec<_>>()
        }));
    }
    let mut log = Vec::new();
    for t in tasks {
        log.extend(t.await.unwrap());
    }
    log
}

// ---- interval sends --------------------------------------------------------------

/// tokio-tungstenite's `interval-server` shape: a `select!` between the next message and
/// an interval's tick; after `ticks` ticks the server closes.
pub async fn interval_server(listener: TcpListener, ticks: usize) -> Vec<String> {
    let ws = server_one(&listener).await;
    let (mut write, mut read) = ws.split();
    let mut interval = tokio::time::interval(std::time::Duration::from_millis(1));
    let mut log = Vec::new();
    let mut sent = 0;
    let mut acks = 0;
    // The client acknowledges the ticks whose number ends in 0 or 5.
    let expected = ticks.div_ceil(5);
    loop {
        tokio::select! {
            m = read.next() => match m {
                Some(Ok(m)) => {
                    log.push(seen(&m));
                    if m.is_text() {
                        acks += 1;
                        if acks == expected {
                            let close = CloseFrame { code: CloseCode::Normal, reason: "done".into() };
                            let r = write.send(Message::Close(Some(close))).await;
                            log.push(format!("close {:?}", r.map_err(|e| kind(&e))));
                        }
                    }
                }
                Some(Err(e)) => { log.push(format!("error {}", kind(&e))); break; }
                None => { log.push("end".into()); break; }
            },
            _ = interval.tick(), if sent < ticks => {
                write.send(Message::text(format!("tick {sent}"))).await.unwrap();
                sent += 1;
            }
        }
    }
    let r = write.send(Message::text("late")).await;
    log.push(format!("late send {:?}", r.map_err(|e| kind(&e))));
    log
}

/// Reads ticks, answering each fifth with a text message, to the end.
pub async fn tick_client(addr: SocketAddr) -> Vec<String> {
    let mut ws = client_one(addr).await;
    let mut log = Vec::new();
    while let Some(m) = ws.next().await {
        match m {
            Ok(m) => {
                log.push(seen(&m));
                if let Message::Text(t) = &m {
                    if t.ends_with('0') || t.ends_with('5') {
                        // After the server's close this is refused: also in the log.
                        let r = ws.send(Message::text(format!("ack {t}"))).await;
                        if let Err(e) = r {
                            log.push(format!("ack error {}", kind(&e)));
                        }
                    }
                }
            }
            Err(e) => {
                log.push(format!("error {}", kind(&e)));
                break;
            }
        }
    }
    log.push("end".into());
    log
}

// ---- limits ----------------------------------------------------------------------

/// A server with a 1,000-byte message limit.
pub async fn small_server(listener: TcpListener) -> Vec<String> {
    let (tcp, _) = listener.accept().await.unwrap();
    let config = WebSocketConfig::default()
        .max_message_size(Some(1000))
        .max_frame_size(Some(1000));
    let mut ws = tokio_tungstenite::accept_async_with_config(tcp, Some(config))
        .await
        .unwrap();
    let mut log = Vec::new();
    drain(&mut ws, &mut log).await;
    log
}

/// Sends a small message, then one over the limit, then reads to the end.
pub async fn big_client(addr: SocketAddr) -> Vec<String> {
    let mut ws = client_one(addr).await;
    let mut log = Vec::new();
    ws.send(Message::text("small")).await.unwrap();
    let r = ws.send(Message::binary(vec![7u8; 5000])).await;
    log.push(format!("big send {:?}", r.map_err(|e| kind(&e))));
    drain(&mut ws, &mut log).await;
    log
}

/// Sends a text frame whose payload is not UTF-8 (a raw `Message::Frame`: only
/// tokio-tungstenite sends one), then reads to the end.
pub async fn bad_text_client(addr: SocketAddr) -> Vec<String> {
    use tokio_tungstenite::tungstenite::protocol::frame::Frame;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
    let mut ws = client_one(addr).await;
    let mut log = Vec::new();
    ws.send(Message::text("fine")).await.unwrap();
    let bad = Frame::message(vec![b'o', b'k', 0xff, 0xfe], OpCode::Data(Data::Text), true);
    let r = ws.send(Message::Frame(bad)).await;
    log.push(format!("bad send {:?}", r.map_err(|e| kind(&e))));
    drain(&mut ws, &mut log).await;
    log
}

// ---- subprotocols, raw sockets, raw frames ------------------------------------------

/// A callback that picks the last subprotocol the client offers (none offered: none
/// answered), for `connections` connections; each echoes one message.
pub async fn subprotocol_server(listener: TcpListener, connections: usize) -> Vec<String> {
    let mut log = Vec::new();
    for _ in 0..connections {
        let (tcp, _) = listener.accept().await.unwrap();
        let callback = |req: &Request, mut response: Response| {
            let offered = req
                .headers()
                .get("sec-websocket-protocol")
                .map(|v| v.to_str().unwrap().to_owned());
            if let Some(last) = offered.as_deref().and_then(|o| o.split(',').next_back()) {
                if req.uri().path() != "/ignore" {
                    response
                        .headers_mut()
                        .insert("sec-websocket-protocol", last.trim().parse().unwrap());
                }
            }
            Ok(response)
        };
        match accept_hdr_async(tcp, callback).await {
            Ok(mut ws) => {
                if let Some(Ok(m)) = ws.next().await {
                    log.push(seen(&m));
                    let _ = ws.send(m).await;
                }
                drain(&mut ws, &mut log).await;
            }
            Err(e) => log.push(format!("refused {}", kind(&e))),
        }
    }
    log
}

/// Offers two subprotocols (answered), then two to a path where the server answers none
/// (refused by the client), then sends a whole text message as a raw `Message::Frame`.
pub async fn subprotocol_client(addr: SocketAddr) -> Vec<String> {
    use tokio_tungstenite::tungstenite::ClientRequestBuilder;
    use tokio_tungstenite::tungstenite::protocol::frame::Frame;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
    let mut log = Vec::new();
    let request = ClientRequestBuilder::new(format!("ws://{addr}/chat").parse().unwrap())
        .with_sub_protocol("chat")
        .with_sub_protocol("superchat");
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (mut ws, response) = client_async(request, tcp).await.unwrap();
    log.push(format!(
        "protocol {:?}",
        response.headers().get("sec-websocket-protocol")
    ));
    let frame = Frame::message("raw", OpCode::Data(Data::Text), true);
    ws.send(Message::Frame(frame)).await.unwrap();
    log.push(seen(&ws.next().await.unwrap().unwrap()));
    ws.close(None).await.unwrap();
    drain(&mut ws, &mut log).await;

    let request = ClientRequestBuilder::new(format!("ws://{addr}/ignore").parse().unwrap())
        .with_sub_protocol("chat");
    let tcp = TcpStream::connect(addr).await.unwrap();
    match client_async(request, tcp).await {
        Ok(_) => log.push("accepted without a subprotocol".into()),
        Err(e) => log.push(format!("refused {}", kind(&e))),
    }
    log
}

/// `from_raw_socket` on both ends of a TCP connection, no handshake: the server echoes.
pub async fn raw_server(listener: TcpListener) -> Vec<String> {
    use tokio_tungstenite::tungstenite::protocol::Role;
    let (tcp, _) = listener.accept().await.unwrap();
    let mut ws = WebSocketStream::from_raw_socket(tcp, Role::Server, None).await;
    let mut log = Vec::new();
    while let Some(Ok(m)) = ws.next().await {
        log.push(seen(&m));
        if m.is_text() || m.is_binary() {
            ws.send(m).await.unwrap();
        }
    }
    log.push("end".into());
    log
}

pub async fn raw_client(addr: SocketAddr) -> Vec<String> {
    use tokio_tungstenite::tungstenite::protocol::Role;
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut ws = WebSocketStream::from_raw_socket(tcp, Role::Client, None).await;
    let mut log = Vec::new();
    for i in 0..5 {
        ws.send(nth(i)).await.unwrap();
        log.push(seen(&ws.next().await.unwrap().unwrap()));
    }
    SinkExt::close(&mut ws).await.unwrap();
    drain(&mut ws, &mut log).await;
    log
}

/// Sends `n` messages and drops the connection without a close.
pub async fn vanishing_server(listener: TcpListener, n: usize) -> Vec<String> {
    let mut ws = server_one(&listener).await;
    for i in 0..n {
        ws.send(nth(i)).await.unwrap();
    }
    drop(ws);
    vec!["dropped".into()]
}

/// Sends a close frame with code 1005, which may not be sent (a raw `Message::Frame`:
/// only tokio-tungstenite sends one), then reads to the end.
pub async fn bad_close_client(addr: SocketAddr) -> Vec<String> {
    use tokio_tungstenite::tungstenite::protocol::frame::Frame;
    let mut ws = client_one(addr).await;
    let mut log = Vec::new();
    let frame = Frame::close(Some(CloseFrame {
        code: CloseCode::from(1005),
        reason: "".into(),
    }));
    let r = ws.send(Message::Frame(frame)).await;
    log.push(format!("bad close {:?}", r.map_err(|e| kind(&e))));
    drain(&mut ws, &mut log).await;
    log
}

/// Sends a 200-byte ping, then closes and reads to the end.
pub async fn big_ping_client(addr: SocketAddr) -> Vec<String> {
    let mut ws = client_one(addr).await;
    let r = ws.send(Message::Ping(vec![1u8; 200].into())).await;
    let mut log = vec![format!("big ping {:?}", r.map_err(|e| kind(&e)))];
    let _ = ws.close(None).await;
    drain(&mut ws, &mut log).await;
    log
}

/// `connect_async` with a URL without a path, then one message.
pub async fn no_path_client(addr: SocketAddr) -> Vec<String> {
    let (mut ws, response) = tokio_tungstenite::connect_async(format!("ws://{addr}"))
        .await
        .unwrap();
    let mut log = vec![format!("status {}", response.status())];
    ws.send(Message::text("x")).await.unwrap();
    log.push(seen(&ws.next().await.unwrap().unwrap()));
    SinkExt::close(&mut ws).await.unwrap();
    drain(&mut ws, &mut log).await;
    log
}
