//! What a test does to an in-memory log behind its handles' backs: injected failures, an
//! unreachable backend, retention and corruption.

use crate::error::MemoryError;
use crate::open::{MemoryLog, lock};
use actionstate_core::Error;

impl MemoryLog {
    /// The `n`-th append from now (1 = the next) fails before writing anything.
    pub fn fail_nth_append(&self, n: u64) {
        let mut f = lock(&self.shared.faults);
        f.fail_append = Some(f.appends + n);
    }

    /// The `n`-th append from now writes its record but reports an error, as when the
    /// acknowledgement is lost on the way back.
    pub fn lose_ack_of_nth_append(&self, n: u64) {
        let mut f = lock(&self.shared.faults);
        f.lose_ack = Some(f.appends + n);
    }

    /// Makes every read fail (or succeed again).
    pub fn fail_reads(&self, fail: bool) {
        lock(&self.shared.faults).fail_reads = fail;
    }

    /// Makes every reclaim fail (or succeed again).
    pub fn fail_reclaims(&self, fail: bool) {
        lock(&self.shared.faults).fail_reclaims = fail;
    }

    /// Makes the backend unreachable: every operation fails with a retryable error.
    pub fn set_down(&self, down: bool) {
        lock(&self.shared.faults).down = down;
    }

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

    /// Number of appends attempted so far.
    pub fn appends(&self) -> u64 {
        lock(&self.shared.faults).appends
    }

    /// Fails `operation` if the backend is [down](MemoryLog::set_down).
    pub(crate) fn check_down(&self, operation: &'static str) -> Result<(), Error> {
        if lock(&self.shared.faults).down {
            return Err(MemoryError::Injected("backend unreachable").during(operation));
        }
        Ok(())
    }

    /// Counts an append; whether it is to fail before writing, and whether its
    /// acknowledgement is to be lost after.
    pub(crate) fn count_append(&self) -> (bool, bool) {
        let mut f = lock(&self.shared.faults);
        f.appends += 1;
        (f.fail_append == Some(f.appends), f.lose_ack == Some(f.appends))
    }

    /// Fails a read if reads are made to fail.
    pub(crate) fn check_read(&self) -> Result<(), Error> {
        if lock(&self.shared.faults).fail_reads {
            return Err(MemoryError::Injected("read failed").during("read"));
        }
        Ok(())
    }

    /// Fails a reclaim if reclaims are made to fail.
    pub(crate) fn check_reclaim(&self) -> Result<(), Error> {
        if lock(&self.shared.faults).fail_reclaims {
            return Err(MemoryError::Injected("reclaim failed").during("reclaim"));
        }
        Ok(())
    }
}
