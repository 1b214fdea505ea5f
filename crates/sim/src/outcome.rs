//! What a run produced and observed ([`Outcome`]), and why it stopped early ([`SimError`]).

use crate::approvals::WaitFigures;
use crate::crash::{CrashPoint, Crashes, InjectedCrash};
use crate::ledger::Ledger;
use crate::results::{Memory, RoundResults};
use actionstate_recovery::StoreError;
use std::collections::BTreeMap;
use std::time::Duration;

/// Why a simulated run stopped early.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// An injected crash (expected; the runner restores).
    #[error(transparent)]
    Crash(#[from] InjectedCrash),
    /// The store failed for real.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The run's durable state in its directory (see [`RunDir`](crate::RunDir)) could not be
    /// read or written.
    #[error("run state: {0}")]
    State(#[from] std::io::Error),
    /// The external service a durable call went to failed (see [`crate::external`]).
    #[error(transparent)]
    External(#[from] crate::external::ExternalError),
    /// An answer of the [`OutsideApprover`](crate::OutsideApprover) is due and has not come,
    /// and it answers only while the runtime is stopped: this attempt stops here, and the
    /// next one, started once the approver answered, goes on.
    #[error("an approval is due and the outside approver answers while the runtime is stopped: stopping")]
    AwaitingApproval,
    /// An answer of the [`OutsideApprover`](crate::OutsideApprover) is due and did not come
    /// within the time the runtime waits for it.
    #[error("an approval was due and the outside approver did not answer within {seconds}s")]
    ApprovalMissing {
        /// How long the runtime waited.
        seconds: u64,
    },
}

/// A store error caused by an injected crash (the store wraps the crash log's error in its
/// own) is that crash, at the point where it struck; any other is the store's.
pub(crate) fn crash_or(e: StoreError, crashes: &Crashes) -> SimError {
    match crashes.take_crashed() {
        Some(point) => SimError::Crash(InjectedCrash(point)),
        None => SimError::Store(e),
    }
}

/// Everything a run produced and observed.
#[derive(Debug)]
pub struct Outcome {
    /// Backend name.
    pub backend: &'static str,
    /// Inputs processed (the source length after any truncation).
    pub inputs: usize,
    /// The side-effect ledger.
    pub ledger: Ledger,
    /// Completed actions reused.
    pub reused: u64,
    /// Pending actions resumed.
    pub resumed: u64,
    /// Final outputs per round.
    pub results: RoundResults,
    /// Final memory.
    pub memory: Memory,
    /// Crashes that fired.
    pub crashes: u64,
    /// Restores performed.
    pub restores: u64,
    /// Total rebuild time.
    pub rebuild_time: Duration,
    /// Records read by rebuilds (every store's, from a checkpoint or not).
    pub rebuild_records: u64,
    /// Rebuilds that finished: one per store of every attempt (a store without a checkpoint to
    /// restore rebuilds too, to take its epoch and fence the attempts before it).
    pub rebuilds: u64,
    /// Acknowledged completions that are neither in the log at the end nor legitimately
    /// invalidated.
    pub lost_acknowledged: u64,
    /// Checkpoints taken (completed and aborted).
    pub checkpoints: u64,
    /// The ids of the checkpoints that completed, in the order they did.
    pub completed_ids: Vec<u64>,
    /// The input source as finally processed (after any change or truncation).
    pub source: Vec<(u32, i64)>,
    /// Per crash that fired, the input position the attempt had reached: the round in
    /// progress, or the checkpoint taken once the rounds before it were done.
    pub crashed_at: Vec<usize>,
    /// Per crash that fired, where it struck, in firing order.
    pub crash_points: Vec<CrashPoint>,
    /// Per restore, the input position of the checkpoint it restored.
    pub restored_from: Vec<usize>,
    /// Store operations counted over the whole run (see [`CrashPoint::BeforeOperation`]).
    pub operations: u64,
    /// Appends counted over the whole run (see [`CrashPoint::BeforeAppend`]).
    pub appends: u64,
    /// Zombies: crashed attempts that kept running after the next restore
    /// ([`RunPlan::zombie_rounds`](crate::RunPlan::zombie_rounds)).
    pub zombies: u64,
    /// Zombie stores whose snapshot after their overlap failed with [`StoreError::Fenced`].
    pub zombies_fenced: u64,
    /// Records of a zombie in the log after the fence of the restore that replaced it (its
    /// upserts, by writer epoch, found by scanning every partition).
    pub zombie_appends: u64,
    /// Of those, how many a rebuild of a retained checkpoint (the oldest and the newest)
    /// indexed: must be 0.
    pub zombie_appends_replayed: u64,
    /// Inputs that queued behind their key's round while it waited for an approval.
    pub queued: u64,
    /// The durable waits of the approval step ([`SimConfig::approval_every`](crate::SimConfig::approval_every)).
    pub waits: WaitFigures,
}

impl Outcome {
    /// Nothing yet, on `backend`, with `inputs` in the source.
    pub(crate) fn new(backend: &'static str, inputs: usize) -> Self {
        Outcome {
            backend,
            inputs,
            ledger: Ledger::default(),
            reused: 0,
            resumed: 0,
            results: BTreeMap::new(),
            memory: BTreeMap::new(),
            crashes: 0,
            restores: 0,
            rebuild_time: Duration::ZERO,
            rebuild_records: 0,
            rebuilds: 0,
            lost_acknowledged: 0,
            checkpoints: 0,
            completed_ids: Vec::new(),
            source: Vec::new(),
            crashed_at: Vec::new(),
            crash_points: Vec::new(),
            restored_from: Vec::new(),
            operations: 0,
            appends: 0,
            zombies: 0,
            zombies_fenced: 0,
            zombie_appends: 0,
            zombie_appends_replayed: 0,
            queued: 0,
            waits: WaitFigures::default(),
        }
    }
}
