//! The soak workload with several owners sharing one log: each store owns a range of key
//! groups, takes the conversations of its keys, and writes its checkpoints into the log with
//! its input count as metadata, so that retention runs from the checkpoints of every owner
//! (docs/design.md, section 6). Optionally, halfway through, every owner checkpoints and
//! stops and a new split of the groups restores from the log and goes on: a rescale.
//!
//! In the two-phase form the soak is the runtime that keeps the checkpoints, as Flink is:
//! each owner snapshots and completes at once, the soak keeps the snapshots of its last
//! checkpoints ([`Kept`]), and a rescale rebuilds each new owner from the newest snapshots of
//! the former owners of its groups.

use crate::soak::{Checkpoints, Lane, Lanes, Sampler, SoakConfig, SoakReport, SoakSample, Workers};
use actionstate_core::{KeyId, StateLog};
use actionstate_recovery::{ActionStateStore, Ownership, RestoreFrom, Retention, Snapshot, StoreConfig, StoreError};
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

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
    /// with `rebuild`) instead of the owners writing them into the log.
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
        store: &ActionStateStore<L>,
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

/// One owner of a phase: its store, its groups, and in the two-phase form the snapshots the
/// runtime keeps of it.
type Owner<L> = (Arc<ActionStateStore<Arc<L>>>, Ownership, Option<Arc<Kept>>);

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
    let half = config.inputs / 2;
    let phases = match fleet.rescale_to {
        Some(after) => vec![(fleet.owners, half), (after, config.inputs)],
        None => vec![(fleet.owners, config.inputs)],
    };
    let lanes = Lanes::default();
    // Records reclaimed by the owners of earlier phases.
    let mut reclaimed_before = 0;
    let mut sampler = None;
    let mut former: Vec<Owner<L>> = Vec::new();
    for (phase, (owners, limit)) in phases.into_iter().enumerate() {
        let stores = if fleet.two_phase {
            rebuild(&log, store_config, owners, &former).await?
        } else {
            restore(&log, store_config, owners).await?
        };
        drop(former);
        // The clock starts once the first owners have restored (a service's start-up is not
        // its throughput); a rescale's restores count.
        let sampler = sampler.get_or_insert_with(|| Sampler::new(config.inputs, bytes_held));
        let mut workers = Workers::new();
        let owner_done: Vec<Arc<AtomicU64>> = stores.iter().map(|_| Arc::new(AtomicU64::new(0))).collect();
        for slot in 0..config.in_flight.max(1) {
            let o = slot % stores.len();
            let (store, owned, kept) = &stores[o];
            let owner_done = Arc::clone(&owner_done[o]);
            let checkpoints = match kept {
                Some(kept) => Checkpoints::TwoPhaseOwner { owner_done, kept: Arc::clone(kept) },
                None => Checkpoints::InLog { owner_done },
            };
            let lane = Lane { store: Arc::clone(store), owned: owned.clone(), slot, checkpoints };
            lanes.spawn(&mut workers, lane, (phase, limit), config);
        }
        let counts = || {
            let reclaimed: u64 = stores.iter().map(|(s, _, _)| s.reclaim_status().records_reclaimed).sum();
            (reclaimed_before + reclaimed, stores.iter().map(|(s, _, _)| s.stats().states).sum())
        };
        sampler.watch(&mut workers, &lanes.done, &lanes.progress, &counts, on_sample).await?;
        // The owners of this phase stop: each checkpoints what it did, as a service does
        // before it hands its groups over, and its reclaim finishes.
        for ((store, _, kept), done) in stores.iter().zip(&owner_done) {
            let done = done.load(std::sync::atomic::Ordering::Relaxed);
            let entries = match kept {
                // After every checkpoint the lanes took (their ids go up to `done / every`).
                Some(kept) => kept.checkpoint(store, done / config.checkpoint_every.max(1) + 1).await?,
                None => store.checkpoint(&done.to_le_bytes()).await?.completed,
            };
            lanes.progress.lock().checkpointed(entries, 0.0);
        }
        for (store, _, _) in &stores {
            reclaimed_before += store.wait_for_reclaim().await.records_reclaimed;
        }
        former = stores;
    }
    let sampler = sampler.unwrap_or_else(|| Sampler::new(config.inputs, bytes_held));
    Ok(sampler.report(&lanes.progress))
}

/// The owners of one phase, each restored from the log for its share of the groups.
async fn restore<L: StateLog>(
    log: &Arc<L>,
    store_config: &StoreConfig,
    owners: u16,
) -> Result<Vec<Owner<L>>, StoreError> {
    let mut stores = Vec::new();
    for owned in split(owners) {
        let (store, _) =
            ActionStateStore::restore(Arc::clone(log), store_config.clone(), &owned, RestoreFrom::Latest).await?;
        stores.push((Arc::new(store), owned, None));
    }
    Ok(stores)
}

/// The owners of one phase in the two-phase form, each rebuilt from the newest snapshots the
/// runtime kept of the `former` owners of its groups (none: a fresh start), as Flink restores
/// a rescaled job from the state of the subtasks that held its key groups.
async fn rebuild<L: StateLog>(
    log: &Arc<L>,
    store_config: &StoreConfig,
    owners: u16,
    former: &[Owner<L>],
) -> Result<Vec<Owner<L>>, StoreError> {
    let mut stores = Vec::new();
    for owned in split(owners) {
        let snapshots: Vec<Snapshot> = former
            .iter()
            .filter(|(_, theirs, _)| theirs.overlaps(&owned))
            .filter_map(|(_, _, kept)| kept.as_ref()?.newest())
            .collect();
        let markers: Vec<_> = snapshots.iter().map(|s| s.marker.clone()).collect();
        let mut completed: HashMap<KeyId, u64> = HashMap::new();
        for s in &snapshots {
            completed.extend(s.completed.iter().filter(|(k, _)| owned.owns(k)).map(|(k, v)| (*k, *v)));
        }
        let store = ActionStateStore::new(Arc::clone(log), store_config.clone());
        store.rebuild(&markers, &owned, &completed).await?;
        stores.push((Arc::new(store), owned, Some(Arc::new(Kept::new(store_config.retention)))));
    }
    Ok(stores)
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
