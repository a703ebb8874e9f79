//! One place that maps a [`Backend`] to its kernel. Callers pass only available backends
//! (checked with [`Backend::is_available`] or obtained from [`Backend::best`]).
//!
//! A backend that is not compiled in falls through to the scalar kernel; that arm is only
//! reachable if the precondition is broken, and even then computes the right result.

use crate::Backend;
use crate::header::{Rules, Scanned};
use crate::{batch, scalar};

macro_rules! dispatch {
    ($backend:expr, $name:ident($($arg:expr),*), $scalar:expr) => {
        match $backend {
            #[cfg(all(target_arch = "x86_64", target_feature = "sse2", feature = "avx512"))]
            // SAFETY: the caller guarantees the backend is available (AVX-512F/BW present).
            Backend::Avx512 => unsafe { crate::x86_64::avx512::$name($($arg),*) },
            #[cfg(all(target_arch = "x86_64", target_feature = "sse2", feature = "avx2"))]
            // SAFETY: the caller guarantees the backend is available (AVX2 present).
            Backend::Avx2 => unsafe { crate::x86_64::avx2::$name($($arg),*) },
            #[cfg(all(target_arch = "aarch64", feature = "neon"))]
            // SAFETY: the caller guarantees the backend is available (NEON present).
            Backend::Neon => unsafe { crate::aarch64::neon::$name($($arg),*) },
            _ => $scalar,
        }
    };
}

/// Masks `buf` at key phase 0.
/// # Safety
/// `backend` must be available.
#[inline]
pub(crate) unsafe fn mask(backend: Backend, buf: &mut [u8], key: [u8; 4]) {
    dispatch!(backend, mask(buf, key), scalar::mask(buf, key))
}

/// `dst = src ^ key` at key phase 0.
/// # Safety
/// `backend` must be available; `dst.len() == src.len()`.
#[inline]
pub(crate) unsafe fn mask_copy(backend: Backend, dst: &mut [u8], src: &[u8], key: [u8; 4]) {
    dispatch!(
        backend,
        mask_copy(dst, src, key),
        scalar::mask_copy(dst, src, key)
    )
}

/// Whether `buf` is complete, valid UTF-8.
/// # Safety
/// `backend` must be available.
#[inline]
pub(crate) unsafe fn validate(backend: Backend, buf: &[u8]) -> bool {
    dispatch!(backend, validate(buf), core::str::from_utf8(buf).is_ok())
}

/// [`crate::frame::decode`] on `backend`.
/// # Safety
/// `backend` must be available.
#[inline]
pub(crate) unsafe fn decode(
    backend: Backend,
    buf: &mut [u8],
    rules: &Rules,
    max_frames: usize,
) -> Scanned {
    dispatch!(
        backend,
        decode(buf, rules, max_frames),
        scalar_decode(buf, rules, max_frames)
    )
}

/// A kernel chosen once and then called through a cached pointer: one relaxed atomic load
/// and one indirect call, instead of re-reading the cached backend and matching on it.
///
/// Each slot starts out pointing at an `init` function that picks the kernel for
/// [`Backend::best`], stores it and runs it. Racing first callers store the same pointer.
/// When the backend is fixed at compile time the slot is not used: the match on the
/// constant backend folds to a direct call.
macro_rules! cached {
    ($(#[$doc:meta])* $auto:ident, $slot:ident, $init:ident, $ty:ty, $pick:ident,
     fn($($arg:ident: $argty:ty),*) -> $ret:ty) => {
        static $slot: core::sync::atomic::AtomicPtr<()> =
            core::sync::atomic::AtomicPtr::new($init as *mut ());

        fn $init($($arg: $argty),*) -> $ret {
            let f: $ty = $pick(Backend::best());
            $slot.store(f as *mut (), core::sync::atomic::Ordering::Relaxed);
            // SAFETY: `$pick` returned the kernel of an available backend.
            unsafe { f($($arg),*) }
        }

        $(#[$doc])*
        #[inline]
        pub(crate) fn $auto($($arg: $argty),*) -> $ret {
            if let Some(b) = crate::backend::STATIC_BEST {
                // SAFETY: the compile-time backend is available wherever this binary runs.
                return unsafe { $pick(b)($($arg),*) };
            }
            let p = $slot.load(core::sync::atomic::Ordering::Relaxed);
            // SAFETY: the slot only ever holds `$init` or a `$ty` returned by `$pick`
            // for an available backend, both stored from values of type `$ty` (or a safe
            // fn of the same signature).
            let f = unsafe { core::mem::transmute::<*mut (), $ty>(p) };
            // SAFETY: as above, the kernel's backend is available.
            unsafe { f($($arg),*) }
        }
    };
}

type MaskFn = unsafe fn(&mut [u8], [u8; 4]);
type DecodeFn = unsafe fn(&mut [u8], &Rules, usize) -> Scanned;
type ValidateFn = unsafe fn(&[u8]) -> bool;

/// The mask kernel of an available `backend`.
fn pick_mask(backend: Backend) -> MaskFn {
    match backend {
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2", feature = "avx512"))]
        Backend::Avx512 => crate::x86_64::avx512::mask,
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2", feature = "avx2"))]
        Backend::Avx2 => crate::x86_64::avx2::mask,
        #[cfg(all(target_arch = "aarch64", feature = "neon"))]
        Backend::Neon => crate::aarch64::neon::mask,
        _ => scalar_mask,
    }
}

/// The UTF-8 kernel of an available `backend`.
fn pick_validate(backend: Backend) -> ValidateFn {
    match backend {
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2", feature = "avx512"))]
        Backend::Avx512 => crate::x86_64::avx512::validate_kernel(),
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2", feature = "avx2"))]
        Backend::Avx2 => crate::x86_64::avx2::validate,
        #[cfg(all(target_arch = "aarch64", feature = "neon"))]
        Backend::Neon => crate::aarch64::neon::validate,
        _ => scalar_validate,
    }
}

/// The batch decoder of an available `backend`.
fn pick_decode(backend: Backend) -> DecodeFn {
    match backend {
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2", feature = "avx512"))]
        Backend::Avx512 => crate::x86_64::avx512::decode,
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2", feature = "avx2"))]
        Backend::Avx2 => crate::x86_64::avx2::decode,
        #[cfg(all(target_arch = "aarch64", feature = "neon"))]
        Backend::Neon => crate::aarch64::neon::decode,
        _ => scalar_decode,
    }
}

/// Inputs shorter than this take [`validate_short_auto`]'s kernel.
pub(crate) const VALIDATE_SHORT: usize = 64;

/// The UTF-8 kernel of an available `backend` for inputs shorter than
/// [`VALIDATE_SHORT`]: AVX2 where the best is AVX-512. A 64-byte vector's lookups and
/// cross-lane shifts have longer latencies than a 32-byte one's, and one or two short
/// vectors are latency-bound (16-63 B mixed text: AVX2 1.1-1.3x faster on an AMD EPYC of
/// family 25 model 17, Zen 4, which runs 512-bit operations as two 256-bit halves).
fn pick_validate_short(backend: Backend) -> ValidateFn {
    #[cfg(all(
        target_arch = "x86_64",
        target_feature = "sse2",
        feature = "avx512",
        feature = "avx2"
    ))]
    if backend == Backend::Avx512 && Backend::Avx2.is_available() {
        return crate::x86_64::avx2::validate;
    }
    pick_validate(backend)
}

fn scalar_mask(buf: &mut [u8], key: [u8; 4]) {
    scalar::mask(buf, key)
}

fn scalar_validate(buf: &[u8]) -> bool {
    core::str::from_utf8(buf).is_ok()
}

fn scalar_decode(buf: &mut [u8], rules: &Rules, max_frames: usize) -> Scanned {
    // SAFETY: the portable payload passes need no CPU feature.
    unsafe { batch::decode::<batch::Scalar>(buf, rules, max_frames) }
}

cached! {
    /// Masks `buf` at key phase 0 on the best backend.
    mask_auto, MASK, mask_init, MaskFn, pick_mask,
    fn(buf: &mut [u8], key: [u8; 4]) -> ()
}

cached! {
    /// Whether `buf` is complete, valid UTF-8, on the best backend.
    validate_auto, VALIDATE, validate_init, ValidateFn, pick_validate,
    fn(buf: &[u8]) -> bool
}

cached! {
    /// Whether `buf`, shorter than [`VALIDATE_SHORT`], is complete, valid UTF-8, on the
    /// backend that is fastest at that size.
    validate_short_auto, VALIDATE_SHORT_SLOT, validate_short_init, ValidateFn,
    pick_validate_short, fn(buf: &[u8]) -> bool
}

cached! {
    /// [`crate::frame::decode`] on the best backend.
    decode_auto, DECODE, decode_init, DecodeFn, pick_decode,
    fn(buf: &mut [u8], rules: &Rules, max_frames: usize) -> Scanned
}
