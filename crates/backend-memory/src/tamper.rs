//! What a test does to an in-memory log's records behind its handles' backs: retention and
//! corruption; and how many appends the log has seen. (Failures are injected by wrapping the
//! log in the test kit's `Faulty`, as any other backend.)

use crate::open::{MemoryLog, lock};
use std::sync::atomic::Ordering;

impl MemoryLog {
    /// Deletes the records of `partition` below `offset` (retention), advancing its earliest
    /// offset.
    pub fn truncate_before(&self, partition: u32, offset: u64) {
        let mut st = lock(&self.shared.storage);
        if let Some(e) = st.earliest.get_mut(partition as usize) {
            *e = (*e).max(offset);
        }
    }

    /// Replaces the value bytes of one stored record (to simulate corruption).
    pub fn corrupt(&self, partition: u32, offset: u64, value: Vec<u8>) {
        let mut st = lock(&self.shared.storage);
        if let Some(r) = st.partitions.get_mut(partition as usize).and_then(|p| p.get_mut(offset as usize)) {
            r.1 = value;
        }
    }

    /// Number of appends attempted so far, by every handle of the log.
    pub fn appends(&self) -> u64 {
        self.shared.appends.load(Ordering::Relaxed)
    }
}
