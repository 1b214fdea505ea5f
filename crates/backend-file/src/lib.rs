//! # actionstate-file
//!
//! The embedded default [`StateLog`] of actionstate: a crash-safe, partitioned log in a local
//! data directory, built on the [redb](https://docs.rs/redb) embedded database (chosen over
//! fjall by measurement; see `BENCHMARKS.md`, "Embedded engine: redb vs fjall").
//!
//! ```no_run
//! # async fn demo() -> Result<(), actionstate_core::Error> {
//! use actionstate_core::{KeyId, StateLog, WireRecord};
//! use actionstate_file::{FileConfig, FileLog};
//!
//! let log = FileLog::open(FileConfig::new("/var/lib/agent/state", 8))?;
//! let record = WireRecord { key_id: KeyId::of(b"customer-42"), key: b"k".to_vec(), value: b"v".to_vec() };
//! let position = log.append(record).await?;
//! let batch = log.read(position.partition, 0, log.end_offsets().await?[position.partition as usize], 100).await?;
//! assert_eq!(batch.records.len(), 1);
//! # Ok(()) }
//! ```
//!
//! ## Guarantees
//!
//! - [`append`](actionstate_core::StateLog::append) returns once the record is committed and `fdatasync`ed
//!   (redb `Durability::Immediate`). Appends that arrive while another commit is in progress
//!   are committed together in the next transaction (group commit), so concurrent callers
//!   share one sync instead of queueing for one each.
//! - Offsets are dense per partition and start at 0. [`FileLog::truncate_before`] deletes a
//!   partition's oldest records and advances its earliest offset; nothing else removes data.
//! - The partition count is fixed when the directory is created. Opening it with another count
//!   fails with [`FileError::PartitionsChanged`] rather than re-partitioning: the records of a
//!   key would otherwise be split across partitions and lose their order.
//! - A directory's identity ([`LogIdentity`]: backend `"file"`, a random UUID written at
//!   creation, the partition count) is read from disk, so a deleted and recreated directory is
//!   a different log and markers of the old one are refused.
//! - Blocking disk work runs on tokio's blocking pool when called inside a tokio runtime, and
//!   inline otherwise. One exception: on a multi-threaded runtime, an append that finds no
//!   commit running commits on its own thread inside `block_in_place` (the hop to the pool and
//!   back was 7% of a put), and hands what queued behind it to the pool.
//!
//! ## On-disk layout (format version 1)
//!
//! One redb database file, [`DB_FILE_NAME`], in the data directory, with three tables (a new
//! directory's file is created as `actionstate.redb.<uuid>.new` and linked into place once its
//! meta record is written; a leftover `*.new` file is from a creation that was killed, and
//! can be deleted):
//!
//! | table | key | value |
//! |---|---|---|
//! | `meta` | `&str` | `&[u8]`: `"format"` u32 LE (= 1), `"id"` UUID text, `"partitions"` u32 LE |
//! | `records` | `(u32, u64)` partition, offset | `(&[u8], &[u8])` log key, enveloped value |
//! | `earliest` | `u32` partition | `u64` earliest retained offset, present once truncated |
//!
//! The value bytes are stored as given; the backend never decodes the envelope.
//!
//! ## Damaged, foreign and read-only files
//!
//! - An existing file is never initialized or replaced: only a missing database is created.
//!   An empty file, a file that is not a redb database, a redb database without this crate's
//!   tables, a truncated or otherwise damaged file are each [`FileError::Corrupt`], naming the
//!   file.
//! - redb trusts the pages it reads, and may panic on a damaged one. Every engine call runs
//!   under [`std::panic::catch_unwind`]: such a panic becomes [`FileError::Corrupt`], and the
//!   handle is then broken (every later call fails with the same error). While an engine call
//!   runs, the panic hook this crate installs on first use keeps a caught panic off stderr;
//!   any other panic goes to the hook installed before it.
//! - A read-only open ([`FileConfig::read_only`]) uses redb's read-only database: the file is
//!   opened for reading only, nothing is written or created, and read permission is enough.
//!   Its checksum pass ([`FileConfig::verify_on_open`]) runs redb's integrity check with every
//!   write it makes kept in memory. A file its writer did not close (it crashed) is recovered
//!   the same way, in memory, and read as recovered: the file is never written, so `inspect`,
//!   `waits` and the plan of `resolve` work on a store whose owner was killed.
//!
//! [`FileError::find`] finds the [`FileError`] behind an [`Error`] this crate returned, for a
//! caller that tells its user what to do about it.
//!
//! [`StateLog`]: actionstate_core::StateLog
//! [`LogIdentity`]: actionstate_core::LogIdentity
//! [`Error`]: actionstate_core::Error
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod config;
mod db;
mod error;
mod guard;
mod log;
mod open;
mod overlay;
mod read;
mod write;

/// Partitions of a data directory created from a URL without `partitions=N`.
pub use actionstate_core::DEFAULT_PARTITIONS;
pub use config::{DEFAULT_CACHE_BYTES, FileConfig};
pub use db::{DB_FILE_NAME, FORMAT_VERSION};
pub use error::{BACKEND, FileError};
pub use log::FileLog;
