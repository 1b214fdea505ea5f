//! Named scenarios of the lookup rules (docs/design.md, section 4), driven the way a runtime
//! drives the store: a small agent processes keyed inputs in rounds (fan-out, cascades,
//! bootstrap events), looks every action up before running it, reuses completed states, and
//! logs every invalidation.
#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use actionstate_core::{
    ActionState, AuditDetail, Event, EventId, InvalidationReason, KeyId, LogRecord, MissReason, Position, Progress,
    StateKey, Trigger,
};
use actionstate_index::{Decision, Index, Invalidation, Probe};
use common::{Checkpoint, Store, action, at, dump, input, invariants, key, removed};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// The agent: which actions handle an event type.
fn handlers(event_type: &str) -> &'static [&'static str] {
    match event_type {
        "input" => &["plan", "log"],
        "task" => &["tool"],
        "result" => &["summarize"],
        "boot" => &["greet"],
        "greeting" => &["remember"],
        _ => &[],
    }
}

/// What an action emits when it runs: (event type, attribute) pairs.
fn emits(name: &str, trigger_event: &Event) -> Vec<(&'static str, String)> {
    match name {
        // Fan-out: two tasks with identical attributes.
        "plan" => vec![("task", "same".into()), ("task", "same".into())],
        "tool" => vec![("result", format!("{:?}", trigger_event.attributes))],
        "greet" => vec![("greeting", "hello".into())],
        _ => Vec::new(),
    }
}

/// What one round did.
#[derive(Debug, Default)]
struct Report {
    hits: Vec<StateKey>,
    misses: Vec<(StateKey, MissReason)>,
    executed: Vec<StateKey>,
    invalidated: Vec<(StateKey, InvalidationReason)>,
}

impl Report {
    fn all_reused(&self) -> bool {
        self.misses.is_empty() && self.executed.is_empty() && self.invalidated.is_empty()
    }
}

/// A small runtime over the simulated store, with a ledger of executed actions.
#[derive(Debug)]
struct Runtime {
    store: Store,
    next_id: u128,
    /// How many times each state's action ran.
    ledger: BTreeMap<StateKey, usize>,
}

impl Runtime {
    fn new() -> Self {
        Runtime { store: Store::new(1), next_id: 1_000, ledger: BTreeMap::new() }
    }

    fn fresh(&mut self) -> EventId {
        self.next_id += 1;
        EventId(self.next_id)
    }

    /// Processes the input with attribute `v` as round `seq` of `k`: input handlers first,
    /// then the bootstrap event minted for this attempt, then cascades.
    fn run_round(&mut self, k: KeyId, seq: u64, v: i64) -> Report {
        let root = input(self.fresh().0, v);
        let round_input = root.fingerprint();
        let boot = common::bootstrap(self.fresh().0, "start");
        let mut queue: VecDeque<(Event, Trigger)> = VecDeque::new();
        queue.push_back((root, Trigger::Input));
        queue.push_back((boot, Trigger::Bootstrap { label: "start".into() }));
        let mut report = Report::default();
        while let Some((ev, trigger)) = queue.pop_front() {
            for name in handlers(&ev.event_type) {
                let a = action(name);
                let sk = StateKey::new(k, seq, &a, &ev, &trigger);
                let found = self.store.lookup(&Probe { key: sk, trigger: &trigger, event: ev.id, input: round_input });
                report.invalidated.extend(found.invalidation.removed.iter().map(|r| (r.key, r.reason.clone())));
                let outputs = match found.decision {
                    Decision::Hit(s) if s.is_completed() => {
                        report.hits.push(sk);
                        s.state().unwrap().outputs().to_vec()
                    }
                    other => {
                        if let Decision::Miss(r) = other {
                            report.misses.push((sk, r));
                        }
                        *self.ledger.entry(sk).or_default() += 1;
                        report.executed.push(sk);
                        let outputs: Vec<Event> =
                            emits(name, &ev).into_iter().map(|(t, v)| common::event(self.fresh().0, t, v)).collect();
                        let state = common::done(k, seq, &a, trigger.clone(), &ev, round_input, outputs.clone());
                        let inv = self.store.put(state);
                        report.invalidated.extend(removed(&inv));
                        outputs
                    }
                };
                for (i, out) in (0u32..).zip(outputs) {
                    queue.push_back((out, Trigger::Emitted { producer: sk, index: i }));
                }
            }
        }
        report
    }

    /// A checkpoint that completed rounds `..= upto` of each given key.
    fn checkpoint(&self, completed: &[(KeyId, u64)]) -> Checkpoint {
        self.store.checkpoint(completed.iter().copied().collect())
    }

    /// Crash and restore: the index is rebuilt from the log only.
    fn restore(&mut self, cp: &Checkpoint) {
        self.store.index = self.store.restore(cp);
    }

    /// The state of `name` in round `seq` of `k` triggered through `trigger` by an event with
    /// this type and attribute, if indexed.
    fn states_of(&self, k: KeyId, seq: u64, name: &str) -> Vec<ActionState> {
        let digest = action(name).digest();
        self.store
            .index
            .rounds_of(&k)
            .into_iter()
            .filter(|(s, _)| *s == seq)
            .flat_map(|(_, states)| states)
            .filter(|s| s.key().action == digest)
            .map(|s| ActionState::clone(&s.state().unwrap()))
            .collect()
    }

    fn round_keys(&self, k: KeyId, seq: u64) -> BTreeSet<StateKey> {
        self.store
            .index
            .rounds_of(&k)
            .into_iter()
            .filter(|(s, _)| *s == seq)
            .flat_map(|(_, states)| states.into_iter().map(|s| *s.key()))
            .collect()
    }
}

/// States per round in the agent above: plan, log, two tools, two summaries, greet, remember.
const STATES_PER_ROUND: usize = 8;

#[test]
fn fan_out_and_cascades_are_reused_without_invalidation() {
    let k = key(1);
    let mut rt = Runtime::new();
    let first = rt.run_round(k, 0, 0);
    assert_eq!(first.executed.len(), STATES_PER_ROUND);
    let cp = rt.checkpoint(&[(k, 0)]);
    rt.store.complete(&cp);
    for seq in 1..4 {
        let r = rt.run_round(k, seq, i64::try_from(seq).unwrap());
        assert_eq!(r.executed.len(), STATES_PER_ROUND, "round {seq}");
        assert!(r.invalidated.is_empty(), "round {seq}: {:?}", r.invalidated);
    }
    let writer = dump(&rt.store.index);
    let ledger = rt.ledger.clone();
    let tombstones = rt.store.tombstones.len();
    assert_eq!(tombstones, 0);

    // Crash, restore, replay the inputs after the checkpoint (with new event ids).
    rt.restore(&cp);
    assert_eq!(dump(&rt.store.index), writer);
    // A checkpoint taken before anything is re-run keeps the recovered work.
    let again = rt.checkpoint(&[(k, 0)]);
    assert!(again.marker >= cp.marker, "markers only move forward");
    assert_eq!(again.marker, vec![u64::try_from(STATES_PER_ROUND).unwrap()]);
    rt.restore(&again);
    assert_eq!(dump(&rt.store.index), writer);

    for seq in 1..4 {
        let r = rt.run_round(k, seq, i64::try_from(seq).unwrap());
        assert!(r.all_reused(), "round {seq} after restore: {r:?}");
        assert_eq!(r.hits.len(), STATES_PER_ROUND, "round {seq}");
    }
    assert_eq!(rt.ledger, ledger, "an acknowledged completion ran again");
    assert_eq!(rt.store.tombstones.len(), tombstones);
    assert_eq!(dump(&rt.store.index), writer);
    assert_eq!(invariants(&rt.store.index), Ok(()));
}

#[test]
fn changed_input_invalidates_its_round_and_later_rounds() {
    let (k, other) = (key(1), key(2));
    let mut rt = Runtime::new();
    for seq in 0..4 {
        rt.run_round(k, seq, i64::try_from(seq).unwrap());
        rt.run_round(other, seq, i64::try_from(seq).unwrap());
    }
    let other_before = rt.store.index.rounds_of(&other);
    let later: BTreeSet<StateKey> = (1..4).flat_map(|s| rt.round_keys(k, s)).collect();
    assert_eq!(later.len(), 3 * STATES_PER_ROUND);
    let round0 = rt.round_keys(k, 0);

    // Nothing completed yet: restore from the first record.
    let cp = rt.checkpoint(&[]);
    rt.restore(&cp);
    assert!(rt.run_round(k, 0, 0).all_reused());

    // Only a root lookup detects a changed input: another trigger presenting the new input
    // in that round is merely absent.
    let changed = input(5_000_000, 99);
    let boot = common::bootstrap(5_000_001, "start");
    let trigger = Trigger::Bootstrap { label: "start".into() };
    let not_root = Probe {
        key: StateKey::new(k, 1, &action("never"), &boot, &trigger),
        trigger: &trigger,
        event: boot.id,
        input: changed.fingerprint(),
    };
    let (decision, _, n) = rt.store.index.explain(&not_root);
    assert!(matches!(decision, Decision::Miss(MissReason::Absent)));
    assert_eq!(n, 2 * STATES_PER_ROUND);

    // Round 1's input changed.
    let r = rt.run_round(k, 1, 99);
    let (first, reason) = r.misses[0];
    assert_eq!(reason, MissReason::RootChanged);
    assert_eq!(first.seq, 1);
    let got: BTreeSet<StateKey> = r.invalidated.iter().map(|(k, _)| *k).collect();
    assert_eq!(got, later, "removed exactly round 1 and every later round");
    assert!(r.invalidated.iter().all(|(_, why)| *why == InvalidationReason::Miss(MissReason::RootChanged)));
    assert_eq!(r.invalidated.len(), later.len(), "each state removed once");
    assert_eq!(r.executed.len(), STATES_PER_ROUND, "the changed round re-runs");
    assert!(r.hits.is_empty());
    // The earlier round and the other key are untouched.
    assert_eq!(rt.round_keys(k, 0), round0);
    assert_eq!(rt.store.index.rounds_of(&other), other_before);
    // The later rounds run again: nothing left to reuse, nothing more to invalidate.
    let r2 = rt.run_round(k, 2, 2);
    assert!(r2.hits.is_empty() && r2.invalidated.is_empty());
    assert_eq!(r2.executed.len(), STATES_PER_ROUND);
    // The log reproduces it.
    assert_eq!(dump(&rt.store.replay(&[0])), dump(&rt.store.index));
}

#[test]
fn changed_root_child_with_identical_attributes_is_not_reused() {
    let k = key(1);
    let mut rt = Runtime::new();
    rt.run_round(k, 0, 0);
    rt.run_round(k, 1, 1);
    let old_tools = rt.states_of(k, 1, "tool");
    let old_greet = rt.states_of(k, 1, "greet");
    assert_eq!((old_tools.len(), old_greet.len()), (2, 1));
    let cp = rt.checkpoint(&[(k, 0)]);
    rt.restore(&cp);

    // The input of round 1 changed; the planner's tasks and the bootstrap greeting carry
    // exactly the attributes they carried before.
    let r = rt.run_round(k, 1, 7);
    assert_eq!(r.misses[0].1, MissReason::RootChanged);
    let new_tools = rt.states_of(k, 1, "tool");
    assert_eq!(new_tools.len(), 2);
    for (old, new) in old_tools.iter().zip(&new_tools) {
        assert_eq!(old.key.fingerprint, new.key.fingerprint, "identical attributes");
        assert!(!new_tools.iter().any(|n| n == old), "old tool state reused");
        assert!(rt.ledger.contains_key(&new.key) && r.executed.contains(&new.key));
    }
    // The bootstrap child even has the very same state key, and still is not reused.
    let new_greet = rt.states_of(k, 1, "greet");
    assert_eq!(new_greet[0].key, old_greet[0].key);
    assert_eq!(rt.ledger[&old_greet[0].key], 2, "greet ran again");
    assert_ne!(new_greet[0].outputs()[0].id, old_greet[0].outputs()[0].id);
    assert!(r.hits.is_empty(), "nothing of the changed round is reused: {r:?}");
    // Everything recorded for the old input was invalidated at the first root lookup.
    assert_eq!(r.invalidated.len(), STATES_PER_ROUND);
}

#[test]
fn regenerated_bootstrap_children_are_reused_by_fingerprint() {
    let k = key(1);
    let mut rt = Runtime::new();
    rt.run_round(k, 0, 0);
    let greet = rt.states_of(k, 0, "greet").remove(0);
    let remember = rt.states_of(k, 0, "remember").remove(0);
    let cp = rt.checkpoint(&[]);
    let ledger = rt.ledger.clone();
    rt.restore(&cp);

    // The runtime mints the bootstrap event again, with a new id.
    let minted = common::bootstrap(5_000_000, "start");
    assert_ne!(minted.id, greet.trigger_event);
    let probe = common::probe(&greet, minted.id, greet.input);
    let (decision, divergence, n) = rt.store.index.explain(&probe);
    assert!(matches!(decision, Decision::Hit(ref s) if *s.state().unwrap() == greet));
    assert_eq!((divergence, n), (None, 0));

    let r = rt.run_round(k, 0, 0);
    assert!(r.all_reused(), "{r:?}");
    assert!(r.hits.contains(&greet.key) && r.hits.contains(&remember.key));
    assert_eq!(rt.ledger, ledger);
    // The bootstrap child's child was reached through the reused output id.
    assert_eq!(remember.trigger_event, greet.outputs()[0].id);
}

#[test]
fn occurrence_conflict_invalidates_state_descendants_and_later_rounds() {
    let k = key(1);
    let mut rt = Runtime::new();
    for seq in 0..3 {
        rt.run_round(k, seq, i64::try_from(seq).unwrap());
    }
    let plan = rt.states_of(k, 1, "plan").remove(0);
    let tools = rt.states_of(k, 1, "tool");
    let tool0 = tools.iter().find(|t| t.trigger == common::emitted(&plan, 0)).unwrap().clone();
    let summary0: Vec<StateKey> = rt
        .states_of(k, 1, "summarize")
        .into_iter()
        .filter(|s| s.trigger.producer() == Some(&tool0.key))
        .map(|s| s.key)
        .collect();
    assert_eq!(summary0.len(), 1);
    let round1 = rt.round_keys(k, 1);
    let round0 = rt.round_keys(k, 0);
    let round2 = rt.round_keys(k, 2);

    // The tool's trigger shows up with another id while the planner's evidence holds the
    // recorded one: another occurrence.
    let other = rt.fresh();
    let found = rt.store.lookup(&common::probe(&tool0, other, tool0.input));
    assert!(matches!(found.decision, Decision::Miss(MissReason::OccurrenceConflict)));
    let reason = InvalidationReason::Miss(MissReason::OccurrenceConflict);
    let mut want: Vec<(StateKey, InvalidationReason)> =
        [tool0.key].into_iter().chain(summary0).chain(round2).map(|k| (k, reason.clone())).collect();
    want.sort_by_key(|(k, _)| *k);
    assert_eq!(removed(&found.invalidation), want);
    assert_eq!(
        found.invalidation.divergence,
        Some((reason, AuditDetail::OccurrenceConflict { recorded: tool0.trigger_event, current: other }))
    );
    // The rest of round 1 (planner, the other task's branch, bootstrap branch) and round 0
    // stay.
    let left: BTreeSet<StateKey> = round1.iter().filter(|k| !want.iter().any(|(w, _)| w == *k)).copied().collect();
    assert_eq!(left.len(), STATES_PER_ROUND - 2);
    assert_eq!(rt.round_keys(k, 1), left);
    assert_eq!(rt.round_keys(k, 0), round0);
    assert!(rt.round_keys(k, 2).is_empty());
    assert_eq!(rt.store.index.last_seq(&k), Some(1));
    // The sibling still hits with its recorded trigger event.
    let tool1 = tools.iter().find(|t| t.key != tool0.key).unwrap();
    let found = rt.store.lookup(&common::probe(tool1, tool1.trigger_event, tool1.input));
    assert_eq!(found.decision.hit().map(|s| *s.key()), Some(tool1.key));
    assert!(found.invalidation.is_empty());
    // The tombstones make replay agree.
    assert_eq!(dump(&rt.store.replay(&[0])), dump(&rt.store.index));
    assert_eq!(invariants(&rt.store.index), Ok(()));
}

#[test]
fn identical_attribute_outputs_get_distinct_states_and_both_are_reused() {
    let k = key(1);
    let mut rt = Runtime::new();
    rt.run_round(k, 0, 0);
    let plan = rt.states_of(k, 0, "plan").remove(0);
    assert_eq!(plan.outputs()[0].fingerprint(), plan.outputs()[1].fingerprint());
    let tools = rt.states_of(k, 0, "tool");
    assert_eq!(tools.len(), 2, "two states, not one overwritten by the other");
    assert_ne!(tools[0].key, tools[1].key);
    assert_eq!(tools[0].key.fingerprint, tools[1].key.fingerprint);
    assert_ne!(tools[0].outputs()[0].id, tools[1].outputs()[0].id);

    let cp = rt.checkpoint(&[]);
    let ledger = rt.ledger.clone();
    rt.restore(&cp);
    for t in &tools {
        let index = usize::try_from(match t.trigger {
            Trigger::Emitted { index, .. } => index,
            _ => unreachable!(),
        })
        .unwrap();
        let ev = common::out_of(&plan, index);
        let found = rt.store.lookup(&common::probe(t, ev.id, plan.input));
        let hit = found.decision.hit().unwrap();
        assert_eq!(*hit.state().unwrap(), *t, "each occurrence reuses its own state");
        assert!(found.invalidation.is_empty());
    }
    let r = rt.run_round(k, 0, 0);
    assert!(r.all_reused(), "{r:?}");
    assert_eq!(rt.ledger, ledger);
}

#[test]
fn replaced_producer_evidence_invalidates_children_at_once() {
    let k = key(1);
    let mut rt = Runtime::new();
    rt.run_round(k, 0, 0);
    rt.run_round(k, 1, 1);
    let plan = rt.states_of(k, 0, "plan").remove(0);
    let descendants: BTreeSet<StateKey> =
        rt.states_of(k, 0, "tool").into_iter().chain(rt.states_of(k, 0, "summarize")).map(|s| s.key).collect();
    assert_eq!(descendants.len(), 4);
    let round1 = rt.round_keys(k, 1);

    // Same evidence (another memory write, same output ids): children stay valid.
    let mut same = plan.clone();
    if let Progress::Completed { memory, .. } = &mut same.progress {
        memory.push(common::memory_write(1));
    }
    assert!(rt.store.put(same).is_empty());
    assert!(descendants.iter().all(|d| rt.store.index.get(d).is_some()));

    // The planner re-ran: new output ids. Its descendants go at once, not at a later lookup.
    let mut rerun = plan.clone();
    let outputs: Vec<Event> = plan.outputs().iter().map(|e| Event { id: rt.fresh(), ..e.clone() }).collect();
    rerun.progress = Progress::Completed { outputs: outputs.clone(), memory: Vec::new() };
    let inv = rt.store.put(rerun.clone());
    let got: BTreeSet<StateKey> = inv.removed.iter().map(|r| r.key).collect();
    assert_eq!(got, descendants);
    assert!(inv.removed.iter().all(|r| r.reason == InvalidationReason::ProducerReplaced));
    assert_eq!(
        inv.divergence,
        Some((InvalidationReason::ProducerReplaced, AuditDetail::ProducerReplaced { producer: plan.key }))
    );
    assert!(descendants.iter().all(|d| rt.store.index.get(d).is_none()));
    assert_eq!(*rt.store.index.get(&plan.key).unwrap().state().unwrap(), rerun);
    // The replacement itself leaves the later round alone.
    assert_eq!(rt.round_keys(k, 1), round1);
    // The new outputs' children would have matched the old ones by fingerprint: now absent
    // (and, absent, they conservatively invalidate the later round).
    let trigger = common::emitted(&plan, 0);
    let tool_key = StateKey::new(k, 0, &action("tool"), &outputs[0], &trigger);
    assert!(descendants.contains(&tool_key));
    let found = rt.store.lookup(&Probe { key: tool_key, trigger: &trigger, event: outputs[0].id, input: plan.input });
    assert!(matches!(found.decision, Decision::Miss(MissReason::Absent)));
    let got: BTreeSet<StateKey> = found.invalidation.removed.iter().map(|r| r.key).collect();
    assert_eq!(got, round1);

    // A completed producer replaced by a pending record also invalidates its children.
    let mut rt = Runtime::new();
    rt.run_round(k, 0, 0);
    let greet = rt.states_of(k, 0, "greet").remove(0);
    let remember = rt.states_of(k, 0, "remember").remove(0);
    let mut again = greet.clone();
    again.progress = Progress::Pending { calls: common::journal(1) };
    let inv = rt.store.put(again);
    assert_eq!(removed(&inv), vec![(remember.key, InvalidationReason::ProducerReplaced)]);
    // Replay reproduces both, from the logged upserts and tombstones.
    assert_eq!(dump(&rt.store.replay(&[0])), dump(&rt.store.index));
}

#[test]
fn children_left_by_a_tombstoned_producer_are_invalidated_when_it_is_replaced() {
    // A tombstone removes only the named state, so a producer's children can outlive its
    // record. When the producer is indexed again and then replaced by a different record,
    // every state its trigger names as producer is a descendant, not only those reached
    // through the outputs of the record being replaced.
    let k = key(1);
    let mut index = Index::new();
    let mut offset = 0;
    let mut apply = |index: &mut Index, record: LogRecord| {
        offset += 1;
        index.apply(record, at(offset), 100)
    };
    let ev = input(1, 0);
    let attrs = [0, 1, 2];
    let plan = common::done(
        k,
        0,
        &action("plan"),
        Trigger::Input,
        &ev,
        ev.fingerprint(),
        attrs.iter().zip(10u128..).map(|(v, id)| common::output(id, *v)).collect(),
    );
    apply(&mut index, LogRecord::Upsert(plan.clone()));
    let children: Vec<ActionState> = (0..3)
        .map(|i| {
            let c = common::done(
                k,
                0,
                &action("tool"),
                common::emitted(&plan, i),
                &plan.outputs()[i as usize],
                ev.fingerprint(),
                Vec::new(),
            );
            apply(&mut index, LogRecord::Upsert(c.clone()));
            c
        })
        .collect();
    let inv =
        apply(&mut index, LogRecord::Delete { key: plan.key, reason: InvalidationReason::Miss(MissReason::Absent) });
    assert!(inv.is_empty());
    assert!(children.iter().all(|c| index.get(&c.key).is_some()));

    // The producer is indexed again with one output, then re-runs with three outputs whose
    // attributes are those of the first record.
    let mut one = plan.clone();
    one.progress = Progress::Completed { outputs: vec![common::output(20, 0)], memory: Vec::new() };
    assert!(apply(&mut index, LogRecord::Upsert(one)).is_empty());
    let mut rerun = plan.clone();
    let outputs: Vec<Event> = attrs.iter().zip(30u128..).map(|(v, id)| common::output(id, *v)).collect();
    rerun.progress = Progress::Completed { outputs: outputs.clone(), memory: Vec::new() };
    let inv = apply(&mut index, LogRecord::Upsert(rerun));
    let want: Vec<(StateKey, InvalidationReason)> = {
        let mut v: Vec<_> = children.iter().map(|c| (c.key, InvalidationReason::ProducerReplaced)).collect();
        v.sort_by_key(|(k, _)| *k);
        v
    };
    assert_eq!(removed(&inv), want, "every child of the replaced producer goes");
    // No stale child matches the new outputs by fingerprint.
    for (i, c) in (0u32..).zip(&children) {
        let trigger = common::emitted(&plan, i);
        let key = StateKey::new(k, 0, &action("tool"), &outputs[i as usize], &trigger);
        assert_eq!(key, c.key, "same attributes, same state key");
        let found = index.lookup(&Probe { key, trigger: &trigger, event: outputs[i as usize].id, input: c.input });
        assert!(found.decision.hit().is_none(), "stale child {i} reused");
    }
    assert_eq!(invariants(&index), Ok(()));
}

#[test]
fn other_keys_are_never_touched() {
    let (a, b) = (key(1), key(2));
    let mut rt = Runtime::new();
    // Identical histories on both keys: same rounds, same inputs, same fingerprints.
    for seq in 0..4 {
        rt.run_round(a, seq, 0);
        rt.run_round(b, seq, 0);
    }
    let b_rounds = |rt: &Runtime| -> Vec<(u64, Vec<ActionState>, Vec<Option<Position>>)> {
        rt.store
            .index
            .rounds_of(&b)
            .into_iter()
            .map(|(s, states)| {
                let positions = states.iter().map(|x| rt.store.index.position(x.key())).collect();
                (s, states.iter().map(|x| ActionState::clone(&x.state().unwrap())).collect(), positions)
            })
            .collect()
    };
    let before = b_rounds(&rt);
    assert_eq!(before.len(), 4);
    let mut all: Vec<Invalidation> = Vec::new();

    // Producer replaced in round 3 of key a.
    let plan3 = rt.states_of(a, 3, "plan").remove(0);
    let mut rerun = plan3.clone();
    rerun.progress = Progress::Completed { outputs: vec![common::output(rt.fresh().0, 5)], memory: Vec::new() };
    all.push(rt.store.put(rerun));
    // Occurrence conflict in round 2.
    let tool2 = rt.states_of(a, 2, "tool").remove(0);
    let ev = rt.fresh();
    all.push(rt.store.lookup(&common::probe(&tool2, ev, tool2.input)).invalidation);
    // Root changed in round 1 (removes everything from round 1 on).
    let r = rt.run_round(a, 1, 42);
    assert_eq!(r.misses[0].1, MissReason::RootChanged);
    // Absent miss in round 0 removes the re-run round 1.
    let plan0 = rt.states_of(a, 0, "plan").remove(0);
    let probe_state = common::done(a, 0, &action("never"), Trigger::Input, &input(1, 0), plan0.input, Vec::new());
    let found = rt.store.lookup(&common::probe(&probe_state, EventId(1), plan0.input));
    assert!(!found.invalidation.removed.is_empty());
    all.push(found.invalidation);
    // A tombstone and a prune.
    rt.store.delete(plan0.key, InvalidationReason::Miss(MissReason::OccurrenceConflict));
    assert!(rt.store.index.prune(&a, 0) > 0);

    for inv in &all {
        assert!(inv.removed.iter().all(|r| r.key.key == a), "{inv:?}");
    }
    assert!(r.invalidated.iter().all(|(k, _)| k.key == a));
    assert!(rt.store.index.rounds_of(&a).is_empty());
    assert_eq!(b_rounds(&rt), before, "key b changed");
    assert_eq!(rt.store.index.stats().keys, 1);
    assert_eq!(invariants(&rt.store.index), Ok(()));
}

/// One root state per round of `seqs`, plus a completed producer with one child in each
/// round: returns the index and, per round, (root, child).
fn rounds_at(seqs: &[u64]) -> (Index, Vec<(ActionState, ActionState)>) {
    let k = key(7);
    let mut index = Index::new();
    let mut out = Vec::new();
    let mut offset = 0;
    let mut apply = |index: &mut Index, s: &ActionState| {
        index.apply(LogRecord::Upsert(s.clone()), at(offset), 100);
        offset += 1;
    };
    for (i, seq) in (0u128..).zip(seqs) {
        let ev = input(100 + i, 0);
        let root = common::done(
            k,
            *seq,
            &action("plan"),
            Trigger::Input,
            &ev,
            ev.fingerprint(),
            vec![common::output(200 + i, 0)],
        );
        let child = common::done(
            k,
            *seq,
            &action("tool"),
            common::emitted(&root, 0),
            &root.outputs()[0],
            ev.fingerprint(),
            Vec::new(),
        );
        apply(&mut index, &root);
        apply(&mut index, &child);
        out.push((root, child));
    }
    (index, out)
}

fn seqs_of(v: &[(StateKey, InvalidationReason)]) -> BTreeSet<u64> {
    v.iter().map(|(k, _)| k.seq).collect()
}

#[test]
fn sequence_bounds_are_exact_at_zero_and_max() {
    let m = u64::MAX;
    let seqs = [0, 1, 2, m - 2, m - 1, m];
    let k = key(7);
    for (i, s) in seqs.iter().copied().enumerate() {
        let later: BTreeSet<u64> = seqs[i + 1..].iter().copied().collect();
        let from: BTreeSet<u64> = seqs[i..].iter().copied().collect();
        let upto: BTreeSet<u64> = seqs[..=i].iter().copied().collect();

        // Absent: exactly the rounds after s.
        let (mut index, rounds) = rounds_at(&seqs);
        let ev = input(1, 0);
        let absent = common::done(k, s, &action("never"), Trigger::Input, &ev, ev.fingerprint(), Vec::new());
        let found = index.lookup(&common::probe(&absent, ev.id, ev.fingerprint()));
        assert!(matches!(found.decision, Decision::Miss(MissReason::Absent)));
        assert_eq!(seqs_of(&removed(&found.invalidation)), later, "absent at {s}");
        assert_eq!(found.invalidation.removed.len(), 2 * later.len());

        // Root changed: the round itself and every later one.
        let (mut index, _) = rounds_at(&seqs);
        let changed = input(2, 1);
        let probe_state =
            common::done(k, s, &action("plan"), Trigger::Input, &changed, changed.fingerprint(), Vec::new());
        let found = index.lookup(&common::probe(&probe_state, changed.id, changed.fingerprint()));
        assert!(matches!(found.decision, Decision::Miss(MissReason::RootChanged)));
        assert_eq!(seqs_of(&removed(&found.invalidation)), from, "root changed at {s}");

        // Conflict on round s's child: the child and every later round.
        let (mut index, _) = rounds_at(&seqs);
        let (root, child) = &rounds[i];
        let found = index.lookup(&common::probe(child, EventId(9_999), root.input));
        assert!(matches!(found.decision, Decision::Miss(MissReason::OccurrenceConflict)));
        let got = removed(&found.invalidation);
        assert!(got.iter().any(|(k, _)| *k == child.key));
        assert!(!got.iter().any(|(k, _)| *k == root.key));
        assert_eq!(got.len(), 1 + 2 * later.len(), "conflict at {s} removed {got:?}");

        // Prune: exactly the rounds up to and including s.
        let (mut index, _) = rounds_at(&seqs);
        assert_eq!(index.prune(&k, s), 2 * upto.len(), "prune at {s}");
        let left: BTreeSet<u64> = index.rounds_of(&k).into_iter().map(|(s, _)| s).collect();
        assert_eq!(left, later, "prune at {s}");
        assert_eq!(index.last_seq(&k), later.last().copied());
        assert_eq!(invariants(&index), Ok(()));
    }
    // Pruning below the first round and at the top of an empty key change nothing.
    let (mut index, _) = rounds_at(&[5, m]);
    assert_eq!(index.prune(&k, 4), 0);
    assert_eq!(index.prune(&key(8), m), 0);
    assert_eq!(index.prune(&k, m), 4);
    assert_eq!(index.stats().keys, 0);
}

#[test]
fn delete_removes_only_the_named_state() {
    let k = key(1);
    let mut rt = Runtime::new();
    rt.run_round(k, 0, 0);
    rt.run_round(k, 1, 1);
    let before = dump(&rt.store.index);
    let plan = rt.states_of(k, 0, "plan").remove(0);

    // Tombstone of a producer with descendants: only the producer goes.
    let inv = rt.store.delete(plan.key, InvalidationReason::Miss(MissReason::OccurrenceConflict));
    assert!(inv.is_empty());
    let mut want = before.clone();
    want.remove(&plan.key);
    assert_eq!(dump(&rt.store.index), want);
    assert!(rt.store.index.position(&plan.key).is_none());
    assert_eq!(rt.store.index.stats().states, before.len() - 1);

    // Tombstone of something never indexed: nothing changes.
    let ghost = StateKey { seq: 5, ..plan.key };
    assert!(rt.store.delete(ghost, InvalidationReason::ProducerReplaced).is_empty());
    assert_eq!(dump(&rt.store.index), want);

    // Deleting every state of round 1 one by one drops the round, and only it.
    for sk in rt.round_keys(k, 1) {
        rt.store.delete(sk, InvalidationReason::Miss(MissReason::Absent));
    }
    assert_eq!(rt.store.index.stats().rounds, 1);
    assert_eq!(rt.store.index.last_seq(&k), Some(0));
    assert_eq!(rt.round_keys(k, 0).len(), STATES_PER_ROUND - 1);
    assert_eq!(invariants(&rt.store.index), Ok(()));
    assert_eq!(dump(&rt.store.replay(&[0])), dump(&rt.store.index));
}

#[test]
fn stats_and_invariants_hold() {
    let mut index = Index::new();
    let empty = index.stats();
    assert_eq!((empty.keys, empty.rounds, empty.states, empty.estimated_bytes), (0, 0, 0, 0));
    assert_eq!(invariants(&index), Ok(()));

    let mut offset = 0u64;
    let mut total_bytes = 0u64;
    for ki in 0..3usize {
        for seq in 0..4u64 {
            let ev = input(u128::from(offset) + 1, 0);
            let root = common::done(
                key(ki),
                seq,
                &action("plan"),
                Trigger::Input,
                &ev,
                ev.fingerprint(),
                vec![common::output(10_000 + u128::from(offset), 0), common::output(20_000 + u128::from(offset), 0)],
            );
            let bytes = 100 + offset;
            index.apply(LogRecord::Upsert(root.clone()), at(offset), usize::try_from(bytes).unwrap());
            total_bytes += bytes;
            offset += 1;
            for i in 0..2 {
                let child = common::done(
                    key(ki),
                    seq,
                    &action("tool"),
                    common::emitted(&root, i),
                    &root.outputs()[i as usize],
                    ev.fingerprint(),
                    Vec::new(),
                );
                index.apply(LogRecord::Upsert(child), at(offset), 50);
                total_bytes += 50;
                offset += 1;
            }
            assert_eq!(invariants(&index), Ok(()));
        }
    }
    let s = index.stats();
    assert_eq!((s.keys, s.rounds, s.states), (3, 12, 36));
    assert!(s.estimated_bytes >= total_bytes);
    let per_state = (s.estimated_bytes - total_bytes) / 36;
    assert_eq!(s.estimated_bytes, total_bytes + 36 * per_state);
    assert_eq!(index.covering_offsets(&[offset]), vec![0]);

    // Prune key 0 up to round 1: two rounds of three states go.
    assert_eq!(index.prune(&key(0), 1), 6);
    let s = index.stats();
    assert_eq!((s.keys, s.rounds, s.states), (3, 10, 30));
    // The oldest live record is now key 0's round 2 root or key 1's round 0 root.
    assert_eq!(index.covering_offsets(&[offset]), vec![6]);
    // Prune all of key 1: one key fewer.
    assert_eq!(index.prune(&key(1), u64::MAX), 12);
    let s = index.stats();
    assert_eq!((s.keys, s.rounds, s.states), (2, 6, 18));
    assert!(s.estimated_bytes < total_bytes + 36 * per_state);
    assert_eq!(invariants(&index), Ok(()));
    assert_eq!(dump(&index).len(), 18);
}

#[test]
fn explain_matches_lookup_without_mutating() {
    let k = key(1);
    let mut rt = Runtime::new();
    for seq in 0..3 {
        rt.run_round(k, seq, 0);
    }
    let plan1 = rt.states_of(k, 1, "plan").remove(0);
    let tool1 = rt.states_of(k, 1, "tool").remove(0);
    let changed = input(77, 5);
    let changed_root = common::done(k, 1, &action("plan"), Trigger::Input, &changed, changed.fingerprint(), Vec::new());
    let absent = common::done(k, 1, &action("never"), Trigger::Input, &input(78, 0), plan1.input, Vec::new());
    let cases: Vec<(&str, Probe<'_>, Option<MissReason>, usize)> = vec![
        ("hit", common::probe(&tool1, tool1.trigger_event, tool1.input), None, 0),
        ("absent", common::probe(&absent, EventId(78), plan1.input), Some(MissReason::Absent), STATES_PER_ROUND),
        (
            "root changed",
            common::probe(&changed_root, changed.id, changed.fingerprint()),
            Some(MissReason::RootChanged),
            2 * STATES_PER_ROUND,
        ),
        (
            "conflict",
            common::probe(&tool1, EventId(79), tool1.input),
            Some(MissReason::OccurrenceConflict),
            2 + STATES_PER_ROUND,
        ),
    ];
    let before = dump(&rt.store.index);
    for (name, probe, want, n) in cases {
        let (decision, divergence, count) = rt.store.index.explain(&probe);
        assert_eq!(dump(&rt.store.index), before, "{name}: explain changed the index");
        assert_eq!(count, n, "{name}");
        let mut scratch = rt.store.index.clone();
        let found = scratch.lookup(&probe);
        match (&decision, &found.decision, want) {
            (Decision::Hit(a), Decision::Hit(b), None) => assert_eq!(a, b, "{name}"),
            (Decision::Miss(a), Decision::Miss(b), Some(w)) => {
                assert_eq!((*a, *b), (w, w), "{name}");
            }
            other => panic!("{name}: {other:?}"),
        }
        assert_eq!(divergence, found.invalidation.divergence, "{name}");
        assert_eq!(count, found.invalidation.removed.len(), "{name}");
    }
}
