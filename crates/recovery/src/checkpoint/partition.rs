//! Reading the checkpoint partition backwards from its end, window by window: how a restore
//! finds its checkpoints and how owners that share a log find their reclaim point.
//!
//! Other owners may reclaim while a window is read. A read that fails once the partition's
//! earliest offset has passed the window's start is not an error: the scan goes on from the
//! new earliest offset and stops there, as at the start of the retained log.

use actionstate_core::checkpoint::{is_commit_key, is_external_key, is_rollback_key};
use actionstate_core::{
    CHECKPOINT_KEY_LAYOUT, CheckpointCommit, CheckpointEntry, CheckpointRecord, CheckpointRollback, Error,
    ExternalCheckpoint, FENCE_KEY_LAYOUT, Fence, LogRecord, Ownership, RangeRead, ReadRecord, StateLog, codec,
};

/// A backward scan of one partition.
#[derive(Debug)]
pub(crate) struct Tail {
    partition: u32,
    /// The earliest retained offset, as last known.
    earliest: u64,
    /// Where the next window ends.
    hi: u64,
    window: u64,
    max_window: u64,
    batch: usize,
}

impl Tail {
    /// A scan of `partition` from `end` down to `earliest`, in windows of `first` offsets that
    /// grow fourfold up to `max_window`.
    pub(crate) fn new(partition: u32, earliest: u64, end: u64, first: u64, max_window: u64, batch: usize) -> Self {
        Tail { partition, earliest, hi: end, window: first.max(1), max_window: max_window.max(1), batch: batch.max(1) }
    }

    /// Where the next window ends: every offset from here to the end is read.
    pub(crate) fn position(&self) -> u64 {
        self.hi
    }

    /// The next window back, in offset order, and where it starts; `None` once the earliest
    /// retained offset is reached.
    pub(crate) async fn next<L: StateLog>(&mut self, log: &L) -> Result<Option<(u64, Vec<ReadRecord>)>, Error> {
        loop {
            if self.hi <= self.earliest {
                return Ok(None);
            }
            let lo = self.hi.saturating_sub(self.window).max(self.earliest);
            match self.read(log, lo).await {
                Ok(records) => {
                    self.hi = lo;
                    self.window = (self.window * 4).min(self.max_window);
                    return Ok(Some((lo, records)));
                }
                Err(e) => {
                    let earliest = log.earliest_offsets().await?.get(self.partition as usize).copied().unwrap_or(0);
                    if earliest <= lo {
                        return Err(e);
                    }
                    // Reclaimed meanwhile: what lies below is gone; read on from there.
                    tracing::debug!(partition = self.partition, lo, earliest, "window reclaimed while read");
                    self.earliest = earliest;
                }
            }
        }
    }

    async fn read<L: StateLog>(&self, log: &L, lo: u64) -> Result<Vec<ReadRecord>, Error> {
        let mut out = Vec::new();
        let mut range = RangeRead::new(self.partition, lo, self.hi, self.batch);
        while let Some(records) = range.next_batch(log).await? {
            out.extend(records);
        }
        Ok(out)
    }
}

/// A record of the checkpoint partition that a backward scan decides by: a fence, the commit
/// of a checkpoint, a restore's rollback, or a completed checkpoint kept outside the log
/// (which only the owners' reclaim scan reads; a restore never takes one).
#[derive(Debug)]
pub(crate) enum Landmark {
    Fence(Fence),
    Commit { owner: Ownership, epoch: u64, id: u64, body: CheckpointCommit },
    Rollback { epoch: u64, body: CheckpointRollback },
    External { owner: Ownership, epoch: u64, body: ExternalCheckpoint },
}

/// The landmarks among a window's records of `partition`, decoded, in offset order.
/// Every other record is told apart by its log key and skipped undecoded.
pub(crate) fn landmarks(partition: u32, records: Vec<ReadRecord>) -> Result<Vec<(u64, Landmark)>, Error> {
    let mut out = Vec::new();
    for r in records {
        let wanted = match r.key.first() {
            Some(&FENCE_KEY_LAYOUT) => true,
            Some(&CHECKPOINT_KEY_LAYOUT) => is_commit_key(&r.key) || is_rollback_key(&r.key) || is_external_key(&r.key),
            _ => false,
        };
        if !wanted {
            continue;
        }
        match codec::decode(&r.key, &r.value).map_err(|e| e.at(partition, r.offset))? {
            LogRecord::Fence(f) => out.push((r.offset, Landmark::Fence(f))),
            LogRecord::Checkpoint(CheckpointRecord {
                owner, epoch, id, entry: CheckpointEntry::Commit(body), ..
            }) => {
                out.push((r.offset, Landmark::Commit { owner, epoch, id, body }));
            }
            LogRecord::Checkpoint(CheckpointRecord { epoch, entry: CheckpointEntry::Rollback(body), .. }) => {
                out.push((r.offset, Landmark::Rollback { epoch, body }));
            }
            LogRecord::Checkpoint(CheckpointRecord {
                owner, epoch, entry: CheckpointEntry::External(body), ..
            }) => {
                out.push((r.offset, Landmark::External { owner, epoch, body }));
            }
            _ => {}
        }
    }
    Ok(out)
}

/// The offset of `partition` in per-partition `offsets` (0 where it has none).
pub(crate) fn offset_of(offsets: &[u64], partition: u32) -> u64 {
    offsets.get(partition as usize).copied().unwrap_or(0)
}
