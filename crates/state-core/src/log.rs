//! The backend contract: an ordered, partitioned log of records.

use crate::error::Error;
use crate::fence::FenceMark;
use crate::id::KeyId;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::future::Future;

/// The bytes of one record as a backend stores them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireRecord {
    /// The business key; decides the partition.
    pub key_id: KeyId,
    /// The log key (an encoded state key, or an audit key).
    pub key: Vec<u8>,
    /// The enveloped value.
    pub value: Vec<u8>,
}

/// A record read back from a partition, with its offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadRecord {
    /// Offset of the record in its partition.
    pub offset: u64,
    /// The log key.
    pub key: Vec<u8>,
    /// The enveloped value.
    pub value: Vec<u8>,
}

/// One batch of a partition read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadBatch {
    /// Records in strictly increasing offset order, all with offsets in `[from, to)`.
    pub records: Vec<ReadRecord>,
    /// Where the next read continues: greater than `from` and than every returned offset
    /// unless the read was empty by request (`from >= to` or `max == 0`); `>= to` once the
    /// range is exhausted.
    pub next: u64,
}

/// Where an appended record landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Position {
    /// The partition.
    pub partition: u32,
    /// The record's offset, or — when `exact` is false — an offset no greater than it (the end
    /// offset listed before the append, for backends whose appends report no offset).
    pub offset: u64,
    /// Whether `offset` is the record's own offset.
    pub exact: bool,
}

/// Identity of a log: which backend, which topic/table/directory, how many partitions.
///
/// Markers carry it; a log whose identity differs (recreated topic, changed bucket count) is
/// a different log and rebuild refuses it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LogIdentity {
    /// Backend name, e.g. `"file"`.
    pub backend: String,
    /// Backend-specific identity that changes when the log is recreated (topic id, table id,
    /// directory uuid).
    pub id: String,
    /// Number of partitions; partitions are `0..partitions`.
    pub partitions: u32,
}

impl fmt::Display for LogIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{} ({} partitions)", self.backend, self.id, self.partitions)
    }
}

/// A recovery marker: per partition, the offset a rebuild must read from, and the fences a
/// rebuild from there must apply although their records lie before it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Marker {
    /// The log the offsets belong to.
    pub log: LogIdentity,
    /// Offset per partition, indexed by partition number.
    pub offsets: Vec<u64>,
    /// Fences of the owners' epochs (see [`crate::fence`]): without them, a rebuild from a
    /// marker past a fence record would replay the records a fenced writer appended after it.
    /// Empty for a log no restore has fenced; a marker serialized before fences existed reads
    /// as empty in a self-describing format.
    #[serde(default)]
    pub fences: Vec<FenceMark>,
}

impl Marker {
    /// A marker of `log` at `offsets`, without fences.
    pub fn new(log: LogIdentity, offsets: Vec<u64>) -> Self {
        Marker { log, offsets, fences: Vec::new() }
    }

    /// Merges markers of one log (e.g. from several workers): the minimum offset per partition.
    /// Returns `Ok(None)` for no markers.
    pub fn merge<'a>(markers: impl IntoIterator<Item = &'a Marker>) -> Result<Option<Marker>, Error> {
        let mut merged: Option<Marker> = None;
        for m in markers {
            match &mut merged {
                None => merged = Some(m.clone()),
                Some(acc) => {
                    if acc.log != m.log || acc.offsets.len() != m.offsets.len() {
                        return Err(Error::MixedMarkers { first: acc.log.to_string(), second: m.log.to_string() });
                    }
                    for (a, b) in acc.offsets.iter_mut().zip(&m.offsets) {
                        *a = (*a).min(*b);
                    }
                    // A fence applies from its own offsets on, whatever the merged ones.
                    for f in &m.fences {
                        if !acc.fences.contains(f) {
                            acc.fences.push(f.clone());
                        }
                    }
                }
            }
        }
        Ok(merged)
    }

    /// Checks this marker against the log as it is now: same identity, same partition set, and
    /// every offset within `[earliest, end]` of its partition.
    pub fn validate(&self, current: &LogIdentity, earliest: &[u64], end: &[u64]) -> Result<(), Error> {
        if self.log != *current {
            return Err(Error::LogChanged { expected: self.log.to_string(), found: current.to_string() });
        }
        let partitions = current.partitions;
        if self.offsets.len() != partitions as usize {
            // The first partition present on one side only: an offset for a partition the log
            // lacks, or a partition of the log the marker has no offset for.
            let first = u32::try_from(self.offsets.len().min(partitions as usize)).unwrap_or(u32::MAX);
            return Err(Error::UnknownPartition { log: current.to_string(), partition: first, partitions });
        }
        for (p, &offset) in (0u32..).zip(&self.offsets) {
            let e = *end.get(p as usize).ok_or_else(|| Error::UnknownPartition {
                log: current.to_string(),
                partition: p,
                partitions: u32::try_from(end.len()).unwrap_or(u32::MAX),
            })?;
            let lo = earliest.get(p as usize).copied().unwrap_or(0);
            if offset > e {
                return Err(Error::OffsetBeyondEnd { partition: p, offset, end: e });
            }
            if offset < lo {
                return Err(Error::DataLoss { partition: p, offset, earliest: lo });
            }
        }
        if let Some(f) = self.fences.iter().find(|f| f.offsets.len() != partitions as usize) {
            let first = u32::try_from(f.offsets.len().min(partitions as usize)).unwrap_or(u32::MAX);
            return Err(Error::UnknownPartition { log: current.to_string(), partition: first, partitions });
        }
        Ok(())
    }
}

/// An ordered, partitioned, durable log: the backend contract of actionstate.
///
/// # Contract
///
/// Implementations MUST:
/// - place every record of one [`KeyId`] in one partition, chosen deterministically from the
///   key id, so that per-key order is log order;
/// - return from [`append`](StateLog::append) only once the record is durable on the backend
///   (committed by the embedded store, acknowledged with `acks=all` by Kafka, awaited by Fluss);
///   an `Err` means the caller MUST treat the record as not written (it may still surface on
///   read if the acknowledgement was lost — rebuild handles that);
/// - preserve append order within a partition: records appended one after another by one task
///   are read back in that order;
/// - report in [`Position`] the record's partition and either its exact offset or a lower bound
///   of it (`exact = false`);
/// - make [`read`](StateLog::read) yield records of `[from, to)` in offset order, and stop at
///   `to` — never "until an empty poll" — keeping the read rules below;
/// - keep the partition set stable: [`identity`](StateLog::identity) is captured at open, and
///   [`current_identity`](StateLog::current_identity) fetches it again so a recreated topic or
///   a changed partition count is reported, not papered over;
/// - return [`Error::Backend`] with [`BackendError::is_retryable`](crate::BackendError::is_retryable)
///   true for failures that may pass on retry (unreachable server, timeout) and false for
///   failures that will not.
///
/// Implementations SHOULD:
/// - be cheap to call concurrently from many tasks (appends of different keys may overlap);
/// - read partitions independently so rebuild can read them in parallel.
///
/// # Reads
///
/// A read of `partition` with `from < to` and `max > 0` MUST:
/// - make progress: return at least one record, or a [`ReadBatch::next`] greater than `from`.
///   An empty batch with `next <= from` is a contract violation: the caller can neither read
///   the same offset again (it could loop forever) nor step over it (it could lose a record);
/// - return at most `max` records, every one with an offset in `[from, to)`, in strictly
///   increasing offset order;
/// - skip nothing: every record of the partition with an offset in `[from, next)` is in the
///   batch (offsets without a record, as compaction leaves them, may be stepped over);
/// - return a `next` greater than the offset of the last record returned;
/// - fail with an error — retryable ([`BackendError::is_retryable`](crate::BackendError::is_retryable))
///   — when it cannot fetch anything in time (a server that does not answer, a range reaching
///   past the end), instead of returning an empty batch that does not advance.
///
/// A read with `from >= to` or `max == 0` returns an empty batch with `next = from`.
/// [`RangeRead`](crate::RangeRead) reads a range batch by batch and checks every batch against
/// these rules, so callers do not have to.
///
/// # Reclaim
///
/// The store keeps a log only as far back as a restorable checkpoint needs and asks the
/// backend to drop what lies before ([`reclaim`](StateLog::reclaim)). A backend that can
/// says so in [`capabilities`](StateLog::capabilities). Its `reclaim(before)`:
/// - MUST NOT remove a record of partition `p` at or above `before[p]`;
/// - MUST leave [`earliest_offsets`](StateLog::earliest_offsets)`[p]` no greater than
///   `before[p]` and no lower than it was; once it returns, `earliest_offsets` reflects what
///   was reclaimed (a marker below it is then refused as data loss);
/// - SHOULD remove every record below `before[p]` and give its space back;
/// - MUST treat an offset at or below the earliest one as nothing to do, and refuse one
///   beyond the end with [`Error::OffsetBeyondEnd`].
///
/// A backend that cannot reclaim keeps the default: `capabilities().reclaim` is false and
/// `reclaim` fails with [`Error::Unsupported`]; the store then keeps everything.
pub trait StateLog: Send + Sync + 'static {
    /// Identity of the log as captured when it was opened.
    fn identity(&self) -> &LogIdentity;

    /// The identity of the log as it is now (detects recreated topics and changed partitions).
    fn current_identity(&self) -> impl Future<Output = Result<LogIdentity, Error>> + Send;

    /// Appends one record durably and reports where it landed.
    fn append(&self, record: WireRecord) -> impl Future<Output = Result<Position, Error>> + Send;

    /// Per partition, the earliest retained offset.
    fn earliest_offsets(&self) -> impl Future<Output = Result<Vec<u64>, Error>> + Send;

    /// Per partition, the end offset: one past the last durable record.
    fn end_offsets(&self) -> impl Future<Output = Result<Vec<u64>, Error>> + Send;

    /// Per partition, the earliest and the end offset, as [`earliest_offsets`](Self::earliest_offsets)
    /// and [`end_offsets`](Self::end_offsets) give them. A backend whose server answers both
    /// in one request (Kafka's watermarks) SHOULD override it: the owners of a shared log ask
    /// for both after every checkpoint. The default asks the two methods one after the other,
    /// which is right for a wrapper that adds behavior to each (fault injection); a wrapper
    /// that only forwards SHOULD forward this too, or the backend's override is lost.
    fn offsets(&self) -> impl Future<Output = Result<(Vec<u64>, Vec<u64>), Error>> + Send {
        // One after the other (this crate runs no tasks): the earliest first, so that no end
        // read before it lies below it.
        async move { Ok((self.earliest_offsets().await?, self.end_offsets().await?)) }
    }

    /// Reads at most `max` records of `partition` with offsets in `[from, to)`, keeping the
    /// [read rules](StateLog#reads) of the contract.
    fn read(
        &self,
        partition: u32,
        from: u64,
        to: u64,
        max: usize,
    ) -> impl Future<Output = Result<ReadBatch, Error>> + Send;

    /// What this backend can do beyond the required operations.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }

    /// Drops, per partition `p`, the records below `before[p]`, keeping the
    /// [reclaim rules](StateLog#reclaim) of the contract, and returns the earliest offsets
    /// afterwards. `before` has one offset per partition.
    fn reclaim(&self, before: &[u64]) -> impl Future<Output = Result<Vec<u64>, Error>> + Send {
        let _ = before;
        std::future::ready(Err(Error::Unsupported { backend: self.identity().backend.clone(), operation: "reclaim" }))
    }
}

/// What a [`StateLog`] can do beyond the required operations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Capabilities {
    /// [`StateLog::reclaim`] removes records (see the [reclaim rules](StateLog#reclaim)).
    pub reclaim: bool,
}

impl Capabilities {
    /// No optional operation.
    pub const NONE: Capabilities = Capabilities { reclaim: false };
    /// Reclaims records on request.
    pub const RECLAIM: Capabilities = Capabilities { reclaim: true };
}

/// A shared log is a log: several stores (owners) of one process can use one handle.
impl<L: StateLog> StateLog for std::sync::Arc<L> {
    fn identity(&self) -> &LogIdentity {
        (**self).identity()
    }

    fn current_identity(&self) -> impl Future<Output = Result<LogIdentity, Error>> + Send {
        (**self).current_identity()
    }

    fn append(&self, record: WireRecord) -> impl Future<Output = Result<Position, Error>> + Send {
        (**self).append(record)
    }

    fn earliest_offsets(&self) -> impl Future<Output = Result<Vec<u64>, Error>> + Send {
        (**self).earliest_offsets()
    }

    fn end_offsets(&self) -> impl Future<Output = Result<Vec<u64>, Error>> + Send {
        (**self).end_offsets()
    }

    fn offsets(&self) -> impl Future<Output = Result<(Vec<u64>, Vec<u64>), Error>> + Send {
        (**self).offsets()
    }

    fn read(
        &self,
        partition: u32,
        from: u64,
        to: u64,
        max: usize,
    ) -> impl Future<Output = Result<ReadBatch, Error>> + Send {
        (**self).read(partition, from, to, max)
    }

    fn capabilities(&self) -> Capabilities {
        (**self).capabilities()
    }

    fn reclaim(&self, before: &[u64]) -> impl Future<Output = Result<Vec<u64>, Error>> + Send {
        (**self).reclaim(before)
    }
}
