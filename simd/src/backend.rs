/// A kernel implementation. Every backend computes the same results as [`Backend::Scalar`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Backend {
    /// Portable word-at-a-time code; the reference every other backend is tested against.
    Scalar,
    /// x86_64 AVX2.
    Avx2,
    /// x86_64 AVX-512 (F + BW); its UTF-8 kernel also uses GFNI where the CPU has it.
    Avx512,
    /// aarch64 NEON.
    Neon,
}

/// The backend fixed at compile time, when the target features of the build make one
/// available everywhere the binary runs (`-C target-feature=+avx512bw`, aarch64's NEON).
pub(crate) const STATIC_BEST: Option<Backend> = if cfg!(all(
    target_arch = "x86_64",
    target_feature = "sse2",
    feature = "avx512",
    target_feature = "avx512f",
    target_feature = "avx512bw"
)) {
    Some(Backend::Avx512)
} else if cfg!(all(
    target_arch = "x86_64",
    target_feature = "sse2",
    feature = "avx2",
    target_feature = "avx2",
    not(feature = "avx512")
)) {
    // With `avx512` compiled in, a CPU found at run time may still beat static AVX2.
    Some(Backend::Avx2)
} else if cfg!(all(
    target_arch = "aarch64",
    feature = "neon",
    target_feature = "neon"
)) {
    Some(Backend::Neon)
} else if cfg!(not(all(
    feature = "std",
    target_arch = "x86_64",
    target_feature = "sse2",
    any(feature = "avx2", feature = "avx512")
))) {
    // Nothing to detect at run time: the portable code is all there is.
    Some(Backend::Scalar)
} else {
    None
};

impl Backend {
    /// Every backend, available on this CPU or not.
    pub const ALL: [Backend; 4] = [
        Backend::Scalar,
        Backend::Avx2,
        Backend::Avx512,
        Backend::Neon,
    ];

    /// A short lower-case name, for bench and test labels.
    pub const fn name(self) -> &'static str {
        match self {
            Backend::Scalar => "scalar",
            Backend::Avx2 => "avx2",
            Backend::Avx512 => "avx512",
            Backend::Neon => "neon",
        }
    }

    /// Whether this backend is compiled in and the CPU running this code supports it.
    pub fn is_available(self) -> bool {
        match self {
            Backend::Scalar => true,
            Backend::Avx2 => avx2_available(),
            Backend::Avx512 => avx512_available(),
            Backend::Neon => cfg!(all(
                target_arch = "aarch64",
                feature = "neon",
                target_feature = "neon"
            )),
        }
    }

    /// The fastest available backend on this CPU.
    ///
    /// Decided at compile time when the enabled target features allow it, otherwise
    /// detected on first use and cached.
    #[inline]
    pub fn best() -> Backend {
        match STATIC_BEST {
            Some(b) => b,
            None => detected(),
        }
    }
}

#[allow(clippy::needless_return)]
fn avx2_available() -> bool {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2", feature = "avx2"))]
    {
        if cfg!(target_feature = "avx2") {
            return true;
        }
        #[cfg(feature = "std")]
        return std::arch::is_x86_feature_detected!("avx2");
    }
    #[allow(unreachable_code)]
    false
}

#[allow(clippy::needless_return)]
fn avx512_available() -> bool {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2", feature = "avx512"))]
    {
        if cfg!(all(target_feature = "avx512f", target_feature = "avx512bw")) {
            return true;
        }
        #[cfg(feature = "std")]
        return std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw");
    }
    #[allow(unreachable_code)]
    false
}

/// Run-time choice, cached: 0 = not yet detected, otherwise `1 + index into ALL`.
fn detected() -> Backend {
    use core::sync::atomic::{AtomicU8, Ordering};
    static CACHE: AtomicU8 = AtomicU8::new(0);
    let c = CACHE.load(Ordering::Relaxed);
    if c != 0 {
        return Backend::ALL[usize::from(c - 1)];
    }
    let b = detect();
    // Racing first callers compute the same value; any of the stores is fine.
    let idx = Backend::ALL.iter().position(|x| *x == b).unwrap_or(0);
    CACHE.store(idx as u8 + 1, Ordering::Relaxed);
    b
}

#[cold]
fn detect() -> Backend {
    if avx512_available() {
        Backend::Avx512
    } else if avx2_available() {
        Backend::Avx2
    } else if Backend::Neon.is_available() {
        Backend::Neon
    } else {
        Backend::Scalar
    }
}
