//! Invalidations cut short (docs/design.md, lookup rule 6): a crash or a failed append can stop
//! the records of an invalidation after any of them. For random histories, every invalidation
//! of more than one record is cut at every position inside it; the log so cut is rebuilt and a
//! fresh writer continues the history. The rebuilt index must be the one the whole
//! invalidation leaves (which `model.rs` checks against the reference model), no state the
//! cut writer invalidated may be reused, and a second rebuild after the continuation must
//! reproduce the continued writer.
#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use actionstate_core::{ActionState, InvalidationReason, LogRecord, MissReason, Position, StateKey, WireRecord};
use actionstate_index::{Decision, Index, Probe};
use common::ops::{Ids, Op, Short, Step, op_strategy, short_key};

use common::{Dump, Store, dump, invariants};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use std::collections::{BTreeMap, BTreeSet};

/// Partitions of the simulated log.
const PARTITIONS: u32 = 3;

/// One invalidation the writer logged: the step that caused it, the end offsets just before
/// its records, its partition and how many records it took.
#[derive(Clone, Debug)]
struct Logged {
    step: usize,
    /// End offsets right before the invalidation's first record (after the upsert that
    /// caused it, for a replaced producer).
    ends: Vec<u64>,
    partition: u32,
    records: usize,
    /// Where the states it removed lived.
    removed: BTreeSet<Position>,
}

/// A store whose log is `log`: its index rebuilt by replaying every record.
fn rebuilt(log: Vec<Vec<WireRecord>>) -> Store {
    let mut store = Store::new(PARTITIONS);
    store.log = log;
    store.index = store.replay(&vec![0; PARTITIONS as usize]);
    store
}

/// The live position of every state `index` holds.
fn positions(index: &Index) -> BTreeMap<StateKey, Position> {
    dump(index).into_iter().map(|(k, (_, p))| (k, p)).collect()
}

/// The states of an index without their positions (a log cut short puts later records at
/// other offsets).
fn states(d: &Dump) -> BTreeMap<StateKey, ActionState> {
    d.iter().map(|(k, (s, _))| (*k, s.clone())).collect()
}

/// Runs `step` on `store`; for a lookup, returns its decision (with the position of a hit).
fn apply(store: &mut Store, step: &Step) -> Option<(Decision, Option<Position>)> {
    match step {
        Step::Upsert(state) => {
            store.put(state.clone());
            None
        }
        Step::Lookup { key, trigger, event, input, .. } => {
            let found = store.lookup(&Probe { key: *key, trigger, event: *event, input: *input });
            let at = found.decision.hit().and(store.index.position(key));
            Some((found.decision, at))
        }
        Step::Cut { lookup, .. } => apply(store, lookup),
        Step::Delete(sk) => {
            store.delete(*sk, InvalidationReason::Miss(MissReason::Absent));
            None
        }
        Step::Operator { key, from_seq } => {
            store.operator(*key, *from_seq, common::ops::OPERATOR_TEXT);
            None
        }
        // Pruning follows completed checkpoints, which this test does not take: a rebuild
        // from the start of the log replays every round.
        Step::Prune { .. } | Step::Nothing => None,
    }
}

// Long: one step of the cut model per kind of operation; the arms share the model's state.
fn run(ops: &[Op]) -> Result<(), TestCaseError> {
    let mut writer = Store::new(PARTITIONS);
    let mut ids = Ids(1_000);
    let mut steps: Vec<Step> = Vec::new();
    let mut logged: Vec<Logged> = Vec::new();
    for op in ops {
        let known: BTreeMap<StateKey, ActionState> =
            dump(&writer.index).into_iter().map(|(k, (s, _))| (k, s)).collect();
        for step in common::ops::resolve_all(op, &known, &mut ids) {
            let mut ends = writer.end_offsets();
            let before = positions(&writer.index);
            apply(&mut writer, &step);
            let (Some((key, _)), false) = (step.round(), matches!(step, Step::Prune { .. })) else {
                steps.push(step);
                continue;
            };
            let partition = key.partition(PARTITIONS);
            // An upsert's own record comes before the invalidation it caused.
            if matches!(step, Step::Upsert(_)) {
                ends[partition as usize] += 1;
            }
            let end = writer.end_offsets()[partition as usize];
            let records = end.checked_sub(ends[partition as usize]).and_then(|n| usize::try_from(n).ok());
            if let Some(records) = records
                && records > 1
            {
                let after = positions(&writer.index);
                let removed = before.iter().filter(|(k, _)| !after.contains_key(k)).map(|(_, p)| *p).collect();
                logged.push(Logged { step: steps.len(), ends, partition, records, removed });
            }
            steps.push(step);
        }
    }
    let trace = || steps.iter().map(|s| Short(s).to_string()).collect::<Vec<_>>().join("\n  ");
    for inv in &logged {
        let whole_log: Vec<Vec<WireRecord>> = (0u32..)
            .zip(&writer.log)
            .map(|(p, records)| {
                let mut end = usize::try_from(inv.ends[p as usize]).unwrap();
                if p == inv.partition {
                    end += inv.records;
                }
                records[..end].to_vec()
            })
            .collect();
        let whole = rebuilt(whole_log.clone());
        for keep in 1..inv.records {
            let what = format!("invalidation of step {} cut after {keep} of {} records", inv.step, inv.records);
            let mut cut_log = whole_log.clone();
            cut_log[inv.partition as usize].truncate(usize::try_from(inv.ends[inv.partition as usize]).unwrap() + keep);
            let mut cut = rebuilt(cut_log);
            prop_assert_eq!(invariants(&cut.index), Ok(()), "{}: invariants\n  {}", what, trace());
            let (got, want) = (dump(&cut.index), dump(&whole.index));
            if got != want {
                let extra: Vec<String> = got.keys().filter(|k| !want.contains_key(k)).map(short_key).collect();
                let missing: Vec<String> = want.keys().filter(|k| !got.contains_key(k)).map(short_key).collect();
                return Err(TestCaseError::fail(format!(
                    "{what}: the rebuilt index is not what the whole invalidation leaves: extra {extra:?}, \
                     missing {missing:?}, or a state differs\n  {}",
                    trace()
                )));
            }
            prop_assert_eq!(cut.index.stats(), whole.index.stats(), "{}: stats", what);

            // A fresh writer continues the history on the cut log, the writer that logged the
            // whole invalidation on its own: they decide alike, and neither reuses a state
            // the invalidation removed.
            let mut uncut = Store {
                log: whole.log.clone(),
                index: whole.index.clone(),
                tombstones: Vec::new(),
                epoch: whole.epoch,
            };
            for (i, step) in steps.iter().enumerate().skip(inv.step + 1) {
                let a = apply(&mut cut, step);
                let b = apply(&mut uncut, step);
                let name = |d: &Option<(Decision, Option<Position>)>| {
                    d.as_ref().map(|(d, _)| match d {
                        Decision::Hit(s) => format!("hit {:?}", s.state().unwrap()),
                        Decision::Miss(r) => format!("miss {r}"),
                    })
                };
                prop_assert_eq!(name(&a), name(&b), "{}: step {} decided differently\n  {}", what, i, trace());
                if let Some((Decision::Hit(_), Some(at))) = &a {
                    prop_assert!(
                        !inv.removed.contains(at),
                        "{}: step {} reused the state at {:?}, which the cut writer invalidated\n  {}",
                        what,
                        i,
                        at,
                        trace()
                    );
                }
            }
            prop_assert_eq!(states(&dump(&cut.index)), states(&dump(&uncut.index)), "{}: continued", what);
            // The log now holds the cut invalidation and what came after it; a second
            // rebuild reproduces the continued writer.
            let again = rebuilt(cut.log.clone());
            prop_assert_eq!(dump(&again.index), dump(&cut.index), "{}: rebuilt after continuing", what);
        }
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(2_000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"))), ..ProptestConfig::default() })]

    #[test]
    fn every_prefix_of_an_invalidation_replays_to_the_whole_of_it(
        ops in prop::collection::vec(op_strategy(), 1..40),
    ) {
        run(&ops)?;
    }
}

/// The generated histories cut many invalidations of every kind, each at several positions.
#[test]
fn generated_histories_cut_every_kind_of_invalidation() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

    let mut runner = TestRunner::new_with_rng(Config::default(), TestRng::from_seed(RngAlgorithm::ChaCha, &[11; 32]));
    let strategy = prop::collection::vec(op_strategy(), 1..40);
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for _ in 0..300 {
        let ops = strategy.new_tree(&mut runner).unwrap().current();
        let mut writer = Store::new(PARTITIONS);
        let mut ids = Ids(1_000);
        for op in &ops {
            let known: BTreeMap<StateKey, ActionState> =
                dump(&writer.index).into_iter().map(|(k, (s, _))| (k, s)).collect();
            for step in common::ops::resolve_all(op, &known, &mut ids) {
                let before = writer.records().len();
                apply(&mut writer, &step);
                let records = writer.records();
                let new = &records[before..];
                let audit = new.iter().find_map(|r| match r {
                    LogRecord::Audit(a) => Some(a),
                    _ => None,
                });
                if let Some(audit) = audit
                    && new.iter().filter(|r| !matches!(r, LogRecord::Upsert(_))).count() > 1
                {
                    *seen.entry(audit.reason.name().to_owned()).or_default() += 1;
                    if new.len() > 3 {
                        *seen.entry("four records or more".into()).or_default() += 1;
                    }
                }
            }
        }
    }
    for kind in [
        "miss:occurrence_conflict",
        "miss:root_changed",
        "miss:absent",
        "producer_replaced",
        "operator",
        "four records or more",
    ] {
        assert!(seen.get(kind).copied().unwrap_or(0) >= 50, "{kind} cut {:?} times: {seen:?}", seen.get(kind));
    }
}
