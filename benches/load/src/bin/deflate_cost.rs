//! CPU cost of permessage-deflate alone, per message, with many connections' compressors
//! taking turns (so their state is as cold as in a server with that many connections):
//! rapidws (`PerMessageDeflate`, server role, context takeover) against flate2's default
//! backend (miniz_oxide, what yawc uses), both compressing the JSON-like text of the load
//! tool, which this program generates the same way.
//!
//! ```text
//! deflate_cost --size 16384 --codecs 100 [--level 1] [--seconds 2]
//! ```
//!
//! Prints one line per library: µs per message to compress, bytes per message, and µs per
//! message to inflate (rapidws inflating its own output with a client codec).

use std::time::{Duration, Instant};

use flate2::{Compress, Compression, FlushCompress};
use rapidws::Role;
use rapidws::deflate::{DeflateConfig, DeflateParams, PerMessageDeflate};
use rapidws_load::{Rng, arg_f64, json_like};

fn main() {
    let size = arg_f64("--size", 16384.0) as usize;
    let codecs = arg_f64("--codecs", 100.0) as usize;
    let level = arg_f64("--level", 1.0) as i32;
    let seconds = Duration::from_secs_f64(arg_f64("--seconds", 2.0));
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ size as u64);
    let n = (128 * 1024usize).div_ceil(size).clamp(8, 64);
    let payloads: Vec<Vec<u8>> = (0..n).map(|_| json_like(size, &mut rng)).collect();

    let config = DeflateConfig::new().level(level);
    let params = DeflateParams::default();
    // Each phase runs `seconds` of wall time and counts this thread's CPU time (the
    // machine is shared: wall time would count other processes' slices too).
    let phase = |f: &mut Step| {
        let (mut msgs, mut bytes, mut round) = (0u64, 0u64, 0usize);
        let (mut out, mut back) = (Vec::with_capacity(2 * size), Vec::with_capacity(2 * size));
        let cpu0 = thread_cpu();
        let start = Instant::now();
        while start.elapsed() < seconds {
            for k in 0..codecs {
                let p = &payloads[(round + k) % n];
                bytes += f(k, p, &mut out, &mut back) as u64;
            }
            msgs += codecs as u64;
            round += 1;
        }
        (
            (thread_cpu() - cpu0) * 1e6 / msgs as f64,
            bytes as f64 / msgs as f64,
        )
    };

    let mut servers: Vec<_> = (0..codecs)
        .map(|_| PerMessageDeflate::new(Role::Server, params, &config))
        .collect();
    let (comp, size_r) = phase(&mut |k, p, out, _| {
        out.clear();
        assert!(servers[k].compress(p, out).expect("compresses"));
        out.len()
    });
    // Fresh servers: the clients' windows must hold what the servers' did.
    let mut servers: Vec<_> = (0..codecs)
        .map(|_| PerMessageDeflate::new(Role::Server, params, &config))
        .collect();
    let mut clients: Vec<_> = (0..codecs)
        .map(|_| PerMessageDeflate::new(Role::Client, params, &config))
        .collect();
    let (both, _) = phase(&mut |k, p, out, back| {
        out.clear();
        assert!(servers[k].compress(p, out).expect("compresses"));
        back.clear();
        clients[k]
            .decompress(out, true, back, usize::MAX)
            .expect("inflates");
        assert_eq!(&back[..], p);
        out.len()
    });
    println!(
        "rapidws level {level}: {size} B x {codecs} codecs: compress {comp:.1} us/msg, {size_r:.0} B/msg, inflate {:.1} us/msg",
        both - comp
    );

    // flate2 (miniz_oxide), raw deflate, sync flush, context takeover.
    let mut zs: Vec<_> = (0..codecs)
        .map(|_| Compress::new(Compression::new(level as u32), false))
        .collect();
    let (comp, size_f) = phase(&mut |k, p, out, _| {
        out.clear();
        out.reserve(2 * p.len());
        zs[k]
            .compress_vec(p, out, FlushCompress::Sync)
            .expect("compresses");
        out.len() - 4
    });
    println!(
        "flate2 level {level}: {size} B x {codecs} codecs: compress {comp:.1} us/msg, {size_f:.0} B/msg"
    );
}

/// One message for codec `k`: `(k, payload, output room, inflate room)` → bytes sent.
type Step<'a> = dyn FnMut(usize, &[u8], &mut Vec<u8>, &mut Vec<u8>) -> usize + 'a;

/// This thread's user + system CPU seconds (`/proc/thread-self/stat`, clock ticks).
fn thread_cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("procfs");
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: u64 = f[11].parse::<u64>().expect("utime") + f[12].parse::<u64>().expect("stime");
    ticks as f64 / rapidws_load::clock_ticks_per_second() as f64
}
