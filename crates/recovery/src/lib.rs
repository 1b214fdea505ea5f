//! # actionstate-recovery
//!
//! The store agent runtimes hold: [`ActionStateStore`] over any [`StateLog`](actionstate_core::StateLog) backend.
//!
//! - [`begin`](ActionStateStore::begin) decides, for each action of a replayed round, whether to
//!   **reuse** its completed result, **resume** it from its durable-call journal, or run it
//!   **fresh** — invalidating recorded history that no longer matches (docs/design.md,
//!   section 4).
//! - [`complete`](ActionStateStore::complete) makes the action's outputs and memory updates
//!   durable; [`call`](ActionStateStore::call) and
//!   [`call_reconciled`](ActionStateStore::call_reconciled) journal durable calls.
//! - [`invalidate`](ActionStateStore::invalidate) is an operator's repair: it removes a key's
//!   rounds from one on, logged as a divergence is (an audit record, then tombstones), so that
//!   those rounds run again and every later rebuild replays the repair.
//! - [`snapshot`](ActionStateStore::snapshot), [`checkpoint_complete`](ActionStateStore::checkpoint_complete)
//!   and [`checkpoint_aborted`](ActionStateStore::checkpoint_aborted) follow the runtime's
//!   checkpoints; [`rebuild`](ActionStateStore::rebuild) restores one.
//! - A rebuild also takes a new owner epoch for its key groups and appends a fence to every
//!   partition: no record the owner it replaced (a zombie, presumed dead but still running)
//!   appends afterwards is replayed by any later rebuild, and that owner's next snapshot (or
//!   [`check_fenced`](ActionStateStore::check_fenced)) fails with [`StoreError::Fenced`].
//!   Side effects outside the store are what a zombie can still do until then.
//!
//! A store records its hits, misses, invalidations, durable calls, put latency, rebuilds and
//! reclaims through the `metrics` facade: [`metrics`] lists their names, types, labels and
//! units.
//!
//! ## The put contract
//!
//! Every write is encoded, appended, and acknowledged as durable by the backend **before**
//! the index changes. If the append fails, or the caller drops the future first, the index is
//! unchanged and the error says whether retrying can help ([`StoreError::is_retryable`]). A
//! fresh action without durable calls costs exactly one write, its completion; the pending
//! record is written at its first durable call. Writes and lookups of one key are serialized,
//! so index updates apply in log order, and the tombstones and audit record of an
//! invalidation are appended before that key's next write.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), actionstate_recovery::StoreError> {
//! use actionstate_core::{ActionId, Attributes, Event, KeyId, Trigger};
//! use actionstate_recovery::{ActionStateStore, Begin, Round, StoreConfig};
//! use actionstate_memory::MemoryLog;
//!
//! let store = ActionStateStore::new(MemoryLog::new(4), StoreConfig::default());
//! let input = Event::new("question", Attributes::new());
//! let round = Round::new(KeyId::of(b"user-7"), 0, &input);
//! let action = ActionId::new("answer");
//!
//! let Begin::Fresh(mut handle, _) = store.begin(&round, &action, &input, &Trigger::Input).await? else {
//!     unreachable!("nothing recorded yet")
//! };
//! let llm = store.call(&mut handle, "llm.complete", [0; 32], || async { Ok(b"42".to_vec()) }).await?;
//! store.complete(handle, vec![Event::new("answer", Attributes::new())], vec![]).await?;
//!
//! // Replaying the same input (a new event id, the same content) reuses the completion.
//! let replayed = Event { id: actionstate_core::EventId::random(), ..input.clone() };
//! assert!(matches!(store.begin(&round, &action, &replayed, &Trigger::Input).await?, Begin::Reuse(_)));
//! # assert_eq!(llm.output, Ok(b"42".to_vec()));
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]
#![deny(clippy::unwrap_used)]
#![warn(missing_docs)]

mod config;
mod error;
mod fencing;
mod key_lock;
pub mod metrics;
mod rebuild;
mod retention;
mod store;

pub use config::{AnyLog, DEFAULT_PARTITIONS, LogConfig, open};
pub use error::{Result, StoreError};
pub use rebuild::RebuildReport;
pub use retention::{DEFAULT_RETAINED_CHECKPOINTS, ReclaimStatus, Retention};
pub use store::{
    ActionHandle, ActionStateStore, Begin, Call, CallOutput, CallSource, Explanation, OperatorInvalidation, Ownership,
    Round, Snapshot, StoreConfig,
};
