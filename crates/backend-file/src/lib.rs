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
//! - [`append`](StateLog::append) returns once the record is committed and `fdatasync`ed
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
//!   inline otherwise.
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
//!   write it makes kept in memory. A file its writer did not close (a crash, or a writer still
//!   running) is [`FileError::NeedsRecovery`]: recovery writes, which a read-only open does
//!   not do.
//!
//! [`FileError::find`] finds the [`FileError`] behind an [`Error`] this crate returned, for a
//! caller that tells its user what to do about it.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod guard;
mod overlay;

use actionstate_core::{
    BackendError, Capabilities, Error, LogIdentity, Position, ReadBatch, ReadRecord, StateLog, WireRecord,
};
use redb::{ReadableDatabase, ReadableTableMetadata, TableDefinition};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::sync::oneshot;

/// Name of the database file inside the data directory.
pub const DB_FILE_NAME: &str = "actionstate.redb";

/// The on-disk format version this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;

/// Backend name used in [`LogIdentity::backend`] and in [`BackendError`]s.
pub const BACKEND: &str = "file";

const META: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("meta");
/// A stored record: its log key and its enveloped value.
type Row<'a> = (&'a [u8], &'a [u8]);
const RECORDS: TableDefinition<'_, (u32, u64), Row<'static>> = TableDefinition::new("records");
const EARLIEST: TableDefinition<'_, u32, u64> = TableDefinition::new("earliest");

/// Records a reclaim deletes per transaction (appends wait for at most one).
const RECLAIM_CHUNK: u64 = 1024;
/// redb's limit on one stored value, less room for the tuple encoding.
const MAX_RECORD_BYTES: usize = (3 << 30) - 64;

const META_FORMAT: &str = "format";
const META_ID: &str = "id";
const META_PARTITIONS: &str = "partitions";

/// Where and how to open a [`FileLog`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileConfig {
    /// The data directory; created if absent.
    pub dir: PathBuf,
    /// Number of partitions. Fixed when the directory is created; a later open must pass the
    /// same number.
    pub partitions: u32,
    /// Verify the checksum of every page when opening, so a file damaged while closed is
    /// reported as [`FileError::Corrupt`] instead of being trusted (an unverified open of a
    /// damaged file may panic inside the engine). It reads the whole file: 0.25–0.55 s per
    /// million 300-byte records in `BENCHMARKS.md`. After a crash redb verifies and repairs
    /// the file whatever this says.
    pub verify_on_open: bool,
    /// Bytes of the engine's page cache (redb keeps read and written pages there). The
    /// process's memory stays within it however large the file grows; pages outside it are
    /// read through the operating system's cache. Default [`DEFAULT_CACHE_BYTES`].
    pub cache_bytes: usize,
    /// Opens an existing data directory as it is, for tools that only read (`actionstate
    /// inspect`): the file is opened with redb's read-only database, so nothing is written or
    /// created and read permission is enough; the partition count is the stored one
    /// (`partitions` is not checked); [`append`](StateLog::append),
    /// [`reclaim`](StateLog::reclaim) and [`FileLog::truncate_before`] fail with
    /// [`Error::Unsupported`]. A file that was not closed cleanly is refused with
    /// [`FileError::NeedsRecovery`]. Default `false`.
    pub read_only: bool,
}

/// The default page cache of a data directory: 256 MiB (redb's own default is 1 GiB).
pub const DEFAULT_CACHE_BYTES: usize = 256 << 20;

impl FileConfig {
    /// A configuration for `dir` with `partitions` partitions, verification on open and the
    /// default page cache.
    pub fn new(dir: impl Into<PathBuf>, partitions: u32) -> Self {
        FileConfig {
            dir: dir.into(),
            partitions,
            verify_on_open: true,
            cache_bytes: DEFAULT_CACHE_BYTES,
            read_only: false,
        }
    }
}

/// Why a data directory could not be opened or used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// A file system operation failed.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The database file is not a valid actionstate database: empty, not a redb database, a
    /// redb database without this crate's tables, truncated, damaged pages (found by the
    /// checksum pass, by an engine error, or by the engine failing on a page it read), missing
    /// or malformed metadata.
    #[error("{path} is corrupt or not an actionstate database: {source}")]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// What was found wrong.
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// The directory was written by a format version this build does not read.
    #[error("{path} has format version {found}; this build reads version {supported}")]
    UnknownFormat {
        /// The database file.
        path: PathBuf,
        /// Version found.
        found: u32,
        /// Version this build reads.
        supported: u32,
    },
    /// The directory was created with a different partition count than requested.
    #[error("{path} was created with {stored} partitions, but {requested} were requested")]
    PartitionsChanged {
        /// The database file.
        path: PathBuf,
        /// Partitions on disk.
        stored: u32,
        /// Partitions in the configuration.
        requested: u32,
    },
    /// Zero partitions were requested.
    #[error("a log needs at least one partition (requested 0 for {path})")]
    NoPartitions {
        /// The data directory.
        path: PathBuf,
    },
    /// A record too large for the engine (its key and value together over 3 GiB). Rejected
    /// before it joins a commit, so it cannot fail the appends committed with it.
    #[error("record of {len} bytes exceeds the {max}-byte limit of {path}")]
    TooLarge {
        /// The database file.
        path: PathBuf,
        /// Key and value bytes of the record.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Another handle or process has the database open.
    #[error("{path} is already open in another handle or process")]
    Locked {
        /// The database file.
        path: PathBuf,
    },
    /// A read-only open found a file its writer did not close (the writer crashed). Recovering
    /// it writes, which a read-only open never does; opening it for writing once (restarting
    /// its writer) does.
    #[error(
        "{path} was not closed cleanly (its writer crashed); a read-only open does not recover \
         it: open it for writing once, e.g. by restarting its writer, then retry"
    )]
    NeedsRecovery {
        /// The database file.
        path: PathBuf,
    },
    /// A write on a log opened read-only.
    #[error("{operation} on {path} refused: the log was opened read-only")]
    ReadOnly {
        /// The database file.
        path: PathBuf,
        /// The refused operation.
        operation: &'static str,
    },
    /// The database engine failed during an operation.
    #[error("{operation} on {path} failed: {source}")]
    Engine {
        /// The database file.
        path: PathBuf,
        /// The operation (`"open"`, `"append"`, `"read"`, ...).
        operation: &'static str,
        /// The engine's error.
        source: Box<redb::Error>,
    },
}

impl FileError {
    fn operation(&self) -> &'static str {
        match self {
            FileError::Engine { operation, .. } | FileError::ReadOnly { operation, .. } => operation,
            FileError::TooLarge { .. } => "append",
            _ => "open",
        }
    }

    /// The [`FileError`] behind `error`, found by following its [`source`] chain: for an
    /// [`Error`] this crate returned (an [`Error::Backend`]) or any error wrapping one. `None`
    /// for errors that did not come from a file problem. Lets a caller tell a damaged file
    /// ([`FileError::Corrupt`]) from one held by another process ([`FileError::Locked`]) or a
    /// file system refusal ([`FileError::Io`]: permission denied, not a directory, read-only
    /// file system).
    ///
    /// [`source`]: std::error::Error::source
    pub fn find<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a FileError> {
        let mut at = Some(error);
        while let Some(e) = at {
            if let Some(found) = e.downcast_ref::<FileError>() {
                return Some(found);
            }
            // Appends share one error among the records committed together.
            if let Some(found) = e.downcast_ref::<Arc<FileError>>() {
                return Some(found);
            }
            at = e.source();
        }
        None
    }
}

impl From<FileError> for Error {
    /// A changed partition count is [`Error::LogChanged`] and a write on a read-only log
    /// [`Error::Unsupported`]; everything else is a terminal [`Error::Backend`] whose source
    /// is the [`FileError`] (see [`FileError::find`]).
    fn from(e: FileError) -> Self {
        let operation = e.operation();
        into_core(e, operation)
    }
}

/// [`Error::from`], naming `operation` as the one that failed.
fn into_core(e: FileError, operation: &'static str) -> Error {
    match e {
        FileError::PartitionsChanged { path, stored, requested } => Error::LogChanged {
            expected: format!("{BACKEND}:{} ({requested} partitions)", path.display()),
            found: format!("{BACKEND}:{} ({stored} partitions)", path.display()),
        },
        FileError::ReadOnly { operation, .. } => read_only(operation),
        e => Error::Backend(BackendError::terminal(BACKEND, operation, e)),
    }
}

/// The embedded [`StateLog`]: a partitioned log in one redb database file.
///
/// Cheap to share: wrap it in an `Arc` and call it from many tasks. Only one `FileLog` (in
/// any process) can have a directory open at a time; a second open fails with
/// [`FileError::Locked`].
#[derive(Debug)]
pub struct FileLog {
    inner: Arc<Inner>,
    identity: LogIdentity,
}

/// The engine's handle on the file.
enum Db {
    /// Opened for writing.
    Write(redb::Database),
    /// Opened by [`FileConfig::read_only`]: appends and reclaims are refused.
    Read(redb::ReadOnlyDatabase),
    /// Closed (while dropping).
    Closed,
}

impl fmt::Debug for Db {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Db::Write(_) => "Db::Write",
            Db::Read(_) => "Db::Read",
            Db::Closed => "Db::Closed",
        })
    }
}

impl Db {
    fn begin_read(&self) -> Result<redb::ReadTransaction, redb::Error> {
        match self {
            Db::Write(db) => Ok(db.begin_read()?),
            Db::Read(db) => Ok(db.begin_read()?),
            Db::Closed => Err(redb::Error::DatabaseClosed),
        }
    }

    /// The handle for a write transaction, or why there is none.
    fn writable(&self, path: &Path, operation: &'static str) -> Result<&redb::Database, FileError> {
        match self {
            Db::Write(db) => Ok(db),
            Db::Read(_) => Err(FileError::ReadOnly { path: path.to_path_buf(), operation }),
            Db::Closed => Err(engine_error(path, operation, redb::Error::DatabaseClosed)),
        }
    }
}

/// Drops `db`, which closes it (a database opened for writing commits on close), catching a
/// panic the engine raises on a damaged file.
fn close_quietly(db: Db) {
    let _ = guard::engine(move || drop(db));
}

#[derive(Debug)]
struct Inner {
    db: Db,
    path: PathBuf,
    partitions: u32,
    /// Set once an engine call panicked: what it said. Every later call fails with it, as the
    /// engine's state after the panic cannot be trusted.
    broken: Mutex<Option<String>>,
    /// Appends waiting for the next commit.
    queue: Mutex<Queue>,
    /// Held while writing; guards the offsets the next records get.
    writer: Mutex<Offsets>,
    /// Committed offsets, for callers that must not wait for a commit in progress.
    published: Mutex<Offsets>,
}

#[derive(Clone, Debug)]
struct Offsets {
    earliest: Vec<u64>,
    end: Vec<u64>,
}

#[derive(Debug, Default)]
struct Queue {
    /// In arrival order, which is the order they get their offsets in.
    pending: Vec<Pending>,
    /// Whether a [`Committer`] is running; it drains `pending` until it finds it empty.
    committing: bool,
}

#[derive(Debug)]
struct Pending {
    record: WireRecord,
    reply: oneshot::Sender<Result<Position, Arc<FileError>>>,
}

/// What an append or a reclaim on a read-only log returns.
fn read_only(operation: &'static str) -> Error {
    Error::Unsupported { backend: format!("{BACKEND} (opened read-only)"), operation }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Shared state is only replaced after a commit succeeded, so a panic while a lock was held
    // cannot have left it half-updated.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl FileLog {
    /// Opens the log in `config.dir`, creating the directory and the database if absent (and
    /// only then: an existing file is opened as it is, never initialized). With
    /// [`FileConfig::read_only`], see there: nothing is created or written.
    ///
    /// Errors name the file or directory at fault: [`FileError::UnknownFormat`],
    /// [`FileError::Corrupt`], [`FileError::PartitionsChanged`], [`FileError::Locked`],
    /// [`FileError::NeedsRecovery`], [`FileError::Io`]. This call blocks on disk I/O.
    pub fn open(config: FileConfig) -> Result<FileLog, FileError> {
        if config.read_only {
            return FileLog::open_read_only(&config);
        }
        let dir = &config.dir;
        if config.partitions == 0 {
            return Err(FileError::NoPartitions { path: dir.clone() });
        }
        std::fs::create_dir_all(dir).map_err(|source| FileError::Io { path: dir.clone(), source })?;
        let path = dir.join(DB_FILE_NAME);
        match std::fs::symlink_metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => create_database(dir, &path, config.partitions)?,
            Err(source) => return Err(FileError::Io { path, source }),
            Ok(_) => {}
        }
        check_database_file(&path)?;
        let mut builder = redb::Database::builder();
        builder.set_check_integrity_on_open(config.verify_on_open).set_cache_size(config.cache_bytes);
        // `open`, not `create`: redb's `create` initializes a new database in an empty file.
        let db = engine_open(&path, || builder.open(&path))?;
        FileLog::finish_open(Db::Write(db), path, Some(config.partitions))
    }

    /// [`FileLog::open`] with [`FileConfig::read_only`].
    fn open_read_only(config: &FileConfig) -> Result<FileLog, FileError> {
        let path = config.dir.join(DB_FILE_NAME);
        check_database_file(&path)?;
        let mut builder = redb::Database::builder();
        builder.set_cache_size(config.cache_bytes);
        // Opened before the checksum pass, so that its lock keeps a writer out while it runs.
        let db = match engine_open(&path, || builder.open_read_only(&path)) {
            Ok(db) => Db::Read(db),
            // redb refuses a read-only open alike for a file its writer did not close and for
            // one whose length is not the one its header records (truncated). The integrity
            // check, run without writing, tells them apart: it recovers the first and finds the
            // second corrupt.
            Err(FileError::NeedsRecovery { path }) => {
                verify_without_writing(&path, config.cache_bytes)?;
                return Err(FileError::NeedsRecovery { path });
            }
            Err(e) => return Err(e),
        };
        if config.verify_on_open
            && let Err(e) = verify_without_writing(&path, config.cache_bytes)
        {
            close_quietly(db);
            return Err(e);
        }
        FileLog::finish_open(db, path, None)
    }

    /// Reads the identity and offsets of an opened database (checking the partition count
    /// against `partitions`, if given) and wraps it into a log.
    fn finish_open(db: Db, path: PathBuf, partitions: Option<u32>) -> Result<FileLog, FileError> {
        let loaded =
            guard::engine(|| load(&db, &path, partitions)).unwrap_or_else(|detail| Err(corrupt(&path, detail)));
        let (identity, offsets) = match loaded {
            Ok(loaded) => loaded,
            Err(e) => {
                close_quietly(db);
                return Err(e);
            }
        };
        let inner = Inner {
            db,
            path,
            partitions: identity.partitions,
            broken: Mutex::new(None),
            queue: Mutex::new(Queue::default()),
            writer: Mutex::new(offsets.clone()),
            published: Mutex::new(offsets),
        };
        Ok(FileLog { inner: Arc::new(inner), identity })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Deletes the records of `partition` below `offset` and makes `offset` its earliest
    /// offset. Returns the earliest offset afterwards (unchanged if it was already at or past
    /// `offset`).
    ///
    /// Markers pointing below the new earliest offset then fail validation with
    /// [`Error::DataLoss`]. Fails with [`Error::OffsetBeyondEnd`] if `offset` is past the end.
    pub async fn truncate_before(&self, partition: u32, offset: u64) -> Result<u64, Error> {
        if self.inner.is_read_only() {
            return Err(read_only("truncate"));
        }
        self.check_partition(partition)?;
        let inner = self.inner.clone();
        blocking("truncate", move || inner.truncate_before(partition, offset)).await
    }

    fn check_partition(&self, partition: u32) -> Result<(), Error> {
        if partition < self.inner.partitions {
            Ok(())
        } else {
            Err(Error::UnknownPartition {
                log: self.identity.to_string(),
                partition,
                partitions: self.inner.partitions,
            })
        }
    }
}

/// Runs blocking disk work off the async executor when there is one to protect.
async fn blocking<T: Send + 'static>(
    operation: &'static str,
    f: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            handle.spawn_blocking(f).await.map_err(|e| Error::Backend(BackendError::terminal(BACKEND, operation, e)))?
        }
        Err(_) => f(),
    }
}

/// Creates the database of a new data directory under a temporary name, writes its meta
/// record, and only then links it to `path`, so that a process killed while creating it leaves
/// no database (and a stray `*.new` file) rather than one it cannot open: redb writes the magic
/// number of a new file's header last and refuses a file without it. Linking fails if `path`
/// exists, so of two processes creating one directory at once, the first wins and the second
/// opens its database.
fn create_database(dir: &Path, path: &Path, partitions: u32) -> Result<(), FileError> {
    let tmp = dir.join(format!("{DB_FILE_NAME}.{}.new", uuid::Uuid::new_v4().simple()));
    let created = (|| {
        let db = engine_open(&tmp, || redb::Database::builder().create(&tmp))?;
        let initialized = guard::engine(|| init(&db, &tmp, partitions)).unwrap_or_else(|d| Err(corrupt(&tmp, d)));
        close_quietly(Db::Write(db));
        initialized?;
        match std::fs::hard_link(&tmp, path) {
            // The new file's directory entry must survive a crash as well as its contents.
            Ok(()) => sync_dir(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Err(source) => Err(FileError::Io { path: path.to_path_buf(), source }),
        }
    })();
    // Only the temporary name goes; the database stays under `path`.
    let removed = std::fs::remove_file(&tmp);
    created?;
    removed.map_err(|source| FileError::Io { path: tmp, source })
}

fn sync_dir(dir: &Path) -> Result<(), FileError> {
    let io = |source| FileError::Io { path: dir.to_path_buf(), source };
    std::fs::File::open(dir).map_err(io)?.sync_all().map_err(io)
}

/// Refuses what cannot be an existing database before the engine sees it: a missing path
/// (a read-only open creates nothing), a directory, an empty file (which redb would
/// initialize as a new database).
fn check_database_file(path: &Path) -> Result<(), FileError> {
    let io = |source| FileError::Io { path: path.to_path_buf(), source };
    let meta = std::fs::metadata(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            io(std::io::Error::new(std::io::ErrorKind::NotFound, "no actionstate database in this directory"))
        } else {
            io(e)
        }
    })?;
    if !meta.is_file() {
        return Err(io(std::io::Error::other("not a regular file")));
    }
    if meta.len() == 0 {
        return Err(corrupt(path, "the file is empty (0 bytes); an existing file is never made into a new log".into()));
    }
    Ok(())
}

/// Runs the engine's open of `path`, mapping its errors and a panic to [`FileError`]s.
fn engine_open<D>(path: &Path, open: impl FnOnce() -> Result<D, redb::DatabaseError>) -> Result<D, FileError> {
    match guard::engine(open) {
        Ok(Ok(db)) => Ok(db),
        Ok(Err(e)) => Err(open_error(path, e)),
        Err(detail) => Err(corrupt(path, detail)),
    }
}

/// Runs redb's integrity check (every page's checksum, the allocator state) on the file at
/// `path` without writing to it: the check's writes go to an in-memory overlay.
fn verify_without_writing(path: &Path, cache_bytes: usize) -> Result<(), FileError> {
    let io = |source| FileError::Io { path: path.to_path_buf(), source };
    let file = std::fs::File::open(path).map_err(io)?;
    let overlay = overlay::Overlay::new(file).map_err(io)?;
    let mut builder = redb::Database::builder();
    builder.set_check_integrity_on_open(true).set_cache_size(cache_bytes);
    let db = engine_open(path, || builder.create_with_backend(overlay))?;
    match guard::engine(|| db.close()) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(open_error(path, e)),
        Err(detail) => Err(corrupt(path, detail)),
    }
}

fn open_error(path: &Path, e: redb::DatabaseError) -> FileError {
    let path = path.to_path_buf();
    match e {
        redb::DatabaseError::DatabaseAlreadyOpen => FileError::Locked { path },
        // Only a read-only open aborts a repair (this crate sets no repair callback).
        redb::DatabaseError::RepairAborted => FileError::NeedsRecovery { path },
        redb::DatabaseError::Storage(redb::StorageError::Io(source)) if is_damage(&source) => damage(path, source),
        redb::DatabaseError::Storage(redb::StorageError::Io(source)) => FileError::Io { path, source },
        e @ (redb::DatabaseError::Storage(redb::StorageError::Corrupted(_))
        | redb::DatabaseError::UpgradeRequired(_)) => FileError::Corrupt { path, source: Box::new(e) },
        e => FileError::Engine { path, operation: "open", source: Box::new(e.into()) },
    }
}

/// Whether an I/O error from the engine means the file's content is wrong rather than that
/// the file system refused: a read past the end is a truncated file, invalid data a file that
/// is not a database.
fn is_damage(e: &std::io::Error) -> bool {
    matches!(e.kind(), std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::InvalidData)
}

/// The corruption an I/O error of [`is_damage`] stands for, in words about the file.
fn damage(path: PathBuf, source: std::io::Error) -> FileError {
    if source.kind() != std::io::ErrorKind::UnexpectedEof {
        return FileError::Corrupt { path, source: Box::new(source) };
    }
    let len = std::fs::metadata(&path).map_or_else(|_| "?".to_owned(), |m| m.len().to_string());
    corrupt(&path, format!("truncated: the file ends at {len} bytes, before the data it records"))
}

/// An engine error during `operation`, classified: damage is [`FileError::Corrupt`], a file
/// system refusal [`FileError::Io`], a held lock [`FileError::Locked`].
fn engine_error(path: &Path, operation: &'static str, e: redb::Error) -> FileError {
    let path = path.to_path_buf();
    match e {
        redb::Error::Io(source) if is_damage(&source) => damage(path, source),
        redb::Error::Io(source) => FileError::Io { path, source },
        redb::Error::DatabaseAlreadyOpen => FileError::Locked { path },
        // Every database this crate creates has all its tables with their types, so a missing
        // or different one is a file that is not (or no longer) an actionstate database.
        e @ (redb::Error::Corrupted(_)
        | redb::Error::TableDoesNotExist(_)
        | redb::Error::TableTypeMismatch { .. }
        | redb::Error::TableIsMultimap(_)
        | redb::Error::TypeDefinitionChanged { .. }
        | redb::Error::UpgradeRequired(_)) => FileError::Corrupt { path, source: Box::new(e) },
        e => FileError::Engine { path, operation, source: Box::new(e) },
    }
}

/// Attaches the database path and the operation to engine errors.
trait OrEngine<T> {
    fn or_engine(self, path: &Path, operation: &'static str) -> Result<T, FileError>;
}

impl<T, E: Into<redb::Error>> OrEngine<T> for Result<T, E> {
    fn or_engine(self, path: &Path, operation: &'static str) -> Result<T, FileError> {
        self.map_err(|e| engine_error(path, operation, e.into()))
    }
}

fn corrupt(path: &Path, detail: String) -> FileError {
    FileError::Corrupt { path: path.to_path_buf(), source: detail.into() }
}

/// Reads the meta record and the offsets of every partition, checking the partition count
/// against `partitions` if given. A database without the meta record is not an actionstate
/// database: only [`init`] writes one, into a file it has just created.
fn load(db: &Db, path: &Path, partitions: Option<u32>) -> Result<(LogIdentity, Offsets), FileError> {
    let identity = read_identity(db, path)?
        .ok_or_else(|| corrupt(path, "a redb database without the actionstate meta table".into()))?;
    if let Some(requested) = partitions.filter(|&p| p != identity.partitions) {
        return Err(FileError::PartitionsChanged { path: path.to_path_buf(), stored: identity.partitions, requested });
    }
    let offsets = read_offsets(db, path, identity.partitions)?;
    Ok((identity, offsets))
}

/// Writes the meta record and creates the tables of a database just created.
fn init(db: &redb::Database, path: &Path, partitions: u32) -> Result<(), FileError> {
    let id = uuid::Uuid::new_v4().to_string();
    let txn = db.begin_write().or_engine(path, "open")?;
    {
        if txn.open_table(RECORDS).or_engine(path, "open")?.len().or_engine(path, "open")? > 0 {
            return Err(corrupt(path, "records present but the meta record is missing".into()));
        }
        txn.open_table(EARLIEST).or_engine(path, "open")?;
        let mut meta = txn.open_table(META).or_engine(path, "open")?;
        meta.insert(META_FORMAT, FORMAT_VERSION.to_le_bytes().as_slice()).or_engine(path, "open")?;
        meta.insert(META_ID, id.as_bytes()).or_engine(path, "open")?;
        meta.insert(META_PARTITIONS, partitions.to_le_bytes().as_slice()).or_engine(path, "open")?;
    }
    txn.commit().or_engine(path, "open")
}

/// The identity stored in the meta table; `None` for a database not yet initialized.
fn read_identity(db: &Db, path: &Path) -> Result<Option<LogIdentity>, FileError> {
    let txn = db.begin_read().or_engine(path, "read meta")?;
    let meta = match txn.open_table(META) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
        Err(x) => return Err(x).or_engine(path, "read meta"),
    };
    let get = |name: &str| -> Result<Vec<u8>, FileError> {
        match meta.get(name).or_engine(path, "read meta")? {
            Some(v) => Ok(v.value().to_vec()),
            None => Err(corrupt(path, format!("meta record has no {name:?} entry"))),
        }
    };
    let u32_of = |name: &str, bytes: Vec<u8>| -> Result<u32, FileError> {
        let arr: [u8; 4] = bytes
            .try_into()
            .map_err(|b: Vec<u8>| corrupt(path, format!("meta {name:?} has {} bytes, expected 4", b.len())))?;
        Ok(u32::from_le_bytes(arr))
    };
    // The format is checked before anything else: a newer format may lay out the rest differently.
    let format = u32_of(META_FORMAT, get(META_FORMAT)?)?;
    if format != FORMAT_VERSION {
        return Err(FileError::UnknownFormat { path: path.to_path_buf(), found: format, supported: FORMAT_VERSION });
    }
    let id = String::from_utf8(get(META_ID)?).map_err(|_| corrupt(path, "meta \"id\" is not UTF-8".into()))?;
    let partitions = u32_of(META_PARTITIONS, get(META_PARTITIONS)?)?;
    if partitions == 0 {
        return Err(corrupt(path, "meta \"partitions\" is 0".into()));
    }
    Ok(Some(LogIdentity { backend: BACKEND.to_string(), id, partitions }))
}

fn read_offsets(db: &Db, path: &Path, partitions: u32) -> Result<Offsets, FileError> {
    let txn = db.begin_read().or_engine(path, "read offsets")?;
    let records = txn.open_table(RECORDS).or_engine(path, "read offsets")?;
    let earliest_table = txn.open_table(EARLIEST).or_engine(path, "read offsets")?;
    let mut offsets = Offsets { earliest: Vec::new(), end: Vec::new() };
    for p in 0..partitions {
        let earliest = earliest_table.get(p).or_engine(path, "read offsets")?.map_or(0, |v| v.value());
        let last = records.range((p, 0)..=(p, u64::MAX)).or_engine(path, "read offsets")?.next_back();
        let end = match last {
            Some(row) => row.or_engine(path, "read offsets")?.0.value().1.saturating_add(1),
            None => 0,
        };
        // A truncated partition with nothing appended since ends at its earliest offset.
        offsets.earliest.push(earliest);
        offsets.end.push(end.max(earliest));
    }
    Ok(offsets)
}

impl Drop for Inner {
    fn drop(&mut self) {
        close_quietly(std::mem::replace(&mut self.db, Db::Closed));
    }
}

impl Inner {
    fn is_read_only(&self) -> bool {
        matches!(self.db, Db::Read(_))
    }

    /// Runs engine work `f`, turning a panic into [`FileError::Corrupt`] and breaking the
    /// handle; on a broken handle, fails with that error without running `f`.
    fn guarded<T>(&self, f: impl FnOnce() -> Result<T, FileError>) -> Result<T, FileError> {
        if let Some(detail) = lock(&self.broken).clone() {
            return Err(corrupt(&self.path, detail));
        }
        guard::engine(f).unwrap_or_else(|detail| {
            *lock(&self.broken) = Some(detail.clone());
            Err(corrupt(&self.path, detail))
        })
    }

    /// Commits `batch` in one transaction and publishes the new end offsets.
    fn commit(&self, batch: &[Pending]) -> Result<Vec<Position>, Arc<FileError>> {
        let mut writer = lock(&self.writer);
        let positions = self.guarded(|| self.write(&mut writer, batch)).map_err(Arc::new)?;
        *lock(&self.published) = writer.clone();
        Ok(positions)
    }

    fn write(&self, offsets: &mut Offsets, batch: &[Pending]) -> Result<Vec<Position>, FileError> {
        let mut end = offsets.end.clone();
        let mut positions = Vec::with_capacity(batch.len());
        let txn = self.db.writable(&self.path, "append")?.begin_write().or_engine(&self.path, "append")?;
        {
            let mut records = txn.open_table(RECORDS).or_engine(&self.path, "append")?;
            for pending in batch {
                let partition = pending.record.key_id.partition(self.partitions);
                let slot = &mut end[partition as usize];
                let offset = *slot;
                records
                    .insert((partition, offset), (pending.record.key.as_slice(), pending.record.value.as_slice()))
                    .or_engine(&self.path, "append")?;
                *slot += 1;
                positions.push(Position { partition, offset, exact: true });
            }
        }
        txn.commit().or_engine(&self.path, "append")?;
        offsets.end = end;
        Ok(positions)
    }

    fn truncate_before(&self, partition: u32, offset: u64) -> Result<u64, Error> {
        let mut writer = lock(&self.writer);
        let p = partition as usize;
        let end = writer.end[p];
        if offset > end {
            return Err(Error::OffsetBeyondEnd { partition, offset, end });
        }
        if offset <= writer.earliest[p] {
            return Ok(writer.earliest[p]);
        }
        self.guarded(|| self.delete_below(partition, offset)).map_err(|e| into_core(e, "truncate"))?;
        writer.earliest[p] = offset;
        *lock(&self.published) = writer.clone();
        Ok(offset)
    }

    /// Deletes the records of `partition` below `offset` and stores `offset` as its earliest.
    fn delete_below(&self, partition: u32, offset: u64) -> Result<(), FileError> {
        let txn = self.db.writable(&self.path, "truncate")?.begin_write().or_engine(&self.path, "truncate")?;
        {
            let mut records = txn.open_table(RECORDS).or_engine(&self.path, "truncate")?;
            records.retain_in((partition, 0)..(partition, offset), |_, _| false).or_engine(&self.path, "truncate")?;
            let mut earliest = txn.open_table(EARLIEST).or_engine(&self.path, "truncate")?;
            earliest.insert(partition, offset).or_engine(&self.path, "truncate")?;
        }
        txn.commit().or_engine(&self.path, "truncate")
    }

    /// Reclaims every partition below its offset in `before`, a chunk of records per
    /// transaction, so that appends (which wait for the writer) interleave with a long
    /// reclaim instead of stalling behind it. Deleted records free their pages, which redb
    /// reuses for later records: the file stops growing once what is reclaimed keeps up with
    /// what is appended.
    fn reclaim(&self, before: &[u64]) -> Result<Vec<u64>, Error> {
        if before.len() != self.partitions as usize {
            return Err(Error::UnknownPartition {
                log: self.path.display().to_string(),
                partition: u32::try_from(before.len().min(self.partitions as usize)).unwrap_or(u32::MAX),
                partitions: self.partitions,
            });
        }
        {
            let writer = lock(&self.writer);
            for (p, (&offset, &end)) in (0u32..).zip(before.iter().zip(&writer.end)) {
                if offset > end {
                    return Err(Error::OffsetBeyondEnd { partition: p, offset, end });
                }
            }
        }
        for (p, &target) in (0u32..).zip(before) {
            loop {
                let earliest = lock(&self.published).earliest[p as usize];
                if target <= earliest {
                    break;
                }
                self.truncate_before(p, target.min(earliest.saturating_add(RECLAIM_CHUNK)))?;
            }
        }
        Ok(lock(&self.published).earliest.clone())
    }

    fn read(&self, partition: u32, from: u64, to: u64, max: usize) -> Result<ReadBatch, Error> {
        if from >= to || max == 0 {
            return Ok(ReadBatch { records: Vec::new(), next: from });
        }
        self.guarded(|| self.read_range(partition, from, to, max)).map_err(|e| into_core(e, "read"))
    }

    fn read_range(&self, partition: u32, from: u64, to: u64, max: usize) -> Result<ReadBatch, FileError> {
        let txn = self.db.begin_read().or_engine(&self.path, "read")?;
        let table = txn.open_table(RECORDS).or_engine(&self.path, "read")?;
        let mut records = Vec::new();
        for row in table.range((partition, from)..(partition, to)).or_engine(&self.path, "read")?.take(max) {
            let (k, v) = row.or_engine(&self.path, "read")?;
            let (key, value) = v.value();
            records.push(ReadRecord { offset: k.value().1, key: key.to_vec(), value: value.to_vec() });
        }
        let next = match records.last() {
            Some(last) if records.len() == max => last.offset + 1,
            _ => to,
        };
        Ok(ReadBatch { records, next })
    }
}

/// Group commit: one committer at a time drains the queue, committing everything that arrived
/// during the previous commit in one transaction, until the queue is empty.
struct Committer {
    /// Released before the last batch is answered, so a caller that drops the log right after
    /// its append returns closes the database and can open it again at once.
    inner: Option<Arc<Inner>>,
}

impl Committer {
    fn run(mut self) {
        let Some(mut batch) = self.next_batch() else { return };
        while let Some(inner) = &self.inner {
            let result = inner.commit(&batch);
            let next = self.next_batch();
            // A caller that gave up waiting dropped its receiver; its record may be written
            // anyway, which the contract allows.
            match result {
                Ok(positions) => {
                    for (pending, position) in batch.into_iter().zip(positions) {
                        let _ = pending.reply.send(Ok(position));
                    }
                }
                Err(e) => {
                    for pending in batch {
                        let _ = pending.reply.send(Err(e.clone()));
                    }
                }
            }
            match next {
                Some(b) => batch = b,
                None => return,
            }
        }
    }

    /// Takes the queued appends, or, if there are none, stops this committer.
    fn next_batch(&mut self) -> Option<Vec<Pending>> {
        let inner = self.inner.as_ref()?;
        let mut queue = lock(&inner.queue);
        if queue.pending.is_empty() {
            queue.committing = false;
            drop(queue);
            self.inner = None;
            return None;
        }
        Some(std::mem::take(&mut queue.pending))
    }
}

impl Drop for Committer {
    fn drop(&mut self) {
        if let Some(inner) = &self.inner {
            // The committer panicked or never ran (its runtime shut down): fail the waiting
            // appends instead of leaving them hanging, and let the next append start another.
            let mut queue = lock(&inner.queue);
            queue.committing = false;
            queue.pending.clear();
        }
    }
}

impl StateLog for FileLog {
    fn identity(&self) -> &LogIdentity {
        &self.identity
    }

    async fn current_identity(&self) -> Result<LogIdentity, Error> {
        let inner = self.inner.clone();
        blocking("identity", move || {
            let identity = inner.guarded(|| read_identity(&inner.db, &inner.path));
            let missing = || corrupt(&inner.path, "the meta record is missing".into());
            identity.and_then(|i| i.ok_or_else(missing)).map_err(|e| into_core(e, "identity"))
        })
        .await
    }

    async fn append(&self, record: WireRecord) -> Result<Position, Error> {
        if self.inner.is_read_only() {
            return Err(read_only("append"));
        }
        let len = record.key.len().saturating_add(record.value.len());
        if len > MAX_RECORD_BYTES {
            return Err(FileError::TooLarge { path: self.inner.path.clone(), len, max: MAX_RECORD_BYTES }.into());
        }
        let (reply, result) = oneshot::channel();
        let start = {
            let mut queue = lock(&self.inner.queue);
            queue.pending.push(Pending { record, reply });
            !std::mem::replace(&mut queue.committing, true)
        };
        if start {
            let committer = Committer { inner: Some(self.inner.clone()) };
            match tokio::runtime::Handle::try_current() {
                // Not awaited: this caller waits for its own record only, which may be committed
                // by a committer another caller started.
                Ok(handle) => drop(handle.spawn_blocking(move || committer.run())),
                Err(_) => committer.run(),
            }
        }
        match result.await {
            Ok(Ok(position)) => Ok(position),
            Ok(Err(e)) => Err(Error::Backend(BackendError::terminal(BACKEND, "append", e))),
            // Only reachable if the committer panicked or could not run.
            Err(e) => Err(Error::Backend(BackendError::terminal(BACKEND, "append", e))),
        }
    }

    async fn earliest_offsets(&self) -> Result<Vec<u64>, Error> {
        Ok(lock(&self.inner.published).earliest.clone())
    }

    async fn end_offsets(&self) -> Result<Vec<u64>, Error> {
        Ok(lock(&self.inner.published).end.clone())
    }

    async fn read(&self, partition: u32, from: u64, to: u64, max: usize) -> Result<ReadBatch, Error> {
        self.check_partition(partition)?;
        let inner = self.inner.clone();
        blocking("read", move || inner.read(partition, from, to, max)).await
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::RECLAIM
    }

    async fn reclaim(&self, before: &[u64]) -> Result<Vec<u64>, Error> {
        if self.inner.is_read_only() {
            return Err(read_only("reclaim"));
        }
        let inner = self.inner.clone();
        let before = before.to_vec();
        blocking("reclaim", move || inner.reclaim(&before)).await
    }
}

impl FileLog {
    /// Opens an existing data directory with the partition count stored in it, for tools
    /// that inspect a directory they did not create. A directory without a database is
    /// [`FileError::Io`] (not found) rather than a new, empty log.
    pub fn open_existing(dir: impl Into<PathBuf>) -> Result<FileLog, FileError> {
        FileLog::open_existing_with(FileConfig::new(dir, 1))
    }

    /// [`FileLog::open_existing`] with the other settings of `config`.
    fn open_existing_with(config: FileConfig) -> Result<FileLog, FileError> {
        let path = config.dir.join(DB_FILE_NAME);
        check_database_file(&path)?;
        let mut builder = redb::Database::builder();
        builder.set_check_integrity_on_open(config.verify_on_open).set_cache_size(config.cache_bytes);
        let db = engine_open(&path, || builder.open(&path))?;
        FileLog::finish_open(Db::Write(db), path, None)
    }
}

/// Partitions of a data directory created from a URL without `partitions=N`.
pub const DEFAULT_PARTITIONS: u32 = 8;

impl FileConfig {
    /// The configuration a log URL names:
    ///
    /// `file:DIR[?PARAMETER=VALUE&...]` (or `file:///ABSOLUTE/DIR`, or
    /// `file://localhost/ABSOLUTE/DIR`, the same directory)
    ///
    /// A `file://HOST/...` URL with any other host is refused: a file log is on this machine,
    /// and reading the host's path as a local one would open another directory.
    /// | parameter | meaning | default |
    /// |---|---|---|
    /// | `partitions=N` | partitions of a created directory; an existing one must have `N` | [`DEFAULT_PARTITIONS`] |
    /// | `cache_mb=N` | the page cache ([`FileConfig::cache_bytes`]), in MiB | 256 |
    /// | `verify_on_open=false` | skip the checksum pass of [`FileConfig::verify_on_open`] | `true` |
    ///
    /// Errors are [`Error::BadUrl`].
    pub fn from_url(text: &str) -> Result<FileConfig, Error> {
        let mut url = actionstate_core::url::LogUrl::parse(text)?;
        if url.scheme() != "file" {
            return Err(url.error("expected `file:DIR`"));
        }
        let dir = match url.authority() {
            "" => url.path().to_owned(),
            // `file://localhost/DIR` is `file:///DIR`; the path after the host is absolute.
            host if host.eq_ignore_ascii_case("localhost") && !url.path().is_empty() => format!("/{}", url.path()),
            host if host.eq_ignore_ascii_case("localhost") => String::new(),
            host => {
                // Only the host: what precedes an `@` would be credentials.
                let host = host.rsplit_once('@').map_or(host, |(_, host)| host);
                return Err(url.error(format!(
                    "`file://{host}/...` names host `{host}`, but a file log is a local directory; \
                     write `file:///ABSOLUTE/DIR` (or `file://localhost/ABSOLUTE/DIR`) or `file:DIR`"
                )));
            }
        };
        if dir.is_empty() {
            return Err(url.error("`file:` needs a directory, e.g. `file:./actionstate-data`"));
        }
        let mut config = FileConfig::new(dir, DEFAULT_PARTITIONS);
        config.partitions = url.take_count("partitions")?.unwrap_or(config.partitions);
        if let Some(mb) = url.take_count("cache_mb")? {
            config.cache_bytes = usize::try_from(mb).unwrap_or(usize::MAX).saturating_mul(1 << 20);
        }
        config.verify_on_open = url.take_flag("verify_on_open")?.unwrap_or(config.verify_on_open);
        url.finish()?;
        Ok(config)
    }
}
