//! The side-effect ledger: the outside world's record of every real execution.
//!
//! It survives crashes (it is not part of the runtime), so after a run it can tell whether an
//! action or a durable call whose completion had been acknowledged ran again. When the
//! runtime lives in a process that is killed for real, the ledger also writes every entry to a
//! journal file as it happens ([`Ledger::journaled`]), and [`Ledger::replay_journal`] rebuilds
//! it from that file after the last process is gone.

use crate::agent;
use crate::results::RoundResults;
use actionstate_core::{Attributes, KeyId, StateKey};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{self, Write};

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
    /// Action bodies and durable calls a fenced attempt (a zombie) ran while it overlapped
    /// with the attempt that replaced it: side effects outside the store, which fencing
    /// cannot undo and the surviving attempts never see.
    pub zombie_effects: u64,
    /// Completions and durable-call results acknowledged to a zombie: appended to the log,
    /// and never to be replayed.
    pub zombie_acks: u64,
    /// Outcomes of durable waits delivered: completions of a waiting action acknowledged, by
    /// the outcome's name, once per incarnation of the action.
    pub waits_delivered: BTreeMap<&'static str, u64>,
    /// Completions of a waiting action acknowledged again in the same incarnation: an outcome
    /// delivered twice.
    pub waits_delivered_twice: u64,
    delivered: HashSet<(StateKey, u32)>,
    /// Whether what is recorded now is a zombie's (see [`set_zombie`](Self::set_zombie)).
    zombie: bool,
    attempt: u64,
    history: Vec<LedgerEntry>,
    journal: Option<std::fs::File>,
}

/// A ledger read back from its journal file ([`Ledger::replay_journal`]).
#[derive(Debug, Default)]
pub struct ReplayedJournal {
    /// The ledger, as if every entry had been recorded in one process.
    pub ledger: Ledger,
    /// Per round, the outputs of the last attempt that finished it.
    pub results: RoundResults,
    /// Complete lines read.
    pub lines: usize,
    /// Complete lines per attempt.
    pub lines_per_attempt: BTreeMap<u64, usize>,
    /// Whether the file ended in a line without its newline (a write cut by a kill; ignored).
    pub cut: bool,
}

fn bad_line(n: usize, line: &str, what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("ledger journal line {n}: {what}: {line:?}"))
}

impl Ledger {
    /// A ledger that also appends every entry to `file` as one line, with one `write(2)`
    /// before the event it records returns (side effects before they run, acknowledgements
    /// after they arrive). A process killed later loses none of them; a write cut by the kill
    /// leaves a last line without its newline, which [`replay_journal`](Self::replay_journal)
    /// ignores. `file` must be opened for appending and end with a newline (or be empty).
    ///
    /// Entries whose journal write fails panic: the outside world can no longer be told.
    pub fn journaled(file: std::fs::File) -> Self {
        Ledger { journal: Some(file), ..Ledger::default() }
    }

    fn journal(&mut self, line: std::fmt::Arguments<'_>) {
        if let Some(file) = &mut self.journal {
            let line = format!("{} {line}\n", self.attempt);
            if let Err(e) = file.write_all(line.as_bytes()) {
                panic!("the ledger journal could not be written: {e}");
            }
        }
    }

    /// Records that round `seq` of `key` finished with `results` (the outputs it delivered
    /// downstream). Only a journaled ledger keeps them, in its journal.
    pub fn round_done(&mut self, key: KeyId, seq: u64, results: &[(String, Vec<Attributes>)]) {
        if self.journal.is_some() {
            let bytes = match postcard::to_allocvec(results) {
                Ok(b) => b,
                Err(e) => panic!("round results could not be encoded: {e}"),
            };
            self.journal(format_args!("round {} {seq} {}", hex::encode(key.as_bytes()), hex::encode(bytes)));
        }
    }

    /// Rebuilds a ledger from the text of its journal file: every complete line is recorded
    /// again, in order, with its attempt. A last line without a newline is ignored.
    pub fn replay_journal(text: &str) -> io::Result<ReplayedJournal> {
        let (complete, cut) = match text.rfind('\n') {
            Some(i) => (&text[..=i], i + 1 < text.len()),
            None => ("", !text.is_empty()),
        };
        let mut out = ReplayedJournal { cut, ..ReplayedJournal::default() };
        for (i, line) in complete.lines().enumerate() {
            let n = i + 1;
            let mut f = line.splitn(4, ' ');
            let (Some(attempt), Some(kind), Some(arg)) = (f.next(), f.next(), f.next()) else {
                return Err(bad_line(n, line, "too few fields"));
            };
            let rest = f.next().unwrap_or("");
            let attempt: u64 = attempt.parse().map_err(|_| bad_line(n, line, "bad attempt"))?;
            let state_key = |s: &str| {
                let bytes = hex::decode(s).map_err(|_| bad_line(n, line, "bad state key"))?;
                StateKey::from_bytes(&bytes).map_err(|_| bad_line(n, line, "bad state key"))
            };
            let call_key = |s: &str| -> io::Result<CallKey> {
                let (cursor, function) = rest.split_once(' ').ok_or_else(|| bad_line(n, line, "bad call"))?;
                let cursor = cursor.parse().map_err(|_| bad_line(n, line, "bad call position"))?;
                let function = agent::CALLS
                    .iter()
                    .find(|f| **f == function)
                    .ok_or_else(|| bad_line(n, line, "unknown durable call"))?;
                Ok((state_key(s)?, cursor, *function))
            };
            let l = &mut out.ledger;
            l.set_attempt(attempt);
            match kind {
                "exec" => l.execute(&state_key(arg)?, rest),
                "call" => l.call(call_key(arg)?),
                "call-acked" => l.call_acked(call_key(arg)?),
                "done" => l.completion_acked(state_key(arg)?),
                "round" => {
                    let mut key = [0u8; KeyId::LEN];
                    hex::decode_to_slice(arg, &mut key).map_err(|_| bad_line(n, line, "bad business key"))?;
                    let (seq, results) = rest.split_once(' ').ok_or_else(|| bad_line(n, line, "bad round"))?;
                    let seq = seq.parse().map_err(|_| bad_line(n, line, "bad sequence number"))?;
                    let bytes = hex::decode(results).map_err(|_| bad_line(n, line, "bad results"))?;
                    let results = postcard::from_bytes(&bytes).map_err(|_| bad_line(n, line, "bad results"))?;
                    out.results.insert((KeyId(key), seq), results);
                }
                _ => return Err(bad_line(n, line, "unknown entry")),
            }
            out.lines = n;
            *out.lines_per_attempt.entry(attempt).or_default() += 1;
        }
        Ok(out)
    }

    /// Sets the attempt later entries of the history belong to (0 before the first crash).
    pub fn set_attempt(&mut self, attempt: u64) {
        self.attempt = attempt;
    }

    /// Every execution and acknowledged completion, in order, with its attempt.
    pub fn history(&self) -> &[LedgerEntry] {
        &self.history
    }

    /// Records what follows as a zombie's (`true`) or the surviving attempts' again: a
    /// zombie's executions and acknowledgements are counted apart, so that neither counts as
    /// acknowledged work nor as a duplicate of it.
    pub fn set_zombie(&mut self, zombie: bool) {
        self.zombie = zombie;
    }

    /// Records that the body of `key` runs now, `reason` being why it was not reused.
    pub fn execute(&mut self, key: &StateKey, reason: &str) {
        if self.zombie {
            self.zombie_effects += 1;
            return;
        }
        self.journal(format_args!("exec {} {reason}", hex::encode(key.to_bytes())));
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
        if self.zombie {
            self.zombie_effects += 1;
            return;
        }
        self.journal(format_args!("call {} {} {}", hex::encode(call.0.to_bytes()), call.1, call.2));
        self.calls_executed += 1;
        *self.calls.entry(call).or_default() += 1;
        if self.acked_calls.contains(&call) {
            self.duplicate_calls += 1;
        }
    }

    /// Records that a durable call's result was acknowledged as durable.
    pub fn call_acked(&mut self, call: CallKey) {
        if self.zombie {
            self.zombie_acks += 1;
            return;
        }
        self.journal(format_args!("call-acked {} {} {}", hex::encode(call.0.to_bytes()), call.1, call.2));
        self.acked_calls.insert(call);
    }

    /// Records that the completion of `key` was acknowledged as durable.
    pub fn completion_acked(&mut self, key: StateKey) {
        if self.zombie {
            self.zombie_acks += 1;
            return;
        }
        self.journal(format_args!("done {}", hex::encode(key.to_bytes())));
        self.history.push(LedgerEntry::Completed { attempt: self.attempt, key });
        self.acked.insert(key);
    }

    /// The completion of the waiting action `key` (incarnation `incarnation`), which received
    /// the outcome named `outcome`, was acknowledged.
    pub fn wait_delivered(&mut self, key: StateKey, incarnation: u32, outcome: &'static str) {
        if self.zombie {
            return;
        }
        if self.delivered.insert((key, incarnation)) {
            *self.waits_delivered.entry(outcome).or_default() += 1;
        } else {
            self.waits_delivered_twice += 1;
        }
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
