//! A broadcast hub: every connected client receives each message the hub publishes.
//!
//! - Each message is encoded (and, with permessage-deflate, compressed) once, as a
//!   [`PreparedMessage`]; the hub puts a shared reference to it straight into every
//!   connection's bounded send queue (`try_send_prepared`: no copy, no allocation, no
//!   waiting).
//! - A consumer whose queue is full is dropped, so one slow client never stalls the hub.
//! - One ticker in the hub pings every client, instead of a keepalive timer per
//!   connection; a client silent for three intervals times out (idle timeout: its pongs
//!   are progress, a trickle of bytes is not).
//! - Clients send nothing but pongs and their close here, so what one may send is
//!   limited to 4 KiB (a peer cannot make a connection hold more).
//!
//! This is the library's advice for slow readers in a fan-out (SECURITY.md): never wait
//! on one peer; queue without waiting, and drop the one whose queue is full.
//!
//! ```text
//! cargo run --release --example broadcast -- 127.0.0.1:9002
//! cargo run --release --example broadcast -- 127.0.0.1:9002 --demo   # with local clients, 3 s
//! ```
//! Connect with any WebSocket client, e.g. `websocat ws://127.0.0.1:9002/`.

use std::sync::Arc;
use std::time::Duration;

use rapidws::MessageKind;
use rapidws::PreparedMessage;
use rapidws::deflate::DeflateConfig;
use rapidws::tokio::{
    ClientConfig, Config, Message, ServerConfig, TrySendError, WriteHalf, accept, connect,
};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc};

/// Bytes a client may have queued before it counts as too slow and is dropped.
const QUEUE_LIMIT: usize = 256 * 1024;
/// The largest message a client may send (it has nothing to say but pongs).
const CLIENT_MESSAGE_LIMIT: usize = 4 * 1024;
/// How often the hub publishes (every millisecond in the demo, to fill a slow queue fast).
const PUBLISH_EVERY: Duration = Duration::from_millis(20);
/// Bytes of pseudo-random hex data per published message.
const DATA_LEN: usize = 2048;
/// How often the hub pings everyone.
const KEEPALIVE_EVERY: Duration = Duration::from_secs(10);

/// How the hub reaches a connection's task.
#[derive(Default)]
struct Signals {
    /// Frames were queued: the task's receive loop writes them out.
    wake: Notify,
    /// The hub dropped this client.
    kick: Notify,
}

struct Peer {
    id: u64,
    writer: WriteHalf<TcpStream>,
    signals: Arc<Signals>,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:9002".into());
    let demo = args.next().as_deref() == Some("--demo");
    let listener = TcpListener::bind(&addr).await?;
    let addr = listener.local_addr()?;
    println!("broadcast hub on ws://{addr}/");

    let connection = Config::default()
        .with_send_queue_high_water(QUEUE_LIMIT)
        .with_max_message_size(CLIENT_MESSAGE_LIMIT)
        .with_max_frame_size(CLIENT_MESSAGE_LIMIT)
        // The hub's ticker pings; no timer per connection for that.
        .with_keepalive(None, Duration::from_secs(30))
        .with_idle_timeout(Some(KEEPALIVE_EVERY * 3));
    let config = Arc::new(
        ServerConfig::default()
            .with_connection(connection)
            .with_deflate(Some(DeflateConfig::new())),
    );

    let (join_tx, join_rx) = mpsc::channel::<Peer>(1024);
    tokio::spawn(accept_loop(listener, config, join_tx));
    let every = if demo {
        Duration::from_millis(1)
    } else {
        PUBLISH_EVERY
    };
    // The demo publishes bursts, to fill the idle client's socket buffers and queue fast.
    let burst = if demo { 10 } else { 1 };
    let hub = tokio::spawn(hub(join_rx, every, burst));
    if demo {
        tokio::spawn(demo_clients(addr.to_string()));
        tokio::time::sleep(Duration::from_secs(3)).await;
        hub.abort();
        return Ok(());
    }
    let _ = hub.await;
    Ok(())
}

async fn accept_loop(listener: TcpListener, config: Arc<ServerConfig>, join: mpsc::Sender<Peer>) {
    let mut next_id = 0u64;
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        next_id += 1;
        let id = next_id;
        let (config, join) = (config.clone(), join.clone());
        tokio::spawn(async move {
            let Ok(ws) = accept(stream, &config).await else {
                return;
            };
            let (mut reader, writer) = ws.into_split();
            let signals = Arc::new(Signals::default());
            if join
                .send(Peer {
                    id,
                    writer,
                    signals: signals.clone(),
                })
                .await
                .is_err()
            {
                return;
            }
            // The receive loop answers pings, runs the timers and writes what the hub
            // queued; it ends when the client leaves or the hub kicks it.
            loop {
                tokio::select! {
                    msg = reader.recv() => match msg {
                        Ok(Some(_)) => {} // this hub ignores what clients send
                        _ => break,
                    },
                    _ = signals.wake.notified() => {}
                    _ = signals.kick.notified() => break,
                }
            }
        });
    }
}

async fn hub(mut joins: mpsc::Receiver<Peer>, every: Duration, burst: usize) {
    let mut peers: Vec<Peer> = Vec::new();
    let mut publish = tokio::time::interval(every);
    // A hub that falls behind publishes less often rather than in catch-up bursts.
    publish.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut keepalive = tokio::time::interval(KEEPALIVE_EVERY);
    let mut seq = 0u64;
    loop {
        tokio::select! {
            Some(peer) = joins.recv() => {
                println!("client {} joined ({} connected)", peer.id, peers.len() + 1);
                peers.push(peer);
            }
            _ = publish.tick() => for _ in 0..burst {
                seq += 1;
                // Serialized straight into the frame buffer.
                let msg = PreparedMessage::build(MessageKind::Text, |w| {
                    use std::io::Write;
                    write!(w, r#"{{"seq":{seq},"clients":{},"data":""#, peers.len())?;
                    for _ in 0..DATA_LEN / 16 {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        write!(w, "{rng:016x}")?;
                    }
                    w.write_all(b"\"}")
                })
                .expect("the JSON is UTF-8");
                send_all(&mut peers, |w| w.try_send_prepared(&msg));
                // Let the connection tasks (same thread here) write what was queued.
                tokio::task::yield_now().await;
            },
            _ = keepalive.tick() => {
                send_all(&mut peers, |w| w.try_send(Message::Ping(Default::default())));
            }
        }
    }
}

/// Queues on every peer; drops the ones that are gone or too slow.
fn send_all(
    peers: &mut Vec<Peer>,
    send: impl Fn(&WriteHalf<TcpStream>) -> Result<(), TrySendError>,
) {
    peers.retain(|p| match send(&p.writer) {
        Ok(()) => {
            p.signals.wake.notify_one();
            true
        }
        Err(TrySendError::QueueFull(_)) => {
            println!(
                "client {} too slow: dropped ({} bytes queued)",
                p.id,
                p.writer.queued_bytes()
            );
            p.signals.kick.notify_one();
            false
        }
        Err(_) => {
            println!("client {} gone", p.id);
            p.signals.kick.notify_one();
            false
        }
    });
}

/// Three clients that read everything and one that never reads (and gets dropped).
async fn demo_clients(addr: String) {
    let url = format!("ws://{addr}/");
    let config = ClientConfig::default().with_deflate(Some(DeflateConfig::new()));
    for n in 0..3 {
        let (url, config) = (url.clone(), config.clone());
        tokio::spawn(async move {
            let mut ws = connect(&url, &config).await.expect("connect");
            let mut got = 0u64;
            while let Ok(Some(msg)) = ws.recv().await {
                got += 1;
                if got.is_multiple_of(2_000) {
                    println!("demo client {n}: {got} messages, last {} bytes", msg.len());
                }
            }
        });
    }
    // Never reads (joins first, as client 1); its socket buffers and then its queue fill up.
    let _idle = connect(&url, &config).await.expect("connect");
    std::future::pending::<()>().await;
}
