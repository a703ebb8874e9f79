//! Declares the custom cfgs this crate checks for, so `unexpected_cfgs` stays useful.
//! It never looks at the build machine's CPU: what a user gets is decided by the target
//! features they compile for and by run-time detection.
fn main() {
    println!("cargo::rustc-check-cfg=cfg(rapidws_nightly)");
    println!("cargo::rerun-if-changed=build.rs");
}
