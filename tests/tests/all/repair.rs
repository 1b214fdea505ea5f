//! An operator's repair on every backend: `ActionStateStore::invalidate` removes the rounds of
//! one key from a round on, the log holds its audit record and one tombstone per removed state
//! (each with the operator's reason), and a store rebuilt from a checkpoint taken before
//! re-executes exactly those rounds. The `kafka` and `fluss` tests run on a fresh topic or
//! table of the configured server, and print the skip marker without one.

use actionstate_core::{ActionId, Attributes, AuditDetail, Event, InvalidationReason, KeyId, LogRecord, StateKey};
use actionstate_core::{StateLog, Trigger, Value};
use actionstate_recovery::{ActionStateStore, Begin, CheckpointForm, Ownership, Retention, Round, StoreConfig};
use actionstate_tests::{Backend, Env};
use std::collections::BTreeSet;

on_every_backend!("repair": an_operator_invalidation_is_replayed_by_a_rebuild);

const ROUNDS: u64 = 4;
const FROM: u64 = 2;
const WHY: &str = "the model behind `answer` hallucinated prices; answer again";

fn question(seq: u64) -> Event {
    let mut attributes = Attributes::new();
    attributes.insert("n".into(), Value::Int(i64::try_from(seq).unwrap()));
    Event::new("question", attributes)
}

/// Runs the one action of round `seq` of `key`, unless it is reused; returns whether it ran.
async fn answer<L: StateLog, F: CheckpointForm>(store: &ActionStateStore<L, F>, key: KeyId, seq: u64) -> bool {
    let input = question(seq);
    let round = Round::new(key, seq, &input);
    match store.begin(&round, &ActionId::new("answer"), &input, &Trigger::Input).await.unwrap() {
        Begin::Reuse(_) => false,
        Begin::Resume(handle) | Begin::Fresh(handle, _) => {
            store.complete(handle, vec![Event::new("reply", Attributes::new())], Vec::new()).await.unwrap();
            true
        }
    }
}

async fn an_operator_invalidation_is_replayed_by_a_rebuild(backend: Backend) {
    let env = Env::new(backend).unwrap();
    let config = StoreConfig { retention: Retention::KeepAll, ..StoreConfig::default() };
    // Two-phase: the runtime keeps the snapshot the restore below starts from.
    let store = ActionStateStore::new_two_phase(env.open().await.unwrap(), config.clone());
    let checkpoint = store.snapshot(1).await.unwrap();
    let (k, other) = (KeyId::of(b"repaired"), KeyId::of(b"bystander"));
    for seq in 0..ROUNDS {
        assert!(answer(&store, k, seq).await && answer(&store, other, seq).await);
    }
    let report = store.invalidate(k, FROM, WHY).await.unwrap();
    let removed: BTreeSet<StateKey> = report.removed.iter().copied().collect();
    assert_eq!(removed.iter().map(|s| s.seq).collect::<Vec<_>>(), (FROM..ROUNDS).collect::<Vec<_>>());
    assert_eq!(report.records, removed.len() + 1);
    drop(store);

    // The log holds the audit, then the tombstones, in the key's partition.
    let reason = InvalidationReason::Operator { text: WHY.to_owned() };
    let records = env.records().await.unwrap();
    let mine: Vec<&LogRecord> = records.iter().map(|(_, _, r)| r).filter(|r| r.key_id() == k).collect();
    let at = mine.iter().position(|r| matches!(r, LogRecord::Audit(_))).expect("the repair's audit is in the log");
    match mine[at] {
        LogRecord::Audit(a) => {
            assert_eq!((a.seq, &a.reason, &a.detail, a.removed), (FROM, &reason, &AuditDetail::Operator, 2));
        }
        _ => unreachable!(),
    }
    let tombstones: BTreeSet<StateKey> = mine[at + 1..]
        .iter()
        .map(|r| match r {
            LogRecord::Delete { key, reason: why } if *why == reason => *key,
            other => panic!("after the audit come its tombstones, not {other:?}"),
        })
        .collect();
    assert_eq!(tombstones, removed);

    // A restore of the checkpoint taken before: the rounds before `FROM` are reused, the
    // repaired ones run again, the other key's are reused.
    let (store, _) =
        ActionStateStore::restore(env.open().await.unwrap(), config, &Ownership::All, &[checkpoint]).await.unwrap();
    for seq in 0..ROUNDS {
        assert_eq!(answer(&store, k, seq).await, seq >= FROM, "{}: round {seq} of the repaired key", backend.name());
        assert!(!answer(&store, other, seq).await, "{}: round {seq} of the other key is reused", backend.name());
    }
}
