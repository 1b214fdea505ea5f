//! Model test: random operation sequences run against the real index and against a naive
//! reference that computes every lookup rule of docs/design.md (section 4) directly, by scanning
//! all states. After every step the two must agree on decisions, removed states and reasons,
//! divergence details, the full content, statistics and covering offsets.
#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use actionstate_core::codec::{self, Peeked};
use actionstate_core::{
    ActionState, AuditDetail, EventId, Fingerprint, InvalidationReason, KeyId, LogRecord, MissReason, Position,
    Progress, StateKey, Trigger,
};
use actionstate_index::{Decision, Index, Probe, Recorded};
use common::ops::{Ids, OPERATOR_TEXT, Op, Short, Step, op_strategy, short_key};
use common::{Dump, dump, invariants, key, removed};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use std::collections::{BTreeMap, BTreeSet};

/// Partitions of the simulated log (a key's partition is `KeyId::partition`).
const PARTITIONS: u32 = 3;

/// Divergence as compared: reason and detail, with recorded fingerprints sorted.
type Divergence = Option<(InvalidationReason, AuditDetail)>;

/// One indexed state of the reference.
#[derive(Clone, Debug)]
struct RefEntry {
    state: ActionState,
    position: Position,
    bytes: u64,
}

/// The reference: a flat map of states, every rule computed by scanning all of it.
#[derive(Clone, Debug, Default)]
struct Reference {
    states: BTreeMap<StateKey, RefEntry>,
    /// Per state an invalidation removed while its round is live: how many times, and where
    /// the record the first removal removed lived (its incarnation, and the pin that keeps
    /// every covering marker at or before that record).
    invalidated: BTreeMap<StateKey, (u32, Position)>,
}

/// What the reference decided.
#[derive(Clone, Debug, PartialEq)]
enum RefDecision {
    Hit(Box<ActionState>),
    Miss(MissReason),
}

fn same_round(a: &StateKey, key: &KeyId, seq: u64) -> bool {
    a.key == *key && a.seq == seq
}

impl Reference {
    /// Removes `sk` for an invalidation, counting the removal when it was indexed.
    fn invalidate(&mut self, sk: &StateKey) {
        if let Some(e) = self.states.remove(sk) {
            self.invalidated.entry(*sk).or_insert((0, e.position)).0 += 1;
        }
    }

    /// States of round `seq` of `key`.
    fn round(&self, key: &KeyId, seq: u64) -> Vec<&ActionState> {
        self.states.values().map(|e| &e.state).filter(|s| same_round(&s.key, key, seq)).collect()
    }

    /// The round's producer evidence: output ids of its completed states.
    fn produced(&self, key: &KeyId, seq: u64) -> BTreeSet<EventId> {
        self.round(key, seq)
            .into_iter()
            .filter(|s| s.is_completed())
            .flat_map(|s| s.outputs().iter().map(|e| e.id))
            .collect()
    }

    /// The input fingerprints the round's states were derived from.
    fn inputs(&self, key: &KeyId, seq: u64) -> BTreeSet<Fingerprint> {
        self.round(key, seq).into_iter().map(|s| s.input).collect()
    }

    /// Indexed states of the round of `sk` that descend from it: states whose trigger names
    /// `sk` as producer (whatever outputs its record holds now), their children, and so on,
    /// through indexed states only (a fixpoint over all states).
    fn descendants(&self, sk: &StateKey) -> BTreeSet<StateKey> {
        let mut found: BTreeSet<StateKey> = BTreeSet::new();
        loop {
            let before = found.len();
            for e in self.states.values() {
                let s = &e.state;
                if !same_round(&s.key, &sk.key, sk.seq) || found.contains(&s.key) {
                    continue;
                }
                if let Trigger::Emitted { producer, .. } = &s.trigger
                    && (producer == sk || found.contains(producer))
                {
                    found.insert(s.key);
                }
            }
            if found.len() == before {
                return found;
            }
        }
    }

    /// Removes every state of `key` whose round is after `seq` (or at it, if `inclusive`).
    fn remove_later(&mut self, key: &KeyId, seq: u64, inclusive: bool) -> Vec<StateKey> {
        let gone: Vec<StateKey> = self
            .states
            .keys()
            .filter(|k| k.key == *key && (k.seq > seq || (inclusive && k.seq == seq)))
            .copied()
            .collect();
        for k in &gone {
            self.invalidate(k);
        }
        gone
    }

    /// Lookup rules 1 and 2 (docs/design.md).
    fn lookup(&mut self, probe: &Probe<'_>) -> (RefDecision, Vec<(StateKey, InvalidationReason)>, Divergence) {
        let sk = probe.key;
        if let Some(e) = self.states.get(&sk) {
            let recorded = e.state.trigger_event;
            if self.produced(&sk.key, sk.seq).contains(&recorded) && probe.event != recorded {
                let reason = InvalidationReason::Miss(MissReason::OccurrenceConflict);
                let mut gone = vec![sk];
                gone.extend(self.descendants(&sk));
                for k in &gone {
                    self.invalidate(k);
                }
                gone.extend(self.remove_later(&sk.key, sk.seq, false));
                return (
                    RefDecision::Miss(MissReason::OccurrenceConflict),
                    gone.into_iter().map(|k| (k, reason.clone())).collect(),
                    Some((reason, AuditDetail::OccurrenceConflict { recorded, current: probe.event })),
                );
            }
            return (RefDecision::Hit(Box::new(e.state.clone())), Vec::new(), None);
        }
        let inputs = self.inputs(&sk.key, sk.seq);
        if probe.trigger.is_input() && inputs.iter().any(|fp| *fp != probe.input) {
            let reason = InvalidationReason::Miss(MissReason::RootChanged);
            let gone = self.remove_later(&sk.key, sk.seq, true);
            return (
                RefDecision::Miss(MissReason::RootChanged),
                gone.into_iter().map(|k| (k, reason.clone())).collect(),
                Some((
                    reason,
                    AuditDetail::RootChanged { recorded: inputs.into_iter().collect(), current: probe.input },
                )),
            );
        }
        let reason = InvalidationReason::Miss(MissReason::Absent);
        let gone = self.remove_later(&sk.key, sk.seq, false);
        let divergence = (!gone.is_empty()).then_some((reason.clone(), AuditDetail::Absent));
        (RefDecision::Miss(MissReason::Absent), gone.into_iter().map(|k| (k, reason.clone())).collect(), divergence)
    }

    /// Lookup rule 4 (docs/design.md): an upsert replacing completed evidence by a record that
    /// is not completed or has other output ids invalidates the state's descendants.
    fn upsert(
        &mut self,
        state: ActionState,
        position: Position,
        bytes: u64,
    ) -> (Vec<(StateKey, InvalidationReason)>, Divergence) {
        let sk = state.key;
        let mut gone = Vec::new();
        let mut divergence = None;
        if let Some(old) = self.states.remove(&sk) {
            let old_ids: Vec<EventId> = old.state.outputs().iter().map(|e| e.id).collect();
            let new_ids: Vec<EventId> = state.outputs().iter().map(|e| e.id).collect();
            if old.state.is_completed() && (!state.is_completed() || old_ids != new_ids) {
                let reason = InvalidationReason::ProducerReplaced;
                for d in self.descendants(&sk) {
                    self.invalidate(&d);
                    gone.push((d, reason.clone()));
                }
                divergence = Some((reason, AuditDetail::ProducerReplaced { producer: sk }));
            }
        }
        self.states.insert(sk, RefEntry { state, position, bytes });
        (gone, divergence)
    }

    /// An operator's invalidation: every state of the key's rounds from `from_seq` on, with
    /// its audit whether or not it removed anything.
    fn operator(&mut self, key: &KeyId, from_seq: u64) -> (Vec<(StateKey, InvalidationReason)>, Divergence) {
        let reason = InvalidationReason::Operator { text: OPERATOR_TEXT.to_owned() };
        let gone = self.remove_later(key, from_seq, true);
        (gone.into_iter().map(|k| (k, reason.clone())).collect(), Some((reason, AuditDetail::Operator)))
    }

    /// A tombstone removes exactly the named state.
    fn delete(&mut self, sk: &StateKey) {
        self.invalidate(sk);
    }

    /// Removes rounds `<= upto` of `key`.
    fn prune(&mut self, key: &KeyId, upto: u64) -> usize {
        let gone: Vec<StateKey> = self.states.keys().filter(|k| k.key == *key && k.seq <= upto).copied().collect();
        for k in &gone {
            self.states.remove(k);
        }
        self.invalidated.retain(|k, _| !(k.key == *key && k.seq <= upto));
        gone.len()
    }

    fn dump(&self) -> Dump {
        self.states.iter().map(|(k, e)| (*k, (e.state.clone(), e.position))).collect()
    }

    fn counts(&self) -> (usize, usize, usize, u64) {
        let keys: BTreeSet<KeyId> = self.states.keys().map(|k| k.key).collect();
        let rounds: BTreeSet<(KeyId, u64)> = self.states.keys().map(|k| (k.key, k.seq)).collect();
        let bytes = self.states.values().map(|e| e.bytes).sum();
        (keys.len(), rounds.len(), self.states.len(), bytes)
    }

    fn covering(&self, end: &[u64]) -> Vec<u64> {
        (0u32..)
            .zip(end)
            .map(|(p, e)| {
                let pins = self.invalidated.values().map(|(_, at)| at);
                self.states
                    .values()
                    .map(|x| &x.position)
                    .chain(pins)
                    .filter(|at| at.partition == p)
                    .map(|at| at.offset)
                    .min()
                    .map_or(*e, |o| o.min(*e))
            })
            .collect()
    }

    fn rounds_of(&self, key: &KeyId) -> Vec<(u64, Vec<ActionState>)> {
        let mut out: BTreeMap<u64, Vec<ActionState>> = BTreeMap::new();
        for e in self.states.values().filter(|e| e.state.key.key == *key) {
            out.entry(e.state.key.seq).or_default().push(e.state.clone());
        }
        out.into_iter().collect()
    }
}

fn normalize(div: Divergence) -> Divergence {
    div.map(|(r, d)| match d {
        AuditDetail::RootChanged { mut recorded, current } => {
            recorded.sort();
            (r, AuditDetail::RootChanged { recorded, current })
        }
        d => (r, d),
    })
}

fn real_decision(d: &Decision) -> RefDecision {
    match d {
        Decision::Hit(s) => RefDecision::Hit(Box::new(ActionState::clone(&s.state().unwrap()))),
        Decision::Miss(r) => RefDecision::Miss(*r),
    }
}

/// Bytes of the `n`-th record: deterministic, varied.
fn record_bytes(n: u64) -> u64 {
    40 + (n * 37) % 400
}

/// The index's estimated overhead per state beyond the record bytes, as it reports it.
fn overhead_per_state() -> u64 {
    let mut index = Index::new();
    let s = common::done(
        key(0),
        0,
        &common::action("a"),
        Trigger::Input,
        &common::input(1, 0),
        common::input_fp(0),
        Vec::new(),
    );
    index.apply(LogRecord::Upsert(s), common::at(0), 0);
    index.stats().estimated_bytes
}

/// Runs one operation sequence, comparing after every step.
fn run(ops: &[Op]) -> Result<(), TestCaseError> {
    let mut log = LogState { end: vec![0u64; PARTITIONS as usize], records: 0, per_state: overhead_per_state() };
    let mut index = Index::new();
    let mut reference = Reference::default();
    let mut ids = Ids(1_000);
    let mut trace: Vec<String> = Vec::new();

    for op in ops {
        let known: BTreeMap<StateKey, ActionState> =
            reference.states.iter().map(|(k, e)| (*k, e.state.clone())).collect();
        for step in common::ops::resolve_all(op, &known, &mut ids) {
            trace.push(Short(&step).to_string());
            check_step(&mut index, &mut reference, &step, &mut log, &trace)?;
        }
    }
    Ok(())
}

/// The simulated log's bookkeeping while a sequence runs.
#[derive(Debug)]
struct LogState {
    end: Vec<u64>,
    records: u64,
    per_state: u64,
}

/// Runs one step on both sides and compares everything.
// Long: one comparison of the index with its model per kind of step; the arms share what is compared.
fn check_step(
    index: &mut Index,
    reference: &mut Reference,
    step: &Step,
    log: &mut LogState,
    trace: &[String],
) -> Result<(), TestCaseError> {
    let context = || trace.join("\n  ");
    let end = &mut log.end;

    match step {
        Step::Upsert(state) => {
            let p = state.key.key.partition(PARTITIONS);
            let offset = end[p as usize];
            end[p as usize] += 1;
            log.records += 1;
            // Every fifth record carries a lower bound instead of its exact offset.
            let position = Position { partition: p, offset, exact: !log.records.is_multiple_of(5) };
            let bytes = record_bytes(log.records);
            let (want_removed, want_div) = reference.upsert(state.clone(), position, bytes);
            // Every other record is indexed as a rebuild indexes it: kept encoded with the
            // evidence `peek` read, so decoded and encoded states meet in the same rounds.
            let inv = if log.records.is_multiple_of(2) {
                let wire = codec::encode(&LogRecord::Upsert(state.clone())).unwrap();
                let Peeked::Upsert(evidence) = codec::peek(&wire.key, &wire.value).unwrap() else {
                    panic!("an upsert peeked as another record");
                };
                let recorded = Recorded::encoded(evidence, wire.value.into_boxed_slice(), position);
                prop_assert!(matches!(recorded, Recorded::Encoded(_)));
                index.upsert(recorded, position, usize::try_from(bytes).unwrap())
            } else {
                index.apply(LogRecord::Upsert(state.clone()), position, usize::try_from(bytes).unwrap())
            };
            let mut want_removed = want_removed;
            want_removed.sort_by_key(|(k, _)| *k);
            prop_assert_eq!(removed(&inv), want_removed, "upsert removed\n  {}", context());
            prop_assert_eq!(
                normalize(inv.divergence.clone()),
                normalize(want_div),
                "upsert divergence\n  {}",
                context()
            );
            prop_assert_eq!(
                index.get(&state.key).map(|s| ActionState::clone(&s.state().unwrap())),
                Some(state.clone())
            );
            prop_assert_eq!(index.position(&state.key), Some(position));
        }
        Step::Lookup { key: sk, trigger, event, input, .. } => {
            let probe = Probe { key: *sk, trigger, event: *event, input: *input };
            let (explained, explained_div, explained_n) = index.explain(&probe);
            let (want, mut want_removed, want_div) = reference.lookup(&probe);
            let got = index.lookup(&probe);
            want_removed.sort_by_key(|(k, _)| *k);
            prop_assert_eq!(real_decision(&got.decision), want, "decision of {}\n  {}", short_key(sk), context());
            prop_assert_eq!(removed(&got.invalidation), want_removed, "lookup removed\n  {}", context());
            prop_assert_eq!(
                normalize(got.invalidation.divergence.clone()),
                normalize(want_div),
                "lookup divergence\n  {}",
                context()
            );
            prop_assert_eq!(
                real_decision(&explained),
                real_decision(&got.decision),
                "explain decision\n  {}",
                context()
            );
            prop_assert_eq!(
                normalize(explained_div),
                normalize(got.invalidation.divergence.clone()),
                "explain divergence\n  {}",
                context()
            );
            prop_assert_eq!(explained_n, got.invalidation.removed.len(), "explain count\n  {}", context());
        }
        Step::Prune { key: k, upto } => {
            let want = reference.prune(k, *upto);
            prop_assert_eq!(index.prune(k, *upto), want, "pruned\n  {}", context());
        }
        Step::Operator { key: k, from_seq } => {
            let (mut want_removed, want_div) = reference.operator(k, *from_seq);
            let inv = index.invalidate_from(k, *from_seq, OPERATOR_TEXT.to_owned());
            want_removed.sort_by_key(|(k, _)| *k);
            prop_assert_eq!(removed(&inv), want_removed, "operator removed\n  {}", context());
            prop_assert_eq!(inv.divergence, want_div, "operator divergence\n  {}", context());
            prop_assert!(
                index.rounds_of(k).iter().all(|(seq, _)| seq < from_seq),
                "rounds from {} remain\n  {}",
                from_seq,
                context()
            );
        }
        Step::Cut { lookup, keep } => {
            // The crashed writer decided on its own copy of the index and logged a prefix of
            // the records of what it removed; this index replays that prefix. Any non-empty
            // prefix must leave what the whole invalidation leaves, as the reference does.
            let (sk, records) = match lookup.as_ref() {
                Step::Lookup { key: sk, trigger, event, input, .. } => {
                    let probe = Probe { key: *sk, trigger, event: *event, input: *input };
                    let records = index.clone().lookup(&probe).invalidation.records(sk, None);
                    if !records.is_empty() {
                        reference.lookup(&probe);
                    }
                    (*sk, records)
                }
                Step::Operator { key: k, from_seq } => {
                    let sk = StateKey::round(*k, *from_seq);
                    let inv = index.clone().invalidate_from(k, *from_seq, OPERATOR_TEXT.to_owned());
                    reference.operator(k, *from_seq);
                    (sk, inv.records(&sk, None))
                }
                other => panic!("a cut wraps a lookup or an operator's invalidation, not {other:?}"),
            };
            if !records.is_empty() {
                let p = sk.key.partition(PARTITIONS);
                let n = records.len();
                for record in records.into_iter().take(1 + keep % n) {
                    let position = Position { partition: p, offset: end[p as usize], exact: true };
                    end[p as usize] += 1;
                    index.apply(record, position, 64);
                }
            }
        }
        Step::Delete(sk) => {
            let p = sk.key.partition(PARTITIONS);
            let position = Position { partition: p, offset: end[p as usize], exact: true };
            end[p as usize] += 1;
            reference.delete(sk);
            let inv = index.apply(
                LogRecord::Delete { key: *sk, reason: InvalidationReason::Miss(MissReason::Absent) },
                position,
                64,
            );
            prop_assert!(inv.is_empty(), "a tombstone reported an invalidation");
            prop_assert!(index.get(sk).is_none());
        }
        Step::Nothing => {}
    }

    // Whole-index comparison after every step.
    prop_assert_eq!(invariants(index), Ok(()), "invariants after\n  {}", context());
    let got = dump(index);
    let want = reference.dump();
    if got != want {
        let extra: Vec<String> = got.keys().filter(|k| !want.contains_key(k)).map(short_key).collect();
        let missing: Vec<String> = want.keys().filter(|k| !got.contains_key(k)).map(short_key).collect();
        return Err(TestCaseError::fail(format!(
            "content differs: extra {extra:?}, missing {missing:?}, \
                 or a state/position differs\n  {}",
            context()
        )));
    }
    let stats = index.stats();
    let (keys, rounds, states, bytes) = reference.counts();
    prop_assert_eq!((stats.keys, stats.rounds, stats.states), (keys, rounds, states), "stats\n  {}", context());
    prop_assert_eq!(stats.estimated_bytes, bytes + states as u64 * log.per_state, "estimated bytes\n  {}", context());
    prop_assert_eq!(index.covering_offsets(end), reference.covering(end), "covering offsets\n  {}", context());
    prop_assert_eq!(stats.invalidated, reference.invalidated.len(), "invalidated states\n  {}", context());
    for (sk, (count, _)) in &reference.invalidated {
        prop_assert_eq!(index.incarnation(sk), *count, "incarnation of {}\n  {}", short_key(sk), context());
    }
    if let Some((k, _)) = step.round() {
        let got: Vec<(u64, Vec<ActionState>)> = index
            .rounds_of(&k)
            .into_iter()
            .map(|(s, v)| (s, v.iter().map(|x| ActionState::clone(&x.state().unwrap())).collect()))
            .collect();
        let want = reference.rounds_of(&k);
        prop_assert_eq!(index.last_seq(&k), want.last().map(|(s, _)| *s), "last_seq\n  {}", context());
        prop_assert_eq!(got, want, "rounds_of\n  {}", context());
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(2_000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"))), ..ProptestConfig::default() })]

    #[test]
    fn index_agrees_with_reference_model(ops in prop::collection::vec(op_strategy(), 1..80)) {
        run(&ops)?;
    }
}

/// The reference itself must see every kind of decision and removal over the generated
/// sequences, or the model test would compare little.
// Long: the table of every decision and removal the generated sequences must reach, read whole.
#[test]
fn generated_sequences_exercise_every_rule() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

    let mut runner = TestRunner::new_with_rng(Config::default(), TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]));
    let strategy = prop::collection::vec(op_strategy(), 1..80);
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut keys_touched: BTreeSet<KeyId> = BTreeSet::new();
    for _ in 0..600 {
        let ops = strategy.new_tree(&mut runner).unwrap().current();
        let mut reference = Reference::default();
        let mut ids = Ids(1_000);
        for op in &ops {
            let known: BTreeMap<StateKey, ActionState> =
                reference.states.iter().map(|(k, e)| (*k, e.state.clone())).collect();
            for step in common::ops::resolve_all(op, &known, &mut ids) {
                if let Some((k, _)) = step.round() {
                    keys_touched.insert(k);
                }
                match step {
                    Step::Upsert(s) => {
                        let kind = match (&s.trigger, &s.progress) {
                            (_, Progress::Pending { .. }) => "put pending",
                            (Trigger::Input, _) => "put root",
                            (Trigger::Bootstrap { .. }, _) => "put bootstrap",
                            (Trigger::Emitted { .. }, _) => "put child",
                        };
                        *seen.entry(kind.into()).or_default() += 1;
                        let old_outputs = reference.states.get(&s.key).map(|e| e.state.outputs().len());
                        let (gone, div) = reference.upsert(s, common::at(0), 1);
                        let beyond = |k: &StateKey| {
                            let t = known.get(k).map(|c| &c.trigger);
                            matches!(t, Some(Trigger::Emitted { index, .. })
                            if old_outputs.is_some_and(|n| *index as usize >= n))
                        };
                        if gone.iter().any(|(k, _)| beyond(k)) {
                            *seen.entry("producer replaced removed beyond its outputs".into()).or_default() += 1;
                        }
                        if div.is_some() {
                            *seen.entry("producer replaced".into()).or_default() += 1;
                        }
                        if !gone.is_empty() {
                            *seen.entry("producer replaced removed".into()).or_default() += 1;
                        }
                    }
                    Step::Lookup { key: sk, trigger, event, input, .. } => {
                        let probe = Probe { key: sk, trigger: &trigger, event, input };
                        let (d, gone, _) = reference.lookup(&probe);
                        let name = match d {
                            RefDecision::Hit(_) => "hit".to_string(),
                            RefDecision::Miss(r) => format!("miss {r}"),
                        };
                        if !gone.is_empty() {
                            *seen.entry(format!("{name} removed")).or_default() += 1;
                        }
                        if gone.iter().any(|(k, _)| k.seq == sk.seq && *k != sk) {
                            *seen.entry(format!("{name} removed in round")).or_default() += 1;
                        }
                        if gone.iter().any(|(k, _)| k.seq > sk.seq) {
                            *seen.entry(format!("{name} removed later")).or_default() += 1;
                        }
                        *seen.entry(name).or_default() += 1;
                    }
                    Step::Prune { key: k, upto } => {
                        if reference.prune(&k, upto) > 0 {
                            *seen.entry("prune removed".into()).or_default() += 1;
                        }
                    }
                    Step::Operator { key: k, from_seq } => {
                        let (gone, _) = reference.operator(&k, from_seq);
                        *seen.entry("operator".into()).or_default() += 1;
                        if !gone.is_empty() {
                            *seen.entry("operator removed".into()).or_default() += 1;
                        }
                        if gone.iter().any(|(g, _)| g.seq > from_seq) {
                            *seen.entry("operator removed later".into()).or_default() += 1;
                        }
                    }
                    Step::Cut { lookup, .. } => match *lookup {
                        Step::Lookup { key: sk, trigger, event, input, .. } => {
                            let probe = Probe { key: sk, trigger: &trigger, event, input };
                            if !reference.lookup(&probe).1.is_empty() {
                                *seen.entry("cut invalidation".into()).or_default() += 1;
                            }
                        }
                        Step::Operator { key: k, from_seq } if !reference.operator(&k, from_seq).0.is_empty() => {
                            *seen.entry("cut operator invalidation".into()).or_default() += 1;
                        }
                        _ => {}
                    },
                    Step::Delete(sk) => {
                        let present = reference.states.contains_key(&sk);
                        reference.delete(&sk);
                        let name = if present { "delete" } else { "delete missing" };
                        *seen.entry(name.into()).or_default() += 1;
                    }
                    Step::Nothing => {}
                }
            }
        }
    }
    for kind in [
        "put pending",
        "put root",
        "put bootstrap",
        "put child",
        "producer replaced",
        "producer replaced removed",
        "producer replaced removed beyond its outputs",
        "hit",
        "miss absent",
        "miss absent removed",
        "miss root_changed",
        "miss root_changed removed",
        "miss occurrence_conflict",
        "miss occurrence_conflict removed",
        "miss occurrence_conflict removed in round",
        "miss occurrence_conflict removed later",
        "miss root_changed removed in round",
        "miss root_changed removed later",
        "miss absent removed later",
        "prune removed",
        "delete",
        "delete missing",
        "cut invalidation",
        "operator",
        "operator removed",
        "operator removed later",
        "cut operator invalidation",
    ] {
        assert!(
            seen.get(kind).copied().unwrap_or(0) >= 20,
            "{kind} seen {:?} times in the generated sequences: {seen:?}",
            seen.get(kind)
        );
    }
    assert!(keys_touched.len() >= 50, "only {} keys touched", keys_touched.len());
}
