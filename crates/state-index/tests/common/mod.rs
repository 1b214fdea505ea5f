//! Helpers shared by the integration tests of `actionstate-index`: deterministic identities,
//! events and states, and a simulated store (an in-memory partitioned log plus the writer's
//! index) that logs every invalidation as tombstones before the key's next write.
#![allow(dead_code, reason = "each test binary uses a different part of the helpers")]

pub(crate) mod ops;

use actionstate_core::{
    ActionId, ActionState, Attributes, CallResult, CallStatus, Event, EventId, Fence, Fingerprint, InvalidationReason,
    KeyId, LogRecord, MemoryOp, MemoryUpdate, Ownership, Position, Progress, StateKey, TaggedBytes, Trigger, Value,
    WireRecord, codec, fence_key_id,
};
use actionstate_index::{Index, Invalidation, Lookup, Probe, allow_scans};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The business key number `i` of the tests' key universe.
pub(crate) fn key(i: usize) -> KeyId {
    KeyId::of(format!("business-key-{i}").as_bytes())
}

/// An unversioned action.
pub(crate) fn action(name: &str) -> ActionId {
    ActionId::new(name)
}

/// An event with a fixed id and one attribute `v`.
pub(crate) fn event(id: u128, event_type: &str, v: impl Into<Value>) -> Event {
    let mut attributes = Attributes::new();
    attributes.insert("v".into(), v.into());
    Event { id: EventId(id), event_type: event_type.into(), attributes }
}

/// A root input event.
pub(crate) fn input(id: u128, v: i64) -> Event {
    event(id, "input", v)
}

/// An output event.
pub(crate) fn output(id: u128, v: i64) -> Event {
    event(id, "out", v)
}

/// A bootstrap event, minted by the runtime on every attempt.
pub(crate) fn bootstrap(id: u128, label: &str) -> Event {
    event(id, "boot", label)
}

/// The fingerprint of the input event with attribute `v` (ids are not part of fingerprints).
pub(crate) fn input_fp(v: i64) -> Fingerprint {
    input(0, v).fingerprint()
}

/// A completed state of `action` triggered by `ev` through `trigger` in round `seq` of `key`.
pub(crate) fn done(
    key: KeyId,
    seq: u64,
    action: &ActionId,
    trigger: Trigger,
    ev: &Event,
    input: Fingerprint,
    outputs: Vec<Event>,
) -> ActionState {
    ActionState {
        label: None,
        trace: None,
        key: StateKey::new(key, seq, action, ev, &trigger),
        action: action.clone(),
        trigger,
        trigger_event: ev.id,
        input,
        progress: Progress::Completed { outputs, memory: Vec::new() },
    }
}

/// A pending state with `calls` journaled durable calls.
pub(crate) fn pending(
    key: KeyId,
    seq: u64,
    action: &ActionId,
    trigger: Trigger,
    ev: &Event,
    input: Fingerprint,
    calls: usize,
) -> ActionState {
    ActionState {
        label: None,
        trace: None,
        key: StateKey::new(key, seq, action, ev, &trigger),
        action: action.clone(),
        trigger,
        trigger_event: ev.id,
        input,
        progress: Progress::Pending { calls: journal(calls) },
    }
}

/// A journal of `n` successful calls.
pub(crate) fn journal(n: usize) -> Vec<CallResult> {
    (0..n)
        .map(|i| CallResult {
            function_id: format!("call-{i}"),
            args_digest: [u8::try_from(i % 256).unwrap_or(0); 32],
            status: CallStatus::Succeeded { result: Vec::new() },
        })
        .collect()
}

/// A memory write, to make two completed records of one state differ without changing
/// their producer evidence.
pub(crate) fn memory_write(n: u64) -> MemoryUpdate {
    MemoryUpdate {
        path: format!("/notes/{n}"),
        op: MemoryOp::Set(TaggedBytes { tag: "le".into(), bytes: n.to_le_bytes().to_vec() }),
    }
}

/// The trigger of output `index` of `producer`.
pub(crate) fn emitted(producer: &ActionState, index: u32) -> Trigger {
    Trigger::Emitted { producer: producer.key, index }
}

/// The output `index` of a completed state.
pub(crate) fn out_of(producer: &ActionState, index: usize) -> Event {
    producer.outputs()[index].clone()
}

/// An exact position in partition 0.
pub(crate) fn at(offset: u64) -> Position {
    Position { partition: 0, offset, exact: true }
}

/// The probe of a state, with the trigger event id and round input given explicitly.
pub(crate) fn probe(state: &ActionState, event: EventId, input: Fingerprint) -> Probe<'_> {
    Probe { key: state.key, trigger: &state.trigger, event, input }
}

/// The whole content of an index, compared by value.
pub(crate) type Dump = BTreeMap<StateKey, (ActionState, Position)>;

/// The index's content by value (opens a scan scope for the duration of the call).
pub(crate) fn dump(index: &Index) -> Dump {
    let _scope = allow_scans();
    index.dump().into_iter().map(|(k, (s, p))| (k, (ActionState::clone(&s.state().unwrap()), p))).collect()
}

/// Checks the index's invariants inside a scan scope.
pub(crate) fn invariants(index: &Index) -> Result<(), String> {
    let _scope = allow_scans();
    index.check_invariants()
}

/// Removed state keys of an invalidation, sorted, with their reasons.
pub(crate) fn removed(inv: &Invalidation) -> Vec<(StateKey, InvalidationReason)> {
    let mut v: Vec<_> = inv.removed.iter().map(|r| (r.key, r.reason.clone())).collect();
    v.sort_by_key(|(k, _)| *k);
    v
}

/// A checkpoint: the covering offsets when it was taken and the last completed round per key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Checkpoint {
    pub(crate) marker: Vec<u64>,
    pub(crate) completed: BTreeMap<KeyId, u64>,
}

/// A simulated store: an in-memory partitioned log of encoded records and the writer's index.
///
/// Every record goes through the real codec; replay decodes what was appended.
#[derive(Debug)]
pub(crate) struct Store {
    pub(crate) log: Vec<Vec<WireRecord>>,
    pub(crate) index: Index,
    /// Every state removed by an invalidation, in the order it was logged.
    pub(crate) tombstones: Vec<(StateKey, InvalidationReason)>,
    /// The owner epoch the writer encodes its records with ([`codec::encode_by`]).
    pub(crate) epoch: u64,
}

impl Store {
    pub(crate) fn new(partitions: u32) -> Self {
        Store {
            log: (0..partitions.max(1)).map(|_| Vec::new()).collect(),
            index: Index::new(),
            tombstones: Vec::new(),
            epoch: 0,
        }
    }

    pub(crate) fn partitions(&self) -> u32 {
        u32::try_from(self.log.len()).unwrap()
    }

    pub(crate) fn end_offsets(&self) -> Vec<u64> {
        self.log.iter().map(|p| p.len() as u64).collect()
    }

    /// Appends one record durably, written with the writer's epoch; returns its position and
    /// encoded size.
    fn append(&mut self, record: &LogRecord) -> (Position, usize) {
        self.append_by(record, self.epoch)
    }

    /// Appends one record written by the owner of epoch `epoch`.
    fn append_by(&mut self, record: &LogRecord, epoch: u64) -> (Position, usize) {
        let wire = codec::encode_by(record, epoch).unwrap();
        let partition = record.key_id().partition(self.partitions());
        let log = &mut self.log[partition as usize];
        let position = Position { partition, offset: log.len() as u64, exact: true };
        let bytes = wire.key.len() + wire.value.len();
        log.push(wire);
        (position, bytes)
    }

    /// Logs what an operation invalidated as the store does ([`Invalidation::records`]): the
    /// audit first, then one tombstone per removed state.
    fn log_invalidation(&mut self, probe: StateKey, inv: &Invalidation) {
        for r in &inv.removed {
            assert_eq!(r.key.key, probe.key, "an invalidation crossed business keys");
            self.tombstones.push((r.key, r.reason.clone()));
        }
        for record in inv.records(&probe, None) {
            self.append(&record);
        }
    }

    /// The put contract: append the upsert, then index it, then log what it invalidated.
    pub(crate) fn put(&mut self, state: ActionState) -> Invalidation {
        let sk = state.key;
        let record = LogRecord::Upsert(state);
        let (position, bytes) = self.append(&record);
        let inv = self.index.apply(record, position, bytes);
        self.log_invalidation(sk, &inv);
        inv
    }

    /// A lookup whose invalidation is logged before anything else is written.
    pub(crate) fn lookup(&mut self, probe: &Probe<'_>) -> Lookup {
        let found = self.index.lookup(probe);
        self.log_invalidation(probe.key, &found.invalidation);
        found
    }

    /// An operator's invalidation of the rounds of `key` from `from_seq` on, logged before
    /// anything else is written (its audit's probe is [`StateKey::round`]).
    pub(crate) fn operator(&mut self, key: KeyId, from_seq: u64, text: &str) -> Invalidation {
        let inv = self.index.invalidate_from(&key, from_seq, text.to_owned());
        self.log_invalidation(StateKey::round(key, from_seq), &inv);
        inv
    }

    /// Appends a fence of `groups` with `epoch`, written by that epoch's owner as a restore
    /// writes it, to each partition of `partitions` (all of them for a restore that completed,
    /// some for one that failed part way); returns where each landed. The writer's index is
    /// left alone: a fence changes what a replay applies, not what the writer holds.
    pub(crate) fn fence(
        &mut self,
        groups: &Ownership,
        epoch: u64,
        partitions: impl IntoIterator<Item = u32>,
    ) -> Vec<Position> {
        let n = self.partitions();
        partitions
            .into_iter()
            .map(|p| {
                let fence = LogRecord::Fence(Fence { key: fence_key_id(p, n), groups: groups.clone(), epoch });
                self.append_by(&fence, epoch).0
            })
            .collect()
    }

    /// Writes a tombstone for one state and applies it.
    pub(crate) fn delete(&mut self, sk: StateKey, reason: InvalidationReason) -> Invalidation {
        let record = LogRecord::Delete { key: sk, reason };
        let (position, bytes) = self.append(&record);
        self.index.apply(record, position, bytes)
    }

    /// The covering marker and the given completed rounds.
    pub(crate) fn checkpoint(&self, completed: BTreeMap<KeyId, u64>) -> Checkpoint {
        Checkpoint { marker: self.index.covering_offsets(&self.end_offsets()), completed }
    }

    /// Completes a checkpoint: prunes the rounds it covers from the writer's index.
    pub(crate) fn complete(&mut self, cp: &Checkpoint) {
        for (k, s) in &cp.completed {
            self.index.prune(k, *s);
        }
    }

    /// A fresh index built by decoding and applying every record from `from` (per partition)
    /// to the end offsets captured now, partition after partition.
    pub(crate) fn replay(&self, from: &[u64]) -> Index {
        let mut index = Index::new();
        for (p, records) in (0u32..).zip(&self.log) {
            let start = usize::try_from(from[p as usize]).unwrap();
            for (offset, wire) in (0u64..).zip(records.iter()).skip(start) {
                let record = codec::decode(&wire.key, &wire.value).unwrap();
                let position = Position { partition: p, offset, exact: true };
                index.apply(record, position, wire.key.len() + wire.value.len());
            }
        }
        index
    }

    /// Restores a checkpoint: replay from its marker, then prune the rounds it completed.
    pub(crate) fn restore(&self, cp: &Checkpoint) -> Index {
        let mut index = self.replay(&cp.marker);
        for (k, s) in &cp.completed {
            index.prune(k, *s);
        }
        index
    }

    /// All records currently in the log, decoded, in partition and offset order.
    pub(crate) fn records(&self) -> Vec<LogRecord> {
        self.log.iter().flatten().map(|w| codec::decode(&w.key, &w.value).unwrap()).collect()
    }
}

/// Compares two hit states by value.
pub(crate) fn same_state(a: &Arc<ActionState>, b: &ActionState) -> bool {
    **a == *b
}
