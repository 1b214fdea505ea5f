//! Helpers shared by the store-level tests: events, a small agent that drives the store as a
//! runtime would, backends to run scenarios on, and views of the index to compare.
#![allow(dead_code, reason = "each test binary uses a different part of the helpers")]

use actionstate_core::{
    ActionId, ActionState, Attributes, Event, EventId, Fingerprint, IdempotencyKey, KeyId, LogRecord, Marker, MemoryOp,
    MemoryUpdate, Position, StateKey, StateLog, TaggedBytes, Trigger, Value, codec,
};
use actionstate_index::Stats;
use actionstate_memory::MemoryLog;
use actionstate_recovery::{
    ActionStateStore, AnyLog, Begin, CheckpointForm, LogConfig, Round, Snapshot, StoreConfig, StoreError, TwoPhase,
};
pub(crate) use actionstate_testkit::{Faulty, SlowReads};
use std::collections::BTreeMap;
use std::sync::Arc;
use tempfile::TempDir;

/// Partitions of every log the tests open.
pub(crate) const PARTITIONS: u32 = 4;

/// The business key named `name`.
pub(crate) fn key(name: &str) -> KeyId {
    KeyId::of(name.as_bytes())
}

/// An event of `event_type` with one attribute `v`, with a fresh id.
pub(crate) fn event(event_type: &str, v: impl Into<Value>) -> Event {
    let mut attributes = Attributes::new();
    attributes.insert("v".into(), v.into());
    Event::new(event_type, attributes)
}

/// The input event number `n`.
pub(crate) fn input(n: i64) -> Event {
    event("input", n)
}

/// The same event content with a new id, as a restored input arrives.
pub(crate) fn replayed(e: &Event) -> Event {
    Event { id: EventId::random(), ..e.clone() }
}

/// The action that plans a round: it emits two steps.
pub(crate) fn plan() -> ActionId {
    ActionId::new("plan")
}

/// The action that runs one step.
pub(crate) fn act() -> ActionId {
    ActionId::new("act")
}

/// A memory write.
pub(crate) fn note(n: u64) -> MemoryUpdate {
    MemoryUpdate {
        path: format!("/notes/{n}"),
        op: MemoryOp::Set(TaggedBytes { tag: "le".into(), bytes: n.to_le_bytes().to_vec() }),
    }
}

/// What processing one input did: how many actions were reused, resumed and run fresh.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// Completed actions replayed from the store.
    pub(crate) reused: usize,
    /// Actions resumed from their journal.
    pub(crate) resumed: usize,
    /// Actions run from scratch.
    pub(crate) fresh: usize,
}

/// Processes one input as an agent would: `plan` runs on the input and emits two steps,
/// `act` runs on each step. Returns what was reused and what ran.
pub(crate) async fn process<L: StateLog, F: CheckpointForm>(
    store: &ActionStateStore<L, F>,
    key: KeyId,
    seq: u64,
    input: &Event,
) -> Result<Outcome, StoreError> {
    let round = Round::new(key, seq, input);
    let mut outcome = Outcome::default();
    let planned = run(store, &round, &plan(), input, &Trigger::Input, &mut outcome, |_| {
        (vec![event("step", format!("{seq}/0")), event("step", format!("{seq}/1"))], vec![note(seq)])
    })
    .await?;
    for (index, step) in (0u32..).zip(planned.outputs()) {
        let trigger = Trigger::Emitted { producer: planned.key, index };
        run(store, &round, &act(), step, &trigger, &mut outcome, |_| {
            (Vec::new(), vec![note(seq * 10 + u64::from(index))])
        })
        .await?;
    }
    Ok(outcome)
}

async fn run<L: StateLog, F: CheckpointForm>(
    store: &ActionStateStore<L, F>,
    round: &Round,
    action: &ActionId,
    event: &Event,
    trigger: &Trigger,
    outcome: &mut Outcome,
    body: impl FnOnce(&Event) -> (Vec<Event>, Vec<MemoryUpdate>),
) -> Result<Arc<ActionState>, StoreError> {
    let handle = match store.begin(round, action, event, trigger).await? {
        Begin::Reuse(state) => {
            outcome.reused += 1;
            return Ok(state);
        }
        Begin::Resume(handle) => {
            outcome.resumed += 1;
            handle
        }
        Begin::Fresh(handle, _) => {
            outcome.fresh += 1;
            handle
        }
    };
    let (outputs, memory) = body(event);
    store.complete(handle, outputs, memory).await
}

/// Number of states `process` records per input.
pub(crate) const STATES_PER_ROUND: usize = 3;

/// The backends store scenarios run on: [`Backend::Memory`] and [`Backend::File`] (the
/// server backends run them in the integration tests).
pub(crate) use actionstate_testkit::Backend;

/// One log that survives "crashes": stores are dropped and new ones open the same records.
#[derive(Debug)]
pub(crate) struct Env {
    /// The backend.
    pub(crate) backend: Backend,
    memory: MemoryLog,
    dir: TempDir,
}

impl Env {
    /// A new, empty log on `backend`.
    pub(crate) fn new(backend: Backend) -> Env {
        Env { backend, memory: MemoryLog::new(PARTITIONS), dir: tempfile::tempdir().unwrap() }
    }

    /// The data directory of the file backend.
    pub(crate) fn data_dir(&self) -> std::path::PathBuf {
        self.dir.path().join("data")
    }

    /// Opens a handle on the log, as a restarted process would. The file backend allows one
    /// handle at a time: drop the previous one first.
    pub(crate) async fn open(&self) -> AnyLog {
        match self.backend {
            Backend::Memory => AnyLog::Memory(self.memory.reopen()),
            Backend::File => {
                let config = LogConfig::File(actionstate_file::FileConfig::new(self.data_dir(), PARTITIONS));
                actionstate_recovery::open(&config).await.unwrap()
            }
            server => panic!("the store tests run on the embedded backends, not {}", server.name()),
        }
    }

    /// A store with an empty index over a new handle on the log.
    pub(crate) async fn store(&self) -> ActionStateStore<AnyLog> {
        ActionStateStore::new(self.open().await, StoreConfig::default())
    }

    /// A store that keeps the whole log, for tests that restore checkpoints older than the
    /// ones retention keeps.
    pub(crate) async fn store_keeping_all(&self) -> ActionStateStore<AnyLog> {
        let config = StoreConfig { retention: actionstate_recovery::Retention::KeepAll, ..StoreConfig::default() };
        ActionStateStore::new(self.open().await, config)
    }

    /// A store with an empty index over a new handle on the log, whose checkpoints the caller
    /// keeps (the two-phase form: `snapshot`, `checkpoint_complete`).
    pub(crate) async fn two_phase(&self) -> ActionStateStore<AnyLog, TwoPhase> {
        ActionStateStore::new_two_phase(self.open().await, StoreConfig::default())
    }

    /// A two-phase store that keeps the whole log, for tests that restore snapshots older
    /// than the ones retention keeps.
    pub(crate) async fn two_phase_keeping_all(&self) -> ActionStateStore<AnyLog, TwoPhase> {
        let config = StoreConfig { retention: actionstate_recovery::Retention::KeepAll, ..StoreConfig::default() };
        ActionStateStore::new_two_phase(self.open().await, config)
    }

    /// A two-phase store over a new handle on the log, restored from `snapshots` (the
    /// previous handle must be dropped on the file backend).
    pub(crate) async fn restored(&self, snapshots: &[Snapshot]) -> ActionStateStore<AnyLog, TwoPhase> {
        self.restored_with(StoreConfig::default(), snapshots).await
    }

    /// [`restored`](Self::restored) with `config`.
    pub(crate) async fn restored_with(
        &self,
        config: StoreConfig,
        snapshots: &[Snapshot],
    ) -> ActionStateStore<AnyLog, TwoPhase> {
        let ownership = actionstate_recovery::Ownership::All;
        ActionStateStore::restore(self.open().await, config, &ownership, snapshots).await.unwrap().0
    }

    /// A store over a handle that can be shared with other stores (several workers on one log).
    pub(crate) async fn shared(&self) -> Arc<AnyLog> {
        Arc::new(self.open().await)
    }
}

/// Defines one test per backend running `$scenario(Backend)`: `$name::memory` and
/// `$name::file`.
#[macro_export]
macro_rules! on_every_backend {
    ($name:ident, $scenario:ident) => {
        mod $name {
            #[tokio::test]
            async fn memory() {
                super::$scenario($crate::common::Backend::Memory).await;
            }

            #[tokio::test]
            async fn file() {
                super::$scenario($crate::common::Backend::File).await;
            }
        }
    };
}

/// Every indexed state with its log position.
pub(crate) type Dump = BTreeMap<StateKey, (Arc<ActionState>, Position)>;

/// The whole index of `store`.
pub(crate) fn dump<L: StateLog, F: CheckpointForm>(store: &ActionStateStore<L, F>) -> Dump {
    store.with_index(|ix| {
        let _scan = actionstate_index::allow_scans();
        ix.dump().into_iter().map(|(k, (r, p))| (k, (r.state().expect("an indexed state decodes"), p))).collect()
    })
}

/// Index statistics of `store`.
pub(crate) fn stats<L: StateLog, F: CheckpointForm>(store: &ActionStateStore<L, F>) -> Stats {
    store.with_index(|ix| ix.stats())
}

/// Everything observable about the index: statistics, every state with its position, and
/// what `explain` says for each probe.
#[derive(Debug, PartialEq)]
pub(crate) struct View {
    /// Index statistics.
    pub(crate) stats: Stats,
    /// The whole index.
    pub(crate) dump: Dump,
    /// `explain` of each probe, rendered.
    pub(crate) explained: Vec<String>,
}

/// A lookup a test explains before and after an operation.
#[derive(Clone, Debug)]
pub(crate) struct Probe {
    /// The round.
    pub(crate) round: Round,
    /// The action.
    pub(crate) action: ActionId,
    /// The trigger event.
    pub(crate) event: Event,
    /// How it came about.
    pub(crate) trigger: Trigger,
}

impl Probe {
    /// The root action `plan` of round `seq` of `key` on `input`.
    pub(crate) fn root(key: KeyId, seq: u64, input: &Event) -> Probe {
        Probe { round: Round::new(key, seq, input), action: plan(), event: input.clone(), trigger: Trigger::Input }
    }
}

/// The view of `store` with `probes` explained.
pub(crate) fn view<L: StateLog, F: CheckpointForm>(store: &ActionStateStore<L, F>, probes: &[Probe]) -> View {
    let explained = probes
        .iter()
        .map(|p| {
            let e = store.explain(&p.round, &p.action, &p.event, &p.trigger);
            format!("{:?} {:?} {:?} {}", e.key, e.decision, e.divergence, e.would_invalidate)
        })
        .collect();
    View { stats: stats(store), dump: dump(store), explained }
}

/// Total records in the log (sum of end offsets).
pub(crate) async fn records<L: StateLog>(log: &L) -> u64 {
    log.end_offsets().await.unwrap().iter().sum()
}

/// Every record of `partition` from the earliest retained offset, decoded, with offsets.
pub(crate) async fn decoded<L: StateLog>(log: &L, partition: u32) -> Vec<(u64, LogRecord)> {
    let earliest = log.earliest_offsets().await.unwrap()[partition as usize];
    let end = log.end_offsets().await.unwrap()[partition as usize];
    let mut out = Vec::new();
    let mut range = actionstate_core::RangeRead::new(partition, earliest, end, 256);
    while let Some(records) = range.next_batch(log).await.unwrap() {
        for r in records {
            out.push((r.offset, codec::decode(&r.key, &r.value).unwrap()));
        }
    }
    out
}

/// The upserts of state `sk` in the log, oldest first.
pub(crate) async fn upserts_of<L: StateLog>(log: &L, sk: &StateKey) -> Vec<ActionState> {
    decoded(log, sk.key.partition(log.identity().partitions))
        .await
        .into_iter()
        .filter_map(|(_, r)| match r {
            LogRecord::Upsert(s) if s.key == *sk => Some(s),
            _ => None,
        })
        .collect()
}

/// The number of indexed states of `key` in rounds `seq > after`.
pub(crate) fn states_after<L: StateLog, F: CheckpointForm>(
    store: &ActionStateStore<L, F>,
    key: &KeyId,
    after: u64,
) -> usize {
    store.with_index(|ix| ix.rounds_of(key).into_iter().filter(|(s, _)| *s > after).map(|(_, v)| v.len()).sum())
}

/// An in-memory log behind the test kit's fault-injecting wrapper.
pub(crate) type FaultyMemory = Faulty<MemoryLog>;

/// A new, empty in-memory log with [`Faults`](actionstate_testkit::Faults) of its own, none on.
pub(crate) fn faulty_memory(partitions: u32) -> FaultyMemory {
    Faulty::wrap(MemoryLog::new(partitions))
}

/// `log` with its reads of one partition slowed or hung as `reads` says.
pub(crate) fn with_slow_reads<L>(log: L, reads: SlowReads) -> Faulty<L> {
    let faulty = Faulty::wrap(log);
    faulty.faults().slow_reads(reads);
    faulty
}

/// A new handle on a wrapped in-memory log, sharing its records and its faults, as a
/// restarted process would open.
pub(crate) trait Reopen {
    /// The new handle.
    fn reopen(&self) -> Self;
}

impl Reopen for FaultyMemory {
    fn reopen(&self) -> Self {
        self.with_inner(self.inner().reopen())
    }
}

/// A durable-call body (or reconciler) that counts its executions and returns `output`.
pub(crate) fn counted(
    runs: &std::sync::atomic::AtomicUsize,
    output: actionstate_recovery::CallOutput,
) -> impl FnOnce(IdempotencyKey) -> std::future::Ready<actionstate_recovery::CallOutput> + '_ {
    move |_key| {
        runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        std::future::ready(output)
    }
}

/// Begins the root action `plan` of round `seq` of `key` on `input`, expecting nothing
/// reusable.
pub(crate) async fn fresh<L: StateLog, F: CheckpointForm>(
    store: &ActionStateStore<L, F>,
    key: KeyId,
    seq: u64,
    input: &Event,
) -> actionstate_recovery::ActionHandle {
    match store.begin(&Round::new(key, seq, input), &plan(), input, &Trigger::Input).await.unwrap() {
        Begin::Fresh(handle, _) => handle,
        other => panic!("expected a fresh action, got {other:?}"),
    }
}

/// Begins the root action `plan` of round `seq` of `key` on `input`, expecting to resume it.
pub(crate) async fn resume<L: StateLog, F: CheckpointForm>(
    store: &ActionStateStore<L, F>,
    key: KeyId,
    seq: u64,
    input: &Event,
) -> actionstate_recovery::ActionHandle {
    match store.begin(&Round::new(key, seq, input), &plan(), input, &Trigger::Input).await.unwrap() {
        Begin::Resume(handle) => handle,
        other => panic!("expected to resume the action, got {other:?}"),
    }
}

/// Reports round `seq` of `key` finished, as a runtime does once every action of the round is
/// done, where the test holds only the key and the round's number: the store records only
/// those two, so the round's input fingerprint is left zero.
pub(crate) fn finish_round<L: StateLog, F: CheckpointForm>(store: &ActionStateStore<L, F>, key: KeyId, seq: u64) {
    store.round(Round { key, seq, input: Fingerprint([0; 32]), label: None, trace: None }).finish();
}

/// A snapshot that holds only `marker` (no completed rounds): what a restore from a bare
/// covering marker starts from.
pub(crate) fn at_marker(marker: &Marker) -> Snapshot {
    Snapshot { checkpoint: 0, marker: marker.clone(), completed: Arc::default() }
}
