//! The embedded default backend (work in progress).
