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
//! restorable: once the server has deleted a segment, [`earliest_offsets`](StateLog::earliest_offsets)
//! (the server's log start, remote storage included) is past it, a marker below fails
//! validation as [`actionstate_core::Error::DataLoss`], and a read below it fails naming bucket
//! and offset (the server reports the offset out of range) instead of skipping ahead. See the
//! [`retention`] module for the values the server accepts.
//!
//! Fluss has no operation that deletes a log table's records below an offset (no
//! `DeleteRecords`; its admin API drops whole tables or partitions), so the log cannot
//! reclaim: [`capabilities`](StateLog::capabilities) has no reclaim and
//! [`reclaim`](StateLog::reclaim) fails with [`actionstate_core::Error::Unsupported`]. The
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
//! - every end offset it listed ([`end_offsets`](StateLog::end_offsets), called at open and by
//!   the store at every snapshot and rebuild): a record appended after a listing lands at or
//!   past the listed end;
//! - `p + 1` for every acknowledged append whose lower bound was `p`: a record appended after
//!   another one was acknowledged lands past it.
//!
//! An append takes the floor of its bucket *before* it is sent. With a single writer the
//! bound is the exact offset; with other writers it may lag, which only makes covering markers
//! conservative (a rebuild reads a few more records). Records read back by
//! [`read`](StateLog::read) carry their exact offsets.
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

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod bucket;
mod config;
mod error;
mod open;
mod read;
pub mod retention;
mod url;

pub use config::{FlussConfig, Security};
pub use error::FlussError;
use error::{leader_moving, with_operation};
use open::{fetch_identity, request};
use read::Reader;

pub use url::DEFAULT_BUCKETS;

use actionstate_core::{Error as CoreError, LogIdentity, Position, ReadBatch, StateLog, WireRecord};
use fluss::client::{AppendWriter, FlussAdmin, FlussConnection};
use fluss::error::Error as ClientError;
use fluss::metadata::{TableInfo, TablePath};
use fluss::row::GenericRow;
use fluss::rpc::message::OffsetSpec;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Backend name used in [`LogIdentity`] and [`BackendError`](actionstate_core::BackendError).
pub const BACKEND: &str = "fluss";

/// The columns of the log table, in order.
pub const COLUMNS: [&str; 3] = ["state_key", "payload", "key_id"];

/// The bucket-key column.
pub const BUCKET_KEY: &str = "key_id";

/// Serializes creating tables within a process. The Fluss 0.9.1 coordinator was seen to lose
/// the creation of one of two tables created 30 ms apart (registered in ZooKeeper, never given
/// buckets, so its buckets never get a leader); creating one table at a time, each until its
/// buckets have leaders, avoids that for the tables one process creates. A table that gets no
/// leaders anyway is created again by open (see `open::should_recreate`).
static CREATE_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Longest single poll of a scanner; a read polls again until its stall timeout.
const POLL: Duration = Duration::from_millis(200);

struct Inner {
    config: FlussConfig,
    table_name: String,
    path: TablePath,
    connection: FlussConnection,
    admin: Arc<FlussAdmin>,
    info: TableInfo,
    /// `None` when read-only.
    writer: Option<AppendWriter>,
    /// Per bucket, a lower bound of the offset of the next record appended (see the crate
    /// docs).
    floors: Vec<AtomicU64>,
    /// One cached scanner per bucket, taken out while a read uses it.
    readers: Mutex<Vec<Option<Reader>>>,
}

/// A [`StateLog`] on one Fluss log table.
pub struct FlussLog {
    inner: Arc<Inner>,
    identity: LogIdentity,
}

impl fmt::Debug for FlussLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FlussLog").field("config", &self.inner.config).field("identity", &self.identity).finish()
    }
}

/// The schema of the log table.
impl FlussLog {
    /// The configuration the log was opened with.
    pub fn config(&self) -> &FlussConfig {
        &self.inner.config
    }

    /// The table path.
    pub fn table_path(&self) -> &TablePath {
        &self.inner.path
    }

    /// The fluss-rs connection the log uses (for tools that write or scan the same table).
    pub fn connection(&self) -> &FlussConnection {
        &self.inner.connection
    }

    /// The table's metadata as captured at open.
    pub fn table_info(&self) -> &TableInfo {
        &self.inner.info
    }

    /// Per bucket, the offsets of `spec` (earliest or latest). Latest offsets raise the
    /// append floors.
    async fn list_offsets(&self, operation: &'static str, spec: OffsetSpec) -> Result<Vec<u64>, FlussError> {
        let inner = &self.inner;
        let latest = matches!(spec, OffsetSpec::Latest);
        let out = listed_offsets(&inner.config, &inner.admin, &inner.path, operation, spec).await?;
        if latest {
            for (offset, floor) in out.iter().zip(&inner.floors) {
                floor.fetch_max(*offset, Ordering::AcqRel);
            }
        }
        Ok(out)
    }
}

/// Per bucket of the configured count, the offsets of `spec`, asking again while a bucket has
/// no leader, until the request timeout ([`FlussError::TableNotReady`]).
pub(crate) async fn listed_offsets(
    config: &FlussConfig,
    admin: &FlussAdmin,
    path: &TablePath,
    operation: &'static str,
    spec: OffsetSpec,
) -> Result<Vec<u64>, FlussError> {
    let buckets: Vec<i32> = (0..config.buckets).filter_map(|b| i32::try_from(b).ok()).collect();
    // Right after the table is created, or while a leader moves, a bucket has no leader for
    // a moment: ask again until the request timeout.
    let started = Instant::now();
    let listed = loop {
        match request(config, operation, admin.list_offsets(path, &buckets, spec.clone())).await {
            Err(FlussError::Client { source, .. }) if leader_moving(&source) => {
                if started.elapsed() >= config.request_timeout {
                    return Err(FlussError::TableNotReady {
                        table: config.table_name(),
                        waited: started.elapsed(),
                        detail: source.to_string(),
                    });
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => break other?,
        }
    };
    let mut out = Vec::with_capacity(buckets.len());
    for b in &buckets {
        let offset =
            listed.get(b).copied().ok_or_else(|| FlussError::Unexpected(format!("no offset listed for bucket {b}")))?;
        let offset =
            u64::try_from(offset).map_err(|_| FlussError::Unexpected(format!("offset {offset} of bucket {b}")))?;
        out.push(offset);
    }
    Ok(out)
}

impl StateLog for FlussLog {
    fn identity(&self) -> &LogIdentity {
        &self.identity
    }

    async fn current_identity(&self) -> Result<LogIdentity, CoreError> {
        fetch_identity(&self.inner.config, &self.inner.admin, &self.inner.path)
            .await
            .map_err(|e| with_operation(e, "current_identity"))
    }

    async fn append(&self, record: WireRecord) -> Result<Position, CoreError> {
        let inner = &self.inner;
        let Some(writer) = inner.writer.as_ref().filter(|_| !inner.config.read_only) else {
            return Err(CoreError::Unsupported {
                backend: format!("{BACKEND} (opened read-only)"),
                operation: "append",
            });
        };
        let fail = |e: FlussError| with_operation(e, "append");
        let buckets = inner.config.buckets;
        let bucket = record.key_id.partition(buckets);
        let column = bucket::bucket_key(&record.key_id, buckets).ok_or_else(|| {
            fail(FlussError::Unexpected(format!("no bucket key found for bucket {bucket} of {buckets}")))
        })?;
        let floor = &inner.floors[bucket as usize];
        // Taken before the record is sent: a lower bound of its offset.
        let lower = floor.load(Ordering::Acquire);
        let mut row = GenericRow::new(COLUMNS.len());
        row.set_field(0, record.key.as_slice());
        row.set_field(1, record.value.as_slice());
        row.set_field(2, &column[..]);
        let append_error = |source: ClientError| FlussError::Append {
            table: inner.table_name.clone(),
            bucket,
            source: Box::new(source),
        };
        let acked = writer.append(&row).map_err(|e| fail(append_error(e)))?;
        let timeout = inner.config.delivery_timeout;
        let started = Instant::now();
        let outcome = tokio::time::timeout(timeout, async {
            if inner.config.flush_on_append {
                // Sends the batch now. Its result covers other appends too; this record's own
                // acknowledgement below decides.
                let _ = writer.flush().await;
            }
            acked.await
        })
        .await;
        match outcome {
            Ok(Ok(())) => {
                floor.fetch_max(lower + 1, Ordering::AcqRel);
                Ok(Position { partition: bucket, offset: lower, exact: false })
            }
            Ok(Err(e)) => Err(fail(append_error(e))),
            Err(_) => Err(fail(FlussError::DeliveryTimeout {
                table: inner.table_name.clone(),
                bucket,
                waited: started.elapsed(),
            })),
        }
    }

    async fn earliest_offsets(&self) -> Result<Vec<u64>, CoreError> {
        self.list_offsets("earliest_offsets", OffsetSpec::Earliest)
            .await
            .map_err(|e| with_operation(e, "earliest_offsets"))
    }

    async fn end_offsets(&self) -> Result<Vec<u64>, CoreError> {
        self.list_offsets("end_offsets", OffsetSpec::Latest).await.map_err(|e| with_operation(e, "end_offsets"))
    }

    async fn read(&self, partition: u32, from: u64, to: u64, max: usize) -> Result<ReadBatch, CoreError> {
        if partition >= self.identity.partitions {
            return Err(with_operation(
                FlussError::NoSuchBucket {
                    table: self.inner.table_name.clone(),
                    bucket: partition,
                    buckets: self.identity.partitions,
                },
                "read",
            ));
        }
        if from >= to || max == 0 {
            return Ok(ReadBatch { records: Vec::new(), next: from });
        }
        self.read_inner(partition, from, to, max).await.map_err(|e| with_operation(e, "read"))
    }
}
