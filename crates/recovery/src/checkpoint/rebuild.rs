//! Rebuild: restore the index from covering markers.

use crate::checkpoint::floors::Floors;
use crate::checkpoint::form::CheckpointForm;
use crate::error::{Result, StoreError};
use crate::fencing::{self, FenceRead, Fencing};
use crate::store::ActionStateStore;
use crate::waits::registry::{Requests, request_of};
use actionstate_core::codec::{self, Peeked};
use actionstate_core::{
    CHECKPOINT_KEY_LAYOUT, CheckpointRollback, FENCE_KEY_LAYOUT, InvalidationReason, KeyId, LogRecord, Marker,
    Ownership, Position, RESOLVE_KEY_LAYOUT, RangeRead, ReadRecord, ResolveRequest, StateKey, StateLog,
};
use actionstate_index::{Fences, Index, Invalidation, Recorded};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// What a rebuild read and kept.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RebuildReport {
    /// Records read from the log.
    pub records: u64,
    /// Bytes read (keys and values).
    pub bytes: u64,
    /// Records of keys this worker does not own, skipped.
    pub foreign: u64,
    /// Checkpoint records read (they change no state: a restore reads the ones it needs before
    /// the rebuild).
    pub checkpoints: u64,
    /// Partitions read.
    pub partitions: u32,
    /// States in the index afterwards.
    pub states: usize,
    /// Tombstones of invalidations a crash cut short: states an audit record removed whose
    /// own tombstone the crashed writer did not get to. They are appended before each key's
    /// next write (or the next snapshot), so that the log holds every invalidation whole.
    pub tombstones_queued: u64,
    /// Records skipped as a fenced writer's: written with an older epoch than a fence before
    /// them over their key.
    pub fenced: u64,
    /// Records of a key skipped because they lie below the marker of the checkpoint its group
    /// was restored from (a restore that combines checkpoints of several former owners reads
    /// from the smallest marker, and each group starts at its own).
    pub before_checkpoint: u64,
    /// Resolve requests read: other processes asked to resolve waits of the keys owned. The
    /// restore settles those whose wait is still pending before it returns.
    pub requests: u64,
    /// The owner epoch the store writes with from now on.
    pub epoch: u64,
    /// Wall time.
    pub duration: Duration,
}

impl RebuildReport {
    /// Records read per second.
    pub fn records_per_second(&self) -> f64 {
        self.records as f64 / self.duration.as_secs_f64().max(1e-9)
    }
}

impl<L: StateLog, F: CheckpointForm> ActionStateStore<L, F> {
    /// Restores the index of the checkpoints whose covering `markers` are given, for the
    /// keys of `ownership`, pruning the rounds `completed` says they finished: the rebuild
    /// behind [`restore`](Self::restore), whose docs give the whole behaviour.
    ///
    /// Markers of several former owners (a rescale from the snapshots a runtime kept) replay
    /// each key from its own owner's marker, the owner's groups being those of the newest
    /// fence mark its marker carries, so that keys an owner had finished do not come back
    /// unfinished from another's older marker; markers whose owners overlap, or that carry no
    /// fence mark, replay from the merged marker.
    ///
    /// No markers means no checkpoint: the whole retained log is replayed. On error the store
    /// is unchanged, and the error is returned only once every partition reader this call
    /// started has stopped and dropped its handle on the log (a reader stops after its read
    /// in flight returns; [`StoreConfig::rebuild_stall`](crate::StoreConfig) bounds the wait
    /// for one that does not).
    //
    // Not an `async fn`: it hands out `rebuild_from`'s future as it is, so that the futures of
    // callers that restore stay within the compiler's default layout depth.
    pub(crate) fn rebuild<'a>(
        &'a self,
        markers: &'a [Marker],
        ownership: &'a Ownership,
        completed: &'a HashMap<KeyId, u64>,
    ) -> impl std::future::Future<Output = Result<RebuildReport>> + 'a {
        // A rescale from the snapshots of several owners replays each key from its own
        // owner's marker, as a restore from the log does (`floors.rs`).
        self.rebuild_from(markers, ownership, completed, Floors::of_snapshots(markers), None)
    }

    /// [`rebuild`](Self::rebuild), with each key's records replayed from its group's floor
    /// (the marker of the checkpoint a restore chose for it) rather than from the merged one,
    /// and with the restore's `rollback` record appended to partition 0 before its fence there
    /// (not written when the rebuild does not fence: it has no newer epoch to void by).
    #[tracing::instrument(name = "actionstate.rebuild", level = "info", skip_all, fields(actionstate.rebuild.markers = markers.len()))]
    pub(crate) async fn rebuild_from(
        &self,
        markers: &[Marker],
        ownership: &Ownership,
        completed: &HashMap<KeyId, u64>,
        floors: Floors,
        rollback: Option<CheckpointRollback>,
    ) -> Result<RebuildReport> {
        let started = Instant::now();
        // Exclusive: no lookup or write may interleave with replacing the index.
        let _epoch = self.epoch.write().await;
        let mut owned_completed: HashMap<KeyId, u64> =
            completed.iter().filter(|(k, _)| ownership.owns(k)).map(|(k, s)| (*k, *s)).collect();
        let fence = self.config.fence_on_rebuild;
        let merged = Marker::merge(markers)?;
        if merged.is_none() && !fence {
            // Nothing to replay and nobody to fence; the completed rounds given lie below the
            // end, at least.
            let end = if owned_completed.is_empty() { Vec::new() } else { self.log.end_offsets().await? };
            let fencing = Fencing { ownership: ownership.clone(), ..Fencing::default() };
            self.install(Index::new(), owned_completed, &end, HashMap::new(), fencing);
            self.shared.lock().requests = Requests::default();
            return Ok(RebuildReport { duration: started.elapsed(), ..RebuildReport::default() });
        }
        // Three independent questions to the backend, asked at once; their errors are reported
        // in this order whatever order the answers come in.
        let (current, offsets) = tokio::join!(self.log.current_identity(), self.log.offsets());
        let (current, (earliest, end)) = (current?, offsets?);
        // No checkpoint: nothing to replay, but the fences are appended and read all the same.
        let marker = merged.unwrap_or_else(|| Marker::new(current.clone(), end.clone()));
        marker.validate(&current, &earliest, &end)?;
        let floors = Arc::new(floors.above(&marker.offsets).then_some(floors));
        let mut joined = self.read_partitions(&marker, &end, ownership, &floors, started, current.partitions).await?;
        let (epoch, reached) = if fence {
            self.fence_and_catch_up(&marker, &end, ownership, rollback.as_ref(), &mut joined, current.partitions)
                .await?
        } else {
            // Not below the epoch of any record replayed: the fences that carried it may be
            // reclaimed (an owner's restore still knows them from its checkpoint's marker),
            // and a record written with an older epoch would be fenced there.
            (newest_epoch(&marker, &joined.fences, ownership).max(joined.newest_epoch), end.clone())
        };
        let Joined { mut report, mut index, unlogged, fences_read, skipped, requests, .. } = joined;
        relearn_skipped(skipped, &index, &mut owned_completed);
        for (key, seq) in &owned_completed {
            index.prune(key, *seq);
        }
        report.states = index.stats().states;
        report.epoch = epoch;
        let pending = queue_tombstones(unlogged, &mut report);
        let fencing = Fencing {
            epoch,
            ownership: ownership.clone(),
            marks: fencing::table(&marker.fences, &fences_read, current.partitions, ownership),
            seen: fence.then(|| reached.clone()),
            fenced: None,
        };
        self.install(index, owned_completed, &reached, pending, fencing);
        report.requests = requests.len() as u64;
        self.shared.lock().requests = Requests { read_to: reached.clone(), found: requests };
        report.duration = started.elapsed();
        log_finished(&report);
        Ok(report)
    }

    /// Replays every partition from `marker` to `end`, each into an index of its own, in
    /// parallel (a key's records all live in one partition, so the indexes are joined by
    /// moving keys). On error, every reader has stopped and dropped its handle on the log
    /// before this returns.
    async fn read_partitions(
        &self,
        marker: &Marker,
        end: &[u64],
        ownership: &Ownership,
        floors: &Arc<Option<Floors>>,
        started: Instant,
        partitions: u32,
    ) -> Result<Joined> {
        let mut tasks = tokio::task::JoinSet::new();
        let readers = Readers {
            reached: marker.offsets.iter().map(|&o| AtomicU64::new(o)).collect(),
            stop: AtomicBool::new(false),
        };
        let readers = Arc::new(readers);
        for (partition, (&from, &to)) in (0u32..).zip(marker.offsets.iter().zip(end)) {
            let log = Arc::clone(&self.log);
            let ownership = ownership.clone();
            let (readers, floors) = (Arc::clone(&readers), Arc::clone(floors));
            let range = RangeRead::new(partition, from, to, self.config.read_batch.max(1));
            let fences = Fences::from_marks(&marker.fences, partition, from);
            let stall = self.config.rebuild_stall;
            tasks.spawn(async move {
                let scope = Scope { ownership: &ownership, floors: floors.as_ref().as_ref() };
                read_partition(&*log, scope, range, fences, stall, &readers).await
            });
        }
        let deadline = self.config.rebuild_deadline.map(|d| (d, tokio::time::Instant::from_std(started) + d));
        let joined = join_partitions(&mut tasks, &readers, end, deadline, partitions).await;
        if joined.is_err() {
            // Stop every reader and wait until each has returned from its read in flight and
            // dropped its handle on the log: a backend whose reads run on blocking threads
            // (the embedded store) keeps its files open until they do.
            readers.stop.store(true, Ordering::Relaxed);
            while tasks.join_next().await.is_some() {}
        }
        joined
    }

    /// Takes the owner's epoch and appends its fences to every partition; then reads what
    /// landed between `end` (captured at the start) and the fences (a writer still appending)
    /// into `joined`, so the index holds all a later replay applies. Returns the epoch and the
    /// end offsets after the fences.
    async fn fence_and_catch_up(
        &self,
        marker: &Marker,
        end: &[u64],
        ownership: &Ownership,
        rollback: Option<&CheckpointRollback>,
        joined: &mut Joined,
        partitions: u32,
    ) -> Result<(u64, Vec<u64>)> {
        let known = marker.fences.iter().map(|m| m.epoch).chain(joined.fences_read.iter().map(|(_, f, _)| f.epoch));
        let previous = self.shared.lock().fencing.epoch;
        let epoch = fencing::next_epoch(known.chain([previous]));
        let positions = self.append_fences(ownership, epoch, rollback).await?;
        let after = self.log.end_offsets().await?;
        for (partition, (&from, &to)) in (0u32..).zip(end.iter().zip(&after)) {
            self.catch_up_partition(partition, from, to, ownership, joined).await?;
        }
        // Where a fence of ours was not read back (a backend that reports no exact offset
        // and lost the record between the append and the end offsets is not possible
        // under the contract), its append position bounds it.
        for (p, at) in (0u32..).zip(&positions) {
            if !joined.fences_read.iter().any(|(rp, f, _)| *rp == p && f.epoch == epoch && f.groups == *ownership) {
                let fence = actionstate_core::Fence {
                    key: actionstate_core::fence_key_id(p, partitions),
                    groups: ownership.clone(),
                    epoch,
                };
                joined.fences_read.push((p, fence, at.offset));
            }
        }
        Ok((epoch, after))
    }

    /// Reads `[from, to)` of `partition` into `joined`, within one stall period.
    async fn catch_up_partition(
        &self,
        partition: u32,
        from: u64,
        to: u64,
        ownership: &Ownership,
        joined: &mut Joined,
    ) -> Result<()> {
        let range = RangeRead::new(partition, from, to, self.config.read_batch.max(1));
        let Some(partition_fences) = joined.fences.get_mut(partition as usize) else { return Ok(()) };
        let mut part = PartitionRead::new(partition, std::mem::take(partition_fences));
        part.index = std::mem::take(&mut joined.index);
        part.unlogged = std::mem::take(&mut joined.unlogged);
        let stall = self.config.rebuild_stall;
        // Past the end captured at the start, so past every checkpoint's marker: no floors.
        let scope = Scope { ownership, floors: None };
        let caught_up = match tokio::time::timeout(stall, catch_up(&*self.log, scope, range, &mut part)).await {
            Ok(done) => done,
            Err(_) => Err(StoreError::RebuildStalled { partition, offset: from, end: to, seconds: stall.as_secs() }),
        };
        joined.index = std::mem::take(&mut part.index);
        joined.unlogged = std::mem::take(&mut part.unlogged);
        caught_up?;
        part.count_into(&mut joined.report);
        joined.fences_read.append(&mut part.fences_read);
        joined.requests.append(&mut part.requests);
        Ok(())
    }
}

/// Keys whose records a floor skipped and that hold no state at or below their last skipped
/// round: their checkpoint had pruned those rounds and then forgotten the key. The store
/// counts them completed again, so that its own checkpoints name them for as long as their
/// records lie at or above its marker (which may lie below the floor that skipped them), and
/// a restore of those checkpoints prunes them too.
fn relearn_skipped(skipped: HashMap<KeyId, u64>, index: &Index, completed: &mut HashMap<KeyId, u64>) {
    for (key, seq) in skipped {
        let first = index.rounds_of(&key).first().map(|(s, _)| *s);
        if !completed.contains_key(&key) && first.is_none_or(|first| first > seq) {
            completed.insert(key, seq);
        }
    }
}

/// The epoch a store that does not fence writes with: that of the newest fence over its
/// keys, in the marker or read.
fn newest_epoch(marker: &Marker, fences: &[Fences], ownership: &Ownership) -> u64 {
    let marked = marker.fences.iter().filter(|m| m.groups.overlaps(ownership)).map(|m| m.epoch);
    fences.iter().filter_map(|f| f.newest_over(ownership)).chain(marked).max().unwrap_or(0)
}

/// The tombstones an invalidation cut short did not write, per key, to append before its next
/// write; counted in `report`.
fn queue_tombstones(
    unlogged: BTreeMap<StateKey, InvalidationReason>,
    report: &mut RebuildReport,
) -> HashMap<KeyId, VecDeque<LogRecord>> {
    let mut pending: HashMap<KeyId, VecDeque<LogRecord>> = HashMap::new();
    for (key, reason) in unlogged {
        report.tombstones_queued += 1;
        pending.entry(key.key).or_default().push_back(LogRecord::Delete { key, reason });
    }
    pending
}

/// Records a finished rebuild's metrics and logs it.
fn log_finished(report: &RebuildReport) {
    crate::metrics::rebuilt(report.records, report.duration, report.records_per_second());
    if report.fenced > 0 {
        crate::metrics::fenced_records(report.fenced);
        tracing::warn!(records = report.fenced, "rebuild skipped records of fenced writers");
    }
    if report.tombstones_queued > 0 {
        tracing::warn!(
            tombstones = report.tombstones_queued,
            "rebuild replayed invalidations a crash cut short; their missing tombstones are queued"
        );
    }
    tracing::info!(
        records = report.records,
        bytes = report.bytes,
        states = report.states,
        epoch = report.epoch,
        seconds = report.duration.as_secs_f64(),
        "rebuild finished"
    );
}

/// What the partition readers of one rebuild share.
struct Readers {
    /// Per partition, the offset its reader has reached, for the deadline error.
    reached: Vec<AtomicU64>,
    /// Set when the rebuild failed: readers stop after their read in flight.
    stop: AtomicBool,
}

/// What the partitions read.
struct Joined {
    /// The report so far.
    report: RebuildReport,
    /// The joined index.
    index: Index,
    /// The removed states whose tombstones the log lacks.
    unlogged: BTreeMap<StateKey, InvalidationReason>,
    /// Per partition, the fences in force where its read stopped.
    fences: Vec<Fences>,
    /// The fence records read.
    fences_read: Vec<FenceRead>,
    /// Per key whose upserts a floor skipped, the last round skipped.
    skipped: HashMap<KeyId, u64>,
    /// The resolve requests read, in log order per partition.
    requests: Vec<ResolveRequest>,
    /// The newest writer epoch of the records replayed.
    newest_epoch: u64,
}

/// Joins the partition readers as they finish, until all have or one fails or the deadline
/// passes. On error, readers may still be running; the caller stops and awaits them.
async fn join_partitions(
    tasks: &mut tokio::task::JoinSet<Result<PartitionRead>>,
    readers: &Readers,
    end: &[u64],
    deadline: Option<(std::time::Duration, tokio::time::Instant)>,
    partitions: u32,
) -> Result<Joined> {
    let mut report = RebuildReport { partitions, ..RebuildReport::default() };
    let mut index = Index::new();
    let mut unlogged = BTreeMap::new();
    let mut fences = vec![Fences::new(); end.len()];
    let mut fences_read = Vec::new();
    let mut skipped = HashMap::new();
    let mut requests = Vec::new();
    let mut newest_epoch = 0;
    let mut done = vec![false; end.len()];
    loop {
        let next = match deadline {
            Some((limit, at)) => match tokio::time::timeout_at(at, tasks.join_next()).await {
                Ok(next) => next,
                Err(_) => {
                    let unfinished = (0u32..)
                        .zip(end)
                        .filter(|(p, _)| !done[*p as usize])
                        .map(|(p, &e)| (p, readers.reached[p as usize].load(Ordering::Relaxed), e))
                        .collect();
                    return Err(StoreError::RebuildDeadline { limit, unfinished });
                }
            },
            None => tasks.join_next().await,
        };
        let Some(joined) = next else { break };
        let part = joined.map_err(|e| StoreError::Task(e.to_string()))??;
        if let Some(d) = done.get_mut(part.partition as usize) {
            *d = true;
        }
        part.count_into(&mut report);
        let partition = part.partition;
        unlogged.extend(part.unlogged);
        fences_read.extend(part.fences_read);
        skipped.extend(part.skipped);
        requests.extend(part.requests);
        newest_epoch = newest_epoch.max(part.newest_epoch);
        if let Some(f) = fences.get_mut(partition as usize) {
            *f = part.fences;
        }
        index.absorb(part.index).map_err(|key| StoreError::KeyInTwoPartitions { key, partition })?;
    }
    Ok(Joined { report, index, unlogged, fences, fences_read, skipped, requests, newest_epoch })
}

struct PartitionRead {
    partition: u32,
    index: Index,
    records: u64,
    bytes: u64,
    foreign: u64,
    checkpoints: u64,
    /// Records skipped as a fenced writer's.
    fenced: u64,
    /// The newest writer epoch of the records replayed.
    newest_epoch: u64,
    /// Records below their group's checkpoint marker, skipped.
    before_checkpoint: u64,
    /// Per key whose upserts a floor skipped, the last round skipped.
    skipped: HashMap<KeyId, u64>,
    /// States the replay removed that no later record of the partition names again (by a
    /// tombstone or a new upsert): the tombstones an invalidation cut short did not write.
    unlogged: BTreeMap<StateKey, InvalidationReason>,
    /// The fences in force at the read's position.
    fences: Fences,
    /// The fence records read.
    fences_read: Vec<FenceRead>,
    /// The resolve requests read, in offset order.
    requests: Vec<ResolveRequest>,
}

impl PartitionRead {
    fn new(partition: u32, fences: Fences) -> Self {
        PartitionRead {
            partition,
            index: Index::new(),
            records: 0,
            bytes: 0,
            foreign: 0,
            checkpoints: 0,
            fenced: 0,
            newest_epoch: 0,
            before_checkpoint: 0,
            skipped: HashMap::new(),
            unlogged: BTreeMap::new(),
            fences,
            fences_read: Vec::new(),
            requests: Vec::new(),
        }
    }

    /// Adds what this read counted to `report`.
    fn count_into(&self, report: &mut RebuildReport) {
        report.records += self.records;
        report.bytes += self.bytes;
        report.foreign += self.foreign;
        report.checkpoints += self.checkpoints;
        report.fenced += self.fenced;
        report.before_checkpoint += self.before_checkpoint;
    }
}

/// Reads `range` of a partition into `part`, in order, batch after batch (the short stretch a
/// rebuild reads after appending its fences).
async fn catch_up<L: StateLog>(
    log: &L,
    scope: Scope<'_>,
    mut range: RangeRead,
    part: &mut PartitionRead,
) -> Result<()> {
    while let Some(records) = range.next_batch(log).await? {
        index_batch(part, scope, records)?;
    }
    Ok(())
}

/// Reads one partition's `range` into an index of its own. The next batch is read while the
/// previous one is indexed (one batch ahead), so the log's read path and the index work
/// overlap instead of taking turns. Stops early, without error, once `readers.stop` is set.
async fn read_partition<L: StateLog>(
    log: &L,
    scope: Scope<'_>,
    mut range: RangeRead,
    fences: Fences,
    stall: Duration,
    readers: &Readers,
) -> Result<PartitionRead> {
    let partition = range.partition();
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<(Vec<ReadRecord>, u64)>>(1);
    let reader = async move {
        while !range.is_done() && !readers.stop.load(Ordering::Relaxed) {
            let (offset, end) = (range.next_offset(), range.end());
            let done = {
                let mut batch = std::pin::pin!(range.next_batch(log));
                match tokio::time::timeout(stall, &mut batch).await {
                    Ok(done) => Some(done),
                    Err(_) => {
                        // The read may be running on a blocking thread with the backend's
                        // files open: let it finish before this reader ends, giving up on it
                        // (a read that hangs for good) after another stall period.
                        let _ = tokio::time::timeout(stall, batch).await;
                        None
                    }
                }
            };
            let read = match done {
                None => Err(StoreError::RebuildStalled { partition, offset, end, seconds: stall.as_secs() }),
                Some(Err(e)) => Err(e.into()),
                Some(Ok(None)) => break,
                Some(Ok(Some(records))) => Ok((records, range.next_offset())),
            };
            let failed = read.is_err();
            // The indexer has stopped (it failed): nothing more to read.
            if tx.send(read).await.is_err() || failed {
                break;
            }
        }
    };
    // Owns the receiver, so that an indexer that fails drops it and stops the reader.
    let indexer = async move {
        let mut out = PartitionRead::new(partition, fences);
        while let Some(read) = rx.recv().await {
            let (records, next) = read?;
            index_batch(&mut out, scope, records)?;
            if let Some(r) = readers.reached.get(partition as usize) {
                r.store(next, Ordering::Relaxed);
            }
        }
        Ok(out)
    };
    let ((), out) = tokio::join!(reader, indexer);
    out
}

/// Which records of a partition a rebuild keeps: those of the keys owned, from their floors.
#[derive(Clone, Copy)]
struct Scope<'a> {
    ownership: &'a Ownership,
    floors: Option<&'a Floors>,
}

/// Indexes one batch of a partition's records, in log order.
fn index_batch(out: &mut PartitionRead, scope: Scope<'_>, records: Vec<ReadRecord>) -> Result<()> {
    let partition = out.partition;
    for r in records {
        out.records += 1;
        let bytes = r.key.len() + r.value.len();
        out.bytes += bytes as u64;
        // A fence governs the records after it whoever owns its key id.
        if r.key.first() == Some(&FENCE_KEY_LAYOUT)
            && let LogRecord::Fence(fence) = codec::decode(&r.key, &r.value).map_err(|e| e.at(partition, r.offset))?
        {
            out.fences.observe(&fence);
            out.fences_read.push((partition, fence, r.offset));
            continue;
        }
        // A checkpoint record changes no state (a restore reads the ones it needs itself).
        if r.key.first() == Some(&CHECKPOINT_KEY_LAYOUT) {
            out.checkpoints += 1;
            continue;
        }
        // The key id sits at the same place in every log key: skip foreign records before
        // paying for their decode.
        let key = log_key_id(&r.key);
        if let Some(key) = key
            && !scope.ownership.owns(&key)
        {
            out.foreign += 1;
            continue;
        }
        if let (Some(key), Some(floors)) = (key, scope.floors)
            && r.offset < floors.floor(&key, partition)
        {
            out.before_checkpoint += 1;
            note_skipped(&mut out.skipped, key, codec::peek(&r.key, &r.value).map_err(|e| e.at(partition, r.offset))?);
            continue;
        }
        // A resolve request changes no state and is not a state write: no fence refuses it.
        if r.key.first() == Some(&RESOLVE_KEY_LAYOUT) {
            out.requests.extend(request_of(partition, &r)?);
            continue;
        }
        // Checked in full, but kept encoded: a lookup decodes the state it hands out.
        let position = Position { partition, offset: r.offset, exact: true };
        let peeked = codec::peek(&r.key, &r.value).map_err(|e| e.at(partition, r.offset))?;
        let epoch = codec::writer_epoch(&r.value).map_err(|e| e.at(partition, r.offset))?;
        if let Some(key) = key
            && !out.fences.is_empty()
            && !out.fences.admits(&key, epoch)
        {
            out.fenced += 1;
            continue;
        }
        out.newest_epoch = out.newest_epoch.max(epoch);
        let removed = match peeked {
            Peeked::Upsert(evidence) => {
                let key = evidence.key;
                let removed = out.index.upsert(
                    Recorded::encoded(evidence, r.value.into_boxed_slice(), position),
                    position,
                    bytes,
                );
                if !out.unlogged.is_empty() {
                    out.unlogged.remove(&key);
                }
                removed
            }
            Peeked::Other(record) => {
                if let (LogRecord::Delete { key, .. }, false) = (&*record, out.unlogged.is_empty()) {
                    out.unlogged.remove(key);
                }
                out.index.apply(*record, position, bytes)
            }
        };
        note_removed(&mut out.unlogged, removed);
    }
    Ok(())
}

/// Notes a record of `key` a floor skipped in `skipped` (per key, the last round whose
/// completion the skipped records show): a completed state's round counts; an invalidation
/// (an audit, a tombstone) from round `f` on takes back the rounds from `f`, which did not
/// stay completed (a repaired round whose re-run is still pending must not be pruned as
/// completed by `relearn_skipped`).
fn note_skipped(skipped: &mut HashMap<KeyId, u64>, key: KeyId, record: Peeked) {
    let from = match record {
        Peeked::Upsert(evidence) if evidence.outputs.is_some() => {
            let last = skipped.entry(key).or_insert(evidence.key.seq);
            *last = (*last).max(evidence.key.seq);
            return;
        }
        Peeked::Other(record) => match *record {
            LogRecord::Audit(audit) => audit.seq,
            LogRecord::Delete { key, .. } => key.seq,
            _ => return,
        },
        Peeked::Upsert(_) => return,
    };
    if let Some(last) = skipped.get(&key).copied()
        && last >= from
    {
        match from.checked_sub(1) {
            Some(before) => skipped.insert(key, before),
            None => skipped.remove(&key),
        };
    }
}

/// Notes the states a replayed record removed: each needs a tombstone of its own later in the
/// log, which the writer appends right after the record that removed it unless a crash cut
/// it short.
fn note_removed(unlogged: &mut BTreeMap<StateKey, InvalidationReason>, removed: Invalidation) {
    for r in removed.removed {
        unlogged.insert(r.key, r.reason);
    }
}

/// The key id of a log key (state keys and audit keys both carry it at bytes 1..33), if the
/// key is long enough; anything else is left for the decoder to reject with a typed error.
fn log_key_id(key: &[u8]) -> Option<KeyId> {
    key.get(1..33).and_then(|b| <[u8; 32]>::try_from(b).ok()).map(KeyId)
}
