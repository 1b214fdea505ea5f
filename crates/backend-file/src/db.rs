//! The database file: its tables, the engine's handle on it ([`Db`]), the state a log's
//! handles share ([`Inner`]), and reading and writing the meta record.

use crate::error::{BACKEND, FileError, OrEngine, corrupt, engine_error};
use crate::guard;
use actionstate_core::{LogIdentity, Position, WireRecord};
use redb::{ReadableDatabase, ReadableTableMetadata, TableDefinition};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::sync::oneshot;

/// Name of the database file inside the data directory.
pub const DB_FILE_NAME: &str = "actionstate.redb";

/// The on-disk format version this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;

const META: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("meta");
/// A stored record: its log key and its enveloped value.
pub(crate) type Row<'a> = (&'a [u8], &'a [u8]);
pub(crate) const RECORDS: TableDefinition<'_, (u32, u64), Row<'static>> = TableDefinition::new("records");
pub(crate) const EARLIEST: TableDefinition<'_, u32, u64> = TableDefinition::new("earliest");

/// redb's limit on one stored value, less room for the tuple encoding.
pub(crate) const MAX_RECORD_BYTES: usize = (3 << 30) - 64;

const META_FORMAT: &str = "format";
const META_ID: &str = "id";
const META_PARTITIONS: &str = "partitions";

/// The engine's handle on the file.
pub(crate) enum Db {
    /// Opened for writing.
    Write(redb::Database),
    /// Opened by [`FileConfig::read_only`]: appends and reclaims are refused.
    Read(redb::ReadOnlyDatabase),
    /// Opened by [`FileConfig::read_only`] on a file its writer did not close: recovered as a
    /// writer recovers it, with the recovery's writes kept in memory (`overlay.rs`), so the
    /// file is read as it is and never written. Appends and reclaims are refused.
    Recovered(redb::Database),
    /// Closed (while dropping).
    Closed,
}

impl fmt::Debug for Db {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Db::Write(_) => "Db::Write",
            Db::Read(_) => "Db::Read",
            Db::Recovered(_) => "Db::Recovered",
            Db::Closed => "Db::Closed",
        })
    }
}

impl Db {
    pub(crate) fn begin_read(&self) -> Result<redb::ReadTransaction, redb::Error> {
        match self {
            Db::Write(db) | Db::Recovered(db) => Ok(db.begin_read()?),
            Db::Read(db) => Ok(db.begin_read()?),
            Db::Closed => Err(redb::Error::DatabaseClosed),
        }
    }

    /// The handle for a write transaction, or why there is none.
    pub(crate) fn writable(&self, path: &Path, operation: &'static str) -> Result<&redb::Database, FileError> {
        match self {
            Db::Write(db) => Ok(db),
            Db::Read(_) | Db::Recovered(_) => Err(FileError::ReadOnly { path: path.to_path_buf(), operation }),
            Db::Closed => Err(engine_error(path, operation, redb::Error::DatabaseClosed)),
        }
    }
}

/// Drops `db`, which closes it (a database opened for writing commits on close), catching a
/// panic the engine raises on a damaged file.
pub(crate) fn close_quietly(db: Db) {
    let _ = guard::engine(move || drop(db));
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) db: Db,
    pub(crate) path: PathBuf,
    pub(crate) partitions: u32,
    /// Set once an engine call panicked: what it said. Every later call fails with it, as the
    /// engine's state after the panic cannot be trusted.
    pub(crate) broken: Mutex<Option<String>>,
    /// Appends waiting for the next commit.
    pub(crate) queue: Mutex<Queue>,
    /// Held while writing; guards the offsets the next records get.
    pub(crate) writer: Mutex<Offsets>,
    /// Committed offsets, for callers that must not wait for a commit in progress.
    pub(crate) published: Mutex<Offsets>,
}

#[derive(Clone, Debug)]
pub(crate) struct Offsets {
    pub(crate) earliest: Vec<u64>,
    pub(crate) end: Vec<u64>,
}

#[derive(Debug, Default)]
pub(crate) struct Queue {
    /// In arrival order, which is the order they get their offsets in.
    pub(crate) pending: Vec<Pending>,
    /// Whether a [`Committer`] is running; it drains `pending` until it finds it empty.
    pub(crate) committing: bool,
}

#[derive(Debug)]
pub(crate) struct Pending {
    pub(crate) record: WireRecord,
    pub(crate) reply: oneshot::Sender<Result<Position, Arc<FileError>>>,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Shared state is only replaced after a commit succeeded, so a panic while a lock was held
    // cannot have left it half-updated.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Reads the meta record and the offsets of every partition, checking the partition count
/// against `partitions` if given. A database without the meta record is not an actionstate
/// database: only [`init`] writes one, into a file it has just created.
pub(crate) fn load(db: &Db, path: &Path, partitions: Option<u32>) -> Result<(LogIdentity, Offsets), FileError> {
    let identity = read_identity(db, path)?
        .ok_or_else(|| corrupt(path, "a redb database without the actionstate meta table".into()))?;
    if let Some(requested) = partitions.filter(|&p| p != identity.partitions) {
        return Err(FileError::PartitionsChanged { path: path.to_path_buf(), stored: identity.partitions, requested });
    }
    let offsets = read_offsets(db, path, identity.partitions)?;
    Ok((identity, offsets))
}

/// Writes the meta record and creates the tables of a database just created.
pub(crate) fn init(db: &redb::Database, path: &Path, partitions: u32) -> Result<(), FileError> {
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
pub(crate) fn read_identity(db: &Db, path: &Path) -> Result<Option<LogIdentity>, FileError> {
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

pub(crate) fn read_offsets(db: &Db, path: &Path, partitions: u32) -> Result<Offsets, FileError> {
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
    pub(crate) fn is_read_only(&self) -> bool {
        matches!(self.db, Db::Read(_) | Db::Recovered(_))
    }

    /// Runs engine work `f`, turning a panic into [`FileError::Corrupt`] and breaking the
    /// handle; on a broken handle, fails with that error without running `f`.
    pub(crate) fn guarded<T>(&self, f: impl FnOnce() -> Result<T, FileError>) -> Result<T, FileError> {
        if let Some(detail) = lock(&self.broken).clone() {
            return Err(corrupt(&self.path, detail));
        }
        guard::engine(f).unwrap_or_else(|detail| {
            *lock(&self.broken) = Some(detail.clone());
            Err(corrupt(&self.path, detail))
        })
    }
}
