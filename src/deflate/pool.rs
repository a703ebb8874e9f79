//! A pool of compressors shared by connections ([`super::CompressorPolicy::Pooled`]).

use std::sync::Mutex;

use super::compressor::{Compressor, Key};

/// Compressors shared between connections: a connection borrows one for a message and
/// gives it back reset, so memory scales with the messages compressed at the same time
/// instead of with the connections. Share it as `Arc<CompressorPool>` in
/// [`super::CompressorPolicy::Pooled`].
pub struct CompressorPool {
    idle: Mutex<Vec<(Key, Compressor)>>,
    max_idle: usize,
}

impl core::fmt::Debug for CompressorPool {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CompressorPool")
            .field("idle", &self.idle())
            .field("max_idle", &self.max_idle)
            .finish()
    }
}

impl CompressorPool {
    /// A pool that keeps at most `max_idle` idle compressors (at level 1, ours: 8 KiB plus
    /// the history kept from the last message, at most 72 KiB at a 15-bit window; at
    /// zlib-rs's levels about 371 KiB at memory level 8); more are created when needed and
    /// dropped on return.
    pub fn new(max_idle: usize) -> Self {
        CompressorPool {
            idle: Mutex::new(Vec::new()),
            max_idle,
        }
    }

    /// How many idle compressors the pool holds now.
    pub fn idle(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(Key, Compressor)>> {
        // A panic while holding the lock cannot leave the Vec inconsistent.
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn take(&self, key: Key) -> Compressor {
        let found = {
            let mut idle = self.lock();
            idle.iter()
                .rposition(|(k, _)| *k == key)
                .map(|i| idle.swap_remove(i).1)
        };
        found.unwrap_or_else(|| Compressor::new(key))
    }

    /// Returns a compressor, resetting it first (outside the lock).
    pub(crate) fn put(&self, key: Key, mut compressor: Compressor) {
        compressor.reset();
        let mut idle = self.lock();
        if idle.len() < self.max_idle {
            idle.push((key, compressor));
        }
    }
}
