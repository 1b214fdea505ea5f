//! The one reader of the checkpoint partition (partition 0): backwards from its end, window by
//! window, how a restore finds its checkpoints and how owners that share a log find their
//! reclaim point; what it decides by (its [`Landmark`]s, and their compact form [`Mark`]); and
//! the rule that voids a replaced owner's commit ([`CommitAt::voided_by`]).
//!
//! One window policy serves both readers: the first window is [`FIRST_WINDOW`] offsets, each
//! further one four times larger, up to [`MAX_WINDOW`]. A restore usually finds its commit near
//! the end, so it starts small; the shared reclaim reads back only once the landmarks it keeps
//! run out, and the windows grow as it goes.
//!
//! Other owners may reclaim while a window is read. A read that fails once the partition's
//! earliest offset has passed the window's start is not an error: the scan goes on from the
//! new earliest offset and stops there, as at the start of the retained log.

use actionstate_core::checkpoint::{is_commit_key, is_external_key, is_rollback_key};
use actionstate_core::{
    CHECKPOINT_KEY_LAYOUT, CheckpointCommit, CheckpointEntry, CheckpointRecord, CheckpointRollback, Error,
    FENCE_KEY_LAYOUT, LogRecord, Ownership, RangeRead, ReadRecord, StateLog, codec,
};

/// The first window of a backward read, in offsets; each further one is four times larger, up
/// to [`MAX_WINDOW`].
pub(crate) const FIRST_WINDOW: u64 = 32;
/// The largest window of a backward read, in offsets.
pub(crate) const MAX_WINDOW: u64 = 65_536;

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
    /// A scan of `partition` from `end` down to `earliest`, in windows of [`FIRST_WINDOW`]
    /// offsets that grow fourfold up to [`MAX_WINDOW`], reading `batch` records at a time.
    pub(crate) fn new(partition: u32, earliest: u64, end: u64, batch: usize) -> Self {
        Tail { partition, earliest, hi: end, window: FIRST_WINDOW, max_window: MAX_WINDOW, batch: batch.max(1) }
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

/// A fence of the checkpoint partition: where it lies, the key groups it fences, and the epoch
/// of the owner that appended it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FenceAt {
    pub(crate) offset: u64,
    pub(crate) groups: Ownership,
    pub(crate) epoch: u64,
}

/// A checkpoint's commit in the checkpoint partition, in the compact form both a restore and
/// the owners' reclaim judge it by: where it lies, its owner's keys and epoch, its id, the end
/// offset of the partition its snapshot read (`from`), and its marker's offsets. A completed
/// checkpoint its runtime keeps ([`CheckpointEntry::External`]) has the same. A restore pairs
/// it with the commit's full body ([`Landmark::Commit`]) where it needs the metadata, the
/// completed rounds or the parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CommitAt {
    pub(crate) offset: u64,
    pub(crate) owner: Ownership,
    pub(crate) epoch: u64,
    pub(crate) id: u64,
    pub(crate) from: u64,
    pub(crate) offsets: Vec<u64>,
}

impl CommitAt {
    /// The void rule: a fence of a newer epoch over keys of the commit's owner, lying in
    /// `[from, offset)`, voids the commit: its owner was replaced while writing it (a zombie's
    /// late checkpoint). An owner not replaced by then read every fence below `from` at its
    /// snapshot (a newer one would have failed it), so a fence anywhere else says nothing of
    /// this commit (docs/design.md, sections 5.6 and 6).
    pub(crate) fn voided_by(&self, fence: &FenceAt) -> bool {
        (self.from..self.offset).contains(&fence.offset)
            && fence.epoch > self.epoch
            && fence.groups.overlaps(&self.owner)
    }
}

/// A record of the checkpoint partition that a backward scan decides by: a fence, the commit
/// of a checkpoint (with its full body), a restore's rollback, or a completed checkpoint kept
/// outside the log (which only the owners' reclaim scan reads; a restore never takes one).
#[derive(Debug)]
pub(crate) enum Landmark {
    Fence(FenceAt),
    Commit(CommitAt, CheckpointCommit),
    Rollback { offset: u64, epoch: u64, body: CheckpointRollback },
    External(CommitAt),
}

/// A landmark in the compact form the owners' reclaim scan reads and keeps: a fence, or a
/// checkpoint's commit without its metadata or completed rounds (a rollback tells that scan
/// nothing: the fence after it already keeps the commits it abandoned from counting).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Mark {
    Fence(FenceAt),
    Commit(CommitAt),
}

impl Landmark {
    /// Its compact form, if the owners' scan reads it: a checkpoint its runtime keeps counts
    /// as a commit does (its record holds the same owner, epoch, marker and `from`).
    pub(crate) fn compact(self) -> Option<Mark> {
        match self {
            Landmark::Fence(f) => Some(Mark::Fence(f)),
            Landmark::Commit(c, _) | Landmark::External(c) => Some(Mark::Commit(c)),
            Landmark::Rollback { .. } => None,
        }
    }
}

impl Mark {
    /// Its offset in the checkpoint partition.
    pub(crate) fn offset(&self) -> u64 {
        match self {
            Mark::Fence(f) => f.offset,
            Mark::Commit(c) => c.offset,
        }
    }
}

/// The landmarks among a window's records of `partition`, decoded, in offset order.
/// Every other record is told apart by its log key and skipped undecoded.
pub(crate) fn landmarks(partition: u32, records: Vec<ReadRecord>) -> Result<Vec<Landmark>, Error> {
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
        let offset = r.offset;
        match codec::decode(&r.key, &r.value).map_err(|e| e.at(partition, offset))? {
            LogRecord::Fence(f) => out.push(Landmark::Fence(FenceAt { offset, groups: f.groups, epoch: f.epoch })),
            LogRecord::Checkpoint(CheckpointRecord {
                owner, epoch, id, entry: CheckpointEntry::Commit(body), ..
            }) => {
                let (from, offsets) = (body.from, body.marker.offsets.clone());
                out.push(Landmark::Commit(CommitAt { offset, owner, epoch, id, from, offsets }, body));
            }
            LogRecord::Checkpoint(CheckpointRecord { epoch, entry: CheckpointEntry::Rollback(body), .. }) => {
                out.push(Landmark::Rollback { offset, epoch, body });
            }
            LogRecord::Checkpoint(CheckpointRecord {
                owner,
                epoch,
                id,
                entry: CheckpointEntry::External(body),
                ..
            }) => {
                let (from, offsets) = (body.from, body.marker.offsets);
                out.push(Landmark::External(CommitAt { offset, owner, epoch, id, from, offsets }));
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
