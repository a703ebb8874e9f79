//! handshake (work in progress).
