//! The store: lookups, the put contract, invalidation and the checkpoint lifecycle.
//!
//! What lives where: this file holds [`ActionStateStore`] and its lookups and writes;
//! `config.rs` [`StoreConfig`]; `vocab.rs` the words of the API (`Round`, `Begin`, `Snapshot`,
//! `Explanation`, `OperatorInvalidation`); `round.rs` `OpenRound`; `handle.rs` the
//! `ActionHandle` that `begin` hands an action; `key_lock.rs` the per-key locks;
//! `operator.rs` an operator's invalidation. Other
//! concepts add to the one `impl ActionStateStore` from their own folders: durable calls in
//! `calls/`, checkpoints, restore and rebuild in `checkpoint/`, fencing in `fencing/` (its
//! records in the log in `fencing/log.rs`), retention in `retention/`.

pub(crate) mod config;
pub(crate) mod handle;
pub(crate) mod key_lock;
mod operator;
pub(crate) mod round;
pub(crate) mod vocab;

use crate::checkpoint::form::{CheckpointForm, InLog, TwoPhase};
use crate::error::{Result, StoreError};
use crate::fencing::Fencing;
use crate::metrics as m;
use crate::retention::shared::SharedReclaim;
use crate::retention::{ReclaimStatus, Reclaimer, Retained, Retention};
use crate::spans;
use crate::store::config::StoreConfig;
use crate::store::handle::ActionHandle;
use crate::store::key_lock::KeyLocks;
use crate::store::vocab::{Begin, Explanation, Round, Snapshot};
use crate::waits::registry::{Requests, Waits};
use actionstate_core::{
    ActionId, ActionState, CallResult, Event, Evidence, InvalidationReason, KeyId, LogRecord, Marker, MemoryUpdate,
    Ownership, Progress, StateKey, StateLog, Trigger, WireRecord, checkpoint::CHECKPOINT_PARTITION, codec,
};
use actionstate_index::{Decision, Index, Invalidation, Probe, Recorded, Stats};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Instant;
use tracing::Instrument;

pub(crate) struct Shared {
    pub(crate) index: Index,
    /// Invalidation records (tombstones, audits) not yet durable, per key, in order. They are
    /// appended before the key's next write and before any snapshot.
    pending: HashMap<KeyId, VecDeque<LogRecord>>,
    /// The last completed round of each key that still has indexed states, rounds in flight,
    /// or records a restore could replay.
    last_completed: HashMap<KeyId, Completion>,
    checkpoints: BTreeMap<u64, Taken>,
    /// Per partition, keys whose rounds were all pruned, with an offset past every upsert of
    /// theirs, sorted by it. A key leaves `last_completed` once a snapshot's marker reaches
    /// that offset: no later restore replays its states.
    draining: Vec<VecDeque<(u64, KeyId, u64)>>,
    /// The markers of the checkpoints completed since the store was created or rebuilt.
    retained: Retained,
    /// The owner epoch, the fences markers carry, and whether a newer owner fenced the store.
    pub(crate) fencing: Fencing,
    /// The durable waits the pending states record (`waits/registry.rs`).
    pub(crate) waits: Waits,
    /// The resolve requests of other processes read and not settled, and how far the log was
    /// read for them (`waits/requests.rs`).
    pub(crate) requests: Requests,
    /// The end offsets the last snapshot read (empty before the first): how far behind them
    /// the oldest live states lie decides what a checkpoint carries forward
    /// (`retention/carry.rs`).
    pub(crate) last_end: Vec<u64>,
}

/// The last completed round of a key, an offset past every upsert of its pruned rounds (0:
/// none known), and whether the key is queued in `draining`.
#[derive(Clone, Copy, Debug)]
struct Completion {
    seq: u64,
    past: u64,
    draining: bool,
}

/// A checkpoint snapshotted and not yet completed or aborted.
#[derive(Debug)]
struct Taken {
    marker: Marker,
    end: Vec<u64>,
    completed: Arc<HashMap<KeyId, u64>>,
}

/// Durable action state over a [`StateLog`], whose checkpoints take the form `F`: written into
/// the log ([`InLog`], the default) or kept by the runtime ([`TwoPhase`]). See the crate docs
/// for the contract.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), actionstate_recovery::StoreError> {
/// use actionstate_core::{ActionId, Attributes, Event, EventId, KeyId, Trigger};
/// use actionstate_memory::MemoryLog;
/// use actionstate_recovery::{ActionStateStore, Begin, CallSource, DurableCall, Round, StoreConfig};
///
/// let store = ActionStateStore::new(MemoryLog::new(4), StoreConfig::default());
/// let input = Event::new("question", Attributes::new());
/// let round = store.round(Round::new(KeyId::of(b"user-7"), 0, &input));
/// let action = ActionId::new("answer");
///
/// let Begin::Fresh(mut handle, _) = store.begin(&round, &action, &input, &Trigger::Input).await? else {
///     unreachable!("nothing recorded yet")
/// };
/// let call = DurableCall::new("llm.complete").args("What is 6 times 7?")?;
/// let llm = store.call(&mut handle, call, |_key| async { Ok(b"42".to_vec()) }).await?;
/// assert_eq!((llm.output, llm.source), (Ok(b"42".to_vec()), CallSource::Executed));
/// store.complete(handle, vec![Event::new("answer", Attributes::new())], vec![]).await?;
/// round.finish();
///
/// // Replaying the same input (a new event id, the same content) reuses the completion.
/// let replayed = Event { id: EventId::random(), ..input.clone() };
/// let round = store.round(Round::new(KeyId::of(b"user-7"), 0, &replayed));
/// assert!(matches!(store.begin(&round, &action, &replayed, &Trigger::Input).await?, Begin::Reuse(_)));
/// round.finish();
/// # Ok(()) }
/// ```
pub struct ActionStateStore<L: StateLog, F: CheckpointForm = InLog> {
    pub(crate) log: Arc<L>,
    pub(crate) shared: Mutex<Shared>,
    /// Serializes the writes (and lookups) of one key.
    pub(crate) keys: KeyLocks,
    /// Writers and lookups hold it shared; a snapshot holds it exclusively so that the marker
    /// and the flushed invalidations describe one consistent moment.
    pub(crate) epoch: tokio::sync::RwLock<()>,
    pub(crate) config: StoreConfig,
    pub(crate) reclaimer: Arc<Reclaimer>,
    /// The last checkpoint id written into the log or restored from it; held while a
    /// checkpoint is written, so that the store writes one at a time.
    pub(crate) log_checkpoint: tokio::sync::Mutex<u64>,
    /// Held by a poll for resolve requests, so that polls take turns.
    pub(crate) requests_poll: tokio::sync::Mutex<()>,
    /// [`StoreConfig::call_key_scope`], shared with every handle.
    call_key_scope: Arc<str>,
    /// Rounds started with [`round`](Self::round) and dropped unfinished.
    pub(crate) rounds_dropped: std::sync::atomic::AtomicU64,
    form: PhantomData<fn() -> F>,
}

impl<L: StateLog, F: CheckpointForm> std::fmt::Debug for ActionStateStore<L, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ActionStateStore").field("log", self.log.identity()).field("stats", &self.stats()).finish()
    }
}

impl<L: StateLog> ActionStateStore<L, InLog> {
    /// A store over a new `log`, with an empty index, that writes its checkpoints into the log
    /// ([`InLog`]). A process that restarts on a log it wrote before opens it with
    /// [`restore`](Self::restore) instead: that replays what the log holds and fences the
    /// writer it replaces.
    pub fn new(log: L, config: StoreConfig) -> Self {
        ActionStateStore::empty(log, config)
    }
}

impl<L: StateLog> ActionStateStore<L, TwoPhase> {
    /// A store over a new `log`, with an empty index, whose runtime keeps its checkpoints
    /// ([`TwoPhase`]). A process that restarts on a log it wrote before opens it with
    /// [`restore`](Self::restore) from the snapshots its runtime kept.
    pub fn new_two_phase(log: L, config: StoreConfig) -> Self {
        ActionStateStore::empty(log, config)
    }
}

impl<L: StateLog, F: CheckpointForm> ActionStateStore<L, F> {
    /// A store over `log` with an empty index, of either form.
    pub(crate) fn empty(log: L, config: StoreConfig) -> Self {
        let reclaimer = Arc::new(Reclaimer::default());
        reclaimer.disable(not_reclaiming(&config, &log));
        let partitions = log.identity().partitions as usize;
        ActionStateStore {
            log: Arc::new(log),
            shared: Mutex::new(Shared {
                index: Index::new(),
                pending: HashMap::new(),
                last_completed: HashMap::new(),
                checkpoints: BTreeMap::new(),
                draining: vec![VecDeque::new(); partitions],
                retained: Retained::default(),
                fencing: Fencing::default(),
                waits: Waits::default(),
                requests: Requests::default(),
                last_end: Vec::new(),
            }),
            keys: KeyLocks::default(),
            epoch: tokio::sync::RwLock::new(()),
            call_key_scope: Arc::from(config.call_key_scope.as_str()),
            config,
            reclaimer,
            log_checkpoint: tokio::sync::Mutex::new(0),
            requests_poll: tokio::sync::Mutex::new(()),
            rounds_dropped: std::sync::atomic::AtomicU64::new(0),
            form: PhantomData,
        }
    }

    /// The log behind the store.
    pub fn log(&self) -> &L {
        &self.log
    }

    /// Counts of what the index holds.
    pub fn stats(&self) -> Stats {
        self.shared.lock().index.stats()
    }

    /// Read-only access to the index (for inspection and verification).
    pub fn with_index<R>(&self, f: impl FnOnce(&Index) -> R) -> R {
        f(&self.shared.lock().index)
    }

    /// Looks up the action triggered by `event` in `round` and says whether to reuse, resume
    /// or run it. A miss may invalidate recorded history; the tombstones and the audit record
    /// are appended before this key's next write (or the next snapshot).
    pub async fn begin(&self, round: &Round, action: &ActionId, event: &Event, trigger: &Trigger) -> Result<Begin> {
        self.check_owned(&round.key)?;
        let key = StateKey::new(round.key, round.seq, action, event, trigger);
        let probe = Probe { key, trigger, event: event.id, input: round.input };
        let _epoch = self.epoch.read().await;
        let _key = self.keys.lock(round.key).await;
        let (decision, incarnation) = {
            let mut sh = self.shared.lock();
            let lookup = sh.index.lookup(&probe);
            sh.enqueue(&key, Some(action), lookup.invalidation);
            (lookup.decision, sh.index.incarnation(&key))
        };
        let attempt = |decision, first| spans::action(&key, action, incarnation, decision, first);
        let handle = |journal: Vec<CallResult>, trace, span| ActionHandle {
            key,
            action: action.clone(),
            trigger: trigger.clone(),
            trigger_event: event.id,
            input: round.input,
            label: round.label,
            trace,
            journal,
            cursor: 0,
            incarnation,
            scope: Arc::clone(&self.call_key_scope),
            suspended: false,
            span,
        };
        Ok(match decision {
            // A replayed state is decoded here, when it is used (see `Recorded`).
            Decision::Hit(recorded) => {
                let state = recorded.state()?;
                if state.is_completed() {
                    m::hit("reuse");
                    // An attempt that runs nothing: its span ends here.
                    drop(attempt(spans::Decision::Reuse, state.trace.as_ref()));
                    Begin::Reuse(state)
                } else {
                    m::hit("resume");
                    let span = attempt(spans::Decision::Resume, state.trace.as_ref());
                    Begin::Resume(handle(state.calls().to_vec(), state.trace, span))
                }
            }
            Decision::Miss(reason) => {
                m::miss(reason);
                let span = attempt(spans::Decision::Fresh(reason), None);
                // Written first now: the state records the round's trace, or this attempt's.
                let trace = round.trace.or_else(|| spans::context_of(&span));
                Begin::Fresh(handle(Vec::new(), trace, span), reason)
            }
        })
    }

    /// What [`begin`](Self::begin) would decide, without changing anything.
    pub fn explain(&self, round: &Round, action: &ActionId, event: &Event, trigger: &Trigger) -> Explanation {
        let key = StateKey::new(round.key, round.seq, action, event, trigger);
        let probe = Probe { key, trigger, event: event.id, input: round.input };
        let sh = self.shared.lock();
        let (decision, divergence, would_invalidate) = sh.index.explain(&probe);
        let incarnation = sh.index.incarnation(&key);
        Explanation { key, decision, divergence, would_invalidate, incarnation }
    }

    /// Records the completion of an action: its outputs and memory updates become durable,
    /// then indexed. Returns the indexed state.
    pub async fn complete(
        &self,
        handle: ActionHandle,
        outputs: Vec<Event>,
        memory: Vec<MemoryUpdate>,
    ) -> Result<Arc<ActionState>> {
        handle.check_live()?;
        let span = handle.span.clone();
        let put = self.put(handle.state(Progress::Completed { outputs, memory })).instrument(span.clone()).await;
        span.record("actionstate.completed", put.is_ok());
        put
    }

    /// The put contract: encode, append durably, and only then index. On error — or if the
    /// returned future is dropped before it completes — the index is unchanged.
    pub(crate) async fn put(&self, state: ActionState) -> Result<Arc<ActionState>> {
        let _epoch = self.epoch.read().await;
        let _key = self.keys.lock(state.key.key).await;
        self.put_locked(state).await
    }

    /// [`put`](Self::put), by a caller that holds the epoch shared and the key's lock (a
    /// resolve, which reads the state it rewrites under them).
    pub(crate) async fn put_locked(&self, state: ActionState) -> Result<Arc<ActionState>> {
        let key = state.key;
        self.check_owned(&key.key)?;
        self.flush_key(&key.key).await?;
        let epoch = self.writer_epoch()?;
        let record = LogRecord::Upsert(state);
        let wire = codec::encode_by(&record, epoch)?;
        let bytes = wire.key.len() + wire.value.len();
        // The index keeps the record as the log holds it, as a rebuild does: a state this
        // process wrote is rarely looked up again before a restart, and its bytes take about
        // half the memory of the decoded state, in one allocation instead of a dozen.
        let kept = wire.value.clone().into_boxed_slice();
        let started = Instant::now();
        let position = self.log.append(wire).await.inspect_err(|e| m::put_failed(e.is_retryable()))?;
        m::put_latency(started.elapsed());
        // No await between the acknowledgement and the index update: a dropped future either
        // never saw the acknowledgement or has already indexed.
        let LogRecord::Upsert(state) = record else { unreachable!("built as an upsert above") };
        let evidence = Evidence::of(&state);
        let state = Arc::new(state);
        let mut sh = self.shared.lock();
        let invalidation = sh.index.upsert(Recorded::encoded(evidence, kept, position), position, bytes);
        // An upsert removes only what its invalidation lists, so the state is indexed unless
        // it is listed there (no second lookup on the put path).
        let vanished = invalidation.removed.iter().any(|r| r.key == key);
        sh.enqueue(&key, None, invalidation);
        if vanished {
            return Err(StoreError::StaleHandle { key, detail: "state vanished after indexing" });
        }
        sh.waits.note(&state);
        Ok(state)
    }

    /// [`StoreError::NotOwned`] unless `key` is among the keys the store owns.
    pub(crate) fn check_owned(&self, key: &KeyId) -> Result<()> {
        let sh = self.shared.lock();
        match &sh.fencing.ownership {
            Ownership::Groups { max_groups, owned } if !owned.contains(&key.key_group(*max_groups)) => {
                Err(StoreError::NotOwned {
                    key: *key,
                    group: key.key_group(*max_groups),
                    max_groups: *max_groups,
                    owned: sh.fencing.ownership.clone(),
                })
            }
            _ => Ok(()),
        }
    }

    /// The epoch the store writes with, unless a newer owner fenced it.
    fn writer_epoch(&self) -> Result<u64> {
        let sh = self.shared.lock();
        sh.fencing.check()?;
        Ok(sh.fencing.epoch)
    }

    /// The owner epoch every record the store appends carries: 0 until a rebuild, then the
    /// epoch the rebuild took (see [`StoreConfig::fence_on_rebuild`]).
    pub fn epoch(&self) -> u64 {
        self.shared.lock().fencing.epoch
    }

    /// Appends this key's pending invalidation records, oldest first.
    async fn flush_key(&self, key: &KeyId) -> Result<()> {
        loop {
            let Some(record) = self.shared.lock().pending.get(key).and_then(|q| q.front().cloned()) else {
                return Ok(());
            };
            let epoch = self.writer_epoch()?;
            self.log.append(codec::encode_by(&record, epoch)?).await?;
            let mut sh = self.shared.lock();
            if let Some(q) = sh.pending.get_mut(key) {
                q.pop_front();
                if q.is_empty() {
                    sh.pending.remove(key);
                }
            }
        }
    }

    /// Every action of `seq` for `key` finished: a checkpoint taken from now on need not
    /// replay the round (see [`Round::finish`](crate::OpenRound::finish)).
    pub(crate) fn round_completed(&self, key: KeyId, seq: u64) {
        let mut sh = self.shared.lock();
        let last = sh.last_completed.entry(key).or_insert(Completion { seq, past: 0, draining: false });
        last.seq = last.seq.max(seq);
        last.draining = false;
    }

    /// A snapshot (see [`snapshot`](ActionStateStore::snapshot)), and the end offsets it read.
    pub(crate) async fn take_snapshot(&self, checkpoint: u64) -> Result<(Snapshot, Vec<u64>)> {
        let taken = self.take_snapshot_exclusive(checkpoint).await?;
        // Outside the exclusive section, so that writers go on while the log is read: what a
        // newer owner fenced below `end` fails this snapshot all the same.
        if let Err(e) = self.look_for_fences(&taken.1).await {
            self.shared.lock().checkpoints.remove(&checkpoint);
            return Err(e);
        }
        Ok(taken)
    }

    /// The part of a snapshot no write may interleave with: flush the queued invalidations,
    /// capture the end offsets, take the marker and the completed rounds.
    async fn take_snapshot_exclusive(&self, checkpoint: u64) -> Result<(Snapshot, Vec<u64>)> {
        let _epoch = self.epoch.write().await;
        self.shared.lock().fencing.check()?;
        let keys: Vec<KeyId> = self.shared.lock().pending.keys().copied().collect();
        for key in keys {
            self.flush_key(&key).await?;
        }
        let end = self.log.end_offsets().await?;
        let mut sh = self.shared.lock();
        let marker = sh.covering_marker(self.log.identity(), &end);
        sh.last_end.clone_from(&end);
        sh.drain(&marker.offsets);
        let completed: HashMap<KeyId, u64> = sh.last_completed.iter().map(|(k, c)| (*k, c.seq)).collect();
        let completed = Arc::new(completed);
        sh.checkpoints
            .insert(checkpoint, Taken { marker: marker.clone(), end: end.clone(), completed: Arc::clone(&completed) });
        while sh.checkpoints.len() > self.config.max_pending_checkpoints.max(1) {
            sh.checkpoints.pop_first();
        }
        Ok((Snapshot { checkpoint, marker, completed }, end))
    }

    /// The pruning half of completing a checkpoint: forgets
    /// `checkpoint` and every older one, prunes the rounds it completed, and returns the states
    /// pruned, the checkpoint's marker and the end offset of partition 0 its snapshot read
    /// (`None`: not pending).
    pub(crate) fn prune_checkpoint(&self, checkpoint: u64) -> Option<(usize, Marker, u64)> {
        let mut sh = self.shared.lock();
        let taken = sh.checkpoints.remove(&checkpoint)?;
        sh.checkpoints.retain(|id, _| *id > checkpoint);
        let partitions = self.log.identity().partitions;
        let mut pruned = 0;
        for (key, seq) in taken.completed.iter() {
            let gone = sh.index.prune_reporting(key, *seq);
            pruned += gone.states;
            // A restore from a marker past the last upsert of the key's pruned rounds replays
            // none of them. A lower bound says only that the record lies below the end offsets
            // of the checkpoint's snapshot.
            let p = key.partition(partitions) as usize;
            let end = taken.end.get(p).copied().unwrap_or(u64::MAX);
            let bound = match gone.last {
                Some(at) if at.exact => at.offset + 1,
                Some(_) => end,
                None => 0,
            };
            let empty = sh.index.last_seq(key).is_none();
            let Some(c) = sh.last_completed.get_mut(key) else { continue };
            c.past = c.past.max(bound);
            if empty {
                // Nothing known of where its records are: they lie below the end, at least.
                let past = if c.past == 0 { end } else { c.past };
                sh.start_draining(*key, *seq, partitions, past);
            }
        }
        let from = taken.end.get(CHECKPOINT_PARTITION as usize).copied().unwrap_or(0);
        Some((pruned, taken.marker, from))
    }

    /// The retention half of completing a checkpoint: a completed
    /// checkpoint's marker joins the retained ones, and once enough have, what no retained one
    /// needs is reclaimed in the background.
    pub(crate) fn retain(&self, marker: Marker) {
        let mut sh = self.shared.lock();
        // A store that owns part of the keys knows only its own checkpoints' needs: it
        // reclaims only from the checkpoints of every owner in the log (see `checkpoint`).
        let point = match sh.fencing.ownership {
            Ownership::All => sh.retained.complete(self.config.retention, marker),
            Ownership::Groups { .. } => None,
        };
        // Never past a record the index still holds (the marker of now, without an end).
        let point = point.map(|p| sh.index.covering_offsets(&p));
        drop(sh);
        if let Some(point) = point {
            self.reclaimer.request(&self.log, point);
        }
    }

    /// The covering marker of the index now, for a log of end offsets `end`, with the fences a
    /// replay from it must know.
    pub(crate) fn marker_now(&self, end: &[u64]) -> Marker {
        self.shared.lock().covering_marker(self.log.identity(), end)
    }

    /// After a checkpoint of a store that owns some key groups: asks for a reclaim whose point
    /// the checkpoints of every owner in the log decide, once `publish` (the marker of a
    /// checkpoint the runtime keeps, if any) is appended.
    pub(crate) fn reclaim_shared(&self, publish: Option<WireRecord>) {
        let Retention::LastCheckpoints(keep) = self.config.retention else { return };
        let job = {
            let sh = self.shared.lock();
            let Ownership::Groups { max_groups, .. } = sh.fencing.ownership else { return };
            let partitions = self.log.identity().partitions as usize;
            SharedReclaim {
                max_groups,
                keep: usize::try_from(keep).unwrap_or(usize::MAX),
                read_batch: self.config.read_batch,
                local: sh.index.covering_offsets(&vec![u64::MAX; partitions]),
                publish,
            }
        };
        self.reclaimer.request_shared(&self.log, job);
    }

    /// Forgets a pending checkpoint without pruning.
    pub(crate) fn forget_checkpoint(&self, checkpoint: u64) {
        self.shared.lock().checkpoints.remove(&checkpoint);
    }

    /// What reclaiming history has done so far (see [`Retention`]).
    pub fn reclaim_status(&self) -> ReclaimStatus {
        self.reclaimer.status()
    }

    /// Waits until no reclaim runs, and returns the status then. A reclaim holds the log while
    /// it runs: a caller that drops the store and opens the same embedded log at once (a
    /// simulated restart) waits here first.
    pub async fn wait_for_reclaim(&self) -> ReclaimStatus {
        self.reclaimer.idle().await
    }

    /// Keys the store remembers a completed round of (what the next snapshot's
    /// [`Snapshot::completed`] holds at most).
    pub fn completed_keys(&self) -> usize {
        self.shared.lock().last_completed.len()
    }

    /// Checkpoints snapshotted and not yet completed or aborted.
    pub fn pending_checkpoints(&self) -> usize {
        self.shared.lock().checkpoints.len()
    }

    /// Pending invalidation records not yet appended (for tests and metrics).
    pub fn pending_invalidations(&self) -> usize {
        self.shared.lock().pending.values().map(VecDeque::len).sum()
    }

    /// Replaces the index (after a rebuild that read the log to `end`), with `pending` the
    /// records to append before each key's next write, and the fencing state the rebuild
    /// took.
    pub(crate) fn install(
        &self,
        index: Index,
        completed: HashMap<KeyId, u64>,
        end: &[u64],
        pending: HashMap<KeyId, VecDeque<LogRecord>>,
        fencing: Fencing,
    ) {
        let mut sh = self.shared.lock();
        sh.index = index;
        sh.pending = pending;
        sh.fencing = fencing;
        // The rounds the rebuild pruned lie below the end offsets it read to.
        let partitions = self.log.identity().partitions;
        sh.last_completed = completed
            .into_iter()
            .map(|(k, seq)| {
                let past = end.get(k.partition(partitions) as usize).copied().unwrap_or(u64::MAX);
                (k, Completion { seq, past, draining: false })
            })
            .collect();
        sh.checkpoints.clear();
        sh.draining.iter_mut().for_each(VecDeque::clear);
        sh.retained.clear();
        // The waits are in the journals of the pending states the rebuild replayed.
        sh.waits.clear();
        for recorded in sh.index.pending() {
            match recorded.state() {
                Ok(state) => sh.waits.note(&state),
                Err(e) => {
                    tracing::warn!(key = ?recorded.key(), error = %e, "a pending state did not decode; its waits are not listed")
                }
            }
        }
        self.reclaimer.disable(not_reclaiming(&self.config, &*self.log));
    }
}

impl Shared {
    /// Queues `key`, whose rounds were all pruned, to leave `last_completed` once a marker
    /// reaches `past`: every upsert of it a restore could replay lies below. (Its tombstones
    /// and audits may lie above; replayed without its states, they remove nothing.)
    fn start_draining(&mut self, key: KeyId, seq: u64, partitions: u32, past: u64) {
        let Some(c) = self.last_completed.get_mut(&key) else { return };
        if c.draining || c.seq != seq {
            return;
        }
        c.draining = true;
        let p = key.partition(partitions) as usize;
        if let Some(queue) = self.draining.get_mut(p) {
            // Kept sorted by offset: keys pruned together drain in the order of their records.
            let at = queue.partition_point(|(o, _, _)| *o <= past);
            queue.insert(at, (past, key, seq));
        }
    }

    /// Forgets the completed rounds of drained keys whose records all lie below `marker`: a
    /// restore of a checkpoint with this marker replays none of them.
    fn drain(&mut self, marker: &[u64]) {
        for (queue, &at) in self.draining.iter_mut().zip(marker) {
            while queue.front().is_some_and(|(end, _, _)| *end <= at) {
                let Some((_, key, seq)) = queue.pop_front() else { break };
                let idle = self.last_completed.get(&key).is_some_and(|c| c.draining && c.seq == seq);
                if idle && self.index.last_seq(&key).is_none() {
                    self.last_completed.remove(&key);
                }
            }
        }
    }

    /// Queues the records that log an invalidation, in the order
    /// [`Invalidation::records`] gives: the audit of the divergence, then one tombstone per
    /// removed state.
    fn enqueue(&mut self, probe: &StateKey, action: Option<&ActionId>, inv: Invalidation) {
        if inv.is_empty() {
            return;
        }
        m::invalidated(&inv);
        match &inv.divergence {
            Some((reason @ InvalidationReason::Operator { .. }, _)) => {
                tracing::warn!(key = %probe.key, from_seq = probe.seq, %reason, removed = inv.removed.len(), "operator invalidation");
            }
            Some((reason, _)) => {
                tracing::info!(key = %probe.key, seq = probe.seq, %reason, removed = inv.removed.len(), "divergence");
            }
            None => {}
        }
        for removed in &inv.removed {
            self.waits.forget(&removed.key);
        }
        self.pending.entry(probe.key).or_default().extend(inv.records(probe, action));
    }
}

/// Why a store with `config` over `log`, owning `ownership`, must not reclaim, if it must not.
fn not_reclaiming<L: StateLog>(config: &StoreConfig, log: &L) -> Option<&'static str> {
    match config.retention {
        Retention::KeepAll => Some("retention keeps everything"),
        _ if !log.capabilities().reclaim => Some("the backend cannot reclaim"),
        // A store that owns part of the keys reclaims too: its checkpoints and the other
        // owners' are all in the log, written there or published (`reclaim_shared`).
        Retention::LastCheckpoints(_) => None,
    }
}
