//! The backend conformance suite: public async checks every
//! [`StateLog`](actionstate_core::StateLog) implementation runs.
//!
//! A backend provides a [`Harness`] that opens fresh logs, reopens them and recreates them.
//! [`run_all`] runs every check, each on fresh logs, and returns a [`ConformanceReport`] naming
//! each failed check with the rule it found broken; [`assert_conforms`] runs them and panics
//! with that report unless all passed, for a backend's test:
//!
//! ```
//! use actionstate_core::Error;
//! use actionstate_memory::MemoryLog;
//! use actionstate_testkit::{Faulty, conformance};
//!
//! struct MemoryHarness;
//!
//! impl conformance::Harness for MemoryHarness {
//!     type Log = Faulty<MemoryLog>;
//!     async fn fresh(&self, partitions: u32) -> Result<Self::Log, Error> {
//!         Ok(Faulty::wrap(MemoryLog::new(partitions)))
//!     }
//!     async fn reopen(&self, log: Self::Log) -> Result<Self::Log, Error> {
//!         Ok(log.with_inner(log.inner().reopen()))
//!     }
//!     async fn recreate(&self, log: Self::Log, partitions: u32) -> Result<Self::Log, Error> {
//!         log.inner().recreate(partitions);
//!         Ok(log)
//!     }
//!     async fn unreachable(&self) -> Result<Self::Log, Error> {
//!         // A log whose every operation fails, as a backend that cannot be reached.
//!         let log = Faulty::wrap(MemoryLog::new(1));
//!         log.faults().set_down(true);
//!         Ok(log)
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // In a backend's tests: `#[tokio::test] async fn conforms() { ... }` with its own harness.
//! let report = conformance::run_all(&MemoryHarness).await;
//! assert!(report.passed(), "{report}");
//! assert_eq!(report.checks.len(), conformance::CHECKS.len());
//!
//! // The same, panicking with every failed check named:
//! conformance::assert_conforms(&MemoryHarness).await;
//! # }
//! ```
//!
//! Each check is also public and returns `Err` with the violated rule, so a backend can run one
//! on its own.

/// Fails the check with a message unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

mod checks;
mod report;
mod support;

pub use checks::{
    acknowledged_appends_survive_reopen, concurrent_appends_from_many_tasks, end_and_earliest_offsets,
    partition_set_change_is_detected, per_partition_order, reads_make_progress_and_skip_nothing,
    reads_stop_at_the_captured_end, reclaim_keeps_what_it_must, recreation_with_the_same_partition_count_is_detected,
    unreachable_backend_fails_clearly,
};
pub use report::{CHECKS, CheckFailure, CheckResult, ConformanceReport, Harness};
pub use support::{Records, read_all};

/// Runs every check of the suite, in order, each on fresh logs, and reports which failed.
pub async fn run_all<H: Harness>(h: &H) -> ConformanceReport {
    let mut report = ConformanceReport::default();
    let [c0, c1, c2, c3, c4, c5, c6, c7, c8, c9] = CHECKS;
    report.run(c0, acknowledged_appends_survive_reopen(h)).await;
    report.run(c1, per_partition_order(h)).await;
    report.run(c2, end_and_earliest_offsets(h)).await;
    report.run(c3, reads_stop_at_the_captured_end(h)).await;
    report.run(c4, reads_make_progress_and_skip_nothing(h)).await;
    report.run(c5, partition_set_change_is_detected(h)).await;
    report.run(c6, recreation_with_the_same_partition_count_is_detected(h)).await;
    report.run(c7, concurrent_appends_from_many_tasks(h)).await;
    report.run(c8, reclaim_keeps_what_it_must(h)).await;
    report.run(c9, unreachable_backend_fails_clearly(h)).await;
    report
}

/// Runs every check and panics, naming each failed check, unless all passed.
pub async fn assert_conforms<H: Harness>(h: &H) {
    let report = run_all(h).await;
    eprintln!("{report}");
    report.assert_passed();
}
