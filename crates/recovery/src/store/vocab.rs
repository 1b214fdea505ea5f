//! The words of the store's API: a round, what a lookup decides, what a checkpoint captured,
//! what `explain` and an operator's invalidation report.

use crate::store::handle::ActionHandle;
use actionstate_core::{
    ActionState, AuditDetail, Event, Fingerprint, InvalidationReason, KeyId, KeyLabel, Marker, MissReason, StateKey,
    TraceContext,
};
use actionstate_index::Decision;
use std::collections::HashMap;
use std::sync::Arc;

/// One round: the business key, the sequence number of its input, and the fingerprint of
/// that input event (recorded in every state of the round, so a changed input is detected).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Round {
    /// The business key.
    pub key: KeyId,
    /// The input's sequence number for this key.
    pub seq: u64,
    /// Fingerprint of the input event.
    pub input: Fingerprint,
    /// The key's readable name, written into every state of the round so that `inspect`
    /// shows it and an operator can find the key by it ([`Round::named`]).
    pub label: Option<KeyLabel>,
    /// The trace the input arrived in (a W3C `traceparent` the runtime read with it), which
    /// the round's first attempts record with their states ([`Round::traced`]); without it,
    /// the attempt's own span's context, where the build exports spans.
    pub trace: Option<TraceContext>,
}

impl Round {
    /// The round started by `input` as the `seq`-th input of `key`.
    pub fn new(key: KeyId, seq: u64, input: &Event) -> Self {
        Round { key, seq, input: input.fingerprint(), label: None, trace: None }
    }

    /// This round, arrived in the trace `context`: every state an attempt of the round writes
    /// first records it, and the attempts that resume or reuse such a state, in a later
    /// process too, name it as `actionstate.first_attempt` (docs/design.md, section 5.8).
    pub fn traced(self, context: TraceContext) -> Self {
        Round { trace: Some(context), ..self }
    }

    /// The round of the key the application names `name` (the key is `KeyId::of(name)`),
    /// which its states carry as their label: `inspect` shows it, and `reset --key NAME` and
    /// `inspect --key NAME` find the key by it. A name of more than
    /// [`MAX_KEY_LABEL`](actionstate_core::MAX_KEY_LABEL) bytes is shown cut.
    pub fn named(name: &str, seq: u64, input: &Event) -> Self {
        Round { label: Some(KeyLabel::new(name)), ..Round::new(KeyId::of(name.as_bytes()), seq, input) }
    }
}

/// What the runtime should do with an action.
#[derive(Debug)]
#[must_use = "a `Begin` says whether to reuse, resume or run the action; dropping it loses a fresh handle and any reused outputs"]
pub enum Begin {
    /// The action completed before: replay its outputs and memory updates, do not run it.
    Reuse(Arc<ActionState>),
    /// The action started before: run it, and its durable calls replay from the journal.
    Resume(ActionHandle),
    /// Nothing reusable: run the action.
    Fresh(ActionHandle, MissReason),
}

/// What a checkpoint captured: where a rebuild must start, and the last round each key
/// completed (rounds a restore of this checkpoint need not replay).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The checkpoint id.
    pub checkpoint: u64,
    /// Covering marker: per partition, the oldest live record or the end.
    pub marker: Marker,
    /// Last completed round per key.
    pub completed: Arc<HashMap<KeyId, u64>>,
}

/// Which keys this worker owns, for rebuild after a rescale (defined in core: fence records
/// carry it).
pub use actionstate_core::Ownership;

/// What a lookup would decide, for `explain`.
#[derive(Clone, Debug)]
pub struct Explanation {
    /// The state key looked up.
    pub key: StateKey,
    /// Hit or miss.
    pub decision: Decision,
    /// The divergence the lookup would record, if any.
    pub divergence: Option<(InvalidationReason, AuditDetail)>,
    /// How many states the lookup would invalidate.
    pub would_invalidate: usize,
    /// How many times an invalidation removed this state in its round before: the
    /// incarnation its calls' idempotency keys are derived with (as things stand now, before
    /// the invalidation this lookup would make).
    pub incarnation: u32,
}

/// What an operator's invalidation
/// ([`ActionStateStore::invalidate`](crate::ActionStateStore::invalidate)) removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperatorInvalidation {
    /// The business key.
    pub key: KeyId,
    /// The first round removed: every round from it on lost its states.
    pub from_seq: u64,
    /// The reason logged with the audit record and with every tombstone
    /// ([`InvalidationReason::Operator`]).
    pub reason: InvalidationReason,
    /// The removed states, in state-key order (by round, then within it).
    pub removed: Vec<StateKey>,
    /// Records appended for it: the audit record, then one tombstone per removed state.
    pub records: usize,
}
