//! Shared by the tests of the sans-IO `Connection`.
#![allow(dead_code)]

use rapidws::connection::{Connection, Error, OwnedEvent};

/// Polls every event until the connection has nothing more (bounded).
pub fn drain(conn: &mut Connection) -> Vec<Result<OwnedEvent, Error>> {
    let mut out = Vec::new();
    for _ in 0..1_000_000 {
        match conn.poll_event_owned() {
            Some(e) => out.push(e),
            None => return out,
        }
    }
    panic!("the connection never ran out of events");
}

/// A JSON-like message that compresses well and shares most of its text with the
/// other seeds'.
pub fn quote(seed: u32) -> String {
    (0..24)
        .map(|i| {
            format!(
                r#"{{"sym":"ACME","bid":{},"ask":{},"seq":{i}}},"#,
                100 + seed * 7 + i,
                101 + seed
            )
        })
        .collect()
}
