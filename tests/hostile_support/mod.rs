//! Shared by the hostile-input tests: a counting global allocator with per-thread figures,
//! so that a test can assert how much memory refusing an input took, and raw frames as a
//! hostile client writes them.
//!
//! Each `#[test]` runs on its own thread and the sans-IO code allocates on the caller's
//! thread, so per-thread counts are not disturbed by tests running in parallel. (Work done
//! on other threads, such as tokio worker threads, is not counted.)
#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn note(delta: isize) {
    // `try_with`: the thread-locals may be gone while a thread is torn down.
    let _ = LIVE.try_with(|live| {
        let now = live.get() + delta;
        live.set(now);
        let _ = PEAK.try_with(|peak| {
            if now > peak.get() {
                peak.set(now);
            }
        });
    });
}

// SAFETY: every call is forwarded unchanged to the system allocator; the bookkeeping
// touches only const-initialised thread-locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size() as isize);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size() as isize);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(-(layout.size() as isize));
        // SAFETY: `ptr` came from this allocator with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size as isize - layout.size() as isize);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f` and returns its result with the most bytes it held at once: allocated on this
/// thread while it ran, beyond what was live when it started.
pub fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let r = f();
    let peak = PEAK.with(Cell::get) - base;
    (r, peak.max(0) as usize)
}

/// The masking key of every [`raw_frame`].
pub const KEY: [u8; 4] = [0x37, 0xfa, 0x21, 0x3d];

/// A masked frame as a hostile client would write it: any header byte `b0`, and an
/// announced length that may differ from the payload actually attached.
pub fn raw_frame(b0: u8, announced: u64, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![b0];
    match announced {
        0..=125 => f.push(0x80 | announced as u8),
        126..=0xffff => {
            f.push(0x80 | 126);
            f.extend_from_slice(&(announced as u16).to_be_bytes());
        }
        _ => {
            f.push(0x80 | 127);
            f.extend_from_slice(&announced.to_be_bytes());
        }
    }
    f.extend_from_slice(&KEY);
    f.extend(payload.iter().enumerate().map(|(i, b)| b ^ KEY[i & 3]));
    f
}
