//! Key labels: a round the application names (`Round::named`) writes the name into every state
//! of the round, a rebuild replays it with the state, and the key is the hash of the whole
//! name, so that `KeyId::of(name)` finds it.
#![allow(clippy::unwrap_used, reason = "tests")]

use actionstate_core::{ActionId, Attributes, Event, KeyId, LogRecord, Marker, RangeRead, StateLog, Trigger, codec};
use actionstate_memory::MemoryLog;
use actionstate_recovery::{ActionStateStore, Begin, DurableCall, Ownership, Round, Snapshot, StoreConfig};
use std::sync::Arc;

#[tokio::test]
async fn a_named_round_records_its_label_and_a_rebuild_replays_it() {
    let input = Event::new("question", Attributes::new());
    let action = ActionId::new("answer");
    let long = format!("customer-{}", "x".repeat(80));
    let mut labeled = 0;
    for name in ["customer-42", long.as_str()] {
        // A log per name: a store that never restored writes with epoch 0, which the fences of
        // the restore before it would shut out.
        let log = MemoryLog::new(4);
        let store = ActionStateStore::new(log.clone(), StoreConfig::default());
        let round = Round::named(name, 0, &input);
        assert_eq!(round.key, KeyId::of(name.as_bytes()), "the key is the hash of the whole name");
        let Begin::Fresh(mut handle, _) = store.begin(&round, &action, &input, &Trigger::Input).await.unwrap() else {
            panic!("a new key's action must start fresh");
        };
        let call = DurableCall::new("llm.complete").args_digest([0; 32]);
        store.call(&mut handle, call, |_| async { Ok(b"hi".to_vec()) }).await.unwrap();
        store.complete(handle, vec![], vec![]).await.unwrap();

        // A restore replays the label with the state it reuses.
        let marker = Marker::new(log.identity().clone(), log.earliest_offsets().await.unwrap());
        let start = Snapshot { checkpoint: 0, marker, completed: Arc::default() };
        let (restored, _) =
            ActionStateStore::restore(log.clone(), StoreConfig::default(), &Ownership::All, &[start]).await.unwrap();
        let Begin::Reuse(state) = restored.begin(&round, &action, &input, &Trigger::Input).await.unwrap() else {
            panic!("a completed action must be reused");
        };
        let label = state.label.expect("the state carries its key's label");
        assert!(name.starts_with(label.as_str()) && label.as_str().len() <= actionstate_core::MAX_KEY_LABEL);
        assert_eq!(label.as_str().len(), name.len().min(actionstate_core::MAX_KEY_LABEL));
        // Every upsert in the log carries the label: the journal entry and the completion.
        for p in 0..log.identity().partitions {
            let end = log.end_offsets().await.unwrap()[p as usize];
            let mut range = RangeRead::new(p, 0, end, 64);
            while let Some(records) = range.next_batch(&log).await.unwrap() {
                for r in records {
                    if let LogRecord::Upsert(s) = codec::decode(&r.key, &r.value).unwrap() {
                        assert_eq!(s.label, Some(label), "{s:?}");
                        labeled += 1;
                    }
                }
            }
        }
    }
    assert_eq!(labeled, 4, "two keys, a journal entry and a completion each");
}

#[tokio::test]
async fn an_unnamed_round_writes_no_label() {
    let log = MemoryLog::new(2);
    let store = ActionStateStore::new(log.clone(), StoreConfig::default());
    let input = Event::new("question", Attributes::new());
    let round = Round::new(KeyId::of(b"customer-7"), 0, &input);
    let action = ActionId::new("answer");
    let Begin::Fresh(handle, _) = store.begin(&round, &action, &input, &Trigger::Input).await.unwrap() else {
        panic!("fresh");
    };
    let state = store.complete(handle, vec![], vec![]).await.unwrap();
    assert_eq!(state.label, None);
}
