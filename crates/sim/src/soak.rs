//! A long-running workload that shows whether the store stays bounded: conversations (business
//! keys) that live for a few inputs and then go idle for good, many in flight at once, each
//! input two actions and one durable call, and a checkpoint every so many inputs, completed at
//! once. [`soak`] reports, every tenth of the run, the resident memory, the bytes the backend
//! holds and what each snapshot carries; growth is the value at the end over the value at half
//! the run.

use actionstate_core::{ActionId, Attributes, Event, KeyId, StateLog, Trigger, Value};
use actionstate_recovery::{
    ActionStateStore, Begin, CheckpointForm, DurableCall, InLog, Ownership, Round, Snapshot, StoreConfig, StoreError,
    TwoPhase,
};
use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The workload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SoakConfig {
    /// Inputs in all.
    pub inputs: u64,
    /// Conversations in flight at once (each processed by a task of its own).
    pub in_flight: usize,
    /// Inputs a conversation lives for before it goes idle for good.
    pub inputs_per_conversation: u64,
    /// Inputs between checkpoints (each snapshotted, then completed at once).
    pub checkpoint_every: u64,
    /// Bytes of each durable call's result.
    pub result_bytes: usize,
}

impl Default for SoakConfig {
    fn default() -> Self {
        SoakConfig {
            inputs: 1_000_000,
            in_flight: 64,
            inputs_per_conversation: 4,
            checkpoint_every: 1_000,
            result_bytes: 300,
        }
    }
}

/// One progress sample.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct SoakSample {
    /// Inputs processed.
    pub inputs: u64,
    /// Time since the start.
    pub elapsed_s: f64,
    /// The most resident memory of the process since the previous sample, read every 20 ms (0
    /// where it cannot be read).
    pub rss_bytes: u64,
    /// The most bytes the backend held since the previous sample, as the caller measures
    /// them (measured every 20 ms: a backend that frees disk in steps, as a Kafka broker does
    /// a segment at a time, would otherwise be caught at a random point of its sawtooth).
    pub backend_bytes: u64,
    /// Entries of the last snapshot's completion map.
    pub snapshot_entries: usize,
    /// The slowest snapshot since the previous sample, in milliseconds.
    pub snapshot_ms: f64,
    /// Records reclaimed so far.
    pub records_reclaimed: u64,
    /// States in the index.
    pub indexed_states: usize,
}

/// What a soak measured.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct SoakReport {
    /// Inputs processed.
    pub inputs: u64,
    /// Inputs per second over the whole run.
    pub inputs_per_s: f64,
    /// Bytes held at the end over bytes held at half the run (each the most held in its tenth).
    pub disk_growth: f64,
    /// Resident memory at the end over resident memory at half the run (each the most resident
    /// in its tenth: one reading of a process whose resident size moves by a few megabytes
    /// from one moment to the next says little).
    pub rss_growth: f64,
    /// The most entries a snapshot's completion map held.
    pub snapshot_entries: usize,
    /// The slowest snapshot, in milliseconds.
    pub snapshot_ms_max: f64,
    /// The samples, one per tenth of the run.
    pub samples: Vec<SoakSample>,
}

/// Resident memory of this process, from `/proc/self/status` (0 elsewhere).
pub fn resident_bytes() -> u64 {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else { return 0 };
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

/// Bytes the files under `dir` take on disk: the blocks allocated to them (`du`), not their
/// lengths, since a Kafka broker preallocates its segment indexes as sparse files of 10 MiB.
pub fn directory_bytes(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .filter_map(Result::ok)
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => directory_bytes(&e.path()),
            Ok(m) => allocated(&m),
            Err(_) => 0,
        })
        .sum()
}

#[cfg(unix)]
fn allocated(m: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    m.blocks() * 512
}

#[cfg(not(unix))]
fn allocated(m: &std::fs::Metadata) -> u64 {
    m.len()
}

/// What the workers report as they go: the last checkpoint's entries and the slowest one.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    snapshot_entries: usize,
    snapshot_ms: f64,
    snapshot_ms_max: f64,
}

impl Progress {
    /// A checkpoint that named `entries` keys took `ms`.
    pub(crate) fn checkpointed(&mut self, entries: usize, ms: f64) {
        self.snapshot_entries = entries;
        self.snapshot_ms = self.snapshot_ms.max(ms);
        self.snapshot_ms_max = self.snapshot_ms_max.max(ms);
    }
}

/// The workers of a run, with what they share.
pub(crate) type Workers = tokio::task::JoinSet<Result<(), StoreError>>;

/// Takes a sample every tenth of the run, across the phases of a run (one, or two around a
/// rescale), and makes the report.
pub(crate) struct Sampler<'a> {
    started: Instant,
    inputs: u64,
    tenth: u64,
    mark: u64,
    peak: u64,
    /// The most resident memory seen in the current tenth.
    rss_peak: u64,
    bytes_held: &'a (dyn Fn() -> u64 + Sync),
    samples: Vec<SoakSample>,
}

impl<'a> Sampler<'a> {
    pub(crate) fn new(inputs: u64, bytes_held: &'a (dyn Fn() -> u64 + Sync)) -> Self {
        let tenth = (inputs / 10).max(1);
        Sampler {
            started: Instant::now(),
            inputs,
            tenth,
            mark: tenth,
            peak: 0,
            rss_peak: 0,
            bytes_held,
            samples: Vec::new(),
        }
    }

    /// Samples until every worker has finished; `counts` gives the records reclaimed so far
    /// and the states indexed now. The first worker error stops the watch.
    pub(crate) async fn watch(
        &mut self,
        workers: &mut Workers,
        done: &AtomicU64,
        progress: &Mutex<Progress>,
        counts: &(dyn Fn() -> (u64, usize) + Sync),
        on_sample: &mut (dyn FnMut(&SoakSample) + Send),
    ) -> Result<(), StoreError> {
        loop {
            let finished = workers.is_empty();
            let now = done.load(Ordering::Relaxed);
            self.peak = self.peak.max((self.bytes_held)());
            self.rss_peak = self.rss_peak.max(resident_bytes());
            while now >= self.mark && self.mark <= self.inputs {
                let (records_reclaimed, indexed_states) = counts();
                let mut p = progress.lock();
                let s = SoakSample {
                    inputs: now,
                    elapsed_s: self.started.elapsed().as_secs_f64(),
                    rss_bytes: self.rss_peak.max(resident_bytes()),
                    backend_bytes: self.peak.max((self.bytes_held)()),
                    snapshot_entries: p.snapshot_entries,
                    snapshot_ms: p.snapshot_ms,
                    records_reclaimed,
                    indexed_states,
                };
                p.snapshot_ms = 0.0;
                drop(p);
                on_sample(&s);
                self.samples.push(s);
                self.mark += self.tenth;
                self.peak = 0;
                self.rss_peak = 0;
            }
            if finished {
                return Ok(());
            }
            // Wakes at least every 20 ms to take the samples that are due.
            if let Ok(Some(joined)) = tokio::time::timeout(Duration::from_millis(20), workers.join_next()).await {
                joined.map_err(|e| StoreError::Task(e.to_string()))??;
            }
        }
    }

    /// The report of the run: growth is the value at the end over the value at half the run.
    pub(crate) fn report(self, progress: &Mutex<Progress>) -> SoakReport {
        let elapsed = self.started.elapsed().as_secs_f64().max(1e-9);
        let samples = self.samples;
        let growth = |f: fn(&SoakSample) -> u64| {
            let half = samples.get(samples.len().saturating_sub(1) / 2).map_or(0, f);
            let end = samples.last().map_or(0, f);
            if half == 0 { 0.0 } else { end as f64 / half as f64 }
        };
        SoakReport {
            inputs: self.inputs,
            inputs_per_s: self.inputs as f64 / elapsed,
            disk_growth: growth(|s| s.backend_bytes),
            rss_growth: growth(|s| s.rss_bytes),
            snapshot_entries: samples.iter().map(|s| s.snapshot_entries).max().unwrap_or(0),
            snapshot_ms_max: progress.lock().snapshot_ms_max,
            samples,
        }
    }
}

/// Runs the workload on a store over `log` with `store_config`, which keeps its checkpoints
/// with the runtime (`snapshot`, then `checkpoint_complete`); `bytes_held` measures what the
/// backend holds; `on_sample` sees each sample as it is taken. Returns once the store's
/// reclaiming is done, so that the caller may measure or remove what the backend holds.
pub async fn soak<L: StateLog>(
    log: L,
    store_config: StoreConfig,
    config: &SoakConfig,
    bytes_held: &(dyn Fn() -> u64 + Sync),
    on_sample: &mut (dyn FnMut(&SoakSample) + Send),
) -> Result<SoakReport, StoreError> {
    // A runtime starts its store with a restore, here from no snapshot: the store takes its
    // owner epoch and fences the partitions, and every snapshot then looks for newer fences in
    // what the log gained.
    let (store, _) = ActionStateStore::restore(log, store_config, &Ownership::All, Vec::<Snapshot>::new()).await?;
    let store = Arc::new(store);
    let mut sampler = Sampler::new(config.inputs, bytes_held);
    let lanes = Lanes::default();
    let mut workers = Workers::new();
    for slot in 0..config.in_flight.max(1) {
        let lane = Lane { store: Arc::clone(&store), owned: Ownership::All, slot, checkpoints: RuntimeKept };
        lanes.spawn(&mut workers, lane, (0, config.inputs), config);
    }
    let counts = || (store.reclaim_status().records_reclaimed, store.stats().states);
    sampler.watch(&mut workers, &lanes.done, &lanes.progress, &counts, on_sample).await?;
    let report = sampler.report(&lanes.progress);
    store.wait_for_reclaim().await;
    Ok(report)
}

/// How a lane's store checkpoints: the form of the store, and when it takes one.
pub(crate) trait LaneCheckpoints<L: StateLog>: Send + Sync + 'static {
    /// The form of the lane's store.
    type Form: CheckpointForm;

    /// After the lane's input that made `finished` inputs of the run, with `every` inputs
    /// between checkpoints: the entries the checkpoint taken holds, or `None` when it is not
    /// the lane's to take.
    fn after_input(
        &self,
        store: &ActionStateStore<L, Self::Form>,
        finished: u64,
        every: u64,
    ) -> impl Future<Output = Result<Option<usize>, StoreError>> + Send;
}

/// Checkpoints kept by the runtime: `snapshot`, then `checkpoint_complete` at once, every
/// `checkpoint_every` inputs of the run.
pub(crate) struct RuntimeKept;

impl<L: StateLog> LaneCheckpoints<L> for RuntimeKept {
    type Form = TwoPhase;

    async fn after_input(
        &self,
        store: &ActionStateStore<L, TwoPhase>,
        finished: u64,
        every: u64,
    ) -> Result<Option<usize>, StoreError> {
        if !finished.is_multiple_of(every) {
            return Ok(None);
        }
        let id = finished / every;
        let snap = store.snapshot(id).await?;
        store.checkpoint_complete(id);
        Ok(Some(snap.completed.len()))
    }
}

/// Checkpoints written into the log with `checkpoint`, every `checkpoint_every` inputs of the
/// lane's owner, with the owner's input count as metadata.
pub(crate) struct WrittenToLog {
    pub(crate) owner_done: Arc<AtomicU64>,
}

impl<L: StateLog> LaneCheckpoints<L> for WrittenToLog {
    type Form = InLog;

    async fn after_input(
        &self,
        store: &ActionStateStore<L, InLog>,
        _finished: u64,
        every: u64,
    ) -> Result<Option<usize>, StoreError> {
        let mine = self.owner_done.fetch_add(1, Ordering::Relaxed) + 1;
        if !mine.is_multiple_of(every) {
            return Ok(None);
        }
        Ok(Some(store.checkpoint(&mine.to_le_bytes()).await?.completed))
    }
}

/// One conversation slot: the store it writes to, the keys it may use, its number, and how
/// its store checkpoints.
pub(crate) struct Lane<L: StateLog, C: LaneCheckpoints<L>> {
    pub(crate) store: Arc<ActionStateStore<L, C::Form>>,
    pub(crate) owned: Ownership,
    pub(crate) slot: usize,
    pub(crate) checkpoints: C,
}

/// What the lanes of a phase share: the next input, the inputs done (over the whole run) and
/// the progress of checkpoints.
#[derive(Default)]
pub(crate) struct Lanes {
    pub(crate) next: Arc<AtomicU64>,
    pub(crate) done: Arc<AtomicU64>,
    pub(crate) progress: Arc<Mutex<Progress>>,
}

impl Lanes {
    /// Starts `lane`, which takes inputs until the run's counter reaches `limit`, naming its
    /// conversations after `phase` (a new owner after a rescale starts new ones).
    pub(crate) fn spawn<L: StateLog, C: LaneCheckpoints<L>>(
        &self,
        workers: &mut Workers,
        lane: Lane<L, C>,
        (phase, limit): (usize, u64),
        config: &SoakConfig,
    ) {
        let (next, done, progress, config) =
            (Arc::clone(&self.next), Arc::clone(&self.done), Arc::clone(&self.progress), config.clone());
        workers.spawn(async move { worker(&lane, phase, limit, &config, &next, &done, &progress).await });
    }
}

/// One conversation slot: its conversations one after the other, each for a few inputs,
/// taking inputs from the shared counter until `limit`. The task that processes the input
/// that completes a checkpoint interval takes the checkpoint.
async fn worker<L: StateLog, C: LaneCheckpoints<L>>(
    lane: &Lane<L, C>,
    phase: usize,
    limit: u64,
    config: &SoakConfig,
    next: &AtomicU64,
    done: &AtomicU64,
    progress: &Mutex<Progress>,
) -> Result<(), StoreError> {
    let store = &*lane.store;
    let (reply, note) = (ActionId::new("reply"), ActionId::new("note"));
    let per = config.inputs_per_conversation.max(1);
    let every = config.checkpoint_every.max(1);
    let (mut conversation, mut seq) = (0u64, per);
    let mut name = String::new();
    let result = vec![0x5a; config.result_bytes];
    loop {
        // Taken only below `limit`, so that the next phase goes on from exactly there.
        if next.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| (n < limit).then_some(n + 1)).is_err() {
            return Ok(());
        }
        if seq == per {
            // The next conversation of this slot whose key the lane's owner holds.
            loop {
                name = format!("conversation-{phase}-{}-{conversation}", lane.slot);
                conversation += 1;
                if lane.owned.owns(&KeyId::of(name.as_bytes())) {
                    break;
                }
            }
            seq = 0;
        }
        let input = event("message", i64::try_from(seq).unwrap_or(0));
        let round = store.round(Round::named(&name, seq, &input));
        let answered = match store.begin(&round, &reply, &input, &Trigger::Input).await? {
            Begin::Reuse(state) => state,
            Begin::Resume(mut handle) | Begin::Fresh(mut handle, _) => {
                let out = result.clone();
                // Every call of the workload has the same arguments: one fixed digest.
                let call = DurableCall::new("llm.complete").args_digest([7; 32]);
                store.call(&mut handle, call, |_| async move { Ok(out) }).await?;
                store.complete(handle, vec![event("answer", 1)], Vec::new()).await?
            }
        };
        let trigger = Trigger::Emitted { producer: answered.key, index: 0 };
        let answer = &answered.outputs()[0];
        match store.begin(&round, &note, answer, &trigger).await? {
            Begin::Reuse(_) => {}
            Begin::Resume(handle) | Begin::Fresh(handle, _) => {
                store.complete(handle, Vec::new(), Vec::new()).await?;
            }
        }
        round.finish();
        seq += 1;
        let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
        let began = Instant::now();
        let Some(entries) = lane.checkpoints.after_input(store, finished, every).await? else { continue };
        progress.lock().checkpointed(entries, began.elapsed().as_secs_f64() * 1e3);
    }
}

fn event(event_type: &str, v: i64) -> Event {
    let mut attributes = Attributes::new();
    attributes.insert("v".into(), Value::Int(v));
    Event::new(event_type, attributes)
}
