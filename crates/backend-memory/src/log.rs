//! The [`StateLog`] contract on an in-memory log.

use crate::open::{MemoryLog, Storage, lock};
use actionstate_core::{Capabilities, Error, LogIdentity, Position, ReadBatch, StateLog, WireRecord};
use std::sync::atomic::Ordering;

impl StateLog for MemoryLog {
    fn identity(&self) -> &LogIdentity {
        &self.identity
    }

    async fn current_identity(&self) -> Result<LogIdentity, Error> {
        Ok(Self::identity_of(&self.shared))
    }

    async fn append(&self, record: WireRecord) -> Result<Position, Error> {
        self.shared.appends.fetch_add(1, Ordering::Relaxed);
        let mut st = lock(&self.shared.storage);
        if st.id != self.identity.id {
            return Err(Error::LogChanged { expected: self.identity.to_string(), found: st.id.clone() });
        }
        let partition = record.key_id.partition(self.identity.partitions);
        let p = &mut st.partitions[partition as usize];
        p.push((record.key, record.value));
        let offset = p.len() as u64 - 1;
        Ok(Position { partition, offset, exact: true })
    }

    async fn earliest_offsets(&self) -> Result<Vec<u64>, Error> {
        Ok(lock(&self.shared.storage).earliest.clone())
    }

    async fn end_offsets(&self) -> Result<Vec<u64>, Error> {
        Ok(lock(&self.shared.storage).partitions.iter().map(|p| p.len() as u64).collect())
    }

    async fn read(&self, partition: u32, from: u64, to: u64, max: usize) -> Result<ReadBatch, Error> {
        self.read_range(partition, from, to, max)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::RECLAIM
    }

    async fn reclaim(&self, before: &[u64]) -> Result<Vec<u64>, Error> {
        let mut st = lock(&self.shared.storage);
        let partitions = u32::try_from(st.partitions.len()).unwrap_or(u32::MAX);
        if before.len() != st.partitions.len() {
            return Err(Error::UnknownPartition {
                log: self.identity.to_string(),
                partition: u32::try_from(before.len().min(st.partitions.len())).unwrap_or(u32::MAX),
                partitions,
            });
        }
        for (p, &offset) in (0u32..).zip(before) {
            let end = st.partitions[p as usize].len() as u64;
            if offset > end {
                return Err(Error::OffsetBeyondEnd { partition: p, offset, end });
            }
        }
        let Storage { partitions: records, earliest, .. } = &mut *st;
        for ((records, earliest), &offset) in records.iter_mut().zip(earliest.iter_mut()).zip(before) {
            // Offsets stay dense: the reclaimed records keep their slots, emptied.
            for slot in records.iter_mut().take(usize::try_from(offset).unwrap_or(usize::MAX)).skip(*earliest as usize)
            {
                *slot = (Vec::new(), Vec::new());
            }
            *earliest = (*earliest).max(offset);
        }
        Ok(st.earliest.clone())
    }
}
