//! A long-running workload that shows whether the store stays bounded: conversations (business
//! keys) that live for a few inputs and then go idle for good, many in flight at once, each
//! input two actions and one durable call, and a checkpoint every so many inputs, completed at
//! once. [`soak`] reports, every tenth of the run, the resident memory, the bytes the backend
//! holds and what each snapshot carries; growth is the value at the end over the value at half
//! the run.

use actionstate_core::{ActionId, Attributes, Event, StateLog, Trigger, Value};
use actionstate_recovery::{ActionStateStore, Begin, Ownership, Round, StoreError};
use parking_lot::Mutex;
use std::collections::HashMap;
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
    /// Resident memory of the process (0 where it cannot be read).
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
    /// Resident memory at the end over resident memory at half the run.
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

#[derive(Debug, Default)]
struct Progress {
    snapshot_entries: usize,
    snapshot_ms: f64,
    snapshot_ms_max: f64,
}

/// Runs the workload on `store`; `bytes_held` measures what the backend holds; `on_sample`
/// sees each sample as it is taken.
pub async fn soak<L: StateLog>(
    store: Arc<ActionStateStore<L>>,
    config: &SoakConfig,
    bytes_held: &(dyn Fn() -> u64 + Sync),
    on_sample: &mut (dyn FnMut(&SoakSample) + Send),
) -> Result<SoakReport, StoreError> {
    // A runtime starts its store with a restore: the store takes its owner epoch and fences the
    // partitions, and every snapshot then looks for newer fences in what the log gained.
    store.rebuild(&[], &Ownership::All, &HashMap::new()).await?;
    let started = Instant::now();
    let next = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let progress = Arc::new(Mutex::new(Progress::default()));
    let mut workers = tokio::task::JoinSet::new();
    for slot in 0..config.in_flight.max(1) {
        let (store, next, done, progress, config) =
            (Arc::clone(&store), Arc::clone(&next), Arc::clone(&done), Arc::clone(&progress), config.clone());
        workers.spawn(async move { worker(&store, slot, &config, &next, &done, &progress).await });
    }
    let tenth = (config.inputs / 10).max(1);
    let mut samples = Vec::new();
    let mut mark = tenth;
    let mut peak = 0u64;
    let sample = |store: &ActionStateStore<L>, inputs: u64, progress: &Mutex<Progress>, peak: u64| {
        let mut p = progress.lock();
        let s = SoakSample {
            inputs,
            elapsed_s: started.elapsed().as_secs_f64(),
            rss_bytes: resident_bytes(),
            backend_bytes: peak.max(bytes_held()),
            snapshot_entries: p.snapshot_entries,
            snapshot_ms: p.snapshot_ms,
            records_reclaimed: store.reclaim_status().records_reclaimed,
            indexed_states: store.stats().states,
        };
        p.snapshot_ms = 0.0;
        s
    };
    loop {
        let finished = workers.is_empty();
        let now = done.load(Ordering::Relaxed);
        peak = peak.max(bytes_held());
        while now >= mark && mark <= config.inputs {
            let s = sample(&store, now, &progress, peak);
            on_sample(&s);
            samples.push(s);
            mark += tenth;
            peak = 0;
        }
        if finished {
            break;
        }
        // Wakes at least every 20 ms to take the samples that are due.
        if let Ok(Some(joined)) = tokio::time::timeout(Duration::from_millis(20), workers.join_next()).await {
            joined.map_err(|e| StoreError::Task(e.to_string()))??;
        }
    }
    let elapsed = started.elapsed().as_secs_f64().max(1e-9);
    let growth = |f: fn(&SoakSample) -> u64| {
        let half = samples.get(samples.len().saturating_sub(1) / 2).map_or(0, f);
        let end = samples.last().map_or(0, f);
        if half == 0 { 0.0 } else { end as f64 / half as f64 }
    };
    let p = progress.lock();
    Ok(SoakReport {
        inputs: config.inputs,
        inputs_per_s: config.inputs as f64 / elapsed,
        disk_growth: growth(|s| s.backend_bytes),
        rss_growth: growth(|s| s.rss_bytes),
        snapshot_entries: samples.iter().map(|s| s.snapshot_entries).max().unwrap_or(0),
        snapshot_ms_max: p.snapshot_ms_max,
        samples: samples.clone(),
    })
}

/// One conversation slot: its conversations one after the other, each for a few inputs,
/// taking inputs from the shared counter until the run is done. The task that processes the
/// last input before a checkpoint takes it.
async fn worker<L: StateLog>(
    store: &ActionStateStore<L>,
    slot: usize,
    config: &SoakConfig,
    next: &AtomicU64,
    done: &AtomicU64,
    progress: &Mutex<Progress>,
) -> Result<(), StoreError> {
    let (reply, note) = (ActionId::new("reply"), ActionId::new("note"));
    let per = config.inputs_per_conversation.max(1);
    let mut mine = 0u64;
    let result = vec![0x5a; config.result_bytes];
    loop {
        let n = next.fetch_add(1, Ordering::Relaxed);
        if n >= config.inputs {
            return Ok(());
        }
        let (conversation, seq) = (mine / per, mine % per);
        mine += 1;
        let input = event("message", i64::try_from(seq).unwrap_or(0));
        let round = Round::named(&format!("conversation-{slot}-{conversation}"), seq, &input);
        let key = round.key;
        let answered = match store.begin(&round, &reply, &input, &Trigger::Input).await? {
            Begin::Reuse(state) => state,
            Begin::Resume(mut handle) | Begin::Fresh(mut handle, _) => {
                let out = result.clone();
                store.call(&mut handle, "llm.complete", [7; 32], || async move { Ok(out) }).await?;
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
        store.round_completed(key, seq);
        let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
        if finished.is_multiple_of(config.checkpoint_every.max(1)) {
            let id = finished / config.checkpoint_every.max(1);
            let began = Instant::now();
            let snap = store.snapshot(id).await?;
            store.checkpoint_complete(id);
            let ms = began.elapsed().as_secs_f64() * 1e3;
            let mut p = progress.lock();
            p.snapshot_entries = snap.completed.len();
            p.snapshot_ms = p.snapshot_ms.max(ms);
            p.snapshot_ms_max = p.snapshot_ms_max.max(ms);
        }
    }
}

fn event(event_type: &str, v: i64) -> Event {
    let mut attributes = Attributes::new();
    attributes.insert("v".into(), Value::Int(v));
    Event::new(event_type, attributes)
}
