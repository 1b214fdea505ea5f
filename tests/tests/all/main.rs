//! The integration-test binary: the backend conformance suite and the recovery scenarios on
//! every backend, the crash campaign, and the simulator killed with SIGKILL in a child process.
//!
//! ```text
//! cargo test -p actionstate-tests --test all                 # everything
//! cargo test -p actionstate-tests --test all scenarios::     # the scenarios
//! cargo test -p actionstate-tests --test all repair::        # an operator's repair
//! cargo test -p actionstate-tests --test all campaign -- --nocapture
//! cargo test -p actionstate-tests --test all sigkill -- --nocapture
//! ```
#![allow(clippy::unwrap_used, reason = "tests")]

mod campaign;
mod conformance;
mod repair;
mod scenarios;
#[cfg(unix)]
mod sigkill;
