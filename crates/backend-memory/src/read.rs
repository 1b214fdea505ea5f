//! Reading an in-memory log: a range of one partition, as the contract's `read` asks.

use crate::error::MemoryError;
use crate::open::{MemoryLog, lock};
use actionstate_core::{Error, ReadBatch, ReadRecord};

impl MemoryLog {
    /// The records of `partition` in `[from, to)`, at most `max` of them.
    pub(crate) fn read_range(&self, partition: u32, from: u64, to: u64, max: usize) -> Result<ReadBatch, Error> {
        let st = lock(&self.shared.storage);
        let partitions = u32::try_from(st.partitions.len()).unwrap_or(u32::MAX);
        let p = st.partitions.get(partition as usize).ok_or_else(|| Error::UnknownPartition {
            log: self.identity.to_string(),
            partition,
            partitions,
        })?;
        let earliest = st.earliest[partition as usize];
        if from < earliest {
            // Never skip silently: the records asked for are gone.
            return Err(Error::DataLoss { partition, offset: from, earliest });
        }
        if from < to && max > 0 && from >= p.len() as u64 {
            // Nothing to fetch: an empty batch that does not advance would break the contract.
            let end = p.len() as u64;
            return Err(MemoryError::PastTheEnd { partition, offset: from, end }.during("read"));
        }
        let start = from;
        let stop = to.min(p.len() as u64).min(start.saturating_add(max as u64));
        let records = (start..stop)
            .map(|offset| {
                let (key, value) = &p[offset as usize];
                ReadRecord { offset, key: key.clone(), value: value.clone() }
            })
            .collect();
        Ok(ReadBatch { records, next: stop.max(start) })
    }
}
