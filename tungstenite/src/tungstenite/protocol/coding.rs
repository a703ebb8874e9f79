//! Opcodes and close codes, with tungstenite's names.

use std::fmt;

/// A frame's opcode.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum OpCode {
    /// A data frame.
    Data(Data),
    /// A control frame.
    Control(Control),
}

/// Data opcodes.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Data {
    /// 0x0: continues a fragmented message.
    Continue,
    /// 0x1: text.
    Text,
    /// 0x2: binary.
    Binary,
    /// 0x3-0x7: reserved.
    Reserved(u8),
}

/// Control opcodes.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Control {
    /// 0x8: close.
    Close,
    /// 0x9: ping.
    Ping,
    /// 0xa: pong.
    Pong,
    /// 0xb-0xf: reserved.
    Reserved(u8),
}

impl fmt::Display for Data {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Data::Continue => f.write_str("CONTINUE"),
            Data::Text => f.write_str("TEXT"),
            Data::Binary => f.write_str("BINARY"),
            Data::Reserved(x) => write!(f, "RESERVED_DATA_{x}"),
        }
    }
}

impl fmt::Display for Control {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Control::Close => f.write_str("CLOSE"),
            Control::Ping => f.write_str("PING"),
            Control::Pong => f.write_str("PONG"),
            Control::Reserved(x) => write!(f, "RESERVED_CONTROL_{x}"),
        }
    }
}

impl fmt::Display for OpCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpCode::Data(d) => d.fmt(f),
            OpCode::Control(c) => c.fmt(f),
        }
    }
}

impl From<OpCode> for u8 {
    fn from(code: OpCode) -> u8 {
        match code {
            OpCode::Data(Data::Continue) => 0,
            OpCode::Data(Data::Text) => 1,
            OpCode::Data(Data::Binary) => 2,
            OpCode::Data(Data::Reserved(n)) | OpCode::Control(Control::Reserved(n)) => n,
            OpCode::Control(Control::Close) => 8,
            OpCode::Control(Control::Ping) => 9,
            OpCode::Control(Control::Pong) => 10,
        }
    }
}

impl From<u8> for OpCode {
    /// The opcode of the low four bits of `byte` (tungstenite panics above 15; here the
    /// high bits are ignored).
    fn from(byte: u8) -> OpCode {
        match byte & 0x0f {
            0 => OpCode::Data(Data::Continue),
            1 => OpCode::Data(Data::Text),
            2 => OpCode::Data(Data::Binary),
            n @ 3..=7 => OpCode::Data(Data::Reserved(n)),
            8 => OpCode::Control(Control::Close),
            9 => OpCode::Control(Control::Ping),
            10 => OpCode::Control(Control::Pong),
            n => OpCode::Control(Control::Reserved(n)),
        }
    }
}

/// A close frame's status code (RFC 6455 7.4), with tungstenite's names; `u16::from` and
/// `CloseCode::from(u16)` convert.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum CloseCode {
    /// 1000: normal closure.
    Normal,
    /// 1001: going away.
    Away,
    /// 1002: protocol error.
    Protocol,
    /// 1003: a kind of data that cannot be accepted.
    Unsupported,
    /// 1005: no status code (never sent).
    Status,
    /// 1006: closed without a close frame (never sent).
    Abnormal,
    /// 1007: data inconsistent with its type (text that is not UTF-8).
    Invalid,
    /// 1008: policy violation.
    Policy,
    /// 1009: message too big.
    Size,
    /// 1010: a required extension was not negotiated.
    Extension,
    /// 1011: unexpected condition on the server.
    Error,
    /// 1012: service restart.
    Restart,
    /// 1013: try again later.
    Again,
    /// 1015: TLS handshake failure (never sent).
    #[doc(hidden)]
    Tls,
    /// 1016-2999: reserved.
    #[doc(hidden)]
    Reserved(u16),
    /// 3000-3999: registered with IANA.
    #[doc(hidden)]
    Iana(u16),
    /// 4000-4999: private use.
    #[doc(hidden)]
    Library(u16),
    /// Anything else: not a valid close code.
    #[doc(hidden)]
    Bad(u16),
}

impl CloseCode {
    /// Whether this code may be sent in a close frame.
    pub fn is_allowed(self) -> bool {
        !matches!(
            self,
            CloseCode::Bad(_)
                | CloseCode::Reserved(_)
                | CloseCode::Status
                | CloseCode::Abnormal
                | CloseCode::Tls
        )
    }
}

impl fmt::Display for CloseCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", u16::from(*self))
    }
}

impl From<CloseCode> for u16 {
    fn from(code: CloseCode) -> u16 {
        match code {
            CloseCode::Normal => 1000,
            CloseCode::Away => 1001,
            CloseCode::Protocol => 1002,
            CloseCode::Unsupported => 1003,
            CloseCode::Status => 1005,
            CloseCode::Abnormal => 1006,
            CloseCode::Invalid => 1007,
            CloseCode::Policy => 1008,
            CloseCode::Size => 1009,
            CloseCode::Extension => 1010,
            CloseCode::Error => 1011,
            CloseCode::Restart => 1012,
            CloseCode::Again => 1013,
            CloseCode::Tls => 1015,
            CloseCode::Reserved(n)
            | CloseCode::Iana(n)
            | CloseCode::Library(n)
            | CloseCode::Bad(n) => n,
        }
    }
}

impl From<&CloseCode> for u16 {
    fn from(code: &CloseCode) -> u16 {
        (*code).into()
    }
}

impl From<u16> for CloseCode {
    fn from(code: u16) -> CloseCode {
        match code {
            1000 => CloseCode::Normal,
            1001 => CloseCode::Away,
            1002 => CloseCode::Protocol,
            1003 => CloseCode::Unsupported,
            1005 => CloseCode::Status,
            1006 => CloseCode::Abnormal,
            1007 => CloseCode::Invalid,
            1008 => CloseCode::Policy,
            1009 => CloseCode::Size,
            1010 => CloseCode::Extension,
            1011 => CloseCode::Error,
            1012 => CloseCode::Restart,
            1013 => CloseCode::Again,
            1015 => CloseCode::Tls,
            1016..=2999 => CloseCode::Reserved(code),
            3000..=3999 => CloseCode::Iana(code),
            4000..=4999 => CloseCode::Library(code),
            _ => CloseCode::Bad(code),
        }
    }
}

impl From<CloseCode> for rapidws::CloseCode {
    fn from(code: CloseCode) -> Self {
        rapidws::CloseCode(code.into())
    }
}

impl From<rapidws::CloseCode> for CloseCode {
    fn from(code: rapidws::CloseCode) -> Self {
        code.0.into()
    }
}
