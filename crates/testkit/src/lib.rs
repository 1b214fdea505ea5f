//! # actionstate-testkit
//!
//! Test support for actionstate backends, depending on `actionstate-core` and std only:
//!
//! - [`conformance`]: the suite every backend's tests run against a real server through a
//!   [`conformance::Harness`] (`run_all`, `assert_conforms`), itself checked against broken
//!   backends that it must reject;
//! - [`services`]: finding the servers `cargo xtask services up` started (their env files), the
//!   `ACTIONSTATE-SKIP` marker a test prints when none is configured, which `cargo xtask ci`
//!   turns into a failure, and the server processes fault tests stop and restart;
//! - [`Faulty`]: the one fault-injecting wrapper over any [`StateLog`](actionstate_core::StateLog),
//!   driven by the [`Faults`] a test turns on (failed or unacknowledged appends, a budget of
//!   appends, failed reads and reclaims, an unreachable backend, held appends, slow reads) or
//!   by an [`Inject`]or of its own (the simulator's crash points);
//! - [`Backend`]: the backends scenarios run on, and the server each needs (as data);
//! - [`scenarios`]: the checks every server backend's tests run beside the suite (an
//!   unreachable server, a changed partition count, SASL, a recreated log, a read past the end),
//!   and [`scenarios::LogCapture`] for what a client logs.
//!
//! The in-memory log the suite's own tests run on is a backend of its own,
//! `actionstate-memory`.
//!
//! The suite runs its futures with no runtime of its own ([`join_all`], [`within`]); backends
//! that need one (tokio for the file backend's blocking pool, Kafka, Fluss) run it inside their
//! `#[tokio::test]`.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod backend;
pub mod conformance;
mod faulty;
#[cfg(test)]
mod rejects;
mod run;
pub mod scenarios;
pub mod services;

pub use backend::{Backend, Server};
pub use faulty::{FAULTY, Faults, Faulty, Hold, Inject, InjectedFault, Operation, SlowReads};
pub use run::{join_all, within};
