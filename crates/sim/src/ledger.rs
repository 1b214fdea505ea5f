//! The side-effect ledger: the outside world's record of every real execution.
//!
//! It survives crashes (it is not part of the runtime), so after a run it can tell whether an
//! action or a durable call whose completion had been acknowledged ran again.

use actionstate_core::StateKey;
use std::collections::{BTreeMap, HashMap, HashSet};

/// Identity of one durable call: the action's state key, the call's position in its journal
/// and its function id.
pub type CallKey = (StateKey, usize, &'static str);

/// One entry of the ledger's history, in the order things happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LedgerEntry {
    /// The body of `key` ran in `attempt` (0 = before the first crash); `reason` says why it
    /// was not reused (a miss reason, or `resumed`).
    Executed {
        /// The attempt.
        attempt: u64,
        /// The action's state key.
        key: StateKey,
        /// Why it ran.
        reason: String,
    },
    /// The completion of `key` was acknowledged as durable in `attempt`.
    Completed {
        /// The attempt.
        attempt: u64,
        /// The action's state key.
        key: StateKey,
    },
}

/// Every execution of an action body and of a durable call, across all attempts of a run.
#[derive(Debug, Default)]
pub struct Ledger {
    executions: HashMap<StateKey, u32>,
    acked: HashSet<StateKey>,
    calls: HashMap<CallKey, u32>,
    acked_calls: HashSet<CallKey>,
    /// Executions of an action after its completion had been acknowledged.
    pub duplicate_actions: u64,
    /// Executions of a durable call after its result had been acknowledged.
    pub duplicate_calls: u64,
    /// Executions of an action body.
    pub executed: u64,
    /// Re-executions (the action had run in an earlier attempt), by reason.
    pub reexecuted: BTreeMap<String, u64>,
    /// Durable calls executed (the function ran).
    pub calls_executed: u64,
    /// Durable calls replayed from the journal.
    pub calls_replayed: u64,
    /// Durable calls resolved by the reconciler.
    pub calls_reconciled: u64,
    attempt: u64,
    history: Vec<LedgerEntry>,
}

impl Ledger {
    /// Sets the attempt later entries of the history belong to (0 before the first crash).
    pub fn set_attempt(&mut self, attempt: u64) {
        self.attempt = attempt;
    }

    /// Every execution and acknowledged completion, in order, with its attempt.
    pub fn history(&self) -> &[LedgerEntry] {
        &self.history
    }

    /// Records that the body of `key` runs now, `reason` being why it was not reused.
    pub fn execute(&mut self, key: &StateKey, reason: &str) {
        self.history.push(LedgerEntry::Executed { attempt: self.attempt, key: *key, reason: reason.to_owned() });
        self.executed += 1;
        let n = self.executions.entry(*key).or_default();
        *n += 1;
        if *n > 1 {
            *self.reexecuted.entry(reason.to_owned()).or_default() += 1;
        }
        if self.acked.contains(key) {
            self.duplicate_actions += 1;
        }
    }

    /// Records that a durable call's function runs now.
    pub fn call(&mut self, call: CallKey) {
        self.calls_executed += 1;
        *self.calls.entry(call).or_default() += 1;
        if self.acked_calls.contains(&call) {
            self.duplicate_calls += 1;
        }
    }

    /// Records that a durable call's result was acknowledged as durable.
    pub fn call_acked(&mut self, call: CallKey) {
        self.acked_calls.insert(call);
    }

    /// Records that the completion of `key` was acknowledged as durable.
    pub fn completion_acked(&mut self, key: StateKey) {
        self.history.push(LedgerEntry::Completed { attempt: self.attempt, key });
        self.acked.insert(key);
    }

    /// Completions acknowledged so far.
    pub fn acked(&self) -> &HashSet<StateKey> {
        &self.acked
    }

    /// How often the body of `key` ran.
    pub fn executions(&self, key: &StateKey) -> u32 {
        self.executions.get(key).copied().unwrap_or(0)
    }

    /// How often the function of a durable call ran.
    pub fn call_executions(&self, call: &CallKey) -> u32 {
        self.calls.get(call).copied().unwrap_or(0)
    }

    /// Duplicate side effects: executions of acknowledged work.
    pub fn duplicates(&self) -> u64 {
        self.duplicate_actions + self.duplicate_calls
    }
}
