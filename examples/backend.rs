//! Prints which SIMD backend this machine gets, and which backends it could run.
fn main() {
    println!("best backend: {}", rapidws::simd::Backend::best().name());
    for b in rapidws::simd::Backend::ALL {
        println!("  {:<7} available: {}", b.name(), b.is_available());
    }
}
