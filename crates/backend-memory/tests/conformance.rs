//! The backend conformance suite on the in-memory log, wrapped in the test kit's `Faulty` for
//! the unreachable log (the memory log injects no failures of its own).

use actionstate_core::Error;
use actionstate_memory::MemoryLog;
use actionstate_testkit::Faulty;
use actionstate_testkit::conformance::{Harness, assert_conforms};

/// Opens, reopens and recreates in-memory logs; an unreachable one is down.
struct MemoryHarness;

impl Harness for MemoryHarness {
    type Log = Faulty<MemoryLog>;
    async fn fresh(&self, partitions: u32) -> Result<Self::Log, Error> {
        Ok(Faulty::wrap(MemoryLog::new(partitions)))
    }
    async fn reopen(&self, log: Self::Log) -> Result<Self::Log, Error> {
        Ok(log.with_inner(log.inner().reopen()))
    }
    async fn recreate(&self, log: Self::Log, partitions: u32) -> Result<Self::Log, Error> {
        log.inner().recreate(partitions);
        Ok(log)
    }
    async fn unreachable(&self) -> Result<Self::Log, Error> {
        let log = Faulty::wrap(MemoryLog::new(1));
        log.faults().set_down(true);
        Ok(log)
    }
}

#[tokio::test]
async fn memory_log_conforms() {
    assert_conforms(&MemoryHarness).await;
}
