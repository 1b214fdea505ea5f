//! The runtime: processes keyed inputs round by round through the store, takes checkpoints,
//! crashes where told, restores and replays.

use crate::approvals::{Approver, CLOCK_START_MS, OutsideApprover};
use crate::attempt::{Attempt, Log, Run};
use crate::check::lost_acknowledged;
use crate::checkpoint::{self, Checkpoint, KeepCheckpoints, retained_floor};
use crate::crash::{CrashLog, CrashPoint, Crashes, InjectedCrash};
use crate::external::ExternalClient;
use crate::ledger::Ledger;
use crate::outcome::{Outcome, SimError};
use crate::plan::{RestoreFrom, RunPlan, SimConfig, inputs};
use crate::restore::{change_source, restore};
use crate::round::round;
use crate::run_dir::RunDir;
use crate::source::LogSource;
use crate::waiting;
use crate::zombie::{overlap, zombie_records};
use actionstate_core::KeyId;
use actionstate_recovery::{ActionStateStore, Clock, StoreError};
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// A deterministic simulated agent runtime over a log source.
#[derive(Debug)]
pub struct Sim<S: LogSource> {
    source: S,
    config: SimConfig,
    inputs: Option<Vec<(u32, i64)>>,
    external: Option<Arc<ExternalClient>>,
    outside_approver: Option<OutsideApprover>,
}

/// What [`Sim::run`] carries from one attempt to the next.
struct Campaign<S: LogSource> {
    crashes: Arc<Crashes>,
    ledger: Mutex<Ledger>,
    /// The person who approves, outside the runtime.
    approver: Mutex<Approver>,
    /// The clock of the waits: the runs' time, which no crash turns back.
    clock: Clock,
    /// The input source, as changed after the first restore.
    source: Vec<(u32, i64)>,
    outcome: Outcome,
    /// The completed checkpoints a restore may go back to.
    checkpoints: Vec<Checkpoint>,
    /// Per key whose history a change to the source altered, its first changed round.
    changed_keys: HashMap<KeyId, u64>,
    attempt_no: u64,
    owners: u32,
    restore_point: Option<Checkpoint>,
    /// A crashed attempt that keeps running after the next restore, and for how many rounds.
    zombie: Option<(Attempt<S>, u64)>,
    zombie_epochs: HashSet<u64>,
}

impl<S: LogSource> Campaign<S> {
    /// Counts a crash that struck at `point` with the attempt at input position `pos`; the
    /// next attempt takes over.
    fn crashed(&mut self, pos: usize, point: CrashPoint) {
        self.outcome.crashes += 1;
        self.outcome.crashed_at.push(pos);
        self.outcome.crash_points.push(point);
        self.attempt_no += 1;
    }

    /// The checkpoint the restore after the latest crash goes back to, as `plan` says, among
    /// those retention keeps; later ones are forgotten.
    fn choose_restore_point(&mut self, plan: &RunPlan) {
        let n = (self.outcome.restores as usize).min(plan.restore_from.len().saturating_sub(1));
        let back = match plan.restore_from.get(n).copied().unwrap_or(RestoreFrom::Latest) {
            RestoreFrom::Latest => 0,
            RestoreFrom::Back(b) => b,
        };
        // Only checkpoints retention keeps can be restored: the last ones to complete,
        // counted as they completed (a restore does not undo them).
        let oldest = retained_floor(&self.outcome.completed_ids);
        let kept = self.checkpoints.iter().position(|c| oldest.is_none_or(|o| c.id >= o));
        let chosen = self.checkpoints.len().saturating_sub(1 + back).max(kept.unwrap_or(0));
        self.restore_point = self.checkpoints.get(chosen).cloned();
        self.checkpoints.truncate(chosen + 1);
        if let Some(o) = plan.owners_after_restore.get(n).or(plan.owners_after_restore.last()) {
            self.owners = *o;
        }
    }
}

impl<S: LogSource> Sim<S> {
    /// A simulator.
    pub fn new(source: S, config: SimConfig) -> Self {
        Sim { source, config, inputs: None, external: None, outside_approver: None }
    }

    /// Sends the agent's durable calls to an external service through `client` (see
    /// [`crate::external`]) instead of computing their answers in process: `tool.fetch`, when
    /// reconciled ([`SimConfig::reconcile`]), goes to its records API and is reconciled by
    /// asking it about the call's key; the other calls go to its deduplicating API. The answers
    /// are the same, so the run's results are too.
    pub fn with_external(mut self, client: ExternalClient) -> Self {
        self.external = Some(Arc::new(client));
        self
    }

    /// Hands the approvals of [`run_attempt`](Self::run_attempt) to an approver in another
    /// process ([`OutsideApprover`]) instead of answering them in this one.
    pub fn with_outside_approver(mut self, approver: OutsideApprover) -> Self {
        self.outside_approver = Some(approver);
        self
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
        let source = self.inputs.clone().unwrap_or_else(|| inputs(&self.config));
        let mut c = Campaign {
            crashes: Crashes::new(plan.crashes.iter().copied()),
            ledger: Mutex::new(Ledger::default()),
            approver: Mutex::new(Approver::default()),
            clock: Clock::manual(CLOCK_START_MS),
            outcome: Outcome::new(self.source.backend(), source.len()),
            source,
            checkpoints: Vec::new(),
            changed_keys: HashMap::new(),
            attempt_no: 0,
            owners: self.config.owners,
            restore_point: None,
            zombie: None,
            zombie_epochs: HashSet::new(),
        };
        loop {
            c.ledger.lock().set_attempt(c.attempt_no);
            let Some(mut attempt) = self.start_attempt(&mut c).await? else { continue };
            if let Some((z, _)) = &c.zombie {
                c.zombie_epochs.extend(z.stores.iter().map(ActionStateStore::epoch));
            }
            let mut run = Run {
                source: &c.source,
                crashes: &c.crashes,
                ledger: &c.ledger,
                approver: &c.approver,
                outcome: &mut c.outcome,
            };
            let result = self.process(&mut attempt, &mut run, &mut c.zombie, &mut c.checkpoints, progress).await;
            if let Some((z, rounds)) = c.zombie.take() {
                // The source ended first.
                overlap(&self.config, z, rounds, &mut run).await;
            }
            match result {
                Ok(()) => {
                    Self::finish(&mut c, attempt).await?;
                    break;
                }
                Err(e) => Self::after_crash(&mut c, attempt, e, plan).await?,
            }
        }
        self.conclude(c).await
    }

    /// Starts the next attempt of `c`: opens the log (or takes over the zombie's handle),
    /// restores, and takes checkpoint 0 if no checkpoint completed yet. `None`: a crash
    /// struck first (counted); the next attempt starts over.
    async fn start_attempt(&self, c: &mut Campaign<S>) -> Result<Option<Attempt<S>>, StoreError> {
        let log: Log<S> = match &c.zombie {
            // The zombie still holds the log (an embedded store allows one handle).
            Some((z, _)) => Arc::clone(z.stores[0].log()),
            None => Arc::new(CrashLog::new(self.source.open().await?, Arc::clone(&c.crashes))),
        };
        let restored = restore(log, c.owners, c.attempt_no, c.restore_point.as_ref(), &mut c.outcome, &c.clock).await;
        let mut attempt = match restored {
            Ok(attempt) => attempt,
            // A crash during the restore (its fences are appends too): the next attempt
            // restores the same checkpoint again.
            Err(e) => match c.crashes.take_crashed() {
                Some(point) => {
                    c.crashed(c.restore_point.as_ref().map_or(0, |cp| cp.pos), point);
                    return Ok(None);
                }
                None => return Err(e),
            },
        };
        attempt.external = self.external.clone();
        if c.checkpoints.is_empty() {
            // Checkpoint 0 before any input: a crash before the first periodic checkpoint
            // restores from it and replays the log from the start. Taken again by every
            // attempt until it succeeds (a crash can hit it), or a later crash would
            // restart with an empty index and run acknowledged actions again.
            let cp = checkpoint::take(&self.config, &mut attempt, 0, &c.crashes, &mut c.outcome, &mut c.checkpoints);
            match cp.await {
                Ok(()) => {}
                Err(SimError::Store(e)) => return Err(e),
                Err(e @ (SimError::State(_) | SimError::External(_) | SimError::AwaitingApproval)) => {
                    return Err(StoreError::Task(e.to_string()));
                }
                Err(e @ SimError::ApprovalMissing { .. }) => return Err(StoreError::Task(e.to_string())),
                Err(SimError::Crash(InjectedCrash(point))) => {
                    attempt.settle().await;
                    c.crashed(attempt.pos, point);
                    return Ok(None);
                }
            }
        }
        Ok(Some(attempt))
    }

    /// The attempt that processed the whole source is done: its memory is the run's, and
    /// the zombies' records in the log are counted.
    async fn finish(c: &mut Campaign<S>, attempt: Attempt<S>) -> Result<(), StoreError> {
        c.outcome.memory = attempt.memory.clone();
        attempt.settle().await;
        if !c.zombie_epochs.is_empty() {
            let oldest = retained_floor(&c.outcome.completed_ids);
            let retained: Vec<&Checkpoint> =
                c.checkpoints.iter().filter(|cp| oldest.is_none_or(|o| cp.id >= o)).collect();
            let log = Arc::clone(attempt.stores[0].log());
            let (appends, replayed) = zombie_records(&log, &c.zombie_epochs, &retained).await?;
            c.outcome.zombie_appends = appends;
            c.outcome.zombie_appends_replayed = replayed;
        }
        Ok(())
    }

    /// `attempt` failed with `e`. An injected crash (which the store may have wrapped in its
    /// own error) is counted where it struck; then this chooses what the next attempt
    /// restores, changes the source after the first crash as `plan` says, and keeps `attempt`
    /// as a zombie if the plan lets it run on. Any other error is the run's.
    async fn after_crash(
        c: &mut Campaign<S>,
        attempt: Attempt<S>,
        e: SimError,
        plan: &RunPlan,
    ) -> Result<(), StoreError> {
        let point = match e {
            SimError::Crash(InjectedCrash(point)) => point,
            SimError::Store(e) => match c.crashes.take_crashed() {
                Some(point) => point,
                None => return Err(e),
            },
            e @ (SimError::State(_)
            | SimError::External(_)
            | SimError::AwaitingApproval
            | SimError::ApprovalMissing { .. }) => return Err(StoreError::Task(e.to_string())),
        };
        // A crash reported directly leaves its point to take as well.
        c.crashes.take_crashed();
        attempt.settle().await;
        c.crashed(attempt.pos, point);
        c.choose_restore_point(plan);
        if c.outcome.restores == 0 {
            let from = c.restore_point.as_ref().map_or(0, |cp| cp.pos);
            change_source(&mut c.source, from, plan, &mut c.changed_keys, c.restore_point.as_ref());
            c.outcome.inputs = c.source.len();
        }
        let overlap = plan.zombie_rounds.get(c.outcome.crashes as usize - 1).copied().unwrap_or(0);
        if overlap > 0 {
            c.zombie = Some((attempt, overlap));
        } else {
            drop(attempt);
        }
        Ok(())
    }

    /// The outcome of the whole run, with its final check: acknowledged states lost.
    async fn conclude(&self, c: Campaign<S>) -> Result<Outcome, StoreError> {
        let Campaign { crashes, ledger, approver, source, mut outcome, checkpoints, changed_keys, .. } = c;
        outcome.ledger = ledger.into_inner();
        outcome.waits = approver.into_inner().figures(
            &outcome.memory,
            &outcome.ledger.waits_delivered,
            outcome.ledger.waits_delivered_twice,
        );
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
        outcome.lost_acknowledged =
            lost_acknowledged(&self.source, &outcome.ledger, &changed_keys, &reclaimable).await?;
        Ok(outcome)
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
        let mut outcome = Outcome::new(self.source.backend(), source.len());
        let saved = dir.latest_checkpoint()?;
        let log: Log<S> = Arc::new(CrashLog::new(self.source.open().await?, Arc::clone(&crashes)));
        // A new process takes the clock up where its checkpoint left it, so that it replays
        // the steps after the checkpoint at the times a run without the kill took them: the
        // approvals end as they would have (none times out because a process was killed).
        let clock = Clock::manual(saved.as_ref().map_or(CLOCK_START_MS, |cp| cp.clock_ms.max(CLOCK_START_MS)));
        let mut a = restore(log, self.config.owners, attempt, saved.as_ref(), &mut outcome, &clock).await?;
        a.external = self.external.clone();
        let mut keep = dir;
        match &saved {
            Some(cp) => a.checkpoint_id = cp.id + 1,
            None => checkpoint::take(&self.config, &mut a, 0, &crashes, &mut outcome, &mut keep).await?,
        }
        // The approver of this process (or the hand-over to one in another process): a kill
        // loses the tokens it held, and the next process hands them out again when it
        // re-enters the waiting rounds.
        let approver = Mutex::new(Approver::new(self.outside_approver.clone()));
        let mut run =
            Run { source: &source, crashes: &crashes, ledger: &ledger, approver: &approver, outcome: &mut outcome };
        self.process(&mut a, &mut run, &mut None, &mut keep, progress).await?;
        dir.save_final_memory(&a.memory)?;
        outcome.memory = std::mem::take(&mut a.memory);
        outcome.ledger = ledger.into_inner();
        outcome.waits = approver.into_inner().figures(
            &outcome.memory,
            &outcome.ledger.waits_delivered,
            outcome.ledger.waits_delivered_twice,
        );
        outcome.source = source;
        outcome.operations = crashes.operations();
        outcome.appends = crashes.appends();
        Ok(outcome)
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
        waiting::reenter(&self.config, a, &mut run.ctx()).await?;
        while a.pos < run.source.len() {
            let (k, v) = run.source[a.pos];
            let mut cx = run.ctx();
            waiting::step(&self.config, a, &mut cx).await?;
            round(&self.config, a, k, v, &mut cx).await?;
            a.pos += 1;
            progress(a.pos);
            if let Some((z, rounds)) = zombie.take() {
                if a.pos as u64 >= z.pos as u64 + rounds {
                    overlap(&self.config, z, rounds, run).await;
                } else {
                    *zombie = Some((z, rounds));
                }
            }
            if a.pos.is_multiple_of(self.config.checkpoint_every.max(1)) {
                let id = a.checkpoint_id;
                checkpoint::take(&self.config, a, id, run.crashes, run.outcome, checkpoints).await?;
            }
        }
        waiting::drain(&self.config, a, &mut run.ctx()).await
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
        lost_acknowledged(&self.source, ledger, &HashMap::new(), &reclaimable).await
    }
}
