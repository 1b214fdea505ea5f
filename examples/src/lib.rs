//! # actionstate-examples
//!
//! Programs written as a user of the crates writes them, run by this crate's tests:
//!
//! - `using-it` (`src/bin/using_it.rs`), the README's "Using it": a service that restores
//!   itself from its log, answers its inputs, checkpoints with its input position, and on a
//!   restart reuses the answers it gave after that checkpoint. The README quotes it verbatim.
//! - `approval` (`src/bin/approval.rs`), "Waiting for a person" (docs/waits.md): a payment that
//!   waits durably for a person's approval; its test kills it while it waits, approves through
//!   `actionstate resolve`, and restarts it, which pays once.
//! - `kafka-service` (`src/bin/kafka_service.rs`, feature `kafka`): a service that consumes
//!   its inputs from a Kafka topic and keeps its action state on a Kafka log of the same
//!   broker, with the input positions in its checkpoints' metadata, so that it resumes input
//!   and state from one record. Each input makes one side effect, a line in a ledger file,
//!   through a reconciled durable call. Its test kills it with SIGKILL again and again and
//!   checks the ledger: every effect exactly once, no acknowledged state lost.
//! - `external-service` (`src/bin/external_service.rs`): the simulator's HTTP service on its
//!   own, which the Python agent (`python/agent.py`) calls with idempotency keys.
//! - `python/using_it.py` and `python/agent.py`: the same service and an agent written in
//!   Python, run by the Python package's tests (`crates/python/tests`).
//!
//! The library holds what the Kafka service and its test share: an [`Input`] as a record of the
//! input topic, the [`Positions`] a checkpoint carries, and the [`Ledger`].
#![forbid(unsafe_code)]

mod error;
mod input;
mod ledger;
mod positions;

pub use error::Error;
pub use input::Input;
pub use ledger::{Entry, Kind, Ledger};
pub use positions::Positions;
