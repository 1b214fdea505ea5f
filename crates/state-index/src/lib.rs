//! # actionstate-index
//!
//! The replay index: what the store knows about recorded action states, and the decision a
//! replaying runtime gets for each action it is about to run (docs/design.md, section 4: the
//! lookup rules).
//!
//! Per business key the index keeps an ordered map `seq → round`. A round holds its states,
//! a count of the input fingerprints its states were derived from, and a count of the output
//! event ids of its **completed** states (the *producer evidence*). Every state is a
//! [`Recorded`] record, shared immutably so that nothing a caller holds can change the
//! evidence: decoded when it was applied as a decoded record ([`Index::apply`]), kept encoded
//! with its evidence when the store wrote or a rebuild replayed it ([`Index::upsert`]), and
//! decoded when a lookup hands it out.
//!
//! Costs: [`Index::lookup`] is `O(log R)` for `R` rounds of the key, [`Index::apply`] is
//! `O(log R + E)` for `E` outputs, invalidation and pruning are proportional to what they
//! remove. Nothing iterates all keys or all states; the `scan-guard` feature lets tests prove
//! it.
//!
//! The index is pure and synchronous. The store logs what an invalidation removed before the
//! key's next write, as [`Invalidation::records`] gives it: an audit record of the divergence
//! first, then one tombstone per removed state. Replaying the log in order through
//! [`Index::apply`] reproduces the writer's index.
//!
//! A crash can cut those records after any of them. Replaying an audit record performs the
//! invalidation it records (the same code a lookup runs), so every non-empty prefix replays to
//! the whole invalidation and no state the writer invalidated is reused by the next one. The
//! tombstones that follow are then no-ops on replay; they remain because each names one
//! removed state (Kafka's compaction drops the state's upsert behind it, `inspect` shows it),
//! and a log written before audits came first still replays through them.
//!
//! ```
//! use actionstate_core::*;
//! use actionstate_index::{Decision, Index, Probe};
//!
//! let key = KeyId::of(b"user-1");
//! let action = ActionId::new("reply");
//! let input = Event::new("input", Attributes::new());
//! let sk = StateKey::new(key, 0, &action, &input, &Trigger::Input);
//! let mut index = Index::new();
//!
//! let probe = Probe { key: sk, trigger: &Trigger::Input, event: input.id, input: input.fingerprint() };
//! assert!(matches!(index.lookup(&probe).decision, Decision::Miss(MissReason::Absent)));
//!
//! let state = ActionState {
//!     label: None,
//!     trace: None,
//!     key: sk,
//!     action,
//!     trigger: Trigger::Input,
//!     trigger_event: input.id,
//!     input: input.fingerprint(),
//!     progress: Progress::Completed { outputs: vec![], memory: vec![] },
//! };
//! index.apply(LogRecord::Upsert(state), Position { partition: 0, offset: 0, exact: true }, 120);
//!
//! // After a restore the input event has a new id but the same fingerprint: reused.
//! let replayed = Event { id: EventId::random(), ..input.clone() };
//! let probe = Probe { key: sk, trigger: &Trigger::Input, event: replayed.id, input: replayed.fingerprint() };
//! assert!(matches!(index.lookup(&probe).decision, Decision::Hit(_)));
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![deny(clippy::unwrap_used)]
#![warn(missing_docs)]

mod check;
mod decision;
mod fences;
mod incarnations;
mod live;
mod maps;
mod recorded;
mod round;

pub use decision::{Decision, Invalidation, Lookup, Probe, Pruned, Removed, Stats};
pub use fences::Fences;
pub use maps::{ScanScope, allow_scans, visits};
pub use recorded::{Encoded, Recorded};

use actionstate_core::{
    Audit, AuditDetail, EventId, Fingerprint, InvalidationReason, KeyId, LogIdentity, LogRecord, Marker, MissReason,
    Position, StateKey,
};
use incarnations::Incarnations;
use live::Live;
use maps::{RoundMap, TopMap};
use round::{Entry, Round};
use std::ops::Bound;
use std::sync::Arc;

#[derive(Clone, Debug, Default)]
struct KeyIndex {
    /// Rounds are boxed: a B-tree node then holds eight-byte pointers, which keeps long
    /// histories (many rounds per key) compact.
    rounds: RoundMap<Box<Round>>,
}

/// What one invalidation removes, as a lookup decides it and its audit record replays it.
#[derive(Clone, Copy, Debug)]
enum Scope {
    /// An occurrence conflict: the state, its descendants in its round, and every later round.
    Conflict(StateKey),
    /// A changed root, or an operator's repair: the round and every later round of the key.
    RoundAndLater(KeyId, u64),
    /// An absent state: every later round of the key.
    Later(KeyId, u64),
}

/// What a lookup found, before anything is removed.
enum Plan {
    Hit(Recorded),
    Conflict { recorded: EventId },
    RootChanged { recorded: Vec<Fingerprint> },
    Absent,
}

/// The replay index. See the crate docs.
#[derive(Clone, Debug, Default)]
pub struct Index {
    keys: TopMap<KeyId, KeyIndex>,
    /// Per partition, the offsets of the records the indexed states live at, and the pins of
    /// `incarnations`.
    live: Live,
    /// How many times an invalidation removed each state of a live round.
    incarnations: Incarnations,
    rounds: usize,
    states: usize,
    record_bytes: u64,
}

/// Estimated index overhead per state beyond its record, for [`Stats::estimated_bytes`].
/// Measured by `cargo xtask bench index` (bytes_per_state).
const OVERHEAD_PER_STATE: u64 = 112;

impl Index {
    /// An empty index.
    pub fn new() -> Self {
        Index::default()
    }

    /// Decides whether the state of `probe` can be reused, and invalidates what the decision
    /// proves stale (docs/design.md, lookup rules 1, 2 and 5). The returned [`Invalidation`]
    /// must be logged by the caller before the key's next write (lookup rule 6).
    pub fn lookup(&mut self, probe: &Probe<'_>) -> Lookup {
        let sk = probe.key;
        let (decision, scope, detail) = match self.plan(probe) {
            Plan::Hit(state) => {
                return Lookup { decision: Decision::Hit(state), invalidation: Invalidation::default() };
            }
            Plan::Conflict { recorded } => (
                MissReason::OccurrenceConflict,
                Scope::Conflict(sk),
                AuditDetail::OccurrenceConflict { recorded, current: probe.event },
            ),
            Plan::RootChanged { recorded } => (
                MissReason::RootChanged,
                Scope::RoundAndLater(sk.key, sk.seq),
                AuditDetail::RootChanged { recorded, current: probe.input },
            ),
            Plan::Absent => (MissReason::Absent, Scope::Later(sk.key, sk.seq), AuditDetail::Absent),
        };
        let reason = InvalidationReason::Miss(decision);
        let mut inv = Invalidation::default();
        self.invalidate(scope, &reason, &mut inv.removed);
        // A miss that removes nothing is not a divergence (there was no history to contradict),
        // except a conflict or a changed root, which always remove the recorded states.
        if !inv.removed.is_empty() || decision != MissReason::Absent {
            inv.divergence = Some((reason, detail));
        }
        Lookup { decision: Decision::Miss(decision), invalidation: inv }
    }

    /// Removes every state of the rounds `seq ≥ from_seq` of `key`, as an operator asked
    /// (`text` says why): a repair of recorded history, which the runtime then re-executes.
    /// Like a divergence it must be logged ([`Invalidation::records`], with the probe
    /// [`StateKey::round`]`(key, from_seq)`): its audit record (reason
    /// [`InvalidationReason::Operator`], detail [`AuditDetail::Operator`]) replays to the same
    /// removal, so a log cut after any of its records replays to the whole of it. The
    /// invalidation records the divergence even when it removes nothing, so that the log
    /// keeps the operator's request: a rebuild from an earlier marker replays states of those
    /// rounds that this index had already pruned, and the audit removes them again.
    ///
    /// The text is not checked here; the codec refuses one longer than
    /// [`actionstate_core::MAX_OPERATOR_TEXT`] (see [`InvalidationReason::operator`]).
    pub fn invalidate_from(&mut self, key: &KeyId, from_seq: u64, text: String) -> Invalidation {
        let reason = InvalidationReason::Operator { text };
        let mut inv = Invalidation::default();
        self.invalidate(Scope::RoundAndLater(*key, from_seq), &reason, &mut inv.removed);
        inv.divergence = Some((reason, AuditDetail::Operator));
        inv
    }

    /// Removes what an invalidation of `scope` covers, reporting each state with `reason`.
    /// A lookup, an operator's invalidation and the replay of their audit records all come
    /// here, so that replaying the record removes exactly what the writer removed.
    fn invalidate(&mut self, scope: Scope, reason: &InvalidationReason, out: &mut Vec<Removed>) {
        let push = |keys: Vec<StateKey>, out: &mut Vec<Removed>| {
            out.extend(keys.into_iter().map(|key| Removed { key, reason: reason.clone() }));
        };
        match scope {
            Scope::Conflict(sk) => {
                let descendants = self
                    .round(&sk.key, sk.seq)
                    .and_then(|r| r.get(&sk.local()).map(|e| r.descendants(&e.state)))
                    .unwrap_or_default();
                self.remove_state(&sk, reason, out);
                for d in descendants {
                    self.remove_state(&d.within(sk.key, sk.seq), reason, out);
                }
                let later = self.remove_rounds(&sk.key, (Bound::Excluded(sk.seq), Bound::Unbounded));
                push(later, out);
            }
            Scope::RoundAndLater(key, seq) => {
                let gone = self.remove_rounds(&key, (Bound::Included(seq), Bound::Unbounded));
                push(gone, out);
            }
            Scope::Later(key, seq) => {
                let gone = self.remove_rounds(&key, (Bound::Excluded(seq), Bound::Unbounded));
                push(gone, out);
            }
        }
    }

    /// Replays an audit record: performs the invalidation it records, as the writer did when
    /// it wrote it (see [`Invalidation::records`] for why the audit comes first). A producer
    /// replacement needs nothing here: the upsert before it already removed the children. An
    /// operator's invalidation removes the rounds from the audit's on, as
    /// [`invalidate_from`](Index::invalidate_from) did.
    fn replay_audit(&mut self, audit: &Audit) -> Invalidation {
        let sk = audit.probe;
        let scope = match audit.reason {
            InvalidationReason::Miss(MissReason::OccurrenceConflict) => Scope::Conflict(sk),
            InvalidationReason::Miss(MissReason::RootChanged) | InvalidationReason::Operator { .. } => {
                Scope::RoundAndLater(audit.key, audit.seq)
            }
            InvalidationReason::Miss(MissReason::Absent) => Scope::Later(audit.key, audit.seq),
            InvalidationReason::ProducerReplaced => return Invalidation::default(),
        };
        let mut inv = Invalidation::default();
        self.invalidate(scope, &audit.reason, &mut inv.removed);
        inv
    }

    /// What [`lookup`](Index::lookup) would decide, and how many states it would remove,
    /// without changing anything.
    pub fn explain(&self, probe: &Probe<'_>) -> (Decision, Option<(InvalidationReason, AuditDetail)>, usize) {
        let sk = probe.key;
        let later = |incl: bool| -> usize {
            let Some(ki) = self.keys.get(&sk.key) else {
                return 0;
            };
            let lo = if incl { Bound::Included(sk.seq) } else { Bound::Excluded(sk.seq) };
            ki.rounds
                .seqs_in((lo, Bound::Unbounded))
                .into_iter()
                .filter_map(|s| ki.rounds.get(s))
                .map(|r| r.len())
                .sum()
        };
        match self.plan(probe) {
            Plan::Hit(state) => (Decision::Hit(state), None, 0),
            Plan::Conflict { recorded } => {
                let own = 1 + self
                    .round(&sk.key, sk.seq)
                    .and_then(|r| r.get(&sk.local()).map(|e| r.descendants(&e.state).len()))
                    .unwrap_or(0);
                let reason = InvalidationReason::Miss(MissReason::OccurrenceConflict);
                let detail = AuditDetail::OccurrenceConflict { recorded, current: probe.event };
                (Decision::Miss(MissReason::OccurrenceConflict), Some((reason, detail)), own + later(false))
            }
            Plan::RootChanged { recorded } => {
                let reason = InvalidationReason::Miss(MissReason::RootChanged);
                let detail = AuditDetail::RootChanged { recorded, current: probe.input };
                (Decision::Miss(MissReason::RootChanged), Some((reason, detail)), later(true))
            }
            Plan::Absent => {
                let n = later(false);
                let div = (n > 0).then_some((InvalidationReason::Miss(MissReason::Absent), AuditDetail::Absent));
                (Decision::Miss(MissReason::Absent), div, n)
            }
        }
    }

    fn plan(&self, probe: &Probe<'_>) -> Plan {
        let sk = probe.key;
        if let Some(round) = self.round(&sk.key, sk.seq) {
            if let Some(entry) = round.get(&sk.local()) {
                let recorded = entry.state.trigger_event();
                // The recorded trigger was a completed producer's output and this is another
                // event: the producer re-ran, or this is another occurrence.
                if recorded != probe.event && round.produced(&recorded) {
                    return Plan::Conflict { recorded };
                }
                return Plan::Hit(entry.state.clone());
            }
            if probe.trigger.is_input()
                && let Some(recorded) = round.other_inputs(&probe.input)
            {
                return Plan::RootChanged { recorded };
            }
        }
        Plan::Absent
    }

    /// Applies one record in log order: an upsert (re)indexes its state, removing the old
    /// evidence first and invalidating the state's descendants when its completed evidence is
    /// replaced by a different record; a delete removes the state; an audit performs the
    /// invalidation it records (nothing is left to remove when its tombstones came first, as
    /// in logs written before audits led their invalidations). The returned invalidation lists
    /// what the record removed beyond the state a delete names.
    ///
    /// `position` is where the record lives (exact or a lower bound); `bytes` is its encoded
    /// size, for statistics.
    pub fn apply(&mut self, record: LogRecord, position: Position, bytes: usize) -> Invalidation {
        match record {
            LogRecord::Upsert(state) => self.upsert(Recorded::Decoded(Arc::new(state)), position, bytes),
            LogRecord::Delete { key, .. } => {
                self.delete(&key);
                Invalidation::default()
            }
            LogRecord::Audit(audit) => self.replay_audit(&audit),
            // A fence changes no state: it decides which later records a replay applies
            // ([`Fences`]), before they reach the index.
            LogRecord::Fence(_) => Invalidation::default(),
            // A checkpoint record says where a restore starts; the replay that follows it
            // changes the index, the record itself does not.
            LogRecord::Checkpoint(_) => Invalidation::default(),
            // A resolve request changes no state: the owner that reads it settles the wait
            // with an upsert of its own, if the wait is still pending.
            LogRecord::Resolve(_) => Invalidation::default(),
        }
    }

    /// Applies an upsert of `state` (decoded, or encoded with its evidence) in log order; see
    /// [`apply`](Index::apply).
    pub fn upsert(&mut self, state: Recorded, position: Position, bytes: usize) -> Invalidation {
        let mut inv = Invalidation::default();
        let sk = *state.key();
        let ki = self.keys.entry(sk.key).or_default();
        let round = match ki.rounds.entry(sk.seq) {
            std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::btree_map::Entry::Vacant(v) => {
                self.rounds += 1;
                v.insert(Box::default())
            }
        };
        let bytes = u32::try_from(bytes).unwrap_or(u32::MAX);
        // Lookup rule 4 (docs/design.md) applies when a completed state is replaced by one with
        // other evidence.
        let producer_replaced =
            round.get(&sk.local()).is_some_and(|old| old.state.is_completed() && !same_evidence(&old.state, &state));
        let (mut gone, mut invalidated) = (Vec::new(), Vec::new());
        if let Some(old) = round.insert(Entry { state, position, bytes }) {
            if producer_replaced {
                // Lookup rule 4: the producer re-ran or re-initialized; children computed from
                // its old outputs must not match by fingerprint later.
                let reason = InvalidationReason::ProducerReplaced;
                for d in round.descendants(&old.state) {
                    if let Some(e) = round.take(&d) {
                        inv.removed.push(Removed { key: d.within(sk.key, sk.seq), reason: reason.clone() });
                        invalidated.push(e);
                    }
                }
                inv.divergence = Some((reason, AuditDetail::ProducerReplaced { producer: sk }));
            }
            gone.push(old);
        }
        for e in &gone {
            self.forget(e);
        }
        for e in &invalidated {
            self.forget_invalidated(e);
        }
        self.states += 1;
        self.record_bytes += u64::from(bytes);
        self.live.add(position.partition, position.offset);
        inv
    }

    /// Applies a tombstone: removes the state, leaving its children (now loose).
    fn delete(&mut self, key: &StateKey) {
        if let Some(e) = self.take(key) {
            if e.state.output_count() > 0
                && let Some(round) = self.keys.get_mut(&key.key).and_then(|k| k.rounds.get_mut(key.seq))
            {
                round.orphaned_children();
            }
            self.forget_invalidated(&e);
            self.drop_if_empty(&key.key, key.seq);
        }
    }

    /// Removes the rounds of `key` with `seq ≤ upto` (rounds a completed checkpoint covers).
    /// Returns the number of states removed. Pruning is not an invalidation and is not logged.
    pub fn prune(&mut self, key: &KeyId, upto: u64) -> usize {
        self.prune_reporting(key, upto).states
    }

    /// [`prune`](Index::prune), reporting also where the last of the removed states lived: a
    /// restore from a marker past it replays none of them.
    pub fn prune_reporting(&mut self, key: &KeyId, upto: u64) -> Pruned {
        let mut last: Option<Position> = None;
        let range = (Bound::Unbounded, Bound::Included(upto));
        let states = self.remove_rounds_with(key, range, Removal::Pruned, |e| {
            if last.is_none_or(|l| e.position.offset > l.offset || (e.position.offset == l.offset && !e.position.exact))
            {
                last = Some(e.position);
            }
        });
        for pin in self.incarnations.prune(key, upto) {
            self.live.remove(pin.partition, pin.offset);
        }
        Pruned { states: states.len(), last }
    }

    /// How many times an invalidation removed the state `sk` since its round began: the
    /// incarnation its next record belongs to (0 for a state never invalidated).
    pub fn incarnation(&self, sk: &StateKey) -> u32 {
        self.incarnations.of(sk)
    }

    /// The recorded state with this key, if indexed.
    pub fn get(&self, sk: &StateKey) -> Option<&Recorded> {
        self.round(&sk.key, sk.seq)?.get(&sk.local()).map(|e| &e.state)
    }

    /// The log position of the live record of this state, if indexed.
    pub fn position(&self, sk: &StateKey) -> Option<Position> {
        self.round(&sk.key, sk.seq)?.get(&sk.local()).map(|e| e.position)
    }

    /// The rounds of one key in sequence order, with their states (for inspection).
    pub fn rounds_of(&self, key: &KeyId) -> Vec<(u64, Vec<Recorded>)> {
        let Some(ki) = self.keys.get(key) else {
            return Vec::new();
        };
        ki.rounds
            .iter()
            .map(|(seq, r)| {
                let mut states: Vec<Recorded> = r.iter().map(|e| e.state.clone()).collect();
                states.sort_by_key(|s| *s.key());
                (*seq, states)
            })
            .collect()
    }

    /// Every pending state (its action began and has not completed), in no particular order: what
    /// a restore reads to find the durable waits in their journals. A scan of the whole index,
    /// once per restore; pending states are bounded by the work in flight.
    pub fn pending(&self) -> Vec<Recorded> {
        let _scope = maps::allow_scans();
        self.keys
            .scan("keys")
            .flat_map(|(_, ki)| ki.rounds.iter().flat_map(|(_, r)| r.iter()))
            .filter(|e| !e.state.is_completed())
            .map(|e| e.state.clone())
            .collect()
    }

    /// The keys of the states whose records lie below `below[p]` in their partition `p`, in no
    /// particular order: what a store carries forward (appends again at the end) so that
    /// retention may pass their old records. A scan of the whole index; a store makes it only
    /// when a partition's oldest live record lags far behind its end.
    pub fn living_below(&self, below: &[u64]) -> Vec<StateKey> {
        let _scope = maps::allow_scans();
        self.keys
            .scan("keys")
            .flat_map(|(_, ki)| ki.rounds.iter().flat_map(|(_, r)| r.iter()))
            .filter(|e| below.get(e.position.partition as usize).is_some_and(|&b| e.position.offset < b))
            .map(|e| *e.state.key())
            .collect()
    }

    /// The highest round recorded for `key`, if any.
    pub fn last_seq(&self, key: &KeyId) -> Option<u64> {
        let ki = self.keys.get(key)?;
        ki.rounds.last_seq()
    }

    /// Per partition `0..end.len()`, the offset of the oldest live record, or the given end
    /// offset if the partition holds none: replaying from these offsets reproduces this index.
    pub fn covering_offsets(&self, end: &[u64]) -> Vec<u64> {
        (0u32..)
            .zip(end)
            .map(|(p, &e)| {
                let oldest = self.live.oldest(p);
                oldest.map_or(e, |o| o.min(e))
            })
            .collect()
    }

    /// The covering marker of this index for `log`, given the log's end offsets.
    pub fn marker(&self, log: &LogIdentity, end: &[u64]) -> Marker {
        Marker::new(log.clone(), self.covering_offsets(end))
    }

    /// Moves every key of `other` into this index. Rebuild uses it to replay partitions in
    /// parallel into separate indexes and join them: the records of one key live in one
    /// partition, so the key sets are disjoint. A key present in both is refused (the log put
    /// one key's records in two partitions) and returned; this index is then left with the
    /// keys moved before it.
    pub fn absorb(&mut self, mut other: Index) -> Result<(), KeyId> {
        for (key, ki) in other.keys.drain() {
            if self.keys.get(&key).is_some() {
                return Err(key);
            }
            self.keys.entry(key).or_insert(ki);
        }
        self.live.absorb(std::mem::take(&mut other.live));
        self.incarnations.absorb(std::mem::take(&mut other.incarnations));
        self.rounds += other.rounds;
        self.states += other.states;
        self.record_bytes += other.record_bytes;
        Ok(())
    }

    /// Counts of what the index holds.
    pub fn stats(&self) -> Stats {
        Stats {
            keys: self.keys.len(),
            rounds: self.rounds,
            states: self.states,
            estimated_bytes: self.record_bytes + self.states as u64 * OVERHEAD_PER_STATE,
            invalidated: self.incarnations.len(),
        }
    }

    fn round(&self, key: &KeyId, seq: u64) -> Option<&Round> {
        self.keys.get(key)?.rounds.get(seq).map(|r| &**r)
    }

    /// Removes one state (not its descendants) and reports it.
    fn remove_state(&mut self, sk: &StateKey, reason: &InvalidationReason, out: &mut Vec<Removed>) {
        if let Some(e) = self.take(sk) {
            self.forget_invalidated(&e);
            out.push(Removed { key: *sk, reason: reason.clone() });
        }
        self.drop_if_empty(&sk.key, sk.seq);
    }

    fn take(&mut self, sk: &StateKey) -> Option<Entry> {
        self.keys.get_mut(&sk.key)?.rounds.get_mut(sk.seq)?.take(&sk.local())
    }

    /// Removes whole rounds of one key in `range` for an invalidation, reporting every
    /// removed state.
    fn remove_rounds(&mut self, key: &KeyId, range: (Bound<u64>, Bound<u64>)) -> Vec<StateKey> {
        self.remove_rounds_with(key, range, Removal::Invalidated, |_| {})
    }

    /// Removes whole rounds of one key in `range`, showing `seen` every removed entry.
    fn remove_rounds_with(
        &mut self,
        key: &KeyId,
        range: (Bound<u64>, Bound<u64>),
        why: Removal,
        mut seen: impl FnMut(&Entry),
    ) -> Vec<StateKey> {
        let mut out = Vec::new();
        let Some(ki) = self.keys.get_mut(key) else {
            return out;
        };
        let mut gone = Vec::new();
        for seq in ki.rounds.seqs_in(range) {
            if let Some(mut round) = ki.rounds.remove(seq) {
                self.rounds -= 1;
                for e in round.drain() {
                    out.push(*e.state.key());
                    seen(&e);
                    gone.push(e);
                }
            }
        }
        if ki.rounds.is_empty() {
            self.keys.remove(key);
        }
        for e in &gone {
            match why {
                Removal::Pruned => self.forget(e),
                Removal::Invalidated => self.forget_invalidated(e),
            }
        }
        out
    }

    /// [`forget`](Index::forget) an entry an invalidation removed, counting the removal (its
    /// state's next incarnation) and pinning the position of its state's first removal.
    fn forget_invalidated(&mut self, e: &Entry) {
        self.forget(e);
        if let Some(pin) = self.incarnations.removed(*e.state.key(), e.position) {
            self.live.add(pin.partition, pin.offset);
        }
    }

    /// Drops the counters and live position of a removed entry.
    fn forget(&mut self, e: &Entry) {
        self.states -= 1;
        self.record_bytes = self.record_bytes.saturating_sub(u64::from(e.bytes));
        self.live.remove(e.position.partition, e.position.offset);
    }

    fn drop_if_empty(&mut self, key: &KeyId, seq: u64) {
        let Some(ki) = self.keys.get_mut(key) else {
            return;
        };
        if ki.rounds.get(seq).is_some_and(|r| r.is_empty()) {
            ki.rounds.remove(seq);
            self.rounds -= 1;
        }
        if ki.rounds.is_empty() {
            self.keys.remove(key);
        }
    }
}

/// Why whole rounds leave the index.
#[derive(Clone, Copy)]
enum Removal {
    /// They completed, and a checkpoint covers them: not an invalidation.
    Pruned,
    /// An invalidation removed them.
    Invalidated,
}

/// Whether two records of one state carry the same producer evidence (completion and output
/// ids): replacing one by the other leaves its children valid.
fn same_evidence(old: &Recorded, new: &Recorded) -> bool {
    new.is_completed() && old.output_ids().eq(new.output_ids())
}
