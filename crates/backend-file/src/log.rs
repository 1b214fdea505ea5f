//! [`FileLog`] and the [`StateLog`] contract on it.

use crate::db::{Inner, MAX_RECORD_BYTES, Pending, lock, read_identity};
use crate::error::{BACKEND, FileError, corrupt, into_core, read_only};
use crate::write::Committer;
use actionstate_core::{BackendError, Capabilities, Error, LogIdentity, Position, ReadBatch, StateLog, WireRecord};
use std::path::Path;
use std::sync::Arc;
use tokio::runtime::RuntimeFlavor;
use tokio::sync::oneshot;

/// The embedded [`StateLog`]: a partitioned log in one redb database file.
///
/// Cheap to share: wrap it in an `Arc` and call it from many tasks. Only one `FileLog` (in
/// any process) can have a directory open at a time; a second open fails with
/// [`FileError::Locked`].
#[derive(Debug)]
pub struct FileLog {
    pub(crate) inner: Arc<Inner>,
    pub(crate) identity: LogIdentity,
}

impl FileLog {
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
            let mut committer = Committer { inner: Some(self.inner.clone()) };
            match tokio::runtime::Handle::try_current() {
                // The first append to an idle log commits on its own thread: `block_in_place`
                // hands this worker's other tasks to another thread, and the put pays no hop to
                // a blocking thread and back (about 20 µs, 7% of a put; BENCHMARKS.md). What
                // queued meanwhile goes on in the background, so this caller waits for its own
                // record only. Appends joined within one task therefore commit one by one;
                // appends from several tasks share commits.
                Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
                    if tokio::task::block_in_place(|| committer.commit_next()) {
                        drop(handle.spawn_blocking(move || committer.run()));
                    }
                }
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
