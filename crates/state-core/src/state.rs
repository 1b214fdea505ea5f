//! Action states, the durable-call journal and memory updates.

use crate::event::{Event, Trigger};
use crate::id::{ActionId, EventId, Fingerprint};
use crate::key::StateKey;
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CallStatus {
    /// Written before the call ran (reconcile mode); its outcome is unknown.
    Pending,
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
