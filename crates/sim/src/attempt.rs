//! One attempt of a run: the process between two crashes, with its stores and where it
//! stands in the input source; and what every attempt of a run shares.

use crate::approvals::Approver;
use crate::crash::{CrashLog, Crashes};
use crate::external::ExternalClient;
use crate::ledger::Ledger;
use crate::outcome::Outcome;
use crate::plan::mix;
use crate::results::Memory;
use crate::source::LogSource;
use actionstate_core::{EventId, KeyId};
use actionstate_recovery::{ActionStateStore, Clock, Ownership, TwoPhase};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

/// The log every store of an attempt writes through: the source's, with crashes injected.
pub(crate) type Log<S> = Arc<CrashLog<<S as LogSource>::Log>>;

/// What every attempt of a run shares.
pub(crate) struct Run<'a> {
    pub(crate) source: &'a [(u32, i64)],
    pub(crate) crashes: &'a Crashes,
    pub(crate) ledger: &'a Mutex<Ledger>,
    /// The person who approves (see `approvals.rs`): outside the runtime, like the ledger.
    pub(crate) approver: &'a Mutex<Approver>,
    pub(crate) outcome: &'a mut Outcome,
}

/// A round whose action waits durably: key number, input value and sequence number, enough
/// to run the round again (its completed actions reused) once the wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Parked {
    pub(crate) k: u32,
    pub(crate) v: i64,
    pub(crate) seq: u64,
}

/// One attempt: a store per owner, the input position, and the runtime's own state.
pub(crate) struct Attempt<S: LogSource> {
    /// Two-phase stores: the simulated runtime keeps the checkpoints, as Flink does.
    pub(crate) stores: Vec<ActionStateStore<Log<S>, TwoPhase>>,
    pub(crate) owners: Vec<Ownership>,
    pub(crate) pos: usize,
    pub(crate) next_seq: HashMap<KeyId, u64>,
    pub(crate) memory: Memory,
    pub(crate) ids: u64,
    pub(crate) attempt: u64,
    /// The id of the next checkpoint.
    pub(crate) checkpoint_id: u64,
    /// Where the agent's durable calls go, when not computed in process.
    pub(crate) external: Option<Arc<ExternalClient>>,
    /// Per key, its round that waits (at most one: later inputs queue behind it).
    pub(crate) parked: BTreeMap<KeyId, Parked>,
    /// Per key with a parked round, the inputs queued behind it (key number, value).
    pub(crate) deferred: BTreeMap<KeyId, VecDeque<(u32, i64)>>,
    /// The clock the stores time waits by: moved by the runtime, one step at a time.
    pub(crate) clock: Clock,
}

impl<S: LogSource> Attempt<S> {
    /// Waits for what the attempt's stores do in the background (reclaiming history): a
    /// crashed process holds no files, but an attempt of this process keeps its log open
    /// until its tasks are done, and the next attempt opens the same log.
    pub(crate) async fn settle(&self) {
        for store in &self.stores {
            store.wait_for_reclaim().await;
        }
    }

    /// A new event id, seeded by `seed` and the attempt (a restarted process mints new ids).
    pub(crate) fn fresh_id(&mut self, seed: u64) -> EventId {
        self.ids += 1;
        let hi = mix(seed, 0x10 + self.attempt, self.ids);
        let lo = mix(seed, 0x20 + self.attempt, self.ids);
        EventId((u128::from(hi) << 64) | u128::from(lo))
    }
}
