//! # actionstate-sim
//!
//! A small, deterministic agent runtime that drives [`actionstate_recovery::ActionStateStore`]
//! the way a real one does — keyed inputs with per-key sequence numbers, fan-out and cascades,
//! identical-attribute outputs, a bootstrap event, memory writes and durable calls — and a
//! **side-effect ledger** that records every real execution. Checkpoints are taken every few
//! inputs (some aborted), crashes are injected between store operations, after a side effect
//! before its persist, or between an append and its acknowledgement, and each crash is
//! followed by a restore from a checkpoint and a replay of the inputs. Everything is seeded.
//!
//! [`Sim::run`] runs all attempts in one process; [`Sim::run_attempt`] runs one attempt of a
//! run whose checkpoints and ledger live in a [`RunDir`], for a process that is killed for
//! real and started again.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![deny(clippy::unwrap_used)]
#![warn(missing_docs)]

pub mod agent;
mod approvals;
mod attempt;
pub mod chaos;
mod chaos_report;
mod chaos_zombie;
mod check;
mod checkpoint;
mod crash;
pub mod external;
pub mod faults;
mod ledger;
mod outcome;
mod plan;
mod restore;
mod results;
mod round;
mod run_dir;
mod runtime;
pub mod soak;
pub mod soak_owners;
mod source;
mod waiting;
mod zombie;

pub use approvals::{Decision, OutsideApprover, WaitFigures, decision};
pub use crash::{CrashLog, CrashPoint, Crashes, InjectedCrash};
pub use ledger::{CallKey, Ledger, LedgerEntry, ReplayedJournal};
pub use outcome::{Outcome, SimError};
pub use plan::{InputChange, RestoreFrom, RunPlan, SimConfig, inputs, key_id, key_name};
pub use results::{Memory, RoundResults};
pub use run_dir::RunDir;
pub use runtime::Sim;
pub use source::{LogSource, MemorySource};
