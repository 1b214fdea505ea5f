//! Checkpoints the store writes into its own log: a snapshot, its completed rounds and the
//! caller's metadata as records of the checkpoint partition, then completion (see
//! `actionstate_core::checkpoint` for the records, `restore.rs` for the way back).

use crate::checkpoint::form::InLog;
use crate::error::Result;
use crate::error::StoreError;
use crate::store::ActionStateStore;
use crate::store::vocab::Snapshot;
use actionstate_core::{
    CHECKPOINT_PART_ENTRIES, CheckpointCommit, CheckpointEntry, CheckpointRecord, Error, KeyId, LogRecord,
    MAX_CHECKPOINT_METADATA, Marker, Position, StateLog, checkpoint::CHECKPOINT_PARTITION, checkpoint_key_id, codec,
};

/// A checkpoint written into the log ([`ActionStateStore::checkpoint`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogCheckpoint {
    /// Its id: one above the last one this store wrote or restored.
    pub id: u64,
    /// Where its commit landed, in the checkpoint partition.
    pub commit: Position,
    /// Records written before the commit to hold its completed rounds (0: the commit held
    /// them).
    pub parts: u32,
    /// The covering marker a restore of it reads from.
    pub marker: Marker,
    /// States the completion pruned from memory.
    pub pruned: usize,
    /// Keys whose last completed round it names (what a restore of it prunes; bounded by the
    /// keys with records at or above its marker).
    pub completed: usize,
}

impl<L: StateLog> ActionStateStore<L, InLog> {
    /// Takes a checkpoint and keeps it in the log: the covering marker, the last completed
    /// round of every key a restore may replay, and `metadata` (at most
    /// [`MAX_CHECKPOINT_METADATA`] bytes, for example the input positions the service resumes
    /// from). [`restore`](Self::restore) finds it again.
    ///
    /// The checkpoint counts once its commit record is durable: its parts (a checkpoint of
    /// more than [`CHECKPOINT_PART_ENTRIES`] live keys is split) are appended first, and a
    /// crash before the commit leaves the previous checkpoint in force. The rounds it
    /// completed are pruned from memory before it is written, so that its marker lies past
    /// their records; once the commit is acknowledged, retention may reclaim what no retained
    /// checkpoint needs. If the write fails, only memory forgot those rounds (the service has
    /// moved past them), and the previous checkpoint stays in force; its commit may still
    /// have landed (an acknowledgement lost), and then it counts, which is safe: it describes
    /// the same consistent moment.
    ///
    /// `metadata` must describe what the checkpoint covers: an input position counts only
    /// inputs whose rounds were [finished](crate::OpenRound::finish) or whose actions'
    /// results are durable, because a restore resumes the input there. Checkpoints of one
    /// store are written one at a time. [`checkpoint_with`](Self::checkpoint_with) writes a
    /// typed value instead of bytes.
    #[tracing::instrument(name = "actionstate.checkpoint", level = "info", skip_all, fields(actionstate.checkpoint.form = "in_log", actionstate.checkpoint.metadata_bytes = metadata.len()))]
    pub async fn checkpoint(&self, metadata: &[u8]) -> Result<LogCheckpoint> {
        if metadata.len() > MAX_CHECKPOINT_METADATA {
            return Err(Error::MetadataTooLarge { len: metadata.len(), max: MAX_CHECKPOINT_METADATA }.into());
        }
        let mut last = self.log_checkpoint.lock().await;
        // Boxed, as a restore boxes its rebuild: callers' futures stay shallow.
        Box::pin(self.before_checkpoint()).await?;
        // An id is never written twice, not even after a failed attempt: parts of that
        // attempt whose acknowledgement was lost may still land.
        let id = last.saturating_add(1);
        *last = id;
        let (mut snapshot, end) = self.take_snapshot(id).await?;
        let from = end.get(CHECKPOINT_PARTITION as usize).copied().unwrap_or(0);
        // The rounds the checkpoint completed are pruned before it is written, so that its
        // marker already lies past their records (a two-phase checkpoint's marker cannot: the
        // runtime may still abort it). Should the write fail, only memory forgot them: the
        // runtime has moved past those rounds, and a restore reads the previous checkpoint.
        let pruned = self.prune_checkpoint(id).map_or(0, |(pruned, _, _)| pruned);
        snapshot.marker = self.marker_now(&end);
        let (commit, parts) = self.write_checkpoint(&snapshot, from, metadata).await?;
        self.retain(snapshot.marker.clone());
        self.reclaim_shared(None);
        tracing::debug!(id, parts, offset = commit.offset, pruned, "checkpoint written");
        let completed = snapshot.completed.len();
        Ok(LogCheckpoint { id, commit, parts, marker: snapshot.marker, pruned, completed })
    }

    /// [`checkpoint`](Self::checkpoint) with `metadata` a typed value, encoded with postcard
    /// (a compact, non-self-describing encoding: read it back with the same type, through
    /// [`Restored::metadata_as`](crate::Restored::metadata_as)). A value that does not encode,
    /// or whose encoding is over [`MAX_CHECKPOINT_METADATA`] bytes, is an error and writes
    /// nothing.
    pub async fn checkpoint_with<T: serde::Serialize + ?Sized>(&self, metadata: &T) -> Result<LogCheckpoint> {
        let bytes = postcard::to_allocvec(metadata).map_err(|e| StoreError::Metadata {
            type_name: std::any::type_name::<T>(),
            len: 0,
            detail: e.to_string(),
        })?;
        self.checkpoint(&bytes).await
    }

    /// Appends the parts, then the commit, of `snapshot`'s checkpoint; returns where the
    /// commit landed and how many parts came first.
    async fn write_checkpoint(&self, snapshot: &Snapshot, from: u64, metadata: &[u8]) -> Result<(Position, u32)> {
        let (owner, epoch) = {
            let sh = self.shared.lock();
            sh.fencing.check()?;
            (sh.fencing.ownership.clone(), sh.fencing.epoch)
        };
        let mut completed: Vec<(KeyId, u64)> = snapshot.completed.iter().map(|(k, s)| (*k, *s)).collect();
        completed.sort_unstable();
        let record = |entry| {
            LogRecord::Checkpoint(CheckpointRecord {
                key: checkpoint_key_id(self.log.identity().partitions),
                owner: owner.clone(),
                epoch,
                id: snapshot.checkpoint,
                entry,
            })
        };
        let parts = if completed.len() > CHECKPOINT_PART_ENTRIES {
            let mut parts = 0u32;
            for chunk in completed.chunks(CHECKPOINT_PART_ENTRIES) {
                let part = record(CheckpointEntry::Part { index: parts, completed: chunk.to_vec() });
                self.log.append(codec::encode_by(&part, epoch)?).await?;
                parts += 1;
            }
            completed.clear();
            parts
        } else {
            0
        };
        let commit = record(CheckpointEntry::Commit(CheckpointCommit {
            marker: snapshot.marker.clone(),
            metadata: metadata.to_vec(),
            completed,
            parts,
            from,
        }));
        let at = self.log.append(codec::encode_by(&commit, epoch)?).await?;
        Ok((at, parts))
    }
}
