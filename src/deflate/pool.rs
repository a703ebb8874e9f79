//! A pool of compressors shared by connections ([`super::CompressorPolicy::Pooled`]).

use std::sync::Mutex;

use zlib_rs::Deflate;

/// What a compressor was built with; only a compressor with the same key is reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Key {
    pub(crate) window_bits: u8,
    pub(crate) level: i32,
    pub(crate) mem_level: u8,
}

impl Key {
    /// A new compressor for this key: raw DEFLATE (negative window bits).
    pub(crate) fn build(self) -> Deflate {
        Deflate::new_with_config(zlib_rs::DeflateConfig {
            level: self.level,
            window_bits: -i32::from(self.window_bits),
            mem_level: i32::from(self.mem_level),
            ..zlib_rs::DeflateConfig::default()
        })
    }
}

/// Compressors shared between connections: a connection borrows one for a message and
/// gives it back reset, so memory scales with the messages compressed at the same time
/// instead of with the connections. Share it as `Arc<CompressorPool>` in
/// [`super::CompressorPolicy::Pooled`].
pub struct CompressorPool {
    idle: Mutex<Vec<(Key, Deflate)>>,
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
    /// A pool that keeps at most `max_idle` idle compressors (each about 371 KiB at a
    /// 15-bit window and memory level 8); more are created when needed and dropped on
    /// return.
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

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(Key, Deflate)>> {
        // A panic while holding the lock cannot leave the Vec inconsistent.
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn take(&self, key: Key) -> Deflate {
        let found = {
            let mut idle = self.lock();
            idle.iter()
                .rposition(|(k, _)| *k == key)
                .map(|i| idle.swap_remove(i).1)
        };
        found.unwrap_or_else(|| key.build())
    }

    /// Returns a compressor, resetting it first (outside the lock).
    pub(crate) fn put(&self, key: Key, mut deflate: Deflate) {
        deflate.reset();
        let mut idle = self.lock();
        if idle.len() < self.max_idle {
            idle.push((key, deflate));
        }
    }
}
