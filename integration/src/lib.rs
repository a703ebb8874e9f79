//! No code: this package holds rapidws's tests against peer libraries, its criterion
//! benchmarks and its hyper, axum and rustls examples, apart from the root package so that
//! their dev-dependencies are not built for the root's examples (see `Cargo.toml`).

/// The migration guide (`src/docs/MIGRATION.md`, rapidws's `guide::migration`), here for
/// its examples only: they run as this package's doc tests, since several rows check
/// rapidws against tungstenite, a dependency of this package and not of rapidws. It needs
/// rapidws's default layers, as the guide itself does.
#[cfg(all(doctest, feature = "tokio", feature = "blocking", feature = "deflate"))]
#[doc = include_str!("../../src/docs/MIGRATION.md")]
pub mod migration_guide {}
