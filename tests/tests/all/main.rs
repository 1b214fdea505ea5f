//! The integration-test binary: the backend conformance suite and the recovery scenarios on
//! every backend, and the crash campaign.
//!
//! ```text
//! cargo test -p actionstate-tests --test all                 # everything
//! cargo test -p actionstate-tests --test all scenarios::     # the scenarios
//! cargo test -p actionstate-tests --test all campaign -- --nocapture
//! ```
#![allow(clippy::unwrap_used, reason = "tests")]

mod campaign;
mod conformance;
mod scenarios;
