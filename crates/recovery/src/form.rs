//! The two checkpoint forms, chosen in types: a store writes its checkpoints into its log
//! ([`InLog`], the default) or its runtime keeps them ([`TwoPhase`]). A store of one form has
//! no method of the other, so it cannot mix them (docs/design.md, section 5.5).
//!
//! Both restore through [`ActionStateStore::restore`]; what a restore starts from says which
//! form the store has: a [`RestoreFrom`] for [`InLog`], the runtime's [`Snapshot`]s for
//! [`TwoPhase`].

use crate::error::Result;
use crate::restore::{RestoreFrom, Restored};
use crate::store::ActionStateStore;
use crate::vocab::{Ownership, Snapshot};
use actionstate_core::{KeyId, Marker, StateLog};
use std::collections::HashMap;
use std::future::Future;

mod sealed {
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
/// [`checkpoint`](ActionStateStore::checkpoint) and finds again on
/// [`restore`](ActionStateStore::restore): for services that keep no checkpoints of their
/// own. The default form.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InLog;

/// Checkpoints the runtime keeps (Flink, the simulator): [`snapshot`](ActionStateStore::snapshot)
/// at the barrier, [`checkpoint_complete`](ActionStateStore::checkpoint_complete) once the
/// runtime's checkpoint is durable, and [`restore`](ActionStateStore::restore) from the
/// [`Snapshot`]s the runtime kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TwoPhase;

impl sealed::Sealed for InLog {}
impl sealed::Sealed for TwoPhase {}
impl CheckpointForm for InLog {}
impl CheckpointForm for TwoPhase {}

/// What a [`restore`](ActionStateStore::restore) starts from; its [`Form`](Self::Form) is the
/// form of the store it opens. Implemented by [`RestoreFrom`] (the checkpoints in the log) and
/// by the [`Snapshot`]s a two-phase runtime kept (`&[Snapshot]`, `&[Snapshot; N]`,
/// `Vec<Snapshot>`; none: a fresh start that replays the whole retained log; several: the
/// checkpoints of every former owner of the keys after a rescale).
pub trait RestorePoint: sealed::Sealed {
    /// The form of the store restored.
    type Form: CheckpointForm;

    /// Restores `store`, newly created, for `ownership`.
    #[doc(hidden)]
    fn restore_into<L: StateLog>(
        self,
        store: &ActionStateStore<L, Self::Form>,
        ownership: &Ownership,
    ) -> impl Future<Output = Result<Restored>> + Send;
}

impl sealed::Sealed for RestoreFrom {}

impl RestorePoint for RestoreFrom {
    type Form = InLog;

    fn restore_into<L: StateLog>(
        self,
        store: &ActionStateStore<L, InLog>,
        ownership: &Ownership,
    ) -> impl Future<Output = Result<Restored>> + Send {
        store.restore_from_log(ownership, self)
    }
}

impl sealed::Sealed for &[Snapshot] {}

impl RestorePoint for &[Snapshot] {
    type Form = TwoPhase;

    fn restore_into<L: StateLog>(
        self,
        store: &ActionStateStore<L, TwoPhase>,
        ownership: &Ownership,
    ) -> impl Future<Output = Result<Restored>> + Send {
        let markers: Vec<Marker> = self.iter().map(|s| s.marker.clone()).collect();
        // The last completed round of a key, over every snapshot given (after a rescale, each
        // former owner's snapshot holds its own keys).
        let mut completed: HashMap<KeyId, u64> = HashMap::new();
        for s in self {
            for (key, seq) in s.completed.iter() {
                let last = completed.entry(*key).or_insert(*seq);
                *last = (*last).max(*seq);
            }
        }
        let fresh = self.is_empty();
        async move {
            let rebuild = store.rebuild(&markers, ownership, &completed).await?;
            Ok(Restored { from: Vec::new(), from_earliest: fresh, scanned: 0, rebuild })
        }
    }
}

impl<const N: usize> sealed::Sealed for &[Snapshot; N] {}

impl<const N: usize> RestorePoint for &[Snapshot; N] {
    type Form = TwoPhase;

    fn restore_into<L: StateLog>(
        self,
        store: &ActionStateStore<L, TwoPhase>,
        ownership: &Ownership,
    ) -> impl Future<Output = Result<Restored>> + Send {
        self.as_slice().restore_into(store, ownership)
    }
}

impl sealed::Sealed for Vec<Snapshot> {}

impl RestorePoint for Vec<Snapshot> {
    type Form = TwoPhase;

    async fn restore_into<L: StateLog>(
        self,
        store: &ActionStateStore<L, TwoPhase>,
        ownership: &Ownership,
    ) -> Result<Restored> {
        self.as_slice().restore_into(store, ownership).await
    }
}
