//! The types a lookup, an invalidation and a prune of the [`Index`](crate::Index) return.

use crate::recorded::Recorded;
use actionstate_core::{
    ActionId, Audit, AuditDetail, EventId, Fingerprint, InvalidationReason, LogRecord, MissReason, Position, StateKey,
    Trigger,
};

/// What a replaying runtime is about to run: the state key and how its trigger came about.
#[derive(Clone, Copy, Debug)]
pub struct Probe<'a> {
    /// The state key of (key, seq, occurrence, fingerprint, action).
    pub key: StateKey,
    /// How the trigger event came to be.
    pub trigger: &'a Trigger,
    /// Id of the trigger event now.
    pub event: EventId,
    /// Fingerprint of the round's input event now.
    pub input: Fingerprint,
}

/// The lookup decision.
#[derive(Clone, Debug)]
pub enum Decision {
    /// A recorded state to reuse (completed) or resume (pending).
    Hit(Recorded),
    /// Nothing reusable; run the action.
    Miss(MissReason),
}

impl Decision {
    /// The hit state, if any.
    pub fn hit(&self) -> Option<&Recorded> {
        match self {
            Decision::Hit(s) => Some(s),
            Decision::Miss(_) => None,
        }
    }
}

/// A lookup decision and the invalidation it caused, which the store must log.
#[derive(Clone, Debug)]
pub struct Lookup {
    /// Hit or miss.
    pub decision: Decision,
    /// States removed by this lookup.
    pub invalidation: Invalidation,
}

/// States removed from the index by one operation, with the reason and what differed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Invalidation {
    /// Removed states, each with its reason (the store writes one tombstone per entry).
    pub removed: Vec<Removed>,
    /// What differed, when the operation detected a divergence (the store writes an audit).
    pub divergence: Option<(InvalidationReason, AuditDetail)>,
}

impl Invalidation {
    /// Whether nothing was removed and nothing diverged.
    pub fn is_empty(&self) -> bool {
        self.removed.is_empty() && self.divergence.is_none()
    }

    /// The records that log this invalidation, in the order they must be appended: the audit
    /// record of the divergence first, then one tombstone per removed state. `probe` is the
    /// state looked up (or re-written) and `action` its action, when known.
    ///
    /// The audit comes first because a crash or a failed append can cut the sequence after
    /// any record, and replaying the audit ([`Index::apply`](crate::Index::apply)) performs
    /// the whole invalidation: every non-empty prefix replays to what the writer decided, so
    /// no state it invalidated is reused after a restore. Tombstones first would leave a
    /// prefix that removes a producer but not its children, which the next writer could then
    /// reuse by fingerprint. The tombstones still follow: each names one removed state, which Kafka's
    /// compaction needs to drop its upsert and `inspect` shows. An invalidation without a
    /// divergence (none today) is logged as tombstones alone.
    pub fn records(&self, probe: &StateKey, action: Option<&ActionId>) -> Vec<LogRecord> {
        let mut out = Vec::with_capacity(self.removed.len() + 1);
        if let Some((reason, detail)) = &self.divergence {
            out.push(LogRecord::Audit(Audit {
                key: probe.key,
                seq: probe.seq,
                probe: *probe,
                action: action.cloned(),
                reason: reason.clone(),
                detail: detail.clone(),
                removed: self.removed.len() as u64,
            }));
        }
        out.extend(self.removed.iter().map(|r| LogRecord::Delete { key: r.key, reason: r.reason.clone() }));
        out
    }
}

/// One removed state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Removed {
    /// The removed state.
    pub key: StateKey,
    /// Why it was removed.
    pub reason: InvalidationReason,
}

/// What [`Index::prune_reporting`](crate::Index::prune_reporting) removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    /// States removed.
    pub states: usize,
    /// Where the last of them (by offset) lived, if any was removed.
    pub last: Option<Position>,
}

/// Counts of what the index holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Business keys with at least one state.
    pub keys: usize,
    /// Rounds with at least one state.
    pub rounds: usize,
    /// Indexed states.
    pub states: usize,
    /// Estimated memory: encoded record bytes plus an estimate of the index's own overhead.
    pub estimated_bytes: u64,
    /// States of live rounds that an invalidation removed, whose removal counts the index
    /// keeps (their incarnations) until their rounds complete.
    pub invalidated: usize,
}
