/// A kernel implementation. Every backend computes the same results as [`Backend::Scalar`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Backend {
    /// Portable word-at-a-time code; the reference every other backend is tested against.
    Scalar,
    /// x86_64 AVX2.
    Avx2,
    /// x86_64 AVX-512 (F + BW).
    Avx512,
    /// aarch64 NEON.
    Neon,
}

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
            _ => false,
        }
    }

    /// The fastest available backend on this CPU.
    pub fn best() -> Backend {
        Backend::Scalar
    }
}
