//! deflate (work in progress).
