//! Writing: group commit of appends, truncation and reclaim.

use crate::db::{EARLIEST, Inner, Offsets, Pending, RECORDS, lock};
use crate::error::{FileError, OrEngine, into_core};
use actionstate_core::{Error, Position};
use std::sync::Arc;

/// Records a reclaim deletes per transaction (appends wait for at most one).
const RECLAIM_CHUNK: u64 = 1024;

impl Inner {
    /// Commits `batch` in one transaction and publishes the new end offsets.
    pub(crate) fn commit(&self, batch: &[Pending]) -> Result<Vec<Position>, Arc<FileError>> {
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

    pub(crate) fn truncate_before(&self, partition: u32, offset: u64) -> Result<u64, Error> {
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
    pub(crate) fn reclaim(&self, before: &[u64]) -> Result<Vec<u64>, Error> {
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
}

/// Group commit: one committer at a time drains the queue, committing everything that arrived
/// during the previous commit in one transaction, until the queue is empty.
pub(crate) struct Committer {
    /// Released before the last batch is answered, so a caller that drops the log right after
    /// its append returns closes the database and can open it again at once.
    pub(crate) inner: Option<Arc<Inner>>,
}

impl Committer {
    /// Commits batches until the queue is empty.
    pub(crate) fn run(mut self) {
        while self.commit_next() {}
    }

    /// Commits the queued appends in one transaction and answers them. `false` once the queue
    /// is empty and this committer has stopped (the next append starts another); `true` while
    /// more appends wait, which this committer must commit too.
    pub(crate) fn commit_next(&mut self) -> bool {
        let Some(inner) = self.inner.clone() else { return false };
        let batch = std::mem::take(&mut lock(&inner.queue).pending);
        let result = if batch.is_empty() { Ok(Vec::new()) } else { inner.commit(&batch) };
        drop(inner);
        let more = self.more_queued();
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
        more
    }

    /// Whether appends wait; if none do, stops this committer.
    fn more_queued(&mut self) -> bool {
        let Some(inner) = self.inner.as_ref() else { return false };
        let mut queue = lock(&inner.queue);
        if !queue.pending.is_empty() {
            return true;
        }
        queue.committing = false;
        drop(queue);
        self.inner = None;
        false
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
