//! Shared by the zero-allocation tests (`prepared_alloc`, `recv_ref`): a global allocator
//! that counts the allocations (alloc, alloc_zeroed, realloc) this thread makes while
//! counting is on. Each `#[test]` runs on its own thread, so tests running in parallel do
//! not disturb each other's counts.
#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static COUNT: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

fn note() {
    // `try_with`: the thread-locals may be gone while the thread shuts down.
    let _ = COUNTING.try_with(|on| {
        if on.get() {
            let _ = COUNT.try_with(|c| c.set(c.get() + 1));
        }
    });
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Starts counting this thread's allocations from zero.
pub fn start() {
    COUNT.with(|c| c.set(0));
    COUNTING.with(|on| on.set(true));
}

/// Stops counting; returns the allocations since [`start`].
pub fn stop() -> usize {
    COUNTING.with(|on| on.set(false));
    COUNT.with(|c| c.get())
}

/// Allocations made by this thread while running `f`.
pub fn allocations<T>(f: impl FnOnce() -> T) -> (usize, T) {
    start();
    let r = f();
    (stop(), r)
}
