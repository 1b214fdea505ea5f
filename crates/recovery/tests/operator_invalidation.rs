//! An operator's repair: `ActionStateStore::invalidate(key, from_seq, reason)` removes every
//! state of the key's rounds from `from_seq` on through the records of a divergence (its
//! audit first, then one tombstone per removed state, each with the operator's reason), so
//! that the runtime re-executes exactly those rounds, and every later rebuild replays it —
//! also when a crash cut its records short.
#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use actionstate_core::{
    AuditDetail, Error, InvalidationReason, KeyId, LogRecord, MAX_OPERATOR_TEXT, StateKey, StateLog,
};
use actionstate_recovery::{
    ActionStateStore, AnyLog, CheckpointForm, Ownership, Restored, Snapshot, StoreConfig, StoreError, TwoPhase,
};
use common::{Backend, Env, Faulty, Outcome, STATES_PER_ROUND, at_marker, input, key, process, replayed};
use std::collections::BTreeSet;
use std::sync::Arc;

/// Rounds each key runs before the repair.
const ROUNDS: u64 = 5;
/// The first round the operator invalidates.
const FROM: u64 = 3;
/// The operator's reason.
const WHY: &str = "refund tool returned wrong amounts until 2026-11-30; re-run";

fn operator() -> InvalidationReason {
    InvalidationReason::Operator { text: WHY.to_owned() }
}

/// Runs rounds `0..ROUNDS` of `k` fresh.
async fn run_rounds<L: StateLog, F: CheckpointForm>(store: &ActionStateStore<L, F>, k: KeyId) {
    for seq in 0..ROUNDS {
        let outcome = process(store, k, seq, &input(seq as i64)).await.unwrap();
        assert_eq!(outcome.fresh, STATES_PER_ROUND, "round {seq} runs fresh the first time");
    }
}

/// Replays rounds `0..ROUNDS` of `k` (the inputs with new ids, as after a restore) and returns
/// what each did.
async fn replay_rounds<L: StateLog, F: CheckpointForm>(store: &ActionStateStore<L, F>, k: KeyId) -> Vec<Outcome> {
    let mut out = Vec::new();
    for seq in 0..ROUNDS {
        out.push(process(store, k, seq, &replayed(&input(seq as i64))).await.unwrap());
    }
    out
}

/// Rounds before `FROM` are reused whole, rounds from it on run again whole.
fn assert_reruns_exactly_the_invalidated_rounds(outcomes: &[Outcome], what: &str) {
    for (seq, o) in (0u64..).zip(outcomes) {
        let want = if seq < FROM {
            Outcome { reused: STATES_PER_ROUND, ..Outcome::default() }
        } else {
            Outcome { fresh: STATES_PER_ROUND, ..Outcome::default() }
        };
        assert_eq!(*o, want, "{what}: round {seq}");
    }
}

/// The state keys of `k`'s rounds `seq >= from` the store indexes.
fn states_from<L: StateLog, F: CheckpointForm>(
    store: &ActionStateStore<L, F>,
    k: &KeyId,
    from: u64,
) -> BTreeSet<StateKey> {
    store.with_index(|ix| {
        ix.rounds_of(k).into_iter().filter(|(s, _)| *s >= from).flat_map(|(_, v)| v).map(|r| *r.key()).collect()
    })
}

/// The operator's records of `k` in the log, in order: audits (seq, removed) and tombstones.
async fn operator_records<L: StateLog>(log: &L, k: &KeyId) -> (Vec<(u64, u64)>, Vec<StateKey>) {
    let (mut audits, mut tombstones) = (Vec::new(), Vec::new());
    for (_, record) in common::decoded(log, k.partition(common::PARTITIONS)).await {
        match record {
            LogRecord::Audit(a) if a.key == *k && a.reason == operator() => {
                assert_eq!(a.detail, AuditDetail::Operator);
                assert_eq!(a.probe, StateKey::round(*k, a.seq), "the probe names only the key and the round");
                assert_eq!(a.action, None);
                audits.push((a.seq, a.removed));
            }
            LogRecord::Delete { key, reason } if key.key == *k && reason == operator() => tombstones.push(key),
            _ => {}
        }
    }
    (audits, tombstones)
}

/// A new store over `env`'s log, restored from `snapshots` (the previous store must be dropped).
async fn restore_from(env: &Env, snapshots: &[Snapshot]) -> (ActionStateStore<AnyLog, TwoPhase>, Restored) {
    ActionStateStore::restore(env.open().await, StoreConfig::default(), &Ownership::All, snapshots).await.unwrap()
}

async fn removes_exactly_its_rounds(backend: Backend) {
    let env = Env::new(backend);
    let store = env.store().await;
    let (k, other) = (key("repaired"), key("bystander"));
    run_rounds(&store, k).await;
    run_rounds(&store, other).await;
    let doomed = states_from(&store, &k, FROM);
    assert_eq!(doomed.len(), (ROUNDS - FROM) as usize * STATES_PER_ROUND);
    let before = common::records(store.log()).await;

    let report = store.invalidate(k, FROM, WHY).await.unwrap();
    assert_eq!((report.key, report.from_seq, report.reason.clone()), (k, FROM, operator()));
    assert_eq!(report.removed.iter().copied().collect::<BTreeSet<_>>(), doomed);
    assert_eq!(report.records, doomed.len() + 1, "an audit and one tombstone per removed state");
    assert_eq!(common::records(store.log()).await, before + report.records as u64, "appended before it returned");
    assert_eq!(store.pending_invalidations(), 0);
    assert!(states_from(&store, &k, FROM).is_empty());
    assert_eq!(states_from(&store, &k, 0).len(), FROM as usize * STATES_PER_ROUND, "earlier rounds stay");

    // The log holds the audit, then exactly the removed states' tombstones, with the reason.
    let (audits, tombstones) = operator_records(store.log(), &k).await;
    assert_eq!(audits, vec![(FROM, doomed.len() as u64)]);
    assert_eq!(tombstones.iter().copied().collect::<BTreeSet<_>>(), doomed);
    assert_eq!(tombstones.len(), doomed.len());

    // Replayed, the earlier rounds are reused and the invalidated ones run again; the other
    // key is untouched.
    assert_reruns_exactly_the_invalidated_rounds(&replay_rounds(&store, k).await, "after the repair");
    for (seq, o) in (0u64..).zip(replay_rounds(&store, other).await) {
        assert_eq!(o.reused, STATES_PER_ROUND, "the other key's round {seq} is reused");
    }

    // Invalidating past the last round removes nothing, and is still audited.
    let none = store.invalidate(k, u64::MAX, "nothing there").await.unwrap();
    assert!(none.removed.is_empty());
    assert_eq!(none.records, 1);
    assert_eq!(states_from(&store, &k, 0).len(), ROUNDS as usize * STATES_PER_ROUND);
}

on_every_backend!(an_operator_invalidation_removes_exactly_the_rounds_from_its_seq_on, removes_exactly_its_rounds);

async fn rebuild_replays_it(backend: Backend) {
    let k = key("repaired");
    // Restores from the log's start, from a checkpoint taken after the rounds ran and before
    // the repair (its marker covers the states the repair removes), and from one after it.
    for restore in ["the log's start", "before the repair", "after the repair"] {
        let env = Env::new(backend);
        let store = env.two_phase_keeping_all().await;
        let start = store.snapshot(1).await.unwrap().marker;
        run_rounds(&store, k).await;
        let before = store.snapshot(2).await.unwrap().marker;
        store.invalidate(k, FROM, WHY).await.unwrap();
        let writer = common::dump(&store);
        let after = store.snapshot(3).await.unwrap().marker;
        drop(store);
        let marker = match restore {
            "the log's start" => start,
            "before the repair" => before,
            _ => after,
        };

        // No round was finished before these snapshots: restoring the marker alone is
        // restoring the snapshot.
        let from = [at_marker(&marker)];
        let (store, restored) = restore_from(&env, &from).await;
        let report = restored.rebuild;
        assert_eq!(report.tombstones_queued, 0, "from {restore}: the log holds the whole invalidation");
        assert_eq!(common::dump(&store), writer, "from {restore}: the rebuild is the writer's index");
        assert_reruns_exactly_the_invalidated_rounds(&replay_rounds(&store, k).await, restore);

        // The next restore of the same checkpoint reuses the re-executed rounds: the repair
        // replays before them, once.
        drop(store);
        let (store, _) = restore_from(&env, &from).await;
        for (seq, o) in (0u64..).zip(replay_rounds(&store, k).await) {
            assert_eq!(o.reused, STATES_PER_ROUND, "from {restore}, again: round {seq} is reused");
        }
    }
}

on_every_backend!(a_rebuild_replays_an_operator_invalidation, rebuild_replays_it);

async fn cut_repair(backend: Backend) {
    let k = key("repaired");
    let states = (ROUNDS - FROM) as usize * STATES_PER_ROUND;
    // The repair is 1 + `states` records: cut after each of the first `states` of them.
    for keep in 1..=states as u64 {
        let env = Env::new(backend);
        let log = Faulty::wrap(env.open().await);
        let faults = Arc::clone(log.faults());
        let store = ActionStateStore::new_two_phase(log, StoreConfig::default());
        let before: Snapshot = store.snapshot(1).await.unwrap();
        run_rounds(&store, k).await;
        let doomed = states_from(&store, &k, FROM);
        faults.fail_appends_after(Some(keep));
        let failed = store.invalidate(k, FROM, WHY).await;
        assert!(matches!(failed, Err(StoreError::Log(ref e)) if e.is_retryable()), "cut after {keep}: {failed:?}");
        drop(store);

        // A new store rebuilds from before the rounds ran: the audit replays the whole repair.
        let (store, restored) = restore_from(&env, std::slice::from_ref(&before)).await;
        let report = restored.rebuild;
        assert!(states_from(&store, &k, FROM).is_empty(), "cut after {keep}: a removed state came back");
        assert_eq!(report.tombstones_queued, (states + 1) as u64 - keep, "cut after {keep}");
        assert_reruns_exactly_the_invalidated_rounds(&replay_rounds(&store, k).await, &format!("cut after {keep}"));

        // The key's next write appended the tombstones the cut lost: the log holds the whole
        // repair, one tombstone per removed state.
        drop(store);
        let (audits, tombstones) = operator_records(&env.open().await, &k).await;
        assert_eq!(audits, vec![(FROM, states as u64)], "cut after {keep}");
        assert_eq!(tombstones.iter().copied().collect::<BTreeSet<_>>(), doomed, "cut after {keep}");
        assert_eq!(tombstones.len(), states, "cut after {keep}");
    }
}

on_every_backend!(a_crash_inside_an_operator_invalidation_replays_to_the_whole_of_it, cut_repair);

async fn too_long(backend: Backend) {
    let env = Env::new(backend);
    let store = env.store().await;
    let k = key("repaired");
    run_rounds(&store, k).await;
    let before = (common::records(store.log()).await, common::dump(&store));
    let text = "x".repeat(MAX_OPERATOR_TEXT + 1);
    match store.invalidate(k, FROM, &text).await {
        Err(StoreError::Log(Error::OperatorTextTooLong { len, max })) => {
            assert_eq!((len, max), (MAX_OPERATOR_TEXT + 1, MAX_OPERATOR_TEXT));
        }
        other => panic!("a reason of {} bytes was taken: {other:?}", text.len()),
    }
    assert_eq!((common::records(store.log()).await, common::dump(&store)), before, "nothing changed");
    let at_limit = store.invalidate(k, FROM, &text[1..]).await.unwrap();
    assert_eq!(at_limit.removed.len(), (ROUNDS - FROM) as usize * STATES_PER_ROUND);
}

on_every_backend!(an_operator_reason_beyond_the_limit_is_refused_and_changes_nothing, too_long);
