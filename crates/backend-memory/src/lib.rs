//! # actionstate-memory
//!
//! An in-memory [`StateLog`] (`memory` or `memory:N` logs), depending on `actionstate-core`
//! and std only: the log the `actionstate demo` rehearses on, and the one tests of code above
//! the backend contract run on.
//!
//! ```
//! # async fn demo() -> Result<(), actionstate_core::Error> {
//! use actionstate_core::{KeyId, StateLog, WireRecord};
//! use actionstate_memory::MemoryLog;
//!
//! let log = MemoryLog::new(4);
//! let record = WireRecord { key_id: KeyId::of(b"customer-42"), key: b"k".to_vec(), value: b"v".to_vec() };
//! let position = log.append(record).await?;
//! // A restarted process: a new handle on the same records.
//! let log = log.reopen();
//! let batch = log.read(position.partition, 0, log.end_offsets().await?[position.partition as usize], 100).await?;
//! assert_eq!(batch.records.len(), 1);
//! # Ok(()) }
//! ```
//!
//! ## Guarantees
//!
//! - Clones and [`reopen`](MemoryLog::reopen)ed handles share the records, like two clients
//!   of one server; the records live as long as one handle does. A log opened from a
//!   [`MemoryConfig`] (`memory:N`) is always new and empty.
//! - Offsets are dense per partition and start at 0; [`reclaim`](actionstate_core::StateLog::reclaim) and
//!   [`MemoryLog::truncate_before`] advance a partition's earliest offset and keep the offsets
//!   of what remains.
//! - Every log of a process has its own identity ([`LogIdentity`]: backend `"memory"`, id
//!   `memory-N`), and [`MemoryLog::recreate`] gives a log a new one, so markers of another log
//!   or of an earlier incarnation are refused.
//!
//! ## Tampering
//!
//! A test makes records vanish below an offset ([`MemoryLog::truncate_before`]) or a value
//! change ([`MemoryLog::corrupt`]), and counts the appends ([`MemoryLog::appends`]). The log
//! injects no failures of its own: a test wraps it (like any backend) in the test kit's
//! `Faulty`, whose faults fail appends before or after writing, reads, reclaims, or every
//! operation of an unreachable backend.
//!
//! [`StateLog`]: actionstate_core::StateLog
//! [`StateLog::reclaim`]: actionstate_core::StateLog::reclaim
//! [`LogIdentity`]: actionstate_core::LogIdentity
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod config;
mod error;
mod log;
mod open;
mod read;
mod tamper;

pub use config::MemoryConfig;
pub use error::{BACKEND, MemoryError};
pub use open::MemoryLog;
