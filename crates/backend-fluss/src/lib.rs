//! # actionstate-fluss
//!
//! A [`StateLog`] on an Apache Fluss log table, through the official Rust client
//! [fluss-rs](https://docs.rs/fluss-rs) (library `fluss`).
//!
//! ```no_run
//! # async fn demo() -> Result<(), actionstate_core::Error> {
//! use actionstate_core::{KeyId, StateLog, WireRecord};
//! use actionstate_fluss::{FlussConfig, FlussLog};
//!
//! let log = FlussLog::open(FlussConfig::new("127.0.0.1:9123", "agents", "state", 8)).await?;
//! let record = WireRecord { key_id: KeyId::of(b"customer-42"), key: b"k".to_vec(), value: b"v".to_vec() };
//! let position = log.append(record).await?;
//! // Fluss reports no offset for an append: `position.offset` is a lower bound of it.
//! let end = log.end_offsets().await?[position.partition as usize];
//! let batch = log.read(position.partition, position.offset, end, 100).await?;
//! assert!(!batch.records.is_empty());
//! # Ok(()) }
//! ```
//!
//! ## The table
//!
//! [`FlussLog::open`] creates the database and the log table when they are absent. The table
//! has three `BYTES` columns — `state_key` (the record's log key), `payload` (the enveloped
//! value, tombstones included: a log table is never compacted) and `key_id` — and is
//! distributed by `key_id` into the configured number of buckets. An existing table must
//! match: another bucket count is [`FlussError::BucketsChanged`], another schema, bucket key,
//! a primary key, partitioning or a data-lake format is [`FlussError::IncompatibleTable`].
//! Open waits until every bucket has a leader ([`FlussError::TableNotReady`], retryable,
//! after [`FlussConfig::request_timeout`]); tables created by one process are created one at
//! a time (see `CREATE_LOCK` in the source for the coordinator race this avoids). The Fluss
//! 0.9.1 coordinator was also seen to register a freshly created table and never give its
//! buckets a leader (about one table in 140 on the local cluster). So when the table is one
//! that this open created and its buckets get no leader within the wait, open logs a warning,
//! drops the table and creates it again, once, and waits again; if that fails too, the
//! `TableNotReady` says the table was recreated once. A table open found (it may hold data),
//! or any table in read-only mode, is never dropped. The recreated table has a new table id,
//! but no marker can name the first one: open had not returned it.
//!
//! ## Retention
//!
//! Fluss deletes a log table's records by age: a segment whose newest record is older than the
//! table's `table.log.ttl` is removed, 7 days by default, whatever a checkpoint still needs.
//! So the log sets the TTL of a table it creates: `0 ms`, which Fluss reads as no deletion by
//! age, unless [`FlussConfig::log_ttl`] accepts a bound (then that bound, in milliseconds).
//! Open reads the TTL of an existing table and refuses one that deletes sooner than accepted,
//! naming table, property and value ([`FlussError::LogRetention`]; a table created without the
//! property, as this backend did before, has the 7-day default, and the Fluss 0.9 server
//! cannot alter the property). With a bound, a checkpoint older than it may not be
//! restorable: once the server has deleted a segment,
//! [`earliest_offsets`](actionstate_core::StateLog::earliest_offsets)
//! (the server's log start, remote storage included) is past it, a marker below fails
//! validation as [`actionstate_core::Error::DataLoss`], and a read below it fails naming bucket
//! and offset (the server reports the offset out of range) instead of skipping ahead. See the
//! [`retention`] module for the values the server accepts.
//!
//! Fluss has no operation that deletes a log table's records below an offset (no
//! `DeleteRecords`; its admin API drops whole tables or partitions), so the log cannot
//! reclaim: [`capabilities`](actionstate_core::StateLog::capabilities) has no reclaim and
//! [`reclaim`](actionstate_core::StateLog::reclaim) fails with [`actionstate_core::Error::Unsupported`]. The
//! table holds its whole history unless a TTL was accepted: its disk grows with every record
//! written (the tablet server keeps the newest segments of each bucket, two by default, on its
//! own disk and moves older ones to the remote data directory, from which reads fetch them).
//!
//! ## Buckets
//!
//! fluss-rs chooses a row's bucket itself, by hashing the bucket key, and its append result
//! names neither bucket nor offset. The [`bucket`] module reimplements that hash and picks the
//! `key_id` column value of each business key (its key id plus a placement salt) so that the
//! key's rows land in bucket [`KeyId::partition`](actionstate_core::KeyId::partition), as
//! on every other backend. A test against a real cluster proves the assignment.
//!
//! ## Offsets of appends
//!
//! An append returns `Position { partition, offset, exact: false }` where `offset` is a
//! **proven lower bound** of the record's offset, never an extra request on the put path. The
//! log keeps per bucket a floor: the largest of
//! - every end offset it listed ([`end_offsets`](actionstate_core::StateLog::end_offsets), called at open and by
//!   the store at every snapshot and rebuild): a record appended after a listing lands at or
//!   past the listed end;
//! - `p + 1` for every acknowledged append whose lower bound was `p`: a record appended after
//!   another one was acknowledged lands past it.
//!
//! An append takes the floor of its bucket *before* it is sent. With a single writer the
//! bound is the exact offset; with other writers it may lag, which only makes covering markers
//! conservative (a rebuild reads a few more records). Records read back by
//! [`read`](actionstate_core::StateLog::read) carry their exact offsets.
//!
//! ## Writing
//!
//! The writer runs with `acks=all` and idempotence on. Every append is awaited, bounded by
//! [`FlussConfig::delivery_timeout`]. fluss-rs 1.0.0 batches appends for
//! `writer_batch_timeout_ms` (default 100 ms) before sending; a value of 0 trips a debug
//! assertion in its sender task (`next_delay_ms >= 1` in `client/write/sender.rs`), after
//! which no append future ever resolves. So the batch timeout is at least 1 ms
//! ([`FlussConfig::batch_timeout`]), and by default each append is followed by a flush of the
//! writer ([`FlussConfig::flush_on_append`]), which sends the batch at once: measured on a
//! local cluster, append + flush + await has a median of about 1.5–2 ms, a 1 ms batch
//! timeout with await alone about 4 ms, the default 100 ms batch timeout about 105 ms. The
//! delivery timeout turns a stuck sender into [`FlussError::DeliveryTimeout`], never a hang.
//!
//! ## Reading
//!
//! A read subscribes a log scanner to one bucket at `from` (scanners are cached per bucket
//! and continue where the last read stopped), returns records in offset order with their
//! exact offsets, stops at `to`, and fails naming bucket and offset
//! ([`FlussError::ReadStalled`]) when no record arrives for
//! [`FlussConfig::read_stall_timeout`].
//!
//! ## Log identity
//!
//! The [`LogIdentity`] is backend `"fluss"`, id
//! `db-<database creation time>/<database>.<table>/<table id>` and the bucket count. Fluss
//! gives every table a new id when it is created, so a table dropped and created again under
//! the same name is a different log ([`actionstate_core::Error::LogChanged`]), as is one in a
//! recreated database.
//!
//! ## Error classes
//!
//! Failures become [`actionstate_core::Error::Backend`]; see [`FlussError::is_retryable`]:
//! unreachable servers, timeouts, stalls and the client's retriable API errors are retryable;
//! authentication failures, mismatched tables and invalid configuration are not.
//!
//! [`StateLog`]: actionstate_core::StateLog
//! [`LogIdentity`]: actionstate_core::LogIdentity
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod bucket;
mod client;
mod config;
mod error;
mod log;
mod open;
mod read;
mod replicas;
pub mod retention;
mod table;
mod writer;

pub use config::{DEFAULT_BUCKETS, FlussConfig, Security};
pub use error::{BACKEND, FlussError};
pub use open::FlussLog;
pub use table::{BUCKET_KEY, COLUMNS};
