//! Frame encoding: headers into a fixed array, payload masked for clients.

use core::fmt;

use super::{MAX_HEADER_LEN, OpCode};
use crate::codec::Role;

/// An encoded frame header: up to 14 bytes in a fixed array, no allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderBuf {
    bytes: [u8; MAX_HEADER_LEN],
    len: u8,
}

impl HeaderBuf {
    /// The header bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    /// The header length, 2 to 14.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// The whole array with its length, for callers that keep the array.
    pub fn into_parts(self) -> ([u8; MAX_HEADER_LEN], u8) {
        (self.bytes, self.len)
    }
}

/// Encodes a frame header (RFC 6455 5.2) with the shortest length form.
///
/// `rsv1` marks a compressed message's first frame (RFC 7692). The caller keeps control
/// frames at or below 125 bytes; the connection checks that before calling.
#[inline]
pub fn encode_header(
    fin: bool,
    rsv1: bool,
    opcode: OpCode,
    mask: Option<[u8; 4]>,
    payload_len: u64,
) -> HeaderBuf {
    let mut bytes = [0u8; MAX_HEADER_LEN];
    bytes[0] = (u8::from(fin) << 7) | (u8::from(rsv1) << 6) | opcode.as_u8();
    let mask_bit = if mask.is_some() { 0x80 } else { 0 };
    // RFC 6455 5.2: "the minimal number of bytes MUST be used to encode the length".
    let mut len = if payload_len < 126 {
        bytes[1] = mask_bit | payload_len as u8;
        2
    } else if payload_len <= u16::MAX as u64 {
        bytes[1] = mask_bit | 126;
        bytes[2..4].copy_from_slice(&(payload_len as u16).to_be_bytes());
        4
    } else {
        bytes[1] = mask_bit | 127;
        bytes[2..10].copy_from_slice(&payload_len.to_be_bytes());
        10
    };
    if let Some(key) = mask {
        bytes[len..len + 4].copy_from_slice(&key);
        len += 4;
    }
    HeaderBuf {
        bytes,
        len: len as u8,
    }
}

/// The OS random source failed, so no masking key could be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RandomError;

impl fmt::Display for RandomError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the OS random source failed")
    }
}

impl std::error::Error for RandomError {}

/// Masking keys from the OS random source, drawn in batches so a frame costs no syscall.
///
/// RFC 6455 5.3: "The masking key MUST be derived from a strong source of entropy"
/// and be unpredictable; keys come straight from `getrandom`.
#[derive(Debug)]
pub struct MaskKeys {
    pool: Box<[u8; 256]>,
    pos: usize,
}

impl Default for MaskKeys {
    fn default() -> Self {
        Self::new()
    }
}

impl MaskKeys {
    /// An empty pool; it is filled on first use.
    pub fn new() -> Self {
        MaskKeys {
            pool: Box::new([0; 256]),
            pos: 256,
        }
    }

    /// The next masking key. Keys are drawn from the OS 256 bytes (64 keys) at a time.
    /// [`RandomError`] when the OS has no entropy to give; the connection cannot send then.
    pub fn next_key(&mut self) -> Result<[u8; 4], RandomError> {
        if self.pos + 4 > self.pool.len() {
            getrandom::fill(&mut self.pool[..]).map_err(|_| RandomError)?;
            self.pos = 0;
        }
        let mut key = [0u8; 4];
        key.copy_from_slice(&self.pool[self.pos..self.pos + 4]);
        self.pos += 4;
        Ok(key)
    }
}

/// Encodes frames for one role: clients mask with fresh keys, servers never mask.
#[derive(Debug)]
pub struct Encoder {
    role: Role,
    keys: Option<MaskKeys>,
}

impl Encoder {
    /// An encoder for `role`.
    pub fn new(role: Role) -> Self {
        Encoder { role, keys: None }
    }

    /// The role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The header for a frame of `payload_len` bytes, and the key its payload must be
    /// masked with (client role only).
    ///
    /// RFC 6455 5.1: "a client MUST mask all frames that it sends to the server" and "a
    /// server MUST NOT mask any frames that it sends to the client".
    #[inline]
    pub fn header(
        &mut self,
        fin: bool,
        rsv1: bool,
        opcode: OpCode,
        payload_len: u64,
    ) -> Result<(HeaderBuf, Option<[u8; 4]>), RandomError> {
        let mask = match self.role {
            Role::Client => Some(self.keys.get_or_insert_with(MaskKeys::new).next_key()?),
            Role::Server => None,
        };
        Ok((encode_header(fin, rsv1, opcode, mask, payload_len), mask))
    }

    /// Appends a whole frame (header and, for clients, masked payload) to `out`.
    pub fn encode_into(
        &mut self,
        fin: bool,
        rsv1: bool,
        opcode: OpCode,
        payload: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), RandomError> {
        let (header, mask) = self.header(fin, rsv1, opcode, payload.len() as u64)?;
        out.reserve(header.len() + payload.len());
        out.extend_from_slice(header.as_slice());
        let start = out.len();
        out.extend_from_slice(payload);
        if let Some(mut key) = mask {
            rapidws_simd::mask::apply(&mut out[start..], &mut key);
        }
        Ok(())
    }
}
