//! Zombies: a crashed attempt that keeps running after the attempt replacing it restored
//! ([`RunPlan::zombie_rounds`](crate::RunPlan::zombie_rounds)), and finding its records in
//! the log by scanning, not by the store's rule, so that the simulator checks the rule
//! instead of repeating it.

use crate::attempt::{Attempt, Run};
use crate::checkpoint::Checkpoint;
use crate::outcome::Outcome;
use crate::plan::SimConfig;
use crate::round::{Ctx, round};
use crate::source::LogSource;
use actionstate_core::{KeyId, LogRecord, Position, RangeRead, StateKey, StateLog, codec};
use actionstate_recovery::{ActionStateStore, Ownership, Retention, StoreConfig, StoreError};
use std::collections::HashSet;
use std::sync::Arc;

/// Lets the zombie `z` run `rounds` more rounds of `source` after the attempt that
/// replaced it restored, with crash injection held back (the crashes are the surviving
/// attempts'), then takes its snapshot, which must fail with [`StoreError::Fenced`].
pub(crate) async fn overlap<S: LogSource>(config: &SimConfig, mut z: Attempt<S>, rounds: u64, run: &mut Run<'_>) {
    let Run { source, crashes, ledger, outcome, .. } = run;
    crashes.pause(true);
    ledger.lock().set_zombie(true);
    // Its rounds' results go nowhere: downstream listens to the surviving attempt.
    let mut unseen = Outcome::new(outcome.backend, 0);
    for _ in 0..rounds {
        let Some(&(k, v)) = source.get(z.pos) else { break };
        let mut cx = Ctx { crashes, ledger, approver: None, outcome: &mut unseen };
        if round(config, &mut z, k, v, &mut cx).await.is_err() {
            break;
        }
        z.pos += 1;
    }
    for store in &z.stores {
        if matches!(store.snapshot(u64::MAX).await, Err(StoreError::Fenced { .. })) {
            outcome.zombies_fenced += 1;
        }
    }
    z.settle().await;
    ledger.lock().set_zombie(false);
    crashes.pause(false);
    outcome.zombies += 1;
}

/// Whether a record of `key` written with `epoch` after `fences` (keys and epoch of each fence
/// met so far in its partition) is a fenced writer's: found by scanning, not by the store's
/// rule, so that the simulator checks the rule instead of repeating it.
pub(crate) fn fenced_out(fences: &[(Ownership, u64)], key: &KeyId, epoch: u64) -> bool {
    fences.iter().any(|(groups, fenced)| *fenced > epoch && groups.owns(key))
}

/// The upserts of writers of `epochs` in `log` that follow, in their partition, a fence of a
/// newer epoch over their key (found by scanning, not by the store's rule), and how many of
/// them a rebuild of the oldest or the newest of `checkpoints` indexes.
pub(crate) async fn zombie_records<L: StateLog>(
    log: &Arc<L>,
    epochs: &HashSet<u64>,
    checkpoints: &[&Checkpoint],
) -> Result<(u64, u64), StoreError> {
    let earliest = log.earliest_offsets().await?;
    let end = log.end_offsets().await?;
    let mut zombie: Vec<(StateKey, Position)> = Vec::new();
    for (p, (&from, &to)) in (0u32..).zip(earliest.iter().zip(&end)) {
        let mut fences: Vec<(Ownership, u64)> = Vec::new();
        let mut range = RangeRead::new(p, from, to, 1024);
        while let Some(records) = range.next_batch(&**log).await? {
            for r in records {
                let record = codec::decode(&r.key, &r.value).map_err(|e| e.at(p, r.offset))?;
                let epoch = codec::writer_epoch(&r.value).map_err(|e| e.at(p, r.offset))?;
                match record {
                    LogRecord::Fence(f) => fences.push((f.groups, f.epoch)),
                    LogRecord::Upsert(s) if epochs.contains(&epoch) && fenced_out(&fences, &s.key.key, epoch) => {
                        zombie.push((s.key, Position { partition: p, offset: r.offset, exact: true }));
                    }
                    _ => {}
                }
            }
        }
    }
    let mut replayed = 0;
    let ends = [checkpoints.first(), checkpoints.last()];
    for cp in ends.into_iter().flatten() {
        let config = StoreConfig { fence_on_rebuild: false, retention: Retention::KeepAll, ..StoreConfig::default() };
        let restore = ActionStateStore::restore(Arc::clone(log), config, &Ownership::All, cp.snapshots());
        let (observer, _) = restore.await?;
        replayed += observer.with_index(|ix| zombie.iter().filter(|(sk, at)| ix.position(sk) == Some(*at)).count());
    }
    Ok((zombie.len() as u64, replayed as u64))
}
