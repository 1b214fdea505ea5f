//! Rebuild: restore the index from covering markers.

use crate::error::{Result, StoreError};
use crate::store::{ActionStateStore, Ownership};
use actionstate_core::codec::{self, Peeked};
use actionstate_core::{KeyId, Marker, Position, ReadBatch, ReadRecord, StateLog};
use actionstate_index::{Index, Recorded};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
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
    /// Partitions read.
    pub partitions: u32,
    /// States in the index afterwards.
    pub states: usize,
    /// Wall time.
    pub duration: Duration,
}

impl RebuildReport {
    /// Records read per second.
    pub fn records_per_second(&self) -> f64 {
        self.records as f64 / self.duration.as_secs_f64().max(1e-9)
    }
}

impl<L: StateLog> ActionStateStore<L> {
    /// Restores the index of a checkpoint: merges `markers` (minimum per partition), checks
    /// them against the log (changed log, unknown partition, offset beyond the end, offset
    /// below the earliest retained one are errors naming partition and offsets), reads every
    /// partition from its marker to the end offset captured at the start — partitions in
    /// parallel — keeps the keys this worker owns, and prunes the rounds `completed` says the
    /// checkpoint already finished.
    ///
    /// No markers means no checkpoint: the index starts empty. On error the store is
    /// unchanged.
    #[tracing::instrument(level = "info", skip_all, fields(markers = markers.len()))]
    pub async fn rebuild(
        &self,
        markers: &[Marker],
        ownership: &Ownership,
        completed: &HashMap<KeyId, u64>,
    ) -> Result<RebuildReport> {
        let started = Instant::now();
        // Exclusive: no lookup or write may interleave with replacing the index.
        let _epoch = self.epoch.write().await;
        let owned_completed: HashMap<KeyId, u64> =
            completed.iter().filter(|(k, _)| ownership.owns(k)).map(|(k, s)| (*k, *s)).collect();
        let Some(marker) = Marker::merge(markers)? else {
            self.install(Index::new(), owned_completed);
            return Ok(RebuildReport { duration: started.elapsed(), ..RebuildReport::default() });
        };
        // Three independent questions to the backend, asked at once; their errors are reported
        // in this order whatever order the answers come in.
        let (current, earliest, end) =
            tokio::join!(self.log.current_identity(), self.log.earliest_offsets(), self.log.end_offsets());
        let (current, earliest, end) = (current?, earliest?, end?);
        marker.validate(&current, &earliest, &end)?;

        // Each partition is replayed into an index of its own, in parallel; a key's records all
        // live in one partition, so the indexes are joined by moving keys.
        let mut tasks = tokio::task::JoinSet::new();
        // Per partition, the offset its reader has reached, for the deadline error.
        let reached: Arc<Vec<AtomicU64>> = Arc::new(marker.offsets.iter().map(|&o| AtomicU64::new(o)).collect());
        for (partition, (&from, &to)) in (0u32..).zip(marker.offsets.iter().zip(&end)) {
            let log = Arc::clone(&self.log);
            let ownership = ownership.clone();
            let reached = Arc::clone(&reached);
            let (batch, stall) = (self.config.read_batch.max(1), self.config.rebuild_stall);
            tasks.spawn(
                async move { read_partition(&*log, &ownership, partition, from, to, batch, stall, &reached).await },
            );
        }
        let mut report = RebuildReport { partitions: current.partitions, ..RebuildReport::default() };
        let mut index = Index::new();
        let mut done = vec![false; end.len()];
        let deadline = self.config.rebuild_deadline.map(|d| (d, tokio::time::Instant::from_std(started) + d));
        loop {
            let next = match deadline {
                Some((limit, at)) => match tokio::time::timeout_at(at, tasks.join_next()).await {
                    Ok(next) => next,
                    Err(_) => {
                        tasks.abort_all();
                        let unfinished = (0u32..)
                            .zip(&end)
                            .filter(|(p, _)| !done[*p as usize])
                            .map(|(p, &e)| (p, reached[p as usize].load(Ordering::Relaxed), e))
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
            report.records += part.records;
            report.bytes += part.bytes;
            report.foreign += part.foreign;
            let partition = part.partition;
            index.absorb(part.index).map_err(|key| StoreError::KeyInTwoPartitions { key, partition })?;
        }
        for (key, seq) in &owned_completed {
            index.prune(key, *seq);
        }
        report.states = index.stats().states;
        self.install(index, owned_completed);
        report.duration = started.elapsed();
        crate::metrics::rebuilt(report.records, report.records_per_second());
        tracing::info!(
            records = report.records,
            bytes = report.bytes,
            states = report.states,
            seconds = report.duration.as_secs_f64(),
            "rebuild finished"
        );
        Ok(report)
    }
}

struct PartitionRead {
    partition: u32,
    index: Index,
    records: u64,
    bytes: u64,
    foreign: u64,
}

/// Reads one partition from `from` to `to` into an index of its own. The next batch is read
/// while the previous one is indexed (one batch ahead), so the log's read path and the index
/// work overlap instead of taking turns.
#[allow(clippy::too_many_arguments, reason = "one call site; a struct would only rename them")]
async fn read_partition<L: StateLog>(
    log: &L,
    ownership: &Ownership,
    partition: u32,
    from: u64,
    to: u64,
    batch: usize,
    stall: Duration,
    reached: &[AtomicU64],
) -> Result<PartitionRead> {
    let stalled = |offset| StoreError::RebuildStalled { partition, offset, end: to, seconds: stall.as_secs() };
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<ReadBatch>>(1);
    let reader = async move {
        let mut next = from;
        while next < to {
            let read = match tokio::time::timeout(stall, log.read(partition, next, to, batch)).await {
                Err(_) => Err(stalled(next)),
                Ok(Err(e)) => Err(e.into()),
                Ok(Ok(read)) if read.records.is_empty() && read.next <= next => Err(stalled(next)),
                Ok(Ok(read)) => Ok(read),
            };
            let failed = read.is_err();
            next = read.as_ref().map_or(next, |r| r.next);
            // The indexer has stopped (it failed): nothing more to read.
            if tx.send(read).await.is_err() || failed {
                break;
            }
        }
    };
    // Owns the receiver, so that an indexer that fails drops it and stops the reader.
    let indexer = async move {
        let mut out = PartitionRead { partition, index: Index::new(), records: 0, bytes: 0, foreign: 0 };
        while let Some(read) = rx.recv().await {
            let read = read?;
            index_batch(&mut out, ownership, read.records)?;
            if let Some(r) = reached.get(partition as usize) {
                r.store(read.next, Ordering::Relaxed);
            }
        }
        Ok(out)
    };
    let ((), out) = tokio::join!(reader, indexer);
    out
}

/// Indexes one batch of a partition's records, in log order.
fn index_batch(out: &mut PartitionRead, ownership: &Ownership, records: Vec<ReadRecord>) -> Result<()> {
    let partition = out.partition;
    for r in records {
        out.records += 1;
        let bytes = r.key.len() + r.value.len();
        out.bytes += bytes as u64;
        // The key id sits at the same place in every log key: skip foreign records before
        // paying for their decode.
        if let Some(key) = log_key_id(&r.key)
            && !ownership.owns(&key)
        {
            out.foreign += 1;
            continue;
        }
        // Checked in full, but kept encoded: a lookup decodes the state it hands out.
        let position = Position { partition, offset: r.offset, exact: true };
        match codec::peek(&r.key, &r.value).map_err(|e| e.at(partition, r.offset))? {
            Peeked::Upsert(evidence) => {
                out.index.upsert(Recorded::encoded(evidence, r.value.into_boxed_slice(), position), position, bytes);
            }
            Peeked::Other(record) => {
                out.index.apply(*record, position, bytes);
            }
        }
    }
    Ok(())
}

/// The key id of a log key (state keys and audit keys both carry it at bytes 1..33), if the
/// key is long enough; anything else is left for the decoder to reject with a typed error.
fn log_key_id(key: &[u8]) -> Option<KeyId> {
    key.get(1..33).and_then(|b| <[u8; 32]>::try_from(b).ok()).map(KeyId)
}
