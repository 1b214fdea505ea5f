//! Action states, the durable-call journal and memory updates.

use crate::event::Event;
use crate::id::{ActionId, EventId, Fingerprint};
use crate::idempotency::IdempotencyKey;
use crate::key::{StateKey, Trigger};
use crate::trace::TraceContext;
use crate::wait::{WaitOutcome, WaitSlot};
use serde::{Deserialize, Serialize};

/// The whole current state of one action, as written to the log by an `Upsert` record.
///
/// Records are immutable evidence: the index keeps the decoded record it wrote or replayed,
/// never an object a caller can still change.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ActionState {
    /// Identity of this state.
    pub key: StateKey,
    /// The action, with its version.
    pub action: ActionId,
    /// How the trigger event came to be.
    pub trigger: Trigger,
    /// Id of the trigger event when this state was written.
    pub trigger_event: EventId,
    /// Fingerprint of the input event that started the round.
    pub input: Fingerprint,
    /// Pending (with its call journal) or completed (with outputs and memory updates).
    pub progress: Progress,
    /// The business key's readable name, when the application gave one (`Round::named` of
    /// the store): what `inspect` shows and an operator types. Not part of the state's
    /// identity and never compared by replay. Records of format 3 and older have none.
    pub label: Option<KeyLabel>,
    /// The trace context of the attempt that first wrote this state, carried unchanged by
    /// every later write of it: a later attempt links to it. Not part of the state's identity
    /// and never compared by replay. Records of format 4 and older have none.
    pub trace: Option<TraceContext>,
}

/// The longest [`KeyLabel`], in bytes.
pub const MAX_KEY_LABEL: usize = 64;

/// A business key's readable name as the application gave it, kept in the records of its
/// states so that an operator can find the key by that name: at most [`MAX_KEY_LABEL`] bytes
/// of UTF-8 (a longer name is cut at a character boundary, since the label only names the key
/// for people; the key itself is the hash of the whole name). `Copy`, so that a round that
/// carries one stays `Copy`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyLabel {
    len: u8,
    bytes: [u8; MAX_KEY_LABEL],
}

impl KeyLabel {
    /// The label of `name`: all of it, or its longest prefix of at most [`MAX_KEY_LABEL`]
    /// bytes that ends on a character boundary.
    pub fn new(name: &str) -> KeyLabel {
        let mut end = name.len().min(MAX_KEY_LABEL);
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        let mut bytes = [0u8; MAX_KEY_LABEL];
        bytes[..end].copy_from_slice(&name.as_bytes()[..end]);
        // `end` is at most 64.
        KeyLabel { len: end as u8, bytes }
    }

    /// The label's text.
    pub fn as_str(&self) -> &str {
        // Built from a prefix of a `str` that ends on a character boundary.
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or_default()
    }
}

impl std::fmt::Debug for KeyLabel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl std::fmt::Display for KeyLabel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Encoded as a string (postcard: a length, then the UTF-8 bytes).
impl Serialize for KeyLabel {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// A label longer than [`MAX_KEY_LABEL`] bytes is refused: no encoder writes one.
impl<'de> Deserialize<'de> for KeyLabel {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        if text.len() > MAX_KEY_LABEL {
            return Err(serde::de::Error::custom(format!("key label of {} bytes exceeds {MAX_KEY_LABEL}", text.len())));
        }
        Ok(KeyLabel::new(&text))
    }
}

impl ActionState {
    /// Whether the action completed.
    pub fn is_completed(&self) -> bool {
        matches!(self.progress, Progress::Completed { .. })
    }

    /// Output events of a completed state; empty while pending.
    pub fn outputs(&self) -> &[Event] {
        match &self.progress {
            Progress::Completed { outputs, .. } => outputs,
            Progress::Pending { .. } => &[],
        }
    }

    /// The durable-call journal of a pending state; empty once completed.
    pub fn calls(&self) -> &[CallResult] {
        match &self.progress {
            Progress::Pending { calls } => calls,
            Progress::Completed { .. } => &[],
        }
    }
}

/// Where an action stands.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Progress {
    /// Started, not finished: the journal of durable calls made so far.
    Pending {
        /// Call results in call order.
        calls: Vec<CallResult>,
    },
    /// Finished: what it emitted and what it wrote to memory. The journal is dropped.
    Completed {
        /// Emitted events in emission order, with their original ids.
        outputs: Vec<Event>,
        /// Memory writes in the order they were made.
        memory: Vec<MemoryUpdate>,
    },
}

/// One durable call in the journal of a pending action.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallResult {
    /// Stable id of the called function.
    pub function_id: String,
    /// Digest of the call's arguments, computed by the caller.
    pub args_digest: [u8; 32],
    /// Outcome of the call.
    pub status: CallStatus,
}

impl CallResult {
    /// Whether this slot records a call to `function_id` with `args_digest`.
    pub fn matches(&self, function_id: &str, args_digest: &[u8; 32]) -> bool {
        self.function_id == function_id && &self.args_digest == args_digest
    }
}

/// Outcome of a durable call.
///
/// A unit or `None` result is a valid result: an empty payload under `Succeeded` is replayed as
/// such, never confused with "no result".
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(from = "WireCallStatus")]
pub enum CallStatus {
    /// Written before the call ran (reconcile mode); its outcome is unknown. `key` is the
    /// call's idempotency key, which a reconciler asks the called service about (`None` in
    /// slots written before keys were recorded).
    Pending {
        /// The call's idempotency key.
        key: Option<IdempotencyKey>,
    },
    /// The call returned; `result` is its encoded value (possibly empty).
    Succeeded {
        /// Encoded result.
        result: Vec<u8>,
    },
    /// The call failed; `error` is its encoded error.
    Failed {
        /// Encoded error.
        error: Vec<u8>,
    },
    /// A durable wait (not a call: `function_id` names the wait), not resolved yet.
    Waiting {
        /// Its secret, start and deadline.
        wait: WaitSlot,
    },
    /// A durable wait's first outcome.
    Resolved {
        /// Its secret, start and deadline, as recorded when it began.
        wait: WaitSlot,
        /// How it ended.
        outcome: WaitOutcome,
    },
}

impl CallStatus {
    /// The wait this slot records, if it records one rather than a call.
    pub fn wait(&self) -> Option<&WaitSlot> {
        match self {
            CallStatus::Waiting { wait } | CallStatus::Resolved { wait, .. } => Some(wait),
            _ => None,
        }
    }
}

/// How a [`CallStatus`] is encoded (docs/format.md, section 3): variants 0 to 2 as the first
/// format had them, the keyed PENDING slot added as variant 3 and durable waits as 4 and 5, so
/// that every record written before them reads as it did.
#[derive(Serialize, Deserialize)]
enum WireCallStatus {
    Pending,
    Succeeded { result: Vec<u8> },
    Failed { error: Vec<u8> },
    PendingKeyed { key: IdempotencyKey },
    Waiting { wait: WaitSlot },
    Resolved { wait: WaitSlot, outcome: WaitOutcome },
}

impl From<WireCallStatus> for CallStatus {
    fn from(w: WireCallStatus) -> Self {
        match w {
            WireCallStatus::Pending => CallStatus::Pending { key: None },
            WireCallStatus::PendingKeyed { key } => CallStatus::Pending { key: Some(key) },
            WireCallStatus::Succeeded { result } => CallStatus::Succeeded { result },
            WireCallStatus::Failed { error } => CallStatus::Failed { error },
            WireCallStatus::Waiting { wait } => CallStatus::Waiting { wait },
            WireCallStatus::Resolved { wait, outcome } => CallStatus::Resolved { wait, outcome },
        }
    }
}

/// [`WireCallStatus`] borrowing what it encodes: a slot's result is written where it lies, not
/// copied first (`serde(into)` clones the whole status on every encode, results included).
#[derive(Serialize)]
#[serde(rename = "WireCallStatus")]
enum WireCallStatusRef<'a> {
    Pending,
    Succeeded { result: &'a [u8] },
    Failed { error: &'a [u8] },
    PendingKeyed { key: &'a IdempotencyKey },
    Waiting { wait: &'a WaitSlot },
    Resolved { wait: &'a WaitSlot, outcome: &'a WaitOutcome },
}

impl Serialize for CallStatus {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            CallStatus::Pending { key: None } => WireCallStatusRef::Pending,
            CallStatus::Pending { key: Some(key) } => WireCallStatusRef::PendingKeyed { key },
            CallStatus::Succeeded { result } => WireCallStatusRef::Succeeded { result },
            CallStatus::Failed { error } => WireCallStatusRef::Failed { error },
            CallStatus::Waiting { wait } => WireCallStatusRef::Waiting { wait },
            CallStatus::Resolved { wait, outcome } => WireCallStatusRef::Resolved { wait, outcome },
        }
        .serialize(serializer)
    }
}

/// A memory write made by an action, replayed when the action is reused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryUpdate {
    /// Absolute memory path.
    pub path: String,
    /// The operation; replay must preserve its kind, not only its value.
    pub op: MemoryOp,
}

/// The kind of a memory write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MemoryOp {
    /// Set the path to a value.
    Set(TaggedBytes),
    /// Create a new (empty) object at the path.
    NewObject,
    /// Delete the path.
    Delete,
}

/// Opaque bytes with a tag naming their encoding (e.g. `"json"`, `"postcard"`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaggedBytes {
    /// Name of the encoding.
    pub tag: String,
    /// The encoded value.
    pub bytes: Vec<u8>,
}
