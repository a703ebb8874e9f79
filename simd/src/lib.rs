//! SIMD kernels for WebSocket hot paths: masking, UTF-8 validation and frame scanning.
//!
//! Every kernel has a portable `scalar` reference and, behind the `avx2`, `avx512` and
//! `neon` features, vector backends. The backend is chosen once: at compile time when the
//! target feature is enabled, otherwise by run-time detection (feature `std`) on first use.
//! [`Backend`] makes every backend reachable, so tests, benches and fuzzers can compare them.
//!
//! Small inputs (a ping payload, a short text frame) take an inlined scalar path before
//! any dispatch.
#![no_std]
#![deny(missing_docs)]

#[cfg(feature = "std")]
extern crate std;

mod backend;
mod dispatch;
pub mod frame;
#[cfg(any(
    all(
        target_arch = "x86_64",
        target_feature = "sse2",
        any(feature = "avx2", feature = "avx512")
    ),
    all(target_arch = "aarch64", feature = "neon")
))]
mod generic;
pub mod mask;
mod scalar;
pub mod utf8;

#[cfg(all(target_arch = "aarch64", feature = "neon"))]
mod aarch64;
#[cfg(all(
    target_arch = "x86_64",
    target_feature = "sse2",
    any(feature = "avx2", feature = "avx512")
))]
mod x86_64;

pub use backend::Backend;
