//! SIMD kernels for WebSocket hot paths: masking, UTF-8 validation and frame scanning.
//!
//! Every kernel has a portable `scalar` reference and, behind the `avx2`, `avx512` and
//! `neon` features, vector backends. The backend is chosen once: at compile time when the
//! target feature is enabled, otherwise by run-time detection (feature `std`) on first use.
//! [`Backend`] makes every backend reachable, so tests, benches and fuzzers can compare them.
#![no_std]
#![deny(missing_docs)]

#[cfg(feature = "std")]
extern crate std;

mod backend;
pub mod frame;
pub mod mask;
pub mod utf8;

pub use backend::Backend;
