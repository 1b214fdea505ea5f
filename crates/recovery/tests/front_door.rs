//! The store's front door: a store refuses work on keys it does not own before writing
//! anything, a round counts as completed only once it is finished, a durable call's argument
//! digest comes from its arguments (so a restore reuses a journaled result exactly when the
//! arguments are the same), typed checkpoint metadata comes back as the type it was written
//! as, and reconcile mode settles a call a crash interrupted with the key the call was made
//! with.
#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use actionstate_core::{CallStatus, IdempotencyKey, KeyId, StateLog, Trigger};
use actionstate_memory::MemoryLog;
use actionstate_recovery::{
    ActionStateStore, Begin, CallOutput, CallSource, DurableCall, Ownership, RestoreFrom, Round, Snapshot, StoreConfig,
    StoreError, TwoPhase,
};
use common::{counted, fresh, input, key, plan, process, replayed, resume};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A new store over `log`, restored from no snapshot (a fresh start), owning `ownership`.
async fn restored(log: &MemoryLog, ownership: &Ownership) -> ActionStateStore<MemoryLog, TwoPhase> {
    ActionStateStore::restore(log.reopen(), StoreConfig::default(), ownership, Vec::<Snapshot>::new()).await.unwrap().0
}

/// A new store over `log`, restored from `snapshot`.
async fn restored_from(log: &MemoryLog, snapshot: &Snapshot) -> ActionStateStore<MemoryLog, TwoPhase> {
    let from = std::slice::from_ref(snapshot);
    ActionStateStore::restore(log.reopen(), StoreConfig::default(), &Ownership::All, from).await.unwrap().0
}

/// The first key named `{prefix}-N` that `ownership` owns (or does not, with `owned` false).
fn key_where(ownership: &Ownership, prefix: &str, owned: bool) -> KeyId {
    (0..).map(|i| key(&format!("{prefix}-{i}"))).find(|k| ownership.owns(k) == owned).unwrap()
}

/// Checks that `err` is `NotOwned` for `k`, naming its key group and the store's groups.
fn assert_not_owned(err: &StoreError, k: KeyId, ownership: &Ownership, what: &str) {
    let Ownership::Groups { max_groups, .. } = ownership else { panic!("the store owns key groups") };
    let StoreError::NotOwned { key, group, max_groups: m, owned } = err else {
        panic!("{what}: expected NotOwned, got {err}")
    };
    assert_eq!((*key, *group, *m, owned), (k, k.key_group(*max_groups), *max_groups, ownership), "{what}");
    let text = err.to_string();
    assert!(text.contains(&format!("key group {group} of {max_groups}")), "{what}: {text}");
    assert!(text.contains(&ownership.to_string()), "{what}: {text}");
}

/// `begin`, a durable call and `complete` on a key outside the store's key groups are refused
/// with `NotOwned` before anything is written; a key inside them is served.
#[tokio::test]
async fn work_on_a_key_the_store_does_not_own_is_refused_and_writes_nothing() {
    let log = MemoryLog::new(4);
    let ownership = Ownership::Groups { max_groups: 8, owned: 2..5 };
    let store = restored(&log, &ownership).await;
    let (foreign, mine) = (key_where(&ownership, "foreign", false), key_where(&ownership, "mine", true));
    let inp = input(1);
    let end = log.end_offsets().await.unwrap();

    let err = store.begin(&Round::new(foreign, 0, &inp), &plan(), &inp, &Trigger::Input).await.unwrap_err();
    assert_not_owned(&err, foreign, &ownership, "begin");
    assert_eq!(log.end_offsets().await.unwrap(), end, "a refused begin wrote to the log");

    // A handle for the foreign key from a store that owns every key (a second owner of the
    // key: the split brain the check prevents). Neither its call nor its completion goes
    // through the store that does not own the key.
    let other = ActionStateStore::new(log.reopen(), StoreConfig::default());
    let mut handle = fresh(&other, foreign, 0, &inp).await;
    let runs = AtomicUsize::new(0);
    let call = DurableCall::new("llm.complete").args("a question").unwrap();
    let err = store.call(&mut handle, call, counted(&runs, Ok(b"answer".to_vec()))).await.unwrap_err();
    assert_not_owned(&err, foreign, &ownership, "call");
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the refused call ran");
    assert!(handle.journal().is_empty() && handle.cursor() == 0, "the refused call changed the handle");
    assert_eq!(log.end_offsets().await.unwrap(), end, "a refused call wrote to the log");

    let err = store.complete(handle, vec![], vec![]).await.unwrap_err();
    assert_not_owned(&err, foreign, &ownership, "complete");
    assert_eq!(log.end_offsets().await.unwrap(), end, "a refused completion wrote to the log");
    assert_eq!(store.stats().states, 0, "a refused completion was indexed");

    // A key of the store's groups is served as usual.
    let outcome = process(&store, mine, 0, &inp).await.unwrap();
    assert_eq!(outcome.fresh, common::STATES_PER_ROUND);
    assert!(log.end_offsets().await.unwrap().iter().sum::<u64>() > end.iter().sum::<u64>());
}

/// A round dropped unfinished (its action failed, its task was cancelled) is not completed: a
/// checkpoint taken afterwards does not list it, and a restore of that checkpoint replays it.
/// A finished round is listed and pruned.
#[tokio::test]
async fn a_round_dropped_unfinished_is_replayed_and_a_finished_one_is_not() {
    let log = MemoryLog::new(4);
    let store = ActionStateStore::new_two_phase(log.reopen(), StoreConfig::default());
    let (dropped, finished) = (key("round-dropped"), key("round-finished"));
    let inp = input(1);
    for k in [dropped, finished] {
        let round = store.round(Round::new(k, 0, &inp));
        let Begin::Fresh(handle, _) = store.begin(&round, &plan(), &inp, &Trigger::Input).await.unwrap() else {
            panic!("a new key's action starts fresh")
        };
        store.complete(handle, vec![], vec![]).await.unwrap();
        if k == finished {
            round.finish();
        } else {
            drop(round);
        }
    }
    let snapshot = store.snapshot(1).await.unwrap();
    assert_eq!(snapshot.completed.get(&finished), Some(&0), "the finished round is not listed");
    assert_eq!(snapshot.completed.get(&dropped), None, "the round dropped unfinished is listed as completed");
    assert_eq!(store.checkpoint_complete(1), 1, "only the finished round's state is pruned");
    drop(store);

    let store = restored_from(&log, &snapshot).await;
    assert_eq!(store.with_index(|ix| ix.rounds_of(&dropped).len()), 1, "the unfinished round was pruned");
    let again = replayed(&inp);
    let begin = store.begin(&Round::new(dropped, 0, &again), &plan(), &again, &Trigger::Input).await.unwrap();
    assert!(matches!(begin, Begin::Reuse(_)), "the unfinished round is not replayed: {begin:?}");
    assert!(store.with_index(|ix| ix.rounds_of(&finished).is_empty()), "the finished round was restored");
}

/// The digest of a call of `weather.lookup` with `args`.
fn digest_of<T: serde::Serialize + ?Sized>(args: &T) -> [u8; 32] {
    DurableCall::new("weather.lookup").args(args).unwrap().digest()
}

/// Calls `weather.lookup` with `args` on `handle`, with a body that counts its runs and
/// returns `output`; returns where the result came from.
async fn call_with<L: StateLog, T: serde::Serialize + ?Sized>(
    store: &ActionStateStore<L, TwoPhase>,
    handle: &mut actionstate_recovery::ActionHandle,
    args: &T,
    runs: &AtomicUsize,
    output: &[u8],
) -> CallSource {
    let call = DurableCall::new("weather.lookup").args(args).unwrap();
    store.call(handle, call, counted(runs, Ok(output.to_vec()))).await.unwrap().source
}

/// The arguments of a durable call decide its digest: the same value gives the same digest,
/// in this process and after a restore, so the journaled result is reused; other arguments
/// give another digest, and the call runs again.
#[tokio::test]
async fn the_same_arguments_reuse_the_journal_after_a_restore_and_others_run_again() {
    assert_eq!(digest_of(&("Paris", 3)), digest_of(&("Paris", 3)));
    assert_ne!(digest_of(&("Paris", 3)), digest_of(&("Oslo", 3)));
    assert_ne!(digest_of(&("Paris", 3)), DurableCall::new("weather.lookup").digest(), "arguments change the digest");

    let log = MemoryLog::new(4);
    let (k, inp) = (key("args-digest"), input(1));
    let runs = AtomicUsize::new(0);
    let before = {
        let store = ActionStateStore::new_two_phase(log.reopen(), StoreConfig::default());
        let before = store.snapshot(0).await.unwrap();
        let mut h = fresh(&store, k, 0, &inp).await;
        assert_eq!(call_with(&store, &mut h, &("Paris", 3), &runs, b"sunny").await, CallSource::Executed);
        assert_eq!(h.journal()[0].args_digest, digest_of(&("Paris", 3)), "the journal records the arguments' digest");
        before
        // The process dies with the action unfinished.
    };

    // The same arguments, built anew after the restore: the journaled result, not a run.
    let store = restored_from(&log, &before).await;
    let mut h = resume(&store, k, 0, &replayed(&inp)).await;
    assert_eq!(call_with(&store, &mut h, &("Paris", 3), &runs, b"rainy").await, CallSource::Journal);
    assert_eq!(runs.load(Ordering::SeqCst), 1, "a call with the same arguments ran again");
    drop(store);

    // Other arguments at the same place: another history, and the call runs.
    let store = restored_from(&log, &before).await;
    let mut h = resume(&store, k, 0, &replayed(&inp)).await;
    assert_eq!(call_with(&store, &mut h, &("Paris", 4), &runs, b"windy").await, CallSource::Executed);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(h.journal().len(), 1, "the slot of the other arguments was kept");
}

/// A map argument has one digest whatever order it was filled in (a `HashMap` iterates in
/// another order in every process): a restore reuses the result journaled with a map filled
/// in the opposite order.
#[tokio::test]
async fn a_map_argument_has_one_digest_whatever_its_insertion_order() {
    let forward: HashMap<String, u32> = (0..64).map(|i| (format!("k{i}"), i)).collect();
    let mut backward: HashMap<String, u32> = HashMap::new();
    for i in (0..64).rev() {
        backward.insert(format!("k{i}"), i);
    }
    let sorted: BTreeMap<String, u32> = forward.clone().into_iter().collect();
    assert_eq!(digest_of(&forward), digest_of(&backward));
    assert_eq!(digest_of(&forward), digest_of(&sorted));

    let log = MemoryLog::new(4);
    let (k, inp) = (key("args-map"), input(2));
    let runs = AtomicUsize::new(0);
    let before = {
        let store = ActionStateStore::new_two_phase(log.reopen(), StoreConfig::default());
        let before = store.snapshot(0).await.unwrap();
        let mut h = fresh(&store, k, 0, &inp).await;
        assert_eq!(call_with(&store, &mut h, &forward, &runs, b"found").await, CallSource::Executed);
        before
    };
    let store = restored_from(&log, &before).await;
    let mut h = resume(&store, k, 0, &replayed(&inp)).await;
    assert_eq!(call_with(&store, &mut h, &backward, &runs, b"not again").await, CallSource::Journal);
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the same map filled in another order ran the call again");
}

/// A checkpoint's typed metadata comes back as the type it was written as; read as another
/// type it is a `Metadata` error, and without a checkpoint there is none.
#[tokio::test]
async fn typed_metadata_is_restored_and_a_wrong_type_is_an_error() {
    let log = MemoryLog::new(4);
    let (store, restored) =
        ActionStateStore::restore(log.reopen(), StoreConfig::default(), &Ownership::All, RestoreFrom::Latest)
            .await
            .unwrap();
    assert_eq!(restored.metadata_as::<(u64, String)>().unwrap(), None, "a fresh log has no checkpoint");
    process(&store, key("metadata"), 0, &input(0)).await.unwrap();
    let position = (42u64, "next input".to_owned());
    store.checkpoint_with(&position).await.unwrap();
    drop(store);

    let (_, restored) =
        ActionStateStore::restore(log.reopen(), StoreConfig::default(), &Ownership::All, RestoreFrom::Latest)
            .await
            .unwrap();
    assert_eq!(restored.metadata_as::<(u64, String)>().unwrap(), Some(position));
    // The encoding starts with the byte 42, which no `bool` is.
    let err = restored.metadata_as::<bool>().unwrap_err();
    let StoreError::Metadata { type_name, len, .. } = &err else { panic!("expected a metadata error, got {err}") };
    assert_eq!((*type_name, *len), ("bool", restored.metadata().unwrap().len()), "{err}");
}

/// Reconcile mode: the PENDING slot written before the call's effect survives a crash between
/// the effect and its result, and after the restore the reconciler settles it, handed the key
/// the call was made with; the call does not run again, and the settled result is journaled.
#[tokio::test]
async fn reconcile_mode_settles_a_pending_slot_after_a_crash() {
    let log = MemoryLog::new(4);
    let (k, inp) = (key("reconcile-front-door"), input(3));
    let made: Mutex<Vec<IdempotencyKey>> = Mutex::new(Vec::new());
    let before = {
        let store = ActionStateStore::new_two_phase(log.reopen(), StoreConfig::default());
        let before = store.snapshot(0).await.unwrap();
        let mut h = fresh(&store, k, 0, &inp).await;
        let call = DurableCall::new("payments.charge")
            .args(&("order-7", 1250))
            .unwrap()
            .reconcile(|_| std::future::ready(Ok(b"unused".to_vec())));
        // The effect happens under the key; the process dies before the result is written.
        let charging = store.call(&mut h, call, |key| {
            made.lock().unwrap().push(key);
            std::future::pending::<CallOutput>()
        });
        assert!(tokio::time::timeout(std::time::Duration::from_millis(200), charging).await.is_err());
        before
    };
    let made = made.lock().unwrap().clone();
    assert_eq!(made.len(), 1, "the call ran once before the crash");

    let store = restored_from(&log, &before).await;
    let mut h = resume(&store, k, 0, &replayed(&inp)).await;
    assert_eq!(h.journal()[0].status, CallStatus::Pending { key: Some(made[0].clone()) }, "the slot carries the key");
    let (asked, ran) = (Mutex::new(None), AtomicUsize::new(0));
    let call = DurableCall::new("payments.charge").args(&("order-7", 1250)).unwrap().reconcile(|key| {
        *asked.lock().unwrap() = Some(key);
        std::future::ready(Ok(b"charged once".to_vec()))
    });
    let settled = store.call(&mut h, call, counted(&ran, Ok(b"charged twice".to_vec()))).await.unwrap();
    assert_eq!((settled.output, settled.source), (Ok(b"charged once".to_vec()), CallSource::Reconciled));
    assert_eq!(asked.lock().unwrap().clone(), Some(made[0].clone()), "the reconciler got another key");
    assert_eq!(ran.load(Ordering::SeqCst), 0, "the call ran again instead of being reconciled");
    assert_eq!(h.journal()[0].status, CallStatus::Succeeded { result: b"charged once".to_vec() });
}
