//! Durable calls: journaling, replay after a crash, divergence of the journal, reconcile mode,
//! and what each costs in writes.
#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use actionstate_core::{CallResult, CallStatus, Event, IdempotencyKey, KeyId, StateKey, StateLog};
use actionstate_memory::MemoryLog;
use actionstate_recovery::{
    ActionStateStore, AnyLog, Call, CallSource, DurableCall, Ownership, Snapshot, StoreConfig, TwoPhase,
};
use actionstate_testkit::Hold;
use common::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

fn digest(n: u8) -> [u8; 32] {
    [n; 32]
}

/// A call to `function_id` whose argument digest is pinned to `digest(n)`, so that the tests
/// can spell out the journal slots and idempotency keys it must produce.
fn durable(function_id: &str, n: u8) -> DurableCall<'_> {
    DurableCall::new(function_id).args_digest(digest(n))
}

fn executed(output: actionstate_recovery::CallOutput) -> Call {
    Call { output, source: CallSource::Executed }
}

fn journal(output: actionstate_recovery::CallOutput) -> Call {
    Call { output, source: CallSource::Journal }
}

fn slot(function_id: &str, n: u8, status: CallStatus) -> CallResult {
    CallResult { function_id: function_id.into(), args_digest: digest(n), status }
}

/// The PENDING slot of the call at `position` to `function_id` with `digest(n)`: it carries the
/// call's idempotency key.
fn pending(sk: &StateKey, position: usize, function_id: &str, n: u8) -> CallStatus {
    CallStatus::Pending { key: Some(IdempotencyKey::derive("", sk, 0, position, function_id, &digest(n))) }
}

fn ok(bytes: &[u8]) -> CallStatus {
    CallStatus::Succeeded { result: bytes.to_vec() }
}

/// The journal of the latest record of `sk` in the log.
async fn logged_journal<L: StateLog>(log: &L, sk: &StateKey) -> Vec<CallResult> {
    upserts_of(log, sk).await.last().expect("no record of the state in the log").calls().to_vec()
}

fn runs(counter: &AtomicUsize) -> usize {
    counter.load(Ordering::SeqCst)
}

/// Restores `snapshot` into a new store over `log`, as the process that replaces a crashed one
/// does.
async fn restore_over(log: &FaultyMemory, snapshot: &Snapshot) -> ActionStateStore<FaultyMemory, TwoPhase> {
    let (store, _) = ActionStateStore::restore(
        log.reopen(),
        StoreConfig::default(),
        &Ownership::All,
        std::slice::from_ref(snapshot),
    )
    .await
    .unwrap();
    store
}

/// Restores `snapshot` into a new store over `env` (the previous store must be dropped).
async fn restore(env: &Env, snapshot: &Snapshot) -> ActionStateStore<AnyLog, TwoPhase> {
    env.restored(std::slice::from_ref(snapshot)).await
}

async fn resume_after_crash(backend: Backend) {
    let env = Env::new(backend);
    let (k, inp) = (key("calls-resume"), input(1));
    let count = AtomicUsize::new(0);
    let (snapshot, sk) = {
        let store = env.two_phase().await;
        let snapshot = store.snapshot(0).await.unwrap();
        let mut h = fresh(&store, k, 0, &inp).await;
        let a = store.call(&mut h, durable("llm.complete", 1), counted(&count, Ok(b"answer".to_vec()))).await.unwrap();
        assert_eq!(a, executed(Ok(b"answer".to_vec())));
        let b = store.call(&mut h, durable("tool.search", 2), counted(&count, Ok(b"hits".to_vec()))).await.unwrap();
        assert_eq!(b, executed(Ok(b"hits".to_vec())));
        (snapshot, *h.key())
        // Crash: the store goes away with the action unfinished.
    };
    let store = restore(&env, &snapshot).await;
    let again = replayed(&inp);
    let mut h = resume(&store, k, 0, &again).await;
    assert_eq!(*h.key(), sk);
    assert_eq!(h.journal().len(), 2, "the pending journal was not recovered");
    let a = store.call(&mut h, durable("llm.complete", 1), counted(&count, Ok(b"other".to_vec()))).await.unwrap();
    assert_eq!(a, journal(Ok(b"answer".to_vec())));
    let b = store.call(&mut h, durable("tool.search", 2), counted(&count, Ok(b"other".to_vec()))).await.unwrap();
    assert_eq!(b, journal(Ok(b"hits".to_vec())));
    assert_eq!(runs(&count), 2, "a journaled call ran again");
    let c = store.call(&mut h, durable("mail.send", 3), counted(&count, Ok(b"sent".to_vec()))).await.unwrap();
    assert_eq!(c, executed(Ok(b"sent".to_vec())));
    assert_eq!(runs(&count), 3);
    store.complete(h, vec![], vec![]).await.unwrap();
    let outcome = process(&store, k, 0, &replayed(&inp)).await.unwrap();
    assert!(outcome.reused >= 1, "the completed action is not reused: {outcome:?}");
}
on_every_backend!(resume_after_crash_replays_the_journal_without_running_calls, resume_after_crash);

async fn mismatch_truncates(backend: Backend) {
    let env = Env::new(backend);
    let (k, inp) = (key("calls-mismatch"), input(2));
    let count = AtomicUsize::new(0);
    let snapshot = {
        let store = env.two_phase().await;
        let snapshot = store.snapshot(0).await.unwrap();
        let mut h = fresh(&store, k, 0, &inp).await;
        for (n, f) in [(1, "a"), (2, "b"), (3, "c")] {
            store.call(&mut h, durable(f, n), counted(&count, Ok(f.as_bytes().to_vec()))).await.unwrap();
        }
        snapshot
    };
    let store = restore(&env, &snapshot).await;
    let mut h = resume(&store, k, 0, &replayed(&inp)).await;
    let sk = *h.key();
    assert_eq!(h.journal().len(), 3);
    assert_eq!(
        store.call(&mut h, durable("a", 1), counted(&count, Ok(vec![]))).await.unwrap(),
        journal(Ok(b"a".to_vec()))
    );
    // Slot 1 recorded `b` with digest 2; the replay now calls `b` with other arguments.
    let x = store.call(&mut h, durable("b", 9), counted(&count, Ok(b"x".to_vec()))).await.unwrap();
    assert_eq!(x, executed(Ok(b"x".to_vec())));
    assert_eq!(runs(&count), 4);
    let want = vec![slot("a", 1, ok(b"a")), slot("b", 9, ok(b"x"))];
    assert_eq!(h.journal(), want.as_slice(), "the handle kept slots past the mismatch");
    assert_eq!(logged_journal(store.log(), &sk).await, want, "the persisted journal kept slots past the mismatch");
    let indexed = store.with_index(|ix| ix.get(&sk).cloned()).unwrap();
    assert_eq!(indexed.state().unwrap().calls(), want.as_slice());
    // The old slot 2 is gone: `c` runs again.
    let c = store.call(&mut h, durable("c", 3), counted(&count, Ok(b"c2".to_vec()))).await.unwrap();
    assert_eq!(c, executed(Ok(b"c2".to_vec())));
    assert_eq!(runs(&count), 5);
    drop(store);
    let store = restore(&env, &snapshot).await;
    let h = resume(&store, k, 0, &replayed(&inp)).await;
    assert_eq!(h.journal(), [want[0].clone(), want[1].clone(), slot("c", 3, ok(b"c2"))].as_slice());
}
on_every_backend!(journal_mismatch_truncates_the_journal_and_runs_the_call, mismatch_truncates);

/// Journals one call returning `output`, crashes, and replays the call after a restore.
async fn replay_one(backend: Backend, output: actionstate_recovery::CallOutput, status: CallStatus) {
    let env = Env::new(backend);
    let (k, inp) = (key("calls-replay-one"), input(3));
    let count = AtomicUsize::new(0);
    let snapshot = {
        let store = env.two_phase().await;
        let snapshot = store.snapshot(0).await.unwrap();
        let mut h = fresh(&store, k, 0, &inp).await;
        let first = store.call(&mut h, durable("f", 4), counted(&count, output.clone())).await.unwrap();
        assert_eq!(first, executed(output.clone()));
        snapshot
    };
    let store = restore(&env, &snapshot).await;
    let mut h = resume(&store, k, 0, &replayed(&inp)).await;
    assert_eq!(h.journal(), [slot("f", 4, status)].as_slice());
    let again = store.call(&mut h, durable("f", 4), counted(&count, Ok(b"must not run".to_vec()))).await.unwrap();
    assert_eq!(again, journal(output));
    assert_eq!(runs(&count), 1);
}

async fn unit_result(backend: Backend) {
    replay_one(backend, Ok(Vec::new()), ok(b"")).await;
}
on_every_backend!(unit_result_replays_as_an_empty_ok, unit_result);

async fn error_result(backend: Backend) {
    replay_one(backend, Err(b"timeout".to_vec()), CallStatus::Failed { error: b"timeout".to_vec() }).await;
}
on_every_backend!(error_result_replays_as_the_same_error, error_result);

#[tokio::test]
async fn failed_persist_fails_the_call_and_withholds_its_result() {
    let log = faulty_memory(PARTITIONS);
    let store = ActionStateStore::new(log.reopen(), StoreConfig::default());
    let (k, inp) = (key("calls-failed-persist"), input(4));
    let count = AtomicUsize::new(0);
    let mut h = fresh(&store, k, 0, &inp).await;
    let sk = *h.key();
    let records_before = records(&log).await;
    log.faults().fail_nth_append(1);
    let err = store.call(&mut h, durable("llm", 1), counted(&count, Ok(b"lost".to_vec()))).await.unwrap_err();
    assert!(err.is_retryable(), "{err}");
    assert_eq!(runs(&count), 1);
    assert!(h.journal().is_empty() && h.cursor() == 0, "the handle kept a result that is not durable");
    assert!(store.with_index(|ix| ix.get(&sk).is_none()), "a state whose write failed is indexed");
    assert_eq!(records(&log).await, records_before);
    // The retry runs the call again and its result is durable before it is returned.
    let c = store.call(&mut h, durable("llm", 1), counted(&count, Ok(b"kept".to_vec()))).await.unwrap();
    assert_eq!(c, executed(Ok(b"kept".to_vec())));
    assert_eq!(logged_journal(&log, &sk).await, vec![slot("llm", 1, ok(b"kept"))]);
}

async fn pending_before_running(backend: Backend) {
    let env = Env::new(backend);
    let store = env.store().await;
    let (k, inp) = (key("calls-reconcile-pending"), input(5));
    let mut h = fresh(&store, k, 0, &inp).await;
    let sk = *h.key();
    let log = store.log();
    let before = records(log).await;
    let seen = std::sync::Mutex::new(None);
    let reconciled = AtomicUsize::new(0);
    let seen_ref = &seen;
    let c = store
        .call(&mut h, durable("mail.send", 5).reconcile(counted(&reconciled, Ok(vec![]))), move |_| async move {
            // The side effect happens here; the log must already say it may have.
            *seen_ref.lock().unwrap() = Some((records(log).await, logged_journal(log, &sk).await));
            Ok(b"sent".to_vec())
        })
        .await
        .unwrap();
    assert_eq!(c, executed(Ok(b"sent".to_vec())));
    let (during, journal_during) = seen.lock().unwrap().take().expect("the call did not run");
    assert_eq!(during, before + 1, "the PENDING slot was not written before the call ran");
    assert_eq!(journal_during, vec![slot("mail.send", 5, pending(&sk, 0, "mail.send", 5))]);
    assert_eq!(records(log).await, before + 2);
    assert_eq!(logged_journal(log, &sk).await, vec![slot("mail.send", 5, ok(b"sent"))]);
    assert_eq!(runs(&reconciled), 0);
}
on_every_backend!(reconcile_mode_persists_a_pending_slot_before_running, pending_before_running);

/// A memory-backed store in which `mail.send` was called in reconcile mode and the process
/// crashed between the side effect and the write of its result. Returns the snapshot to
/// restore and the log.
async fn crash_after_side_effect(
    k: KeyId,
    inp: &Event,
    sent: &AtomicUsize,
    with_prefix: bool,
) -> (Snapshot, FaultyMemory) {
    let log = faulty_memory(PARTITIONS);
    let store = ActionStateStore::new_two_phase(log.reopen(), StoreConfig::default());
    let before = store.snapshot(0).await.unwrap();
    let mut h = fresh(&store, k, 0, inp).await;
    let unused = AtomicUsize::new(0);
    if with_prefix {
        store.call(&mut h, durable("llm", 1), counted(&unused, Ok(b"draft".to_vec()))).await.unwrap();
    }
    // The PENDING slot lands; the result's write does not.
    log.faults().fail_nth_append(2);
    let err = store
        .call(
            &mut h,
            durable("mail.send", 5).reconcile(counted(&unused, Ok(vec![]))),
            counted(sent, Ok(b"sent".to_vec())),
        )
        .await
        .unwrap_err();
    assert!(err.is_retryable(), "{err}");
    assert_eq!(runs(sent), 1);
    (before, log)
}

#[tokio::test]
async fn reconcile_mode_hands_a_pending_slot_to_the_reconciler_after_a_crash() {
    let (k, inp) = (key("calls-reconcile-crash"), input(6));
    let (sent, reconciled) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let (before, log) = crash_after_side_effect(k, &inp, &sent, false).await;

    let store = restore_over(&log, &before).await;
    let mut h = resume(&store, k, 0, &replayed(&inp)).await;
    assert_eq!(h.journal(), [slot("mail.send", 5, pending(h.key(), 0, "mail.send", 5))].as_slice());
    let c = store
        .call(
            &mut h,
            durable("mail.send", 5).reconcile(counted(&reconciled, Ok(b"found in outbox".to_vec()))),
            counted(&sent, Ok(b"sent again".to_vec())),
        )
        .await
        .unwrap();
    assert_eq!(c, Call { output: Ok(b"found in outbox".to_vec()), source: CallSource::Reconciled });
    assert_eq!((runs(&sent), runs(&reconciled)), (1, 1), "the call ran again instead of being reconciled");
    assert_eq!(logged_journal(&log, h.key()).await, vec![slot("mail.send", 5, ok(b"found in outbox"))]);
    drop(store);

    // Once reconciled, the result replays from the journal.
    let store = restore_over(&log, &before).await;
    let mut h = resume(&store, k, 0, &replayed(&inp)).await;
    let c = store
        .call(&mut h, durable("mail.send", 5).reconcile(counted(&reconciled, Ok(vec![]))), counted(&sent, Ok(vec![])))
        .await
        .unwrap();
    assert_eq!(c, journal(Ok(b"found in outbox".to_vec())));
    assert_eq!((runs(&sent), runs(&reconciled)), (1, 1));
}

#[tokio::test]
async fn reconcile_mode_mismatch_truncates_and_runs_the_call() {
    let (k, inp) = (key("calls-reconcile-mismatch"), input(7));
    let (sent, reconciled) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let (before, log) = crash_after_side_effect(k, &inp, &sent, true).await;

    let store = restore_over(&log, &before).await;
    let mut h = resume(&store, k, 0, &replayed(&inp)).await;
    assert_eq!(h.journal().len(), 2);
    let unused = AtomicUsize::new(0);
    let first = store.call(&mut h, durable("llm", 1), counted(&unused, Ok(vec![]))).await.unwrap();
    assert_eq!(first, journal(Ok(b"draft".to_vec())));
    // The PENDING slot is for other arguments: not this call's outcome to reconcile.
    let c = store
        .call(
            &mut h,
            durable("mail.send", 6).reconcile(counted(&reconciled, Ok(vec![]))),
            counted(&sent, Ok(b"sent v2".to_vec())),
        )
        .await
        .unwrap();
    assert_eq!(c, executed(Ok(b"sent v2".to_vec())));
    assert_eq!((runs(&sent), runs(&reconciled), runs(&unused)), (2, 0, 0));
    let want = vec![slot("llm", 1, ok(b"draft")), slot("mail.send", 6, ok(b"sent v2"))];
    assert_eq!(h.journal(), want.as_slice());
    assert_eq!(logged_journal(&log, h.key()).await, want);
}

#[tokio::test]
async fn reconcile_mode_retry_after_a_failed_result_write_goes_to_the_reconciler() {
    let log = faulty_memory(PARTITIONS);
    let store = ActionStateStore::new(log.reopen(), StoreConfig::default());
    let (k, inp) = (key("calls-reconcile-retry"), input(8));
    let (sent, reconciled) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let mut h = fresh(&store, k, 0, &inp).await;
    log.faults().fail_nth_append(2);
    let err = store
        .call(
            &mut h,
            durable("mail.send", 5).reconcile(counted(&reconciled, Ok(vec![]))),
            counted(&sent, Ok(b"sent".to_vec())),
        )
        .await
        .unwrap_err();
    assert!(err.is_retryable(), "{err}");
    // The log holds the PENDING slot; so must the handle.
    assert_eq!(logged_journal(&log, h.key()).await, vec![slot("mail.send", 5, pending(h.key(), 0, "mail.send", 5))]);
    assert_eq!(h.journal(), [slot("mail.send", 5, pending(h.key(), 0, "mail.send", 5))].as_slice());
    let c = store
        .call(
            &mut h,
            durable("mail.send", 5).reconcile(counted(&reconciled, Ok(b"found".to_vec()))),
            counted(&sent, Ok(b"sent twice".to_vec())),
        )
        .await
        .unwrap();
    assert_eq!(c, Call { output: Ok(b"found".to_vec()), source: CallSource::Reconciled });
    assert_eq!((runs(&sent), runs(&reconciled)), (1, 1), "the side effect ran twice");
    assert_eq!(logged_journal(&log, h.key()).await, vec![slot("mail.send", 5, ok(b"found"))]);
}

#[tokio::test]
async fn dropped_call_never_returns_a_result_that_is_not_durable() {
    let memory = MemoryLog::new(PARTITIONS);
    let gate = Faulty::wrap(memory.clone());
    let store = ActionStateStore::new(gate.clone(), StoreConfig::default());
    let wait = Duration::from_millis(50);
    let count = AtomicUsize::new(0);

    // `call`: the journal write is held and the future dropped after the call ran.
    let mut h = fresh(&store, key("calls-dropped"), 0, &input(9)).await;
    let sk = *h.key();
    gate.faults().hold_appends(Hold::BeforeAppend);
    let dropped =
        tokio::time::timeout(wait, store.call(&mut h, durable("llm", 1), counted(&count, Ok(b"one".to_vec()))));
    assert!(dropped.await.is_err(), "the held write completed");
    assert_eq!(runs(&count), 1);
    gate.faults().hold_appends(Hold::Off);
    let c = store.call(&mut h, durable("llm", 1), counted(&count, Ok(b"two".to_vec()))).await.unwrap();
    let logged = logged_journal(&memory, &sk).await;
    assert_eq!(logged.first().map(|s| &s.status), Some(&CallStatus::Succeeded { result: c.output.clone().unwrap() }));
    assert_eq!(h.journal(), logged.as_slice(), "the handle and the log disagree");

    // Reconcile mode: the PENDING slot is durable, the call ran, the result write is held.
    let mut h = fresh(&store, key("calls-dropped-reconciled"), 0, &input(10)).await;
    let sk = *h.key();
    let (sent, reconciled) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let hold_after_running = |key| {
        gate.faults().hold_appends(Hold::BeforeAppend);
        counted(&sent, Ok(b"sent".to_vec()))(key)
    };
    let dropped = tokio::time::timeout(
        wait,
        store.call(&mut h, durable("mail.send", 5).reconcile(counted(&reconciled, Ok(vec![]))), hold_after_running),
    );
    assert!(dropped.await.is_err(), "the held write completed");
    assert_eq!(runs(&sent), 1);
    assert_eq!(logged_journal(&memory, &sk).await, vec![slot("mail.send", 5, pending(&sk, 0, "mail.send", 5))]);
    gate.faults().hold_appends(Hold::Off);
    let c = store
        .call(
            &mut h,
            durable("mail.send", 5).reconcile(counted(&reconciled, Ok(b"found".to_vec()))),
            counted(&sent, Ok(b"sent twice".to_vec())),
        )
        .await
        .unwrap();
    assert_eq!(c, Call { output: Ok(b"found".to_vec()), source: CallSource::Reconciled });
    assert_eq!((runs(&sent), runs(&reconciled)), (1, 1));
    assert_eq!(logged_journal(&memory, &sk).await, vec![slot("mail.send", 5, ok(b"found"))]);
}

async fn write_costs(backend: Backend) {
    let env = Env::new(backend);
    let store = env.store().await;
    let log = store.log();
    let appends = || match log {
        AnyLog::Memory(m) => Some(m.appends()),
        _ => None,
    };
    let count = AtomicUsize::new(0);
    let mut cost = Vec::new();

    // No durable calls: the completion is the only write.
    let (r, a) = (records(log).await, appends());
    let h = fresh(&store, key("cost-none"), 0, &input(1)).await;
    store.complete(h, vec![event("out", 1)], vec![note(1)]).await.unwrap();
    cost.push((records(log).await - r, appends().map(|n| n - a.unwrap())));

    // Three durable calls: one write per call, plus the completion.
    let (r, a) = (records(log).await, appends());
    let mut h = fresh(&store, key("cost-calls"), 0, &input(2)).await;
    for n in 0..3 {
        store.call(&mut h, durable("f", n), counted(&count, Ok(vec![n]))).await.unwrap();
    }
    store.complete(h, vec![], vec![]).await.unwrap();
    cost.push((records(log).await - r, appends().map(|n| n - a.unwrap())));

    // Two reconciled calls: the PENDING slot and the result of each, plus the completion.
    let (r, a) = (records(log).await, appends());
    let mut h = fresh(&store, key("cost-reconciled"), 0, &input(3)).await;
    for n in 0..2 {
        store
            .call(&mut h, durable("g", n).reconcile(counted(&count, Ok(vec![]))), counted(&count, Ok(vec![])))
            .await
            .unwrap();
    }
    store.complete(h, vec![], vec![]).await.unwrap();
    cost.push((records(log).await - r, appends().map(|n| n - a.unwrap())));

    let expected_appends = |n| if backend == Backend::Memory { Some(n) } else { None };
    assert_eq!(
        cost,
        vec![(1, expected_appends(1)), (4, expected_appends(4)), (5, expected_appends(5))],
        "writes per action (records, appends)"
    );
}
on_every_backend!(writes_cost_one_per_completion_and_one_per_call, write_costs);
