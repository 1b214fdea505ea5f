//! The store's map of the durable waits its pending states record: from a wait's secret to its
//! state and journal slot, with what a listing shows. It follows the index: every put notes
//! the waits of the state it wrote, every invalidation forgets the states it removed, and a
//! restore reads the pending states once. Its size is the live waits', not the history's.
//! Beside it, how far the store read the resolve requests of other processes.

use actionstate_core::{
    ActionId, ActionState, CallStatus, Error, KeyId, KeyLabel, LogRecord, ReadRecord, ResolveRequest, StateKey,
    WaitSecret, codec,
};
use std::collections::HashMap;

/// One durable wait as the store knows it.
#[derive(Clone, Debug)]
pub(crate) struct WaitAt {
    pub(crate) state: StateKey,
    pub(crate) slot: usize,
    pub(crate) name: String,
    pub(crate) action: ActionId,
    pub(crate) label: Option<KeyLabel>,
    pub(crate) since_ms: u64,
    pub(crate) deadline_ms: Option<u64>,
    /// The outcome's name once resolved.
    pub(crate) outcome: Option<&'static str>,
    /// Whether the action went on past the wait (a later slot is durable).
    pub(crate) resumed: bool,
}

/// The waits of the pending states, by secret and by state.
#[derive(Debug, Default)]
pub(crate) struct Waits {
    by_secret: HashMap<WaitSecret, WaitAt>,
    by_state: HashMap<StateKey, Vec<WaitSecret>>,
}

impl Waits {
    /// `state` was written (or replayed): its waits replace what was known of its key.
    pub(crate) fn note(&mut self, state: &ActionState) {
        if !self.by_state.is_empty() {
            self.forget(&state.key);
        }
        let calls = state.calls();
        let mut secrets = Vec::new();
        for (slot, call) in calls.iter().enumerate() {
            let Some(wait) = call.status.wait() else { continue };
            let outcome = match &call.status {
                CallStatus::Resolved { outcome, .. } => Some(outcome.name()),
                _ => None,
            };
            secrets.push(wait.secret);
            self.by_secret.insert(
                wait.secret,
                WaitAt {
                    state: state.key,
                    slot,
                    name: call.function_id.clone(),
                    action: state.action.clone(),
                    label: state.label,
                    since_ms: wait.since_ms,
                    deadline_ms: wait.deadline_ms,
                    outcome,
                    resumed: slot + 1 < calls.len(),
                },
            );
        }
        if !secrets.is_empty() {
            self.by_state.insert(state.key, secrets);
        }
    }

    /// The state `key` left the index (invalidated, completed, pruned): its waits are void.
    pub(crate) fn forget(&mut self, key: &StateKey) {
        for secret in self.by_state.remove(key).unwrap_or_default() {
            self.by_secret.remove(&secret);
        }
    }

    /// The wait with `secret`, if its business key is `key`.
    pub(crate) fn get(&self, key: &KeyId, secret: &WaitSecret) -> Option<&WaitAt> {
        self.by_secret.get(secret).filter(|w| w.state.key == *key)
    }

    /// Every wait, in no particular order.
    pub(crate) fn all(&self) -> impl Iterator<Item = (&WaitSecret, &WaitAt)> {
        self.by_secret.iter()
    }

    /// Forgets every wait (a restore reads them again).
    pub(crate) fn clear(&mut self) {
        self.by_secret.clear();
        self.by_state.clear();
    }
}

/// Where the owner stands in reading the resolve requests other processes append
/// (`requests.rs`).
#[derive(Debug, Default)]
pub(crate) struct Requests {
    /// Per partition, the offset below which every record was read for requests (empty: the
    /// store read nothing yet, and a poll starts at the oldest pending wait).
    pub(crate) read_to: Vec<u64>,
    /// Requests read and not settled yet, in log order per partition.
    pub(crate) found: Vec<ResolveRequest>,
}

/// The resolve request `r` of `partition` holds, if it holds one (a record under a resolve
/// key that is not one fails to decode).
pub(crate) fn request_of(partition: u32, r: &ReadRecord) -> Result<Option<ResolveRequest>, Error> {
    match codec::decode(&r.key, &r.value).map_err(|e| e.at(partition, r.offset))? {
        LogRecord::Resolve(request) => Ok(Some(request)),
        _ => Ok(None),
    }
}
