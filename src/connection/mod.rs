//! connection (work in progress).
