//! The event-handler API: callbacks in order, per-connection state, panics contained,
//! and the dial result a reconnect loop needs.
#![cfg(feature = "tokio")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use rapidws::handler::{self, Handler, Socket, dial_handler, serve_handler};
use rapidws::tokio::{
    ClientConfig, CloseFrame, Error as WsError, MaybeTlsStream, Message, ServerConfig, WebSocket,
};
use tokio::net::{TcpListener, TcpStream};

/// Echoes data; panics on the text "panic"; counts messages per connection.
struct Echo {
    count: usize,
}

impl Handler for Echo {
    fn on_message(&mut self, socket: &mut Socket, msg: Message) {
        self.count += 1;
        if msg == Message::text("panic") {
            panic!("handler asked to panic");
        }
        if msg == Message::text("reply, then panic") {
            socket.send_text("reply");
            panic!("handler asked to panic after a reply");
        }
        if msg == Message::text("count") {
            socket.send_text(self.count.to_string());
            return;
        }
        socket.send(msg);
    }
}

async fn start_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/", listener.local_addr().unwrap());
    tokio::spawn(serve_handler(listener, ServerConfig::default(), |_| Echo {
        count: 0,
    }));
    url
}

/// A client handler that records what it saw and closes after `stop_after` replies.
#[derive(Default)]
struct Recorder {
    log: Arc<Mutex<Vec<String>>>,
    to_send: Vec<Message>,
    stop_after: usize,
    replies: usize,
}

impl Handler for Recorder {
    fn on_open(&mut self, socket: &mut Socket) {
        self.log.lock().unwrap().push("open".into());
        for m in self.to_send.drain(..) {
            socket.send(m);
        }
    }
    fn on_message(&mut self, socket: &mut Socket, msg: Message) {
        self.log.lock().unwrap().push(format!("msg {msg:?}"));
        self.replies += 1;
        if self.replies == self.stop_after {
            socket.close(1000, "enough");
        }
    }
    fn on_pong(&mut self, _: &mut Socket, payload: Bytes) {
        self.log.lock().unwrap().push(format!("pong {payload:?}"));
    }
    fn on_close(&mut self, frame: Option<&CloseFrame>, error: Option<&WsError>) {
        self.log.lock().unwrap().push(format!(
            "close {:?} {}",
            frame.map(|f| f.code.0),
            error.is_some()
        ));
    }
}

fn within<F: std::future::Future>(f: F) -> tokio::time::Timeout<F> {
    tokio::time::timeout(Duration::from_secs(10), f)
}

/// A plain client connection to `url`.
async fn client(url: &str) -> WebSocket<MaybeTlsStream<TcpStream>> {
    within(rapidws::tokio::connect(url, &ClientConfig::default()))
        .await
        .unwrap()
        .unwrap()
}

#[tokio::test]
async fn callbacks_run_in_order_with_per_connection_state() {
    let url = start_server().await;
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut client = Recorder {
        log: log.clone(),
        to_send: vec![
            Message::text("a"),
            Message::Ping(Bytes::from_static(b"p")),
            Message::binary(vec![1u8, 2, 3]),
            Message::text("count"),
        ],
        stop_after: 3,
        ..Recorder::default()
    };
    let r = within(dial_handler(&url, &ClientConfig::default(), &mut client))
        .await
        .unwrap();
    assert!(r.is_ok(), "{r:?}");
    let log = log.lock().unwrap().clone();
    // The server's pong is its own control frame: it goes ahead of the replies still
    // queued from the same read, so where it lands depends on how the reads fell.
    let pong = log.iter().position(|l| l == "pong b\"p\"");
    assert!(
        pong.is_some_and(|i| i > 0 && i < log.len() - 1),
        "one pong, between open and close: {log:?}"
    );
    let data: Vec<&String> = log.iter().filter(|l| !l.starts_with("pong")).collect();
    assert_eq!(
        data,
        vec![
            "open",
            "msg Text(\"a\")",
            "msg Binary(b\"\\x01\\x02\\x03\")",
            // The server's handler state is per connection: three data messages so far.
            "msg Text(\"3\")",
            "close Some(1000) false",
        ]
    );
}

#[tokio::test]
async fn panicking_handler_closes_its_connection_with_1011_and_server_keeps_serving() {
    let url = start_server().await;
    let mut victim = client(&url).await;
    let mut bystander = client(&url).await;
    victim.send(Message::text("panic")).await.unwrap();
    let got = within(victim.recv()).await.unwrap().unwrap();
    assert_eq!(got, Some(Message::Close(Some(CloseFrame::new(1011, "")))));
    // The other connection and new ones still work.
    bystander.send(Message::text("still here")).await.unwrap();
    assert_eq!(
        within(bystander.recv()).await.unwrap().unwrap(),
        Some(Message::text("still here"))
    );
    let mut fresh = client(&url).await;
    fresh.send(Message::text("new")).await.unwrap();
    assert_eq!(
        within(fresh.recv()).await.unwrap().unwrap(),
        Some(Message::text("new"))
    );
    bystander.close(1000, "").await.unwrap();
    fresh.close(1000, "").await.unwrap();
}

#[tokio::test]
async fn what_a_callback_sent_before_it_panicked_leaves_before_the_1011() {
    let url = start_server().await;
    let mut ws = client(&url).await;
    ws.send(Message::text("reply, then panic")).await.unwrap();
    let got = within(ws.recv()).await.unwrap().unwrap();
    assert_eq!(got, Some(Message::text("reply")));
    let got = within(ws.recv()).await.unwrap().unwrap();
    assert_eq!(got, Some(Message::Close(Some(CloseFrame::new(1011, "")))));
}

#[tokio::test]
async fn dial_returns_the_error_on_close_saw_so_reconnect_is_a_loop() {
    // A server that accepts the handshake and then drops the TCP connection.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move {
        for _ in 0..3 {
            let (s, _) = listener.accept().await.unwrap();
            let ws = rapidws::tokio::accept(s, &ServerConfig::default())
                .await
                .unwrap();
            drop(ws);
        }
    });
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut client = Recorder {
        log: log.clone(),
        ..Recorder::default()
    };
    let mut failures = 0;
    for _ in 0..3 {
        match within(dial_handler(&url, &ClientConfig::default(), &mut client))
            .await
            .unwrap()
        {
            Err(handler::Error::Ws(e)) => {
                assert!(e.is_unexpected_eof(), "{e}");
                failures += 1;
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(failures, 3);
    let log = log.lock().unwrap().clone();
    assert_eq!(log.iter().filter(|l| *l == "close None true").count(), 3);
    assert_eq!(log.iter().filter(|l| *l == "open").count(), 3);
    // With the server gone, the connect error itself comes back.
    let refused = within(dial_handler(&url, &ClientConfig::default(), &mut client))
        .await
        .unwrap();
    assert!(
        matches!(refused, Err(handler::Error::Ws(WsError::Io(_)))),
        "{refused:?}"
    );
}

#[tokio::test]
async fn panicking_client_handler_is_reported_as_panicked() {
    struct Boom;
    impl Handler for Boom {
        fn on_open(&mut self, _: &mut Socket) {
            panic!("boom");
        }
    }
    let url = start_server().await;
    let r = within(dial_handler(&url, &ClientConfig::default(), &mut Boom))
        .await
        .unwrap();
    assert!(matches!(r, Err(handler::Error::Panicked)), "{r:?}");
}

/// Answers each message with `copies` numbered 1 KiB messages from one callback.
struct Fanout {
    copies: u32,
    sent: u32,
}

impl Handler for Fanout {
    fn on_message(&mut self, socket: &mut Socket, _: Message) {
        for _ in 0..self.copies {
            let mut payload = vec![0u8; 1024];
            payload[..4].copy_from_slice(&self.sent.to_be_bytes());
            socket.send_binary(payload);
            self.sent += 1;
        }
    }
}

#[tokio::test]
async fn a_callback_may_send_past_the_high_water_mark_and_everything_arrives_in_order() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/", listener.local_addr().unwrap());
    // 200 KiB per callback against a 4 KiB mark: the connection waits for room after
    // each callback, before it receives the next message.
    let connection = rapidws::tokio::Config::default().with_send_queue_high_water(4096);
    let config = ServerConfig::default().with_connection(connection);
    tokio::spawn(serve_handler(listener, config, |_| Fanout {
        copies: 200,
        sent: 0,
    }));
    let mut ws = client(&url).await;
    for _ in 0..3 {
        ws.feed(Message::text("go")).await.unwrap();
    }
    ws.flush().await.unwrap();
    for i in 0..600u32 {
        let m = within(ws.recv()).await.unwrap().unwrap().unwrap();
        let data = m.into_data();
        assert_eq!(data.len(), 1024);
        assert_eq!(u32::from_be_bytes(data[..4].try_into().unwrap()), i);
    }
    ws.close(1000, "").await.unwrap();
}
