//! Bench inputs shared by `integration/benches/kernels.rs` and
//! `integration/benches/kernels_min.rs` (included with `#[path]`; a file in a subdirectory
//! is not a bench target of its own).

/// Chat messages as JSON with Latin, CJK and emoji text: about 22% non-ASCII bytes.
pub fn mixed_corpus(len: usize) -> String {
    const WORDS: &[&str] = &[
        "hello",
        "ok",
        "see",
        "you",
        "at",
        "the",
        "caf\u{e9}",
        "na\u{ef}ve",
        "\u{fc}ber",
        "stra\u{df}e",
        "ma\u{f1}ana",
        "\u{4f60}\u{597d}",
        "\u{4e16}\u{754c}",
        "\u{3042}\u{308a}",
        "\u{1f600}",
        "\u{1f44d}",
        "deploy",
        "tonight",
        "lunch",
        "\u{3ba}\u{3b1}\u{3bb}\u{3ac}",
        "\u{43f}\u{440}\u{438}\u{432}\u{435}\u{442}",
        "meeting",
        "the",
        "a",
        "is",
        "and",
    ];
    let mut s = String::with_capacity(len + 256);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut id = 0u32;
    while s.len() < len {
        id += 1;
        s.push_str(&format!(
            "{{\"id\":{id},\"user\":\"u{}\",\"text\":\"",
            id % 97
        ));
        for _ in 0..(4 + id % 12) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            s.push_str(WORDS[(x % WORDS.len() as u64) as usize]);
            s.push(' ');
        }
        s.push_str("\"}\n");
    }
    s
}
