//! The tests' one counting allocator: every test file that counts allocations or measures
//! heap declares `mod alloc_count;`, whose `#[global_allocator]` forwards each call to the
//! system allocator unchanged and keeps three views of it.
//!
//! - **This thread** (each `#[test]` runs on a thread of its own, so tests running in
//!   parallel do not disturb each other): the allocations made while counting is on
//!   ([`start`], [`stop`], [`allocations`]: the zero-allocation tests), and the most bytes
//!   held at once while a closure runs ([`peak_during`]: the sans-IO hostile-input tests,
//!   whose work runs on the caller's thread).
//! - **The process**: the bytes live now and at the peak ([`live_heap`], [`peak_heap`],
//!   [`reset_peak`]), for tests whose work runs on other threads (tokio workers, connection
//!   threads); such tests run one at a time.
//! - **One tracked thread**, read from another: its live bytes and live allocations by size
//!   ([`track_this_thread`], [`tracked_live`], [`tracked_by_size`]), for a server on a
//!   thread of its own.
//!
//! The bookkeeping is atomics and const-initialised thread-locals, which never allocate.
#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, Ordering};

struct Counting;

thread_local! {
    /// Whether [`start`] turned counting on for this thread.
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    /// Allocations (alloc, alloc_zeroed, realloc) since [`start`].
    static COUNT: Cell<usize> = const { Cell::new(0) };
    /// Bytes allocated and not yet freed by this thread (frees of other threads' blocks
    /// count here too, so only differences mean something).
    static THREAD_LIVE: Cell<isize> = const { Cell::new(0) };
    static THREAD_PEAK: Cell<isize> = const { Cell::new(0) };
    /// Whether this is the tracked thread.
    static TRACKED: Cell<bool> = const { Cell::new(false) };
}

static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);
static TRACKED_LIVE: AtomicIsize = AtomicIsize::new(0);

/// Live allocations of the tracked thread by size (the last slot: this size or larger).
const SIZES: usize = 8192;
static BY_SIZE: [AtomicIsize; SIZES] = [const { AtomicIsize::new(0) }; SIZES];

/// One block of `size` bytes allocated (`sign` 1) or freed (-1).
fn note(size: usize, sign: isize) {
    let delta = size as isize * sign;
    let now = LIVE.fetch_add(delta, Ordering::Relaxed) + delta;
    if sign > 0 && now > PEAK.load(Ordering::Relaxed) {
        PEAK.fetch_max(now, Ordering::Relaxed);
    }
    // `try_with`: the thread-locals may be gone while a thread shuts down.
    let _ = THREAD_LIVE.try_with(|live| {
        let now = live.get() + delta;
        live.set(now);
        let _ = THREAD_PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
    if sign > 0 {
        let _ = COUNTING.try_with(|on| {
            if on.get() {
                let _ = COUNT.try_with(|c| c.set(c.get() + 1));
            }
        });
    }
    if TRACKED.try_with(Cell::get).unwrap_or(false) {
        TRACKED_LIVE.fetch_add(delta, Ordering::Relaxed);
        BY_SIZE[size.min(SIZES - 1)].fetch_add(sign, Ordering::Relaxed);
    }
}

// SAFETY: every call is forwarded unchanged to the system allocator; the bookkeeping
// (`note`) touches only atomics and const-initialised thread-locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size(), 1);
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size(), 1);
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(layout.size(), -1);
        // SAFETY: `ptr` came from this allocator with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // One block of the old size freed, one of the new size allocated (counted as one
        // allocation).
        note(layout.size(), -1);
        note(new_size, 1);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

// --- this thread: allocations counted ----------------------------------------------------

/// Starts counting this thread's allocations from zero.
pub fn start() {
    COUNT.with(|c| c.set(0));
    COUNTING.with(|on| on.set(true));
}

/// Stops counting; returns the allocations since [`start`].
pub fn stop() -> usize {
    COUNTING.with(|on| on.set(false));
    COUNT.with(Cell::get)
}

/// Allocations made by this thread while running `f`.
pub fn allocations<T>(f: impl FnOnce() -> T) -> (usize, T) {
    start();
    let r = f();
    (stop(), r)
}

// --- this thread: bytes held ---------------------------------------------------------------

/// Runs `f` and returns its result with the most bytes it held at once: allocated on this
/// thread while it ran, beyond what was live when it started.
pub fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = THREAD_LIVE.with(Cell::get);
    THREAD_PEAK.with(|p| p.set(base));
    let r = f();
    let peak = THREAD_PEAK.with(Cell::get) - base;
    (r, peak.max(0) as usize)
}

// --- the process ---------------------------------------------------------------------------

/// Heap bytes live in the whole process now (every thread, every test running).
pub fn live_heap() -> usize {
    LIVE.load(Ordering::Relaxed).max(0) as usize
}

/// The most heap bytes live at once since the last [`reset_peak`].
pub fn peak_heap() -> usize {
    PEAK.load(Ordering::Relaxed).max(0) as usize
}

/// Starts a new peak from what is live now.
pub fn reset_peak() {
    PEAK.store(LIVE.load(Ordering::Relaxed), Ordering::Relaxed);
}

// --- one tracked thread --------------------------------------------------------------------

/// Makes the calling thread the tracked one (one per test process).
pub fn track_this_thread() {
    TRACKED.with(|t| t.set(true));
}

/// Bytes allocated and not yet freed by the tracked thread.
pub fn tracked_live() -> isize {
    TRACKED_LIVE.load(Ordering::Relaxed)
}

/// The tracked thread's live allocations by size in bytes (index; the last slot counts
/// that size and larger).
pub fn tracked_by_size() -> Vec<isize> {
    BY_SIZE.iter().map(|c| c.load(Ordering::Relaxed)).collect()
}
