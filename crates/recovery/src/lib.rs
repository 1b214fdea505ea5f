//! # actionstate-recovery
//!
//! The store agent runtimes hold: [`ActionStateStore`] over any [`StateLog`](actionstate_core::StateLog) backend.
//! A service that restores itself after a restart, asks a model once per input through a durable
//! call, and writes a checkpoint with its input position into the log every second input (the
//! README's "Using it"; `examples/src/bin/using_it.rs`, which CI runs twice):
//!
//! ```rust,no_run
//! use actionstate_core::{ActionId, Attributes, Event, Trigger, Value};
//! use actionstate_recovery::{
//!     ActionStateStore, Begin, CallSource, DurableCall, LogConfig, Ownership, RestoreFrom, Round, StoreConfig, open,
//! };
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let log = open(&"file:./actionstate-data".parse::<LogConfig>()?).await?;
//!     // The latest checkpoint in the log (none on the first run) and the input position it saved.
//!     let (store, restored) =
//!         ActionStateStore::restore(log, StoreConfig::default(), &Ownership::All, RestoreFrom::Latest).await?;
//!     let mut next: u64 = restored.metadata_as()?.unwrap_or(0);
//!
//!     let questions = ["What is my balance?", "Close my account", "Thank you"];
//!     let (mut asked, mut reused) = (0, 0);
//!     while let Some(&question) = questions.get(next as usize) {
//!         let mut attributes = Attributes::new();
//!         attributes.insert("text".into(), Value::from(question));
//!         let input = Event::new("question", attributes);
//!         let round = store.round(Round::named("customer-42", next, &input));
//!         match store.begin(&round, &ActionId::new("answer"), &input, &Trigger::Input).await? {
//!             // Answered before the restart: replay its outputs, do not ask again.
//!             Begin::Reuse(_state) => reused += 1,
//!             Begin::Resume(mut handle) | Begin::Fresh(mut handle, _) => {
//!                 // The model call goes here; its result is journaled before it is returned.
//!                 let call = DurableCall::new("llm.complete").args(question)?;
//!                 let reply = store
//!                     .call(&mut handle, call, |_idempotency_key| async move {
//!                         Ok(format!("an answer to {question}").into_bytes())
//!                     })
//!                     .await?;
//!                 asked += usize::from(reply.source == CallSource::Executed);
//!                 let mut answer = Attributes::new();
//!                 answer.insert("reply".into(), Value::Bytes(reply.output.unwrap_or_default()));
//!                 store.complete(handle, vec![Event::new("answer", answer)], vec![]).await?;
//!             }
//!         }
//!         // Every action of the round is done: a checkpoint from now on need not replay it.
//!         round.finish();
//!         next += 1;
//!         // Every second input, a checkpoint with the position to resume from.
//!         if next.is_multiple_of(2) {
//!             store.checkpoint_with(&next).await?;
//!         }
//!     }
//!     println!("model calls: {asked}, answers reused: {reused}");
//!     Ok(())
//! }
//! ```
//!
//! - [`restore`](ActionStateStore::restore) is the one way in after a restart. What it restores
//!   from chooses the store's checkpoint form, in types: [`RestoreFrom`] for checkpoints the
//!   store writes into its log ([`InLog`], with [`checkpoint`](ActionStateStore::checkpoint)),
//!   the runtime's [`Snapshot`]s for runtimes that keep their own checkpoints ([`TwoPhase`], with
//!   [`snapshot`](ActionStateStore::snapshot) and
//!   [`checkpoint_complete`](ActionStateStore::checkpoint_complete)). A store of one form has no
//!   method of the other.
//! - [`begin`](ActionStateStore::begin) decides, for each action of a replayed round, whether to
//!   **reuse** its completed result, **resume** it from its durable-call journal, or run it
//!   **fresh** — invalidating recorded history that no longer matches (docs/design.md,
//!   section 4). A round is started with [`round`](ActionStateStore::round) and
//!   [finished](OpenRound::finish) once its actions are done; dropped unfinished, it is replayed.
//! - [`call`](ActionStateStore::call) journals a [`DurableCall`]: its argument digest comes from
//!   the arguments, its closure gets the call's idempotency key, and a reconciler is an option.
//!   [`complete`](ActionStateStore::complete) makes the action's outputs and memory updates
//!   durable.
//! - A store works only on the keys it owns: anything else is [`StoreError::NotOwned`]. A restore
//!   fences the owner it replaced (a zombie, presumed dead but still running): nothing it appends
//!   afterwards is replayed, and its next checkpoint (or
//!   [`check_fenced`](ActionStateStore::check_fenced)) fails with [`StoreError::Fenced`]
//!   (docs/design.md, section 7.1).
//! - [`invalidate`](ActionStateStore::invalidate) is an operator's repair: it removes a key's
//!   rounds from one on, logged as a divergence is, so that those rounds run again.
//!
//! A store records its hits, misses, invalidations, durable calls, put latency, rebuilds and
//! reclaims through the `metrics` facade: [`metrics`] lists their names, types, labels and
//! units.
//!
//! ## The put contract
//!
//! Every write is acknowledged as durable by the backend **before** the index changes; a
//! failed or dropped write leaves the index unchanged, and its error says whether retrying can
//! help ([`StoreError::is_retryable`]). The whole contract: docs/design.md, section 5.1.
//!
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![deny(clippy::unwrap_used)]
#![warn(missing_docs)]

mod calls;
mod checkpoint;
mod config;
mod error;
mod fencing;
pub mod metrics;
mod retention;
mod spans;
mod store;
mod waits;

pub use calls::{Call, CallOutput, CallSource, DurableCall, NoReconcile};
pub use checkpoint::form::{CheckpointForm, InLog, TwoPhase};
pub use checkpoint::in_log::LogCheckpoint;
pub use checkpoint::rebuild::RebuildReport;
pub use checkpoint::restore::{RestoreFrom, RestorePoint, Restored, RestoredCheckpoint};
pub use config::{AnyLog, DEFAULT_PARTITIONS, LogConfig, open};
pub use error::{Result, StoreError};
pub use retention::{DEFAULT_RETAINED_CHECKPOINTS, ReclaimStatus, Retention};
pub use spans::call_key_digest;
pub use store::ActionStateStore;
pub use store::config::{DEFAULT_CARRY_FORWARD_AFTER, StoreConfig};
pub use store::handle::ActionHandle;
pub use store::round::OpenRound;
pub use store::vocab::{Begin, Explanation, OperatorInvalidation, Ownership, Round, Snapshot};
pub use waits::clock::Clock;
pub use waits::{Resolution, Wait, WaitInfo, WaitStatus, Waited};
