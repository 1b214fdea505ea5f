//! A running action's handle: its state key, what it was triggered by, and its durable-call
//! journal with the cursor of the next call.

use actionstate_core::{
    ActionId, ActionState, CallResult, EventId, Fingerprint, IdempotencyKey, KeyLabel, Progress, StateKey,
    TraceContext, Trigger,
};

/// A running action: where its durable calls stand. Obtained from
/// [`ActionStateStore::begin`](crate::ActionStateStore::begin).
#[derive(Debug)]
pub struct ActionHandle {
    pub(crate) key: StateKey,
    pub(crate) action: ActionId,
    pub(crate) trigger: Trigger,
    pub(crate) trigger_event: EventId,
    pub(crate) input: Fingerprint,
    pub(crate) label: Option<KeyLabel>,
    /// The trace context the state records: the one a former attempt recorded, or this
    /// attempt's own for a state written first now.
    pub(crate) trace: Option<TraceContext>,
    pub(crate) journal: Vec<CallResult>,
    pub(crate) cursor: usize,
    /// How many times an invalidation removed this state before: part of its calls' keys.
    pub(crate) incarnation: u32,
    /// The store's [`call_key_scope`](crate::StoreConfig::call_key_scope).
    pub(crate) scope: std::sync::Arc<str>,
    /// A durable wait suspended the action: the handle refuses further work.
    pub(crate) suspended: bool,
    /// The span of this attempt (`actionstate.action`): its calls and waits are inside it,
    /// and it ends with the handle.
    pub(crate) span: tracing::Span,
}

impl ActionHandle {
    /// The state key of this action.
    pub fn key(&self) -> &StateKey {
        &self.key
    }

    /// The durable-call journal as currently known (recovered slots plus calls made now).
    pub fn journal(&self) -> &[CallResult] {
        &self.journal
    }

    /// Index of the next durable call.
    pub fn cursor(&self) -> usize {
        self.cursor
    }

    /// How many times an invalidation (a divergence, an operator's repair) removed this
    /// action's state before this run: 0 for a history never invalidated. It goes into the
    /// idempotency keys of the action's calls.
    pub fn incarnation(&self) -> u32 {
        self.incarnation
    }

    /// The idempotency key of the next durable call, if it calls `function_id` with
    /// arguments of digest `args_digest` (see [`IdempotencyKey`]): what
    /// [`call`](crate::ActionStateStore::call) hands its closure.
    pub fn next_call_key(&self, function_id: &str, args_digest: &[u8; 32]) -> IdempotencyKey {
        IdempotencyKey::derive(&self.scope, &self.key, self.incarnation, self.cursor, function_id, args_digest)
    }

    /// The trace context the action's state records: that of the attempt that first wrote it
    /// (a former one, for a resumed action), or the one this attempt records if it writes
    /// first. `None` when the round came in no trace and the build exports no spans.
    pub fn trace(&self) -> Option<&TraceContext> {
        self.trace.as_ref()
    }

    /// Whether a durable wait suspended the action: its handle then refuses calls, waits and
    /// completion, and the action goes on when the runtime begins it again.
    pub fn is_suspended(&self) -> bool {
        self.suspended
    }

    /// [`StoreError::Suspended`](crate::StoreError::Suspended) once a wait suspended the action.
    pub(crate) fn check_live(&self) -> crate::Result<()> {
        if self.suspended {
            return Err(crate::StoreError::Suspended { key: self.key });
        }
        Ok(())
    }

    /// The action's state with `progress`, to be written.
    pub(crate) fn state(&self, progress: Progress) -> ActionState {
        ActionState {
            label: self.label,
            trace: self.trace,
            key: self.key,
            action: self.action.clone(),
            trigger: self.trigger.clone(),
            trigger_event: self.trigger_event,
            input: self.input,
            progress,
        }
    }
}
