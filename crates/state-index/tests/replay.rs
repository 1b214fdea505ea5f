//! Replay equivalence (docs/design.md, lookup rule 6 and section 5.3, markers): random
//! histories are written through a simulated store that logs every invalidation (its audit,
//! then its tombstones); a rebuild from any checkpoint's covering marker, followed by pruning
//! the checkpoint's completed rounds, must reproduce the writer's index at the end of the
//! history, pruned the same way.
#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use actionstate_core::{ActionState, InvalidationReason, KeyId, MissReason, StateKey};
use actionstate_index::{Index, Probe};
use common::ops::{Ids, Op, Short, Step, op_strategy};
use common::{Checkpoint, Dump, Store, dump, invariants};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use std::collections::BTreeMap;

const PARTITIONS: u32 = 3;

/// One event of a history: an operation, or a checkpoint.
#[derive(Clone, Debug)]
enum Hist {
    Op(Op),
    /// A checkpoint whose completed round per key is the key's highest touched round minus
    /// `lag`; when `complete` (and the history completes checkpoints), the writer prunes them.
    Checkpoint {
        lag: u8,
        complete: bool,
    },
}

fn event_strategy() -> impl Strategy<Value = Hist> {
    prop_oneof![
        10 => op_strategy().prop_map(Hist::Op),
        2 => (0u8..3, any::<bool>()).prop_map(|(lag, complete)| Hist::Checkpoint { lag, complete }),
    ]
}

/// A checkpoint taken during a history.
#[derive(Debug)]
struct Taken {
    checkpoint: Checkpoint,
    /// Whether the writer pruned the rounds of a later completed checkpoint since.
    superseded: bool,
}

/// The writer: a store plus what the runtime knows (highest touched and pruned rounds).
#[derive(Debug)]
struct Writer {
    store: Store,
    ids: Ids,
    touched: BTreeMap<KeyId, u64>,
    pruned: BTreeMap<KeyId, u64>,
    taken: Vec<Taken>,
    marker: Vec<u64>,
    trace: Vec<String>,
}

impl Writer {
    fn new() -> Self {
        let store = Store::new(PARTITIONS);
        let marker = store.index.covering_offsets(&store.end_offsets());
        Writer {
            store,
            ids: Ids(1_000),
            touched: BTreeMap::new(),
            pruned: BTreeMap::new(),
            taken: Vec::new(),
            marker,
            trace: Vec::new(),
        }
    }

    fn context(&self) -> String {
        self.trace.join("\n  ")
    }

    fn step(&mut self, step: &Step) {
        // This writer logs its invalidations whole; `cut.rs` cuts them.
        let step = match step {
            Step::Cut { lookup, .. } => lookup.as_ref(),
            other => other,
        };
        let Some((k, seq)) = step.round() else {
            return;
        };
        // Pruning happens only when a checkpoint completes, and rounds a completed checkpoint
        // covers are never touched again.
        if matches!(step, Step::Prune { .. }) || self.pruned.get(&k).is_some_and(|p| seq <= *p) {
            return;
        }
        self.trace.push(Short(step).to_string());
        let t = self.touched.entry(k).or_insert(seq);
        *t = (*t).max(seq);
        match step {
            Step::Upsert(state) => {
                self.store.put(state.clone());
            }
            Step::Lookup { key, trigger, event, input, .. } => {
                self.store.lookup(&Probe { key: *key, trigger, event: *event, input: *input });
            }
            Step::Delete(sk) => {
                self.store.delete(*sk, InvalidationReason::Miss(MissReason::Absent));
            }
            Step::Operator { key, from_seq } => {
                self.store.operator(*key, *from_seq, common::ops::OPERATOR_TEXT);
            }
            Step::Prune { .. } | Step::Cut { .. } | Step::Nothing => {}
        }
    }

    fn checkpoint(&mut self, lag: u8, complete: bool) {
        let completed: BTreeMap<KeyId, u64> = self
            .touched
            .iter()
            .filter_map(|(k, top)| {
                let c = top.checked_sub(u64::from(lag));
                let floor = self.pruned.get(k).copied();
                c.max(floor).map(|c| (*k, c))
            })
            .collect();
        let checkpoint = self.store.checkpoint(completed);
        self.trace.push(format!(
            "checkpoint at {:?} (marker {:?}){}",
            self.store.end_offsets(),
            checkpoint.marker,
            if complete { ", completed" } else { "" }
        ));
        if complete {
            self.store.complete(&checkpoint);
            for t in &mut self.taken {
                t.superseded = true;
            }
            self.pruned.clone_from(&checkpoint.completed);
        }
        self.taken.push(Taken { checkpoint, superseded: false });
    }

    /// Markers never move backwards, and the index stays consistent.
    fn check_marker(&mut self) -> Result<(), TestCaseError> {
        let now = self.store.index.covering_offsets(&self.store.end_offsets());
        for (p, (before, after)) in self.marker.iter().zip(&now).enumerate() {
            prop_assert!(
                after >= before,
                "marker of partition {p} moved back from {before} to {after}\n  {}",
                self.context()
            );
        }
        self.marker = now;
        prop_assert_eq!(invariants(&self.store.index), Ok(()));
        Ok(())
    }
}

fn pruned(index: &Index, completed: &BTreeMap<KeyId, u64>) -> Index {
    let mut index = index.clone();
    for (k, s) in completed {
        index.prune(k, *s);
    }
    index
}

fn same(got: &Index, want: &Index, what: &str, context: &str) -> Result<(), TestCaseError> {
    let (g, w): (Dump, Dump) = (dump(got), dump(want));
    if g != w {
        let extra: Vec<String> = g.keys().filter(|k| !w.contains_key(k)).map(common::ops::short_key).collect();
        let missing: Vec<String> = w.keys().filter(|k| !g.contains_key(k)).map(common::ops::short_key).collect();
        return Err(TestCaseError::fail(format!(
            "{what}: rebuilt index differs from the writer's: extra {extra:?}, \
             missing {missing:?}, or a state/position differs\n  {context}"
        )));
    }
    prop_assert_eq!(got.stats(), want.stats(), "{}: stats", what);
    prop_assert_eq!(invariants(got), Ok(()), "{}: invariants", what);
    Ok(())
}

fn run(completes: bool, events: &[Hist]) -> Result<(), TestCaseError> {
    let mut w = Writer::new();
    for e in events {
        match e {
            Hist::Op(op) => {
                let known: BTreeMap<StateKey, ActionState> =
                    dump(&w.store.index).into_iter().map(|(k, (s, _))| (k, s)).collect();
                for step in common::ops::resolve_all(op, &known, &mut w.ids) {
                    w.step(&step);
                    w.check_marker()?;
                }
            }
            Hist::Checkpoint { lag, complete } => {
                w.checkpoint(*lag, completes && *complete);
                w.check_marker()?;
            }
        }
    }
    // A checkpoint at the very end, so every history has at least one.
    w.checkpoint(1, false);
    let context = w.context();
    let end = w.store.end_offsets();
    let writer = &w.store.index;

    // Replay of the whole log reproduces the writer (up to what completed checkpoints pruned).
    let from_zero = pruned(&w.store.replay(&vec![0; end.len()]), &w.pruned);
    same(&from_zero, writer, "replay from offset 0", &context)?;

    for (i, t) in w.taken.iter().enumerate() {
        if t.superseded {
            continue;
        }
        let cp = &t.checkpoint;
        let what = format!("checkpoint {i} {:?}", cp.marker);
        if w.pruned.is_empty() {
            // Nothing was ever pruned: the rebuild alone is the writer's index.
            same(&w.store.replay(&cp.marker), writer, &what, &context)?;
        }
        let restored = w.store.restore(cp);
        same(&restored, &pruned(writer, &cp.completed), &what, &context)?;

        // Restoring, then checkpointing before anything is re-run, then restoring again
        // loses nothing: the second marker covers the recovered work.
        let again = restored.covering_offsets(&end);
        for (a, b) in again.iter().zip(&cp.marker) {
            prop_assert!(a >= b, "restored index's marker {again:?} is before {cp:?}");
        }
        let twice = w.store.restore(&Checkpoint { marker: again, completed: cp.completed.clone() });
        same(&twice, &restored, &format!("{what} restored twice"), &context)?;
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(2_000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"))), ..ProptestConfig::default() })]

    #[test]
    fn rebuild_from_any_checkpoint_reproduces_the_writer(
        completes in prop::bool::weighted(0.5),
        events in prop::collection::vec(event_strategy(), 1..60),
    ) {
        run(completes, &events)?;
    }
}

/// Replaying without the logged invalidation (its audit record and its tombstones) revives
/// invalidated history: those records are what makes replay equivalent (and this test's
/// store really writes them). The audit alone, which leads the invalidation, already replays
/// it whole; the tombstones alone do too.
#[test]
fn replay_without_tombstones_would_revive_invalidated_states() {
    use actionstate_core::{LogRecord, Trigger};
    use common::{done, input, input_fp, key, output};

    let mut store = Store::new(1);
    let k = key(1);
    let a = common::action("plan");
    for seq in 0..3 {
        let ev = input(10 + u128::from(seq), 0);
        store.put(done(k, seq, &a, Trigger::Input, &ev, input_fp(0), vec![output(100 + u128::from(seq), 1)]));
    }
    // A miss in round 0 invalidates rounds 1 and 2.
    let other = common::action("other");
    let ev = input(20, 0);
    let probe_state = done(k, 0, &other, Trigger::Input, &ev, input_fp(0), Vec::new());
    let found = store.lookup(&common::probe(&probe_state, ev.id, input_fp(0)));
    assert_eq!(found.invalidation.removed.len(), 2);

    let with = store.replay(&[0]);
    same(&with, &store.index, "with tombstones", "").unwrap();

    let replay_only = |keep: &dyn Fn(&LogRecord) -> bool| {
        let mut index = Index::new();
        for (offset, record) in (0u64..).zip(store.records()) {
            if keep(&record) {
                index.apply(record, common::at(offset), 100);
            }
        }
        index
    };
    let without = replay_only(&|r| !matches!(r, LogRecord::Delete { .. } | LogRecord::Audit(_)));
    assert_eq!(without.stats().states, 3);
    assert_eq!(store.index.stats().states, 1);
    let audit_only = replay_only(&|r| !matches!(r, LogRecord::Delete { .. }));
    assert_eq!(dump(&audit_only), dump(&store.index), "with the audit alone");
    let tombstones_only = replay_only(&|r| !matches!(r, LogRecord::Audit(_)));
    assert_eq!(dump(&tombstones_only), dump(&store.index), "with the tombstones alone");
}
