//! The idempotency key a durable call is handed (docs/design.md, section 5.2): the same for
//! every attempt of one logical call, across a retry on the handle, a crash and a rebuild from
//! a checkpoint, a replay with new event ids and a new owner; recorded in the PENDING slot and
//! handed to the reconciler; new once an operator's repair or a divergence invalidated the
//! history.
#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use actionstate_core::{CallStatus, IdempotencyKey};
use actionstate_recovery::{ActionStateStore, CallOutput, DurableCall, Snapshot, StoreConfig};
use common::{Backend, Env, fresh, input, key, replayed, resume};
use std::sync::Mutex;

fn digest(n: u8) -> [u8; 32] {
    [n; 32]
}

/// A call to `function_id` whose argument digest is pinned to `digest(n)`: the keys compared
/// below are derived from it.
fn durable(function_id: &str, n: u8) -> DurableCall<'_> {
    DurableCall::new(function_id).args_digest(digest(n))
}

/// A call body that records the key it was handed.
fn keeping(
    seen: &Mutex<Vec<IdempotencyKey>>,
    out: &[u8],
) -> impl FnOnce(IdempotencyKey) -> std::future::Ready<CallOutput> {
    let out = out.to_vec();
    move |k| {
        seen.lock().unwrap().push(k);
        std::future::ready(Ok(out))
    }
}

/// A call made, then the process died before its result was durable: the run after the
/// restore hands the call the same key, and a second call of the action gets another.
async fn a_call_keeps_its_key_across_a_crash_and_a_rebuild(backend: Backend) {
    let env = Env::new(backend);
    let (k, inp) = (key("idem-crash"), input(1));
    let seen = Mutex::new(Vec::new());
    let before: Snapshot = {
        let store = env.two_phase().await;
        let before = store.snapshot(0).await.unwrap();
        let mut h = fresh(&store, k, 0, &inp).await;
        let first = h.next_call_key("llm.complete", &digest(1));
        store.call(&mut h, durable("llm.complete", 1), keeping(&seen, b"draft")).await.unwrap();
        assert_eq!(seen.lock().unwrap()[0], first, "the closure gets the key next_call_key gave");
        // The second call's effect happens; the process dies before its result is written.
        seen.lock().unwrap().push(h.next_call_key("payments.charge", &digest(2)));
        before
    };
    let store = env.restored(&[before]).await;
    // A replay with new event ids resumes the action from its journal.
    let mut h = resume(&store, k, 0, &replayed(&inp)).await;
    let c = store.call(&mut h, durable("llm.complete", 1), keeping(&seen, b"again")).await.unwrap();
    assert_eq!(c.output, Ok(b"draft".to_vec()), "the first call replays from the journal");
    store.call(&mut h, durable("payments.charge", 2), keeping(&seen, b"charged")).await.unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert_eq!(seen[2], seen[1], "the call that ran again has the key it ran with before");
    assert_ne!(seen[0], seen[1], "another position, function and argument digest");
}
on_every_backend!(crash, a_call_keeps_its_key_across_a_crash_and_a_rebuild);

/// In reconcile mode the PENDING slot carries the key, and after a crash between the effect
/// and its result the reconciler is handed that key.
async fn the_reconciler_asks_with_the_key_the_call_was_made_with(backend: Backend) {
    let env = Env::new(backend);
    let (k, inp) = (key("idem-reconcile"), input(2));
    let made = Mutex::new(Vec::new());
    let before = {
        let store = env.two_phase().await;
        let before = store.snapshot(0).await.unwrap();
        let mut h = fresh(&store, k, 0, &inp).await;
        // The PENDING slot is durable once the call body runs: stop right there, as a crash
        // between the effect and its result would.
        let reconcile = |_| std::future::ready(Ok(Vec::new()));
        let call = store.call(&mut h, durable("mail.send", 5).reconcile(reconcile), |key| {
            made.lock().unwrap().push(key);
            std::future::pending::<CallOutput>()
        });
        assert!(tokio::time::timeout(std::time::Duration::from_millis(200), call).await.is_err());
        before
    };
    let store = env.restored(&[before]).await;
    let mut h = resume(&store, k, 0, &replayed(&inp)).await;
    let made = made.lock().unwrap()[0].clone();
    assert_eq!(h.journal()[0].status, CallStatus::Pending { key: Some(made.clone()) }, "the slot carries the key");
    let asked = Mutex::new(None);
    let reconcile = |key| {
        *asked.lock().unwrap() = Some(key);
        std::future::ready(Ok(b"it was sent".to_vec()))
    };
    store
        .call(&mut h, durable("mail.send", 5).reconcile(reconcile), |_| std::future::ready(Ok(b"sent twice".to_vec())))
        .await
        .unwrap();
    assert_eq!(asked.lock().unwrap().clone(), Some(made));
}
on_every_backend!(reconcile, the_reconciler_asks_with_the_key_the_call_was_made_with);

/// An operator's repair invalidates a round: its calls run again under new keys, and those
/// new keys are the same after a rebuild from a checkpoint taken before the repair.
async fn a_repaired_history_calls_under_new_keys(backend: Backend) {
    let env = Env::new(backend);
    let (k, inp) = (key("idem-repair"), input(3));
    let seen = Mutex::new(Vec::new());
    let store = env.two_phase_keeping_all().await;
    let before = store.snapshot(0).await.unwrap();
    let mut h = fresh(&store, k, 0, &inp).await;
    assert_eq!(h.incarnation(), 0);
    store.call(&mut h, durable("tool.fetch", 1), keeping(&seen, b"bad answer")).await.unwrap();
    store.invalidate(k, 0, "the tool answered wrongly").await.unwrap();
    let mut h = fresh(&store, k, 0, &replayed(&inp)).await;
    assert_eq!(h.incarnation(), 1, "the repair removed this state once");
    store.call(&mut h, durable("tool.fetch", 1), keeping(&seen, b"good answer")).await.unwrap();
    drop((h, store));
    // A restore from before the repair replays the first run and the repair: the same keys.
    let keep_all = StoreConfig { retention: actionstate_recovery::Retention::KeepAll, ..StoreConfig::default() };
    let store = env.restored_with(keep_all, &[before]).await;
    let h = resume(&store, k, 0, &replayed(&inp)).await;
    assert_eq!(h.incarnation(), 1);
    let again = h.next_call_key("tool.fetch", &digest(1));
    let seen = seen.lock().unwrap();
    assert_ne!(seen[0], seen[1], "the repaired call is made again under a new key");
    assert_eq!(again, seen[1]);
}
on_every_backend!(repair, a_repaired_history_calls_under_new_keys);

/// A scope keeps two deployments' keys apart.
#[tokio::test]
async fn a_scope_changes_every_key() {
    let env = Env::new(Backend::Memory);
    let scoped = StoreConfig { call_key_scope: "eu-prod".into(), ..StoreConfig::default() };
    let (plain, other) = (env.store().await, ActionStateStore::new(env.open().await, scoped));
    let (k, inp) = (key("idem-scope"), input(4));
    let a = fresh(&plain, k, 0, &inp).await.next_call_key("f", &digest(1));
    let b = fresh(&other, k, 0, &inp).await.next_call_key("f", &digest(1));
    assert_ne!(a, b);
}
