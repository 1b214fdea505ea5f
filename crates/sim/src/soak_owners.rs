//! The soak workload with several owners sharing one log: each store owns a range of key
//! groups, takes the conversations of its keys, and writes its checkpoints into the log with
//! its input count as metadata, so that retention runs from the checkpoints of every owner
//! (docs/design.md, section 6). Optionally, halfway through, every owner checkpoints and
//! stops and a new split of the groups restores from the log and goes on: a rescale.
//!
//! In the two-phase form the soak is the runtime that keeps the checkpoints, as Flink is:
//! each owner snapshots and completes at once, the soak keeps the snapshots of its last
//! checkpoints ([`Kept`]), and a rescale restores each new owner from the newest snapshots of
//! the former owners of its groups.

use crate::soak::{Lane, LaneCheckpoints, Lanes, Sampler, SoakConfig, SoakReport, SoakSample, Workers, WrittenToLog};
use actionstate_core::StateLog;
use actionstate_recovery::{
    ActionStateStore, CheckpointForm, InLog, Ownership, RestoreFrom, Retention, Snapshot, StoreConfig, StoreError,
    TwoPhase,
};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The key groups the soak's owners split among themselves.
pub const SOAK_GROUPS: u16 = 128;

/// How many owners share the log, and how many take over halfway.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fleet {
    /// Owners from the start.
    pub owners: u16,
    /// Owners after the rescale halfway, if any.
    pub rescale_to: Option<u16>,
    /// Whether the soak keeps the checkpoints (`snapshot` / `checkpoint_complete`, restored
    /// from the snapshots it kept) instead of the owners writing them into the log.
    pub two_phase: bool,
}

/// The snapshots the runtime keeps of one owner's last checkpoints, newest last: as many as
/// retention keeps (what a restore may go back to), so bounded by them and by the live work
/// each names.
#[derive(Debug)]
pub struct Kept {
    snapshots: Mutex<VecDeque<Snapshot>>,
    keep: usize,
}

impl Kept {
    fn new(retention: Retention) -> Self {
        let keep = match retention {
            Retention::LastCheckpoints(n) => usize::try_from(n.max(1)).unwrap_or(usize::MAX),
            Retention::KeepAll => 1,
        };
        Kept { snapshots: Mutex::new(VecDeque::new()), keep }
    }

    /// Checkpoint `id` of `store`: the snapshot, kept, then completed at once, as a runtime
    /// whose own checkpoint is durable by then does. Returns the keys it names.
    pub(crate) async fn checkpoint<L: StateLog>(
        &self,
        store: &ActionStateStore<L, TwoPhase>,
        id: u64,
    ) -> Result<usize, StoreError> {
        let snapshot = store.snapshot(id).await?;
        let entries = snapshot.completed.len();
        {
            let mut kept = self.snapshots.lock();
            kept.push_back(snapshot);
            while kept.len() > self.keep {
                kept.pop_front();
            }
        }
        store.checkpoint_complete(id);
        Ok(entries)
    }

    fn newest(&self) -> Option<Snapshot> {
        self.snapshots.lock().back().cloned()
    }
}

/// Checkpoints kept by the runtime for one owner of a shared log: `snapshot`, then
/// `checkpoint_complete` at once, every `checkpoint_every` inputs of the lane's owner; the
/// runtime keeps the snapshots of the owner's last checkpoints to restore from.
pub(crate) struct TwoPhaseOwner {
    pub(crate) owner_done: Arc<AtomicU64>,
    pub(crate) kept: Arc<Kept>,
}

impl<L: StateLog> LaneCheckpoints<L> for TwoPhaseOwner {
    type Form = TwoPhase;

    async fn after_input(
        &self,
        store: &ActionStateStore<L, TwoPhase>,
        _finished: u64,
        every: u64,
    ) -> Result<Option<usize>, StoreError> {
        let mine = self.owner_done.fetch_add(1, Ordering::Relaxed) + 1;
        if !mine.is_multiple_of(every) {
            return Ok(None);
        }
        Ok(Some(self.kept.checkpoint(store, mine / every).await?))
    }
}

/// One owner of a phase: its store, its groups, and what the soak keeps of it besides (the
/// snapshots of its last checkpoints in the two-phase form).
struct Owner<L: StateLog, F: OwnerForm<L>> {
    store: Arc<ActionStateStore<Arc<L>, F>>,
    owned: Ownership,
    kept: F::Kept,
}

/// What the owners of a phase do that depends on their checkpoint form: how they start, how
/// their lanes checkpoint, and how each checkpoints when it stops.
trait OwnerForm<L: StateLog>: CheckpointForm + Sized {
    /// What the soak keeps of an owner besides its store.
    type Kept: Send + Sync;
    /// How the lanes of an owner checkpoint.
    type Lane: LaneCheckpoints<Arc<L>, Form = Self>;

    /// The owners of a phase, `owners` shares of the groups, each started from what the
    /// `former` owners of its groups left (none: a fresh start). The former owners are
    /// dropped once the new ones no longer need them.
    fn start(
        log: &Arc<L>,
        store_config: &StoreConfig,
        owners: u16,
        former: Vec<Owner<L, Self>>,
    ) -> impl Future<Output = Result<Vec<Owner<L, Self>>, StoreError>> + Send;

    /// The checkpoints of a lane of `owner`, whose inputs `owner_done` counts.
    fn lane(owner: &Owner<L, Self>, owner_done: Arc<AtomicU64>) -> Self::Lane;

    /// `owner` stops after `done` inputs of its own: it checkpoints what it did. Returns the
    /// keys the checkpoint names.
    fn stop(
        owner: &Owner<L, Self>,
        done: u64,
        config: &SoakConfig,
    ) -> impl Future<Output = Result<usize, StoreError>> + Send;
}

/// The owners write their checkpoints into the log, and restore from it.
impl<L: StateLog> OwnerForm<L> for InLog {
    type Kept = ();
    type Lane = WrittenToLog;

    /// The owners of one phase, each restored from the log for its share of the groups.
    async fn start(
        log: &Arc<L>,
        store_config: &StoreConfig,
        owners: u16,
        former: Vec<Owner<L, Self>>,
    ) -> Result<Vec<Owner<L, Self>>, StoreError> {
        // The log holds what the former owners left: they are gone before the new ones
        // restore, as a service's old processes are.
        drop(former);
        let mut stores = Vec::new();
        for owned in split(owners) {
            let (store, _) =
                ActionStateStore::restore(Arc::clone(log), store_config.clone(), &owned, RestoreFrom::Latest).await?;
            stores.push(Owner { store: Arc::new(store), owned, kept: () });
        }
        Ok(stores)
    }

    fn lane(_owner: &Owner<L, Self>, owner_done: Arc<AtomicU64>) -> WrittenToLog {
        WrittenToLog { owner_done }
    }

    async fn stop(owner: &Owner<L, Self>, done: u64, _config: &SoakConfig) -> Result<usize, StoreError> {
        Ok(owner.store.checkpoint(&done.to_le_bytes()).await?.completed)
    }
}

/// The soak keeps the owners' checkpoints, and restores a new owner from them.
impl<L: StateLog> OwnerForm<L> for TwoPhase {
    type Kept = Arc<Kept>;
    type Lane = TwoPhaseOwner;

    /// The owners of one phase in the two-phase form, each restored from the newest snapshots
    /// the runtime kept of the `former` owners of its groups (none: a fresh start), as Flink
    /// restores a rescaled job from the state of the subtasks that held its key groups. The
    /// former owners are dropped first.
    async fn start(
        log: &Arc<L>,
        store_config: &StoreConfig,
        owners: u16,
        former: Vec<Owner<L, Self>>,
    ) -> Result<Vec<Owner<L, Self>>, StoreError> {
        // What the runtime kept of the former owners is all a new one needs: they are gone
        // before the new ones restore, as a rescaled job's old subtasks are.
        let kept: Vec<(Ownership, Option<Snapshot>)> =
            former.iter().map(|o| (o.owned.clone(), o.kept.newest())).collect();
        drop(former);
        let mut stores = Vec::new();
        for owned in split(owners) {
            // The former owners' groups are disjoint, so their snapshots name disjoint keys,
            // and the restore keeps only the keys `owned` holds.
            let snapshots: Vec<Snapshot> =
                kept.iter().filter(|(o, _)| o.overlaps(&owned)).filter_map(|(_, s)| s.clone()).collect();
            let (store, _) =
                ActionStateStore::restore(Arc::clone(log), store_config.clone(), &owned, snapshots).await?;
            stores.push(Owner { store: Arc::new(store), owned, kept: Arc::new(Kept::new(store_config.retention)) });
        }
        Ok(stores)
    }

    fn lane(owner: &Owner<L, Self>, owner_done: Arc<AtomicU64>) -> TwoPhaseOwner {
        TwoPhaseOwner { owner_done, kept: Arc::clone(&owner.kept) }
    }

    async fn stop(owner: &Owner<L, Self>, done: u64, config: &SoakConfig) -> Result<usize, StoreError> {
        // After every checkpoint the lanes took (their ids go up to `done / every`).
        owner.kept.checkpoint(&owner.store, done / config.checkpoint_every.max(1) + 1).await
    }
}

/// `n` owners' shares of the key groups, as even as they divide.
pub fn split(n: u16) -> Vec<Ownership> {
    let n = n.clamp(1, SOAK_GROUPS);
    (0..n)
        .map(|i| Ownership::Groups { max_groups: SOAK_GROUPS, owned: i * SOAK_GROUPS / n..(i + 1) * SOAK_GROUPS / n })
        .collect()
}

/// Runs the workload with `fleet`'s owners on stores over `log`, which every owner restores
/// from (a fresh start on an empty log); `bytes_held` measures what the backend holds.
pub async fn soak_owners<L: StateLog>(
    log: Arc<L>,
    store_config: &StoreConfig,
    config: &SoakConfig,
    fleet: Fleet,
    bytes_held: &(dyn Fn() -> u64 + Sync),
    on_sample: &mut (dyn FnMut(&SoakSample) + Send),
) -> Result<SoakReport, StoreError> {
    if fleet.two_phase {
        soak_form::<L, TwoPhase>(log, store_config, config, fleet, bytes_held, on_sample).await
    } else {
        soak_form::<L, InLog>(log, store_config, config, fleet, bytes_held, on_sample).await
    }
}

/// [`soak_owners`] with owners of the checkpoint form `F`.
async fn soak_form<L: StateLog, F: OwnerForm<L>>(
    log: Arc<L>,
    store_config: &StoreConfig,
    config: &SoakConfig,
    fleet: Fleet,
    bytes_held: &(dyn Fn() -> u64 + Sync),
    on_sample: &mut (dyn FnMut(&SoakSample) + Send),
) -> Result<SoakReport, StoreError> {
    let half = config.inputs / 2;
    let phases = match fleet.rescale_to {
        Some(after) => vec![(fleet.owners, half), (after, config.inputs)],
        None => vec![(fleet.owners, config.inputs)],
    };
    let lanes = Lanes::default();
    // Records reclaimed by the owners of earlier phases.
    let mut reclaimed_before = 0;
    let mut sampler = None;
    let mut former: Vec<Owner<L, F>> = Vec::new();
    for (phase, (owners, limit)) in phases.into_iter().enumerate() {
        let stores = F::start(&log, store_config, owners, std::mem::take(&mut former)).await?;
        // The clock starts once the first owners have restored (a service's start-up is not
        // its throughput); a rescale's restores count.
        let sampler = sampler.get_or_insert_with(|| Sampler::new(config.inputs, bytes_held));
        let mut workers = Workers::new();
        let owner_done: Vec<Arc<AtomicU64>> = stores.iter().map(|_| Arc::new(AtomicU64::new(0))).collect();
        for slot in 0..config.in_flight.max(1) {
            let o = slot % stores.len();
            let owner = &stores[o];
            let checkpoints = F::lane(owner, Arc::clone(&owner_done[o]));
            let lane = Lane { store: Arc::clone(&owner.store), owned: owner.owned.clone(), slot, checkpoints };
            lanes.spawn(&mut workers, lane, (phase, limit), config);
        }
        let counts = || {
            let reclaimed: u64 = stores.iter().map(|o| o.store.reclaim_status().records_reclaimed).sum();
            (reclaimed_before + reclaimed, stores.iter().map(|o| o.store.stats().states).sum())
        };
        sampler.watch(&mut workers, &lanes.done, &lanes.progress, &counts, on_sample).await?;
        // The owners of this phase stop: each checkpoints what it did, as a service does
        // before it hands its groups over, and its reclaim finishes.
        for (owner, done) in stores.iter().zip(&owner_done) {
            let entries = F::stop(owner, done.load(std::sync::atomic::Ordering::Relaxed), config).await?;
            lanes.progress.lock().checkpointed(entries, 0.0);
        }
        for owner in &stores {
            reclaimed_before += owner.store.wait_for_reclaim().await.records_reclaimed;
        }
        former = stores;
    }
    let sampler = sampler.unwrap_or_else(|| Sampler::new(config.inputs, bytes_held));
    Ok(sampler.report(&lanes.progress))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_split_covers_every_group_once() {
        for n in 1..=5 {
            let shares = split(n);
            assert_eq!(shares.len(), usize::from(n));
            let mut next = 0;
            for s in &shares {
                let Ownership::Groups { owned, .. } = s else { panic!("{s}") };
                assert_eq!(owned.start, next);
                next = owned.end;
            }
            assert_eq!(next, SOAK_GROUPS);
        }
    }
}
