//! Opening a data directory: creating it and its database, checking what is found, the
//! read-only open and its checksum pass.

use crate::config::FileConfig;
use crate::db::{DB_FILE_NAME, Db, Inner, Queue, close_quietly, init, load};
use crate::error::{FileError, corrupt, open_error};
use crate::log::FileLog;
use crate::{guard, overlay};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

impl FileLog {
    /// Opens the log in `config.dir`, creating the directory and the database if absent (and
    /// only then: an existing file is opened as it is, never initialized). With
    /// [`FileConfig::read_only`], see there: nothing is created or written.
    ///
    /// Errors name the file or directory at fault: [`FileError::UnknownFormat`],
    /// [`FileError::Corrupt`], [`FileError::PartitionsChanged`], [`FileError::Locked`],
    /// [`FileError::Io`]. This call blocks on disk I/O.
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
            // check, run without writing, tells them apart: it recovers the first (in memory,
            // and the log reads the recovered database) and finds the second corrupt.
            Err(FileError::NeedsRecovery { path }) => {
                let db = recovered_in_memory(&path, config.cache_bytes)?;
                return FileLog::finish_open(db, path, None);
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

/// The database at `path`, whose writer did not close it (it crashed), recovered as a writer
/// recovers it (redb's integrity check, which also verifies every page) with the recovery's
/// writes kept in memory: the file is read as it is and never written, so an operator can read
/// a crashed store without changing a byte of it. No lock is held on the file: a writer that
/// opens it meanwhile recovers it for real, and what this reads may then be refused as corrupt
/// (never taken for a different store: redb checks every page it reads here).
fn recovered_in_memory(path: &Path, cache_bytes: usize) -> Result<Db, FileError> {
    let io = |source| FileError::Io { path: path.to_path_buf(), source };
    let file = std::fs::File::open(path).map_err(io)?;
    let overlay = overlay::Overlay::new(file).map_err(io)?;
    let mut builder = redb::Database::builder();
    builder.set_check_integrity_on_open(true).set_cache_size(cache_bytes);
    Ok(Db::Recovered(engine_open(path, || builder.create_with_backend(overlay))?))
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
