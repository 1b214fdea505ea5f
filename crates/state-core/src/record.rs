//! Log records: what the store appends to a [`crate::StateLog`].

use crate::checkpoint::CheckpointRecord;
use crate::error::Error;
use crate::fence::Fence;
use crate::id::{ActionId, EventId, Fingerprint, KeyId};
use crate::key::StateKey;
use crate::key::Trigger;
use crate::kind::RecordKind;
use crate::state::ActionState;
use crate::wait::ResolveRequest;
use serde::{Deserialize, Serialize};
use std::fmt;

/// One record of the action-state log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum LogRecord {
    /// The whole current state of one action.
    Upsert(ActionState),
    /// A tombstone for one state removed by an invalidation.
    Delete {
        /// The removed state.
        key: StateKey,
        /// Why it was removed.
        reason: InvalidationReason,
    },
    /// The record of one invalidation: what diverged and why. It leads the invalidation's
    /// tombstones, and replaying it performs the invalidation, so that a crash that cuts the
    /// tombstones short loses none of it (see `actionstate-index`).
    Audit(Audit),
    /// A restored owner's fence: one in every partition, appended before the owner serves.
    /// From it on in its partition, records of the keys it covers written with an older
    /// writer epoch are not replayed (see [`crate::fence`]).
    Fence(Fence),
    /// A part or the commit of a checkpoint an owner wrote into the log (see
    /// [`crate::checkpoint`]). Replay skips it: it changes no state.
    Checkpoint(CheckpointRecord),
    /// A resolve of a durable wait asked for by a process that does not own its key (see
    /// [`ResolveRequest`]). Replay changes no state with it: the owner that reads it settles
    /// the wait, if it is still pending, with a state of its own.
    Resolve(ResolveRequest),
}

/// What replay decisions need of an upserted state: its identity, how its trigger came about,
/// the trigger event id and round input it was derived from, and whether it completed with
/// which output ids. A rebuild reads it with [`codec::peek`](crate::codec::peek) and keeps
/// the record encoded until a lookup uses the state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Evidence {
    /// Identity of the state.
    pub key: StateKey,
    /// The trigger and the round input, unless the trigger is [`Trigger::Input`] and the round
    /// input is the trigger event (see [`trigger`](Self::trigger) and [`input`](Self::input)).
    /// Most states are triggered by their round's input, and a rebuild keeps one `Evidence`
    /// per replayed record: 8 bytes here instead of the 144 of both.
    derived: Option<Box<Derived>>,
    /// Id of the trigger event when the state was written.
    pub trigger_event: EventId,
    /// Ids of the output events of a completed state, in emission order; `None` while pending.
    pub outputs: Option<Box<[EventId]>>,
}

/// What an [`Evidence`] keeps out of line: a trigger other than the round input, or a round
/// input other than the trigger event's fingerprint.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Derived {
    trigger: Trigger,
    input: Fingerprint,
}

impl Evidence {
    /// Evidence from its parts.
    pub fn new(
        key: StateKey,
        trigger: Trigger,
        trigger_event: EventId,
        input: Fingerprint,
        outputs: Option<Box<[EventId]>>,
    ) -> Self {
        // The state key carries the trigger event's fingerprint, which is the round input's
        // when the trigger is the input itself.
        let derived =
            (trigger != Trigger::Input || input != key.fingerprint).then(|| Box::new(Derived { trigger, input }));
        Evidence { key, derived, trigger_event, outputs }
    }

    /// The evidence of a decoded state.
    pub fn of(state: &ActionState) -> Self {
        Evidence::new(
            state.key,
            state.trigger.clone(),
            state.trigger_event,
            state.input,
            state.is_completed().then(|| state.outputs().iter().map(|e| e.id).collect()),
        )
    }

    /// How the trigger event came to be.
    pub fn trigger(&self) -> &Trigger {
        static INPUT: Trigger = Trigger::Input;
        self.derived.as_deref().map_or(&INPUT, |d| &d.trigger)
    }

    /// Fingerprint of the round's input event.
    pub fn input(&self) -> Fingerprint {
        self.derived.as_deref().map_or(self.key.fingerprint, |d| d.input)
    }
}

impl LogRecord {
    /// The business key this record belongs to (decides its partition).
    pub fn key_id(&self) -> KeyId {
        match self {
            LogRecord::Upsert(s) => s.key.key,
            LogRecord::Delete { key, .. } => key.key,
            LogRecord::Audit(a) => a.key,
            LogRecord::Fence(f) => f.key,
            LogRecord::Checkpoint(c) => c.key,
            LogRecord::Resolve(r) => r.key,
        }
    }

    /// Whether the codec can write this record: the reason of a tombstone or an audit passes
    /// [`InvalidationReason::check`], and a checkpoint's metadata [`CheckpointRecord::check`].
    pub fn check(&self) -> Result<(), Error> {
        match self {
            LogRecord::Upsert(_) | LogRecord::Fence(_) => Ok(()),
            LogRecord::Checkpoint(c) => c.check(),
            LogRecord::Resolve(r) => r.check(),
            LogRecord::Delete { reason, .. } => reason.check(),
            LogRecord::Audit(a) => a.reason.check(),
        }
    }

    /// The record kind byte of the envelope.
    pub fn kind(&self) -> RecordKind {
        match self {
            LogRecord::Upsert(_) => RecordKind::Upsert,
            LogRecord::Delete { .. } => RecordKind::Delete,
            LogRecord::Audit(_) => RecordKind::Audit,
            LogRecord::Fence(_) => RecordKind::Fence,
            LogRecord::Checkpoint(_) => RecordKind::Checkpoint,
            LogRecord::Resolve(_) => RecordKind::Resolve,
        }
    }
}

/// Why a lookup missed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MissReason {
    /// No state recorded for this key; later rounds were invalidated conservatively.
    Absent,
    /// The round's input changed: the round and all later rounds were invalidated.
    RootChanged,
    /// The state was recorded for another occurrence of its trigger event (the producer re-ran):
    /// the state, its descendants and all later rounds were invalidated.
    OccurrenceConflict,
}

impl MissReason {
    /// All reasons, for metrics labels and reports.
    pub const ALL: [MissReason; 3] = [MissReason::Absent, MissReason::RootChanged, MissReason::OccurrenceConflict];

    /// A stable snake_case name.
    pub fn as_str(&self) -> &'static str {
        match self {
            MissReason::Absent => "absent",
            MissReason::RootChanged => "root_changed",
            MissReason::OccurrenceConflict => "occurrence_conflict",
        }
    }
}

impl fmt::Display for MissReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a state was removed from the index.
///
/// Variants are appended at the end only: postcard writes a variant as its index, so the
/// records of older versions keep decoding (`docs/format.md`, section 5).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum InvalidationReason {
    /// A lookup missed for this reason.
    Miss(MissReason),
    /// Its producer's completed evidence was replaced by a different record.
    ProducerReplaced,
    /// An operator removed every state of the key's rounds from the audit's `seq` on (a
    /// repair: `ActionStateStore::invalidate`, `actionstate reset`), for the reason `text`
    /// says. Build it with [`InvalidationReason::operator`], which bounds the text; the codec
    /// refuses to write or read a longer one.
    Operator {
        /// Why, in the operator's words: at most [`MAX_OPERATOR_TEXT`] bytes of UTF-8.
        #[serde(deserialize_with = "operator_text")]
        text: String,
    },
}

/// The longest operator reason text, in bytes of UTF-8 (1 KiB): an invalidation writes the
/// text into its audit record and into each of its tombstones.
pub const MAX_OPERATOR_TEXT: usize = 1024;

impl InvalidationReason {
    /// The reason of an operator's invalidation, if `text` is at most [`MAX_OPERATOR_TEXT`]
    /// bytes long; otherwise [`Error::OperatorTextTooLong`].
    pub fn operator(text: impl Into<String>) -> Result<Self, Error> {
        let reason = InvalidationReason::Operator { text: text.into() };
        reason.check()?;
        Ok(reason)
    }

    /// Whether the codec can write this reason: an operator's text is at most
    /// [`MAX_OPERATOR_TEXT`] bytes.
    pub fn check(&self) -> Result<(), Error> {
        match self {
            InvalidationReason::Operator { text } if text.len() > MAX_OPERATOR_TEXT => {
                Err(Error::OperatorTextTooLong { len: text.len(), max: MAX_OPERATOR_TEXT })
            }
            _ => Ok(()),
        }
    }

    /// A stable name without the operator's text (`miss:absent`, `producer_replaced`,
    /// `operator`, ...), for metric labels and reports.
    pub fn name(&self) -> &'static str {
        match self {
            InvalidationReason::Miss(MissReason::Absent) => "miss:absent",
            InvalidationReason::Miss(MissReason::RootChanged) => "miss:root_changed",
            InvalidationReason::Miss(MissReason::OccurrenceConflict) => "miss:occurrence_conflict",
            InvalidationReason::ProducerReplaced => "producer_replaced",
            InvalidationReason::Operator { .. } => "operator",
        }
    }

    /// The operator's text, for an operator's invalidation.
    pub fn text(&self) -> Option<&str> {
        match self {
            InvalidationReason::Operator { text } => Some(text),
            _ => None,
        }
    }
}

/// Reads an operator's text, refusing one longer than [`MAX_OPERATOR_TEXT`] bytes, so that
/// every record the decoder accepts the encoder writes too.
fn operator_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let text = String::deserialize(d)?;
    if text.len() > MAX_OPERATOR_TEXT {
        return Err(<D::Error as serde::de::Error>::custom(format!(
            "operator text of {} bytes exceeds {MAX_OPERATOR_TEXT}",
            text.len()
        )));
    }
    Ok(text)
}

impl fmt::Display for InvalidationReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InvalidationReason::Operator { text } => write!(f, "operator: {text}"),
            other => f.write_str(other.name()),
        }
    }
}

/// One divergence, as recorded for `inspect` and `explain`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Audit {
    /// The business key.
    pub key: KeyId,
    /// The round the divergence was detected in.
    pub seq: u64,
    /// The state key that was looked up (or re-written).
    pub probe: StateKey,
    /// The action that was looked up, if known.
    pub action: Option<ActionId>,
    /// What happened.
    pub reason: InvalidationReason,
    /// What differed.
    pub detail: AuditDetail,
    /// How many states were removed.
    pub removed: u64,
}

/// What differed in a divergence.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum AuditDetail {
    /// Nothing recorded for the probe.
    Absent,
    /// The round's recorded input fingerprints versus the current one.
    RootChanged {
        /// Input fingerprints recorded in the round.
        recorded: Vec<Fingerprint>,
        /// The current input's fingerprint.
        current: Fingerprint,
    },
    /// The recorded trigger event id versus the current one.
    OccurrenceConflict {
        /// Trigger event id in the recorded state.
        recorded: EventId,
        /// Trigger event id now.
        current: EventId,
    },
    /// The producer whose evidence was replaced.
    ProducerReplaced {
        /// The producer state.
        producer: StateKey,
    },
    /// Nothing differed: an operator asked for the invalidation (the reason is
    /// [`InvalidationReason::Operator`]; the audit's probe names only the key and the first
    /// round removed, see [`StateKey::round`]).
    Operator,
}

/// The log key of an audit record: a tag byte, the key id and the round (big-endian).
pub fn audit_log_key(key: &KeyId, seq: u64) -> [u8; 41] {
    let mut out = [0u8; 41];
    out[0] = AUDIT_KEY_LAYOUT;
    out[1..33].copy_from_slice(&key.0);
    out[33..41].copy_from_slice(&seq.to_be_bytes());
    out
}

/// First byte of an audit record's log key.
pub const AUDIT_KEY_LAYOUT: u8 = 0xA1;
