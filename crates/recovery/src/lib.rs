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
//! - A rebuild also fences the owner it replaced (a zombie, presumed dead but still running):
//!   nothing it appends afterwards is replayed, and its next snapshot (or
//!   [`check_fenced`](ActionStateStore::check_fenced)) fails with [`StoreError::Fenced`]
//!   (docs/design.md, section 7.1).
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

mod calls;
mod config;
mod coverage;
mod error;
mod external;
mod fence_log;
mod fencing;
mod floors;
mod handle;
mod key_lock;
mod log_checkpoint;
pub mod metrics;
mod owners;
mod rebuild;
mod restore;
mod retention;
mod shared_scan;
mod store;
mod store_config;
mod tail;
mod vocab;

pub use calls::{Call, CallOutput, CallSource};
pub use config::{AnyLog, DEFAULT_PARTITIONS, LogConfig, open};
pub use error::{Result, StoreError};
pub use handle::ActionHandle;
pub use log_checkpoint::LogCheckpoint;
pub use rebuild::RebuildReport;
pub use restore::{RestoreFrom, Restored, RestoredCheckpoint};
pub use retention::{DEFAULT_RETAINED_CHECKPOINTS, ReclaimStatus, Retention};
pub use store::ActionStateStore;
pub use store_config::StoreConfig;
pub use vocab::{Begin, Explanation, OperatorInvalidation, Ownership, Round, Snapshot};
