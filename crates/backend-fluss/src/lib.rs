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
//! a time (see `CREATE_LOCK` in the source for the coordinator race this avoids).
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
pub mod retention;
mod url;

pub use url::DEFAULT_BUCKETS;

use actionstate_core::{
    BackendError, Error as CoreError, LogIdentity, Position, ReadBatch, ReadRecord, StateLog, WireRecord,
};
use fluss::client::{AppendWriter, FlussAdmin, FlussConnection, FlussTable, LogScanner};
use fluss::config::Config;
use fluss::error::Error as ClientError;
use fluss::metadata::{DataType, DataTypes, Schema, TableDescriptor, TableInfo, TablePath};
use fluss::row::{DataGetters, GenericRow};
use fluss::rpc::FlussError as ApiError;
use fluss::rpc::message::OffsetSpec;
use retention::RetentionProblem;
use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Backend name used in [`LogIdentity`] and [`BackendError`].
pub const BACKEND: &str = "fluss";

/// The columns of the log table, in order.
pub const COLUMNS: [&str; 3] = ["state_key", "payload", "key_id"];

/// The bucket-key column.
pub const BUCKET_KEY: &str = "key_id";

/// Serializes creating tables within a process. The Fluss 0.9.1 coordinator was seen to lose
/// the creation of one of two tables created 30 ms apart (registered in ZooKeeper, never given
/// buckets, so its buckets never get a leader); creating one table at a time, each until its
/// buckets have leaders, avoids that for the tables one process creates.
static CREATE_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Longest single poll of a scanner; a read polls again until its stall timeout.
const POLL: Duration = Duration::from_millis(200);

/// SASL/PLAIN credentials. `Debug` prints the password as `***`.
#[derive(Clone, PartialEq, Eq)]
pub struct Security {
    /// The user name.
    pub username: String,
    /// The password; never printed.
    pub password: String,
}

impl Security {
    /// SASL/PLAIN with these credentials.
    pub fn sasl_plain(username: impl Into<String>, password: impl Into<String>) -> Self {
        Security { username: username.into(), password: password.into() }
    }
}

impl fmt::Debug for Security {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Security")
            .field("mechanism", &"PLAIN")
            .field("username", &self.username)
            .field("password", &"***")
            .finish()
    }
}

/// Where the log lives and how the client reaches it.
#[derive(Clone, PartialEq, Eq)]
pub struct FlussConfig {
    /// Bootstrap servers: comma-separated `host:port` list of coordinator or tablet servers.
    pub bootstrap: String,
    /// The database holding the table.
    pub database: String,
    /// The log table.
    pub table: String,
    /// Bucket count of the table; used when creating it and checked when it exists.
    pub buckets: u32,
    /// SASL/PLAIN credentials, if the listener needs them.
    pub security: Option<Security>,
    /// How long an append may wait for its acknowledgement.
    pub delivery_timeout: Duration,
    /// How long a read may go without receiving a record before it fails.
    pub read_stall_timeout: Duration,
    /// Timeout of connecting and of every metadata, admin and offset request.
    pub request_timeout: Duration,
    /// The writer's batch timeout (`writer_batch_timeout_ms`); values below 1 ms are raised to
    /// 1 ms, since 0 stops fluss-rs 1.0.0's sender task.
    pub batch_timeout: Duration,
    /// Whether each append flushes the writer before awaiting its acknowledgement, instead of
    /// waiting out the batch timeout.
    pub flush_on_append: bool,
    /// How old a record may get before the server may delete it by age, or `None` (the
    /// default) for never: a table the log creates gets `table.log.ttl` set to this (`0 ms`
    /// for `None`, which Fluss reads as no deletion by age), and an existing table whose TTL
    /// is shorter is refused ([`FlussError::LogRetention`]). With a bound, a checkpoint older
    /// than it may no longer be restorable (a rebuild from it fails as data loss); see the
    /// [`retention`] module.
    pub log_ttl: Option<Duration>,
    /// Opens an existing table as it is, for tools that only read (`actionstate inspect`):
    /// neither the database nor the table is created, the bucket count is taken as found
    /// (`buckets` is not checked), the TTL is not checked, and
    /// [`append`](StateLog::append) fails with [`CoreError::Unsupported`]. Default `false`.
    pub read_only: bool,
}

impl FlussConfig {
    /// A configuration with default timeouts (30 s delivery, 30 s read stall, 30 s requests),
    /// a 1 ms batch timeout, a flush after every append, no authentication and no deletion
    /// by age (`log_ttl: None`).
    pub fn new(
        bootstrap: impl Into<String>,
        database: impl Into<String>,
        table: impl Into<String>,
        buckets: u32,
    ) -> Self {
        FlussConfig {
            bootstrap: bootstrap.into(),
            database: database.into(),
            table: table.into(),
            buckets,
            security: None,
            delivery_timeout: Duration::from_secs(30),
            read_stall_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(30),
            batch_timeout: Duration::from_millis(1),
            flush_on_append: true,
            log_ttl: None,
            read_only: false,
        }
    }

    /// `database.table`.
    pub fn table_name(&self) -> String {
        format!("{}.{}", self.database, self.table)
    }

    /// The fluss-rs client settings.
    fn client_config(&self) -> Config {
        let mut c = Config {
            bootstrap_servers: self.bootstrap.clone(),
            writer_acks: "all".to_owned(),
            writer_enable_idempotence: true,
            writer_batch_timeout_ms: i64::try_from(self.batch_timeout.as_millis()).unwrap_or(i64::MAX).max(1),
            connect_timeout_ms: u64::try_from(self.request_timeout.as_millis()).unwrap_or(u64::MAX).max(1),
            ..Config::default()
        };
        if let Some(s) = &self.security {
            c.security_protocol = "sasl".to_owned();
            c.security_sasl_mechanism = "PLAIN".to_owned();
            c.security_sasl_username = s.username.clone();
            c.security_sasl_password = s.password.clone();
        }
        c
    }
}

impl fmt::Debug for FlussConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FlussConfig")
            .field("bootstrap", &self.bootstrap)
            .field("database", &self.database)
            .field("table", &self.table)
            .field("buckets", &self.buckets)
            .field("security", &self.security)
            .field("delivery_timeout", &self.delivery_timeout)
            .field("read_stall_timeout", &self.read_stall_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("batch_timeout", &self.batch_timeout)
            .field("flush_on_append", &self.flush_on_append)
            .field("log_ttl", &self.log_ttl)
            .field("read_only", &self.read_only)
            .finish()
    }
}

/// Failures of the Fluss backend.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FlussError {
    /// The cluster could not be reached or the connection failed.
    #[error("connecting to the Fluss cluster at {bootstrap}: {source}")]
    Connect {
        /// The bootstrap servers.
        bootstrap: String,
        /// The client error.
        source: Box<ClientError>,
    },
    /// The cluster rejected the SASL credentials.
    #[error("{operation} on the Fluss cluster at {bootstrap}: authentication failed: {detail}")]
    Authentication {
        /// What was being done.
        operation: &'static str,
        /// The bootstrap servers.
        bootstrap: String,
        /// The client's description.
        detail: String,
    },
    /// A request did not complete in time.
    #[error("{operation} on {table} at {bootstrap}: no answer after {waited:?}")]
    Timeout {
        /// What was being done.
        operation: &'static str,
        /// `database.table`.
        table: String,
        /// The bootstrap servers.
        bootstrap: String,
        /// How long was waited.
        waited: Duration,
    },
    /// A client request failed.
    #[error("{operation} on {table}: {source}")]
    Client {
        /// What was being done.
        operation: &'static str,
        /// `database.table`.
        table: String,
        /// The client error.
        source: Box<ClientError>,
    },
    /// An append was not acknowledged within the delivery timeout.
    #[error("append to {table} bucket {bucket} not acknowledged after {waited:?}")]
    DeliveryTimeout {
        /// `database.table`.
        table: String,
        /// The bucket.
        bucket: u32,
        /// How long was waited.
        waited: Duration,
    },
    /// An append failed.
    #[error("append to {table} bucket {bucket}: {source}")]
    Append {
        /// `database.table`.
        table: String,
        /// The bucket.
        bucket: u32,
        /// The client error.
        source: Box<ClientError>,
    },
    /// The table does not exist (any more).
    #[error("table {table} does not exist")]
    TableMissing {
        /// `database.table`.
        table: String,
    },
    /// The table's buckets had no leader within the request timeout (right after it was
    /// created, or while its tablet servers are down).
    #[error("table {table} not ready after {waited:?}: {detail}")]
    TableNotReady {
        /// `database.table`.
        table: String,
        /// How long was waited.
        waited: Duration,
        /// The last error seen.
        detail: String,
    },
    /// The table exists with another bucket count than configured.
    #[error("table {table} has {found} buckets, configured {configured}")]
    BucketsChanged {
        /// `database.table`.
        table: String,
        /// Buckets configured.
        configured: u32,
        /// Buckets the table has.
        found: u32,
    },
    /// The table exists but is not a log table of this backend's layout.
    #[error("table {table} is not an actionstate log table: {detail}")]
    IncompatibleTable {
        /// `database.table`.
        table: String,
        /// What differs.
        detail: String,
    },
    /// The table deletes records by age sooner than [`FlussConfig::log_ttl`] accepts (Fluss's
    /// default TTL of 7 days applies to a table created without `table.log.ttl`, as earlier
    /// versions of this backend created them), or its TTL cannot be read.
    #[error(
        "table {table} has {property} = {value}: {problem}. To keep every record, use a new \
         table (this backend creates it with {property} = '0 ms', no deletion by age; the Fluss \
         0.9 server cannot alter {property} of an existing table); to accept deletion by age, \
         set FlussConfig::log_ttl to the table's TTL or less (a checkpoint older than that may \
         then fail to restore as data loss)"
    )]
    LogRetention {
        /// `database.table`.
        table: String,
        /// The table property, [`retention::LOG_TTL_PROPERTY`].
        property: &'static str,
        /// Its value as the table holds it (`not set (Fluss's default: 7 d)` when absent).
        value: String,
        /// What is wrong with it.
        problem: RetentionProblem,
    },
    /// A read received no record for the stall timeout.
    #[error("read of {table} bucket {bucket} stalled at offset {offset} (target {to}) for {waited:?}")]
    ReadStalled {
        /// `database.table`.
        table: String,
        /// The bucket.
        bucket: u32,
        /// The offset the read waited for.
        offset: u64,
        /// The end of the requested range.
        to: u64,
        /// How long no record arrived.
        waited: Duration,
    },
    /// A read failed at a known position.
    #[error("read of {table} bucket {bucket} at offset {offset}: {source}")]
    Read {
        /// `database.table`.
        table: String,
        /// The bucket.
        bucket: u32,
        /// The offset being read.
        offset: u64,
        /// The client error.
        source: Box<ClientError>,
    },
    /// A bucket outside `0..buckets` was asked for.
    #[error("bucket {bucket} out of range: table {table} has {buckets} buckets")]
    NoSuchBucket {
        /// `database.table`.
        table: String,
        /// Bucket asked for.
        bucket: u32,
        /// Buckets of the table.
        buckets: u32,
    },
    /// The configuration cannot work.
    #[error("invalid Fluss configuration: {0}")]
    InvalidConfig(String),
    /// The cluster reported a value that cannot be an offset or a bucket count.
    #[error("unexpected value from the Fluss cluster: {0}")]
    Unexpected(String),
}

impl FlussError {
    /// Whether retrying the operation may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            FlussError::Connect { source, .. }
            | FlussError::Client { source, .. }
            | FlussError::Append { source, .. }
            | FlussError::Read { source, .. } => source.is_retriable(),
            FlussError::Timeout { .. }
            | FlussError::TableNotReady { .. }
            | FlussError::DeliveryTimeout { .. }
            | FlussError::ReadStalled { .. } => true,
            FlussError::Authentication { .. }
            | FlussError::TableMissing { .. }
            | FlussError::BucketsChanged { .. }
            | FlussError::IncompatibleTable { .. }
            | FlussError::LogRetention { .. }
            | FlussError::NoSuchBucket { .. }
            | FlussError::InvalidConfig(_)
            | FlussError::Unexpected(_) => false,
        }
    }
}

fn with_operation(e: FlussError, operation: &'static str) -> CoreError {
    if e.is_retryable() {
        CoreError::Backend(BackendError::retryable(BACKEND, operation, e))
    } else {
        CoreError::Backend(BackendError::terminal(BACKEND, operation, e))
    }
}

fn is_authentication(e: &ClientError) -> bool {
    matches!(e.api_error(), Some(ApiError::AuthenticateException | ApiError::RetriableAuthenticateException))
}

/// Whether a failed request hit a bucket without a (known) leader.
fn leader_moving(e: &ClientError) -> bool {
    match e.api_error() {
        Some(ApiError::NotLeaderOrFollower | ApiError::LeaderNotAvailableException) => true,
        Some(_) => false,
        None => matches!(e, ClientError::UnexpectedError { message, .. } if message.contains("No leader found")),
    }
}

/// A cached scanner of one bucket, the offset it continues at, and records it polled past
/// the end of the last read.
struct Reader {
    scanner: LogScanner,
    next: u64,
    pending: VecDeque<ReadRecord>,
}

struct Inner {
    config: FlussConfig,
    table_name: String,
    path: TablePath,
    connection: FlussConnection,
    admin: Arc<FlussAdmin>,
    info: TableInfo,
    writer: AppendWriter,
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
fn log_schema() -> Result<Schema, ClientError> {
    Schema::builder()
        .column(COLUMNS[0], DataTypes::bytes())
        .column(COLUMNS[1], DataTypes::bytes())
        .column(COLUMNS[2], DataTypes::bytes())
        .build()
}

/// Runs a client request bounded by the request timeout.
async fn request<T>(
    config: &FlussConfig,
    operation: &'static str,
    f: impl Future<Output = Result<T, ClientError>>,
) -> Result<T, FlussError> {
    match tokio::time::timeout(config.request_timeout, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) if is_authentication(&e) => {
            Err(FlussError::Authentication { operation, bootstrap: config.bootstrap.clone(), detail: e.to_string() })
        }
        Ok(Err(e)) => Err(FlussError::Client { operation, table: config.table_name(), source: Box::new(e) }),
        Err(_) => Err(FlussError::Timeout {
            operation,
            table: config.table_name(),
            bootstrap: config.bootstrap.clone(),
            waited: config.request_timeout,
        }),
    }
}

/// Checks an existing table against the configuration and the log layout.
fn check_table(config: &FlussConfig, info: &TableInfo) -> Result<(), FlussError> {
    let table = config.table_name();
    let incompatible = |detail: String| FlussError::IncompatibleTable { table: table.clone(), detail };
    let columns: Vec<(&str, &DataType)> =
        info.get_row_type().fields().iter().map(|f| (f.name(), f.data_type())).collect();
    let names: Vec<&str> = columns.iter().map(|(n, _)| *n).collect();
    if names != COLUMNS {
        return Err(incompatible(format!("columns {names:?}, expected {COLUMNS:?}")));
    }
    if let Some((name, ty)) = columns.iter().find(|(_, ty)| !matches!(ty, DataType::Bytes(_))) {
        return Err(incompatible(format!("column {name} has type {ty:?}, expected BYTES")));
    }
    if info.has_primary_key() {
        return Err(incompatible("it has a primary key (a log table has none)".into()));
    }
    if info.is_partitioned() {
        return Err(incompatible("it is partitioned".into()));
    }
    if info.get_bucket_keys() != [BUCKET_KEY] {
        return Err(incompatible(format!("bucket key {:?}, expected [\"{BUCKET_KEY}\"]", info.get_bucket_keys())));
    }
    match info.get_table_config().get_datalake_format() {
        Ok(None) => {}
        Ok(Some(format)) => {
            return Err(incompatible(format!("data-lake format {format:?} changes the bucket function")));
        }
        Err(e) => return Err(incompatible(format!("unreadable data-lake format: {e}"))),
    }
    let found = u32::try_from(info.get_num_buckets())
        .map_err(|_| FlussError::Unexpected(format!("bucket count {}", info.get_num_buckets())))?;
    if config.read_only {
        // Reads whatever the table keeps, with the buckets it has.
        return Ok(());
    }
    if found != config.buckets {
        return Err(FlussError::BucketsChanged { table, configured: config.buckets, found });
    }
    check_retention(config, info)
}

/// Refuses a table that deletes records by age sooner than the configuration accepts.
fn check_retention(config: &FlussConfig, info: &TableInfo) -> Result<(), FlussError> {
    let property = retention::LOG_TTL_PROPERTY;
    let value = info.get_properties().get(property).map(String::as_str);
    retention::check_log_ttl(value, config.log_ttl).map_err(|problem| FlussError::LogRetention {
        table: config.table_name(),
        property,
        value: value.map_or_else(|| "not set (Fluss's default: 7 d)".to_owned(), |v| format!("'{v}'")),
        problem,
    })
}

fn check_name(what: &str, name: &str) -> Result<(), FlussError> {
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        return Err(FlussError::InvalidConfig(format!(
            "{what} name {name:?} must be non-empty ASCII letters, digits, `_` and `-`"
        )));
    }
    Ok(())
}

impl FlussLog {
    /// Opens the log: connects, creates the database and the table if absent, checks an
    /// existing table, captures the log's identity and lists the end offsets.
    pub async fn open(config: FlussConfig) -> Result<FlussLog, CoreError> {
        // On the heap: the opening future holds about 8 KiB of client futures, which would
        // otherwise sit inline in every caller's future.
        Box::pin(Self::open_inner(config)).await.map_err(|e| with_operation(e, "open"))
    }

    async fn open_inner(mut config: FlussConfig) -> Result<FlussLog, FlussError> {
        check_name("database", &config.database)?;
        check_name("table", &config.table)?;
        if config.buckets == 0 || i32::try_from(config.buckets).is_err() {
            return Err(FlussError::InvalidConfig(format!("bucket count {} out of range", config.buckets)));
        }
        let log_ttl = retention::log_ttl_value(config.log_ttl).map_err(FlussError::InvalidConfig)?;
        let connection =
            match tokio::time::timeout(config.request_timeout, FlussConnection::new(config.client_config())).await {
                Ok(Ok(c)) => c,
                Ok(Err(e)) if is_authentication(&e) => {
                    return Err(FlussError::Authentication {
                        operation: "connect",
                        bootstrap: config.bootstrap.clone(),
                        detail: e.to_string(),
                    });
                }
                Ok(Err(source)) => {
                    return Err(FlussError::Connect { bootstrap: config.bootstrap.clone(), source: Box::new(source) });
                }
                Err(_) => {
                    return Err(FlussError::Timeout {
                        operation: "connect",
                        table: config.table_name(),
                        bootstrap: config.bootstrap.clone(),
                        waited: config.request_timeout,
                    });
                }
            };
        let admin = connection.get_admin().map_err(|source| FlussError::Client {
            operation: "creating the admin client",
            table: config.table_name(),
            source: Box::new(source),
        })?;
        if !config.read_only {
            request(&config, "creating the database", admin.create_database(&config.database, None, true)).await?;
        }
        let path = TablePath::new(config.database.clone(), config.table.clone());
        let exists = request(&config, "looking up the table", admin.table_exists(&path)).await?;
        if !exists && config.read_only {
            return Err(FlussError::TableMissing { table: config.table_name() });
        }
        // Held from creating a table until its buckets have leaders (the end-offset listing at
        // the end of open): see `CREATE_LOCK`.
        let _creating = if exists { None } else { Some(CREATE_LOCK.lock().await) };
        if !exists {
            let schema = log_schema().map_err(|source| FlussError::Client {
                operation: "building the schema",
                table: config.table_name(),
                source: Box::new(source),
            })?;
            let buckets = i32::try_from(config.buckets).unwrap_or(i32::MAX);
            let descriptor = TableDescriptor::builder()
                .schema(schema)
                .distributed_by(Some(buckets), vec![BUCKET_KEY.to_owned()])
                .property(retention::LOG_TTL_PROPERTY, log_ttl)
                .build()
                .map_err(|source| FlussError::Client {
                    operation: "building the table descriptor",
                    table: config.table_name(),
                    source: Box::new(source),
                })?;
            // Created concurrently by another process: fine, checked below like any table.
            request(&config, "creating the table", admin.create_table(&path, &descriptor, true)).await?;
        }
        let identity = fetch_identity(&config, &admin, &path).await?;
        let table = request(&config, "fetching the table metadata", connection.get_table(&path)).await?;
        let info = table.get_table_info().clone();
        check_table(&config, &info)?;
        if config.read_only {
            config.buckets = identity.partitions;
        }
        if !identity.id.ends_with(&format!("/{}", info.get_table_id())) {
            // Recreated between the two lookups: let the caller open again.
            return Err(FlussError::Timeout {
                operation: "opening a table that is being recreated",
                table: config.table_name(),
                bootstrap: config.bootstrap.clone(),
                waited: Duration::ZERO,
            });
        }
        let writer = table.new_append().and_then(|a| a.create_writer()).map_err(|source| FlussError::Client {
            operation: "creating the writer",
            table: config.table_name(),
            source: Box::new(source),
        })?;
        drop(table);
        let buckets = config.buckets;
        let inner = Inner {
            table_name: config.table_name(),
            config,
            path,
            connection,
            admin,
            info,
            writer,
            floors: (0..buckets).map(|_| AtomicU64::new(0)).collect(),
            readers: Mutex::new((0..buckets).map(|_| None).collect()),
        };
        let log = FlussLog { inner: Arc::new(inner), identity };
        log.list_offsets("end_offsets", OffsetSpec::Latest).await?;
        Ok(log)
    }

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
        let buckets: Vec<i32> = (0..inner.config.buckets).filter_map(|b| i32::try_from(b).ok()).collect();
        // Right after the table is created, or while a leader moves, a bucket has no leader for
        // a moment: ask again until the request timeout.
        let started = Instant::now();
        let listed = loop {
            match request(&inner.config, operation, inner.admin.list_offsets(&inner.path, &buckets, spec.clone())).await
            {
                Err(FlussError::Client { source, .. }) if leader_moving(&source) => {
                    if started.elapsed() >= inner.config.request_timeout {
                        return Err(FlussError::TableNotReady {
                            table: inner.table_name.clone(),
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
        for (b, floor) in buckets.iter().zip(&inner.floors) {
            let offset = listed
                .get(b)
                .copied()
                .ok_or_else(|| FlussError::Unexpected(format!("no offset listed for bucket {b}")))?;
            let offset =
                u64::try_from(offset).map_err(|_| FlussError::Unexpected(format!("offset {offset} of bucket {b}")))?;
            if latest {
                floor.fetch_max(offset, Ordering::AcqRel);
            }
            out.push(offset);
        }
        Ok(out)
    }

    fn new_reader(&self, bucket: u32) -> Result<LogScanner, FlussError> {
        let inner = &self.inner;
        let table = FlussTable::new(&inner.connection, inner.connection.get_metadata(), inner.info.clone());
        table.new_scan().create_log_scanner().map_err(|source| FlussError::Read {
            table: inner.table_name.clone(),
            bucket,
            offset: 0,
            source: Box::new(source),
        })
    }

    async fn read_inner(&self, bucket: u32, from: u64, to: u64, max: usize) -> Result<ReadBatch, FlussError> {
        let inner = &self.inner;
        let table = &inner.table_name;
        let cached = inner.readers.lock().ok().and_then(|mut g| g.get_mut(bucket as usize).and_then(Option::take));
        let mut reader = match cached {
            Some(r) if r.next == from => r,
            _ => {
                let scanner = self.new_reader(bucket)?;
                let (b, offset) = (
                    i32::try_from(bucket).map_err(|_| FlussError::Unexpected(format!("bucket {bucket}")))?,
                    i64::try_from(from).map_err(|_| FlussError::Unexpected(format!("offset {from}")))?,
                );
                request(&inner.config, "subscribing a scanner", scanner.subscribe(b, offset)).await.map_err(
                    |e| match e {
                        FlussError::Client { source, .. } => {
                            FlussError::Read { table: table.clone(), bucket, offset: from, source }
                        }
                        other => other,
                    },
                )?;
                Reader { scanner, next: from, pending: VecDeque::new() }
            }
        };
        let stall = inner.config.read_stall_timeout;
        let mut records = Vec::new();
        let mut next = from;
        let mut last_progress = Instant::now();
        loop {
            while records.len() < max && next < to {
                let Some(r) = reader.pending.pop_front() else { break };
                if r.offset < next {
                    continue;
                }
                if r.offset >= to {
                    reader.pending.push_front(r);
                    next = to;
                    break;
                }
                next = r.offset + 1;
                records.push(r);
                last_progress = Instant::now();
            }
            if records.len() >= max || next >= to {
                break;
            }
            let waited = last_progress.elapsed();
            if waited >= stall {
                if !records.is_empty() {
                    break;
                }
                // The scanner is dropped: the next read starts afresh.
                return Err(FlussError::ReadStalled { table: table.clone(), bucket, offset: next, to, waited });
            }
            let wait = (stall - waited).min(POLL);
            let polled =
                match tokio::time::timeout(wait + inner.config.request_timeout, reader.scanner.poll(wait)).await {
                    Ok(Ok(p)) => p,
                    Ok(Err(source)) => {
                        return Err(FlussError::Read {
                            table: table.clone(),
                            bucket,
                            offset: next,
                            source: Box::new(source),
                        });
                    }
                    Err(_) => continue,
                };
            for (tb, recs) in polled.records_by_buckets() {
                if u32::try_from(tb.bucket_id()).ok() != Some(bucket) {
                    continue;
                }
                for r in recs {
                    let offset = u64::try_from(r.offset()).map_err(|_| {
                        FlussError::Unexpected(format!("record offset {} in bucket {bucket}", r.offset()))
                    })?;
                    let row = r.row();
                    let field = |pos: usize| {
                        row.get_bytes(pos).map(<[u8]>::to_vec).map_err(|source| FlussError::Read {
                            table: table.clone(),
                            bucket,
                            offset,
                            source: Box::new(source),
                        })
                    };
                    reader.pending.push_back(ReadRecord { offset, key: field(0)?, value: field(1)? });
                }
            }
        }
        if next < to {
            reader.next = next;
            if let Ok(mut g) = inner.readers.lock()
                && let Some(slot) = g.get_mut(bucket as usize)
                && slot.is_none()
            {
                *slot = Some(reader);
            }
        }
        // A finished range drops its scanner, so an idle cached scanner never holds a bucket.
        Ok(ReadBatch { records, next })
    }
}

async fn fetch_identity(config: &FlussConfig, admin: &FlussAdmin, path: &TablePath) -> Result<LogIdentity, FlussError> {
    let info = match request(config, "fetching the table info", admin.get_table_info(path)).await {
        Err(FlussError::Client { source, .. })
            if matches!(source.api_error(), Some(ApiError::TableNotExist | ApiError::DatabaseNotExist)) =>
        {
            return Err(FlussError::TableMissing { table: config.table_name() });
        }
        other => other?,
    };
    let database = request(config, "fetching the database info", admin.get_database_info(&config.database)).await?;
    let partitions = u32::try_from(info.get_num_buckets())
        .map_err(|_| FlussError::Unexpected(format!("bucket count {}", info.get_num_buckets())))?;
    Ok(LogIdentity {
        backend: BACKEND.to_owned(),
        id: format!("db-{}/{}.{}/{}", database.created_time(), config.database, config.table, info.get_table_id()),
        partitions,
    })
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
        if self.inner.config.read_only {
            return Err(CoreError::Unsupported {
                backend: format!("{BACKEND} (opened read-only)"),
                operation: "append",
            });
        }
        let inner = &self.inner;
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
        let acked = inner.writer.append(&row).map_err(|e| fail(append_error(e)))?;
        let timeout = inner.config.delivery_timeout;
        let started = Instant::now();
        let outcome = tokio::time::timeout(timeout, async {
            if inner.config.flush_on_append {
                // Sends the batch now. Its result covers other appends too; this record's own
                // acknowledgement below decides.
                let _ = inner.writer.flush().await;
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
