//! No code: this package holds rapidws's tests against peer libraries, its criterion
//! benchmarks and its hyper, axum and rustls examples, apart from the root package so that
//! their dev-dependencies are not built for the root's examples (see `Cargo.toml`).
