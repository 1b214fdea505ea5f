//! The put contract under every injected fault: a write that is not acknowledged never
//! changes the index, and whatever reached the log is recovered exactly once by a restore.
#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use actionstate_core::Trigger;
use actionstate_index::Recorded;
use actionstate_memory::MemoryLog;
use actionstate_recovery::{ActionStateStore, Begin, DurableCall, Ownership, Round, Snapshot, StoreConfig, TwoPhase};
use actionstate_testkit::Hold;
use common::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// The writer: a store whose runtime keeps its checkpoints, so that the tests can take
/// snapshots to restore from.
fn store_over(log: &FaultyMemory) -> ActionStateStore<FaultyMemory, TwoPhase> {
    ActionStateStore::new_two_phase(log.reopen(), StoreConfig::default())
}

/// A store restored from `snapshot` that replays the log without becoming its owner (no
/// fence), so the writer it looks at keeps writing as the owner.
async fn observer_over(log: &FaultyMemory, snapshot: &Snapshot) -> ActionStateStore<FaultyMemory, TwoPhase> {
    let config = StoreConfig { fence_on_rebuild: false, ..StoreConfig::default() };
    ActionStateStore::restore(log.reopen(), config, &Ownership::All, std::slice::from_ref(snapshot)).await.unwrap().0
}

/// A store restored from `snapshot`, the new owner of the log.
async fn restored_over<L: actionstate_core::StateLog>(log: L, snapshot: &Snapshot) -> ActionStateStore<L, TwoPhase> {
    let from = std::slice::from_ref(snapshot);
    ActionStateStore::restore(log, StoreConfig::default(), &Ownership::All, from).await.unwrap().0
}

#[tokio::test]
async fn failed_append_is_retryable_and_changes_neither_index_nor_log() {
    let log = faulty_memory(PARTITIONS);
    let store = store_over(&log);
    let k = key("put-failed-append");
    let inputs: Vec<_> = (0..3).map(input).collect();
    for seq in 0..2 {
        process(&store, k, seq, &inputs[seq as usize]).await.unwrap();
    }
    let probes: Vec<Probe> = (0..3).map(|seq| Probe::root(k, seq, &inputs[seq as usize])).collect();

    // A completion whose append fails.
    let handle = fresh(&store, k, 2, &inputs[2]).await;
    let before = view(&store, &probes);
    let (records_before, appends_before) = (records(&log).await, log.faults().appends());
    log.faults().fail_nth_append(1);
    let err = store.complete(handle, vec![event("out", 2)], vec![note(2)]).await.unwrap_err();
    assert!(err.is_retryable(), "a failed append must be retryable: {err}");
    assert_eq!(log.faults().appends(), appends_before + 1, "the completion was not even attempted");
    assert_eq!(view(&store, &probes), before, "a failed append changed the index");
    assert_eq!(records(&log).await, records_before, "a failed append left a record in the log");

    // A durable call whose journal write fails.
    let mut handle = fresh(&store, k, 2, &inputs[2]).await;
    let runs = AtomicUsize::new(0);
    log.faults().fail_nth_append(1);
    let call = DurableCall::new("tool.search").args_digest([7; 32]);
    let err = store.call(&mut handle, call, counted(&runs, Ok(b"hits".to_vec()))).await.unwrap_err();
    assert!(err.is_retryable(), "a failed journal write must be retryable: {err}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(view(&store, &probes), before, "a failed journal write changed the index");
    assert_eq!(records(&log).await, records_before, "a failed journal write left a record in the log");
    assert!(handle.journal().is_empty() && handle.cursor() == 0, "the handle kept a slot the log does not have");

    // Nothing is left half-done: the retry goes through and is indexed.
    store.complete(handle, vec![event("out", 2)], vec![note(2)]).await.unwrap();
    let again = replayed(&inputs[2]);
    let begin = store.begin(&Round::new(k, 2, &again), &plan(), &again, &Trigger::Input).await.unwrap();
    assert!(matches!(begin, Begin::Reuse(_)), "the retried completion is not reusable: {begin:?}");
}

#[tokio::test]
async fn lost_acknowledgement_is_recovered_exactly_once_by_rebuild() {
    let log = faulty_memory(PARTITIONS);
    let store = store_over(&log);
    let k = key("put-lost-ack");
    let inputs: Vec<_> = (0..3).map(input).collect();
    for seq in 0..2 {
        process(&store, k, seq, &inputs[seq as usize]).await.unwrap();
    }
    let taken_before = store.snapshot(1).await.unwrap();
    let probes: Vec<Probe> = (0..3).map(|seq| Probe::root(k, seq, &inputs[seq as usize])).collect();

    let handle = fresh(&store, k, 2, &inputs[2]).await;
    let sk = *handle.key();
    let outputs = vec![event("out", 2)];
    let before = view(&store, &probes);
    let records_before = records(&log).await;
    log.faults().lose_ack_of_nth_append(1);
    let err = store.complete(handle, outputs.clone(), vec![note(2)]).await.unwrap_err();
    assert!(err.is_retryable(), "a lost acknowledgement must be retryable: {err}");
    assert_eq!(view(&store, &probes), before, "an unacknowledged append changed the index");
    assert_eq!(records(&log).await, records_before + 1, "the record whose acknowledgement was lost is not in the log");
    assert_eq!(upserts_of(&log, &sk).await.len(), 1);

    // A restore of a snapshot taken before the write recovers it, once.
    let restored = observer_over(&log, &taken_before).await;
    assert_eq!(stats(&restored).states, before.stats.states + 1, "the recovered state is not counted exactly once");
    let recovered = restored.with_index(|ix| ix.get(&sk).cloned()).expect("the recovered state is not indexed");
    assert!(matches!(recovered, Recorded::Encoded(_)), "a rebuilt state is kept encoded");
    assert_eq!(recovered.state().unwrap().outputs(), outputs.as_slice());
    let again = replayed(&inputs[2]);
    let begin = restored.begin(&Round::new(k, 2, &again), &plan(), &again, &Trigger::Input).await.unwrap();
    assert!(matches!(begin, Begin::Reuse(_)), "the recovered completion is not reused: {begin:?}");

    // The runtime writes the same completion again: the log holds it twice, the index once.
    let handle = fresh(&store, k, 2, &inputs[2]).await;
    store.complete(handle, outputs.clone(), vec![note(2)]).await.unwrap();
    let written = store.with_index(|ix| ix.get(&sk).cloned()).expect("the written state is not indexed");
    assert!(matches!(written, Recorded::Encoded(_)), "a written state is kept encoded");
    assert_eq!(written.state().unwrap().outputs(), outputs.as_slice());
    assert_eq!(upserts_of(&log, &sk).await.len(), 2);
    assert_eq!(stats(&store).states, before.stats.states + 1, "the rewritten completion is indexed twice");
    let rebuilt = restored_over(log.reopen(), &taken_before).await;
    assert_eq!(stats(&rebuilt).states, before.stats.states + 1, "a restore indexed the completion twice");
    assert_eq!(dump(&rebuilt), dump(&store), "the restore does not reproduce the writer's index");
    rebuilt
        .with_index(|ix| {
            let _scan = actionstate_index::allow_scans();
            ix.check_invariants()
        })
        .unwrap();
}

#[tokio::test]
async fn dropped_put_future_never_indexes() {
    let memory = MemoryLog::new(PARTITIONS);
    let gate = Faulty::wrap(memory.clone());
    let store = ActionStateStore::new_two_phase(gate.clone(), StoreConfig::default());
    let k = key("put-dropped");
    let inputs: Vec<_> = (0..3).map(input).collect();
    for seq in 0..2 {
        process(&store, k, seq, &inputs[seq as usize]).await.unwrap();
    }
    let taken_before = store.snapshot(1).await.unwrap();
    let probes: Vec<Probe> = (0..3).map(|seq| Probe::root(k, seq, &inputs[seq as usize])).collect();
    let before = view(&store, &probes);
    let records_before = records(&memory).await;
    let wait = Duration::from_millis(50);

    // Dropped while the append has not reached the backend.
    gate.faults().hold_appends(Hold::BeforeAppend);
    let handle = fresh(&store, k, 2, &inputs[2]).await;
    let outputs = vec![event("out", 2)];
    let put = tokio::time::timeout(wait, store.complete(handle, outputs.clone(), vec![])).await;
    assert!(put.is_err(), "the held append completed");
    assert_eq!(view(&store, &probes), before, "a dropped put changed the index");
    assert_eq!(records(&memory).await, records_before);

    // Dropped after the record became durable, before its acknowledgement came back.
    gate.faults().hold_appends(Hold::BeforeAck);
    let handle = fresh(&store, k, 2, &inputs[2]).await;
    let sk = *handle.key();
    let put = tokio::time::timeout(wait, store.complete(handle, outputs.clone(), vec![])).await;
    assert!(put.is_err(), "the held acknowledgement arrived");
    assert_eq!(view(&store, &probes), before, "a put dropped before its acknowledgement changed the index");
    assert_eq!(records(&memory).await, records_before + 1, "the record did not reach the backend");

    // A durable call dropped while its journal write is held.
    let mut handle = fresh(&store, k, 2, &inputs[2]).await;
    let runs = AtomicUsize::new(0);
    let call = DurableCall::new("llm").args_digest([1; 32]);
    let call = tokio::time::timeout(wait, store.call(&mut handle, call, counted(&runs, Ok(vec![1])))).await;
    assert!(call.is_err(), "the held journal write completed");
    assert_eq!(view(&store, &probes), before, "a dropped journal write changed the index");

    // The dropped futures released their locks: the key takes writes again.
    gate.faults().hold_appends(Hold::Off);
    let handle = fresh(&store, k, 2, &inputs[2]).await;
    store.complete(handle, outputs.clone(), vec![]).await.unwrap();
    assert_eq!(stats(&store).states, before.stats.states + 1);

    // What did land is recovered once.
    let rebuilt = restored_over(memory.reopen(), &taken_before).await;
    assert_eq!(stats(&rebuilt).states, before.stats.states + 1);
    assert!(rebuilt.with_index(|ix| ix.get(&sk).is_some_and(|s| s.is_completed())));
}

/// A restore whose reads fail fails retryably and leaves no trace: the writer keeps its index,
/// its unlogged invalidations and its pending checkpoints, the log gains no record (no fence:
/// the writer is still the owner), and a restore right after the reads recover succeeds.
#[tokio::test]
async fn failed_reads_fail_the_rebuild_and_keep_the_previous_index() {
    let log = faulty_memory(PARTITIONS);
    let store = store_over(&log);
    let (a, b) = (key("reads-a"), key("reads-b"));
    let inputs: Vec<_> = (0..4).map(input).collect();
    for seq in 0..3 {
        process(&store, a, seq, &inputs[seq as usize]).await.unwrap();
        process(&store, b, seq, &inputs[seq as usize]).await.unwrap();
        finish_round(&store, a, seq);
    }
    let snap = store.snapshot(1).await.unwrap();
    process(&store, a, 3, &inputs[3]).await.unwrap();
    // An invalidation not yet logged: the changed input of b's round 1.
    let changed = input(100);
    let begin = store.begin(&Round::new(b, 1, &changed), &plan(), &changed, &Trigger::Input).await.unwrap();
    assert!(matches!(begin, Begin::Fresh(_, actionstate_core::MissReason::RootChanged)));
    let pending = store.pending_invalidations();
    assert!(pending > 0);

    let probes = vec![Probe::root(a, 3, &inputs[3]), Probe::root(b, 2, &inputs[2]), Probe::root(a, 0, &inputs[0])];
    let before = view(&store, &probes);
    let checkpoints = store.pending_checkpoints();
    let records_before = records(&log).await;
    log.faults().fail_reads(true);
    let from = std::slice::from_ref(&snap);
    let err = ActionStateStore::restore(log.reopen(), StoreConfig::default(), &Ownership::All, from).await.unwrap_err();
    assert!(err.is_retryable(), "a failed read must be retryable: {err}");
    assert_eq!(records(&log).await, records_before, "a failed restore appended to the log");
    assert_eq!(view(&store, &probes), before, "a failed restore changed the writer's index");
    assert_eq!(store.pending_invalidations(), pending, "a failed restore dropped the writer's unlogged invalidations");
    assert_eq!(store.pending_checkpoints(), checkpoints, "a failed restore made the writer forget checkpoints");

    log.faults().fail_reads(false);
    let restored = restored_over(log.reopen(), &snap).await;
    assert_eq!(states_after(&restored, &a, 2), STATES_PER_ROUND, "the retried restore lost a's round 3");
}

#[tokio::test]
async fn unreachable_backend_serves_lookups_and_fails_writes_retryably() {
    let log = faulty_memory(PARTITIONS);
    let store = store_over(&log);
    let k = key("down");
    let inputs: Vec<_> = (0..3).map(input).collect();
    for seq in 0..2 {
        process(&store, k, seq, &inputs[seq as usize]).await.unwrap();
    }
    let probes: Vec<Probe> = (0..3).map(|seq| Probe::root(k, seq, &inputs[seq as usize])).collect();
    let before = view(&store, &probes);
    let appends = log.faults().appends();

    log.faults().set_down(true);
    // Lookups are answered from memory.
    for seq in 0..2 {
        let outcome = process(&store, k, seq, &replayed(&inputs[seq as usize])).await.unwrap();
        assert_eq!(outcome.reused, STATES_PER_ROUND, "round {seq} not reused while the backend is down");
    }
    assert_eq!(log.faults().appends(), appends, "a lookup wrote to the backend");

    // Writes fail, retryably, and change nothing.
    let handle = fresh(&store, k, 2, &inputs[2]).await;
    let err = store.complete(handle, vec![], vec![]).await.unwrap_err();
    assert!(err.is_retryable(), "{err}");
    let mut handle = fresh(&store, k, 2, &inputs[2]).await;
    let runs = AtomicUsize::new(0);
    let call = DurableCall::new("llm").args_digest([3; 32]);
    let err = store.call(&mut handle, call, counted(&runs, Ok(vec![]))).await.unwrap_err();
    assert!(err.is_retryable(), "{err}");
    let err = store.snapshot(9).await.unwrap_err();
    assert!(err.is_retryable(), "{err}");
    assert_eq!(store.pending_checkpoints(), 0, "a failed snapshot was recorded");
    assert_eq!(view(&store, &probes), before);

    log.faults().set_down(false);
    let handle = fresh(&store, k, 2, &inputs[2]).await;
    store.complete(handle, vec![], vec![]).await.unwrap();
    assert_eq!(stats(&store).states, before.stats.states + 1);
}
