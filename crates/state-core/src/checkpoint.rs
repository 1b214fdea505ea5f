//! Checkpoints kept in the log itself: what an owner's restore needs, written as records of
//! the checkpoint partition (docs/design.md, section 5.6; the bytes: docs/format.md, section 4b).
//!
//! A checkpoint is zero or more [`CheckpointEntry::Part`] records, then one
//! [`CheckpointEntry::Commit`]. It counts once its commit is in the log: the parts alone are
//! nothing, so a crash halfway through a checkpoint leaves the previous one in force. Small
//! checkpoints are the commit alone. Every record of a checkpoint goes to partition
//! [`CHECKPOINT_PARTITION`], after the end offset the checkpoint's snapshot read there
//! ([`CheckpointCommit::from`]), so a restore finds the newest one by reading that partition
//! backwards from its end, and its parts in the records just before it.
//!
//! A restore of a checkpoint older than the newest of its keys also writes a
//! [`CheckpointEntry::Rollback`] record there, naming the commits it restored: the newer
//! commits of the line it abandoned are void from then on.
//!
//! An owner that shares the log and keeps its checkpoints outside it (the two-phase form, a
//! runtime such as Flink keeping them) writes one [`CheckpointEntry::External`] record there
//! for a completed checkpoint: its covering marker, so that the owners sharing the log know
//! what it needs before they reclaim. A restore from the log never takes one.

use crate::error::Error;
use crate::fence::Ownership;
use crate::id::KeyId;
use crate::log::Marker;
use serde::{Deserialize, Serialize};

/// The partition every checkpoint record is appended to.
pub const CHECKPOINT_PARTITION: u32 = 0;

/// The most user metadata a checkpoint carries, in bytes (64 KiB): enough for the input
/// positions of a few thousand source partitions; the codec refuses to write or read more.
pub const MAX_CHECKPOINT_METADATA: usize = 64 * 1024;

/// Completed rounds per checkpoint record (about 170 KiB of payload at most): a checkpoint of
/// more live keys is split into parts, so that every record stays far below the smallest
/// record limit of the backends (Kafka's default is 1 MiB).
pub const CHECKPOINT_PART_ENTRIES: usize = 4096;

/// First byte of a checkpoint record's log key.
pub const CHECKPOINT_KEY_LAYOUT: u8 = 0xC1;

/// The part number a commit's log key carries.
pub const COMMIT_PART: u32 = u32::MAX;

/// The part number a [`CheckpointEntry::Rollback`] record's log key carries.
pub const ROLLBACK_PART: u32 = u32::MAX - 1;

/// The part number a [`CheckpointEntry::External`] record's log key carries.
pub const EXTERNAL_PART: u32 = u32::MAX - 2;

/// One record of a checkpoint an owner wrote into its log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointRecord {
    /// The key id the record is appended under: [`checkpoint_key_id`], so that it lands in
    /// [`CHECKPOINT_PARTITION`].
    pub key: KeyId,
    /// The keys of the owner that wrote it.
    pub owner: Ownership,
    /// The owner's writer epoch (0 for a store that was never restored).
    pub epoch: u64,
    /// The checkpoint id, chosen by the store: one above every id it restored or wrote.
    pub id: u64,
    /// A part or the commit.
    pub entry: CheckpointEntry,
}

/// What a checkpoint record holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CheckpointEntry {
    /// Some of the completed rounds of a checkpoint too large for its commit.
    Part {
        /// The part's number, from 0.
        index: u32,
        /// Last completed round per key.
        completed: Vec<(KeyId, u64)>,
    },
    /// The record that makes the checkpoint count.
    Commit(CheckpointCommit),
    /// Not part of a checkpoint: the record's owner restored checkpoints older than the newest
    /// valid one of its keys (to run a window again), so the newer commits of older epochs
    /// belong to the line of history that restore abandoned.
    Rollback(CheckpointRollback),
    /// Not restorable from the log: a checkpoint the owner's runtime keeps itself (the
    /// two-phase form) completed, and this is what it needs of the log. The owners sharing the
    /// log read it as they read a commit, to find their reclaim point; the record's id is the
    /// runtime's checkpoint id.
    External(ExternalCheckpoint),
}

/// A completed checkpoint kept outside the log, as the owners sharing the log must know it:
/// a restore of it (`rebuild` from its marker) reads the log from `marker` on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalCheckpoint {
    /// The covering marker of the checkpoint's snapshot, with its fences.
    pub marker: Marker,
    /// The end offset of [`CHECKPOINT_PARTITION`] when the snapshot was taken: a fence there,
    /// before this record, with a newer epoch over the owner's keys voids it (the owner was
    /// replaced before it completed), as it voids a commit.
    pub from: u64,
}

/// What a restore of older checkpoints abandoned: every commit of an epoch older than the
/// record's, over keys of one of `restored`'s entries, that lies after that entry's commit and
/// before this record is void for every later restore. Written to [`CHECKPOINT_PARTITION`]
/// before the restoring owner's fence there, so a crash after the fence leaves it in force.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointRollback {
    /// The commits restored: their offset in [`CHECKPOINT_PARTITION`], and the keys restored
    /// from each (the commit's owner within the restoring owner's).
    pub restored: Vec<(u64, Ownership)>,
}

impl CheckpointRollback {
    /// Whether a commit at `offset` over `owner`, met before this record (at a smaller offset)
    /// and of an older epoch, lies on the abandoned line: after a restored commit of its keys.
    pub fn abandons(&self, offset: u64, owner: &Ownership) -> bool {
        self.restored.iter().any(|(at, keys)| offset > *at && keys.overlaps(owner))
    }
}

/// The commit of a checkpoint: the marker a restore reads from, the user's metadata, and
/// where the parts are.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointCommit {
    /// The covering marker of the checkpoint's snapshot, with its fences.
    pub marker: Marker,
    /// Opaque bytes the owner checkpointed with its state (input positions, typically): at
    /// most [`MAX_CHECKPOINT_METADATA`].
    #[serde(deserialize_with = "metadata")]
    pub metadata: Vec<u8>,
    /// Last completed round per key, when the checkpoint has no parts.
    pub completed: Vec<(KeyId, u64)>,
    /// How many [`CheckpointEntry::Part`] records hold the completed rounds (0: the commit
    /// holds them).
    pub parts: u32,
    /// The end offset of [`CHECKPOINT_PARTITION`] when the snapshot was taken: every part
    /// lies between it and the commit, and a fence there with a newer epoch over the owner's
    /// keys voids the checkpoint (the owner was replaced while writing it).
    pub from: u64,
}

impl CheckpointRecord {
    /// Whether the codec writes this record: the metadata is at most
    /// [`MAX_CHECKPOINT_METADATA`] bytes.
    pub fn check(&self) -> Result<(), Error> {
        match &self.entry {
            CheckpointEntry::Commit(c) if c.metadata.len() > MAX_CHECKPOINT_METADATA => {
                Err(Error::MetadataTooLarge { len: c.metadata.len(), max: MAX_CHECKPOINT_METADATA })
            }
            _ => Ok(()),
        }
    }

    /// The part number its log key carries: [`COMMIT_PART`] for the commit.
    pub fn part(&self) -> u32 {
        match &self.entry {
            CheckpointEntry::Part { index, .. } => *index,
            CheckpointEntry::Commit(_) => COMMIT_PART,
            CheckpointEntry::Rollback(_) => ROLLBACK_PART,
            CheckpointEntry::External(_) => EXTERNAL_PART,
        }
    }

    /// The log key the record is written under (see [`checkpoint_log_key`]).
    pub fn log_key(&self) -> [u8; CHECKPOINT_KEY_LEN] {
        checkpoint_log_key(&self.key, &self.owner, self.epoch, self.id, self.part())
    }
}

/// Length of a checkpoint record's log key.
pub const CHECKPOINT_KEY_LEN: usize = 61;

/// The log key of a checkpoint record: the tag byte, the key id, the first 8 bytes of the
/// blake3 digest of the owner's postcard encoding, then the epoch, the checkpoint id and the
/// part number (big-endian; [`COMMIT_PART`] for the commit). No two records of different
/// checkpoints share a key, so a compacted topic keeps them all.
pub fn checkpoint_log_key(key: &KeyId, owner: &Ownership, epoch: u64, id: u64, part: u32) -> [u8; CHECKPOINT_KEY_LEN] {
    let mut out = [0u8; CHECKPOINT_KEY_LEN];
    out[0] = CHECKPOINT_KEY_LAYOUT;
    out[1..33].copy_from_slice(&key.0);
    out[33..41].copy_from_slice(&owner_digest(owner));
    out[41..49].copy_from_slice(&epoch.to_be_bytes());
    out[49..57].copy_from_slice(&id.to_be_bytes());
    out[57..61].copy_from_slice(&part.to_be_bytes());
    out
}

/// Whether a log key is a checkpoint commit's, read from the key alone: a restore skips the
/// parts and every other record without decoding them.
pub fn is_commit_key(key: &[u8]) -> bool {
    key.len() == CHECKPOINT_KEY_LEN && key[0] == CHECKPOINT_KEY_LAYOUT && key[57..61] == COMMIT_PART.to_be_bytes()
}

/// Whether a log key is a [`CheckpointEntry::Rollback`] record's, read from the key alone.
pub fn is_rollback_key(key: &[u8]) -> bool {
    key.len() == CHECKPOINT_KEY_LEN && key[0] == CHECKPOINT_KEY_LAYOUT && key[57..61] == ROLLBACK_PART.to_be_bytes()
}

/// Whether a log key is a [`CheckpointEntry::External`] record's, read from the key alone.
pub fn is_external_key(key: &[u8]) -> bool {
    key.len() == CHECKPOINT_KEY_LEN && key[0] == CHECKPOINT_KEY_LAYOUT && key[57..61] == EXTERNAL_PART.to_be_bytes()
}

fn owner_digest(owner: &Ownership) -> [u8; 8] {
    let bytes = postcard::to_allocvec(owner).unwrap_or_default();
    let mut out = [0u8; 8];
    out.copy_from_slice(&blake3::hash(&bytes).as_bytes()[..8]);
    out
}

/// The key id of the checkpoint records of a log of `partitions` partitions: the first of a
/// fixed sequence of key ids that lands in [`CHECKPOINT_PARTITION`].
pub fn checkpoint_key_id(partitions: u32) -> KeyId {
    (0u64..)
        .map(|i| KeyId::of(format!("actionstate checkpoint {i}").as_bytes()))
        .find(|k| k.partition(partitions) == CHECKPOINT_PARTITION)
        .unwrap_or_else(|| KeyId::of(b"actionstate checkpoint"))
}

/// Reads a checkpoint's metadata, refusing more than [`MAX_CHECKPOINT_METADATA`] bytes, so
/// that every record the decoder accepts the encoder writes too.
fn metadata<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    let bytes = Vec::<u8>::deserialize(d)?;
    if bytes.len() > MAX_CHECKPOINT_METADATA {
        return Err(<D::Error as serde::de::Error>::custom(format!(
            "checkpoint metadata of {} bytes exceeds {MAX_CHECKPOINT_METADATA}",
            bytes.len()
        )));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_key_ids_land_in_the_checkpoint_partition() {
        for partitions in [1, 2, 3, 8, 64] {
            assert_eq!(checkpoint_key_id(partitions).partition(partitions), CHECKPOINT_PARTITION);
        }
    }

    #[test]
    fn log_keys_tell_commits_from_parts_and_owners_apart() {
        let key = checkpoint_key_id(8);
        let all = checkpoint_log_key(&key, &Ownership::All, 7, 3, COMMIT_PART);
        let part = checkpoint_log_key(&key, &Ownership::All, 7, 3, 0);
        let half = checkpoint_log_key(&key, &Ownership::Groups { max_groups: 8, owned: 0..4 }, 7, 3, COMMIT_PART);
        assert!(is_commit_key(&all) && is_commit_key(&half));
        assert!(!is_commit_key(&part));
        assert_ne!(all, half, "owners of one epoch and id write different keys");
        assert!(!is_commit_key(&all[..60]), "a short key is not a commit's");
        let external = checkpoint_log_key(&key, &Ownership::All, 7, 3, EXTERNAL_PART);
        assert!(is_external_key(&external) && !is_commit_key(&external) && !is_rollback_key(&external));
        assert!(!is_external_key(&all) && !is_external_key(&part));
    }
}
