#![cfg(all(feature = "tokio", feature = "blocking", feature = "deflate"))]
//! The simulated transport (tests/sim_support) over a fixed set of seeds. Each seed is one
//! run of the tokio layer (into_split and `futures` split halves, shared writers,
//! reunions, cancelled calls, the handler API) or of the blocking layer, in either role,
//! against a scripted peer over an in-memory connection that moves random amounts, returns
//! `Pending` at random and ends with a FIN or a reset at random points, with the
//! application's calls from several tasks interleaved on a virtual clock. Each run must
//! not panic, must not hang (every wait ends within the run's bound of virtual time, well
//! under the timers that would rescue a lost wake-up), and must deliver every message
//! once, in order, both ways (sim_support/check.rs has the exact promise).
//!
//! - `SIM_SEEDS=n` runs seeds `0..n` (from `SIM_SEED_START`) instead of the CI set;
//! - `SIM_SEED=0x...` replays one seed, `SIM_TRACE=1` with it prints every call, its
//!   result and the peer's actions;
//! - `SIM_LOOSE=1` runs larger messages and more calls per run.
//!
//! The same runs, driven by the fuzzer's bytes: `fuzz/fuzz_targets/simulated_transport.rs`.
mod sim_support;

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Seeds per CI run, on as many threads as there are cores.
const SEEDS: u64 = 2000;

/// Seeds whose runs found bugs, replayed on every run. Each is named in the commit that
/// fixed its bug (a seed keeps its run only as long as the driver makes the same
/// choices from it; the focused tests of tests/transport_faults.rs and
/// tests/connection_lifecycle.rs keep the bugs themselves away).
const FOUND: &[u64] = &[
    // blocking: a write timeout while `read` answered a ping ended the connection.
    0x0, 0xb, 0x29,
    // tokio: a `futures`-split reader pending before the first send was never woken.
    0x34, 0x56, 0xa2,
    // connection: the transport's end after an unanswered peer close never ended it.
    0x92, 0x108, 0x11e,
    // tokio: a failed send left a fragmented message to fail the connection (Abandoned).
    0x3b3a, 0x4002, 0x4823,
    // connection: a FIN read with the close echo was awaited again.
    0x512,
    // tokio: a send or flush on the writing half of a connection that was over waited.
    0x51a, 0x70a, 0xaba,
];

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim();
    Some(match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).expect("a hex seed"),
        None => v.parse().expect("a number"),
    })
}

fn tight() -> bool {
    std::env::var_os("SIM_LOOSE").is_none()
}

/// What a set of runs saw, for the coverage figures printed with `--nocapture`.
#[derive(Default)]
struct Stats {
    runs: u64,
    virtual_time: Duration,
    calls: usize,
    counts: BTreeMap<String, u64>,
    failed: Vec<u64>,
}

impl Stats {
    fn count(&mut self, what: impl Into<String>) {
        *self.counts.entry(what.into()).or_default() += 1;
    }

    fn add(&mut self, s: sim_support::Summary) {
        self.virtual_time += s.virtual_time;
        self.calls += s.ops;
        self.count(if s.blocking {
            "layer: blocking"
        } else {
            "layer: tokio"
        });
        self.count(format!("peer: {}", s.peer_end));
        self.count(format!("receiving ended: {}", s.app_end));
        if s.checked.all_delivered {
            self.count("checked: all the peer's messages delivered");
        }
        if s.checked.all_received {
            self.count("checked: all messages sent with Ok received");
        }
        if s.reset {
            self.count("transport reset");
        }
        for shape in s.shapes {
            self.count(format!("shape: {shape}"));
        }
    }
}

/// Runs `seeds` on every core; panics with the failing seeds (each run's own panic says
/// what failed).
fn run_seeds(seeds: Vec<u64>) {
    let started = Instant::now();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    // The seed each thread runs, and since when.
    let current = Mutex::new(vec![(u64::MAX, Instant::now()); threads]);
    let stats = Mutex::new(Stats::default());
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        // A run that spins without the virtual clock moving, short of the transport's
        // call limit, is caught here: the last resort, naming the seed.
        scope.spawn(|| {
            let limit = Duration::from_secs(120);
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                for &(seed, since) in current.lock().unwrap().iter() {
                    if seed != u64::MAX && since.elapsed() > limit {
                        eprintln!(
                            "simulated transport: seed {seed:#x} still running after {limit:?}"
                        );
                        std::process::exit(101);
                    }
                }
            }
        });
        let workers: Vec<_> = (0..threads)
            .map(|i| {
                let (seeds, current, stats) = (&seeds, &current, &stats);
                scope.spawn(move || {
                    for &seed in seeds.iter().skip(i).step_by(threads) {
                        current.lock().unwrap()[i] = (seed, Instant::now());
                        let run =
                            catch_unwind(AssertUnwindSafe(|| sim_support::run(seed, &[], tight())));
                        current.lock().unwrap()[i].0 = u64::MAX;
                        let mut stats = stats.lock().unwrap();
                        stats.runs += 1;
                        match run {
                            Ok(summary) => stats.add(summary),
                            Err(_) => stats.failed.push(seed),
                        }
                        if stats.failed.len() >= 10 {
                            return;
                        }
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let mut stats = stats.into_inner().unwrap();
    eprintln!(
        "{} runs in {:.1?} on {threads} threads ({} calls, {:.1?} of virtual time)",
        stats.runs,
        started.elapsed(),
        stats.calls,
        stats.virtual_time
    );
    for (k, v) in &stats.counts {
        eprintln!("  {k}: {v}");
    }
    stats.failed.sort_unstable();
    assert!(
        stats.failed.is_empty(),
        "failing seeds: {:#x?}",
        stats.failed
    );
}

#[test]
fn seeds() {
    if let Some(seed) = env_u64("SIM_SEED") {
        let s = sim_support::run(seed, &[], tight());
        eprintln!("{s:#?}");
        return;
    }
    let start = env_u64("SIM_SEED_START").unwrap_or(0);
    let n = env_u64("SIM_SEEDS").unwrap_or(SEEDS);
    run_seeds((start..start + n).collect());
}

#[test]
fn seeds_that_found_bugs() {
    run_seeds(FOUND.to_vec());
}
