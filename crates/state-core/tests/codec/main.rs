//! Tests of the record codec, the state-key and audit-key layouts, the canonical fingerprints
//! and the recovery markers.
//!
//! Golden files in `tests/golden/*.hex` pin the encoded bytes of fixed records
//! (`golden_files`); the hex digests in `digest_vectors` pin the fingerprint, key, action and
//! occurrence digests. Both are documented in `docs/format.md`. Set `ACTIONSTATE_BLESS=1` to
//! rewrite the golden files after an intended format change.
//!
//! One test binary with a module per subject, so the tests build and link once.
#![allow(clippy::unwrap_used, reason = "tests")]

mod strategies;
mod support;

mod decode_errors;
mod digest_vectors;
mod documented_encodings;
mod fuzz_target;
mod golden_files;
mod markers;
mod nesting;
mod peek;
mod robustness;
mod round_trip;
