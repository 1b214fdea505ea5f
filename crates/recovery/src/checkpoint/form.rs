//! The two checkpoint forms, chosen in types: a store writes its checkpoints into its log
//! ([`InLog`], the default) or its runtime keeps them ([`TwoPhase`]). A store of one form has
//! no method of the other, so it cannot mix them (docs/design.md, section 5.5).
//!
//! Both restore through `ActionStateStore::restore`; what a restore starts from says which
//! form the store has (`restore.rs`, `RestorePoint`).

pub(crate) mod sealed {
    pub trait Sealed {}
}

/// How a store's checkpoints are kept: [`InLog`] or [`TwoPhase`]. Sealed: the store's
/// retention and restore know exactly these two. A store of one form has no method of the
/// other, so it cannot mix them.
///
/// A two-phase store takes snapshots:
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), actionstate_recovery::StoreError> {
/// # use actionstate_memory::MemoryLog;
/// # use actionstate_recovery::{ActionStateStore, Ownership, Snapshot, StoreConfig};
/// let (store, _) = ActionStateStore::restore(MemoryLog::new(2), StoreConfig::default(), &Ownership::All, Vec::<Snapshot>::new()).await?;
/// let snapshot = store.snapshot(1).await?;
/// # let _ = snapshot;
/// # Ok(()) }
/// ```
///
/// and a store restored from the log's own checkpoints has no such method:
///
/// ```compile_fail
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), actionstate_recovery::StoreError> {
/// # use actionstate_memory::MemoryLog;
/// # use actionstate_recovery::{ActionStateStore, Ownership, RestoreFrom, StoreConfig};
/// let (store, _) = ActionStateStore::restore(MemoryLog::new(2), StoreConfig::default(), &Ownership::All, RestoreFrom::Latest).await?;
/// let snapshot = store.snapshot(1).await?;
/// # let _ = snapshot;
/// # Ok(()) }
/// ```
pub trait CheckpointForm: sealed::Sealed + Send + Sync + 'static {}

/// Checkpoints the store writes into its own log with
/// [`checkpoint`](crate::ActionStateStore::checkpoint) and finds again on
/// [`restore`](crate::ActionStateStore::restore): for services that keep no checkpoints of their
/// own. The default form.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InLog;

/// Checkpoints the runtime keeps (Flink, the simulator): [`snapshot`](crate::ActionStateStore::snapshot)
/// at the barrier, [`checkpoint_complete`](crate::ActionStateStore::checkpoint_complete) once the
/// runtime's checkpoint is durable, and [`restore`](crate::ActionStateStore::restore) from the
/// [`Snapshot`](crate::Snapshot)s the runtime kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TwoPhase;

impl sealed::Sealed for InLog {}
impl sealed::Sealed for TwoPhase {}
impl CheckpointForm for InLog {}
impl CheckpointForm for TwoPhase {}
