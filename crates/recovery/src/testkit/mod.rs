//! Test support: an in-memory log with fault injection, and the backend conformance suite.

pub mod conformance;
pub mod faults;
mod memory;
#[cfg(test)]
mod rejects;
pub mod services;

pub use memory::{InjectedFault, MemoryLog};

/// Conformance harness for [`MemoryLog`].
#[derive(Debug, Default)]
pub struct MemoryHarness;

impl conformance::Harness for MemoryHarness {
    type Log = MemoryLog;

    async fn fresh(&self, partitions: u32) -> Result<MemoryLog, actionstate_core::Error> {
        Ok(MemoryLog::new(partitions))
    }

    async fn reopen(&self, log: MemoryLog) -> Result<MemoryLog, actionstate_core::Error> {
        Ok(log.reopen())
    }

    async fn recreate(&self, log: MemoryLog, partitions: u32) -> Result<MemoryLog, actionstate_core::Error> {
        log.recreate(partitions);
        Ok(log)
    }

    async fn unreachable(&self) -> Result<MemoryLog, actionstate_core::Error> {
        let log = MemoryLog::new(1);
        log.set_down(true);
        Ok(log)
    }
}
