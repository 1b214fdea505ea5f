//! # actionstate-examples
//!
//! Programs written as a user of the crates writes them, run by this crate's tests:
//!
//! - `using-it` (`src/bin/using_it.rs`), the README's "Using it": a service that restores
//!   itself from its log, answers its inputs, checkpoints with its input position, and on a
//!   restart reuses the answers it gave after that checkpoint. The README quotes it verbatim.
#![forbid(unsafe_code)]
