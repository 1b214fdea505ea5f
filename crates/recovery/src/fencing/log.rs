//! The store's fence records in the log: appending a restore's fences, and looking for a
//! newer owner's (see `fencing/mod.rs` for the rules).

use crate::checkpoint::form::CheckpointForm;
use crate::checkpoint::partition::{FenceAt, Landmark, landmarks, offset_of};
use crate::error::{Result, StoreError};
use crate::store::ActionStateStore;
use actionstate_core::{
    CheckpointEntry, CheckpointRecord, CheckpointRollback, Fence, LogRecord, Ownership, Position, RangeRead, StateLog,
    checkpoint_key_id, codec, fence_key_id,
};
use std::sync::Arc;

/// The partition a restore fences first, before every other: where stores look for newer
/// owners. The checkpoint partition, which every owner reads anyway.
pub(crate) const FIRST_FENCED: u32 = actionstate_core::checkpoint::CHECKPOINT_PARTITION;

impl<L: StateLog, F: CheckpointForm> ActionStateStore<L, F> {
    /// Appends a fence of `groups` with `epoch` to every partition and returns where each
    /// landed: to [`FIRST_FENCED`] first, and once that one is acknowledged to the others, all
    /// at once. So a fence anywhere implies one in [`FIRST_FENCED`] before it, and a store
    /// looks for newer owners there alone ([`look_for_fences`](Self::look_for_fences)).
    ///
    /// A restore's `rollback` goes to the checkpoint partition ([`FIRST_FENCED`]) before the
    /// fence: a fence of this epoch there implies it, so whatever restore follows a crash
    /// knows the commits it abandoned.
    pub(crate) async fn append_fences(
        &self,
        groups: &Ownership,
        epoch: u64,
        rollback: Option<&CheckpointRollback>,
    ) -> Result<Vec<Position>> {
        let partitions = self.log.identity().partitions;
        if let Some(rollback) = rollback {
            let record = LogRecord::Checkpoint(CheckpointRecord {
                key: checkpoint_key_id(partitions),
                owner: groups.clone(),
                epoch,
                id: 0,
                entry: CheckpointEntry::Rollback(rollback.clone()),
            });
            self.log.append(codec::encode_by(&record, epoch)?).await?;
        }
        let fence = |p| {
            let fence = LogRecord::Fence(Fence { key: fence_key_id(p, partitions), groups: groups.clone(), epoch });
            codec::encode_by(&fence, epoch)
        };
        let mut positions = vec![Position { partition: 0, offset: 0, exact: false }; partitions as usize];
        if let Some(first) = positions.get_mut(FIRST_FENCED as usize) {
            *first = self.log.append(fence(FIRST_FENCED)?).await?;
        }
        let mut tasks = tokio::task::JoinSet::new();
        for p in (0..partitions).filter(|p| *p != FIRST_FENCED) {
            let wire = fence(p)?;
            let log = Arc::clone(&self.log);
            tasks.spawn(async move { (p, log.append(wire).await) });
        }
        let mut failed = None;
        while let Some(joined) = tasks.join_next().await {
            let (p, appended) = joined.map_err(|e| StoreError::Task(e.to_string()))?;
            match appended {
                Ok(at) => positions[p as usize] = at,
                Err(e) => failed = failed.or(Some(e)),
            }
        }
        match failed {
            Some(e) => Err(e.into()),
            None => Ok(positions),
        }
    }

    /// Whether a newer owner has fenced this store: reads partition 0 from where the store
    /// last looked to its end now, for fence records over the store's keys with a newer epoch
    /// (a restore fences partition 0 before any other, so a fence anywhere implies one there).
    /// Once one is found this fails with [`StoreError::Fenced`], and so does every later
    /// write, snapshot and check. A store that was never rebuilt has no epoch to be fenced
    /// out of and does not look.
    ///
    /// [`snapshot`](Self::snapshot) runs the same check; a runtime may call it before a side
    /// effect it wants to keep from a zombie. Its cost is a read of what every writer
    /// appended to one partition since the last look.
    ///
    /// A store whose unread history was reclaimed counts as fenced too (`fenced_by` is then
    /// `None`): only an owner of every key reclaims, and this store's own reclaims never pass
    /// what it has read, so another owner restored its keys and its fence may be gone.
    pub async fn check_fenced(&self) -> Result<()> {
        let end = self.log.end_offsets().await?;
        self.look_for_fences(&end).await
    }

    /// Marks the store fenced by `fenced_by` over the keys it shares with `groups`.
    fn fence_out(&self, groups: &Ownership, fenced_by: Option<u64>) -> Result<()> {
        let mut sh = self.shared.lock();
        let groups = sh.fencing.ownership.within(groups);
        let epoch = sh.fencing.epoch;
        tracing::error!(%groups, epoch, ?fenced_by, "fenced: a newer owner restored these key groups");
        crate::metrics::fenced();
        sh.fencing.fenced = Some((groups, fenced_by));
        // A fenced store publishes nothing more for the other owners' reclaim.
        self.reclaimer.fenced();
        sh.fencing.check()
    }

    /// [`check_fenced`](Self::check_fenced) up to `end`.
    pub(crate) async fn look_for_fences(&self, end: &[u64]) -> Result<()> {
        let (seen, ownership, epoch) = {
            let sh = self.shared.lock();
            sh.fencing.check()?;
            let Some(seen) = sh.fencing.seen.clone() else { return Ok(()) };
            (seen, sh.fencing.ownership.clone(), sh.fencing.epoch)
        };
        let earliest = self.log.earliest_offsets().await?;
        if seen.iter().zip(&earliest).any(|(s, e)| s < e) {
            return self.fence_out(&ownership, None);
        }
        let mut newer: Option<FenceAt> = None;
        let p = FIRST_FENCED;
        let (from, to) = (offset_of(&seen, p), offset_of(end, p));
        let mut range = RangeRead::new(p, from, to, self.config.read_batch.max(1));
        let mut read = Vec::new();
        while let Some(records) = range.next_batch(&*self.log).await? {
            for landmark in landmarks(p, records)? {
                if let Landmark::Fence(f) = &landmark
                    && f.epoch > epoch
                    && f.groups.overlaps(&ownership)
                    && newer.as_ref().is_none_or(|n| n.epoch < f.epoch)
                {
                    newer = Some(f.clone());
                }
                read.push(landmark);
            }
        }
        // The fences and commits read are what the next shared reclaim scan reads first.
        self.reclaimer.learn(from, to, read);
        if let Some(f) = newer {
            return self.fence_out(&f.groups, Some(f.epoch));
        }
        let mut sh = self.shared.lock();
        if let Some(seen) = sh.fencing.seen.as_mut() {
            for (s, &e) in seen.iter_mut().zip(end) {
                *s = (*s).max(e);
            }
        }
        Ok(())
    }
}
