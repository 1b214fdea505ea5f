//! Two-phase checkpoints of stores that share a log (docs/design.md, section 6): the runtime
//! keeps the checkpoints (`snapshot`, `checkpoint_complete`, then `restore` from the snapshots it kept),
//! so their markers are not in the log, yet the other owners must know them before they
//! reclaim.
//!
//! Why a record in the log: every owner decides the reclaim point from partition 0 alone
//! (`owners.rs`), the same way from the same records, so owners may reclaim concurrently and
//! each reaches the same point. A completed checkpoint is therefore made known there, as an
//! [`ExternalCheckpoint`] record that the owners' scan reads like a commit: the owner's
//! groups, its epoch, the runtime's checkpoint id, the snapshot's marker (with its fences)
//! and the end offset of partition 0 the snapshot read (`from`, where the void rule looks for
//! a fence that replaced the owner before it completed). A restore from the log never takes
//! one: the runtime restores it from its snapshot, so a store cannot mix the forms through the
//! log.
//!
//! The record is appended by the background reclaim job, not in `checkpoint_complete`, which
//! stays synchronous. Jobs run one at a time and a newer request replaces a waiting one, so
//! several completions may coalesce into the newest; an older marker left out only holds
//! back more (`retention/mod.rs`, `request_shared`).

use crate::checkpoint::form::TwoPhase;
use crate::retention::Retention;
use crate::store::ActionStateStore;
use actionstate_core::{
    CheckpointEntry, CheckpointRecord, ExternalCheckpoint, LogRecord, Marker, StateLog, checkpoint_key_id, codec,
};

impl<L: StateLog> ActionStateStore<L, TwoPhase> {
    /// A checkpoint `id` of a store owning some key groups completed: asks the reclaim job to
    /// append its `marker` (taken when partition 0 ended at `from`) to partition 0, then to
    /// find the owners' reclaim point. A store that knows it is fenced publishes nothing: its
    /// successor's checkpoints are the ones that count for its groups.
    pub(crate) fn publish_completed(&self, id: u64, marker: Marker, from: u64) {
        let Retention::LastCheckpoints(_) = self.config.retention else { return };
        let (owner, epoch) = {
            let sh = self.shared.lock();
            if sh.fencing.check().is_err() {
                return;
            }
            (sh.fencing.ownership.clone(), sh.fencing.epoch)
        };
        let record = LogRecord::Checkpoint(CheckpointRecord {
            key: checkpoint_key_id(self.log.identity().partitions),
            owner,
            epoch,
            id,
            entry: CheckpointEntry::External(ExternalCheckpoint { marker, from }),
        });
        match codec::encode_by(&record, epoch) {
            Ok(wire) => self.reclaim_shared(Some(wire)),
            // Not expected (the record has no metadata to be too large); without it the
            // owners hold reclaim back at this owner's earlier checkpoints, which is safe.
            Err(e) => {
                tracing::warn!(error = %e, id, "a completed checkpoint could not be encoded for the other owners")
            }
        }
    }
}
