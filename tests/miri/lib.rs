//! Empty: this package exists only to run `rapidws`'s protocol-core tests under Miri with a
//! small dependency tree (see Cargo.toml).
