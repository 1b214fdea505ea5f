//! A running action's handle: its state key, what it was triggered by, and its durable-call
//! journal with the cursor of the next call.

use actionstate_core::{
    ActionId, ActionState, CallResult, EventId, Fingerprint, KeyLabel, Progress, StateKey, Trigger,
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
    pub(crate) journal: Vec<CallResult>,
    pub(crate) cursor: usize,
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

    /// The action's state with `progress`, to be written.
    pub(crate) fn state(&self, progress: Progress) -> ActionState {
        ActionState {
            label: self.label,
            key: self.key,
            action: self.action.clone(),
            trigger: self.trigger.clone(),
            trigger_event: self.trigger_event,
            input: self.input,
            progress,
        }
    }
}
