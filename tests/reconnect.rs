//! The reconnecting client against a real server that is killed and restarted: it comes
//! back each time, runs its hook on every new connection, backs off within its bounds,
//! and gives up at its attempt limit or deadline with the last error.
#![cfg(feature = "tokio")]

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rapidws::tokio::{Backoff, ClientConfig, Error, Message, Reconnect, ServerConfig, serve};
use tokio::net::TcpListener;
use tokio::time::Instant;

/// An echo server on its own runtime and thread: dropping it kills it the way a crash
/// would, every socket closed without a close frame.
struct Server {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    fn start(addr: SocketAddr) -> Server {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready_tx, ready) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = TcpListener::bind(addr).await.unwrap();
                ready_tx.send(()).unwrap();
                let server = serve(listener, ServerConfig::default(), |mut ws| async move {
                    while let Ok(Some(msg)) = ws.recv().await {
                        if msg.is_data() && ws.send(msg).await.is_err() {
                            break;
                        }
                    }
                });
                tokio::select! {
                    _ = server => {}
                    _ = stopped => {}
                }
            });
            // Dropping the runtime here ends every connection task and closes its socket.
        });
        ready.recv().unwrap();
        Server {
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    fn kill(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.thread.take().unwrap().join().unwrap();
    }
}

fn free_addr() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

/// What the failure hook saw: (when, attempt in a row, error kind, wait before the next).
type Log = Arc<Mutex<Vec<(Instant, u32, String, Option<Duration>)>>>;

fn is_refused(e: &Error) -> bool {
    matches!(e, Error::Io(io) if io.kind() == io::ErrorKind::ConnectionRefused)
}

fn client_config() -> ClientConfig {
    ClientConfig::default().with_connect_timeout(Duration::from_secs(5))
}

#[tokio::test]
async fn survives_a_server_killed_and_restarted_three_times() {
    let addr = free_addr();
    let backoff = Backoff::new(Duration::from_millis(20), Duration::from_millis(160));
    let log: Log = Arc::default();
    let seen = log.clone();
    let hooks = Arc::new(Mutex::new(0u32));
    let counted = hooks.clone();
    let mut feed = Reconnect::new(format!("ws://{addr}/feed"), client_config())
        .unwrap()
        .with_backoff(backoff)
        .with_deadline(Some(Duration::from_secs(30)))
        // Each loss starts the backoff afresh, so every outage's waits are checked
        // against the same caps.
        .with_stable_after(Duration::ZERO)
        .on_failure(move |f| {
            let kind = if is_refused(f.error) {
                "refused".to_owned()
            } else {
                format!("{:?}", f.error)
            };
            seen.lock()
                .unwrap()
                .push((Instant::now(), f.attempt, kind, f.retry_in));
        })
        .on_connect(async move |ws| {
            *counted.lock().unwrap() += 1;
            ws.send_text("subscribe").await
        });

    let mut server = Some(Server::start(addr));
    for round in 0..4 {
        let mut ws = tokio::time::timeout(Duration::from_secs(20), feed.next())
            .await
            .expect("reconnected in time")
            .expect("reconnected");
        // The hook's subscription came back: it ran on this very connection.
        assert_eq!(ws.recv().await.unwrap(), Some(Message::text("subscribe")));
        ws.send_text(format!("round {round}")).await.unwrap();
        assert_eq!(
            ws.recv().await.unwrap(),
            Some(Message::text(format!("round {round}")))
        );
        if round == 3 {
            ws.close(1000, "").await.unwrap();
            break;
        }
        server.take().unwrap().kill();
        // The crash reaches the client as an abnormal end, not a clean close.
        let lost = ws.recv().await;
        assert!(
            matches!(&lost, Err(e) if e.is_unexpected_eof()) || matches!(&lost, Err(Error::Io(_))),
            "{lost:?}"
        );
        // Back in 300 ms; meanwhile the client's attempts are refused.
        let restart = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            tokio::task::spawn_blocking(move || Server::start(addr))
                .await
                .unwrap()
        });
        let next = tokio::time::timeout(Duration::from_secs(20), feed.next())
            .await
            .expect("reconnected in time")
            .expect("reconnected");
        server = Some(restart.await.unwrap());
        drop(ws);
        let mut ws = next;
        assert_eq!(ws.recv().await.unwrap(), Some(Message::text("subscribe")));
        ws.close(1000, "").await.unwrap();
    }
    server.take().unwrap().kill();

    let log = log.lock().unwrap();
    assert_eq!(
        *hooks.lock().unwrap(),
        7,
        "the hook ran on every connection"
    );
    let outages = log
        .iter()
        .filter(|(_, attempt, _, _)| *attempt == 1)
        .count();
    assert_eq!(outages, 3, "{log:?}");
    for (_, attempt, kind, retry_in) in log.iter() {
        assert_eq!(kind, "refused");
        let wait = retry_in.expect("the deadline was never near");
        // Failure k is followed by the k-th wait of its outage (the 0-th came after
        // the loss): at most min(max, initial * 2^k).
        assert!(wait <= backoff.cap(*attempt), "{attempt}: {wait:?}");
        assert!(wait <= backoff.max);
    }
    // Each failure is at least its announced wait after the one before it.
    for pair in log.windows(2) {
        let ((t0, a0, _, wait), (t1, a1, _, _)) = (&pair[0], &pair[1]);
        if a1 == &(a0 + 1) {
            assert!(*t1 - *t0 >= wait.unwrap(), "{pair:?}");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn gives_up_after_its_attempts_with_the_last_error() {
    let addr = free_addr();
    let log: Log = Arc::default();
    let seen = log.clone();
    let backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(8));
    let mut feed = Reconnect::new(format!("ws://{addr}/"), client_config())
        .unwrap()
        .with_backoff(backoff)
        .with_max_attempts(Some(5))
        .on_failure(move |f| {
            seen.lock().unwrap().push((
                Instant::now(),
                f.attempt,
                format!("{}", f.error),
                f.retry_in,
            ))
        });
    let start = Instant::now();
    assert!(feed.next().await.is_none());
    assert!(feed.next().await.is_none(), "and stays given up");
    assert!(
        is_refused(feed.last_error().unwrap()),
        "{:?}",
        feed.last_error()
    );
    let log = log.lock().unwrap();
    let attempts: Vec<u32> = log.iter().map(|e| e.1).collect();
    assert_eq!(attempts, [1, 2, 3, 4, 5]);
    assert_eq!(log[4].3, None, "no wait after the last attempt");
    // On tokio's paused clock the first attempt fails at once, and each next one comes
    // after the announced wait (rounded up to the timer's 1 ms tick).
    assert_eq!(log[0].0, start);
    for (attempt, (t, _, _, wait)) in log.iter().enumerate() {
        if let Some(w) = wait {
            assert!(*w <= backoff.cap(attempt as u32), "{attempt}: {w:?}");
            let gap = log[attempt + 1].0 - *t;
            assert!(
                gap >= *w && gap <= *w + Duration::from_millis(1),
                "{attempt}: waited {gap:?} for {w:?}"
            );
        }
    }
}

#[tokio::test(start_paused = true)]
async fn gives_up_at_its_deadline_with_the_last_error() {
    let addr = free_addr();
    let log: Log = Arc::default();
    let seen = log.clone();
    let deadline = Duration::from_secs(20);
    let mut feed = Reconnect::new(format!("ws://{addr}/"), client_config())
        .unwrap()
        .with_backoff(Backoff::new(
            Duration::from_millis(500),
            Duration::from_secs(4),
        ))
        .with_deadline(Some(deadline))
        .on_failure(move |f| {
            seen.lock().unwrap().push((
                Instant::now(),
                f.attempt,
                format!("{}", f.error),
                f.retry_in,
            ))
        });
    let start = Instant::now();
    assert!(feed.next().await.is_none());
    let gave_up = Instant::now() - start;
    assert!(gave_up <= deadline, "{gave_up:?}");
    assert!(
        is_refused(feed.last_error().unwrap()),
        "{:?}",
        feed.last_error()
    );
    let log = log.lock().unwrap();
    assert!(log.len() >= 5, "kept trying until the deadline: {log:?}");
    for (t, _, _, _) in log.iter() {
        assert!(*t - start < deadline);
    }
    // The wait after the last attempt would have ended past the deadline.
    let (t, _, _, wait) = log.last().unwrap();
    assert!(
        wait.is_none() || *t - start + wait.unwrap() > deadline,
        "{log:?}"
    );
}
