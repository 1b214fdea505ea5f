//! [`FileError`]: why a data directory could not be opened or used, how the engine's errors
//! are classified into it, and how it becomes a core [`Error`].

use actionstate_core::{BackendError, Error};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Backend name used in [`LogIdentity::backend`](actionstate_core::LogIdentity::backend) and in [`BackendError`]s.
pub const BACKEND: &str = "file";

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
    /// A file its writer did not close (the writer crashed), which redb's read-only database
    /// refuses. A read-only [`FileLog::open`](crate::FileLog::open) no longer returns it: it
    /// recovers such a file in memory, without writing.
    #[error(
        "{path} was not closed cleanly (its writer crashed): open it for writing once, e.g. by \
         restarting its writer, then retry"
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
pub(crate) fn into_core(e: FileError, operation: &'static str) -> Error {
    match e {
        FileError::PartitionsChanged { path, stored, requested } => Error::LogChanged {
            expected: format!("{BACKEND}:{} ({requested} partitions)", path.display()),
            found: format!("{BACKEND}:{} ({stored} partitions)", path.display()),
        },
        FileError::ReadOnly { operation, .. } => read_only(operation),
        e => Error::Backend(BackendError::terminal(BACKEND, operation, e)),
    }
}

/// What an append or a reclaim on a read-only log returns.
pub(crate) fn read_only(operation: &'static str) -> Error {
    Error::Unsupported { backend: format!("{BACKEND} (opened read-only)"), operation }
}

pub(crate) fn open_error(path: &Path, e: redb::DatabaseError) -> FileError {
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
pub(crate) fn engine_error(path: &Path, operation: &'static str, e: redb::Error) -> FileError {
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
pub(crate) trait OrEngine<T> {
    fn or_engine(self, path: &Path, operation: &'static str) -> Result<T, FileError>;
}

impl<T, E: Into<redb::Error>> OrEngine<T> for Result<T, E> {
    fn or_engine(self, path: &Path, operation: &'static str) -> Result<T, FileError> {
        self.map_err(|e| engine_error(path, operation, e.into()))
    }
}

pub(crate) fn corrupt(path: &Path, detail: String) -> FileError {
    FileError::Corrupt { path: path.to_path_buf(), source: detail.into() }
}
