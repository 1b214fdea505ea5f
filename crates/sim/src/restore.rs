//! Restoring after a crash: the owners' stores rebuilt from a checkpoint (with rescale), and
//! the input changes a plan makes to the source replayed after the first restore.

use crate::attempt::{Attempt, Log};
use crate::checkpoint::Checkpoint;
use crate::outcome::Outcome;
use crate::plan::{InputChange, RunPlan, key_id};
use crate::source::LogSource;
use actionstate_core::KeyId;
use actionstate_recovery::{ActionStateStore, Clock, Ownership, Retention, StoreConfig, StoreError};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// Key groups used to split keys among owners.
const MAX_GROUPS: u16 = 128;

fn ownerships(owners: u32) -> Vec<Ownership> {
    let n = u16::try_from(owners.clamp(1, u32::from(MAX_GROUPS))).unwrap_or(1);
    (0..n)
        .map(|i| {
            let lo = MAX_GROUPS / n * i;
            let hi = if i + 1 == n { MAX_GROUPS } else { MAX_GROUPS / n * (i + 1) };
            if n == 1 { Ownership::All } else { Ownership::Groups { max_groups: MAX_GROUPS, owned: lo..hi } }
        })
        .collect()
}

/// The stores' configuration for `owners`. One owner keeps what its last checkpoints need,
/// which the runs' model of retention (`checkpoint::retained_floor`: the runtime's last
/// completed checkpoints, in step) never passes. Owners that share the log reclaim in the
/// background, each as its own completions land, while the runs' zombies keep writing: the
/// model cannot say in step what they have reclaimed, so here they keep everything and the
/// runs check replay alone. The owners' campaign (`tests/tests/all/owners_campaign.rs`) and
/// property test check shared retention.
fn store_config(owners: &[Ownership], clock: &Clock) -> StoreConfig {
    let config = StoreConfig { clock: clock.clone(), ..StoreConfig::default() };
    if owners.len() > 1 { StoreConfig { retention: Retention::KeepAll, ..config } } else { config }
}

/// Attempt number `attempt` over `log` with `owners` owners, each store rebuilt from the
/// checkpoint `from` (or from nothing), timing waits by `clock`.
pub(crate) async fn restore<S: LogSource>(
    log: Log<S>,
    owners: u32,
    attempt: u64,
    from: Option<&Checkpoint>,
    outcome: &mut Outcome,
    clock: &Clock,
) -> Result<Attempt<S>, StoreError> {
    let owners = ownerships(owners);
    let mut stores = Vec::with_capacity(owners.len());
    if let Some(cp) = from {
        let started = Instant::now();
        let snapshots = cp.snapshots();
        for ownership in &owners {
            let (store, restored) =
                ActionStateStore::restore(Arc::clone(&log), store_config(&owners, clock), ownership, &snapshots[..])
                    .await?;
            outcome.rebuild_records += restored.rebuild.records;
            outcome.rebuilds += 1;
            stores.push(store);
        }
        outcome.rebuild_time += started.elapsed();
        outcome.restores += 1;
        outcome.restored_from.push(cp.pos);
    } else {
        // Nothing to restore, but each owner takes its epoch and fences the attempts
        // before it, and learns its keys (so that its retention never reclaims what the
        // other owners' checkpoints need).
        for ownership in &owners {
            let fresh =
                ActionStateStore::restore(Arc::clone(&log), store_config(&owners, clock), ownership, Vec::new());
            let (store, restored) = fresh.await?;
            outcome.rebuild_records += restored.rebuild.records;
            outcome.rebuilds += 1;
            stores.push(store);
        }
    }
    Ok(Attempt {
        stores,
        owners,
        pos: from.map_or(0, |c| c.pos),
        next_seq: from.map(|c| c.next_seq.clone()).unwrap_or_default(),
        memory: from.map(|c| c.memory.clone()).unwrap_or_default(),
        ids: 0,
        attempt,
        checkpoint_id: outcome.checkpoints,
        external: None,
        parked: from.map(|c| c.parked.clone()).unwrap_or_default(),
        deferred: from.map(|c| c.deferred.clone()).unwrap_or_default(),
        clock: clock.clone(),
    })
}

/// Applies `plan`'s changes to `source`, replayed from position `from` of checkpoint `at`,
/// noting in `changed` the first round of each key whose history changes on purpose.
pub(crate) fn change_source(
    source: &mut Vec<(u32, i64)>,
    from: usize,
    plan: &RunPlan,
    changed: &mut HashMap<KeyId, u64>,
    at: Option<&Checkpoint>,
) {
    if let Some(n) = plan.truncate_after_restore {
        source.truncate(n.max(from));
    }
    let seq_of = |k: u32| at.and_then(|c| c.next_seq.get(&key_id(k)).copied()).unwrap_or(0);
    match plan.change {
        Some(change @ (InputChange::ChangeFirstReplayed | InputChange::ChangeFirstReplayedSameChildren)) => {
            if let Some(input) = source.get_mut(from) {
                input.1 += if change == InputChange::ChangeFirstReplayed { 1_000 } else { 999 };
                changed.insert(key_id(input.0), seq_of(input.0));
            }
        }
        Some(InputChange::SwapFirstReplayed) => {
            if let Some(&(k, _)) = source.get(from)
                && let Some(j) = (from + 1..source.len()).find(|&j| source[j].0 == k)
            {
                source.swap(from, j);
                changed.insert(key_id(k), seq_of(k));
            }
        }
        None => {}
    }
}
