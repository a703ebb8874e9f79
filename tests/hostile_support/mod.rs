//! Shared by the hostile-input tests: raw frames as a hostile client writes them. (What
//! refusing an input held is measured by the tests' counting allocator,
//! `alloc_count::peak_during`.)
#![allow(dead_code)]

/// The masking key of every [`raw_frame`].
pub const KEY: [u8; 4] = [0x37, 0xfa, 0x21, 0x3d];

/// A masked frame as a hostile client would write it: any header byte `b0`, and an
/// announced length that may differ from the payload actually attached.
pub fn raw_frame(b0: u8, announced: u64, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![b0];
    match announced {
        0..=125 => f.push(0x80 | announced as u8),
        126..=0xffff => {
            f.push(0x80 | 126);
            f.extend_from_slice(&(announced as u16).to_be_bytes());
        }
        _ => {
            f.push(0x80 | 127);
            f.extend_from_slice(&announced.to_be_bytes());
        }
    }
    f.extend_from_slice(&KEY);
    f.extend(payload.iter().enumerate().map(|(i, b)| b ^ KEY[i & 3]));
    f
}
