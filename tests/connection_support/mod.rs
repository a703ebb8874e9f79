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
