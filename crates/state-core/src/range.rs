//! Reading one partition range batch by batch, with every batch checked against the read rules
//! of the [`StateLog`] contract.

use crate::error::Error;
use crate::log::{ReadBatch, ReadRecord, StateLog};

/// Reads one partition's range `[from, to)` batch by batch and checks every batch against the
/// [read rules](StateLog#reads) of the contract.
///
/// A batch that does not advance is [`Error::NoProgress`]; a record outside the range or out of
/// order, more records than asked for, or a `next` offset at or below a returned record is
/// [`Error::BadRead`]. Both name the partition and the offsets, so a backend that breaks the
/// contract fails the read instead of looping on an offset or silently stepping over it.
///
/// ```
/// # async fn example<L: actionstate_core::StateLog>(log: &L) -> Result<(), actionstate_core::Error> {
/// use actionstate_core::RangeRead;
///
/// let end = log.end_offsets().await?;
/// let mut range = RangeRead::new(0, 0, end[0], 1024);
/// while let Some(records) = range.next_batch(log).await? {
///     for r in records {
///         println!("{} holds {} bytes", r.offset, r.value.len());
///     }
/// }
/// assert!(range.is_done());
/// # Ok(()) }
/// ```
///
/// [`next_batch`](RangeRead::next_batch) is cancel safe: dropping its future (a timeout) leaves
/// the range where it was, and the next call reads the same batch again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RangeRead {
    partition: u32,
    next: u64,
    to: u64,
    max: usize,
}

impl RangeRead {
    /// A read of `partition` from `from` up to (excluding) `to`, at most `max` records a batch
    /// (at least one: a `max` of 0 reads one record a batch).
    pub fn new(partition: u32, from: u64, to: u64, max: usize) -> Self {
        RangeRead { partition, next: from, to, max: max.max(1) }
    }

    /// The partition read.
    pub fn partition(&self) -> u32 {
        self.partition
    }

    /// Where the next read starts: every record below it has been returned.
    pub fn next_offset(&self) -> u64 {
        self.next
    }

    /// The exclusive end of the range.
    pub fn end(&self) -> u64 {
        self.to
    }

    /// The most records a batch may hold.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Whether the whole range has been read.
    pub fn is_done(&self) -> bool {
        self.next >= self.to
    }

    /// Reads the next batch: `Ok(None)` once the range is exhausted, otherwise the records of
    /// the batch (possibly none, when the backend stepped over offsets without records).
    ///
    /// A batch that breaks the contract is an error ([`Error::NoProgress`], [`Error::BadRead`])
    /// and leaves the range where it was; so does an error of the backend.
    pub async fn next_batch<L: StateLog>(&mut self, log: &L) -> Result<Option<Vec<ReadRecord>>, Error> {
        if self.is_done() {
            return Ok(None);
        }
        let batch = log.read(self.partition, self.next, self.to, self.max).await?;
        self.check(&batch)?;
        self.next = batch.next;
        Ok(Some(batch.records))
    }

    /// Checks `batch`, read at [`next_offset`](Self::next_offset), against the read rules —
    /// what [`next_batch`](Self::next_batch) does with the batches it reads.
    pub fn check(&self, batch: &ReadBatch) -> Result<(), Error> {
        let (partition, from, to) = (self.partition, self.next, self.to);
        let bad = |detail: String| Err(Error::BadRead { partition, offset: from, detail });
        if batch.records.len() > self.max {
            return bad(format!("{} records returned, at most {} asked for", batch.records.len(), self.max));
        }
        let mut last: Option<u64> = None;
        for r in &batch.records {
            if r.offset < from || r.offset >= to {
                return bad(format!("record at offset {} outside the range [{from}, {to})", r.offset));
            }
            if let Some(prev) = last
                && r.offset <= prev
            {
                return bad(format!("record at offset {} follows offset {prev}: offsets must increase", r.offset));
            }
            last = Some(r.offset);
        }
        match last {
            None if batch.next <= from => Err(Error::NoProgress { partition, offset: from, end: to }),
            Some(last) if batch.next <= last => {
                bad(format!("next offset {} does not pass the last record's offset {last}", batch.next))
            }
            _ => Ok(()),
        }
    }
}
