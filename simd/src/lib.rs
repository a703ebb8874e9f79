//! SIMD kernels for WebSocket hot paths: masking, UTF-8 validation, and a batch decoder
//! of frames.
//!
//! Masking, UTF-8 validation and the batch decoder ([`frame::decode`], [`frame::run`]: the
//! whole messages of one read checked, unmasked and validated in one call) have a
//! portable `scalar` reference and, behind the `avx2`, `avx512` and `neon` features,
//! vector backends. In the batch decoder the payload passes are the backend's vectors;
//! finding the headers is scalar on every backend (each header's position depends on the
//! length in the one before it; see [`frame::scan_batch`]). The backend is chosen once:
//! at compile time when the target feature is enabled, otherwise by run-time detection
//! (feature `std`) on first use. [`Backend`] makes every backend reachable, so tests,
//! benches and fuzzers can compare them.
//!
//! Small inputs (a ping payload, a short text frame) take an inlined path before any
//! dispatch: for masking scalar words below 64 bytes (on x86_64 SSE2 vectors from 16),
//! for UTF-8 `core::str::from_utf8` below 16 and on x86_64 one SSE2 ASCII test up to 128
//! bytes. Where one backend wins on short
//! inputs and another on long ones, the choice is made by size (UTF-8 below 64 bytes runs
//! the AVX2 kernel on an AVX-512 CPU).
//!
//! The kernels are streaming: [`mask::apply`] advances the key by the bytes it processed
//! and [`utf8::Validator`] carries an incomplete code point to the next chunk, so a frame
//! can be unmasked and checked piece by piece as it arrives. Without `std` the crate is
//! `no_std` with no allocation; run-time detection is then off and only the backends the
//! build's target features guarantee are used.
//!
//! Besides the kernels, [`prefetch`] asks for a value's cache lines ahead of its reads:
//! the hint with which `rapidws` fetches a quiet connection's state when it wakes.
//!
//! | feature  | default | what it gives |
//! |----------|---------|---------------|
//! | `std`    | yes     | run-time CPU feature detection |
//! | `avx2`   | yes     | the x86_64 AVX2 backend |
//! | `avx512` | yes     | the x86_64 AVX-512 (F + BW) backend; UTF-8 uses GFNI where present |
//! | `neon`   | yes     | the aarch64 NEON backend |
//!
//! ```
//! use rapidws_simd::{Backend, mask, utf8};
//!
//! // RFC 6455 5.3: a client masks every payload byte with the 4-byte key, cycling.
//! let text = "grüße, WebSocket! ".repeat(8);
//! let mut frame = text.clone().into_bytes();
//! let key = [0x37, 0xfa, 0x21, 0x3d];
//! mask::apply(&mut frame, &mut key.clone());
//! assert_ne!(frame, text.as_bytes());
//!
//! // The receiver unmasks the frame as it arrives, in two pieces here, split inside the
//! // two-byte 'ü', and validates the UTF-8 as it goes.
//! let mut k = key;
//! let mut validator = utf8::Validator::new();
//! let (head, tail) = frame.split_at_mut(3);
//! utf8::unmask_validate(head, &mut k, &mut validator).unwrap();
//! assert!(!validator.is_complete(), "the 'ü' is cut in half");
//! utf8::unmask_validate(tail, &mut k, &mut validator).unwrap();
//! validator.finish().unwrap();
//! assert_eq!(frame, text.as_bytes());
//!
//! // One-shot validation; the error says where, like `core::str::Utf8Error`.
//! assert!(utf8::validate(text.as_bytes()).is_ok());
//! let err = utf8::validate(b"caf\xc3(").unwrap_err();
//! assert_eq!((err.valid_up_to(), err.error_len()), (3, Some(1)));
//!
//! // The backend this CPU runs, and every backend against the portable reference.
//! println!("best backend: {}", Backend::best().name());
//! assert!(Backend::best().is_available());
//! let mut reference = text.clone().into_bytes();
//! mask::apply_with(Backend::Scalar, &mut reference, &mut key.clone()).unwrap();
//! for backend in Backend::ALL {
//!     let mut buf = text.clone().into_bytes();
//!     // `None` when this CPU or build lacks the backend.
//!     if mask::apply_with(backend, &mut buf, &mut key.clone()).is_some() {
//!         assert_eq!(buf, reference, "{}", backend.name());
//!     }
//! }
//! ```
#![no_std]
#![deny(missing_docs)]

#[cfg(feature = "std")]
extern crate std;

mod backend;
mod batch;
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
mod header;
pub mod mask;
mod prefetch;
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
pub use prefetch::prefetch;
