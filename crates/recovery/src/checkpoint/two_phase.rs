//! The two-phase checkpoint form ([`TwoPhase`]): the runtime keeps the checkpoints, and the
//! store follows their lifecycle (docs/design.md, section 5.5). A runtime restores with
//! [`ActionStateStore::restore`] from the snapshots it kept.

use crate::checkpoint::form::TwoPhase;
use crate::error::Result;
use crate::store::ActionStateStore;
use crate::store::vocab::Snapshot;
use actionstate_core::{Ownership, StateLog};

impl<L: StateLog> ActionStateStore<L, TwoPhase> {
    /// Takes a checkpoint: appends every pending invalidation, then returns the covering
    /// marker and the last completed round of every key a restore may replay.
    ///
    /// A store a newer owner fenced fails with [`StoreError::Fenced`](crate::StoreError::Fenced) instead: it looks for
    /// newer fences over its keys in what the log gained since it last looked (see
    /// [`check_fenced`](Self::check_fenced)), so a zombie learns it at its next snapshot at
    /// the latest.
    #[tracing::instrument(name = "actionstate.checkpoint", level = "info", skip_all, fields(actionstate.checkpoint.form = "two_phase", actionstate.checkpoint.id = checkpoint))]
    pub async fn snapshot(&self, checkpoint: u64) -> Result<Snapshot> {
        // Boxed for the reason `restore` boxes its rebuild: callers' futures stay shallow.
        Box::pin(self.before_checkpoint()).await?;
        Ok(Box::pin(self.take_snapshot(checkpoint)).await?.0)
    }

    /// The checkpoint is durable: prune the rounds it completed from memory, and forget it and
    /// every older checkpoint. Returns the number of states pruned.
    ///
    /// With [`Retention::LastCheckpoints`](crate::Retention::LastCheckpoints), once enough checkpoints have completed, this also
    /// asks the backend, in the background, to reclaim the records no retained checkpoint
    /// needs ([`reclaim_status`](Self::reclaim_status) reports how that went). A store that
    /// owns some key groups of a shared log first makes the checkpoint's marker known to the
    /// other owners, in the background too (docs/design.md, section 6).
    pub fn checkpoint_complete(&self, checkpoint: u64) -> usize {
        let Some((pruned, marker, from)) = self.prune_checkpoint(checkpoint) else { return 0 };
        let shared = matches!(self.shared.lock().fencing.ownership, Ownership::Groups { .. });
        if shared {
            self.publish_completed(checkpoint, marker, from);
        } else {
            self.retain(marker);
        }
        pruned
    }

    /// The checkpoint failed: forget it without pruning.
    pub fn checkpoint_aborted(&self, checkpoint: u64) {
        self.forget_checkpoint(checkpoint);
    }
}
