//! Frames, close frames and text, with tungstenite's names.
//!
//! rapidws's codec reads and writes the frames; [`Frame`] is here for programs that name
//! it (`Message::Frame`): a frame a program builds is sent as the message or control
//! frame it stands for.

use std::fmt;

use bytes::Bytes;

pub use super::super::utf8::Utf8Bytes;

pub mod coding {
    //! Opcodes and close codes.
    pub use super::super::coding::{CloseCode, Control, Data, OpCode};
}

use coding::{CloseCode, Control, Data, OpCode};

/// A close frame's code and reason.
#[derive(Debug, Clone, Eq, PartialEq)]
pub struct CloseFrame {
    /// The status code.
    pub code: CloseCode,
    /// The reason.
    pub reason: Utf8Bytes,
}

impl fmt::Display for CloseFrame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.reason, self.code)
    }
}

impl From<CloseFrame> for rapidws::CloseFrame {
    fn from(f: CloseFrame) -> Self {
        rapidws::CloseFrame::new(f.code, f.reason.0)
    }
}

impl From<rapidws::CloseFrame> for CloseFrame {
    fn from(f: rapidws::CloseFrame) -> Self {
        CloseFrame {
            code: f.code.into(),
            reason: f.reason.into(),
        }
    }
}

/// A frame's header.
#[derive(Debug, Clone, Eq, PartialEq)]
pub struct FrameHeader {
    /// The last frame of its message.
    pub is_final: bool,
    /// Reserved bit 1 (permessage-deflate's "compressed").
    pub rsv1: bool,
    /// Reserved bit 2.
    pub rsv2: bool,
    /// Reserved bit 3.
    pub rsv3: bool,
    /// The opcode.
    pub opcode: OpCode,
    /// The masking key (rapidws masks a client's frames itself, whatever this says).
    pub mask: Option<[u8; 4]>,
}

impl Default for FrameHeader {
    fn default() -> Self {
        FrameHeader {
            is_final: true,
            rsv1: false,
            rsv2: false,
            rsv3: false,
            opcode: OpCode::Control(Control::Close),
            mask: None,
        }
    }
}

/// A frame: its header and its (unmasked) payload.
#[derive(Debug, Clone, Eq, PartialEq)]
pub struct Frame {
    header: FrameHeader,
    payload: Bytes,
}

impl Frame {
    /// The payload's length.
    pub fn len(&self) -> usize {
        self.payload.len()
    }

    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.payload.is_empty()
    }

    /// The header.
    pub fn header(&self) -> &FrameHeader {
        &self.header
    }

    /// The header, to change.
    pub fn header_mut(&mut self) -> &mut FrameHeader {
        &mut self.header
    }

    /// The payload.
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// The payload as text.
    pub fn into_text(self) -> Result<Utf8Bytes, std::str::Utf8Error> {
        self.payload.try_into()
    }

    /// The payload.
    pub fn into_payload(self) -> Bytes {
        self.payload
    }

    /// The payload as text.
    pub fn to_text(&self) -> Result<&str, std::str::Utf8Error> {
        std::str::from_utf8(&self.payload)
    }

    /// A data frame.
    pub fn message(data: impl Into<Bytes>, opcode: OpCode, is_final: bool) -> Frame {
        Frame {
            header: FrameHeader {
                is_final,
                opcode,
                ..FrameHeader::default()
            },
            payload: data.into(),
        }
    }

    /// A pong.
    pub fn pong(data: impl Into<Bytes>) -> Frame {
        Self::message(data, OpCode::Control(Control::Pong), true)
    }

    /// A ping.
    pub fn ping(data: impl Into<Bytes>) -> Frame {
        Self::message(data, OpCode::Control(Control::Ping), true)
    }

    /// A close frame; `None` has an empty payload.
    pub fn close(msg: Option<CloseFrame>) -> Frame {
        let payload = match msg {
            Some(CloseFrame { code, reason }) => {
                let mut p = Vec::with_capacity(2 + reason.len());
                p.extend_from_slice(&u16::from(code).to_be_bytes());
                p.extend_from_slice(reason.as_bytes());
                Bytes::from(p)
            }
            None => Bytes::new(),
        };
        Self::message(payload, OpCode::Control(Control::Close), true)
    }

    /// A frame of `header` and `payload`.
    pub fn from_payload(header: FrameHeader, payload: Bytes) -> Self {
        Frame { header, payload }
    }

    /// The message this frame stands for when sent: a whole text or binary message, a
    /// ping, a pong or a close. `None` for what rapidws does not send as a raw frame
    /// (fragments, reserved opcodes and bits, a close with a 1-byte payload or bad text).
    pub(crate) fn into_message(self) -> Option<rapidws::Message> {
        let h = &self.header;
        if h.rsv1 || h.rsv2 || h.rsv3 {
            return None;
        }
        match (h.opcode, h.is_final) {
            (OpCode::Data(Data::Text), true) => rapidws::Utf8Bytes::try_from_bytes(self.payload)
                .ok()
                .map(rapidws::Message::Text),
            (OpCode::Data(Data::Binary), true) => Some(rapidws::Message::Binary(self.payload)),
            (OpCode::Control(Control::Ping), true) => Some(rapidws::Message::Ping(self.payload)),
            (OpCode::Control(Control::Pong), true) => Some(rapidws::Message::Pong(self.payload)),
            (OpCode::Control(Control::Close), true) => match self.payload.len() {
                0 => Some(super::message::close_for_rapidws(None)),
                1 => None,
                _ => {
                    let code = u16::from_be_bytes([self.payload[0], self.payload[1]]);
                    let reason =
                        rapidws::Utf8Bytes::try_from_bytes(self.payload.slice(2..)).ok()?;
                    Some(rapidws::Message::Close(Some(rapidws::CloseFrame::new(
                        code, reason,
                    ))))
                }
            },
            _ => None,
        }
    }
}

impl fmt::Display for Frame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "<FRAME> final: {} opcode: {} length: {}",
            self.header.is_final,
            self.header.opcode,
            self.payload.len()
        )
    }
}
