//! What a gathered write costs the kernel per slice: one thread writes the same `--frames`
//! frames of `--size` payload bytes (plus a 4-byte header each) to a loopback TCP socket
//! while another reads and discards, in three shapes, each for `--seconds`:
//!
//! - `write`: the frames back to back, written with a plain write (`send`), not a
//!   gathered one;
//! - `contiguous`: the frames back to back, one slice per gathered write (`writev`);
//! - `frame-slices`: one slice per frame, header and payload together;
//! - `header+payload`: a header slice and a payload slice per frame (a payload held where
//!   the caller put it).
//!
//! ```text
//! writev_cost [--size 1024] [--frames 64] [--seconds 2] [--rounds 3]
//! ```
//!
//! Prints, per shape and round, the writer's system time per frame (clock ticks of
//! `/proc/thread-self/stat`, 10 ms each, over about a second of system time). This is the
//! measurement behind `COALESCE_PAYLOAD_MAX` in `src/connection/queue.rs`.

use std::io::{IoSlice, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use rapidws_load::{arg_f64, clock_ticks_per_second, thread_cpu_ticks};

fn main() -> std::io::Result<()> {
    let size = arg_f64("--size", 1024.0) as usize;
    let frames = arg_f64("--frames", 64.0) as usize;
    let seconds = Duration::from_secs_f64(arg_f64("--seconds", 2.0));
    let rounds = arg_f64("--rounds", 3.0) as usize;
    let frame = 4 + size;

    let listener = TcpListener::bind("127.0.0.1:0")?;
    let mut writer = TcpStream::connect(listener.local_addr()?)?;
    writer.set_nodelay(true)?;
    let (mut reader, _) = listener.accept()?;
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 20];
        while matches!(reader.read(&mut buf), Ok(n) if n > 0) {}
    });

    // The frames back to back: a 4-byte header (its content does not matter here), then
    // the payload.
    let wire: Vec<u8> = (0..frames * frame).map(|i| i as u8).collect();
    let tck = clock_ticks_per_second() as f64;
    for round in 1..=rounds {
        for shape in ["write", "contiguous", "frame-slices", "header+payload"] {
            let slices: Vec<IoSlice<'_>> = match shape {
                "write" | "contiguous" => vec![IoSlice::new(&wire)],
                "frame-slices" => wire.chunks(frame).map(IoSlice::new).collect(),
                _ => wire
                    .chunks(frame)
                    .flat_map(|f| [IoSlice::new(&f[..4]), IoSlice::new(&f[4..])])
                    .collect(),
            };
            let (_, s0) = thread_cpu_ticks()?;
            let start = Instant::now();
            let mut written = 0usize;
            while start.elapsed() < seconds {
                // A write the socket takes only in part leaves the rest unsent: the next
                // write starts a new batch. Only the bytes count.
                written += if shape == "write" {
                    writer.write(&wire)?
                } else {
                    writer.write_vectored(&slices)?
                };
            }
            let (_, s1) = thread_cpu_ticks()?;
            let sys_ns = (s1 - s0) as f64 / tck * 1e9;
            let sent_frames = written as f64 / frame as f64;
            println!(
                "round {round} {shape:<15} {:>3} slices/write: {:>6.0} ns of system time per {size} B frame",
                slices.len(),
                sys_ns / sent_frames
            );
        }
    }
    Ok(())
}
