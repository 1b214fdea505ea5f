//! Retention when stores share one log and checkpoint into it: the reclaim point is the
//! smallest offset the current owners' retained checkpoints need, an owner that has not
//! checkpointed yet holds reclaim back (and `reclaim_status` names its groups), a replaced
//! owner's checkpoints stop counting, and every owner restores after each reclaim. The same
//! cases for owners whose runtime keeps the checkpoints: `shared_retention_two_phase.rs`.
#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use actionstate_core::{Ownership, StateLog};
use actionstate_recovery::{ActionStateStore, AnyLog, CheckpointForm, RestoreFrom, Retention, StoreConfig};
use common::{Backend, Env, STATES_PER_ROUND, finish_round, input, key, process, replayed};
use std::sync::Arc;

const GROUPS: u16 = 8;

fn groups(owned: std::ops::Range<u16>) -> Ownership {
    Ownership::Groups { max_groups: GROUPS, owned }
}

fn keep(n: u32) -> StoreConfig {
    StoreConfig { retention: Retention::LastCheckpoints(n), ..StoreConfig::default() }
}

type Store = ActionStateStore<Arc<AnyLog>>;

async fn owner(log: &Arc<AnyLog>, owned: std::ops::Range<u16>, retained: u32) -> Store {
    ActionStateStore::restore(Arc::clone(log), keep(retained), &groups(owned), RestoreFrom::Latest).await.unwrap().0
}

/// Names of keys of every group, so that each owner has work.
fn names() -> Vec<String> {
    let mut names = Vec::new();
    for g in 0..GROUPS {
        names.extend((0u32..).map(|i| format!("key-{i}")).filter(|n| key(n).key_group(GROUPS) == g).take(2));
    }
    names
}

/// Runs round `seq` of every key `store` owns, each reported completed.
async fn round<F: CheckpointForm>(store: &ActionStateStore<Arc<AnyLog>, F>, owned: &Ownership, seq: u64) {
    for name in names().iter().filter(|n| owned.owns(&key(n))) {
        let outcome = process(store, key(name), seq, &input(seq as i64)).await.unwrap();
        assert_eq!(outcome.reused, 0, "round {seq} of {name} is new");
        finish_round(store, key(name), seq);
    }
}

async fn earliest(log: &Arc<AnyLog>) -> Vec<u64> {
    log.earliest_offsets().await.unwrap()
}

async fn two_owners_reclaim_once_both_have_checkpointed(backend: Backend) {
    let env = Env::new(backend);
    let log = env.shared().await;
    let left = owner(&log, 0..4, 1).await;
    let right = owner(&log, 4..8, 1).await;
    for seq in 0..3 {
        round(&left, &groups(0..4), seq).await;
        round(&right, &groups(4..8), seq).await;
    }
    left.checkpoint(b"left").await.unwrap();
    let status = left.wait_for_reclaim().await;
    assert_eq!(status.waiting, vec![groups(4..8)], "the right owner has not checkpointed: {status:?}");
    assert_eq!(status.reclaims, 0);
    assert_eq!(earliest(&log).await, vec![0; common::PARTITIONS as usize], "nothing reclaimed yet");

    right.checkpoint(b"right").await.unwrap();
    let status = right.wait_for_reclaim().await;
    assert!(status.waiting.is_empty() && status.reclaims == 1, "{status:?}");
    assert!(status.records_reclaimed > 0, "{status:?}");
    assert!(status.disabled.is_none(), "{status:?}");

    // Both owners restore after the reclaim, and reuse what followed their checkpoints.
    round(&left, &groups(0..4), 3).await;
    round(&right, &groups(4..8), 3).await;
    drop((left, right));
    for (owned, name) in [(0..4, &b"left"[..]), (4..8, &b"right"[..])] {
        let (store, restored) =
            ActionStateStore::restore(Arc::clone(&log), keep(1), &groups(owned.clone()), RestoreFrom::Latest)
                .await
                .unwrap();
        assert_eq!(restored.metadata(), Some(name));
        for n in names().iter().filter(|n| groups(owned.clone()).owns(&key(n))) {
            let outcome = process(&store, key(n), 3, &replayed(&input(3))).await.unwrap();
            assert_eq!((outcome.reused, outcome.fresh), (STATES_PER_ROUND, 0), "{n}");
        }
    }
}
on_every_backend!(two_owners, two_owners_reclaim_once_both_have_checkpointed);

/// After a failover the new owner holds reclaim back until its own first checkpoint; the
/// replaced owner's checkpoints then stop counting.
async fn a_failover_holds_reclaim_until_the_new_owner_checkpoints(backend: Backend) {
    let env = Env::new(backend);
    let log = env.shared().await;
    let left = owner(&log, 0..4, 2).await;
    let right = owner(&log, 4..8, 2).await;
    for seq in 0..4 {
        round(&left, &groups(0..4), seq).await;
        round(&right, &groups(4..8), seq).await;
        left.checkpoint(b"left").await.unwrap();
        right.checkpoint(b"right").await.unwrap();
    }
    right.wait_for_reclaim().await;
    let before = earliest(&log).await;
    // The right owner fails over: its successor restores, and holds reclaim back.
    let successor = owner(&log, 4..8, 2).await;
    round(&left, &groups(0..4), 4).await;
    left.checkpoint(b"left").await.unwrap();
    let status = left.wait_for_reclaim().await;
    assert_eq!(status.waiting, vec![groups(4..8)], "{status:?}");
    assert_eq!(earliest(&log).await, before, "the successor's restore point is kept");
    // The replaced owner is a zombie now: it cannot checkpoint any more.
    assert!(right.checkpoint(b"zombie").await.is_err());
    round(&successor, &groups(4..8), 4).await;
    successor.checkpoint(b"successor").await.unwrap();
    let status = successor.wait_for_reclaim().await;
    assert!(status.waiting.is_empty(), "{status:?}");
    drop((left, successor, right));
    let (_, restored) =
        ActionStateStore::restore(Arc::clone(&log), keep(2), &groups(4..8), RestoreFrom::Latest).await.unwrap();
    assert_eq!(restored.metadata(), Some(&b"successor"[..]));
}
on_every_backend!(failover, a_failover_holds_reclaim_until_the_new_owner_checkpoints);

/// A rescale from two owners to three and back to two: the new owners wait for each other's
/// first checkpoints, every owner restores after each reclaim, and the log stays bounded.
async fn rescales_keep_every_owner_restorable_and_the_log_bounded(backend: Backend) {
    let env = Env::new(backend);
    let log = env.shared().await;
    let layouts: [&[std::ops::Range<u16>]; 3] = [&[0..4, 4..8], &[0..3, 3..6, 6..8], &[0..5, 5..8]];
    let mut seq = 0;
    let mut sizes = Vec::new();
    for layout in layouts {
        let mut owners = Vec::new();
        for owned in layout {
            owners.push((owner(&log, owned.clone(), 1).await, groups(owned.clone())));
        }
        for _ in 0..6 {
            for (store, owned) in &owners {
                round(store, owned, seq).await;
                store.checkpoint(&seq.to_le_bytes()).await.unwrap();
            }
            seq += 1;
        }
        for (store, _) in &owners {
            let status = store.wait_for_reclaim().await;
            assert!(status.waiting.is_empty() && status.failures == 0, "{status:?}");
        }
        let (earliest, end) = (earliest(&log).await, log.end_offsets().await.unwrap());
        sizes.push(end.iter().zip(&earliest).map(|(e, s)| e - s).sum::<u64>());
        drop(owners);
    }
    // Each layout restores the last one's checkpoints.
    let (_, restored) =
        ActionStateStore::restore(Arc::clone(&log), keep(1), &groups(0..8), RestoreFrom::Latest).await.unwrap();
    assert_eq!(restored.from.len(), 2, "both owners of the last layout: {:?}", restored.from);
    let total = log.end_offsets().await.unwrap().iter().sum::<u64>();
    assert!(sizes.iter().all(|s| *s * 3 < total), "retained {sizes:?} of {total} records");
}
on_every_backend!(rescales, rescales_keep_every_owner_restorable_and_the_log_bounded);

/// Owners that reclaim at the same time never take what another owner's retained checkpoint
/// needs: each restores afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_reclaims_of_several_owners_keep_every_owner_restorable() {
    let env = Env::new(Backend::Memory);
    let log = env.shared().await;
    let layout = [0..2, 2..4, 4..6, 6..8];
    let mut owners = Vec::new();
    for owned in &layout {
        owners.push(Arc::new(owner(&log, owned.clone(), 1).await));
    }
    for seq in 0..5u64 {
        let mut tasks = tokio::task::JoinSet::new();
        for (store, owned) in owners.iter().zip(&layout) {
            let (store, owned) = (Arc::clone(store), groups(owned.clone()));
            tasks.spawn(async move {
                round(&store, &owned, seq).await;
                store.checkpoint(&seq.to_le_bytes()).await.unwrap();
            });
        }
        tasks.join_all().await;
    }
    for store in &owners {
        assert_eq!(store.wait_for_reclaim().await.failures, 0);
    }
    assert!(earliest(&log).await.iter().any(|e| *e > 0), "something was reclaimed");
    drop(owners);
    for owned in layout {
        let (_, restored) =
            ActionStateStore::restore(Arc::clone(&log), keep(1), &groups(owned), RestoreFrom::Latest).await.unwrap();
        assert_eq!(restored.metadata(), Some(&4u64.to_le_bytes()[..]));
    }
}
