//! A simulated transport that finds the bugs where the IO layers, their halves, their
//! wakers and the teardown work together: an in-memory connection whose reads and writes
//! move random amounts, return `Pending` at random and end with a FIN or a reset at random
//! points (wire.rs); a scripted peer on the other end, the sans-IO `Connection` in the
//! other role (peer.rs); the application's calls from several tasks, interleaved by the
//! run's choices on a current-thread runtime with a virtual clock (app.rs), or from one
//! thread on the blocking layer (blocking.rs); and an oracle (check.rs).
//!
//! Everything a run does follows from one seed (and, for the fuzz target, its bytes):
//! [`run`] replays it exactly. A run fails (panics, naming the seed) on a panic of the
//! library, a broken promise of the oracle, or a hang: every wait must end when the peer
//! or a timer says it should. The peer always ends the connection within about a second
//! of virtual time, so a run in which nothing moves (no byte either way, no call begun or
//! ended, no action of the peer) for [`STALL`] of virtual time waits on something that
//! will not come: a lost wake-up, which the keepalive (30 s) and idle (120 s) timers would
//! otherwise hide; the close and linger timeouts are set past it too, except in the runs
//! with short timers, which check that those timers end the waits only they can end.
//!
//! Shared by `tests/simulated_transport.rs` (a fixed set of seeds) and the fuzz target
//! `fuzz/fuzz_targets/simulated_transport.rs` (through `#[path]`).
#![allow(dead_code)]

pub mod app;
pub mod blocking;
pub mod check;
pub mod msg;
pub mod peer;
pub mod rng;
pub mod wire;

use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use rapidws::Role;
use rapidws::connection::Config;
use rapidws::deflate::{DeflateConfig, DeflateParams};
use rapidws::handshake::Negotiated;

use check::{Checked, Facts};
use peer::{DeflateAgreed, Peer, Script};
use rng::Rng;
use wire::{Chaos, Net, SimStd, SimStream, Stepper};

/// Whether `SIM_TRACE` is set: the calls, their results and the peer's events go to
/// stderr, for replaying one seed.
pub fn tracing() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("SIM_TRACE").is_some())
}

/// Prints a line of the trace (see [`tracing`]).
pub fn trace(line: impl FnOnce() -> String) {
    if tracing() {
        eprintln!("{}", line());
    }
}

/// Virtual time without progress after which a run is hung (see the module docs).
pub const STALL: Duration = Duration::from_secs(10);

/// Virtual time a run may take in all, progressing or not (a transport of a few bytes
/// that waits a millisecond now and then takes seconds for a large message).
pub const BOUND: Duration = Duration::from_secs(600);

/// What a run was: chosen from the seed (and the fuzzer's bytes) before it starts.
#[derive(Clone)]
pub struct Scenario {
    /// The application's role (the peer has the other).
    pub role: Role,
    pub blocking: bool,
    pub chaos: Chaos,
    pub script: Script,
    pub config: Config,
    pub deflate: Option<DeflateAgreed>,
    /// Small messages and fewer calls.
    pub tight: bool,
    /// The application's timers are short (about a second) and the peer may freeze or go
    /// silent: the waits that only a timer ends must end at it.
    pub timers: bool,
}

impl Scenario {
    pub fn generate(rng: &mut Rng, tight: bool) -> Scenario {
        let role = if rng.chance(1, 2) {
            Role::Server
        } else {
            Role::Client
        };
        let blocking = rng.chance(1, 5);
        // Not for the blocking layer: its timers run on the real clock, and a socket
        // without a read timeout waits on a frozen peer for ever, as documented.
        let timers = !blocking && rng.chance(1, 6);
        let chaos = Chaos::generate(rng);
        let script = Script::generate(rng, tight, timers);
        let mut config = Config::default()
            .with_budget(None)
            .with_read_buffer_size(rng.pick(&[256, 1024, 4096]))
            .with_send_queue_high_water(rng.pick(&[1, 512, 4096, 65536, 256 << 10]))
            .with_control_queue_capacity(rng.pick(&[1, 2, 16]))
            .with_max_read_ahead(rng.pick(&[1024, 1 << 20]))
            // Past the bound: these must not be what ends a wait.
            .with_close_timeout(Duration::from_secs(60))
            .with_linger(Some(Duration::from_secs(60)), 64 << 20);
        config.keepalive_interval = Some(Duration::from_secs(30));
        if timers {
            let s = Duration::from_secs;
            config = config
                .with_keepalive(Some(s(1)), s(1))
                .with_close_timeout(s(1))
                .with_linger(Some(s(1)), 64 << 20)
                .with_idle_timeout(Some(s(4)))
                .with_message_timeout(Some(s(4)))
                .with_send_timeout(Some(s(1)));
        }
        let deflate = rng.chance(1, 4).then(|| {
            let params = DeflateParams {
                server_no_context_takeover: rng.chance(1, 2),
                client_no_context_takeover: rng.chance(1, 2),
                server_max_window_bits: rng.pick(&[9, 15]),
                client_max_window_bits: rng.pick(&[9, 15]),
            };
            let mut settings = DeflateConfig::default();
            settings.min_size = rng.pick(&[0, 64]);
            DeflateAgreed { params, settings }
        });
        Scenario {
            role,
            blocking,
            chaos,
            script,
            config,
            deflate,
            tight,
            timers,
        }
    }

    fn negotiated(&self) -> Negotiated {
        match &self.deflate {
            Some(d) => Negotiated::new().with_deflate(d.params, d.settings.clone()),
            None => Negotiated::new(),
        }
    }

    fn peer(&self, rng: Rng) -> Peer {
        let role = match self.role {
            Role::Server => Role::Client,
            Role::Client => Role::Server,
        };
        Peer::new(role, &self.script, self.deflate.clone(), rng)
    }

    /// One line, for a failure's report.
    pub fn describe(&self) -> String {
        format!(
            "{} {:?}{}, {:?}, peer ends {:?} (auto_close {}, echo {}, {} actions), deflate {}, \
             read buffer {}, high water {}, control queue {}",
            if self.blocking { "blocking" } else { "tokio" },
            self.role,
            if self.timers {
                " with short timers"
            } else {
                ""
            },
            self.chaos,
            self.script.end(),
            self.script.auto_close,
            self.script.echo,
            self.script.actions.len(),
            self.deflate.is_some(),
            self.config.read_buffer_size,
            self.config.send_queue_high_water,
            self.config.control_queue_capacity,
        )
    }
}

/// What a run did, for the coverage figures.
#[derive(Clone, Debug)]
pub struct Summary {
    pub blocking: bool,
    pub virtual_time: Duration,
    pub ops: usize,
    pub transport_calls: u64,
    pub checked: Checked,
    pub reset: bool,
    pub peer_end: &'static str,
    pub app_end: String,
    pub shapes: Vec<&'static str>,
}

/// Runs the scenario of `seed` (the fuzz target adds its bytes as the first choices) and
/// checks it; panics with the seed, the scenario and what went wrong.
pub fn run(seed: u64, bytes: &[u8], tight: bool) -> Summary {
    let mut plan = Rng::with_bytes(seed, bytes.to_vec());
    let sc = Scenario::generate(&mut plan, tight);
    let wire_rng = plan.fork();
    let peer_rng = plan.fork();
    let (log, record, net, virtual_time, stuck) = if sc.blocking {
        run_blocking(&sc, plan, wire_rng, peer_rng)
    } else {
        run_tokio(&sc, plan, wire_rng, peer_rng)
    };
    let facts = Facts {
        peer: &record,
        log: &log,
        reset: net.reset,
        app_shutdown: net.app_shutdown,
        // A run as long as the shortest long timer (the keepalive and the message
        // timeout, 30 s) may meet it: a large message through a transport of a few
        // bytes that waits now and then takes minutes.
        timers: sc.timers || virtual_time >= Duration::from_secs(30),
    };
    let mut violations = Vec::new();
    if let Some(stuck) = stuck {
        violations.push(stuck);
    }
    if net.write_after_shutdown {
        violations.push("the application wrote after shutting its write half down".into());
    }
    let checked = check::check(&facts, &mut violations);
    if !violations.is_empty() {
        panic!(
            "simulated transport, seed {seed:#018x}: {}\n  scenario: {}\n  peer: sent {:?} \
             (close {:?}, {} B written, ended {:?}), received {:?} (close {:?}, eof {})\n  \
             application: received {:?}, end {:?}, discarded {}, sends {:?}\n  transport: {}",
            violations.join("\n  "),
            sc.describe(),
            record.sent.iter().map(|s| &s.msg).collect::<Vec<_>>(),
            record.close_sent.as_ref().map(|s| &s.msg),
            record.written,
            record.ended,
            record.received,
            record.close_received,
            record.eof,
            log.received,
            log.end,
            log.discarded,
            log.sends
                .iter()
                .map(|s| format!("{}.{} {:?}", s.task, s.seq, s.outcome))
                .collect::<Vec<_>>(),
            net.describe(),
        );
    }
    Summary {
        blocking: sc.blocking,
        virtual_time,
        ops: log.ops,
        transport_calls: net.calls(),
        checked,
        reset: net.reset,
        peer_end: record.ended.unwrap_or("not ended"),
        app_end: format!("{:?}", log.end),
        shapes: log.shapes.clone(),
    }
}

type Ran = (app::Log, peer::Record, Net, Duration, Option<String>);

fn run_tokio(sc: &Scenario, plan: Rng, wire_rng: Rng, peer_rng: Rng) -> Ran {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    let start = rt.block_on(async { tokio::time::Instant::now() });
    let progress = wire::Progress::new(start);
    let mut net = Net::new(sc.chaos, wire_rng);
    net.progress = Some(progress.clone());
    let net = Arc::new(Mutex::new(net));
    let peer = Arc::new(Mutex::new(sc.peer(peer_rng)));
    let app = app::App::new(plan, sc.tight, progress.clone());
    let (virtual_time, stuck) = rt.block_on(async {
        let ws = rapidws::tokio::from_handshake(
            SimStream::new(net.clone()),
            sc.role,
            &sc.config,
            sc.negotiated(),
            &[],
        );
        let peer_task = tokio::spawn(peer_task(net.clone(), peer.clone(), start));
        app.start(ws);
        let all = async {
            app.join().await;
            if let Err(e) = peer_task.await {
                std::panic::resume_unwind(e.into_panic());
            }
        };
        let watch = async {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                if progress.idle() > STALL || start.elapsed() > BOUND {
                    return;
                }
            }
        };
        let stuck = tokio::select! {
            biased;
            () = all => None,
            () = watch => Some(format!(
                "hang: nothing moved for {:?} of virtual time, {:?} into the run; {}; {}",
                progress.idle(),
                start.elapsed(),
                app.describe(),
                wire::lock(&peer).describe(),
            )),
        };
        (start.elapsed(), stuck)
    });
    // The tasks left (on a hang) go with the runtime, before the state is read.
    drop(rt);
    let log = std::mem::take(&mut *app.log());
    let record = std::mem::take(&mut wire::lock(&peer).record);
    let net = Arc::try_unwrap(net)
        .map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()))
        .unwrap_or_else(|_| panic!("the transport outlived the runtime"));
    (log, record, net, virtual_time, stuck)
}

/// The peer's task: steps the peer whenever the transport or its next action wakes it.
async fn peer_task(net: wire::SharedNet, peer: Arc<Mutex<Peer>>, start: tokio::time::Instant) {
    let mut sleep = Box::pin(tokio::time::sleep(Duration::ZERO));
    std::future::poll_fn(move |cx| {
        loop {
            let now = start.elapsed();
            let mut net = wire::lock(&net);
            let mut peer = wire::lock(&peer);
            while peer.step(&mut net, now) {}
            if peer.is_gone() {
                return std::task::Poll::Ready(());
            }
            net.peer_waker = Some(cx.waker().clone());
            let next = peer.next_at();
            drop((net, peer));
            if let Some(at) = next {
                sleep.as_mut().reset(start + at);
                if sleep.as_mut().poll(cx).is_ready() {
                    continue;
                }
            }
            return std::task::Poll::Pending;
        }
    })
    .await
}

fn run_blocking(sc: &Scenario, mut plan: Rng, wire_rng: Rng, peer_rng: Rng) -> Ran {
    let sim = SimStd {
        net: Net::new(sc.chaos, wire_rng),
        peer: sc.peer(peer_rng),
        now: Duration::ZERO,
    };
    let ws = rapidws::blocking::from_handshake(sim, sc.role, &sc.config, sc.negotiated(), &[]);
    let (log, mut sim) = blocking::run(ws, &mut plan, sc.tight);
    // The application is done with the socket: the peer sees its end and finishes.
    sim.net.app_drop();
    let mut stuck = None;
    for _ in 0..1_000_000 {
        if sim.peer.step(&mut sim.net, sim.now) {
            continue;
        }
        match sim.peer.next_at() {
            Some(at) if at > sim.now => sim.now = at,
            _ => break,
        }
    }
    if !sim.peer.is_gone() {
        stuck = Some(format!(
            "the peer did not end after the application's: {}",
            sim.peer.describe()
        ));
    }
    if sim.now > BOUND {
        stuck = Some(format!("the run took {:?} of virtual time", sim.now));
    }
    let record = std::mem::take(&mut sim.peer.record);
    (log, record, sim.net, sim.now, stuck)
}
