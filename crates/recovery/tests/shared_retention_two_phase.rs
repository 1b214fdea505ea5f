//! Retention when stores share one log and their runtime keeps the checkpoints (the two-phase
//! form: `snapshot`, `checkpoint_complete`, then `restore` from what the runtime kept), case by
//! case as `shared_retention.rs` covers stores that checkpoint into the log: the reclaim point
//! is the smallest offset the current owners' retained checkpoints need, an owner that has not
//! completed a checkpoint holds reclaim back, a replaced owner's completions stop counting,
//! and every retained checkpoint restores after each reclaim. The runtime here is the test: it
//! keeps each owner's last snapshots and restores from them, as Flink would.
#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use actionstate_core::{KeyId, Ownership, StateLog};
use actionstate_recovery::{
    ActionStateStore, AnyLog, RestoreFrom, Retention, Snapshot, StoreConfig, StoreError, TwoPhase,
};
use common::{Backend, Env, STATES_PER_ROUND, dump, finish_round, input, key, process, replayed};
use std::collections::VecDeque;
use std::sync::Arc;

const GROUPS: u16 = 8;

fn groups(owned: std::ops::Range<u16>) -> Ownership {
    Ownership::Groups { max_groups: GROUPS, owned }
}

fn keep(n: u32) -> StoreConfig {
    StoreConfig { retention: Retention::LastCheckpoints(n), ..StoreConfig::default() }
}

type Store = ActionStateStore<Arc<AnyLog>, TwoPhase>;

/// An owner as its runtime sees it: the store, its groups, and the snapshots of its last
/// completed checkpoints (newest last), as many as retention keeps.
struct Owner {
    store: Store,
    owned: Ownership,
    kept: VecDeque<Snapshot>,
    retained: usize,
}

impl Owner {
    /// Checkpoint `id`: the snapshot at the barrier, kept by the runtime, then completed.
    async fn checkpoint(&mut self, id: u64) -> Snapshot {
        let snapshot = self.store.snapshot(id).await.unwrap();
        self.store.checkpoint_complete(id);
        self.kept.push_back(snapshot.clone());
        while self.kept.len() > self.retained {
            self.kept.pop_front();
        }
        snapshot
    }

    fn newest(&self) -> &Snapshot {
        self.kept.back().unwrap()
    }
}

/// A store of `owned` restored from `from`, the snapshots the runtime kept of the former
/// owners of these groups (none: a fresh start).
async fn restore(log: &Arc<AnyLog>, owned: std::ops::Range<u16>, retained: u32, from: &[&Snapshot]) -> Owner {
    let snapshots: Vec<Snapshot> = from.iter().map(|s| (*s).clone()).collect();
    let (store, _) =
        ActionStateStore::restore(Arc::clone(log), keep(retained), &groups(owned.clone()), snapshots).await.unwrap();
    Owner { store, owned: groups(owned), kept: VecDeque::new(), retained: retained as usize }
}

/// Names of keys of every group, so that each owner has work.
fn names() -> Vec<String> {
    let mut names = Vec::new();
    for g in 0..GROUPS {
        names.extend((0u32..).map(|i| format!("key-{i}")).filter(|n| key(n).key_group(GROUPS) == g).take(2));
    }
    names
}

/// Runs round `seq` of every key the owner holds, each reported completed.
async fn round(o: &Owner, seq: u64) {
    for name in names().iter().filter(|n| o.owned.owns(&key(n))) {
        let outcome = process(&o.store, key(name), seq, &input(seq as i64)).await.unwrap();
        assert_eq!(outcome.reused, 0, "round {seq} of {name} is new");
        finish_round(&o.store, key(name), seq);
    }
}

/// Round `seq` of every key the owner holds is reused from the store.
async fn reuses(o: &Owner, seq: u64) {
    for n in names().iter().filter(|n| o.owned.owns(&key(n))) {
        let outcome = process(&o.store, key(n), seq, &replayed(&input(seq as i64))).await.unwrap();
        assert_eq!((outcome.reused, outcome.fresh), (STATES_PER_ROUND, 0), "{n}");
    }
}

async fn earliest(log: &Arc<AnyLog>) -> Vec<u64> {
    log.earliest_offsets().await.unwrap()
}

async fn two_owners_reclaim_once_both_have_completed_a_checkpoint(backend: Backend) {
    let env = Env::new(backend);
    let log = env.shared().await;
    let mut left = restore(&log, 0..4, 1, &[]).await;
    let mut right = restore(&log, 4..8, 1, &[]).await;
    for seq in 0..3 {
        round(&left, seq).await;
        round(&right, seq).await;
    }
    left.checkpoint(1).await;
    let status = left.store.wait_for_reclaim().await;
    assert!(status.disabled.is_none(), "a two-phase store that shares its log reclaims: {status:?}");
    assert_eq!(status.waiting, vec![groups(4..8)], "the right owner has not completed one: {status:?}");
    assert_eq!(status.reclaims, 0);
    assert_eq!(earliest(&log).await, vec![0; common::PARTITIONS as usize], "nothing reclaimed yet");

    right.checkpoint(1).await;
    let status = right.store.wait_for_reclaim().await;
    assert!(status.waiting.is_empty() && status.reclaims == 1, "{status:?}");
    assert!(status.records_reclaimed > 0, "{status:?}");

    // Both owners restore from the snapshots their runtime kept, after the reclaim, and reuse
    // what followed them.
    round(&left, 3).await;
    round(&right, 3).await;
    let (l, r) = (left.newest().clone(), right.newest().clone());
    drop((left, right));
    for (owned, from) in [(0..4, &l), (4..8, &r)] {
        let o = restore(&log, owned, 1, &[from]).await;
        reuses(&o, 3).await;
    }
    // A restore from the log takes none of them: they are not checkpoints written into it.
    let (_, restored) = ActionStateStore::restore(
        Arc::clone(&log),
        StoreConfig { fence_on_rebuild: false, ..keep(1) },
        &groups(0..8),
        RestoreFrom::Latest,
    )
    .await
    .unwrap();
    assert!(restored.from.is_empty() && restored.from_earliest, "{:?}", restored.from);
}
on_every_backend!(two_owners, two_owners_reclaim_once_both_have_completed_a_checkpoint);

/// After a failover the new owner holds reclaim back until it completes its own first
/// checkpoint; the replaced owner's completions stop counting, a late one included.
async fn a_failover_holds_reclaim_until_the_new_owner_completes_a_checkpoint(backend: Backend) {
    let env = Env::new(backend);
    let log = env.shared().await;
    let mut left = restore(&log, 0..4, 2, &[]).await;
    let mut right = restore(&log, 4..8, 2, &[]).await;
    for seq in 0..4 {
        round(&left, seq).await;
        round(&right, seq).await;
        left.checkpoint(seq + 1).await;
        right.checkpoint(seq + 1).await;
    }
    right.store.wait_for_reclaim().await;
    round(&right, 4).await;
    // The right owner's runtime takes one more snapshot that it will complete late.
    let late = right.store.snapshot(5).await.unwrap();
    let before = earliest(&log).await;
    // The right owner fails over: its successor restores from the last completed checkpoint,
    // and holds reclaim back.
    let mut successor = restore(&log, 4..8, 2, &[right.newest()]).await;
    round(&left, 4).await;
    left.checkpoint(5).await;
    let status = left.store.wait_for_reclaim().await;
    assert_eq!(status.waiting, vec![groups(4..8)], "{status:?}");
    assert_eq!(earliest(&log).await, before, "the successor's restore point is kept");
    // The zombie completes its late checkpoint (it does not know yet): its marker reaches the
    // log after the successor's fence, and does not count.
    right.store.checkpoint_complete(late.checkpoint);
    right.store.wait_for_reclaim().await;
    round(&left, 5).await;
    left.checkpoint(6).await;
    let status = left.store.wait_for_reclaim().await;
    assert_eq!(status.waiting, vec![groups(4..8)], "a zombie's completion counted: {status:?}");
    assert_eq!(earliest(&log).await, before);
    // Its next snapshot tells it that it was replaced.
    assert!(matches!(right.store.snapshot(6).await, Err(StoreError::Fenced { .. })));
    reuses(&successor, 4).await;
    round(&successor, 5).await;
    successor.checkpoint(6).await;
    let status = successor.store.wait_for_reclaim().await;
    assert!(status.waiting.is_empty() && status.failures == 0, "{status:?}");
    assert!(earliest(&log).await.iter().zip(&before).any(|(now, then)| now > then), "reclaim goes on");
    let from = successor.newest().clone();
    drop((left, successor, right));
    let o = restore(&log, 4..8, 2, &[&from]).await;
    round(&o, 6).await;
}
on_every_backend!(failover, a_failover_holds_reclaim_until_the_new_owner_completes_a_checkpoint);

/// After a failover the runtime's retained checkpoints span both owners (Flink restores 3,
/// completes 4, and may restore 3 again): the former owner's checkpoints count until the
/// successor has as many of its own as retention keeps, so the one it restored from still
/// restores after the successor's first checkpoint and the reclaim that follows.
async fn a_former_owners_retained_checkpoints_restore_after_the_successors_first(backend: Backend) {
    let env = Env::new(backend);
    let log = env.shared().await;
    let mut left = restore(&log, 0..4, 2, &[]).await;
    let mut right = restore(&log, 4..8, 2, &[]).await;
    for seq in 0..4 {
        round(&left, seq).await;
        round(&right, seq).await;
        left.checkpoint(seq + 1).await;
        right.checkpoint(seq + 1).await;
    }
    let restored_from = right.newest().clone();
    let mut successor = restore(&log, 4..8, 2, &[&restored_from]).await;
    drop(right);
    let before = earliest(&log).await;
    for seq in 4..6 {
        round(&successor, seq).await;
        round(&left, seq).await;
        // The successor completes one checkpoint; the left owner goes on.
        if seq == 4 {
            successor.checkpoint(5).await;
        }
        left.checkpoint(seq + 1).await;
    }
    for o in [&successor, &left] {
        let status = o.store.wait_for_reclaim().await;
        assert!(status.waiting.is_empty() && status.failures == 0, "{status:?}");
    }
    assert!(earliest(&log).await.iter().zip(&before).any(|(now, then)| now > then), "the owners reclaimed");
    // The successor crashes; its runtime restores the checkpoint the successor restored from,
    // still among its last two, and replays round 4 from the log.
    drop(successor);
    let o = restore(&log, 4..8, 2, &[&restored_from]).await;
    reuses(&o, 4).await;
}
on_every_backend!(former_owners, a_former_owners_retained_checkpoints_restore_after_the_successors_first);

/// A zombie that completes a checkpoint it snapshotted before its successor's fence (its
/// runtime did not learn of the failover in time) publishes a marker whose window holds that
/// fence: it is void, and the successor's groups keep waiting, even where it would fill the
/// one checkpoint retained.
async fn a_zombies_late_completion_does_not_count(backend: Backend) {
    let env = Env::new(backend);
    let log = env.shared().await;
    let mut left = restore(&log, 0..4, 1, &[]).await;
    let mut right = restore(&log, 4..8, 1, &[]).await;
    for seq in 0..2 {
        round(&left, seq).await;
        round(&right, seq).await;
        left.checkpoint(seq + 1).await;
        right.checkpoint(seq + 1).await;
    }
    right.store.wait_for_reclaim().await;
    round(&right, 2).await;
    let late = right.store.snapshot(3).await.unwrap();
    let successor = restore(&log, 4..8, 1, &[right.newest()]).await;
    let before = earliest(&log).await;
    right.store.checkpoint_complete(late.checkpoint);
    right.store.wait_for_reclaim().await;
    round(&left, 2).await;
    left.checkpoint(3).await;
    let status = left.store.wait_for_reclaim().await;
    assert_eq!(status.waiting, vec![groups(4..8)], "the zombie's completion counted: {status:?}");
    assert_eq!(earliest(&log).await, before, "the successor's restore point is kept");
    reuses(&successor, 2).await;
}
on_every_backend!(zombie, a_zombies_late_completion_does_not_count);

/// A rescale from two owners to three and back to two, each layout restored from the last
/// snapshots of the one before: the new owners wait for each other's first checkpoints, every
/// owner restores after each reclaim, and the log stays bounded.
async fn rescales_keep_every_owner_restorable_and_the_log_bounded(backend: Backend) {
    let env = Env::new(backend);
    let log = env.shared().await;
    let layouts: [&[std::ops::Range<u16>]; 3] = [&[0..4, 4..8], &[0..3, 3..6, 6..8], &[0..5, 5..8]];
    let mut seq = 0;
    let mut sizes = Vec::new();
    let mut last: Vec<(Ownership, Snapshot)> = Vec::new();
    for layout in layouts {
        let mut owners = Vec::new();
        for owned in layout {
            let from: Vec<&Snapshot> =
                last.iter().filter(|(o, _)| o.overlaps(&groups(owned.clone()))).map(|(_, s)| s).collect();
            let o = restore(&log, owned.clone(), 1, &from).await;
            if seq > 0 {
                reuses(&o, seq - 1).await;
            }
            owners.push(o);
        }
        for _ in 0..6 {
            for o in &mut owners {
                round(o, seq).await;
                o.checkpoint(seq + 1).await;
            }
            seq += 1;
        }
        // A round after the last checkpoints, which the next layout reuses.
        for o in &owners {
            round(o, seq).await;
        }
        seq += 1;
        for o in &owners {
            let status = o.store.wait_for_reclaim().await;
            assert!(status.waiting.is_empty() && status.failures == 0, "{status:?}");
        }
        let (earliest, end) = (earliest(&log).await, log.end_offsets().await.unwrap());
        sizes.push(end.iter().zip(&earliest).map(|(e, s)| e - s).sum::<u64>());
        last = owners.iter().map(|o| (o.owned.clone(), o.newest().clone())).collect();
        drop(owners);
    }
    // The last layout's snapshots restore every key.
    let from: Vec<&Snapshot> = last.iter().map(|(_, s)| s).collect();
    let o = restore(&log, 0..8, 1, &from).await;
    reuses(&o, seq - 1).await;
    let total = log.end_offsets().await.unwrap().iter().sum::<u64>();
    assert!(sizes.iter().all(|s| *s * 3 < total), "retained {sizes:?} of {total} records");
}
on_every_backend!(rescales, rescales_keep_every_owner_restorable_and_the_log_bounded);

/// A rescale restored from several owners' snapshots replays each key from its own owner's
/// marker: keys that went idle before it, whose records lie below their owner's marker but
/// above another owner's, do not come back unfinished and hold retention back for good.
async fn a_rescale_does_not_bring_back_keys_an_owner_had_finished(backend: Backend) {
    let env = Env::new(backend);
    let log = env.shared().await;
    let mut left = restore(&log, 0..4, 1, &[]).await;
    let mut right = restore(&log, 4..8, 1, &[]).await;
    // The right owner has a round in flight from the start: its marker stays below.
    let busy = names().into_iter().find(|n| right.owned.owns(&key(n))).unwrap();
    process(&right.store, key(&busy), 0, &input(0)).await.unwrap();
    // The left owner's idle keys finish, and its checkpoints pass their records.
    let idle: Vec<KeyId> = (0..40u32).map(|i| key(&format!("idle-{i}"))).filter(|k| left.owned.owns(k)).collect();
    for k in &idle {
        process(&left.store, *k, 0, &input(0)).await.unwrap();
        finish_round(&left.store, *k, 0);
    }
    for id in 1..=3 {
        round(&left, id).await;
        left.checkpoint(id).await;
        right.checkpoint(id).await;
    }
    assert!(dump(&left.store).keys().all(|s| !idle.contains(&s.key)), "the left owner pruned its idle keys");
    // One owner of every group restores from both.
    let o = restore(&log, 0..8, 1, &[left.newest(), right.newest()]).await;
    drop((left, right));
    let back: Vec<_> = dump(&o.store).into_keys().filter(|s| idle.contains(&s.key)).collect();
    assert!(back.is_empty(), "{} states of finished keys came back", back.len());
}
on_every_backend!(rescale_floors, a_rescale_does_not_bring_back_keys_an_owner_had_finished);

/// Every checkpoint the runtime retains restores after the owners reclaimed, and one older
/// than those was reclaimed.
async fn every_retained_checkpoint_restores(backend: Backend) {
    let env = Env::new(backend);
    let log = env.shared().await;
    let mut owners = vec![restore(&log, 0..4, 3, &[]).await, restore(&log, 4..8, 3, &[]).await];
    let mut oldest = Vec::new();
    for seq in 0..6 {
        for o in &mut owners {
            round(o, seq).await;
            let s = o.checkpoint(seq + 1).await;
            if seq == 0 {
                oldest.push(s);
            }
        }
    }
    for o in &owners {
        round(o, 6).await;
        assert_eq!(o.store.wait_for_reclaim().await.failures, 0);
    }
    let kept: Vec<(std::ops::Range<u16>, Vec<Snapshot>)> =
        [0..4, 4..8].into_iter().zip(owners.iter().map(|o| o.kept.iter().cloned().collect())).collect();
    drop(owners);
    for (owned, snapshots) in &kept {
        assert_eq!(snapshots.len(), 3);
        for s in snapshots {
            let o = restore(&log, owned.clone(), 3, &[s]).await;
            reuses(&o, 6).await;
        }
    }
    // The first checkpoint is no longer retained, and its history is gone.
    let from = Snapshot { completed: Arc::default(), ..oldest[0].clone() };
    let err = ActionStateStore::restore(Arc::clone(&log), keep(3), &groups(0..4), vec![from]).await.unwrap_err();
    assert!(matches!(err, StoreError::Log(actionstate_core::Error::DataLoss { .. })), "{err}");
}
on_every_backend!(retained, every_retained_checkpoint_restores);

/// Owners that complete checkpoints and reclaim at the same time never take what another
/// owner's retained checkpoint needs: each restores afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_reclaims_of_several_owners_keep_every_owner_restorable() {
    let env = Env::new(Backend::Memory);
    let log = env.shared().await;
    let layout = [0..2, 2..4, 4..6, 6..8];
    let mut owners = Vec::new();
    for owned in &layout {
        owners.push(Arc::new(tokio::sync::Mutex::new(restore(&log, owned.clone(), 1, &[]).await)));
    }
    for seq in 0..5u64 {
        let mut tasks = tokio::task::JoinSet::new();
        for o in &owners {
            let o = Arc::clone(o);
            tasks.spawn(async move {
                let mut o = o.lock().await;
                round(&o, seq).await;
                o.checkpoint(seq + 1).await;
            });
        }
        tasks.join_all().await;
    }
    for o in &owners {
        let o = o.lock().await;
        round(&o, 5).await;
        assert_eq!(o.store.wait_for_reclaim().await.failures, 0);
    }
    assert!(earliest(&log).await.iter().any(|e| *e > 0), "something was reclaimed");
    let newest: Vec<(std::ops::Range<u16>, Snapshot)> = {
        let mut out = Vec::new();
        for (o, owned) in owners.iter().zip(&layout) {
            out.push((owned.clone(), o.lock().await.newest().clone()));
        }
        out
    };
    drop(owners);
    for (owned, s) in newest {
        let o = restore(&log, owned, 1, &[&s]).await;
        reuses(&o, 5).await;
    }
}
