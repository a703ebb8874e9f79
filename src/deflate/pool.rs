//! A pool of compressors shared by connections ([`super::CompressorPolicy::Pooled`]).

use std::sync::Mutex;

use zlib_rs::Deflate;

use super::DeflateError;
use super::fast::FastDeflate;

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

/// A compressor: ours at level 1 ([`FastDeflate`]), zlib-rs otherwise.
pub(crate) enum Compressor {
    Fast(Box<FastDeflate>),
    Zlib(Deflate),
}

impl Compressor {
    pub(crate) fn new(key: Key) -> Self {
        if key.level == 1 {
            Compressor::Fast(Box::new(FastDeflate::new(key.window_bits)))
        } else {
            Compressor::Zlib(key.build())
        }
    }

    /// Compresses `input` as the next part of a message, appending to `out`; `fin` ends
    /// the message (sync flush, RFC 7692 7.2.1 trailer removed).
    pub(crate) fn compress(
        &mut self,
        input: &[u8],
        fin: bool,
        out: &mut Vec<u8>,
    ) -> Result<(), DeflateError> {
        match self {
            Compressor::Fast(f) => {
                f.compress(input, fin, out);
                Ok(())
            }
            Compressor::Zlib(d) => super::sender::compress_zlib(d, input, fin, out),
        }
    }

    pub(crate) fn reset(&mut self) {
        match self {
            Compressor::Fast(f) => f.reset(),
            Compressor::Zlib(d) => d.reset(),
        }
    }

    /// Resets and makes the last window of `payload` the history (a prepared message the
    /// peer received, see `super::prepared`).
    pub(crate) fn prime(&mut self, payload: &[u8], window_bits: u8) {
        match self {
            Compressor::Fast(f) => f.set_dictionary(payload),
            Compressor::Zlib(d) => super::prepared::prime(d, payload, window_bits),
        }
    }
}

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
