//! The backend conformance suite on the in-memory log.

use actionstate_core::Error;
use actionstate_memory::MemoryLog;
use actionstate_testkit::conformance::{Harness, assert_conforms};

/// Opens, reopens and recreates in-memory logs; an unreachable one is down.
struct MemoryHarness;

impl Harness for MemoryHarness {
    type Log = MemoryLog;
    async fn fresh(&self, partitions: u32) -> Result<MemoryLog, Error> {
        Ok(MemoryLog::new(partitions))
    }
    async fn reopen(&self, log: MemoryLog) -> Result<MemoryLog, Error> {
        Ok(log.reopen())
    }
    async fn recreate(&self, log: MemoryLog, partitions: u32) -> Result<MemoryLog, Error> {
        log.recreate(partitions);
        Ok(log)
    }
    async fn unreachable(&self) -> Result<MemoryLog, Error> {
        let log = MemoryLog::new(1);
        log.set_down(true);
        Ok(log)
    }
}

#[tokio::test]
async fn memory_log_conforms() {
    assert_conforms(&MemoryHarness).await;
}
