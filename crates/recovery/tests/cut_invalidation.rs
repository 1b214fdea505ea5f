//! A crash inside an invalidation (docs/design.md, lookup rules 4 and 6): the store queues an
//! invalidation's records, an append fails after some of them, the task fails over, and a new
//! store rebuilds from a marker taken before. Nothing the crashed writer invalidated may be
//! reused, wherever the records were cut.
#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use actionstate_core::{ActionId, Event, EventId, LogRecord, MissReason, StateLog, Trigger};
use actionstate_recovery::{ActionStateStore, Begin, CheckpointForm, Round, StoreConfig};
use common::{Backend, Env, Faulty, event, input, key};
use std::sync::Arc;

/// Begins `action` and, unless it is reused, completes it with `outputs`. Returns the outputs
/// it recorded.
async fn step<L: StateLog, F: CheckpointForm>(
    store: &ActionStateStore<L, F>,
    round: &Round,
    action: &ActionId,
    ev: &Event,
    trigger: &Trigger,
    outputs: Vec<Event>,
) -> Vec<Event> {
    match store.begin(round, action, ev, trigger).await.unwrap() {
        Begin::Reuse(state) => state.outputs().to_vec(),
        Begin::Resume(handle) | Begin::Fresh(handle, _) => {
            store.complete(handle, outputs, Vec::new()).await.unwrap().outputs().to_vec()
        }
    }
}

/// The recorded state of `action`, which must be reusable.
async fn reused<L: StateLog, F: CheckpointForm>(
    store: &ActionStateStore<L, F>,
    round: &Round,
    action: &ActionId,
    ev: &Event,
    trigger: &Trigger,
) -> Arc<actionstate_core::ActionState> {
    match store.begin(round, action, ev, trigger).await.unwrap() {
        Begin::Reuse(state) => state,
        other => panic!("{action} is reused, got {other:?}"),
    }
}

/// Two outputs of one producer with identical attributes.
fn twins() -> Vec<Event> {
    vec![event("task", "same"), event("task", "same")]
}

async fn cut_invalidation(backend: Backend) {
    let (root, producer, child) = (ActionId::new("root"), ActionId::new("producer"), ActionId::new("child"));
    let k = key("cut-invalidation");
    let ev = input(0);
    let round = Round::new(k, 0, &ev);
    // The invalidation of the producer is four records (its audit, then the tombstones of
    // the producer and its two children): cut after each of the first three.
    for keep in 1..4u64 {
        let env = Env::new(backend);
        let log = Faulty::wrap(env.open().await);
        let faults = Arc::clone(log.faults());
        let store = ActionStateStore::new_two_phase(log, StoreConfig::default());
        let before = store.snapshot(1).await.unwrap();

        // Round 0: the root emits one event, the producer two identical ones, a child runs on
        // each.
        let r_out = step(&store, &round, &root, &ev, &Trigger::Input, vec![event("plan", 1)]).await;
        let r_state = reused(&store, &round, &root, &ev, &Trigger::Input).await;
        let on_r = Trigger::Emitted { producer: r_state.key, index: 0 };
        let p_out = step(&store, &round, &producer, &r_out[0], &on_r, twins()).await;
        let p_state = reused(&store, &round, &producer, &r_out[0], &on_r).await;
        let children: Vec<Trigger> = (0..2).map(|index| Trigger::Emitted { producer: p_state.key, index }).collect();
        for (i, t) in children.iter().enumerate() {
            step(&store, &round, &child, &p_out[i], t, Vec::new()).await;
        }

        // The producer is looked up with another occurrence of its trigger event: a conflict
        // that invalidates it and both children.
        let other = Event { id: EventId::random(), ..r_out[0].clone() };
        let handle = match store.begin(&round, &producer, &other, &on_r).await.unwrap() {
            Begin::Fresh(handle, MissReason::OccurrenceConflict) => handle,
            b => panic!("expected an occurrence conflict, got {b:?}"),
        };
        assert_eq!(store.pending_invalidations(), 4, "an audit and three tombstones are queued");
        // The next write flushes them; the append after `keep` of them fails: the task fails
        // over.
        faults.fail_appends_after(Some(keep));
        assert!(store.complete(handle, twins(), Vec::new()).await.is_err(), "the cut write fails");
        drop(store);

        // A new store restores the snapshot taken before, and the runtime replays round 0.
        let store = env.restored(&[before]).await;
        let r_again = reused(&store, &round, &root, &ev, &Trigger::Input).await;
        assert_eq!(r_again.outputs(), r_out.as_slice());
        let handle = match store.begin(&round, &producer, &r_out[0], &on_r).await.unwrap() {
            Begin::Fresh(handle, _) => handle,
            b => panic!("cut after {keep}: the invalidated producer must run again, got {b:?}"),
        };
        let rerun = store.complete(handle, twins(), Vec::new()).await.unwrap();
        for (i, t) in children.iter().enumerate() {
            match store.begin(&round, &child, &rerun.outputs()[i], t).await.unwrap() {
                Begin::Fresh(..) => {}
                b => panic!("cut after {keep}: child {i} of the invalidated producer was not run again: {b:?}"),
            }
        }
        // The rebuild finished the cut invalidation: the tombstones the crashed writer did not
        // write are in the log before the key's next record.
        drop(store);
        let log = env.open().await;
        let tombstones = common::decoded(&log, k.partition(common::PARTITIONS))
            .await
            .into_iter()
            .filter(|(_, r)| matches!(r, LogRecord::Delete { .. }))
            .count();
        assert_eq!(tombstones, 3, "cut after {keep}: one tombstone per invalidated state in the log");
    }
}

on_every_backend!(a_crash_inside_an_invalidation_never_lets_a_stale_child_be_reused, cut_invalidation);
