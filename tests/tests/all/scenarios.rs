//! Recovery scenarios on every backend (docs/design.md, sections 4, 5 and 9): the simulated
//! agent runs with crashes at chosen points, restores and replays, and each scenario compares
//! the run with a crash-free reference and checks the side-effect ledger.
//!
//! Crash points are found, not hard-coded: a binary search over crash points on the in-memory
//! log finds the first store operation (or append) at which a run has reached a given input,
//! and every scenario asserts that the situation it needs actually occurred.

use actionstate_core::{ActionId, Attributes, Event, KeyId, LogRecord, MissReason, StateKey, StateLog, Trigger, Value};
use actionstate_recovery::{
    ActionStateStore, Begin, CheckpointForm, Ownership, RebuildReport, Round, Snapshot, StoreConfig, TwoPhase,
};
use actionstate_sim::agent::Kind;
use actionstate_sim::{CrashPoint, InputChange, Outcome, RestoreFrom, RunPlan, SimConfig, inputs, key_id};
use actionstate_tests::*;
use std::collections::{BTreeSet, HashSet};

on_every_backend!("scenarios":
    normal_history_is_reused,
    changed_input_reruns_its_round_and_later_rounds_of_its_key,
    changed_root_reruns_children_with_identical_attributes,
    truncated_replay_falls_back_to_execution,
    checkpoint_after_divergence_does_not_revive_the_old_suffix,
    repeated_restore_from_the_same_checkpoint,
    repeated_restore_from_a_later_checkpoint,
    completed_cascade_survives_a_checkpoint_taken_before_its_replay,
    divergence_keeps_invalidated_records_until_their_rounds_complete,
    changed_input_never_touches_another_key,
    regenerated_bootstrap_events_are_reused,
    durable_calls_resume_after_a_crash_between_two_calls,
    durable_calls_resume_after_a_lost_acknowledgement,
    pending_call_is_reconciled_not_rerun,
    rescale_from_one_owner_to_two,
    rescale_from_two_owners_to_one,
    crash_in_the_first_checkpoint_then_before_the_next,
);

/// The scenario configuration: 20 inputs over 4 keys, a checkpoint after every 4 inputs, none
/// aborted, so checkpoints sit at input positions 0, 4, 8, 12, 16 and 20. With this seed the
/// inputs at 12 and 14 have the same key as the one at 8, the one at 13 another key, and the
/// keys are split among two owners.
fn config() -> SimConfig {
    SimConfig {
        seed: 9,
        keys: 4,
        inputs: 20,
        checkpoint_every: 4,
        abort_every: 0,
        owners: 1,
        reconcile: false,
        approval_every: 0,
    }
}

fn counter(point: &CrashPoint) -> (u8, u64) {
    match point {
        CrashPoint::BeforeOperation(n) => (0, *n),
        CrashPoint::BeforeAppend(n) => (1, *n),
        CrashPoint::AfterAppend(n) => (2, *n),
    }
}

/// The smallest `n` such that `plan` with one more crash at `point(n)` has that crash fire
/// once the run has reached input position `pos` (the round at `pos` in progress, or the
/// checkpoint right before it). Crashes already in `plan` must be of the same kind.
async fn first_at(config: &SimConfig, plan: &RunPlan, pos: usize, point: fn(u64) -> CrashPoint) -> u64 {
    let kind = counter(&point(0)).0;
    assert!(plan.crashes.iter().all(|c| counter(c).0 == kind), "mixed crash kinds in a search");
    let after = plan.crashes.iter().map(|c| counter(c).1).max().unwrap_or(0);
    let clean = reference(Backend::Memory, config, None).await.unwrap();
    let want = plan.crashes.len() + 1;
    let hi = after + 2 * clean.operations.max(clean.appends) + 1;
    let fires_at = async |n| {
        let mut p = plan.clone();
        p.crashes.push(point(n));
        let o = run(Backend::Memory, config, &p).await.unwrap();
        (o.crashes as usize == want).then(|| o.crashed_at.last().copied()).flatten()
    };
    // Monotone: a crash that does not fire comes after the end of the run.
    let n = smallest(after + 1, hi, async |n| fires_at(n).await.is_none_or(|at| at >= pos)).await;
    assert!(fires_at(n).await.is_some(), "no crash point reaches input {pos}");
    n
}

/// A store operation inside the round at input `pos` (`k` operations after the first one at
/// which the run has reached it).
async fn op_in_round(config: &SimConfig, plan: &RunPlan, pos: usize, k: u64) -> CrashPoint {
    CrashPoint::BeforeOperation(first_at(config, plan, pos, CrashPoint::BeforeOperation).await + k)
}

fn with_crash(plan: &RunPlan, point: CrashPoint) -> RunPlan {
    let mut p = plan.clone();
    p.crashes.push(point);
    p
}

/// Asserts that `o` produced the outputs and memory of the crash-free `reference`, that no
/// acknowledged completion is missing, and (when `no_duplicates`) that nothing acknowledged
/// ran twice.
fn assert_matches(o: &Outcome, reference: &Outcome, no_duplicates: bool) {
    let differ: Vec<_> = reference.results.keys().filter(|k| o.results.get(k) != reference.results.get(k)).collect();
    assert!(differ.is_empty(), "outputs of rounds {differ:?} differ from the crash-free run");
    assert_eq!(o.results.len(), reference.results.len(), "other rounds than the crash-free run");
    assert_eq!(o.memory, reference.memory, "memory differs from the crash-free run");
    assert_eq!(o.lost_acknowledged, 0, "acknowledged completions lost");
    if no_duplicates {
        assert_eq!(o.ledger.duplicate_actions, 0, "acknowledged actions ran again: {:?}", repeats(&o.ledger));
        assert_eq!(o.ledger.duplicate_calls, 0, "acknowledged durable calls ran again");
    }
}

/// The states acknowledged in `attempt` of the rounds at input positions `positions`.
fn acked_in_rounds(o: &Outcome, attempt: u64, positions: std::ops::Range<usize>) -> Vec<StateKey> {
    let rounds: HashSet<(KeyId, u64)> = rounds(&o.source)[positions].iter().copied().collect();
    completed_in(&o.ledger, attempt).into_iter().filter(|k| rounds.contains(&(k.key, k.seq))).collect()
}

/// Asserts that none of `states` ran again after it was acknowledged.
fn assert_never_rerun(o: &Outcome, states: &[StateKey]) {
    let states: HashSet<&StateKey> = states.iter().collect();
    let rerun: Vec<_> =
        executions(&o.ledger).into_iter().filter(|e| e.acked_in.is_some() && states.contains(&e.key)).collect();
    assert!(rerun.is_empty(), "recovered completions ran again: {rerun:?}");
}

/// A crash in the middle of the round at input 15: the restore goes back to the checkpoint at
/// 12, and rounds 12, 13 and 14 were completed before the crash.
async fn crash_at_15(backend: Backend, config: &SimConfig, base: &RunPlan) -> Outcome {
    let point = op_in_round(config, base, 15, 6).await;
    let o = run(backend, config, &with_crash(base, point)).await.unwrap();
    assert_eq!((o.crashes, o.restores), (1, 1));
    assert_eq!(o.crashed_at, [15]);
    assert_eq!(o.restored_from, [12]);
    o
}

async fn normal_history_is_reused(backend: Backend) {
    let config = config();
    let clean = reference(backend, &config, None).await.unwrap();
    let o = crash_at_15(backend, &config, &RunPlan::clean()).await;
    let recovered = acked_in_rounds(&o, 0, 12..15);
    assert_eq!(recovered.len(), 3 * ACTIONS_PER_ROUND, "rounds 12..15 (fan-out and cascades) completed");
    assert_never_rerun(&o, &recovered);
    assert!(o.reused >= recovered.len() as u64, "reused {} of {}", o.reused, recovered.len());
    assert_matches(&o, &clean, true);
}

/// Where a changed input falls: the changed key, its changed round, the positions of its
/// later rounds and of other keys' rounds among the replayed inputs before the crash.
struct Change {
    key: KeyId,
    seq: u64,
    later: Vec<usize>,
    others: Vec<usize>,
}

fn change_at(o: &Outcome, config: &SimConfig, at: usize, crash: usize) -> Change {
    let original = inputs(config);
    assert_ne!(o.source[at], original[at], "the input at {at} was changed");
    assert_eq!(o.source.iter().filter(|i| !original.contains(i)).count(), 1, "exactly one input changed");
    let rounds = rounds(&o.source);
    let (key, seq) = rounds[at];
    let later: Vec<usize> = (at + 1..crash).filter(|&p| rounds[p].0 == key).collect();
    let others: Vec<usize> = (at + 1..crash).filter(|&p| rounds[p].0 != key).collect();
    assert!(!later.is_empty(), "seed {}: the changed key has no later round before the crash", config.seed);
    assert!(!others.is_empty(), "seed {}: no other key's round before the crash", config.seed);
    Change { key, seq, later, others }
}

async fn changed_input_reruns_its_round_and_later_rounds_of_its_key(backend: Backend) {
    let config = config();
    let base = RunPlan { change: Some(InputChange::ChangeFirstReplayed), ..RunPlan::clean() };
    let o = crash_at_15(backend, &config, &base).await;
    let ch = change_at(&o, &config, 12, 15);
    // The reference is a crash-free run over the changed input source.
    let changed = reference(backend, &config, Some(&o.source)).await.unwrap();
    let original = reference(backend, &config, None).await.unwrap();
    assert_ne!(changed.memory, original.memory, "the change must be visible");
    assert_matches(&o, &changed, false);

    let rounds = rounds(&o.source);
    let ex = executions(&o.ledger);
    assert!(
        ex.iter().any(|e| e.attempt == 1
            && (e.key.key, e.key.seq) == (ch.key, ch.seq)
            && e.key.action == action(Kind::Plan)
            && e.reason == MissReason::RootChanged.as_str()),
        "the changed root ran with reason root_changed"
    );
    // The changed round and every later round of its key ran again, every action of them.
    for p in std::iter::once(12).chain(ch.later.iter().copied()) {
        let (k, seq) = rounds[p];
        let n = executed_in_round(&o.ledger, 1, k, seq).len();
        assert_eq!(n, ACTIONS_PER_ROUND, "round {seq} of the changed key (input {p}) re-ran {n} actions");
    }
    // Other keys' rounds were reused.
    for &p in &ch.others {
        let (k, seq) = rounds[p];
        assert_eq!(executed_in_round(&o.ledger, 1, k, seq), [], "round {seq} of another key (input {p}) re-ran");
    }
    // Re-executions are explained by the divergence, and only the changed key's suffix re-ran.
    assert!(!o.ledger.reexecuted.is_empty());
    for reason in o.ledger.reexecuted.keys() {
        assert!(["absent", "root_changed"].contains(&reason.as_str()), "re-execution for {reason}");
    }
    let repeated = repeats(&o.ledger);
    assert!(!repeated.is_empty());
    for r in &repeated {
        assert!(r.key.key == ch.key && r.key.seq >= ch.seq, "an acknowledged state outside the change re-ran: {r:?}");
    }
}

async fn changed_root_reruns_children_with_identical_attributes(backend: Backend) {
    let config = config();
    let base = RunPlan { change: Some(InputChange::ChangeFirstReplayedSameChildren), ..RunPlan::clean() };
    let o = crash_at_15(backend, &config, &base).await;
    let ch = change_at(&o, &config, 12, 15);
    let changed = reference(backend, &config, Some(&o.source)).await.unwrap();
    let original = reference(backend, &config, None).await.unwrap();
    assert_matches(&o, &changed, false);
    // The outputs are the same as before the change: only the root differs.
    assert_eq!(o.results[&(ch.key, ch.seq)], original.results[&(ch.key, ch.seq)]);

    for kind in [Kind::Plan, Kind::Work, Kind::Summarize] {
        let of = |attempt| -> Vec<StateKey> {
            executed_in_round(&o.ledger, attempt, ch.key, ch.seq)
                .into_iter()
                .filter(|e| e.key.action == action(kind))
                .map(|e| e.key)
                .collect()
        };
        let (before, after) = (of(0), of(1));
        let n = if kind == Kind::Plan { 1 } else { 2 };
        assert_eq!((before.len(), after.len()), (n, n), "{kind:?} runs per attempt: {before:?} {after:?}");
        if kind != Kind::Plan {
            let fingerprints = |v: &[StateKey]| v.iter().map(|k| k.fingerprint).collect::<BTreeSet<_>>();
            assert_eq!(fingerprints(&before), fingerprints(&after), "{kind:?} triggers have identical attributes");
        }
        for k in &after {
            assert!(!before.contains(k), "a {kind:?} state of the old root was reused");
        }
    }
}

async fn truncated_replay_falls_back_to_execution(backend: Backend) {
    let config = config();
    // The replay ends before recorded rounds: 12 and 13 are replayed, 14 and the partial
    // round 15 are never replayed.
    let base = RunPlan { truncate_after_restore: Some(14), ..RunPlan::clean() };
    let o = crash_at_15(backend, &config, &base).await;
    assert_eq!((o.inputs, o.source.len()), (14, 14));
    let short = reference(backend, &config, Some(&o.source)).await.unwrap();
    for (round, outputs) in &short.results {
        assert_eq!(o.results.get(round), Some(outputs), "round {round:?}");
    }
    assert_eq!(o.memory, short.memory);
    assert_eq!(o.lost_acknowledged, 0);
    assert_eq!(o.ledger.duplicates(), 0);
    assert_never_rerun(&o, &acked_in_rounds(&o, 0, 12..14));

    // The replay includes the round the crash cut short: what it completed is reused, the
    // rest of the round runs.
    let base = RunPlan { truncate_after_restore: Some(16), ..RunPlan::clean() };
    let o = crash_at_15(backend, &config, &base).await;
    assert_eq!(o.inputs, 16);
    let short = reference(backend, &config, Some(&o.source)).await.unwrap();
    assert_matches(&o, &short, true);
    let (k, seq) = rounds(&o.source)[15];
    let rerun = executed_in_round(&o.ledger, 1, k, seq).len();
    let partial = acked_in_rounds(&o, 0, 15..16).len();
    assert!(partial > 0 && partial < ACTIONS_PER_ROUND, "round 15 was cut short: {partial} actions completed");
    assert_eq!(rerun, ACTIONS_PER_ROUND - partial, "the missing part of round 15 ran");
}

async fn checkpoint_after_divergence_does_not_revive_the_old_suffix(backend: Backend) {
    let config = config();
    // Crash at 15, restore the older checkpoint at 8 with its first input changed, replay,
    // take the checkpoint at 12, crash right after it and restore that checkpoint.
    let base = RunPlan {
        change: Some(InputChange::ChangeFirstReplayed),
        restore_from: vec![RestoreFrom::Back(1), RestoreFrom::Latest],
        ..RunPlan::clean()
    };
    let first = with_crash(&base, op_in_round(&config, &base, 15, 6).await);
    let plan = with_crash(&first, op_in_round(&config, &first, 12, 1).await);
    let o = run(backend, &config, &plan).await.unwrap();
    assert_eq!(o.crashed_at, [15, 12]);
    assert_eq!(o.restored_from, [8, 12]);
    let rounds = rounds(&o.source);
    let (a, s) = rounds[8];
    let changed = reference(backend, &config, Some(&o.source)).await.unwrap();
    assert_matches(&o, &changed, false);

    // Rounds of the changed key recorded before the divergence and not replayed before the
    // second crash (inputs 12..15) must run again after it: the old suffix stays dead.
    let old_suffix: Vec<usize> = (12..15).filter(|&p| rounds[p].0 == a).collect();
    assert!(!old_suffix.is_empty(), "seed {}: the changed key has no round in 12..15", config.seed);
    for p in old_suffix {
        let (k, seq) = rounds[p];
        assert!(executed_in_round(&o.ledger, 1, k, seq).is_empty(), "input {p} was not replayed before the crash");
        let n = executed_in_round(&o.ledger, 2, k, seq).len();
        assert_eq!(n, ACTIONS_PER_ROUND, "old-history round {seq} (input {p}) was revived: only {n} actions ran");
    }
    // Other keys' recovered rounds survive the checkpoint at 12 and are reused.
    let others: Vec<StateKey> = acked_in_rounds(&o, 0, 12..15).into_iter().filter(|k| k.key != a).collect();
    assert!(!others.is_empty());
    assert_never_rerun(&o, &others);
    for r in repeats(&o.ledger) {
        assert!(r.key.key == a && r.key.seq >= s, "an acknowledged state outside the change re-ran: {r:?}");
        assert_eq!(r.acked_in, Some(0), "a state acknowledged after the divergence re-ran: {r:?}");
    }
}

async fn repeated_restore_from_the_same_checkpoint(backend: Backend) {
    let config = config();
    let clean = reference(backend, &config, None).await.unwrap();
    // Crash at 15, restore 12, crash again while replaying 13, restore 12 again.
    let base = RunPlan { restore_from: vec![RestoreFrom::Back(0), RestoreFrom::Back(0)], ..RunPlan::clean() };
    let first = with_crash(&base, op_in_round(&config, &base, 15, 6).await);
    let plan = with_crash(&first, op_in_round(&config, &first, 13, 3).await);
    let o = run(backend, &config, &plan).await.unwrap();
    assert_eq!(o.crashed_at, [15, 13]);
    assert_eq!(o.restored_from, [12, 12]);
    let recovered = acked_in_rounds(&o, 0, 12..15);
    assert_eq!(recovered.len(), 3 * ACTIONS_PER_ROUND);
    assert_never_rerun(&o, &recovered);
    assert!(o.reused >= (recovered.len() + ACTIONS_PER_ROUND) as u64, "reused {}", o.reused);
    assert_matches(&o, &clean, true);
}

async fn repeated_restore_from_a_later_checkpoint(backend: Backend) {
    let config = config();
    let clean = reference(backend, &config, None).await.unwrap();
    // Crash at 19, restore the older checkpoint at 12, replay past the checkpoint at 16, crash
    // at 17, restore the checkpoint at 16 that the replay took.
    let base = RunPlan { restore_from: vec![RestoreFrom::Back(1), RestoreFrom::Latest], ..RunPlan::clean() };
    let first = with_crash(&base, op_in_round(&config, &base, 19, 6).await);
    let plan = with_crash(&first, op_in_round(&config, &first, 17, 3).await);
    let o = run(backend, &config, &plan).await.unwrap();
    assert_eq!(o.crashed_at, [19, 17]);
    assert_eq!(o.restored_from, [12, 16]);
    let recovered = acked_in_rounds(&o, 0, 12..19);
    assert_eq!(recovered.len(), 7 * ACTIONS_PER_ROUND);
    assert_never_rerun(&o, &recovered);
    assert_matches(&o, &clean, true);
}

async fn completed_cascade_survives_a_checkpoint_taken_before_its_replay(backend: Backend) {
    let config = config();
    let clean = reference(backend, &config, None).await.unwrap();
    // Crash at 15, restore the older checkpoint at 8, take the checkpoint at 12 before the
    // recovered rounds 12..15 are replayed, crash right after it, restore it.
    let base = RunPlan { restore_from: vec![RestoreFrom::Back(1), RestoreFrom::Latest], ..RunPlan::clean() };
    let first = with_crash(&base, op_in_round(&config, &base, 15, 6).await);
    let plan = with_crash(&first, op_in_round(&config, &first, 12, 1).await);
    let o = run(backend, &config, &plan).await.unwrap();
    assert_eq!(o.crashed_at, [15, 12]);
    assert_eq!(o.restored_from, [8, 12]);
    let recovered = acked_in_rounds(&o, 0, 12..15);
    assert_eq!(recovered.len(), 3 * ACTIONS_PER_ROUND);
    assert_never_rerun(&o, &recovered);
    assert_matches(&o, &clean, true);
    assert_eq!(o.ledger.duplicates(), 0);
}

fn input_event(v: i64) -> Event {
    let mut attributes = Attributes::new();
    attributes.insert("v".into(), Value::Int(v));
    Event::new("input", attributes)
}

/// Runs one single-action round: reuses it if recorded, else completes it. Returns whether it
/// was reused, and the miss reason if not.
async fn answer<L: StateLog, F: CheckpointForm>(
    store: &ActionStateStore<L, F>,
    key: KeyId,
    seq: u64,
    v: i64,
) -> Option<MissReason> {
    let input = input_event(v);
    let round = Round::new(key, seq, &input);
    match store.begin(&round, &ActionId::new("answer"), &input, &Trigger::Input).await.unwrap() {
        Begin::Reuse(_) => None,
        Begin::Fresh(handle, reason) => {
            store.complete(handle, vec![input_event(v + 1)], Vec::new()).await.unwrap();
            Some(reason)
        }
        Begin::Resume(_) => panic!("nothing was pending"),
    }
}

/// A two-phase store of every key restored from `snapshot` on `env`'s log, and its rebuild.
async fn restored(env: &Env, snapshot: &Snapshot) -> (ActionStateStore<impl StateLog, TwoPhase>, RebuildReport) {
    let log = env.open().await.unwrap();
    let (store, restored) =
        ActionStateStore::restore(log, StoreConfig::default(), &Ownership::All, std::slice::from_ref(snapshot))
            .await
            .unwrap();
    (store, restored.rebuild)
}

async fn divergence_keeps_invalidated_records_until_their_rounds_complete(backend: Backend) {
    let env = Env::new(backend).unwrap();
    let a = KeyId::of(b"markers-a");
    let b = (0u32..)
        .map(|i| KeyId::of(format!("markers-b{i}").as_bytes()))
        .find(|b| b.partition(PARTITIONS) != a.partition(PARTITIONS))
        .unwrap();
    let (pa, pb) = (a.partition(PARTITIONS) as usize, b.partition(PARTITIONS) as usize);

    // Four rounds of each key; a checkpoint that completed none of them covers them all.
    // Two-phase stores: the test keeps the snapshots, as a runtime does, and restores them.
    let store = ActionStateStore::new_two_phase(env.open().await.unwrap(), StoreConfig::default());
    for seq in 0..4u64 {
        for k in [a, b] {
            assert_eq!(answer(&store, k, seq, seq as i64).await, Some(MissReason::Absent));
        }
    }
    let first = store.snapshot(1).await.unwrap();
    assert_eq!((first.marker.offsets[pa], first.marker.offsets[pb]), (0, 0));
    drop(store);

    // Restore it; the first replayed input of key a changed: its whole history is invalidated.
    let (store, _) = restored(&env, &first).await;
    assert_eq!(answer(&store, a, 0, 100).await, Some(MissReason::RootChanged));
    let second = store.snapshot(2).await.unwrap();
    drop(store);

    let records = env.records().await.unwrap();
    let of_a: Vec<&(u32, u64, LogRecord)> = records.iter().filter(|(_, _, r)| r.key_id() == a).collect();
    let last_invalidated = of_a.iter().filter(|(_, _, r)| !matches!(r, LogRecord::Upsert(_))).map(|(_, o, _)| *o).max();
    let last_invalidated = last_invalidated.expect("the divergence wrote tombstones and an audit");
    let new_root = of_a.iter().filter(|(_, _, r)| matches!(r, LogRecord::Upsert(_))).map(|(_, o, _)| *o).max().unwrap();
    let tombstones = of_a.iter().filter(|(_, _, r)| matches!(r, LogRecord::Delete { .. })).count();
    assert_eq!(tombstones, 4, "one tombstone per invalidated state");
    assert!(new_root > last_invalidated, "the invalidation is logged before the key's next write");
    // The marker stays at a's first invalidated record while its rounds are live: a restore
    // replays it and its removal, so the removed states' incarnations (which their calls'
    // idempotency keys are derived with) come out the same. b's live history keeps its marker.
    let first_invalidated = of_a.iter().map(|(_, o, _)| *o).min().unwrap();
    assert_eq!(second.marker.offsets[pa], first_invalidated);
    assert_eq!(second.marker.offsets[pb], first.marker.offsets[pb]);

    // A restore of the second checkpoint reads only from there and does not revive a's old
    // history, while b's history and a's new root are reused.
    let (store, report) = restored(&env, &second).await;
    let end = store.log().end_offsets().await.unwrap();
    let expected: u64 = end.iter().zip(&second.marker.offsets).map(|(e, m)| e - m).sum();
    assert_eq!(report.records, expected);
    assert_eq!(report.states, 5, "a's new root and b's four rounds");
    assert_eq!(answer(&store, a, 0, 100).await, None);
    for seq in 0..4u64 {
        assert_eq!(answer(&store, b, seq, seq as i64).await, None, "b's round {seq} is reused");
    }
    let old = input_event(0);
    let explained = store.explain(&Round::new(a, 0, &old), &ActionId::new("answer"), &old, &Trigger::Input);
    assert_eq!(explained.incarnation, 1, "the restore counts the removal of a's old round 0 again");
    assert_eq!(answer(&store, a, 1, 1).await, Some(MissReason::Absent), "a's old round 1 stays invalidated");

    // Once a's new history completes its rounds, a checkpoint prunes them with the removal
    // counts, and its marker moves past every invalidated record.
    for seq in 2..4u64 {
        assert_eq!(answer(&store, a, seq, seq as i64).await, Some(MissReason::Absent));
    }
    // Round 3 of both keys (input 3) is done.
    for k in [a, b] {
        store.round(Round::new(k, 3, &input_event(3))).finish();
    }
    let third = store.snapshot(3).await.unwrap();
    store.checkpoint_complete(3);
    let fourth = store.snapshot(4).await.unwrap();
    assert!(fourth.marker.offsets[pa] > last_invalidated, "{:?} (third {:?})", fourth.marker, third.marker);
}

async fn changed_input_never_touches_another_key(backend: Backend) {
    let config = config();
    let env = Env::new(backend).unwrap();
    let base = RunPlan { change: Some(InputChange::ChangeFirstReplayed), ..RunPlan::clean() };
    let point = op_in_round(&config, &base, 15, 6).await;
    let o = env.run(&config, None, &with_crash(&base, point)).await.unwrap();
    assert_eq!((o.crashed_at.as_slice(), o.restored_from.as_slice()), (&[15][..], &[12][..]));
    let ch = change_at(&o, &config, 12, 15);
    // No state of another key ran again, and no other key's recovered round ran at all.
    let rerun: Vec<_> =
        executions(&o.ledger).into_iter().filter(|e| e.key.key != ch.key && e.acked_in.is_some()).collect();
    assert_eq!(rerun, [], "another key's acknowledged states re-ran");
    let others: Vec<StateKey> = acked_in_rounds(&o, 0, 12..15).into_iter().filter(|k| k.key != ch.key).collect();
    assert_eq!(others.len(), ch.others.len() * ACTIONS_PER_ROUND);
    assert_never_rerun(&o, &others);
    // Every tombstone and audit in the log belongs to the changed key.
    let invalidations = invalidations_by_key(&env.records().await.unwrap());
    assert_eq!(invalidations.keys().copied().collect::<Vec<_>>(), [ch.key], "{invalidations:?}");
}

async fn regenerated_bootstrap_events_are_reused(backend: Backend) {
    let config = config();
    let clean = reference(backend, &config, None).await.unwrap();
    let o = crash_at_15(backend, &config, &RunPlan::clean()).await;
    // `greet` is triggered by a bootstrap event minted with a new id in every attempt, `jot`
    // by greet's output: both are reused by fingerprint.
    let bootstrapped: Vec<StateKey> = acked_in_rounds(&o, 0, 12..15)
        .into_iter()
        .filter(|k| k.action == action(Kind::Greet) || k.action == action(Kind::Jot))
        .collect();
    assert_eq!(bootstrapped.len(), 6, "greet and jot of rounds 12..15");
    assert_never_rerun(&o, &bootstrapped);
    assert_matches(&o, &clean, true);
}

/// Finds the crash among `candidates` that leaves exactly one `work` action half done with
/// `journaled` durable calls in its journal; returns it with the outcome on `backend`.
async fn crash_inside_work(
    backend: Backend,
    config: &SimConfig,
    candidates: impl Iterator<Item = CrashPoint>,
    wanted: impl Fn(&Outcome) -> bool,
) -> Outcome {
    for point in candidates {
        let plan = RunPlan::crashing([point]);
        let o = run(Backend::Memory, config, &plan).await.unwrap();
        if !wanted(&o) {
            continue;
        }
        let o = if backend == Backend::Memory { o } else { run(backend, config, &plan).await.unwrap() };
        assert!(wanted(&o), "{point:?} does not give the same situation on {backend:?}");
        return o;
    }
    panic!("no candidate crash point gives the situation");
}

fn resumed_works(o: &Outcome) -> Vec<Execution> {
    executions(&o.ledger).into_iter().filter(|e| e.reason == "resumed" && e.key.action == action(Kind::Work)).collect()
}

async fn assert_resumed_between_calls(backend: Backend, point: fn(u64) -> CrashPoint) {
    let config = config();
    let clean = reference(backend, &config, None).await.unwrap();
    let first = first_at(&config, &RunPlan::clean(), 15, point).await;
    let o = crash_inside_work(backend, &config, (first..first + 20).map(point), |o| {
        o.crashes == 1 && o.resumed == 1 && resumed_works(o).len() == 1 && o.ledger.calls_replayed == 1
    })
    .await;
    let work = resumed_works(&o)[0].key;
    // The first call came from the journal, the second ran once, and no call ran twice.
    assert_eq!(o.ledger.call_executions(&(work, 0, "tool.search")), 1);
    assert_eq!(o.ledger.call_executions(&(work, 1, "tool.fetch")), 1);
    assert_eq!(o.ledger.calls_executed, clean.ledger.calls_executed, "a durable call ran twice");
    assert_eq!(o.ledger.duplicate_calls, 0);
    assert_matches(&o, &clean, true);
}

async fn durable_calls_resume_after_a_crash_between_two_calls(backend: Backend) {
    assert_resumed_between_calls(backend, CrashPoint::BeforeOperation).await;
}

async fn durable_calls_resume_after_a_lost_acknowledgement(backend: Backend) {
    assert_resumed_between_calls(backend, CrashPoint::AfterAppend).await;
}

async fn pending_call_is_reconciled_not_rerun(backend: Backend) {
    let config = SimConfig { reconcile: true, ..config() };
    let clean = reference(backend, &config, None).await.unwrap();
    let first = first_at(&config, &RunPlan::clean(), 15, CrashPoint::BeforeAppend).await;
    // The append that would persist tool.fetch's result after it ran fails: the journal
    // holds its PENDING slot.
    let o = crash_inside_work(backend, &config, (first..first + 20).map(CrashPoint::BeforeAppend), |o| {
        o.crashes == 1 && o.ledger.calls_reconciled == 1
    })
    .await;
    let works = resumed_works(&o);
    assert_eq!(works.len(), 1);
    let fetch = (works[0].key, 1, "tool.fetch");
    assert_eq!(o.ledger.call_executions(&fetch), 1, "the reconciled call's side effect ran once");
    assert_eq!(o.ledger.calls_executed, clean.ledger.calls_executed, "a durable call ran twice");
    assert_eq!(o.ledger.duplicate_calls, 0);
    assert_matches(&o, &clean, true);
}

/// Asserts that the keys of `config` are split among two owners (key groups 0..64 and
/// 64..128 of 128, as the simulator assigns them).
fn assert_split_between_two_owners(config: &SimConfig) {
    let groups: BTreeSet<bool> = (0..config.keys).map(|k| key_id(k).key_group(128) < 64).collect();
    assert_eq!(groups.len(), 2, "seed {}: every key falls to one owner", config.seed);
}

async fn rescale(backend: Backend, before: u32, after: u32) {
    let config = SimConfig { owners: before, ..config() };
    assert_split_between_two_owners(&config);
    let clean = reference(backend, &config, None).await.unwrap();
    let base = RunPlan { owners_after_restore: vec![after], ..RunPlan::clean() };
    let o = crash_at_15(backend, &config, &base).await;
    let recovered = acked_in_rounds(&o, 0, 12..15);
    assert_eq!(recovered.len(), 3 * ACTIONS_PER_ROUND);
    assert_never_rerun(&o, &recovered);
    assert_matches(&o, &clean, true);
}

async fn rescale_from_one_owner_to_two(backend: Backend) {
    rescale(backend, 1, 2).await;
}

async fn rescale_from_two_owners_to_one(backend: Backend) {
    rescale(backend, 2, 1).await;
}

async fn crash_in_the_first_checkpoint_then_before_the_next(backend: Backend) {
    let config = config();
    let clean = reference(backend, &config, None).await.unwrap();
    // The first store operation of a run is checkpoint 0; the retry must take it again, or a
    // crash before the next checkpoint has nothing to restore and reruns acknowledged work.
    let first = RunPlan::crashing([CrashPoint::BeforeOperation(1)]);
    let plan = with_crash(&first, op_in_round(&config, &first, 3, 6).await);
    let o = run(backend, &config, &plan).await.unwrap();
    assert_eq!(o.crashed_at, [0, 3]);
    assert_eq!(o.restored_from, [0]);
    let recovered = acked_in_rounds(&o, 1, 0..3);
    assert_eq!(recovered.len(), 3 * ACTIONS_PER_ROUND);
    assert_never_rerun(&o, &recovered);
    assert_matches(&o, &clean, true);
}
