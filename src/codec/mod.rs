//! codec (work in progress).
