//! Rebuild on restore: ownership filtering and rescaling, restoring twice in a row, and history
//! that an invalidation removed staying removed.
#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use actionstate_core::{Event, KeyId, MissReason, StateLog, Trigger};
use actionstate_index::Decision;
use actionstate_recovery::{
    ActionStateStore, Begin, CheckpointForm, Ownership, Retention, Round, Snapshot, StoreConfig,
};
use common::*;
use std::collections::BTreeSet;
use std::sync::Arc;

const KEYS: usize = 40;

fn keys() -> Vec<KeyId> {
    (0..KEYS).map(|i| key(&format!("owned-{i}"))).collect()
}

fn half(n: u16) -> Ownership {
    Ownership::Groups { max_groups: 16, owned: n * 8..(n + 1) * 8 }
}

fn keep_all() -> StoreConfig {
    StoreConfig { retention: Retention::KeepAll, ..StoreConfig::default() }
}

fn key_set(d: &Dump) -> BTreeSet<KeyId> {
    d.keys().map(|sk| sk.key).collect()
}

async fn ownership_filter(backend: Backend) {
    let env = Env::new(backend);
    let inputs: Vec<Event> = (0..3).map(input).collect();
    let (snap, writer) = {
        let store = env.two_phase().await;
        for seq in 0..3u64 {
            for k in keys() {
                process(&store, k, seq, &inputs[seq as usize]).await.unwrap();
            }
        }
        for k in keys() {
            finish_round(&store, k, 0);
        }
        let snap = store.snapshot(1).await.unwrap();
        store.checkpoint_complete(1);
        (snap, dump(&store))
    };
    assert_eq!(key_set(&writer).len(), KEYS);

    let mut restored = Vec::new();
    for ownership in [Ownership::All, half(0), half(1)] {
        let from = std::slice::from_ref(&snap);
        let (store, done) =
            ActionStateStore::restore(env.open().await, StoreConfig::default(), &ownership, from).await.unwrap();
        let report = done.rebuild;
        let d = dump(&store);
        assert!(d.keys().all(|sk| ownership.owns(&sk.key)), "{ownership:?} kept a key it does not own");
        assert_eq!(report.foreign > 0, ownership != Ownership::All, "{ownership:?}: {report:?}");
        restored.push(d);
    }
    let [all, a, b] = <[Dump; 3]>::try_from(restored).unwrap();
    assert_eq!(all, writer, "a single-owner rebuild does not reproduce the writer's index");
    assert!(!a.is_empty() && !b.is_empty(), "one owner got nothing: the test proves nothing");
    assert!(key_set(&a).is_disjoint(&key_set(&b)), "two owners restored the same key");
    let mut union = a;
    union.extend(b);
    assert_eq!(union, all, "the owners together do not restore what one owner restores");
}
on_every_backend!(ownership_groups_split_keys_disjointly_and_cover_a_single_owner, ownership_filter);

async fn rescale(backend: Backend) {
    let env = Env::new(backend);
    let log = env.shared().await;
    let workers =
        [half(0), half(1)].map(|o| (ActionStateStore::new_two_phase(Arc::clone(&log), StoreConfig::default()), o));
    let inputs: Vec<Event> = (0..4).map(input).collect();
    let mut checkpoints: Vec<Snapshot> = Vec::new();
    for (checkpoint, rounds) in [(1u64, 0..2u64), (2, 2..4)] {
        // The workers' writes interleave in the log, as concurrent workers' would.
        for seq in rounds {
            for k in keys() {
                let (store, _) = workers.iter().find(|(_, o)| o.owns(&k)).unwrap();
                process(store, k, seq, &inputs[seq as usize]).await.unwrap();
                if seq < 3 {
                    finish_round(store, k, seq);
                }
            }
        }
        checkpoints.clear();
        for (store, _) in &workers {
            checkpoints.push(store.snapshot(checkpoint).await.unwrap());
        }
        for (store, _) in &workers {
            store.checkpoint_complete(checkpoint);
        }
    }
    assert_ne!(checkpoints[0].marker, checkpoints[1].marker, "the workers' markers agree: merging proves nothing");
    let mut expected = dump(&workers[0].0);
    expected.extend(dump(&workers[1].0));
    drop(workers);

    // Both owners' snapshots: the restore merges their markers and completed rounds.
    let (store, _) = ActionStateStore::restore(Arc::clone(&log), StoreConfig::default(), &Ownership::All, checkpoints)
        .await
        .unwrap();
    assert_eq!(dump(&store), expected, "merging both owners' markers does not reproduce both owners' indexes");
    assert_eq!(stats(&store).states, KEYS * STATES_PER_ROUND, "only round 3 of each key should remain");
    for k in keys() {
        let outcome = process(&store, k, 3, &replayed(&inputs[3])).await.unwrap();
        assert_eq!(outcome.reused, STATES_PER_ROUND, "round 3 of a key is not reused after the rescale");
    }
}
on_every_backend!(rescale_two_owners_into_one_reproduces_everything, rescale);

async fn restore_twice(backend: Backend) {
    // Restores a checkpoint five completed checkpoints back: the store keeps the whole log.
    let env = Env::new(backend);
    let k = key("restore-twice");
    let inputs: Vec<Event> = (0..8).map(input).collect();
    const C: u64 = 2;
    let checkpoint_c = {
        let store = env.two_phase_keeping_all().await;
        let mut c = None;
        for seq in 0..8u64 {
            assert_eq!(process(&store, k, seq, &inputs[seq as usize]).await.unwrap().fresh, STATES_PER_ROUND);
            finish_round(&store, k, seq);
            let snap = store.snapshot(seq).await.unwrap();
            if seq == C {
                c = Some(snap);
            }
            store.checkpoint_complete(seq);
        }
        c.unwrap()
    };
    let future_work = (8 - C as usize - 1) * STATES_PER_ROUND;

    // First restore: the work of rounds after C is recovered, not yet replayed.
    let second = {
        let store = env.restored_with(keep_all(), &[checkpoint_c]).await;
        assert_eq!(states_after(&store, &k, C), future_work);
        assert_eq!(stats(&store).states, future_work, "rounds the checkpoint completed were not pruned");
        // A checkpoint is taken before any input is replayed, and completes.
        let snap = store.snapshot(100).await.unwrap();
        assert_eq!(store.checkpoint_complete(100), 0, "completing it pruned recovered future work");
        snap
    };

    // Second restore, from the new checkpoint: nothing recovered before is lost.
    let store = env.restored_with(keep_all(), &[second]).await;
    assert_eq!(states_after(&store, &k, C), future_work, "the second restore lost recovered future work");
    for seq in C + 1..8 {
        let outcome = process(&store, k, seq, &replayed(&inputs[seq as usize])).await.unwrap();
        assert_eq!(outcome, Outcome { reused: STATES_PER_ROUND, resumed: 0, fresh: 0 }, "round {seq} ran again");
    }
}
on_every_backend!(restore_twice_in_a_row_loses_no_recovered_future_work, restore_twice);

fn explain_root<L: StateLog, F: CheckpointForm>(
    store: &ActionStateStore<L, F>,
    k: KeyId,
    seq: u64,
    input: &Event,
) -> Decision {
    store.explain(&Round::new(k, seq, input), &plan(), input, &Trigger::Input).decision
}

// Long: one scenario read top to bottom: each restore checks what the one before it left.
async fn not_revived(backend: Backend) {
    // Restores a checkpoint four completed checkpoints back: the store keeps the whole log.
    let env = Env::new(backend);
    let k = key("not-revived");
    let inputs: Vec<Event> = (0..6).map(input).collect();
    let changed = input(1000);
    const K: u64 = 3;
    let original = {
        let store = env.two_phase_keeping_all().await;
        let mut original = None;
        for seq in 0..6u64 {
            process(&store, k, seq, &inputs[seq as usize]).await.unwrap();
            finish_round(&store, k, seq);
            let snap = store.snapshot(seq).await.unwrap();
            if seq == 1 {
                original = Some(snap);
            }
            store.checkpoint_complete(seq);
        }
        original.unwrap()
    };

    let later = {
        let store = env.restored_with(keep_all(), std::slice::from_ref(&original)).await;
        assert_eq!(states_after(&store, &k, 1), 4 * STATES_PER_ROUND);
        let outcome = process(&store, k, 2, &replayed(&inputs[2])).await.unwrap();
        assert_eq!(outcome.reused, STATES_PER_ROUND);
        // The input of round K changed: rounds K and later are invalidated.
        let begin = store.begin(&Round::new(k, K, &changed), &plan(), &changed, &Trigger::Input).await.unwrap();
        let Begin::Fresh(handle, MissReason::RootChanged) = begin else {
            panic!("expected RootChanged, got {begin:?}")
        };
        assert_eq!(states_after(&store, &k, K - 1), 0, "RootChanged left states of rounds >= {K}");
        drop(handle);
        let outcome = process(&store, k, K, &changed).await.unwrap();
        assert_eq!(outcome.fresh, STATES_PER_ROUND);
        let snap = store.snapshot(10).await.unwrap();
        assert_eq!(store.pending_invalidations(), 0, "the snapshot left invalidations unlogged");
        snap
    };

    for (what, snap) in [("the later snapshot", &later), ("the original marker", &original)] {
        let store = env.restored_with(keep_all(), std::slice::from_ref(snap)).await;
        assert_eq!(stats(&store).states, 2 * STATES_PER_ROUND, "{what}: rounds 2 and the new {K} should remain");
        assert!(explain_root(&store, k, K, &replayed(&changed)).hit().is_some(), "{what}: the new round {K} is gone");
        assert!(
            matches!(
                explain_root(&store, k, K, &replayed(&inputs[K as usize])),
                Decision::Miss(MissReason::RootChanged)
            ),
            "{what}: the invalidated round {K} is back"
        );
        for seq in K + 1..6 {
            let decision = explain_root(&store, k, seq, &replayed(&inputs[seq as usize]));
            assert!(
                matches!(decision, Decision::Miss(MissReason::Absent)),
                "{what}: round {seq} revived: {decision:?}"
            );
            let step = Trigger::Emitted { producer: explain_key(&store, k, seq, &inputs[seq as usize]), index: 0 };
            let e = event("step", format!("{seq}/0"));
            assert!(
                store.explain(&Round::new(k, seq, &inputs[seq as usize]), &act(), &e, &step).decision.hit().is_none()
            );
        }
        let outcome = process(&store, k, K, &replayed(&changed)).await.unwrap();
        assert_eq!(outcome.reused, STATES_PER_ROUND, "{what}: the new round {K} is not reused");
        for seq in K + 1..6 {
            let begin = store
                .begin(
                    &Round::new(k, seq, &inputs[seq as usize]),
                    &plan(),
                    &replayed(&inputs[seq as usize]),
                    &Trigger::Input,
                )
                .await
                .unwrap();
            assert!(!matches!(begin, Begin::Reuse(_)), "{what}: invalidated round {seq} was reused");
        }
    }
}

fn explain_key<L: StateLog, F: CheckpointForm>(
    store: &ActionStateStore<L, F>,
    k: KeyId,
    seq: u64,
    input: &Event,
) -> actionstate_core::StateKey {
    store.explain(&Round::new(k, seq, input), &plan(), input, &Trigger::Input).key
}
on_every_backend!(invalidated_history_is_never_revived_by_a_later_restore, not_revived);

#[tokio::test]
async fn rebuild_past_its_deadline_names_the_unfinished_partitions_and_changes_nothing() {
    let log = actionstate_memory::MemoryLog::new(4);
    let writer = ActionStateStore::new_two_phase(log.reopen(), StoreConfig::default());
    for k in keys() {
        process(&writer, k, 0, &input(0)).await.unwrap();
    }
    let snap = writer.snapshot(1).await.unwrap();
    let end = log.end_offsets().await.unwrap();
    assert!(end[2] > 0, "partition 2 holds records: {end:?}");

    let config = StoreConfig {
        rebuild_deadline: Some(std::time::Duration::from_millis(300)),
        // The hung read counts as stalled after this long; the failed rebuild waits for it
        // (and every other read in flight) at most that long before it returns.
        rebuild_stall: std::time::Duration::from_secs(2),
        ..StoreConfig::default()
    };
    process(&writer, key("before"), 0, &input(0)).await.unwrap();
    let (before, records_before) = (writer.stats(), log.end_offsets().await.unwrap());
    let started = std::time::Instant::now();
    let slow = with_slow_reads(log.reopen(), SlowReads::Hang(2));
    let from = [at_marker(&snap.marker)];
    let restore = ActionStateStore::restore(slow, config, &Ownership::All, from.as_slice());
    let err = restore.await.unwrap_err();
    eprintln!("{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "the deadline did not stop the rebuild");
    let actionstate_recovery::StoreError::RebuildDeadline { unfinished, .. } = &err else {
        panic!("expected a deadline error, got {err}");
    };
    assert_eq!(unfinished, &vec![(2, snap.marker.offsets[2], end[2])]);
    assert!(err.is_retryable());
    // A failed restore leaves everything as it was: no record appended (no fence, so the
    // writer is still the owner) and the writer's index unchanged.
    assert_eq!(log.end_offsets().await.unwrap(), records_before, "a failed restore appended to the log");
    assert_eq!(writer.stats(), before, "a failed restore must leave the writer as it was");
}
