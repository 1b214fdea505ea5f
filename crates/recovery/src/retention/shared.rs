//! The reclaim point of stores that share a log, found incrementally: the fences and commits
//! of partition 0 that one reclaim read are kept, so that the next reads only what was
//! appended since (docs/design.md, section 6).
//!
//! Why: the scan reads back until every key group has its owner's last `keep` commits, which
//! is `keep` checkpoint intervals. Read afresh after every checkpoint of every owner, four
//! owners keeping three checkpoints read partition 0 twelve times for every time it was
//! written. Kept, each record is read once per owner.
//!
//! The landmarks kept cover one contiguous range of partition 0, `[lo, hi)`, and hold every
//! fence and commit in it, in the compact form the scan needs ([`Mark`]: no commit's metadata
//! or completed rounds). A scan feeds them to [`OwnersScan`] newest first, exactly as the
//! backward read would meet them, and reads further back only if they run out before the scan
//! is done (through the one backward reader of partition 0, [`Tail`], and its window policy);
//! what lies below the point where the scan was done is dropped. Records reclaimed since are
//! dropped with their landmarks.

use crate::checkpoint::partition::{Landmark, Mark, Tail, landmarks, offset_of};
use crate::retention::owners::{Outcome, OwnersScan};
use actionstate_core::checkpoint::CHECKPOINT_PARTITION;
use actionstate_core::{RangeRead, StateLog, WireRecord};

/// A reclaim of a store that shares its log: the point comes from the checkpoints of every
/// owner, read from the log (see `owners.rs`).
#[derive(Clone, Debug)]
pub(crate) struct SharedReclaim {
    /// The key-group count of the store's ownership.
    pub(crate) max_groups: u16,
    /// Checkpoints retained per owner.
    pub(crate) keep: usize,
    /// Records per read.
    pub(crate) read_batch: usize,
    /// Never past a record this store's index holds.
    pub(crate) local: Vec<u64>,
    /// A completed checkpoint the store's runtime keeps, to append to partition 0 before the
    /// scan ([`CheckpointEntry::External`](actionstate_core::CheckpointEntry::External)), so
    /// that the other owners learn what it needs.
    pub(crate) publish: Option<WireRecord>,
}

/// The landmarks of `[lo, hi)` of partition 0, in offset order.
#[derive(Debug, Default)]
pub(crate) struct Landmarks {
    lo: u64,
    hi: u64,
    marks: Vec<Mark>,
    /// Whether a shared scan ran: only then are reads kept, since only a scan prunes them (a
    /// store that never scans, one owning every key, would keep every fence and commit).
    scanned: bool,
}

/// The scan's form of the landmarks `found`.
fn marks(found: Vec<Landmark>) -> impl Iterator<Item = Mark> {
    found.into_iter().filter_map(Landmark::compact)
}

impl Landmarks {
    /// How many are kept (bounded by the owners' retained checkpoints and fences).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.marks.len()
    }

    /// Adds what a read of `[from, to)` found (every landmark in it, in offset order), if it
    /// continues the range kept, or starts the range with it if none is kept.
    pub(crate) fn extend(&mut self, from: u64, to: u64, read: Vec<Landmark>) {
        if !self.scanned {
            return;
        }
        if self.lo == self.hi {
            *self = Landmarks { lo: from, hi: from, marks: Vec::new(), scanned: true };
        }
        if from > self.hi || to <= self.hi {
            return;
        }
        let hi = self.hi;
        self.marks.extend(marks(read).filter(|m| m.offset() >= hi && m.offset() < to));
        self.hi = to;
    }

    /// Fits the range to a partition now holding `[earliest, end)`: what was reclaimed goes;
    /// a range the partition no longer has (another log, or a shorter one) starts over at
    /// its end.
    fn fit(&mut self, earliest: u64, end: u64) {
        if self.hi > end || self.hi < earliest || self.lo == self.hi {
            *self = Landmarks { lo: end, hi: end, marks: Vec::new(), scanned: true };
            return;
        }
        self.marks.retain(|m| m.offset() >= earliest);
        self.lo = self.lo.max(earliest);
        self.scanned = true;
    }
}

/// The reclaim point of stores sharing `log`, from the landmarks kept in `kept` and what was
/// appended to partition 0 since (see the module's documentation). On error, `kept` is left
/// empty: the next scan reads afresh.
pub(crate) async fn shared_point<L: StateLog>(
    log: &L,
    job: &SharedReclaim,
    kept: &mut Landmarks,
) -> Result<Outcome, actionstate_core::Error> {
    let outcome = scan(log, job, kept).await;
    if outcome.is_err() {
        *kept = Landmarks::default();
    }
    outcome
}

async fn scan<L: StateLog>(
    log: &L,
    job: &SharedReclaim,
    cache: &mut Landmarks,
) -> Result<Outcome, actionstate_core::Error> {
    let p = CHECKPOINT_PARTITION;
    let (earliest, end) = log.offsets().await?;
    let (earliest, end) = (offset_of(&earliest, p), offset_of(&end, p));
    cache.fit(earliest, end);
    // What was appended since the last scan, read forwards.
    let mut range = RangeRead::new(p, cache.hi, end, job.read_batch.max(1));
    while let Some(records) = range.next_batch(log).await? {
        cache.marks.extend(marks(landmarks(p, records)?));
    }
    cache.hi = end;
    let mut scan = OwnersScan::new(job.max_groups, job.keep);
    let mut done_at = None;
    for mark in cache.marks.iter().rev() {
        scan.meet(mark);
        if scan.done(mark.offset()) {
            done_at = Some(mark.offset());
            break;
        }
    }
    let lo = match done_at {
        Some(at) => at,
        None if scan.done(cache.lo) => cache.lo,
        // Not enough kept: read further back, as a scan without them does.
        None => {
            let mut tail = Tail::new(p, earliest, cache.lo, job.read_batch);
            while !scan.done(tail.position()) {
                let Some((lo, records)) = tail.next(log).await? else { break };
                let older: Vec<Mark> = marks(landmarks(p, records)?).collect();
                for mark in older.iter().rev() {
                    scan.meet(mark);
                }
                cache.marks.splice(0..0, older);
                cache.lo = lo;
            }
            tail.position()
        }
    };
    // The next scan needs nothing older: it meets the same landmarks, and newer ones first.
    cache.marks.retain(|m| m.offset() >= lo);
    cache.lo = lo;
    Ok(scan.finish())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;
    use crate::checkpoint::partition::FenceAt;
    use actionstate_core::{
        CheckpointCommit, CheckpointEntry, CheckpointRecord, LogRecord, Marker, Ownership, checkpoint_key_id, codec,
    };
    use actionstate_memory::MemoryLog;

    fn groups(owned: std::ops::Range<u16>) -> Ownership {
        Ownership::Groups { max_groups: 4, owned }
    }

    async fn commit(log: &MemoryLog, owner: Ownership, epoch: u64, id: u64, offsets: Vec<u64>) {
        let from = offset_of(&log.end_offsets().await.unwrap(), 0);
        let marker = Marker::new(log.identity().clone(), offsets);
        let body = CheckpointCommit { marker, metadata: Vec::new(), completed: Vec::new(), parts: 0, from };
        let record = LogRecord::Checkpoint(CheckpointRecord {
            key: checkpoint_key_id(2),
            owner,
            epoch,
            id,
            entry: CheckpointEntry::Commit(body),
        });
        log.append(codec::encode_by(&record, epoch).unwrap()).await.unwrap();
    }

    /// The point found with the landmarks kept equals the one a scan without them finds, and
    /// the landmarks kept stay bounded as checkpoints go on.
    #[tokio::test]
    async fn kept_landmarks_give_the_point_a_fresh_scan_gives_and_stay_bounded() {
        let log = MemoryLog::new(2);
        let job = SharedReclaim { max_groups: 4, keep: 2, read_batch: 7, local: vec![u64::MAX; 2], publish: None };
        let mut kept = Landmarks::default();
        kept.extend(0, 1, vec![Landmark::Fence(FenceAt { offset: 0, groups: groups(0..4), epoch: 1 })]);
        assert_eq!((kept.len(), kept.hi), (0, 0), "a store that never scanned keeps nothing");
        let mut most = 0;
        for n in 0..40u64 {
            let owner = if n % 2 == 0 { groups(0..2) } else { groups(2..4) };
            commit(&log, owner, 3, n + 1, vec![n, n / 2]).await;
            let incremental = shared_point(&log, &job, &mut kept).await.unwrap();
            let fresh = shared_point(&log, &job, &mut Landmarks::default()).await.unwrap();
            assert_eq!(incremental, fresh, "after commit {n}");
            most = most.max(kept.len());
        }
        assert_eq!(shared_point(&log, &job, &mut kept).await.unwrap(), Outcome::Reclaim(vec![36, 18]));
        assert!(most <= 6, "{most} landmarks kept for two owners keeping two checkpoints each");

        // A rescale to one owner (its fence, epoch 5), a late commit of a replaced owner, then
        // the new owner's commits: the same decisions at every step.
        let fence =
            LogRecord::Fence(actionstate_core::Fence { key: checkpoint_key_id(2), groups: groups(0..4), epoch: 5 });
        log.append(codec::encode_by(&fence, 5).unwrap()).await.unwrap();
        let steps: [(Ownership, u64); 4] = [(groups(0..2), 3), (groups(0..4), 5), (groups(0..4), 5), (groups(0..4), 5)];
        for (i, (owner, epoch)) in (40u64..).zip(steps) {
            let before = shared_point(&log, &job, &mut kept).await.unwrap();
            assert_eq!(before, shared_point(&log, &job, &mut Landmarks::default()).await.unwrap(), "before {i}");
            commit(&log, owner, epoch, i + 1, vec![i, i / 2]).await;
        }
        let last = shared_point(&log, &job, &mut kept).await.unwrap();
        assert_eq!(last, shared_point(&log, &job, &mut Landmarks::default()).await.unwrap());
        assert_eq!(last, Outcome::Reclaim(vec![42, 21]), "the new owner's last two checkpoints alone count");

        // What a look read forwards continues the range; a read past a gap is not taken.
        let end = offset_of(&log.end_offsets().await.unwrap(), 0);
        commit(&log, groups(0..4), 5, 45, vec![44, 22]).await;
        let read =
            crate::checkpoint::partition::landmarks(0, log.read(0, end, end + 1, 10).await.unwrap().records).unwrap();
        kept.extend(end + 1, end + 2, Vec::new());
        assert_eq!(kept.hi, end, "a gap is not bridged");
        kept.extend(end, end + 1, read);
        assert_eq!((kept.hi, kept.marks.last().map(Mark::offset)), (end + 1, Some(end)));
        let after = shared_point(&log, &job, &mut kept).await.unwrap();
        assert_eq!(after, shared_point(&log, &job, &mut Landmarks::default()).await.unwrap());
        assert_eq!(after, Outcome::Reclaim(vec![43, 21]));
    }
}
