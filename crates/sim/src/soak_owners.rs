//! The soak workload with several owners sharing one log: each store owns a range of key
//! groups, takes the conversations of its keys, and writes its checkpoints into the log with
//! its input count as metadata, so that retention runs from the checkpoints of every owner
//! (docs/design.md, section 6). Optionally, halfway through, every owner checkpoints and
//! stops and a new split of the groups restores from the log and goes on: a rescale.

use crate::soak::{Lane, Lanes, Sampler, SoakConfig, SoakReport, SoakSample, Workers, WrittenToLog};
use actionstate_core::StateLog;
use actionstate_recovery::{ActionStateStore, Ownership, RestoreFrom, StoreConfig, StoreError};
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
    let half = config.inputs / 2;
    let phases = match fleet.rescale_to {
        Some(after) => vec![(fleet.owners, half), (after, config.inputs)],
        None => vec![(fleet.owners, config.inputs)],
    };
    let lanes = Lanes::default();
    // Records reclaimed by the owners of earlier phases.
    let mut reclaimed_before = 0;
    let mut sampler = None;
    for (phase, (owners, limit)) in phases.into_iter().enumerate() {
        let stores = restore(&log, store_config, owners).await?;
        // The clock starts once the first owners have restored (a service's start-up is not
        // its throughput); a rescale's restores count.
        let sampler = sampler.get_or_insert_with(|| Sampler::new(config.inputs, bytes_held));
        let mut workers = Workers::new();
        let owner_done: Vec<Arc<AtomicU64>> = stores.iter().map(|_| Arc::new(AtomicU64::new(0))).collect();
        for slot in 0..config.in_flight.max(1) {
            let o = slot % stores.len();
            let (store, owned) = &stores[o];
            let checkpoints = WrittenToLog { owner_done: Arc::clone(&owner_done[o]) };
            let lane = Lane { store: Arc::clone(store), owned: owned.clone(), slot, checkpoints };
            lanes.spawn(&mut workers, lane, (phase, limit), config);
        }
        let counts = || {
            let reclaimed: u64 = stores.iter().map(|(s, _)| s.reclaim_status().records_reclaimed).sum();
            (reclaimed_before + reclaimed, stores.iter().map(|(s, _)| s.stats().states).sum())
        };
        sampler.watch(&mut workers, &lanes.done, &lanes.progress, &counts, on_sample).await?;
        // The owners of this phase stop: each checkpoints what it did, as a service does
        // before it hands its groups over, and its reclaim finishes.
        for ((store, _), done) in stores.iter().zip(&owner_done) {
            let written = store.checkpoint(&done.load(std::sync::atomic::Ordering::Relaxed).to_le_bytes()).await?;
            lanes.progress.lock().checkpointed(written.completed, 0.0);
        }
        for (store, _) in &stores {
            reclaimed_before += store.wait_for_reclaim().await.records_reclaimed;
        }
    }
    let sampler = sampler.unwrap_or_else(|| Sampler::new(config.inputs, bytes_held));
    Ok(sampler.report(&lanes.progress))
}

/// The owners of one phase, each restored from the log for its share of the groups.
async fn restore<L: StateLog>(
    log: &Arc<L>,
    store_config: &StoreConfig,
    owners: u16,
) -> Result<Vec<(Arc<ActionStateStore<Arc<L>>>, Ownership)>, StoreError> {
    let mut stores = Vec::new();
    for owned in split(owners) {
        let (store, _) =
            ActionStateStore::restore(Arc::clone(log), store_config.clone(), &owned, RestoreFrom::Latest).await?;
        stores.push((Arc::new(store), owned));
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
