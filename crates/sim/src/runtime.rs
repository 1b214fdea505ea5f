//! The runtime: processes keyed inputs round by round through the store, takes checkpoints,
//! crashes where told, restores and replays.

use crate::agent::{self, BOOTSTRAP, Kind};
use crate::crash::{CrashLog, CrashPoint, Crashes, InjectedCrash};
use crate::ledger::Ledger;
use crate::run_dir::RunDir;
use actionstate_core::{
    ActionState, Attributes, Event, EventId, KeyId, LogRecord, Marker, MemoryOp, MemoryUpdate, Position, RangeRead,
    StateKey, StateLog, TaggedBytes, Trigger, Value, codec,
};
use actionstate_recovery::{
    ActionHandle, ActionStateStore, AnyLog, Begin, CallSource, LogConfig, Ownership, Retention, Round, StoreConfig,
    StoreError,
};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Opens the log a simulated process uses; called again after every crash.
pub trait LogSource: Send + Sync {
    /// The log type.
    type Log: StateLog;
    /// Backend name for reports.
    fn backend(&self) -> &'static str;
    /// Opens (or reopens) the log.
    fn open(&self) -> impl Future<Output = Result<Self::Log, StoreError>> + Send;
}

/// The log a URL names ([`LogConfig`]): every open, and every reopen after a crash, opens it
/// again, creating it on the first open. `memory` is refused: a memory log opened from a URL
/// would start empty at every reopen (use [`MemorySource`]).
impl LogSource for LogConfig {
    type Log = AnyLog;
    fn backend(&self) -> &'static str {
        match self {
            #[cfg(feature = "kafka")]
            LogConfig::Kafka(_) => "kafka",
            #[cfg(feature = "fluss")]
            LogConfig::Fluss(_) => "fluss",
            LogConfig::Memory { .. } => "memory",
            _ => "file",
        }
    }
    async fn open(&self) -> Result<Self::Log, StoreError> {
        if let LogConfig::Memory { .. } = self {
            return Err(StoreError::Config {
                value: self.to_string(),
                detail: "a memory log does not survive a reopen; simulate on it through MemorySource".into(),
            });
        }
        // On the heap: the opening futures of every backend would otherwise sit inline in
        // every attempt's future.
        Box::pin(actionstate_recovery::open(self)).await
    }
}

/// The in-memory log (records survive "crashes" because the source keeps them).
#[derive(Clone, Debug)]
pub struct MemorySource {
    /// The shared log.
    pub log: actionstate_memory::MemoryLog,
}

impl LogSource for MemorySource {
    type Log = actionstate_memory::MemoryLog;
    fn backend(&self) -> &'static str {
        "memory"
    }
    async fn open(&self) -> Result<Self::Log, StoreError> {
        Ok(self.log.reopen())
    }
}

/// What to simulate.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Seed of everything random (inputs, event ids, aborted checkpoints).
    pub seed: u64,
    /// Distinct business keys.
    pub keys: u32,
    /// Inputs in the source.
    pub inputs: usize,
    /// A checkpoint is taken after every this many inputs.
    pub checkpoint_every: usize,
    /// Every this-many-th checkpoint is aborted instead of completed (0: never).
    pub abort_every: u64,
    /// Owners (workers) at the start; keys are split among them by key group.
    pub owners: u32,
    /// Whether `work` uses reconcile mode for its second call.
    pub reconcile: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig { seed: 1, keys: 4, inputs: 24, checkpoint_every: 4, abort_every: 3, owners: 1, reconcile: false }
    }
}

/// Which checkpoint a restore goes back to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestoreFrom {
    /// The newest completed checkpoint.
    Latest,
    /// The `n`-th newest completed checkpoint (0 = latest), or the oldest if there are fewer.
    Back(usize),
}

/// A change to the input source seen after the first restore.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputChange {
    /// The first input replayed after the restore gets another value (+1000, which also
    /// changes `v % 3` and with it the attributes of the `task` events `plan` emits).
    ChangeFirstReplayed,
    /// The first input replayed after the restore gets another value with the same `v % 3`
    /// (+999): the changed root emits `task` events with the same attributes as before, so
    /// only their producer tells the new children from the old ones.
    ChangeFirstReplayedSameChildren,
    /// The first two replayed inputs of one key swap places.
    SwapFirstReplayed,
}

/// How a run goes: where it crashes and how it restores.
#[derive(Clone, Debug)]
pub struct RunPlan {
    /// Injected crashes.
    pub crashes: Vec<CrashPoint>,
    /// Restore policy per restore, in order; the last one repeats.
    pub restore_from: Vec<RestoreFrom>,
    /// Owners after each restore, in order; the last one repeats (empty: keep).
    pub owners_after_restore: Vec<u32>,
    /// Input change after the first restore.
    pub change: Option<InputChange>,
    /// Keep only the first `n` inputs of the source after the first restore (a truncated
    /// replay).
    pub truncate_after_restore: Option<usize>,
    /// Per crash, in order, how many rounds the crashed attempt keeps processing after the
    /// next attempt restored (0 or missing: it is dead). Such an attempt was only presumed
    /// dead: a zombie, which the restore fenced. Its side effects are counted apart
    /// ([`Ledger::zombie_effects`]), none of its records may be replayed
    /// ([`Outcome::zombie_appends_replayed`]), and its snapshot must fail with
    /// [`StoreError::Fenced`].
    pub zombie_rounds: Vec<u64>,
}

impl RunPlan {
    /// A run without crashes.
    pub fn clean() -> Self {
        RunPlan {
            crashes: Vec::new(),
            restore_from: vec![RestoreFrom::Latest],
            owners_after_restore: Vec::new(),
            change: None,
            truncate_after_restore: None,
            zombie_rounds: Vec::new(),
        }
    }

    /// Crashes at `points`, restoring from the latest checkpoint each time.
    pub fn crashing(points: impl IntoIterator<Item = CrashPoint>) -> Self {
        RunPlan { crashes: points.into_iter().collect(), ..RunPlan::clean() }
    }
}

/// Why a simulated run stopped early.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// An injected crash (expected; the runner restores).
    #[error(transparent)]
    Crash(#[from] InjectedCrash),
    /// The store failed for real.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The run's durable state in its directory (see [`RunDir`]) could not be read or written.
    #[error("run state: {0}")]
    State(#[from] std::io::Error),
}

/// Per round, the actions and the attributes of what they emitted (ids differ between runs).
pub type RoundResults = BTreeMap<(KeyId, u64), Vec<(String, Vec<Attributes>)>>;
/// Per key, the agent memory.
pub type Memory = BTreeMap<KeyId, BTreeMap<String, Vec<u8>>>;

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
    /// ([`RunPlan::zombie_rounds`]).
    pub zombies: u64,
    /// Zombie stores whose snapshot after their overlap failed with [`StoreError::Fenced`].
    pub zombies_fenced: u64,
    /// Records of a zombie in the log after the fence of the restore that replaced it (its
    /// upserts, by writer epoch, found by scanning every partition).
    pub zombie_appends: u64,
    /// Of those, how many a rebuild of a retained checkpoint (the oldest and the newest)
    /// indexed: must be 0.
    pub zombie_appends_replayed: u64,
}

/// A completed checkpoint: the runtime's own state (input position, next sequence number per
/// key, memory) and the store's (every owner's marker, and the last completed round per key).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Checkpoint {
    pub(crate) id: u64,
    pos: usize,
    next_seq: HashMap<KeyId, u64>,
    memory: Memory,
    markers: Vec<Marker>,
    completed: HashMap<KeyId, u64>,
}

impl Checkpoint {
    /// The last round of every key the checkpoint's inputs had finished (the stores'
    /// `completed` maps leave out keys with nothing left to restore).
    fn rounds_done(&self) -> HashMap<KeyId, u64> {
        self.next_seq.iter().filter_map(|(k, n)| n.checked_sub(1).map(|s| (*k, s))).collect()
    }
}

/// Where completed checkpoints are kept: in memory by [`Sim::run`], in a directory by
/// [`Sim::run_attempt`]. A checkpoint is kept before the stores are told it completed.
pub(crate) trait KeepCheckpoints: Send {
    fn keep(&mut self, checkpoint: &Checkpoint) -> std::io::Result<()>;
}

impl KeepCheckpoints for Vec<Checkpoint> {
    fn keep(&mut self, checkpoint: &Checkpoint) -> std::io::Result<()> {
        self.push(checkpoint.clone());
        Ok(())
    }
}

impl KeepCheckpoints for &RunDir {
    fn keep(&mut self, checkpoint: &Checkpoint) -> std::io::Result<()> {
        self.save_checkpoint(checkpoint)
    }
}

type Log<S> = Arc<CrashLog<<S as LogSource>::Log>>;

/// What every attempt of a run shares.
struct Run<'a> {
    source: &'a [(u32, i64)],
    crashes: &'a Crashes,
    ledger: &'a Mutex<Ledger>,
    outcome: &'a mut Outcome,
}

struct Attempt<S: LogSource> {
    stores: Vec<ActionStateStore<Log<S>>>,
    owners: Vec<Ownership>,
    pos: usize,
    next_seq: HashMap<KeyId, u64>,
    memory: Memory,
    ids: u64,
    attempt: u64,
    /// The id of the next checkpoint.
    checkpoint_id: u64,
}

impl<S: LogSource> Attempt<S> {
    /// Waits for what the attempt's stores do in the background (reclaiming history): a
    /// crashed process holds no files, but an attempt of this process keeps its log open
    /// until its tasks are done, and the next attempt opens the same log.
    async fn settle(&self) {
        for store in &self.stores {
            store.wait_for_reclaim().await;
        }
    }
}

/// A deterministic simulated agent runtime over a log source.
#[derive(Debug)]
pub struct Sim<S: LogSource> {
    source: S,
    config: SimConfig,
    inputs: Option<Vec<(u32, i64)>>,
}

/// Key groups used to split keys among owners.
const MAX_GROUPS: u16 = 128;

fn ownerships(owners: u32) -> Vec<Ownership> {
    let n = u16::try_from(owners.clamp(1, u32::from(MAX_GROUPS))).unwrap_or(1);
    (0..n)
        .map(|i| {
            let lo = MAX_GROUPS / n * i;
            let hi = if i + 1 == n { MAX_GROUPS } else { MAX_GROUPS / n * (i + 1) };
            if n == 1 { Ownership::All } else { Ownership::Groups { max_groups: MAX_GROUPS, owned: lo..hi } }
        })
        .collect()
}

/// The id of the oldest checkpoint the stores' retention keeps (`None`: all of them), given
/// the ids of the completed checkpoints in completion order.
fn retained_floor(completed: &[u64]) -> Option<u64> {
    match StoreConfig::default().retention {
        Retention::KeepAll => None,
        Retention::LastCheckpoints(n) => completed.iter().rev().nth(n.max(1) as usize - 1).copied(),
    }
}

fn mix(seed: u64, a: u64, b: u64) -> u64 {
    let mut h = blake3::Hasher::new();
    h.update(&seed.to_le_bytes());
    h.update(&a.to_le_bytes());
    h.update(&b.to_le_bytes());
    let mut w = [0u8; 8];
    w.copy_from_slice(&h.finalize().as_bytes()[..8]);
    u64::from_le_bytes(w)
}

/// The input source: (key number, value).
pub fn inputs(config: &SimConfig) -> Vec<(u32, i64)> {
    (0..config.inputs as u64)
        .map(|i| {
            let r = mix(config.seed, 0x1, i);
            ((r % u64::from(config.keys.max(1))) as u32, ((r >> 32) % 1000) as i64)
        })
        .collect()
}

/// The name the simulated application gives key number `k`: its states carry it as their
/// label.
pub fn key_name(k: u32) -> String {
    format!("sim-key-{k}")
}

/// The business key of key number `k`.
pub fn key_id(k: u32) -> KeyId {
    KeyId::of(key_name(k).as_bytes())
}

impl<S: LogSource> Sim<S> {
    /// A simulator.
    pub fn new(source: S, config: SimConfig) -> Self {
        Sim { source, config, inputs: None }
    }

    /// Processes `inputs` (key number, value) instead of the source [`inputs`] derives from
    /// the configuration — for example a crash-free reference over an input source a crashing
    /// run changed ([`Outcome::source`]).
    pub fn with_inputs(mut self, inputs: Vec<(u32, i64)>) -> Self {
        self.inputs = Some(inputs);
        self
    }

    /// The configuration.
    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    /// Runs the whole input source under `plan`: crashes where it says, restores and replays
    /// until every input is processed. `progress` is told the input position as it advances.
    pub async fn run(&self, plan: &RunPlan, progress: &(dyn Fn(usize) + Sync)) -> Result<Outcome, StoreError> {
        let crashes = Crashes::new(plan.crashes.iter().copied());
        let ledger = Mutex::new(Ledger::default());
        let mut source = self.inputs.clone().unwrap_or_else(|| inputs(&self.config));
        let mut outcome = self.new_outcome(source.len());
        let mut checkpoints: Vec<Checkpoint> = Vec::new();
        let mut changed_keys: HashMap<KeyId, u64> = HashMap::new();
        let mut attempt_no = 0u64;
        let mut owners = self.config.owners;
        let mut restore_point: Option<Checkpoint> = None;
        // A crashed attempt that keeps running after the next restore, and for how many rounds.
        let mut zombie: Option<(Attempt<S>, u64)> = None;
        let mut zombie_epochs: HashSet<u64> = HashSet::new();
        loop {
            ledger.lock().set_attempt(attempt_no);
            let log: Log<S> = match &zombie {
                // The zombie still holds the log (an embedded store allows one handle).
                Some((z, _)) => Arc::clone(z.stores[0].log()),
                None => Arc::new(CrashLog::new(self.source.open().await?, Arc::clone(&crashes))),
            };
            let restored = self.restore(log, owners, attempt_no, restore_point.as_ref(), &mut outcome).await;
            let mut attempt = match restored {
                Ok(attempt) => attempt,
                // A crash during the restore (its fences are appends too): the next attempt
                // restores the same checkpoint again.
                Err(e) => match crashes.take_crashed() {
                    Some(point) => {
                        outcome.crashes += 1;
                        outcome.crashed_at.push(restore_point.as_ref().map_or(0, |c| c.pos));
                        outcome.crash_points.push(point);
                        attempt_no += 1;
                        continue;
                    }
                    None => return Err(e),
                },
            };
            if checkpoints.is_empty() {
                // Checkpoint 0 before any input: a crash before the first periodic checkpoint
                // restores from it and replays the log from the start. Taken again by every
                // attempt until it succeeds (a crash can hit it), or a later crash would
                // restart with an empty index and run acknowledged actions again.
                let cp = self.checkpoint(&mut attempt, 0, &crashes, &mut outcome, &mut checkpoints).await;
                match cp {
                    Ok(()) => {}
                    Err(SimError::Store(e)) => return Err(e),
                    Err(SimError::State(e)) => return Err(StoreError::Task(e.to_string())),
                    Err(SimError::Crash(InjectedCrash(point))) => {
                        attempt.settle().await;
                        outcome.crashes += 1;
                        outcome.crashed_at.push(attempt.pos);
                        outcome.crash_points.push(point);
                        attempt_no += 1;
                        continue;
                    }
                }
            }
            if let Some((z, _)) = &zombie {
                zombie_epochs.extend(z.stores.iter().map(ActionStateStore::epoch));
            }
            let mut run = Run { source: &source, crashes: &crashes, ledger: &ledger, outcome: &mut outcome };
            let result = self.process(&mut attempt, &mut run, &mut zombie, &mut checkpoints, progress).await;
            if let Some((z, rounds)) = zombie.take() {
                // The source ended first.
                self.overlap(z, rounds, &mut run).await;
            }
            match result {
                Ok(()) => {
                    outcome.memory = attempt.memory.clone();
                    attempt.settle().await;
                    if !zombie_epochs.is_empty() {
                        let oldest = retained_floor(&outcome.completed_ids);
                        let retained: Vec<&Checkpoint> =
                            checkpoints.iter().filter(|c| oldest.is_none_or(|o| c.id >= o)).collect();
                        let log = Arc::clone(attempt.stores[0].log());
                        let (appends, replayed) = zombie_records(&log, &zombie_epochs, &retained).await?;
                        outcome.zombie_appends = appends;
                        outcome.zombie_appends_replayed = replayed;
                    }
                    break;
                }
                Err(e) => {
                    let point = match e {
                        SimError::Crash(InjectedCrash(point)) => point,
                        SimError::Store(e) => match crashes.take_crashed() {
                            Some(point) => point,
                            None => return Err(e),
                        },
                        SimError::State(e) => return Err(StoreError::Task(e.to_string())),
                    };
                    // A crash reported directly leaves its point to take as well.
                    crashes.take_crashed();
                    attempt.settle().await;
                    outcome.crashes += 1;
                    outcome.crashed_at.push(attempt.pos);
                    outcome.crash_points.push(point);
                    attempt_no += 1;
                    let n = (outcome.restores as usize).min(plan.restore_from.len().saturating_sub(1));
                    let back = match plan.restore_from.get(n).copied().unwrap_or(RestoreFrom::Latest) {
                        RestoreFrom::Latest => 0,
                        RestoreFrom::Back(b) => b,
                    };
                    // Only checkpoints retention keeps can be restored: the last ones to
                    // complete, counted as they completed (a restore does not undo them).
                    let oldest = retained_floor(&outcome.completed_ids);
                    let kept = checkpoints.iter().position(|c| oldest.is_none_or(|o| c.id >= o));
                    let chosen = checkpoints.len().saturating_sub(1 + back).max(kept.unwrap_or(0));
                    restore_point = checkpoints.get(chosen).cloned();
                    checkpoints.truncate(chosen + 1);
                    if let Some(o) = plan.owners_after_restore.get(n).or(plan.owners_after_restore.last()) {
                        owners = *o;
                    }
                    if outcome.restores == 0 {
                        let from = restore_point.as_ref().map_or(0, |c| c.pos);
                        self.change_source(&mut source, from, plan, &mut changed_keys, restore_point.as_ref());
                        outcome.inputs = source.len();
                    }
                    let overlap = plan.zombie_rounds.get(outcome.crashes as usize - 1).copied().unwrap_or(0);
                    if overlap > 0 {
                        zombie = Some((attempt, overlap));
                    } else {
                        drop(attempt);
                    }
                }
            }
        }
        outcome.ledger = ledger.into_inner();
        outcome.source = source;
        outcome.operations = crashes.operations();
        outcome.appends = crashes.appends();
        // Retention reclaimed the records of rounds the oldest retained checkpoint completed:
        // no restore needs them, so they are not lost.
        let oldest = retained_floor(&outcome.completed_ids);
        let reclaimable = checkpoints
            .iter()
            .find(|c| oldest.is_some_and(|o| c.id >= o))
            .map(Checkpoint::rounds_done)
            .unwrap_or_default();
        outcome.lost_acknowledged = self.lost_acknowledged(&outcome.ledger, &changed_keys, &reclaimable).await?;
        Ok(outcome)
    }

    /// Lets the zombie `z` run `rounds` more rounds of `source` after the attempt that
    /// replaced it restored, with crash injection held back (the crashes are the surviving
    /// attempts'), then takes its snapshot, which must fail with [`StoreError::Fenced`].
    async fn overlap(&self, mut z: Attempt<S>, rounds: u64, run: &mut Run<'_>) {
        let Run { source, crashes, ledger, outcome } = run;
        crashes.pause(true);
        ledger.lock().set_zombie(true);
        // Its rounds' results go nowhere: downstream listens to the surviving attempt.
        let mut unseen = self.new_outcome(0);
        for _ in 0..rounds {
            let Some(&(k, v)) = source.get(z.pos) else { break };
            if self.round(&mut z, k, v, crashes, ledger, &mut unseen).await.is_err() {
                break;
            }
            z.pos += 1;
        }
        for store in &z.stores {
            if matches!(store.snapshot(u64::MAX).await, Err(StoreError::Fenced { .. })) {
                outcome.zombies_fenced += 1;
            }
        }
        z.settle().await;
        ledger.lock().set_zombie(false);
        crashes.pause(false);
        outcome.zombies += 1;
    }

    fn new_outcome(&self, inputs: usize) -> Outcome {
        Outcome {
            backend: self.source.backend(),
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
        }
    }

    /// Runs one attempt of a run whose durable state lives in `dir`, as one process of a
    /// runtime that may be killed at any moment would: restores from the newest checkpoint
    /// in `dir` (or starts fresh and takes checkpoint 0), replays the input source from the
    /// checkpoint's position to the end, and keeps every completed checkpoint in `dir`
    /// (written atomically before the stores are told it completed). Every side effect goes
    /// to the ledger journal in `dir` as it happens, with `attempt` (which also seeds the
    /// event ids this attempt mints, like a restarted process minting new ids). When the
    /// source is done, the final memory is written to `dir`.
    ///
    /// The returned outcome covers this attempt only; [`RunDir::journal`] reads the whole
    /// run back.
    pub async fn run_attempt(
        &self,
        dir: &RunDir,
        attempt: u64,
        progress: &(dyn Fn(usize) + Sync),
    ) -> Result<Outcome, SimError> {
        let crashes = Crashes::new([]);
        let mut ledger = Ledger::journaled(dir.open_journal()?);
        ledger.set_attempt(attempt);
        let ledger = Mutex::new(ledger);
        let source = self.inputs.clone().unwrap_or_else(|| inputs(&self.config));
        let mut outcome = self.new_outcome(source.len());
        let saved = dir.latest_checkpoint()?;
        let log: Log<S> = Arc::new(CrashLog::new(self.source.open().await?, Arc::clone(&crashes)));
        let mut a = self.restore(log, self.config.owners, attempt, saved.as_ref(), &mut outcome).await?;
        let mut keep = dir;
        match &saved {
            Some(cp) => a.checkpoint_id = cp.id + 1,
            None => self.checkpoint(&mut a, 0, &crashes, &mut outcome, &mut keep).await?,
        }
        let mut run = Run { source: &source, crashes: &crashes, ledger: &ledger, outcome: &mut outcome };
        self.process(&mut a, &mut run, &mut None, &mut keep, progress).await?;
        dir.save_final_memory(&a.memory)?;
        outcome.memory = std::mem::take(&mut a.memory);
        outcome.ledger = ledger.into_inner();
        outcome.source = source;
        outcome.operations = crashes.operations();
        outcome.appends = crashes.appends();
        Ok(outcome)
    }

    fn change_source(
        &self,
        source: &mut Vec<(u32, i64)>,
        from: usize,
        plan: &RunPlan,
        changed: &mut HashMap<KeyId, u64>,
        at: Option<&Checkpoint>,
    ) {
        if let Some(n) = plan.truncate_after_restore {
            source.truncate(n.max(from));
        }
        let seq_of = |k: u32| at.and_then(|c| c.next_seq.get(&key_id(k)).copied()).unwrap_or(0);
        match plan.change {
            Some(change @ (InputChange::ChangeFirstReplayed | InputChange::ChangeFirstReplayedSameChildren)) => {
                if let Some(input) = source.get_mut(from) {
                    input.1 += if change == InputChange::ChangeFirstReplayed { 1_000 } else { 999 };
                    changed.insert(key_id(input.0), seq_of(input.0));
                }
            }
            Some(InputChange::SwapFirstReplayed) => {
                if let Some(&(k, _)) = source.get(from)
                    && let Some(j) = (from + 1..source.len()).find(|&j| source[j].0 == k)
                {
                    source.swap(from, j);
                    changed.insert(key_id(k), seq_of(k));
                }
            }
            None => {}
        }
    }

    async fn restore(
        &self,
        log: Log<S>,
        owners: u32,
        attempt: u64,
        from: Option<&Checkpoint>,
        outcome: &mut Outcome,
    ) -> Result<Attempt<S>, StoreError> {
        let owners = ownerships(owners);
        let stores: Vec<_> =
            owners.iter().map(|_| ActionStateStore::new(Arc::clone(&log), StoreConfig::default())).collect();
        if let Some(cp) = from {
            let started = Instant::now();
            for (store, ownership) in stores.iter().zip(&owners) {
                let report = store.rebuild(&cp.markers, ownership, &cp.completed).await?;
                outcome.rebuild_records += report.records;
                outcome.rebuilds += 1;
            }
            outcome.rebuild_time += started.elapsed();
            outcome.restores += 1;
            outcome.restored_from.push(cp.pos);
        } else {
            // Nothing to restore, but each owner takes its epoch and fences the attempts
            // before it, and learns its keys (so that its retention never reclaims what the
            // other owners' checkpoints need).
            for (store, ownership) in stores.iter().zip(&owners) {
                let report = store.rebuild(&[], ownership, &HashMap::new()).await?;
                outcome.rebuild_records += report.records;
                outcome.rebuilds += 1;
            }
        }
        Ok(Attempt {
            stores,
            owners,
            pos: from.map_or(0, |c| c.pos),
            next_seq: from.map(|c| c.next_seq.clone()).unwrap_or_default(),
            memory: from.map(|c| c.memory.clone()).unwrap_or_default(),
            ids: 0,
            attempt,
            checkpoint_id: outcome.checkpoints,
        })
    }

    /// Processes the rest of the source. A zombie waiting (see [`RunPlan::zombie_rounds`])
    /// runs its rounds once this attempt has processed as many past the zombie's position,
    /// so that it writes rounds this attempt has written already.
    async fn process(
        &self,
        a: &mut Attempt<S>,
        run: &mut Run<'_>,
        zombie: &mut Option<(Attempt<S>, u64)>,
        checkpoints: &mut dyn KeepCheckpoints,
        progress: &(dyn Fn(usize) + Sync),
    ) -> Result<(), SimError> {
        while a.pos < run.source.len() {
            let (k, v) = run.source[a.pos];
            self.round(a, k, v, run.crashes, run.ledger, run.outcome).await?;
            a.pos += 1;
            progress(a.pos);
            if let Some((z, rounds)) = zombie.take() {
                if a.pos as u64 >= z.pos as u64 + rounds {
                    self.overlap(z, rounds, run).await;
                } else {
                    *zombie = Some((z, rounds));
                }
            }
            if a.pos.is_multiple_of(self.config.checkpoint_every.max(1)) {
                let id = a.checkpoint_id;
                self.checkpoint(a, id, run.crashes, run.outcome, checkpoints).await?;
            }
        }
        Ok(())
    }

    async fn checkpoint(
        &self,
        a: &mut Attempt<S>,
        id: u64,
        crashes: &Crashes,
        outcome: &mut Outcome,
        keep: &mut dyn KeepCheckpoints,
    ) -> Result<(), SimError> {
        crashes.operation()?;
        let mut snapshots = Vec::new();
        for store in &a.stores {
            snapshots.push(store.snapshot(id).await.map_err(|e| crash_or(e, crashes))?);
        }
        outcome.checkpoints += 1;
        a.checkpoint_id = id + 1;
        let abort = self.config.abort_every > 0
            && id > 0
            && mix(self.config.seed, 0x2, id).is_multiple_of(self.config.abort_every);
        if abort {
            for store in &a.stores {
                store.checkpoint_aborted(id);
            }
            return Ok(());
        }
        let mut completed = HashMap::new();
        for s in &snapshots {
            completed.extend(s.completed.iter().map(|(k, v)| (*k, *v)));
        }
        let cp = Checkpoint {
            id,
            pos: a.pos,
            next_seq: a.next_seq.clone(),
            memory: a.memory.clone(),
            markers: snapshots.into_iter().map(|s| s.marker).collect(),
            completed,
        };
        keep.keep(&cp)?;
        for store in &a.stores {
            store.checkpoint_complete(id);
        }
        outcome.completed_ids.push(id);
        Ok(())
    }

    fn fresh_id(&self, a: &mut Attempt<S>) -> EventId {
        a.ids += 1;
        let hi = mix(self.config.seed, 0x10 + a.attempt, a.ids);
        let lo = mix(self.config.seed, 0x20 + a.attempt, a.ids);
        EventId((u128::from(hi) << 64) | u128::from(lo))
    }

    async fn round(
        &self,
        a: &mut Attempt<S>,
        k: u32,
        v: i64,
        crashes: &Crashes,
        ledger: &Mutex<Ledger>,
        outcome: &mut Outcome,
    ) -> Result<(), SimError> {
        let key = key_id(k);
        let owner = a.owners.iter().position(|o| o.owns(&key)).unwrap_or(0);
        let seq = {
            let next = a.next_seq.entry(key).or_insert(0);
            let seq = *next;
            *next += 1;
            seq
        };
        let input = agent::event(self.fresh_id(a), "input", [("key", Value::Int(i64::from(k))), ("v", Value::Int(v))]);
        let boot = agent::event(self.fresh_id(a), BOOTSTRAP, []);
        let round = Round::named(&key_name(k), seq, &input);
        let mut queue: VecDeque<(Kind, Event, Trigger)> = VecDeque::from([
            (Kind::Plan, input, Trigger::Input),
            (Kind::Greet, boot, Trigger::Bootstrap { label: BOOTSTRAP.into() }),
        ]);
        let mut results: Vec<(String, Vec<Attributes>)> = Vec::new();
        while let Some((kind, event, trigger)) = queue.pop_front() {
            crashes.operation()?;
            let store = &a.stores[owner];
            let begun =
                store.begin(&round, &kind.action(), &event, &trigger).await.map_err(|e| crash_or(e, crashes))?;
            let state: Arc<ActionState> = match begun {
                Begin::Reuse(state) => {
                    outcome.reused += 1;
                    state
                }
                Begin::Resume(handle) => {
                    outcome.resumed += 1;
                    self.execute(a, owner, kind, &event, seq, handle, "resumed", crashes, ledger).await?
                }
                Begin::Fresh(handle, reason) => {
                    self.execute(a, owner, kind, &event, seq, handle, reason.as_str(), crashes, ledger).await?
                }
            };
            apply_memory(a.memory.entry(key).or_default(), &state);
            results.push((kind.name().to_owned(), state.outputs().iter().map(|e| e.attributes.clone()).collect()));
            for (index, out) in state.outputs().iter().enumerate() {
                for child in Kind::triggered_by(&out.event_type) {
                    let trigger = Trigger::Emitted { producer: state.key, index: index as u32 };
                    queue.push_back((*child, out.clone(), trigger));
                }
            }
        }
        ledger.lock().round_done(key, seq, &results);
        outcome.results.insert((key, seq), results);
        a.stores[owner].round_completed(key, seq);
        Ok(())
    }

    #[allow(clippy::too_many_arguments, reason = "internal; the pieces are the run's state")]
    async fn execute(
        &self,
        a: &mut Attempt<S>,
        owner: usize,
        kind: Kind,
        event: &Event,
        seq: u64,
        mut handle: ActionHandle,
        reason: &str,
        crashes: &Crashes,
        ledger: &Mutex<Ledger>,
    ) -> Result<Arc<ActionState>, SimError> {
        let sk: StateKey = *handle.key();
        ledger.lock().execute(&sk, reason);
        let (outputs, memory) = match kind {
            Kind::Plan => {
                let v = agent::int(event, "v");
                let plan = self
                    .durable(a, owner, &mut handle, agent::PLAN_CALL, &v.to_le_bytes(), false, crashes, ledger)
                    .await?;
                let task = [("topic", Value::Int(v % 3))];
                let t1 = agent::event(self.fresh_id(a), "task", task.clone());
                let t2 = agent::event(self.fresh_id(a), "task", task);
                (vec![t1, t2], vec![set("plan/last", plan)])
            }
            Kind::Work => {
                let topic = agent::int(event, "topic");
                let found = self
                    .durable(a, owner, &mut handle, agent::SEARCH_CALL, &topic.to_le_bytes(), false, crashes, ledger)
                    .await?;
                let fetched = self
                    .durable(a, owner, &mut handle, agent::FETCH_CALL, &found, self.config.reconcile, crashes, ledger)
                    .await?;
                let result = agent::event(
                    self.fresh_id(a),
                    "result",
                    [("topic", Value::Int(topic)), ("answer", Value::Bytes(fetched))],
                );
                (vec![result], Vec::new())
            }
            Kind::Summarize => (Vec::new(), vec![set(&format!("summary/{seq}"), agent::bytes(event, "answer"))]),
            Kind::Greet => (vec![agent::event(self.fresh_id(a), "note", [("text", Value::from("hello"))])], Vec::new()),
            Kind::Jot => (Vec::new(), vec![set("notes/last_seq", seq.to_le_bytes().to_vec())]),
        };
        crashes.operation()?;
        let state = a.stores[owner].complete(handle, outputs, memory).await.map_err(|e| crash_or(e, crashes))?;
        ledger.lock().completion_acked(sk);
        Ok(state)
    }

    #[allow(clippy::too_many_arguments, reason = "internal; the pieces are the run's state")]
    async fn durable(
        &self,
        a: &Attempt<S>,
        owner: usize,
        handle: &mut ActionHandle,
        function: &'static str,
        args: &[u8],
        reconcile: bool,
        crashes: &Crashes,
        ledger: &Mutex<Ledger>,
    ) -> Result<Vec<u8>, SimError> {
        crashes.operation()?;
        let call_key = (*handle.key(), handle.cursor(), function);
        let run = || async {
            ledger.lock().call(call_key);
            Ok(agent::external(function, args))
        };
        let store = &a.stores[owner];
        let call = if reconcile {
            let reconciler = || async { Ok(agent::external(function, args)) };
            store.call_reconciled(handle, function, agent::digest(args), run, reconciler).await
        } else {
            store.call(handle, function, agent::digest(args), run).await
        }
        .map_err(|e| crash_or(e, crashes))?;
        let mut l = ledger.lock();
        match call.source {
            CallSource::Journal => l.calls_replayed += 1,
            CallSource::Reconciled => l.calls_reconciled += 1,
            CallSource::Executed => {}
        }
        l.call_acked(call_key);
        Ok(call.output.unwrap_or_default())
    }

    /// Reads the whole log and counts the completions `ledger` saw acknowledged that are not
    /// in it (for a run without input changes, where no acknowledged state may go), except in
    /// rounds that the oldest checkpoint retention keeps in `dir` completed: retention may
    /// have reclaimed those, and no restore needs them.
    pub async fn acknowledged_missing(&self, ledger: &Ledger, dir: &RunDir) -> Result<u64, StoreError> {
        let task = |e: std::io::Error| StoreError::Task(e.to_string());
        let ids = dir.checkpoints().map_err(task)?;
        let reclaimable = match retained_floor(&ids) {
            Some(id) => dir.checkpoint(id).map_err(task)?.map(|c| c.rounds_done()).unwrap_or_default(),
            None => HashMap::new(),
        };
        self.lost_acknowledged(ledger, &HashMap::new(), &reclaimable).await
    }

    /// Replays the whole log into a fresh index and counts acknowledged completions that are
    /// missing, except in rounds whose history was changed on purpose and in rounds
    /// `reclaimable` says a retained checkpoint completed (retention may have reclaimed them).
    async fn lost_acknowledged(
        &self,
        ledger: &Ledger,
        changed: &HashMap<KeyId, u64>,
        reclaimable: &HashMap<KeyId, u64>,
    ) -> Result<u64, StoreError> {
        let log = self.source.open().await?;
        let end = log.end_offsets().await?;
        let earliest = log.earliest_offsets().await?;
        let mut present: HashSet<StateKey> = HashSet::new();
        let mut gone: HashSet<StateKey> = HashSet::new();
        for (p, (&from, &to)) in (0u32..).zip(earliest.iter().zip(&end)) {
            // A fenced writer's records are not history (checked by scanning, not by the
            // store's rule).
            let mut fences: Vec<(Ownership, u64)> = Vec::new();
            let mut range = RangeRead::new(p, from, to, 4096);
            while let Some(records) = range.next_batch(&log).await? {
                for r in &records {
                    let record = codec::decode(&r.key, &r.value).map_err(|e| e.at(p, r.offset))?;
                    let epoch = codec::writer_epoch(&r.value).map_err(|e| e.at(p, r.offset))?;
                    if fenced_out(&fences, &record.key_id(), epoch) && !matches!(record, LogRecord::Fence(_)) {
                        continue;
                    }
                    match record {
                        LogRecord::Fence(f) => fences.push((f.groups, f.epoch)),
                        LogRecord::Upsert(s) if s.is_completed() => {
                            gone.remove(&s.key);
                            present.insert(s.key);
                        }
                        LogRecord::Delete { key, .. } => {
                            present.remove(&key);
                            gone.insert(key);
                        }
                        _ => {}
                    }
                }
            }
        }
        let lost = ledger
            .acked()
            .iter()
            .filter(|k| !present.contains(k))
            .filter(|k| changed.get(&k.key).is_none_or(|from| k.seq < *from))
            .filter(|k| reclaimable.get(&k.key).is_none_or(|upto| k.seq > *upto))
            .count();
        Ok(lost as u64)
    }
}

/// A store error caused by an injected crash (the store wraps the crash log's error in its
/// own) is that crash, at the point where it struck; any other is the store's.
fn crash_or(e: StoreError, crashes: &Crashes) -> SimError {
    match crashes.take_crashed() {
        Some(point) => SimError::Crash(InjectedCrash(point)),
        None => SimError::Store(e),
    }
}

fn set(path: &str, bytes: Vec<u8>) -> MemoryUpdate {
    MemoryUpdate { path: path.to_owned(), op: MemoryOp::Set(TaggedBytes { tag: "bytes".into(), bytes }) }
}

fn apply_memory(memory: &mut BTreeMap<String, Vec<u8>>, state: &ActionState) {
    if let actionstate_core::Progress::Completed { memory: updates, .. } = &state.progress {
        for u in updates {
            match &u.op {
                MemoryOp::Set(v) => {
                    memory.insert(u.path.clone(), v.bytes.clone());
                }
                MemoryOp::NewObject => {
                    memory.insert(u.path.clone(), Vec::new());
                }
                MemoryOp::Delete => {
                    memory.remove(&u.path);
                }
            }
        }
    }
}

/// Whether a record of `key` written with `epoch` after `fences` (keys and epoch of each fence
/// met so far in its partition) is a fenced writer's: found by scanning, not by the store's
/// rule, so that the simulator checks the rule instead of repeating it.
fn fenced_out(fences: &[(Ownership, u64)], key: &KeyId, epoch: u64) -> bool {
    fences.iter().any(|(groups, fenced)| *fenced > epoch && groups.owns(key))
}

/// The upserts of writers of `epochs` in `log` that follow, in their partition, a fence of a
/// newer epoch over their key (found by scanning, not by the store's rule), and how many of
/// them a rebuild of the oldest or the newest of `checkpoints` indexes.
async fn zombie_records<L: StateLog>(
    log: &Arc<L>,
    epochs: &HashSet<u64>,
    checkpoints: &[&Checkpoint],
) -> Result<(u64, u64), StoreError> {
    let earliest = log.earliest_offsets().await?;
    let end = log.end_offsets().await?;
    let mut zombie: Vec<(StateKey, Position)> = Vec::new();
    for (p, (&from, &to)) in (0u32..).zip(earliest.iter().zip(&end)) {
        let mut fences: Vec<(Ownership, u64)> = Vec::new();
        let mut range = RangeRead::new(p, from, to, 1024);
        while let Some(records) = range.next_batch(&**log).await? {
            for r in records {
                let record = codec::decode(&r.key, &r.value).map_err(|e| e.at(p, r.offset))?;
                let epoch = codec::writer_epoch(&r.value).map_err(|e| e.at(p, r.offset))?;
                match record {
                    LogRecord::Fence(f) => fences.push((f.groups, f.epoch)),
                    LogRecord::Upsert(s) if epochs.contains(&epoch) && fenced_out(&fences, &s.key.key, epoch) => {
                        zombie.push((s.key, Position { partition: p, offset: r.offset, exact: true }));
                    }
                    _ => {}
                }
            }
        }
    }
    let mut replayed = 0;
    let ends = [checkpoints.first(), checkpoints.last()];
    for cp in ends.into_iter().flatten() {
        let config = StoreConfig { fence_on_rebuild: false, retention: Retention::KeepAll, ..StoreConfig::default() };
        let observer = ActionStateStore::new(Arc::clone(log), config);
        observer.rebuild(&cp.markers, &Ownership::All, &cp.completed).await?;
        replayed += observer.with_index(|ix| zombie.iter().filter(|(sk, at)| ix.position(sk) == Some(*at)).count());
    }
    Ok((zombie.len() as u64, replayed as u64))
}
