//! Random operations on an index, as a store driven by a runtime would issue them.
//!
//! An [`Op`] is generated without knowing the index; it names existing states by a pick number
//! that is resolved against the states known at the time it runs ([`resolve`]), which turns it
//! into a concrete [`Step`].

use super::{input, input_fp, journal, key, memory_write, output};
use actionstate_core::{ActionId, ActionState, Event, EventId, Fingerprint, KeyId, Progress, StateKey, Trigger};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::fmt;

/// Number of business keys operations may touch.
pub(crate) const KEYS: u8 = 56;
/// Keys most operations land on, so that operations interact.
pub(crate) const HOT_KEYS: u8 = 4;

/// How the trigger of a new state (or probe) comes about.
#[derive(Clone, Debug)]
pub(crate) enum Trig {
    /// A root input event.
    Input,
    /// A bootstrap event with label `b0` or `b1`.
    Bootstrap(u8),
    /// Output `index` of an existing completed state (the child lives in its round).
    Child { producer: usize, index: u8 },
    /// Names an existing state as producer with an output index it may not have: in the
    /// producer's round beyond its outputs (`same_round`), or in the op's own key and round.
    Foreign { producer: usize, index: u8, same_round: bool },
}

/// The trigger event id a lookup of an existing state presents.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Id {
    /// The id recorded in the state.
    Recorded,
    /// A new id (a re-minted event, a restored input).
    Fresh,
    /// The id its producer currently records at the trigger's output index.
    ProducerNow,
}

/// How a re-index replaces an existing state's record.
#[derive(Clone, Debug)]
pub(crate) enum Reindex {
    /// Same completion and output ids (a completed state gets another memory write; a pending
    /// one another journaled call).
    SameEvidence,
    /// Completed with new outputs (fresh ids, these attribute values).
    NewOutputs(Vec<u8>),
    /// Pending again.
    Pending,
}

/// One random operation.
#[derive(Clone, Debug)]
pub(crate) enum Op {
    /// Upsert a new state: pending (`outputs: None`) or completed with outputs of these
    /// attribute values (equal values are identical-attribute outputs).
    Put { key: u8, seq: u64, action: u8, trig: Trig, input: u8, outputs: Option<Vec<u8>>, fresh_id: bool },
    /// Upsert a whole round's cascade at once: a completed root with `fanout` outputs
    /// (identical attributes or not), each output's handler completed with one output, and so
    /// on for `depth` levels; the last level emits nothing.
    Cascade { key: u8, seq: u64, input: u8, fanout: u8, depth: u8, identical: bool },
    /// Look up an existing state again.
    Lookup { pick: usize, id: Id, input: Option<u8> },
    /// Look up an existing emitted state (a child) again.
    LookupChild { pick: usize, id: Id },
    /// A root lookup in the round of an existing state (a replayed or changed input).
    RootLookup { pick: usize, action: u8, input: u8 },
    /// A lookup of a state that may or may not exist.
    LookupNew { key: u8, seq: u64, action: u8, trig: Trig, input: u8 },
    /// A lookup that misses in `back` rounds before an existing state's round, with the
    /// round's own input or another one.
    Invalidate { pick: usize, back: u64, input: Option<u8> },
    /// Prune around an existing state's round.
    Prune { pick: usize, delta: i8 },
    /// Prune any key.
    PruneKey { key: u8, upto: u64 },
    /// A tombstone for an existing state.
    Delete { pick: usize },
    /// A tombstone for a producer alone (its children stay), then the producer indexed again
    /// with outputs of these attribute values.
    Rewrite { pick: usize, outputs: Vec<u8> },
    /// A tombstone for a state that is not indexed.
    DeleteMissing { key: u8, seq: u64, action: u8 },
    /// An upsert that replaces an existing state's record.
    Reindex { pick: usize, how: Reindex },
    /// An operator's invalidation of the rounds from `back` rounds before an existing state's
    /// round on.
    Operator { pick: usize, back: u64 },
    /// An operator's invalidation of any key's rounds from `from_seq` on.
    OperatorKey { key: u8, from_seq: u64 },
    /// A lookup (one of the lookup operations above) or an operator's invalidation whose
    /// invalidation reaches the log only up to record `keep` (modulo the number of its
    /// records, at least one) before its writer crashes; the index is then what a rebuild of
    /// that log holds.
    Cut { lookup: Box<Op>, keep: u8 },
}

/// The text of the operator's invalidations the operations make.
pub(crate) const OPERATOR_TEXT: &str = "repaired by an operator";

/// A resolved operation.
#[derive(Clone, Debug)]
pub(crate) enum Step {
    Upsert(ActionState),
    Lookup {
        key: StateKey,
        action: ActionId,
        trigger: Trigger,
        event: EventId,
        input: Fingerprint,
    },
    Prune {
        key: KeyId,
        upto: u64,
    },
    Delete(StateKey),
    /// An operator's invalidation of every round of `key` from `from_seq` on.
    Operator {
        key: KeyId,
        from_seq: u64,
    },
    /// A lookup (a [`Step::Lookup`]) or an operator's invalidation (a [`Step::Operator`])
    /// whose invalidation is logged only up to its `keep`-th record (modulo their number, at
    /// least one) before the writer crashes.
    Cut {
        lookup: Box<Step>,
        keep: usize,
    },
    Nothing,
}

impl Step {
    /// The business key and round the step touches, if any (prune touches rounds up to its
    /// bound).
    pub(crate) fn round(&self) -> Option<(KeyId, u64)> {
        match self {
            Step::Upsert(s) => Some((s.key.key, s.key.seq)),
            Step::Lookup { key, .. } | Step::Delete(key) => Some((key.key, key.seq)),
            Step::Prune { key, upto } => Some((*key, *upto)),
            Step::Operator { key, from_seq } => Some((*key, *from_seq)),
            Step::Cut { lookup, .. } => lookup.round(),
            Step::Nothing => None,
        }
    }
}

/// Event id source: a counter, never random.
#[derive(Debug)]
pub(crate) struct Ids(pub(crate) u128);

impl Ids {
    pub(crate) fn next(&mut self) -> EventId {
        self.0 += 1;
        EventId(self.0)
    }
}

fn seq_strategy() -> BoxedStrategy<u64> {
    prop_oneof![
        8 => 0u64..6,
        1 => Just(u64::MAX - 1),
        1 => Just(u64::MAX),
    ]
    .boxed()
}

fn key_strategy() -> BoxedStrategy<u8> {
    prop_oneof![4 => 0u8..HOT_KEYS, 1 => 0u8..KEYS].boxed()
}

fn trig_strategy() -> BoxedStrategy<Trig> {
    prop_oneof![
        3 => Just(Trig::Input),
        1 => (0u8..2).prop_map(Trig::Bootstrap),
        5 => (0usize..1000, 0u8..4).prop_map(|(producer, index)| Trig::Child { producer, index }),
        2 => (0usize..1000, 0u8..4, any::<bool>())
            .prop_map(|(producer, index, same_round)| Trig::Foreign { producer, index, same_round }),
    ]
    .boxed()
}

fn outputs_strategy() -> BoxedStrategy<Vec<u8>> {
    prop::collection::vec(0u8..3, 0..4).boxed()
}

/// One random operation.
pub(crate) fn op_strategy() -> BoxedStrategy<Op> {
    prop_oneof![
        30 => plain_op_strategy(),
        2 => (lookup_strategy(), any::<u8>()).prop_map(|(lookup, keep)| Op::Cut { lookup: Box::new(lookup), keep }),
    ]
    .boxed()
}

/// A lookup that may invalidate: of an existing state (a conflict when its event changed), of
/// a changed root, or one that misses before an existing state's round.
fn lookup_strategy() -> BoxedStrategy<Op> {
    let pick = 0usize..1000;
    prop_oneof![
        2 => (pick.clone(), prop_oneof![Just(Id::Fresh), Just(Id::ProducerNow), Just(Id::Recorded)])
            .prop_map(|(pick, id)| Op::LookupChild { pick, id }),
        1 => (pick.clone(), Just(Id::Fresh)).prop_map(|(pick, id)| Op::Lookup { pick, id, input: None }),
        2 => (pick.clone(), 0u8..4, 0u8..3).prop_map(|(pick, action, input)| Op::RootLookup { pick, action, input }),
        2 => (pick.clone(), 0u64..3, prop::option::weighted(0.3, 0u8..3))
            .prop_map(|(pick, back, input)| Op::Invalidate { pick, back, input }),
        2 => (pick, 0u64..3).prop_map(|(pick, back)| Op::Operator { pick, back }),
    ]
    .boxed()
}

/// One random operation other than [`Op::Cut`].
// Long: one weighted arm per kind of operation.
fn plain_op_strategy() -> BoxedStrategy<Op> {
    let pick = 0usize..1000;
    prop_oneof![
        8 => (
            key_strategy(),
            seq_strategy(),
            0u8..3,
            trig_strategy(),
            0u8..3,
            prop::option::weighted(0.8, outputs_strategy()),
            prop::bool::weighted(0.2),
        )
            .prop_map(|(key, seq, action, trig, input, outputs, fresh_id)| Op::Put {
                key,
                seq,
                action,
                trig,
                input,
                outputs,
                fresh_id,
            }),
        3 => (key_strategy(), seq_strategy(), 0u8..3, 1u8..4, 1u8..4, any::<bool>()).prop_map(
            |(key, seq, input, fanout, depth, identical)| Op::Cascade {
                key,
                seq,
                input,
                fanout,
                depth,
                identical,
            }
        ),
        4 => (
            pick.clone(),
            prop_oneof![
                3 => Just(Id::Recorded),
                1 => Just(Id::Fresh),
                2 => Just(Id::ProducerNow),
            ],
            prop::option::weighted(0.2, 0u8..3),
        )
            .prop_map(|(pick, id, input)| Op::Lookup { pick, id, input }),
        3 => (
            pick.clone(),
            prop_oneof![
                1 => Just(Id::Recorded),
                2 => Just(Id::Fresh),
                1 => Just(Id::ProducerNow),
            ],
        )
            .prop_map(|(pick, id)| Op::LookupChild { pick, id }),
        3 => (pick.clone(), 0u8..4, 0u8..3)
            .prop_map(|(pick, action, input)| Op::RootLookup { pick, action, input }),
        2 => (key_strategy(), seq_strategy(), 0u8..3, trig_strategy(), 0u8..3).prop_map(
            |(key, seq, action, trig, input)| Op::LookupNew {
                key,
                seq,
                action,
                trig,
                input,
            }
        ),
        2 => (pick.clone(), 0u64..3, prop::option::weighted(0.3, 0u8..3))
            .prop_map(|(pick, back, input)| Op::Invalidate { pick, back, input }),
        1 => (pick.clone(), -2i8..2).prop_map(|(pick, delta)| Op::Prune { pick, delta }),
        1 => (key_strategy(), seq_strategy()).prop_map(|(key, upto)| Op::PruneKey { key, upto }),
        1 => pick.clone().prop_map(|pick| Op::Delete { pick }),
        1 => prop_oneof![
            (pick.clone(), 0u64..3).prop_map(|(pick, back)| Op::Operator { pick, back }),
            (key_strategy(), seq_strategy()).prop_map(|(key, from_seq)| Op::OperatorKey { key, from_seq }),
        ],
        2 => (pick.clone(), outputs_strategy()).prop_map(|(pick, outputs)| Op::Rewrite { pick, outputs }),
        1 => (key_strategy(), seq_strategy(), 0u8..3)
            .prop_map(|(key, seq, action)| Op::DeleteMissing { key, seq, action }),
        3 => (
            pick,
            prop_oneof![
                2 => Just(Reindex::SameEvidence),
                2 => outputs_strategy().prop_map(Reindex::NewOutputs),
                1 => Just(Reindex::Pending),
            ],
        )
            .prop_map(|(pick, how)| Op::Reindex { pick, how }),
    ]
    .boxed()
}

fn action_of(n: u8) -> ActionId {
    ActionId::new(format!("action-{n}"))
}

fn nth(
    known: &BTreeMap<StateKey, ActionState>,
    pick: usize,
    filter: impl Fn(&ActionState) -> bool,
) -> Option<&ActionState> {
    let n = known.values().filter(|s| filter(s)).count();
    if n == 0 {
        return None;
    }
    known.values().filter(|s| filter(s)).nth(pick % n)
}

fn outputs(values: &[u8], ids: &mut Ids) -> Vec<Event> {
    values
        .iter()
        .map(|v| {
            let id = ids.next();
            output(id.0, i64::from(*v))
        })
        .collect()
}

/// The key, trigger, trigger event and round input of a new state or probe.
fn trigger_of(
    known: &BTreeMap<StateKey, ActionState>,
    ids: &mut Ids,
    (key_n, seq): (u8, u64),
    trig: &Trig,
    input_v: u8,
    fresh_id: bool,
) -> (KeyId, u64, Trigger, Event, Fingerprint) {
    let k = key(usize::from(key_n));
    let round_input = input_fp(i64::from(input_v));
    match trig {
        Trig::Input => {
            let ev = input(ids.next().0, i64::from(input_v));
            let fp = ev.fingerprint();
            (k, seq, Trigger::Input, ev, fp)
        }
        Trig::Bootstrap(label) => {
            let ev = super::bootstrap(ids.next().0, if *label == 0 { "b0" } else { "b1" });
            (k, seq, Trigger::Bootstrap { label: format!("b{label}") }, ev, round_input)
        }
        Trig::Child { producer, index } => match nth(known, *producer, |s| !s.outputs().is_empty()) {
            Some(p) => {
                let i = usize::from(*index) % p.outputs().len();
                let mut ev = p.outputs()[i].clone();
                if fresh_id {
                    ev.id = ids.next();
                }
                let trigger = Trigger::Emitted { producer: p.key, index: u32::try_from(i).unwrap_or(0) };
                (p.key.key, p.key.seq, trigger, ev, p.input)
            }
            None => trigger_of(known, ids, (key_n, seq), &Trig::Input, input_v, fresh_id),
        },
        Trig::Foreign { producer, index, same_round } => match nth(known, *producer, |_| true) {
            Some(p) if *same_round => {
                let i = u32::try_from(p.outputs().len()).unwrap_or(0) + u32::from(*index);
                let ev = output(ids.next().0, i64::from(*index));
                let trigger = Trigger::Emitted { producer: p.key, index: i };
                (p.key.key, p.key.seq, trigger, ev, p.input)
            }
            Some(p) => {
                let ev = output(ids.next().0, i64::from(*index));
                let trigger = Trigger::Emitted { producer: p.key, index: u32::from(*index) };
                (k, seq, trigger, ev, round_input)
            }
            None => trigger_of(known, ids, (key_n, seq), &Trig::Input, input_v, fresh_id),
        },
    }
}

/// A lookup of an existing state, presenting the trigger event id `id` and the round input
/// `input` (the recorded one when `None`).
fn lookup_again(
    s: &ActionState,
    known: &BTreeMap<StateKey, ActionState>,
    ids: &mut Ids,
    id: Id,
    input: Option<u8>,
) -> Step {
    let event = match id {
        Id::Recorded => s.trigger_event,
        Id::Fresh => ids.next(),
        Id::ProducerNow => match &s.trigger {
            Trigger::Emitted { producer, index } => {
                known.get(producer).and_then(|p| p.outputs().get(*index as usize)).map_or(s.trigger_event, |e| e.id)
            }
            _ => s.trigger_event,
        },
    };
    Step::Lookup {
        key: s.key,
        action: s.action.clone(),
        trigger: s.trigger.clone(),
        event,
        input: input.map_or(s.input, |v| input_fp(i64::from(v))),
    }
}

/// Turns an operation into concrete steps against the states known now (one step, except
/// for a cascade).
pub(crate) fn resolve_all(op: &Op, known: &BTreeMap<StateKey, ActionState>, ids: &mut Ids) -> Vec<Step> {
    if let Op::Rewrite { pick, outputs: values } = op {
        let Some(p) = nth(known, *pick, |s| !s.outputs().is_empty()) else {
            return Vec::new();
        };
        let mut again = p.clone();
        again.progress = Progress::Completed { outputs: outputs(values, ids), memory: Vec::new() };
        return vec![Step::Delete(p.key), Step::Upsert(again)];
    }
    let Op::Cascade { key: k, seq, input: v, fanout, depth, identical } = op else {
        return vec![resolve(op, known, ids)];
    };
    let k = key(usize::from(*k));
    let root_event = input(ids.next().0, i64::from(*v));
    let round_input = root_event.fingerprint();
    let mut steps = Vec::new();
    // (event, trigger, level) still to handle.
    let mut queue = vec![(root_event, Trigger::Input, 0u8)];
    while let Some((ev, trigger, level)) = queue.pop() {
        let action = action_of(level);
        let n = match level {
            0 => *fanout,
            l if l < *depth => 1,
            _ => 0,
        };
        let outs: Vec<Event> = (0..n)
            .map(|i| {
                let v = if *identical { 0 } else { i64::from(i) };
                output(ids.next().0, v)
            })
            .collect();
        let state = ActionState {
            label: None,
            trace: None,
            key: StateKey::new(k, *seq, &action, &ev, &trigger),
            action,
            trigger,
            trigger_event: ev.id,
            input: round_input,
            progress: Progress::Completed { outputs: outs.clone(), memory: Vec::new() },
        };
        for (i, out) in (0u32..).zip(outs) {
            queue.push((out, Trigger::Emitted { producer: state.key, index: i }, level + 1));
        }
        steps.push(Step::Upsert(state));
    }
    steps
}

/// Turns an operation into a concrete step against the states known now.
// Long: one match arm per operation of the model.
fn resolve(op: &Op, known: &BTreeMap<StateKey, ActionState>, ids: &mut Ids) -> Step {
    match op {
        Op::Cascade { .. } | Op::Rewrite { .. } => Step::Nothing,
        Op::Cut { lookup, keep } => match resolve(lookup, known, ids) {
            step @ (Step::Lookup { .. } | Step::Operator { .. }) => {
                Step::Cut { lookup: Box::new(step), keep: usize::from(*keep) }
            }
            other => other,
        },
        Op::Operator { pick, back } => match nth(known, *pick, |_| true) {
            Some(s) => Step::Operator { key: s.key.key, from_seq: s.key.seq.saturating_sub(*back) },
            None => Step::Nothing,
        },
        Op::OperatorKey { key: k, from_seq } => Step::Operator { key: key(usize::from(*k)), from_seq: *from_seq },
        Op::Put { key, seq, action, trig, input, outputs: outs, fresh_id } => {
            let (k, s, trigger, ev, round_input) = trigger_of(known, ids, (*key, *seq), trig, *input, *fresh_id);
            let action = action_of(*action);
            let progress = match outs {
                Some(values) => Progress::Completed { outputs: outputs(values, ids), memory: Vec::new() },
                None => Progress::Pending { calls: journal(1) },
            };
            Step::Upsert(ActionState {
                label: None,
                trace: None,
                key: StateKey::new(k, s, &action, &ev, &trigger),
                action,
                trigger,
                trigger_event: ev.id,
                input: round_input,
                progress,
            })
        }
        Op::Lookup { pick, id, input } => {
            let Some(s) = nth(known, *pick, |_| true) else {
                return Step::Nothing;
            };
            lookup_again(s, known, ids, *id, *input)
        }
        Op::LookupChild { pick, id } => {
            let Some(s) = nth(known, *pick, |s| s.trigger.producer().is_some()) else {
                return Step::Nothing;
            };
            lookup_again(s, known, ids, *id, None)
        }
        Op::RootLookup { pick, action, input: v } => {
            let Some(s) = nth(known, *pick, |_| true) else {
                return Step::Nothing;
            };
            let ev = input(ids.next().0, i64::from(*v));
            let action = action_of(*action);
            Step::Lookup {
                key: StateKey::new(s.key.key, s.key.seq, &action, &ev, &Trigger::Input),
                action,
                trigger: Trigger::Input,
                event: ev.id,
                input: ev.fingerprint(),
            }
        }
        Op::LookupNew { key, seq, action, trig, input } => {
            let (k, s, trigger, ev, round_input) = trigger_of(known, ids, (*key, *seq), trig, *input, false);
            let action = action_of(*action);
            Step::Lookup {
                key: StateKey::new(k, s, &action, &ev, &trigger),
                action,
                trigger,
                event: ev.id,
                input: round_input,
            }
        }
        Op::Invalidate { pick, back, input: v } => {
            let Some(s) = nth(known, *pick, |_| true) else {
                return Step::Nothing;
            };
            // The round's own input (when it is one of the tests' inputs) or another one.
            let v = v.map(i64::from).unwrap_or_else(|| (0..3).find(|v| input_fp(*v) == s.input).unwrap_or_default());
            let ev = input(ids.next().0, v);
            let action = ActionId::new("never-recorded");
            let seq = s.key.seq.saturating_sub(*back);
            Step::Lookup {
                key: StateKey::new(s.key.key, seq, &action, &ev, &Trigger::Input),
                action,
                trigger: Trigger::Input,
                event: ev.id,
                input: ev.fingerprint(),
            }
        }
        Op::Prune { pick, delta } => {
            let Some(s) = nth(known, *pick, |_| true) else {
                return Step::Nothing;
            };
            let d = u64::from(delta.unsigned_abs());
            let upto = if *delta >= 0 { s.key.seq.saturating_add(d) } else { s.key.seq.saturating_sub(d) };
            Step::Prune { key: s.key.key, upto }
        }
        Op::PruneKey { key: k, upto } => Step::Prune { key: key(usize::from(*k)), upto: *upto },
        Op::Delete { pick } => match nth(known, *pick, |_| true) {
            Some(s) => Step::Delete(s.key),
            None => Step::Nothing,
        },
        Op::DeleteMissing { key: k, seq, action } => {
            let ev = input(0, -1);
            let sk = StateKey::new(
                key(usize::from(*k)),
                *seq,
                &ActionId::versioned(format!("action-{action}"), "never-recorded"),
                &ev,
                &Trigger::Input,
            );
            Step::Delete(sk)
        }
        Op::Reindex { pick, how } => {
            let Some(s) = nth(known, *pick, |_| true) else {
                return Step::Nothing;
            };
            let mut next = s.clone();
            next.progress = match (how, &s.progress) {
                (Reindex::SameEvidence, Progress::Completed { outputs, memory }) => {
                    let mut memory = memory.clone();
                    memory.push(memory_write(ids.next().0 as u64));
                    Progress::Completed { outputs: outputs.clone(), memory }
                }
                (Reindex::SameEvidence, Progress::Pending { calls }) => {
                    Progress::Pending { calls: journal(calls.len() + 1) }
                }
                (Reindex::NewOutputs(values), _) => {
                    Progress::Completed { outputs: outputs(values, ids), memory: Vec::new() }
                }
                (Reindex::Pending, _) => Progress::Pending { calls: journal(2) },
            };
            Step::Upsert(next)
        }
    }
}

/// Short, readable names for failure traces.
pub(crate) struct Short<'a>(pub(crate) &'a Step);

/// A business key of the tests' universe as `k3`.
pub(crate) fn key_name(k: &KeyId) -> String {
    (0..usize::from(KEYS)).find(|i| key(*i) == *k).map_or_else(|| format!("{k}"), |i| format!("k{i}"))
}

/// A state key as `k3/s1/<occurrence>.<fingerprint>.<action>` with short digests.
pub(crate) fn short_key(sk: &StateKey) -> String {
    format!(
        "{}/s{}/{:02x}{:02x}.{:02x}{:02x}.{:02x}{:02x}",
        key_name(&sk.key),
        sk.seq,
        sk.occurrence.0[0],
        sk.occurrence.0[1],
        sk.fingerprint.0[0],
        sk.fingerprint.0[1],
        sk.action.0[0],
        sk.action.0[1],
    )
}

fn trigger_name(t: &Trigger) -> String {
    match t {
        Trigger::Input => "input".into(),
        Trigger::Bootstrap { label } => format!("bootstrap {label}"),
        Trigger::Emitted { producer, index } => {
            format!("output {index} of {}", short_key(producer))
        }
    }
}

impl fmt::Display for Short<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Step::Upsert(s) => {
                let progress = match &s.progress {
                    Progress::Pending { calls } => format!("pending({} calls)", calls.len()),
                    Progress::Completed { outputs, .. } => {
                        format!("completed(outputs {:?})", outputs.iter().map(|e| e.id.0).collect::<Vec<_>>())
                    }
                };
                write!(
                    f,
                    "upsert {} {} on {} (event {}) {progress}",
                    short_key(&s.key),
                    s.action,
                    trigger_name(&s.trigger),
                    s.trigger_event.0
                )
            }
            Step::Lookup { key, action, trigger, event, .. } => {
                write!(f, "lookup {} {action} on {} (event {})", short_key(key), trigger_name(trigger), event.0)
            }
            Step::Prune { key, upto } => write!(f, "prune {} upto {upto}", key_name(key)),
            Step::Delete(sk) => write!(f, "delete {}", short_key(sk)),
            Step::Operator { key, from_seq } => {
                write!(f, "operator invalidates {} from round {from_seq}", key_name(key))
            }
            Step::Cut { lookup, keep } => write!(f, "{} (its invalidation cut after record {keep})", Short(lookup)),
            Step::Nothing => f.write_str("nothing"),
        }
    }
}
