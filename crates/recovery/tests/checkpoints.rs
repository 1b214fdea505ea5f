//! The checkpoint lifecycle: what completing a checkpoint prunes, and that the map of
//! checkpoints stays bounded whatever the runtime does with them.
#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use actionstate_core::{Event, KeyId, StateLog};
use actionstate_recovery::{ActionStateStore, StoreConfig, TwoPhase};
use common::*;

const SNAPSHOTS: u64 = 10_000;

/// Two rounds of one key, the first reported complete.
async fn small_history<L: StateLog>(store: &ActionStateStore<L, TwoPhase>) -> KeyId {
    let k = key("checkpoints");
    for seq in 0..2 {
        process(store, k, seq, &input(seq as i64)).await.unwrap();
    }
    finish_round(store, k, 0);
    k
}

async fn aborted(backend: Backend) {
    let env = Env::new(backend);
    let store = env.two_phase().await;
    small_history(&store).await;
    let before = dump(&store);
    for id in 0..SNAPSHOTS {
        store.snapshot(id).await.unwrap();
        store.checkpoint_aborted(id);
    }
    assert_eq!(store.pending_checkpoints(), 0, "aborted checkpoints are remembered");
    assert_eq!(dump(&store), before, "aborting a checkpoint pruned states");
    assert_eq!(store.checkpoint_complete(SNAPSHOTS - 1), 0, "an aborted checkpoint pruned states when completed");
    assert_eq!(dump(&store), before);
}
on_every_backend!(aborted_checkpoints_leave_nothing_pending, aborted);

async fn unfinished(backend: Backend) {
    let env = Env::new(backend);
    let store = env.two_phase().await;
    small_history(&store).await;
    let bound = StoreConfig::default().max_pending_checkpoints;
    for id in 0..SNAPSHOTS {
        store.snapshot(id).await.unwrap();
        assert!(store.pending_checkpoints() <= bound, "{} checkpoints pending after {id}", store.pending_checkpoints());
    }
    assert!(store.pending_checkpoints() > 0);
    // The oldest were forgotten, as if aborted: completing one prunes nothing.
    assert_eq!(store.checkpoint_complete(0), 0);
    // The newest is still known: completing it prunes round 0 and forgets every older one.
    assert_eq!(store.checkpoint_complete(SNAPSHOTS - 1), STATES_PER_ROUND);
    assert_eq!(store.pending_checkpoints(), 0);
}
on_every_backend!(unfinished_checkpoints_stay_bounded, unfinished);

fn seqs<L: StateLog>(store: &ActionStateStore<L, TwoPhase>, k: &KeyId) -> Vec<u64> {
    store.with_index(|ix| ix.rounds_of(k).into_iter().map(|(s, _)| s).collect())
}

async fn prunes_completed(backend: Backend) {
    let env = Env::new(backend);
    let store = env.two_phase().await;
    let (a, b) = (key("prune-a"), key("prune-b"));
    let inputs: Vec<Event> = (0..5).map(input).collect();
    for seq in 0..5u64 {
        process(&store, a, seq, &inputs[seq as usize]).await.unwrap();
        if seq < 4 {
            process(&store, b, seq, &inputs[seq as usize]).await.unwrap();
        }
    }
    finish_round(&store, a, 2);
    finish_round(&store, a, 1); // never moves back
    finish_round(&store, b, 0);
    let first = store.snapshot(1).await.unwrap();
    assert_eq!(first.completed.get(&a), Some(&2));
    // Completed after the snapshot: not the checkpoint's to prune.
    finish_round(&store, a, 4);

    assert_eq!(store.checkpoint_complete(1), 4 * STATES_PER_ROUND, "rounds a:0..=2 and b:0 should be pruned");
    assert_eq!(seqs(&store, &a), vec![3, 4]);
    assert_eq!(seqs(&store, &b), vec![1, 2, 3]);
    assert_eq!(store.checkpoint_complete(1), 0, "a checkpoint completed twice pruned again");

    // Pruning moves the marker forward, never back.
    let second = store.snapshot(2).await.unwrap();
    let pa = a.partition(PARTITIONS) as usize;
    for (p, (new, old)) in second.marker.offsets.iter().zip(&first.marker.offsets).enumerate() {
        assert!(new >= old, "the marker of partition {p} moved back: {old} -> {new}");
    }
    assert!(second.marker.offsets[pa] > first.marker.offsets[pa], "pruning did not move a's partition forward");
    assert_eq!(second.completed.get(&a), Some(&4));
    assert_eq!(store.checkpoint_complete(2), 2 * STATES_PER_ROUND);
    assert_eq!(seqs(&store, &a), Vec::<u64>::new());
    assert_eq!(seqs(&store, &b), vec![1, 2, 3]);
}
on_every_backend!(checkpoint_complete_prunes_only_rounds_the_checkpoint_completed, prunes_completed);
