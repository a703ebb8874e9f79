//! Shared pieces of the hub tests: real Redis and NATS servers started on free loopback
//! ports in temporary directories, hub nodes each on their own runtime thread, and
//! WebSocket clients that check what they receive.
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rapidws::deflate::DeflateConfig;
use rapidws::hub::{Hub, HubBuilder, Position, Recovery};
use rapidws::tokio::{ClientConfig, Message, ServerConfig, connect};
use tokio::net::TcpListener;

/// Every wait in these tests is bounded by this.
pub const LIMIT: Duration = Duration::from_secs(60);

/// The path of `name`, or `None` (after printing SKIP) when it is not installed outside
/// CI. In CI (`CI=true`) a missing server fails the test.
pub fn server_binary(name: &str) -> Option<PathBuf> {
    for dir in ["/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"] {
        let p = Path::new(dir).join(name);
        if p.exists() {
            return Some(p);
        }
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{name} is not installed; .ci/run installs it");
    }
    eprintln!("SKIP: {name} is not installed");
    None
}

/// A free loopback port (bound and released; the server binds it right after).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A free port for a Redis Cluster node. Its cluster bus listens 10,000 higher, so the
/// port must be at most 55,535 (Redis refuses to start on a higher one, and `free_port`
/// draws from the whole ephemeral range, up to 60,999 here) and the bus port free as well.
fn free_cluster_port() -> u16 {
    for _ in 0..1000 {
        let port = free_port();
        if port <= 55_535 && std::net::TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
    panic!("no free port with a free cluster bus port 10,000 above it")
}

/// Raises the open-file limit to its hard limit: a thousand clients and their server
/// ends need about two thousand descriptors.
pub fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit with a valid pointer to an rlimit; a failure leaves
    // the limit as it was.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max.min(65_536);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// A server process of ours on a loopback port, killed when dropped.
pub struct Server {
    pub port: u16,
    binary: PathBuf,
    args: Vec<String>,
    child: Option<Child>,
    _dir: Option<TempDir>,
}

/// A temporary directory, removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "rapidws-{tag}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Server {
    /// redis-server on a free port, in a temporary directory; `persist` turns on the
    /// append-only file (fsync on every write), so a restart keeps the data.
    pub fn redis(persist: bool) -> Option<Server> {
        let binary = server_binary("redis-server")?;
        let dir = TempDir::new("redis");
        let port = free_port();
        let mut args: Vec<String> = [
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--dir",
            dir.0.to_str().unwrap(),
            "--save",
            "",
            "--daemonize",
            "no",
            "--protected-mode",
            "no",
            "--loglevel",
            "warning",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if persist {
            args.extend(["--appendonly", "yes", "--appendfsync", "always"].map(String::from));
        } else {
            args.extend(["--appendonly", "no"].map(String::from));
        }
        let mut s = Server {
            port,
            binary,
            args,
            child: None,
            _dir: Some(dir),
        };
        s.start();
        Some(s)
    }

    /// One master of a Redis Cluster: redis-server with cluster mode on, on a free port
    /// in a temporary directory (its cluster state in `nodes.conf` there), with the
    /// append-only file (fsync on every write). A lost master does not stop the others
    /// (`cluster-require-full-coverage no`).
    fn redis_cluster_node(binary: PathBuf) -> Server {
        let dir = TempDir::new("redis-cluster");
        let port = free_cluster_port();
        let args: Vec<String> = [
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--dir",
            dir.0.to_str().unwrap(),
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-require-full-coverage",
            "no",
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--save",
            "",
            "--daemonize",
            "no",
            "--protected-mode",
            "no",
            "--loglevel",
            "warning",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut s = Server {
            port,
            binary,
            args,
            child: None,
            _dir: Some(dir),
        };
        s.start();
        s
    }

    /// Removes the append-only file (while the server is stopped) and keeps the rest
    /// (a cluster node's `nodes.conf`): it comes back in its cluster, with no data.
    pub fn wipe_aof(&mut self) {
        assert!(self.child.is_none(), "stop the server first");
        if let Some(d) = &self._dir {
            let _ = std::fs::remove_dir_all(d.0.join("appendonlydir"));
            let _ = std::fs::remove_file(d.0.join("appendonly.aof"));
        }
    }

    /// nats-server on a free port.
    pub fn nats() -> Option<Server> {
        let binary = server_binary("nats-server")?;
        let port = free_port();
        let args = ["-a", "127.0.0.1", "-p", &port.to_string()]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let mut s = Server {
            port,
            binary,
            args,
            child: None,
            _dir: None,
        };
        s.start();
        Some(s)
    }

    pub fn url(&self, scheme: &str) -> String {
        format!("{scheme}://127.0.0.1:{}/", self.port)
    }

    /// Starts the process and waits until it accepts connections.
    pub fn start(&mut self) {
        let child = Command::new(&self.binary)
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start server");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "{:?} did not start", self.binary);
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Removes everything in the server's directory (while it is stopped): it starts
    /// empty next time.
    pub fn wipe_data(&mut self) {
        assert!(self.child.is_none(), "stop the server first");
        if let Some(d) = &self._dir {
            let _ = std::fs::remove_dir_all(&d.0);
            std::fs::create_dir_all(&d.0).unwrap();
        }
    }

    /// Kills the process (SIGKILL: no clean shutdown) and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A Redis Cluster of three masters (no replicas) on free loopback ports, each in its
/// own temporary directory, created with `redis-cli --cluster create`.
pub struct RedisCluster {
    pub masters: Vec<Server>,
    cli: PathBuf,
}

impl RedisCluster {
    /// Starts the three servers, creates the cluster and waits until every node says
    /// `cluster_state:ok`; `None` (after SKIP) when redis-server is not installed.
    pub fn start() -> Option<RedisCluster> {
        let binary = server_binary("redis-server")?;
        let cli = server_binary("redis-cli")?;
        let masters: Vec<Server> = (0..3)
            .map(|_| Server::redis_cluster_node(binary.clone()))
            .collect();
        let c = RedisCluster { masters, cli };
        let mut args = vec!["--cluster".to_string(), "create".to_string()];
        args.extend(c.masters.iter().map(|m| format!("127.0.0.1:{}", m.port)));
        args.extend(["--cluster-replicas", "0", "--cluster-yes"].map(String::from));
        let out = Command::new(&c.cli)
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli --cluster create");
        assert!(
            out.status.success(),
            "cluster create: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        c.wait_ok();
        Some(c)
    }

    /// The nodes' URLs.
    pub fn urls(&self) -> Vec<String> {
        self.masters.iter().map(|m| m.url("redis")).collect()
    }

    /// `redis-cli -p <port> <args>`'s output.
    pub fn cli(&self, port: u16, args: &[&str]) -> String {
        let out = Command::new(&self.cli)
            .arg("-p")
            .arg(port.to_string())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits (bounded) until every running node says `cluster_state:ok`.
    pub fn wait_ok(&self) {
        let deadline = Instant::now() + LIMIT;
        for m in self.masters.iter().filter(|m| m.child.is_some()) {
            while !self
                .cli(m.port, &["cluster", "info"])
                .contains("cluster_state:ok")
            {
                assert!(Instant::now() < deadline, "cluster never became ok");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// `CLUSTER MYID` of the node on `port`.
    pub fn node_id(&self, port: u16) -> String {
        self.cli(port, &["cluster", "myid"]).trim().to_string()
    }

    /// Moves `slot`, with its keys, from master `from` to master `to`, the way
    /// `redis-cli --cluster reshard` does: importing and migrating states, `MIGRATE` of
    /// the keys, then the new owner announced to every master.
    pub fn move_slot(&self, slot: u16, from: usize, to: usize) {
        let (src, dst) = (self.masters[from].port, self.masters[to].port);
        let (src_id, dst_id) = (self.node_id(src), self.node_id(dst));
        let slot = slot.to_string();
        let ok = |out: String| assert!(out.contains("OK"), "{out}");
        ok(self.cli(dst, &["cluster", "setslot", &slot, "importing", &src_id]));
        ok(self.cli(src, &["cluster", "setslot", &slot, "migrating", &dst_id]));
        let keys = self.cli(src, &["cluster", "getkeysinslot", &slot, "1000"]);
        let keys: Vec<&str> = keys.lines().filter(|k| !k.is_empty()).collect();
        if !keys.is_empty() {
            let port = dst.to_string();
            let mut args = vec!["migrate", "127.0.0.1", &port, "", "0", "5000", "keys"];
            args.extend(&keys);
            ok(self.cli(src, &args));
        }
        // Once per node: each SETSLOT NODE makes the owner drop the slot's shard channels
        // (Redis deletes the slot and adds it again), so a repeat on the new owner would
        // unsubscribe everyone there once more.
        let others = self
            .masters
            .iter()
            .filter(|m| m.child.is_some())
            .map(|m| m.port);
        for port in [dst, src]
            .into_iter()
            .chain(others.filter(|p| ![src, dst].contains(p)))
        {
            ok(self.cli(port, &["cluster", "setslot", &slot, "node", &dst_id]));
        }
    }

    /// Starts a replica of master `of`, joined to the cluster and in sync with it.
    pub fn add_replica(&self, of: usize) -> Server {
        let binary = server_binary("redis-server").expect("redis-server");
        let replica = Server::redis_cluster_node(binary);
        let master = self.masters[of].port;
        self.cli(
            replica.port,
            &["cluster", "meet", "127.0.0.1", &master.to_string()],
        );
        let id = self.node_id(master);
        let deadline = Instant::now() + LIMIT;
        // It must know its master (gossip) before it can replicate it.
        while !self
            .cli(replica.port, &["cluster", "replicate", &id])
            .contains("OK")
        {
            assert!(Instant::now() < deadline, "the replica never joined");
            std::thread::sleep(Duration::from_millis(50));
        }
        while !self
            .cli(replica.port, &["info", "replication"])
            .contains("master_link_status:up")
        {
            assert!(Instant::now() < deadline, "the replica never synced");
            std::thread::sleep(Duration::from_millis(50));
        }
        replica
    }

    /// Promotes `replica` with a manual `CLUSTER FAILOVER` (it waits for the replica to
    /// catch up, then the old master becomes its replica); returns once it is master.
    pub fn failover(&self, replica: &Server) {
        let deadline = Instant::now() + LIMIT;
        let out = self.cli(replica.port, &["cluster", "failover"]);
        assert!(out.contains("OK"), "{out}");
        while !self
            .cli(replica.port, &["info", "replication"])
            .contains("role:master")
        {
            assert!(Instant::now() < deadline, "the failover never happened");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `CLUSTER KEYSLOT key`.
    pub fn keyslot(&self, key: &str) -> u16 {
        self.cli(self.masters[0].port, &["cluster", "keyslot", key])
            .trim()
            .parse()
            .expect("a slot")
    }

    /// The index in [`masters`](Self::masters) of the master that owns `slot`, from
    /// `CLUSTER NODES`.
    pub fn owner(&self, slot: u16) -> usize {
        let nodes = self.cli(self.masters[0].port, &["cluster", "nodes"]);
        for line in nodes.lines() {
            let fields: Vec<&str> = line.split(' ').collect();
            if fields.len() < 9 {
                continue;
            }
            let owns = fields[8..].iter().any(|r| {
                let (a, b) = r.split_once('-').unwrap_or((r, r));
                match (a.parse::<u16>(), b.parse::<u16>()) {
                    (Ok(a), Ok(b)) => (a..=b).contains(&slot),
                    _ => false,
                }
            });
            if owns {
                let port: u16 = fields[1]
                    .split(['@', ':'])
                    .nth(1)
                    .and_then(|p| p.parse().ok())
                    .expect("a port");
                return self
                    .masters
                    .iter()
                    .position(|m| m.port == port)
                    .expect("one of ours");
            }
        }
        panic!("no master owns slot {slot}");
    }
}

/// A hub node: its own thread and current-thread runtime, a WebSocket server whose
/// connections join the hub and subscribe to the topic in their path (`/t`), and say
/// `ready` once subscribed.
pub struct Node {
    pub hub: Hub,
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Node {
    pub fn start(
        build: impl FnOnce() -> HubBuilder + Send + 'static,
        server: ServerConfig,
    ) -> Node {
        Node::start_with(build, server, None)
    }

    /// [`start`](Self::start), with the kernel send buffer of every accepted socket set
    /// to `send_buffer` bytes (so that a client that stops reading fills our queue soon).
    pub fn start_with(
        build: impl FnOnce() -> HubBuilder + Send + 'static,
        server: ServerConfig,
        send_buffer: Option<usize>,
    ) -> Node {
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let hub = build().build().expect("hub");
                let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx.send((hub.clone(), listener.local_addr().unwrap()))
                    .unwrap();
                let accept_loop = async {
                    loop {
                        let Ok((stream, _)) = listener.accept().await else {
                            continue;
                        };
                        if let Some(n) = send_buffer {
                            set_send_buffer(&stream, n);
                        }
                        let hub = hub.clone();
                        let server = server.clone();
                        tokio::spawn(async move {
                            if let Err(e) = serve_one(hub, stream, server).await {
                                eprintln!("node: connection ended with {e}");
                            }
                        });
                    }
                };
                tokio::select! {
                    _ = accept_loop => {}
                    _ = stop_rx => {}
                }
            });
        });
        let (hub, addr) = rx.recv().unwrap();
        Node {
            hub,
            addr,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn set_send_buffer(stream: &tokio::net::TcpStream, bytes: usize) {
    use std::os::fd::AsRawFd;
    let v = bytes as libc::c_int;
    // SAFETY: setsockopt on a socket we own, with a pointer to a c_int and its size.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

async fn serve_one(
    hub: Hub,
    stream: tokio::net::TcpStream,
    server: ServerConfig,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let (request_path, ws) = {
        let path = Arc::new(Mutex::new(String::new()));
        let p = path.clone();
        let ws = rapidws::tokio::accept_with(stream, &server, move |req| {
            *p.lock().unwrap() = req.path().to_string();
            Ok(())
        })
        .await?;
        let path = path.lock().unwrap().clone();
        (path, ws)
    };
    let (mut rd, wr) = ws.into_split();
    let member = hub.join(wr);
    let path = request_path.trim_start_matches('/');
    let (topic, since) = match path.split_once("?since=") {
        Some((t, s)) => {
            let (o, e) = s.split_once('@').ok_or("since=offset@epoch")?;
            let since = Position {
                offset: o.parse()?,
                epoch: e.parse()?,
            };
            (t.to_string(), Some(since))
        }
        None => (path.to_string(), None),
    };
    match since {
        None => {
            member.subscribe(&topic)?;
            member.writer().try_send(Message::text("ready"))?;
        }
        Some(since) => {
            // The replay is queued first; "ready <outcome>" follows it.
            let outcome = member.subscribe_from(&topic, since).await?;
            let tag = match outcome {
                Recovery::Recovered { replayed, .. } => format!("recovered {replayed}"),
                Recovery::EpochChanged { .. } => "epoch-changed".to_string(),
                Recovery::Trimmed { .. } => "trimmed".to_string(),
                _ => "other".to_string(),
            };
            member
                .writer()
                .try_send(Message::text(format!("ready {tag}")))?;
        }
    }
    while let Some(msg) = rd.recv().await? {
        if let Message::Text(t) = msg {
            // "pub <text>": publish to the topic for everyone but this connection.
            if let Some(rest) = t.as_str().strip_prefix("pub ") {
                member.publish(&topic, rest)?;
            }
        }
    }
    Ok(())
}

/// A server config with deflate accepted (clients choose).
pub fn server_config() -> ServerConfig {
    ServerConfig::default().with_deflate(Some(DeflateConfig::default()))
}

/// A client config offering deflate or not.
pub fn client_config(deflate: bool) -> ClientConfig {
    let c = ClientConfig::default();
    if deflate {
        c.with_deflate(Some(DeflateConfig::default()))
    } else {
        c
    }
}

/// What one client saw: per publisher, the sequence numbers in arrival order.
#[derive(Default, Debug)]
pub struct Seen {
    pub per_publisher: HashMap<u32, Vec<u64>>,
    pub total: usize,
}

/// The payload of publication `seq` by publisher `node`: JSON-like, `pad` bytes of filler.
pub fn payload(node: u32, seq: u64, pad: usize) -> String {
    format!(
        r#"{{"node":{node},"seq":{seq},"kind":"tick","pad":"{}"}}"#,
        "x".repeat(pad)
    )
}

pub fn parse(text: &str) -> Option<(u32, u64)> {
    let node = text
        .split(r#""node":"#)
        .nth(1)?
        .split(',')
        .next()?
        .parse()
        .ok()?;
    let seq = text
        .split(r#""seq":"#)
        .nth(1)?
        .split(',')
        .next()?
        .parse()
        .ok()?;
    Some((node, seq))
}

/// Connects to `addr` for `topic` and waits for `ready`.
pub async fn subscriber(
    addr: SocketAddr,
    topic: &str,
    deflate: bool,
) -> rapidws::tokio::WebSocket<rapidws::tokio::MaybeTlsStream<tokio::net::TcpStream>> {
    let mut ws = tokio::time::timeout(
        LIMIT,
        connect(&format!("ws://{addr}/{topic}"), &client_config(deflate)),
    )
    .await
    .expect("connect timed out")
    .expect("connect");
    let first = tokio::time::timeout(LIMIT, ws.recv())
        .await
        .expect("ready timed out");
    assert_eq!(first.unwrap(), Some(Message::text("ready")));
    ws
}

/// Receives until `want` publications arrived (or `stop` says so), recording them.
pub async fn collect(
    ws: rapidws::tokio::WebSocket<rapidws::tokio::MaybeTlsStream<tokio::net::TcpStream>>,
    want: usize,
    done: Arc<AtomicUsize>,
    stop: tokio::sync::watch::Receiver<bool>,
) -> Seen {
    collect_then(ws, want, done, stop, false).await
}

/// [`collect`]; with `linger`, stays connected after `want` arrived until `stop`.
pub async fn collect_then(
    mut ws: rapidws::tokio::WebSocket<rapidws::tokio::MaybeTlsStream<tokio::net::TcpStream>>,
    want: usize,
    done: Arc<AtomicUsize>,
    stop: tokio::sync::watch::Receiver<bool>,
    linger: bool,
) -> Seen {
    let mut seen = Seen::default();
    let mut stop = stop;
    loop {
        if seen.total >= want {
            done.fetch_add(1, Ordering::Relaxed);
            if linger {
                let _ = tokio::time::timeout(LIMIT, stop.wait_for(|s| *s)).await;
            }
            break;
        }
        tokio::select! {
            msg = ws.recv() => match msg {
                Ok(Some(Message::Text(t))) => {
                    let (n, s) = parse(t.as_str()).expect("a publication");
                    seen.per_publisher.entry(n).or_default().push(s);
                    seen.total += 1;
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            },
            _ = stop.changed() => break,
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), ws.close(1000, "")).await;
    seen
}

/// Waits (bounded) until `f` holds.
pub async fn until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + LIMIT;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Checks one publisher's sequence: strictly consecutive (no loss, no duplicate, no
/// reordering); `from_start`: it starts at 0 and has all `count`.
pub fn check_sequence(seqs: &[u64], count: u64, from_start: bool) -> Result<(), String> {
    if from_start && seqs.len() as u64 != count {
        return Err(format!("{} of {count}", seqs.len()));
    }
    if from_start && seqs.first().is_some_and(|&s| s != 0) {
        return Err(format!("starts at {}", seqs[0]));
    }
    for w in seqs.windows(2) {
        if w[1] != w[0] + 1 {
            return Err(format!("{} followed by {}", w[0], w[1]));
        }
    }
    Ok(())
}

/// Connects with `since`; returns the replayed messages, the outcome word(s) and the socket.
pub async fn recovering_subscriber(
    addr: SocketAddr,
    topic: &str,
    since: Position,
) -> (
    Vec<String>,
    String,
    rapidws::tokio::WebSocket<rapidws::tokio::MaybeTlsStream<tokio::net::TcpStream>>,
) {
    let url = format!("ws://{addr}/{topic}?since={}@{}", since.offset, since.epoch);
    let mut ws = tokio::time::timeout(LIMIT, connect(&url, &client_config(false)))
        .await
        .expect("connect timed out")
        .expect("connect");
    let mut replayed = Vec::new();
    loop {
        let msg = tokio::time::timeout(LIMIT, ws.recv())
            .await
            .expect("recovery timed out");
        match msg.unwrap() {
            Some(Message::Text(t)) => match t.as_str().strip_prefix("ready ") {
                Some(outcome) => return (replayed, outcome.to_string(), ws),
                None => replayed.push(t.as_str().to_string()),
            },
            Some(_) => {}
            None => panic!("closed during recovery"),
        }
    }
}

/// A framer for history tests: `"<offset>@<epoch> "` before the payload.
pub fn position_framer(p: &rapidws::hub::PublicationRef<'_>) -> Option<rapidws::PreparedMessage> {
    let text = std::str::from_utf8(p.payload).ok()?;
    Some(rapidws::PreparedMessage::text(&match p.position {
        Some(pos) => format!("{}@{} {text}", pos.offset, pos.epoch),
        None => format!("-@- {text}"),
    }))
}

/// The position a [`position_framer`] message carries.
pub fn framed_position(text: &str) -> Option<Position> {
    let (o, e) = text.split(' ').next()?.split_once('@')?;
    Some(Position {
        offset: o.parse().ok()?,
        epoch: e.parse().ok()?,
    })
}

/// Three nodes, 1,000 clients in all (deflate on half of them), publishers on every
/// node at once, subscribers joining and leaving during the run: every client gets every
/// publication of every node exactly once and in each publisher's order.
pub async fn three_nodes_exactly_once(broker: impl Fn() -> HubBuilder + Send + Sync + 'static) {
    raise_fd_limit();
    const NODES: usize = 3;
    const STAY: usize = 900;
    const LEAVE: usize = 50;
    const JOIN: usize = 50;
    const PER_NODE: u64 = 40;
    let broker = Arc::new(broker);
    let nodes: Vec<Node> = (0..NODES)
        .map(|_| {
            let b = broker.clone();
            Node::start(move || b(), server_config())
        })
        .collect();
    let done = Arc::new(AtomicUsize::new(0));
    let (_stop_tx, stop) = tokio::sync::watch::channel(false);
    let all = (PER_NODE * NODES as u64) as usize;
    let mut stayers = Vec::new();
    let mut leavers = Vec::new();
    for i in 0..STAY + LEAVE {
        let node = &nodes[i % NODES];
        let ws = subscriber(node.addr, "t", i % 2 == 0).await;
        if i < STAY {
            stayers.push(tokio::spawn(collect(ws, all, done.clone(), stop.clone())));
        } else {
            // Leaves after about half of the run.
            leavers.push(tokio::spawn(collect(
                ws,
                all / 2,
                done.clone(),
                stop.clone(),
            )));
        }
    }
    until("every node subscribed on the broker", || {
        nodes.iter().all(|n| n.hub.broker_ready("t"))
    })
    .await;
    let publish = |from: u64, to: u64| {
        nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let hub = n.hub.clone();
                std::thread::spawn(move || {
                    for seq in from..to {
                        hub.publish("t", payload(i as u32, seq, 200).as_str())
                            .unwrap();
                        if seq % 10 == 0 {
                            std::thread::sleep(Duration::from_millis(2));
                        }
                    }
                })
            })
            .collect::<Vec<_>>()
    };
    for p in publish(0, PER_NODE / 2) {
        p.join().unwrap();
    }
    // Joiners arrive in the middle, while the first half is still being delivered.
    let mut joiners = Vec::new();
    for i in 0..JOIN {
        let ws = subscriber(nodes[i % NODES].addr, "t", i % 2 == 1).await;
        joiners.push(tokio::spawn(collect(
            ws,
            all / 2,
            done.clone(),
            stop.clone(),
        )));
    }
    for p in publish(PER_NODE / 2, PER_NODE) {
        p.join().unwrap();
    }
    for c in stayers {
        let seen = tokio::time::timeout(LIMIT, c)
            .await
            .expect("a client timed out")
            .unwrap();
        assert_eq!(
            seen.per_publisher.len(),
            NODES,
            "publications of every node"
        );
        for seqs in seen.per_publisher.values() {
            check_sequence(seqs, PER_NODE, true).unwrap();
        }
    }
    for c in leavers.into_iter().chain(joiners) {
        let seen = tokio::time::timeout(LIMIT, c)
            .await
            .expect("a client timed out")
            .unwrap();
        for seqs in seen.per_publisher.values() {
            check_sequence(seqs, PER_NODE, false).unwrap();
        }
    }
    for n in &nodes {
        let m = n.hub.metrics();
        assert_eq!(m.publications, PER_NODE);
        assert_eq!(m.remote_publications, PER_NODE * (NODES as u64 - 1));
        assert_eq!(m.broker_invalid, 0);
    }
}
