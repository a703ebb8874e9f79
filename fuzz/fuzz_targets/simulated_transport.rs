//! The simulated transport of `tests/sim_support` (included by `#[path]`, the same driver
//! as `tests/simulated_transport.rs`) driven by the fuzzer: an application's calls from
//! several tasks on the tokio layer (or one thread on the blocking layer), in either role,
//! against a scripted peer over an in-memory connection whose reads and writes move random
//! amounts, return `Pending` at random and end with a FIN or a reset at random points, on a
//! virtual clock. A run fails on a panic, a hang (a wait that outlives the virtual-time
//! bound, well under the timers that would hide a lost wake-up) or a broken promise of the
//! oracle: every message delivered once, in order, unchanged, both ways (see
//! `tests/sim_support/check.rs`).
//!
//! Input: 8 bytes, the seed (little-endian), then the run's first choices (the scenario,
//! the peer's script, the application's calls), each taking as few bytes as its range
//! needs; past the end the seed chooses. An input of just the seed replays
//! `SIM_SEED=<seed>` of the test; the transport's own choices always come from the seed.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/sim_support/mod.rs"]
mod sim_support;

fuzz_target!(|data: &[u8]| {
    let Some((seed, plan)) = data.split_first_chunk::<8>() else {
        return;
    };
    sim_support::run(u64::from_le_bytes(*seed), plan, true);
});
