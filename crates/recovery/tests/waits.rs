//! Durable waits (docs/design.md, section 5.7): a wait is durable before the action suspends;
//! its token is stable through restores and new once an invalidation voids the wait; the first
//! outcome of reply, rejection and timeout is the only one, and a later resolve writes nothing;
//! the resumed action receives the outcome from its journal; deadlines survive restarts; the
//! store lists the waits a runtime must know about; tokens and replies never show in errors.
#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use actionstate_core::{ActionId, KeyId, MAX_WAIT_REPLY, StateLog, Trigger, WaitOutcome, WaitToken};
use actionstate_memory::MemoryLog;
use actionstate_recovery::{
    ActionHandle, ActionStateStore, Begin, Clock, DurableCall, Ownership, RestoreFrom, Round, StoreConfig, StoreError,
    Wait, WaitStatus, Waited,
};
use common::{input, key};
use std::time::Duration;

const START_MS: u64 = 1_800_000_000_000;

fn approve() -> ActionId {
    ActionId::new("pay")
}

fn config(clock: &Clock) -> StoreConfig {
    StoreConfig { clock: clock.clone(), ..StoreConfig::default() }
}

/// A store restored from everything `log` holds (as a restarted process opens it).
async fn restored(log: &MemoryLog, clock: &Clock) -> ActionStateStore<MemoryLog> {
    ActionStateStore::restore(log.reopen(), config(clock), &Ownership::All, RestoreFrom::Latest).await.unwrap().0
}

/// Begins (or re-enters) the payment action of round 0 of `k`.
async fn begin(store: &ActionStateStore<MemoryLog>, k: KeyId) -> ActionHandle {
    let inp = input(1);
    let round = store.round(Round::new(k, 0, &inp));
    let begun = store.begin(&round, &approve(), &inp, &Trigger::Input).await.unwrap();
    round.suspend();
    match begun {
        Begin::Fresh(h, _) | Begin::Resume(h) => h,
        Begin::Reuse(_) => panic!("the action completed"),
    }
}

/// The payment action up to its approval: a durable call, then the wait.
async fn run_to_approval(store: &ActionStateStore<MemoryLog>, h: &mut ActionHandle, timeout: Option<u64>) -> Waited {
    let quote = DurableCall::new("quote").args(&("EUR", 120)).unwrap();
    store.call(h, quote, |_| async { Ok(b"120".to_vec()) }).await.unwrap();
    let mut wait = Wait::new("approval").args("pay 120 EUR").unwrap();
    if let Some(ms) = timeout {
        wait = wait.timeout(Duration::from_millis(ms));
    }
    store.wait(h, wait).await.unwrap()
}

fn suspended(w: Waited) -> WaitToken {
    match w {
        Waited::Suspended(t) => t,
        Waited::Done(o) => panic!("expected a suspension, got {o:?}"),
    }
}

/// The wait is durable before the action suspends; the handle refuses further work; a resolve
/// is durable, a second one writes nothing and returns the first outcome; the action begun
/// again receives the reply from its journal, and goes on.
#[tokio::test]
async fn a_wait_suspends_durably_and_its_first_resolve_is_delivered_to_the_resumed_action() {
    let clock = Clock::manual(START_MS);
    let log = MemoryLog::new(4);
    let store = restored(&log, &clock).await;
    let k = key("alice");
    let mut h = begin(&store, k).await;
    let end_before = log.end_offsets().await.unwrap();
    let token = suspended(run_to_approval(&store, &mut h, None).await);
    assert_ne!(log.end_offsets().await.unwrap(), end_before, "the wait was not written before suspending");
    assert!(h.is_suspended());
    let err = store.call(&mut h, DurableCall::new("charge"), |_| async { Ok(vec![]) }).await.unwrap_err();
    assert!(matches!(err, StoreError::Suspended { .. }), "{err}");

    let listed = store.waits();
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].key, listed[0].seq, listed[0].name.as_str()), (k, 0, "approval"));
    assert_eq!(
        (listed[0].status.clone(), listed[0].since_ms, listed[0].deadline_ms),
        (WaitStatus::Pending, START_MS, None)
    );

    let first = store.resolve(&token, b"approved").await.unwrap();
    assert_eq!((first.outcome, first.recorded), (WaitOutcome::Reply(b"approved".to_vec()), true));
    let end = log.end_offsets().await.unwrap();
    let again = store.reject(&token, b"too late").await.unwrap();
    assert_eq!((again.outcome, again.recorded), (WaitOutcome::Reply(b"approved".to_vec()), false));
    assert_eq!(log.end_offsets().await.unwrap(), end, "a second resolve wrote to the log");
    assert_eq!(store.waits()[0].status, WaitStatus::Resolved { outcome: "reply" });

    // The runtime begins the action again: the call replays and the wait returns the reply.
    let mut h = begin(&store, k).await;
    let waited = run_to_approval(&store, &mut h, None).await;
    assert_eq!(waited, Waited::Done(WaitOutcome::Reply(b"approved".to_vec())));
    let charged = store.call(&mut h, DurableCall::new("charge"), |_| async { Ok(b"ok".to_vec()) }).await.unwrap();
    assert_eq!(charged.output, Ok(b"ok".to_vec()));
    assert!(store.waits().is_empty(), "a resumed wait is still listed: {:?}", store.waits());
    store.complete(h, vec![], vec![]).await.unwrap();
    let err = store.resolve(&token, b"approved").await.unwrap_err();
    assert!(matches!(err, StoreError::UnknownWait { key } if key == k), "{err}");
}

/// The token is the same after a crash and restore: the restored store lists the wait, the
/// re-entered action suspends with the same token, and a resolve there reaches it. A wait
/// resolved before the crash is listed as resolved after the restore.
#[tokio::test]
async fn the_token_survives_a_restore_and_the_restored_store_lists_the_waits() {
    let clock = Clock::manual(START_MS);
    let log = MemoryLog::new(4);
    let (a, b) = (key("a"), key("b"));
    let (ta, tb) = {
        let store = restored(&log, &clock).await;
        let ta = suspended(run_to_approval(&store, &mut begin(&store, a).await, None).await);
        let tb = suspended(run_to_approval(&store, &mut begin(&store, b).await, None).await);
        store.resolve(&tb, b"yes").await.unwrap();
        (ta, tb)
    };
    let store = restored(&log, &clock).await;
    let mut listed: Vec<(KeyId, WaitStatus)> = store.waits().into_iter().map(|w| (w.key, w.status)).collect();
    listed.sort_by_key(|(k, _)| *k);
    let mut expected = vec![(a, WaitStatus::Pending), (b, WaitStatus::Resolved { outcome: "reply" })];
    expected.sort_by_key(|(k, _)| *k);
    assert_eq!(listed, expected);

    assert_eq!(suspended(run_to_approval(&store, &mut begin(&store, a).await, None).await), ta);
    assert_eq!(
        run_to_approval(&store, &mut begin(&store, b).await, None).await,
        Waited::Done(WaitOutcome::Reply(b"yes".to_vec()))
    );
    assert!(store.resolve(&ta, b"ok").await.unwrap().recorded);
    assert!(!store.resolve(&tb, b"again").await.unwrap().recorded);
}

/// A deadline is recorded when the action first waits: a restart keeps it, `expire_waits` ends
/// the wait once it passed (durably, so a later resolve gets the timeout), and the re-entered
/// action receives the timeout.
#[tokio::test]
async fn a_deadline_survives_a_restart_and_ends_the_wait_as_timed_out() {
    let clock = Clock::manual(START_MS);
    let log = MemoryLog::new(4);
    let k = key("c");
    let token = {
        let store = restored(&log, &clock).await;
        suspended(run_to_approval(&store, &mut begin(&store, k).await, Some(60_000)).await)
    };
    clock.advance(40_000);
    let store = restored(&log, &clock).await;
    assert_eq!(store.waits()[0].deadline_ms, Some(START_MS + 60_000), "the restart moved the deadline");
    assert_eq!(store.expire_waits().await.unwrap(), 0, "a wait timed out before its deadline");
    assert_eq!(suspended(run_to_approval(&store, &mut begin(&store, k).await, Some(60_000)).await), token);

    clock.advance(20_000);
    assert_eq!(store.expire_waits().await.unwrap(), 1);
    assert_eq!(store.expire_waits().await.unwrap(), 0, "a wait timed out twice");
    let late = store.resolve(&token, b"approved").await.unwrap();
    assert_eq!((late.outcome, late.recorded), (WaitOutcome::TimedOut, false));
    let store = restored(&log, &clock).await;
    assert_eq!(store.waits()[0].status, WaitStatus::Resolved { outcome: "timed_out" });
    assert_eq!(
        run_to_approval(&store, &mut begin(&store, k).await, Some(60_000)).await,
        Waited::Done(WaitOutcome::TimedOut)
    );
}

/// An action re-entered after its deadline passed ends the wait itself, durably.
#[tokio::test]
async fn a_wait_re_entered_after_its_deadline_times_out_durably() {
    let clock = Clock::manual(START_MS);
    let log = MemoryLog::new(4);
    let k = key("d");
    let store = restored(&log, &clock).await;
    let token = suspended(run_to_approval(&store, &mut begin(&store, k).await, Some(1_000)).await);
    clock.advance(1_000);
    let waited = run_to_approval(&store, &mut begin(&store, k).await, Some(1_000)).await;
    assert_eq!(waited, Waited::Done(WaitOutcome::TimedOut));
    let store = restored(&log, &clock).await;
    assert_eq!(store.resolve(&token, b"x").await.unwrap().outcome, WaitOutcome::TimedOut);
}

/// An operator's invalidation voids the waiting action's token: a resolve is `UnknownWait`
/// and writes nothing, and the action run again waits under a new token.
#[tokio::test]
async fn an_invalidation_voids_the_token_and_the_rerun_waits_under_a_new_one() {
    let clock = Clock::manual(START_MS);
    let log = MemoryLog::new(4);
    let k = key("e");
    let store = restored(&log, &clock).await;
    let token = suspended(run_to_approval(&store, &mut begin(&store, k).await, None).await);
    store.invalidate(k, 0, "wrong amount").await.unwrap();
    assert!(store.waits().is_empty(), "a voided wait is listed");
    let end = log.end_offsets().await.unwrap();
    let err = store.resolve(&token, b"approved").await.unwrap_err();
    assert!(matches!(err, StoreError::UnknownWait { key } if key == k), "{err}");
    assert_eq!(log.end_offsets().await.unwrap(), end, "a refused resolve wrote to the log");

    let again = suspended(run_to_approval(&store, &mut begin(&store, k).await, None).await);
    assert_ne!(again, token, "the rerun kept the voided token");
    let restarted = restored(&log, &clock).await;
    assert!(matches!(restarted.resolve(&token, b"approved").await, Err(StoreError::UnknownWait { .. })));
    assert!(restarted.resolve(&again, b"approved").await.unwrap().recorded);
}

/// Bad resolves are refused with typed errors and write nothing: a token of another key (or
/// a forged secret), an oversized reply, a key the store does not own, a malformed text. No
/// error shows the token's secret or the reply.
#[tokio::test]
async fn bad_resolves_are_refused_write_nothing_and_show_no_secret() {
    let clock = Clock::manual(START_MS);
    let log = MemoryLog::new(4);
    let k = key("f");
    let store = restored(&log, &clock).await;
    let token = suspended(run_to_approval(&store, &mut begin(&store, k).await, None).await);
    let end = log.end_offsets().await.unwrap();
    let secret_text = &token.to_text()[token.to_text().len() - 32..];

    let forged = WaitToken { key: token.key, secret: actionstate_core::WaitSecret::random() };
    let other_key = WaitToken { key: key("g"), secret: token.secret };
    let huge = vec![7u8; MAX_WAIT_REPLY + 1];
    let errors = [
        store.resolve(&forged, b"approved").await.unwrap_err(),
        store.resolve(&other_key, b"approved").await.unwrap_err(),
        store.resolve(&token, &huge).await.unwrap_err(),
        StoreError::from(WaitToken::parse(&token.to_text()[..40]).unwrap_err()),
    ];
    assert!(matches!(errors[0], StoreError::UnknownWait { .. }), "{}", errors[0]);
    assert!(matches!(errors[1], StoreError::UnknownWait { .. }), "{}", errors[1]);
    assert!(
        matches!(errors[2], StoreError::WaitReplyTooLarge { len, max } if len == MAX_WAIT_REPLY + 1 && max == MAX_WAIT_REPLY)
    );
    assert!(matches!(errors[3], StoreError::BadWaitToken(_)), "{}", errors[3]);
    for e in &errors {
        let shown = format!("{e} {e:?}");
        assert!(!shown.contains(secret_text), "an error shows the secret: {shown}");
    }
    assert_eq!(log.end_offsets().await.unwrap(), end, "a refused resolve wrote to the log");

    let groups = Ownership::Groups { max_groups: 8, owned: 0..1 };
    let foreign = (0..).map(|i| key(&format!("h-{i}"))).find(|k| !groups.owns(k)).unwrap();
    let owner = ActionStateStore::restore(log.reopen(), config(&clock), &groups, RestoreFrom::Latest).await.unwrap().0;
    let err = owner.resolve(&WaitToken { key: foreign, secret: token.secret }, b"x").await.unwrap_err();
    assert!(matches!(err, StoreError::NotOwned { .. }), "{err}");
}

/// A wait with other arguments than the journaled one is a different history: the journal is
/// truncated there and a new wait (a new token) begins.
#[tokio::test]
async fn a_wait_with_other_arguments_waits_anew() {
    let clock = Clock::manual(START_MS);
    let log = MemoryLog::new(4);
    let k = key("i");
    let store = restored(&log, &clock).await;
    let first =
        suspended(store.wait(&mut begin(&store, k).await, Wait::new("approval").args("100").unwrap()).await.unwrap());
    let second =
        suspended(store.wait(&mut begin(&store, k).await, Wait::new("approval").args("200").unwrap()).await.unwrap());
    assert_ne!(first, second);
    assert!(matches!(store.resolve(&first, b"x").await, Err(StoreError::UnknownWait { .. })));
    assert_eq!(store.waits().len(), 1);
}
