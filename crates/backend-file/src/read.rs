//! Reading a range of one partition.

use crate::db::{Inner, RECORDS};
use crate::error::{FileError, OrEngine, into_core};
use actionstate_core::{Error, ReadBatch, ReadRecord};

impl Inner {
    pub(crate) fn read(&self, partition: u32, from: u64, to: u64, max: usize) -> Result<ReadBatch, Error> {
        if from >= to || max == 0 {
            return Ok(ReadBatch { records: Vec::new(), next: from });
        }
        self.guarded(|| self.read_range(partition, from, to, max)).map_err(|e| into_core(e, "read"))
    }

    fn read_range(&self, partition: u32, from: u64, to: u64, max: usize) -> Result<ReadBatch, FileError> {
        let txn = self.db.begin_read().or_engine(&self.path, "read")?;
        let table = txn.open_table(RECORDS).or_engine(&self.path, "read")?;
        let mut records = Vec::new();
        for row in table.range((partition, from)..(partition, to)).or_engine(&self.path, "read")?.take(max) {
            let (k, v) = row.or_engine(&self.path, "read")?;
            let (key, value) = v.value();
            records.push(ReadRecord { offset: k.value().1, key: key.to_vec(), value: value.to_vec() });
        }
        let next = match records.last() {
            Some(last) if records.len() == max => last.offset + 1,
            _ => to,
        };
        Ok(ReadBatch { records, next })
    }
}
