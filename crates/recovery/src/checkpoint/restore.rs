//! Restore from the log: find an ownership's latest complete checkpoint (or a named one) by
//! reading the checkpoint partition backwards from its end, load its parts, and rebuild from
//! its marker (docs/design.md, section 5.6).
//!
//! Which checkpoint serves a key group: the newest valid commit in the log whose owner holds
//! the group. A commit is void when a fence with a newer epoch over its owner's keys lies
//! between the offset its snapshot read ([`CheckpointCommit::from`]) and the commit
//! ([`CommitAt::voided_by`], the rule the owners' reclaim applies too): its owner was replaced
//! while writing it (a zombie's late checkpoint). An owner that was not replaced by then has
//! read every fence below `from` at its snapshot (a newer one would have failed it), so no
//! checkpoint of a newer owner of its keys lies before its commit: the first valid commit met
//! going backwards is the newest owner's newest checkpoint.
//!
//! A restore of a checkpoint older than the newest valid one of its keys abandons the commits
//! after it. It writes a rollback record naming the commits it restored before its fence
//! ([`CheckpointRollback`]), and a commit of an older epoch that lies between a restored
//! commit of its keys and a rollback record is void too: without it, a `Latest` restore after
//! a crash, before the restoring owner checkpointed, would take the abandoned line's newest.

use crate::checkpoint::coverage::{Coverage, Taken};
use crate::checkpoint::floors::Floors;
use crate::checkpoint::form::{CheckpointForm, InLog, TwoPhase, sealed};
use crate::checkpoint::partition::{CommitAt, FenceAt, Landmark, Tail, landmarks, offset_of};
use crate::checkpoint::rebuild::RebuildReport;
use crate::error::{Result, StoreError};
use crate::store::ActionStateStore;
use crate::store::config::StoreConfig;
use crate::store::vocab::Snapshot;
use actionstate_core::checkpoint::{CHECKPOINT_PARTITION, is_commit_key};
use actionstate_core::{
    CHECKPOINT_KEY_LAYOUT, CheckpointCommit, CheckpointEntry, CheckpointRecord, CheckpointRollback, KeyId, LogRecord,
    Marker, Ownership, RangeRead, StateLog, codec,
};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::Future;

/// Which checkpoint [`ActionStateStore::restore`] restores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestoreFrom {
    /// The latest complete checkpoint of every key group owned; groups without one replay
    /// the whole retained log.
    Latest,
    /// The checkpoint of this id, for every key group owned (an error if one lacks it).
    Checkpoint(u64),
}

/// A checkpoint a restore read ([`Restored::from`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestoredCheckpoint {
    /// Its id.
    pub id: u64,
    /// The keys of the owner that wrote it.
    pub owner: Ownership,
    /// That owner's writer epoch.
    pub epoch: u64,
    /// The offset of its commit in the checkpoint partition.
    pub offset: u64,
    /// Its covering marker.
    pub marker: Marker,
    /// The metadata it was written with.
    pub metadata: Vec<u8>,
}

/// What [`ActionStateStore::restore`] found and rebuilt.
#[derive(Clone, Debug, PartialEq)]
pub struct Restored {
    /// The checkpoints restored, newest first: one, or one per former owner after a rescale;
    /// none when the log holds no checkpoint of the keys owned (a fresh start).
    pub from: Vec<RestoredCheckpoint>,
    /// Whether some owned key groups had no checkpoint and were replayed from the earliest
    /// retained records (all of them on a fresh start): their inputs start from the beginning.
    pub from_earliest: bool,
    /// Records of the checkpoint partition read to find and load the checkpoints.
    pub scanned: u64,
    /// The rebuild from the checkpoints' markers.
    pub rebuild: RebuildReport,
}

impl Restored {
    /// The metadata of the checkpoint restored, when one checkpoint covers every key owned
    /// (`None` on a fresh start, and after a rescale combined several: see
    /// [`from`](Self::from)).
    pub fn metadata(&self) -> Option<&[u8]> {
        match self.from.as_slice() {
            [only] if !self.from_earliest => Some(&only.metadata),
            _ => None,
        }
    }

    /// [`metadata`](Self::metadata) decoded as the value
    /// [`checkpoint_with`](ActionStateStore::checkpoint_with) wrote: `Ok(None)` where
    /// `metadata` is `None`, [`StoreError::Metadata`] when the bytes do not decode as a `T`.
    pub fn metadata_as<T: serde::de::DeserializeOwned>(&self) -> Result<Option<T>> {
        let Some(bytes) = self.metadata() else { return Ok(None) };
        postcard::from_bytes(bytes).map(Some).map_err(|e| StoreError::Metadata {
            type_name: std::any::type_name::<T>(),
            len: bytes.len(),
            detail: e.to_string(),
        })
    }
}

/// A commit read from the checkpoint partition, with its full body.
type Commit = (CommitAt, CheckpointCommit);

/// What the backward scan chose.
struct Found {
    chosen: Vec<(Commit, Taken)>,
    uncovered: bool,
    scanned: u64,
    newest_id: u64,
    /// Whether a valid commit of owned keys newer than the one chosen was passed over (a
    /// named checkpoint older than the newest): the restore then abandons it.
    passed_over: bool,
}

/// What a backward scan knows that can void a commit met later (at a smaller offset).
#[derive(Default)]
struct Voiding {
    /// Fences of partition 0: their offset there, their keys, their epoch. From the fence
    /// records read, and from the fence marks of the commits read (a fence record below the
    /// earliest offset is gone, but the commits of the owner that appended it still name it).
    fences: Vec<FenceAt>,
    /// Rollback records: their offset, their writer's epoch, what they restored.
    rollbacks: Vec<(u64, u64, CheckpointRollback)>,
}

impl Voiding {
    /// Learns what `landmark` can void, and hands back the commit it is, if it is one.
    fn meet(&mut self, landmark: Landmark) -> Option<Commit> {
        match landmark {
            Landmark::Fence(f) => self.fences.push(f),
            Landmark::Commit(commit, body) => {
                for mark in &body.marker.fences {
                    let offset = offset_of(&mark.offsets, CHECKPOINT_PARTITION);
                    self.fences.push(FenceAt { offset, groups: mark.groups.clone(), epoch: mark.epoch });
                }
                return Some((commit, body));
            }
            Landmark::Rollback { offset, epoch, body } => self.rollbacks.push((offset, epoch, body)),
            // A checkpoint its runtime keeps: restored with `rebuild` from what the runtime
            // kept, never from the log, so a store cannot mix the two forms.
            Landmark::External(_) => {}
        }
        None
    }

    /// Whether `c`'s owner was replaced while it wrote it (a zombie's late checkpoint).
    fn replaced(&self, c: &CommitAt) -> bool {
        self.fences.iter().any(|f| c.voided_by(f))
    }

    /// Whether a later restore of older checkpoints abandoned `c`.
    fn abandoned(&self, c: &CommitAt) -> bool {
        self.rollbacks.iter().any(|(at, epoch, r)| *at > c.offset && *epoch > c.epoch && r.abandons(c.offset, &c.owner))
    }
}

impl<L: StateLog, F: CheckpointForm> ActionStateStore<L, F> {
    /// Opens a store on `log` for the keys of `ownership` and restores it: the one way in
    /// after a restart. What it restores from chooses the store's [checkpoint form](crate::CheckpointForm):
    ///
    /// - [`RestoreFrom::Latest`] or [`RestoreFrom::Checkpoint`]: the checkpoints the store
    ///   wrote into the log ([`InLog`](crate::InLog)). For every owned key group, the latest
    ///   complete checkpoint that holds it (or the one named by id); groups without one replay
    ///   the whole retained log ([`Restored::from_earliest`]); on a log without any, that is a
    ///   fresh start. Finding reads only the checkpoint partition, backwards from its end
    ///   ([`Restored::scanned`]). [`Restored::from`] holds each checkpoint's metadata.
    /// - The [`Snapshot`](crate::Snapshot)s a runtime that keeps its own checkpoints kept
    ///   ([`TwoPhase`](crate::TwoPhase)): one, several after a rescale (each former owner's),
    ///   or none for a fresh start.
    ///
    /// The rebuild merges the checkpoints' markers (minimum per partition), checks them
    /// against the log (changed log, unknown partition, offset beyond the end, offset below
    /// the earliest retained one are errors naming partition and offsets), reads every
    /// partition from there to its end, partitions in parallel, keeps the keys owned, and
    /// prunes the rounds the checkpoints completed ([`Restored::rebuild`]). An invalidation
    /// a crash cut short is replayed whole, its missing tombstones queued for the key's next
    /// write.
    ///
    /// The store then takes a new owner epoch for `ownership` and appends a fence to every
    /// partition (unless [`StoreConfig::fence_on_rebuild`] is off): nothing an earlier owner
    /// of these keys appends afterwards is replayed, and that owner's next checkpoint fails
    /// with [`StoreError::Fenced`]. On error nothing is left running on the log: the caller
    /// may open it again at once.
    #[tracing::instrument(name = "actionstate.restore", level = "info", skip_all, fields(actionstate.ownership = %ownership))]
    pub async fn restore<P: RestorePoint<Form = F>>(
        log: L,
        config: StoreConfig,
        ownership: &Ownership,
        from: P,
    ) -> Result<(Self, Restored)> {
        let store = ActionStateStore::empty(log, config);
        // Boxed: a restore nests the rebuild's futures deep enough that a caller's own future
        // around it could pass the compiler's default layout depth; one allocation per restore
        // keeps every caller clear of it.
        let restored = Box::pin(from.restore_into(&store, ownership)).await?;
        // Resolves other processes asked for while the owner was away. A store that does not
        // fence is not an owner (an operator's view, a read-only one): it writes nothing it
        // was not asked to, and leaves them to `poll_resolutions`.
        if store.config.fence_on_rebuild {
            Box::pin(store.settle_found()).await?;
        }
        Ok((store, restored))
    }

    /// The in-log half of [`restore`](Self::restore): finds the checkpoints in the
    /// checkpoint partition, reading backwards from its end to the newest valid commit of each
    /// owned group and the records its checkpoint appended before it (what was appended to
    /// that partition since, not the log's history), and rebuilds from their markers.
    pub(crate) async fn restore_from_log(&self, ownership: &Ownership, from: RestoreFrom) -> Result<Restored> {
        let found = self.find_checkpoints(ownership, from).await?;
        let mut scanned = found.scanned;
        let mut markers = Vec::new();
        let mut completed: HashMap<KeyId, u64> = HashMap::new();
        let mut restored = Vec::new();
        let mut floors = Floors::default();
        for ((commit, body), taken) in found.chosen {
            let (entries, read) = self.load_parts(&commit, &body).await?;
            scanned += read;
            completed
                .extend(body.completed.iter().chain(&entries).filter(|(k, _)| taken.holds(k)).map(|(k, s)| (*k, *s)));
            markers.push(body.marker.clone());
            floors.push(taken, commit.offsets);
            restored.push(RestoredCheckpoint {
                id: commit.id,
                owner: commit.owner,
                epoch: commit.epoch,
                offset: commit.offset,
                marker: body.marker,
                metadata: body.metadata,
            });
        }
        if found.uncovered {
            let earliest = self.log.earliest_offsets().await?;
            markers.push(Marker::new(self.log.identity().clone(), earliest));
        }
        let rollback = found.passed_over.then(|| CheckpointRollback {
            restored: restored.iter().map(|r| (r.offset, r.owner.within(ownership))).collect(),
        });
        let rebuild = self.rebuild_from(&markers, ownership, &completed, floors, rollback).await?;
        *self.log_checkpoint.lock().await = found.newest_id;
        tracing::info!(checkpoints = restored.len(), from_earliest = found.uncovered, scanned, "restored from the log");
        Ok(Restored { from: restored, from_earliest: found.uncovered, scanned, rebuild })
    }

    /// Reads the checkpoint partition backwards, window by window, until every owned group
    /// has its checkpoint or the earliest retained record is reached.
    async fn find_checkpoints(&self, ownership: &Ownership, from: RestoreFrom) -> Result<Found> {
        let p = CHECKPOINT_PARTITION;
        let (earliest, end) = self.log.offsets().await?;
        let (lo_limit, end) = (offset_of(&earliest, p), offset_of(&end, p));
        let mut coverage = Coverage::new(ownership);
        let mut found = Found { chosen: Vec::new(), uncovered: false, scanned: 0, newest_id: 0, passed_over: false };
        let mut pending: VecDeque<Commit> = VecDeque::new();
        let mut voiding = Voiding::default();
        let mut tail = Tail::new(p, lo_limit, end, self.config.read_batch);
        while !coverage.done() {
            let Some((lo, records)) = tail.next(&*self.log).await? else { break };
            found.scanned += records.len() as u64;
            let mut commits = Vec::new();
            for landmark in landmarks(p, records)? {
                commits.extend(voiding.meet(landmark));
            }
            for c in commits.into_iter().rev() {
                if c.0.owner.overlaps(ownership) {
                    pending.push_back(c);
                }
            }
            // A commit is judged once the scan has read back to where its snapshot was taken
            // (the fences that could void it lie there), newest first.
            while pending.front().is_some_and(|(c, _)| c.from >= lo) {
                let Some(c) = pending.pop_front() else { break };
                self.judge(c, &voiding, from, ownership, &mut coverage, &mut found)?;
            }
        }
        // At the earliest record: the fences that could void what is left were reclaimed,
        // and with them the records those commits' owners were replaced by.
        while let Some(c) = pending.pop_front() {
            self.judge(c, &voiding, from, ownership, &mut coverage, &mut found)?;
        }
        if !coverage.done() {
            match from {
                RestoreFrom::Latest => found.uncovered = true,
                RestoreFrom::Checkpoint(id) => {
                    return Err(StoreError::CheckpointNotFound {
                        id,
                        ownership: ownership.clone(),
                        partition: p,
                        earliest: lo_limit,
                        end,
                    });
                }
            }
        }
        Ok(found)
    }

    /// Chooses commit `c` for the owned groups it holds that still need a checkpoint, unless
    /// it is void or not the one asked for.
    fn judge(
        &self,
        (c, body): Commit,
        voiding: &Voiding,
        from: RestoreFrom,
        ownership: &Ownership,
        coverage: &mut Coverage,
        found: &mut Found,
    ) -> Result<()> {
        if voiding.replaced(&c) {
            tracing::info!(id = c.id, epoch = c.epoch, offset = c.offset, "checkpoint of a replaced owner skipped");
            return Ok(());
        }
        // Ids go on from the newest checkpoint of these keys, abandoned ones included (their
        // ids were handed out), but not a replaced owner's (its id says nothing).
        found.newest_id = found.newest_id.max(c.id);
        if voiding.abandoned(&c) {
            tracing::info!(id = c.id, epoch = c.epoch, offset = c.offset, "checkpoint of an abandoned line skipped");
            return Ok(());
        }
        if matches!(from, RestoreFrom::Checkpoint(id) if id != c.id) {
            found.passed_over |= !coverage.done();
            return Ok(());
        }
        let taken = coverage.take(&c.owner).map_err(|()| StoreError::MixedKeyGroups {
            id: c.id,
            owner: c.owner.clone(),
            ownership: ownership.clone(),
            partition: CHECKPOINT_PARTITION,
            offset: c.offset,
        })?;
        if let Some(taken) = taken {
            found.chosen.push(((c, body), taken));
        }
        Ok(())
    }

    /// The completed rounds in the parts of `commit` (whose body is `body`), and the records
    /// read to find them.
    async fn load_parts(&self, commit: &CommitAt, body: &CheckpointCommit) -> Result<(Vec<(KeyId, u64)>, u64)> {
        if body.parts == 0 {
            return Ok((Vec::new(), 0));
        }
        let p = CHECKPOINT_PARTITION;
        let mut parts: BTreeMap<u32, Vec<(KeyId, u64)>> = BTreeMap::new();
        let mut read = 0;
        let mut range = RangeRead::new(p, commit.from, commit.offset, self.config.read_batch.max(1));
        while let Some(records) = range.next_batch(&*self.log).await? {
            read += records.len() as u64;
            for r in records {
                if r.key.first() != Some(&CHECKPOINT_KEY_LAYOUT) || is_commit_key(&r.key) {
                    continue;
                }
                if let LogRecord::Checkpoint(CheckpointRecord {
                    owner,
                    epoch,
                    id,
                    entry: CheckpointEntry::Part { index, completed },
                    ..
                }) = codec::decode(&r.key, &r.value).map_err(|e| e.at(p, r.offset))?
                    && owner == commit.owner
                    && epoch == commit.epoch
                    && id == commit.id
                    && index < body.parts
                {
                    parts.entry(index).or_insert(completed);
                }
            }
        }
        let found = u32::try_from(parts.len()).unwrap_or(u32::MAX);
        if found != body.parts {
            return Err(StoreError::CheckpointIncomplete {
                id: commit.id,
                owner: commit.owner.clone(),
                epoch: commit.epoch,
                partition: p,
                offset: commit.offset,
                from: commit.from,
                expected: body.parts,
                found,
            });
        }
        Ok((parts.into_values().flatten().collect(), read))
    }
}

/// What a [`restore`](ActionStateStore::restore) starts from; its [`Form`](Self::Form) is the
/// form of the store it opens. Implemented by [`RestoreFrom`] (the checkpoints in the log) and
/// by the [`Snapshot`]s a two-phase runtime kept (`&[Snapshot]`, `&[Snapshot; N]`,
/// `Vec<Snapshot>`; none: a fresh start that replays the whole retained log; several: the
/// checkpoints of every former owner of the keys after a rescale).
pub trait RestorePoint: sealed::Sealed {
    /// The form of the store restored.
    type Form: CheckpointForm;

    /// Restores `store`, newly created, for `ownership`.
    #[doc(hidden)]
    fn restore_into<L: StateLog>(
        self,
        store: &ActionStateStore<L, Self::Form>,
        ownership: &Ownership,
    ) -> impl Future<Output = Result<Restored>> + Send;
}

impl sealed::Sealed for RestoreFrom {}

impl RestorePoint for RestoreFrom {
    type Form = InLog;

    fn restore_into<L: StateLog>(
        self,
        store: &ActionStateStore<L, InLog>,
        ownership: &Ownership,
    ) -> impl Future<Output = Result<Restored>> + Send {
        store.restore_from_log(ownership, self)
    }
}

impl sealed::Sealed for &[Snapshot] {}

impl RestorePoint for &[Snapshot] {
    type Form = TwoPhase;

    fn restore_into<L: StateLog>(
        self,
        store: &ActionStateStore<L, TwoPhase>,
        ownership: &Ownership,
    ) -> impl Future<Output = Result<Restored>> + Send {
        let markers: Vec<Marker> = self.iter().map(|s| s.marker.clone()).collect();
        // The last completed round of a key, over every snapshot given (after a rescale, each
        // former owner's snapshot holds its own keys).
        let mut completed: HashMap<KeyId, u64> = HashMap::new();
        for s in self {
            for (key, seq) in s.completed.iter() {
                let last = completed.entry(*key).or_insert(*seq);
                *last = (*last).max(*seq);
            }
        }
        let fresh = self.is_empty();
        async move {
            let rebuild = store.rebuild(&markers, ownership, &completed).await?;
            Ok(Restored { from: Vec::new(), from_earliest: fresh, scanned: 0, rebuild })
        }
    }
}

impl<const N: usize> sealed::Sealed for &[Snapshot; N] {}

impl<const N: usize> RestorePoint for &[Snapshot; N] {
    type Form = TwoPhase;

    fn restore_into<L: StateLog>(
        self,
        store: &ActionStateStore<L, TwoPhase>,
        ownership: &Ownership,
    ) -> impl Future<Output = Result<Restored>> + Send {
        self.as_slice().restore_into(store, ownership)
    }
}

impl sealed::Sealed for Vec<Snapshot> {}

impl RestorePoint for Vec<Snapshot> {
    type Form = TwoPhase;

    async fn restore_into<L: StateLog>(
        self,
        store: &ActionStateStore<L, TwoPhase>,
        ownership: &Ownership,
    ) -> Result<Restored> {
        self.as_slice().restore_into(store, ownership).await
    }
}
