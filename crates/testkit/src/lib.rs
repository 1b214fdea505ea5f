//! # actionstate-testkit
//!
//! Test support for actionstate backends, depending on `actionstate-core` and std only:
//!
//! - [`MemoryLog`]: an in-memory [`StateLog`](actionstate_core::StateLog) with fault injection
//!   ([`InjectedFault`]), whose records survive a simulated crash ([`MemoryLog::reopen`]);
//! - [`conformance`]: the suite every backend's tests run against a real server through a
//!   [`conformance::Harness`] (`run_all`, `assert_conforms`), itself checked against broken
//!   backends that it must reject;
//! - [`services`]: finding the servers `cargo xtask services up` started (their env files), the
//!   `ACTIONSTATE-SKIP` marker a test prints when none is configured, which `cargo xtask ci`
//!   turns into a failure, and the server processes fault tests stop and restart;
//! - [`scenarios`]: the checks every server backend's tests run beside the suite (an
//!   unreachable server, a changed partition count, SASL, a recreated log, a read past the end),
//!   and [`scenarios::LogCapture`] for what a client logs;
//! - [`MemoryHarness`]: the conformance harness of [`MemoryLog`].
//!
//! The suite runs its futures with no runtime of its own ([`join_all`], [`within`]); backends
//! that need one (tokio for the file backend's blocking pool, Kafka, Fluss) run it inside their
//! `#[tokio::test]`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod conformance;
mod memory;
#[cfg(test)]
mod rejects;
mod run;
pub mod scenarios;
pub mod services;

pub use run::{join_all, within};

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
