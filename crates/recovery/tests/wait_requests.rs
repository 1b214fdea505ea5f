//! Resolves asked for by another process (docs/design.md, section 5.7): a request appended to
//! the log is settled by the owner at its next poll, or when it restores; the first outcome
//! the owner records is the only one; a request for an unknown or ended wait changes nothing;
//! owners of a shared log settle the requests of their own keys.
#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use actionstate_core::{ActionId, KeyId, StateLog, Trigger, WaitOutcome, WaitSecret, WaitToken};
use actionstate_memory::MemoryLog;
use actionstate_recovery::{
    ActionHandle, ActionStateStore, Begin, Ownership, RestoreFrom, Retention, Round, StoreConfig, Wait, WaitStatus,
    Waited,
};
use common::{input, key};

/// A store restored from everything `log` holds (as a restarted process opens it).
async fn owner(log: &MemoryLog) -> ActionStateStore<MemoryLog> {
    ActionStateStore::restore(log.reopen(), StoreConfig::default(), &Ownership::All, RestoreFrom::Latest)
        .await
        .unwrap()
        .0
}

/// Another process's view of the log: it owns nothing and fences nobody.
async fn outsider(log: &MemoryLog) -> ActionStateStore<MemoryLog> {
    let config = StoreConfig { fence_on_rebuild: false, retention: Retention::KeepAll, ..StoreConfig::default() };
    ActionStateStore::restore(log.reopen(), config, &Ownership::All, RestoreFrom::Latest).await.unwrap().0
}

async fn begin(store: &ActionStateStore<MemoryLog>, k: KeyId) -> ActionHandle {
    let inp = input(1);
    let round = store.round(Round::new(k, 0, &inp));
    let begun = store.begin(&round, &ActionId::new("pay"), &inp, &Trigger::Input).await.unwrap();
    round.suspend();
    match begun {
        Begin::Fresh(h, _) | Begin::Resume(h) => h,
        Begin::Reuse(_) => panic!("the action completed"),
    }
}

async fn suspend(store: &ActionStateStore<MemoryLog>, k: KeyId) -> WaitToken {
    let mut h = begin(store, k).await;
    match store.wait(&mut h, Wait::new("approval")).await.unwrap() {
        Waited::Suspended(t) => t,
        Waited::Done(o) => panic!("expected a suspension, got {o:?}"),
    }
}

fn reply(text: &str) -> WaitOutcome {
    WaitOutcome::Reply(text.as_bytes().to_vec())
}

#[tokio::test]
async fn a_running_owner_records_the_first_request_at_its_next_poll_and_the_resumed_action_receives_it() {
    let log = MemoryLog::new(4);
    let store = owner(&log).await;
    let k = key("alice");
    let token = suspend(&store, k).await;
    let other = outsider(&log).await;
    other.request_resolve(&token, reply("yes")).await.unwrap();
    other.request_resolve(&token, WaitOutcome::Rejected(b"no".to_vec())).await.unwrap();
    assert_eq!(store.wait_outcome(&token).unwrap(), None, "settled before the owner polled");
    assert_eq!(store.poll_resolutions().await.unwrap(), 1, "the first request settles, the second finds it ended");
    assert_eq!(store.wait_outcome(&token).unwrap(), Some(reply("yes")));
    let end = log.end_offsets().await.unwrap();
    assert_eq!(store.poll_resolutions().await.unwrap(), 0);
    assert_eq!(log.end_offsets().await.unwrap(), end, "a poll with nothing new wrote something");
    assert!(matches!(store.waits()[0].status, WaitStatus::Resolved { outcome: "reply" }));
    let mut h = begin(&store, k).await;
    assert_eq!(store.wait(&mut h, Wait::new("approval")).await.unwrap(), Waited::Done(reply("yes")));
}

#[tokio::test]
async fn a_request_made_while_the_owner_is_stopped_is_recorded_when_it_restores() {
    let log = MemoryLog::new(4);
    let k = key("bob");
    let token = {
        let store = owner(&log).await;
        suspend(&store, k).await
    };
    outsider(&log).await.request_resolve(&token, reply("approved")).await.unwrap();
    let (store, restored) =
        ActionStateStore::restore(log.reopen(), StoreConfig::default(), &Ownership::All, RestoreFrom::Latest)
            .await
            .unwrap();
    assert_eq!(restored.rebuild.requests, 1);
    assert_eq!(store.wait_outcome(&token).unwrap(), Some(reply("approved")), "the restore did not settle it");
    // A second restore reads the request again and finds the wait ended: nothing changes.
    let end = log.end_offsets().await.unwrap();
    let again = owner(&log).await;
    assert_eq!(again.wait_outcome(&token).unwrap(), Some(reply("approved")));
    let fences_only = log.end_offsets().await.unwrap().iter().zip(&end).all(|(a, b)| a - b == 1);
    assert!(fences_only, "the second restore wrote more than its fences");
}

#[tokio::test]
async fn an_outsider_restore_leaves_requests_to_the_owner_and_writes_nothing() {
    let log = MemoryLog::new(4);
    let store = owner(&log).await;
    let token = suspend(&store, key("carol")).await;
    outsider(&log).await.request_resolve(&token, reply("ok")).await.unwrap();
    let end = log.end_offsets().await.unwrap();
    let view = outsider(&log).await;
    assert_eq!(log.end_offsets().await.unwrap(), end, "a view that does not fence settled a request");
    assert_eq!(view.wait_outcome(&token).unwrap(), None);
    assert_eq!(store.poll_resolutions().await.unwrap(), 1);
}

#[tokio::test]
async fn requests_for_unknown_or_voided_waits_change_nothing() {
    let log = MemoryLog::new(4);
    let store = owner(&log).await;
    let k = key("dave");
    let token = suspend(&store, k).await;
    let other = outsider(&log).await;
    let forged = WaitToken { key: k, secret: WaitSecret::random() };
    other.request_resolve(&forged, reply("forged")).await.unwrap();
    store.invalidate(k, 0, "the order was cancelled").await.unwrap();
    other.request_resolve(&token, reply("late")).await.unwrap();
    let end = log.end_offsets().await.unwrap();
    assert_eq!(store.poll_resolutions().await.unwrap(), 0);
    assert_eq!(log.end_offsets().await.unwrap(), end, "a request for no pending wait wrote something");
    assert!(store.waits().is_empty());
    // A timeout is the owner's to record, and a reply has a bound: neither is written.
    let err = other.request_resolve(&token, WaitOutcome::TimedOut).await.unwrap_err();
    assert!(err.to_string().contains("timeout"), "{err}");
    let big = vec![0u8; actionstate_core::MAX_WAIT_REPLY + 1];
    assert!(other.request_resolve(&token, WaitOutcome::Reply(big)).await.is_err());
    assert_eq!(log.end_offsets().await.unwrap(), end);
}

/// Several owners share the log: each settles the requests for its own keys only, and a poll
/// reads only the partitions that hold one of its pending waits.
#[tokio::test]
async fn owners_of_a_shared_log_settle_only_their_own_keys() {
    let log = MemoryLog::new(4);
    let halves = [0..64u16, 64..128].map(|owned| Ownership::Groups { max_groups: 128, owned });
    let mut stores = Vec::new();
    for owned in &halves {
        let s = ActionStateStore::restore(log.reopen(), StoreConfig::default(), owned, RestoreFrom::Latest).await;
        stores.push(s.unwrap().0);
    }
    let keys: Vec<KeyId> = (0..40).map(|i| key(&format!("k{i}"))).collect();
    let mut tokens = Vec::new();
    for k in &keys {
        let s = &stores[usize::from(!halves[0].owns(k))];
        tokens.push(suspend(s, *k).await);
    }
    let other = outsider(&log).await;
    for t in &tokens {
        other.request_resolve(t, reply("go")).await.unwrap();
    }
    let settled = [stores[0].poll_resolutions().await.unwrap(), stores[1].poll_resolutions().await.unwrap()];
    assert_eq!(settled.iter().sum::<usize>(), tokens.len());
    assert!(settled.iter().all(|&n| n > 0), "{settled:?}");
    for (t, k) in tokens.iter().zip(&keys) {
        let s = &stores[usize::from(!halves[0].owns(k))];
        assert_eq!(s.wait_outcome(t).unwrap(), Some(reply("go")));
    }
}

/// Retention around a wait that lasts: one action waits while 4,000 rounds of other keys go by
/// with a checkpoint every 50. The waiting state is carried forward at checkpoints once it lags
/// `carry_forward_after` records behind, so the log holds about that many records whatever
/// the history (printed: the retained records halfway and at the end, and their ratio). The
/// wait then resolves through a request, and a restore finds it with its token and outcome.
#[tokio::test]
async fn a_long_wait_is_carried_forward_so_retention_stays_bounded_by_the_live_work() {
    const ROUNDS: u64 = 4_000;
    let log = MemoryLog::new(2);
    let config =
        StoreConfig { carry_forward_after: 300, retention: Retention::LastCheckpoints(2), ..StoreConfig::default() };
    let (store, _) =
        ActionStateStore::restore(log.reopen(), config.clone(), &Ownership::All, RestoreFrom::Latest).await.unwrap();
    let waiter = key("waiter");
    let token = suspend(&store, waiter).await;
    let retained = |log: &MemoryLog| {
        let log = log.reopen();
        async move {
            let (earliest, end) = log.offsets().await.unwrap();
            end.iter().zip(&earliest).map(|(e, s)| e - s).sum::<u64>()
        }
    };
    let mut halfway = 0;
    for n in 0..ROUNDS {
        let k = key(&format!("busy-{}", n % 16));
        let inp = input(i64::try_from(n).unwrap());
        let round = store.round(Round::new(k, n / 16, &inp));
        let Begin::Fresh(h, _) = store.begin(&round, &ActionId::new("step"), &inp, &Trigger::Input).await.unwrap()
        else {
            panic!("round {n} was not fresh")
        };
        store.complete(h, vec![], vec![]).await.unwrap();
        round.finish();
        if (n + 1) % 50 == 0 {
            store.checkpoint(&[]).await.unwrap();
            store.wait_for_reclaim().await;
        }
        if n + 1 == ROUNDS / 2 {
            halfway = retained(&log).await;
        }
    }
    let end = retained(&log).await;
    let written: u64 = log.end_offsets().await.unwrap().iter().sum();
    println!(
        "a wait across {ROUNDS} rounds: {written} records written, {halfway} retained halfway, {end} at the end \
         (growth {:.2})",
        end as f64 / halfway.max(1) as f64
    );
    assert!(end <= halfway + halfway / 5, "retention grew with the history: {halfway} -> {end}");
    assert!(end < written / 4, "the log kept {end} of {written} records");
    outsider(&log).await.request_resolve(&token, reply("late yes")).await.unwrap();
    drop(store);
    let (store, _) =
        ActionStateStore::restore(log.reopen(), config, &Ownership::All, RestoreFrom::Latest).await.unwrap();
    assert_eq!(store.wait_outcome(&token).unwrap(), Some(reply("late yes")), "the carried wait lost its token");
    let mut h = begin(&store, waiter).await;
    assert_eq!(store.wait(&mut h, Wait::new("approval")).await.unwrap(), Waited::Done(reply("late yes")));
}

/// An operator resolves offline (`actionstate resolve` on a data directory) after retention
/// reclaimed the owner's fences: it writes with an epoch no older than the records it
/// replayed, so the owner's restore, which still knows those fences from its checkpoint's
/// marker, does not refuse the resolution as a fenced writer's.
#[tokio::test]
async fn an_offline_resolve_after_the_fences_were_reclaimed_reaches_the_restored_owner() {
    let log = MemoryLog::new(1);
    let config = StoreConfig { retention: Retention::LastCheckpoints(1), ..StoreConfig::default() };
    let restore = || ActionStateStore::restore(log.reopen(), config.clone(), &Ownership::All, RestoreFrom::Latest);
    let token = {
        let (store, _) = restore().await.unwrap();
        let token = suspend(&store, key("erin")).await;
        for n in 0..3 {
            store.checkpoint(&[]).await.unwrap();
            store.wait_for_reclaim().await;
            let _ = n;
        }
        token
    };
    // The owner's restore fence lay at offset 0, below the wait: reclaimed.
    assert!(log.earliest_offsets().await.unwrap()[0] > 0, "nothing was reclaimed");
    {
        let look = StoreConfig { fence_on_rebuild: false, retention: Retention::KeepAll, ..StoreConfig::default() };
        let earliest = log.earliest_offsets().await.unwrap();
        let start = actionstate_recovery::Snapshot {
            checkpoint: 0,
            marker: actionstate_core::Marker::new(log.identity().clone(), earliest),
            completed: std::sync::Arc::default(),
        };
        let (operator, _) = ActionStateStore::restore(log.reopen(), look, &Ownership::All, &[start]).await.unwrap();
        assert!(operator.resolve(&token, b"yes").await.unwrap().recorded);
    }
    let (store, _) = restore().await.unwrap();
    assert_eq!(store.wait_outcome(&token).unwrap(), Some(reply("yes")), "the owner refused the operator's record");
}
