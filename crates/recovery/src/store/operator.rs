//! An operator's invalidation: the repair that makes a key's rounds run again.

use crate::checkpoint::form::CheckpointForm;
use crate::error::Result;
use crate::store::vocab::OperatorInvalidation;
use crate::store::{ActionStateStore, Completion};
use actionstate_core::{InvalidationReason, KeyId, StateKey, StateLog};

impl<L: StateLog, F: CheckpointForm> ActionStateStore<L, F> {
    /// Invalidates, as an operator's repair, every state of `key`'s rounds `seq ≥ from_seq`:
    /// their actions run again when the runtime replays those rounds (a lookup of them
    /// misses). `reason` says why, in at most [`MAX_OPERATOR_TEXT`](actionstate_core::MAX_OPERATOR_TEXT)
    /// bytes (a longer one is [`actionstate_core::Error::OperatorTextTooLong`] and changes
    /// nothing).
    ///
    /// The invalidation goes through the records of a divergence: the key's earlier pending
    /// records are appended first, then an audit record (reason
    /// [`InvalidationReason::Operator`]) and one tombstone per removed state. It is logged
    /// even when it removes nothing, and it has been appended when this returns `Ok`. Every
    /// later rebuild replays it: from the audit record, so a log cut after any of its
    /// records replays to the whole of it, and the tombstones the cut lost are appended
    /// before the key's next write (see [`restore`](Self::restore)).
    ///
    /// If an append fails, the states are already removed from the index and the records
    /// not yet appended stay queued: they are appended before the key's next write or the
    /// next snapshot (as a lookup's invalidation is). A restore of a checkpoint prunes the
    /// rounds the checkpoint completed; the invalidation matters for the rounds the runtime
    /// replays after it.
    #[tracing::instrument(level = "info", skip(self, reason), fields(key = %key))]
    pub async fn invalidate(&self, key: KeyId, from_seq: u64, reason: &str) -> Result<OperatorInvalidation> {
        let checked = InvalidationReason::operator(reason)?;
        let _epoch = self.epoch.read().await;
        let _key = self.keys.lock(key).await;
        // Records this key's earlier lookups queued come first, as before any write.
        self.flush_key(&key).await?;
        let probe = StateKey::round(key, from_seq);
        let (removed, records) = {
            let mut sh = self.shared.lock();
            let inv = sh.index.invalidate_from(&key, from_seq, reason.to_owned());
            // The repaired rounds are not done any more: the runtime runs them again, and a
            // checkpoint taken before it has must not prune what it writes (nor the removal
            // counts that give its calls new keys).
            if let Some(c) = sh.last_completed.get(&key).copied()
                && c.seq >= from_seq
            {
                match from_seq.checked_sub(1) {
                    Some(seq) => {
                        sh.last_completed.insert(key, Completion { seq, past: c.past, draining: false });
                    }
                    None => {
                        sh.last_completed.remove(&key);
                    }
                }
            }
            let removed: Vec<StateKey> = inv.removed.iter().map(|r| r.key).collect();
            let records = removed.len() + 1;
            sh.enqueue(&probe, None, inv);
            (removed, records)
        };
        self.flush_key(&key).await?;
        let mut removed = removed;
        removed.sort();
        Ok(OperatorInvalidation { key, from_seq, reason: checked, removed, records })
    }
}
