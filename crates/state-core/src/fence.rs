//! Ownership of key groups, owner epochs and fence records: how a restored owner shuts out
//! the writer it replaced (docs/design.md, section 7.1; the bytes: docs/format.md, sections 1
//! and 4a). The replay rule itself is `actionstate-index`'s `Fences`; a
//! [`Marker`](crate::Marker) carries the fences a replay from it must know although they lie
//! before it ([`FenceMark`]).

use crate::id::KeyId;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::Range;

/// Which keys an owner holds: every key, or a range of key groups.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Ownership {
    /// Every key.
    All,
    /// Keys whose [`KeyId::key_group`] among `max_groups` groups lies in `owned`.
    Groups {
        /// Total number of key groups.
        max_groups: u16,
        /// The groups owned.
        owned: Range<u16>,
    },
}

impl Ownership {
    /// Whether `key` is among the keys held.
    pub fn owns(&self, key: &KeyId) -> bool {
        match self {
            Ownership::All => true,
            Ownership::Groups { max_groups, owned } => owned.contains(&key.key_group(*max_groups)),
        }
    }

    /// Whether every key `other` holds is held here too. Ranges of different `max_groups`
    /// are not compared (a key's group depends on it): only [`Ownership::All`] covers them.
    pub fn covers(&self, other: &Ownership) -> bool {
        match (self, other) {
            (Ownership::All, _) => true,
            (Ownership::Groups { .. }, Ownership::All) => false,
            (Ownership::Groups { max_groups: a, owned: mine }, Ownership::Groups { max_groups: b, owned: theirs }) => {
                a == b && (theirs.is_empty() || (mine.start <= theirs.start && theirs.end <= mine.end))
            }
        }
    }

    /// The keys held both here and by `other`, where that is a range of groups; where it is
    /// not (ranges of different `max_groups`), `other` (a conservative answer: more keys).
    pub fn within(&self, other: &Ownership) -> Ownership {
        match (self, other) {
            (Ownership::All, o) | (o, Ownership::All) => o.clone(),
            (Ownership::Groups { max_groups: a, owned: mine }, Ownership::Groups { max_groups: b, owned: theirs })
                if a == b =>
            {
                let start = mine.start.max(theirs.start);
                Ownership::Groups { max_groups: *a, owned: start..mine.end.min(theirs.end).max(start) }
            }
            (_, o) => o.clone(),
        }
    }

    /// Whether some key is held both here and by `other` (ranges of different `max_groups`
    /// may share keys, so they are taken to).
    pub fn overlaps(&self, other: &Ownership) -> bool {
        match self.within(other) {
            Ownership::Groups { owned, .. } => !owned.is_empty(),
            Ownership::All => true,
        }
    }
}

impl fmt::Display for Ownership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ownership::All => f.write_str("all key groups"),
            Ownership::Groups { max_groups, owned } => {
                write!(f, "key groups {}..{} of {max_groups}", owned.start, owned.end)
            }
        }
    }
}

/// A fence record: from here on in its partition, records of the keys `groups` holds written
/// with an epoch older than `epoch` are not applied by any replay.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Fence {
    /// The key id the record is appended under: one chosen for its partition
    /// ([`fence_key_id`]), so that one fence lands in every partition.
    pub key: KeyId,
    /// The keys fenced: the restored owner's.
    pub groups: Ownership,
    /// The restored owner's epoch.
    pub epoch: u64,
}

/// A fence a replay from a [`Marker`](crate::Marker) must know: its keys, its epoch, and per
/// partition the offset of its fence record there. A record of partition `p` above
/// `offsets[p]` whose key the fence covers and whose epoch is older is a zombie's, even when
/// the replay starts past the fence record itself (or the fence record was reclaimed).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FenceMark {
    /// The keys fenced.
    pub groups: Ownership,
    /// The epoch of the owner that appended the fence.
    pub epoch: u64,
    /// Per partition, the offset of the fence record.
    pub offsets: Vec<u64>,
}

/// The key id of the fence records of `partition` among `partitions`: the first of a fixed
/// sequence of key ids that lands there, so every backend (they all place a record by
/// [`KeyId::partition`]) puts it in that partition.
pub fn fence_key_id(partition: u32, partitions: u32) -> KeyId {
    let target = partition.min(partitions.max(1) - 1);
    (0u64..)
        .map(|i| KeyId::of(format!("actionstate fence {i}").as_bytes()))
        .find(|k| k.partition(partitions) == target)
        .unwrap_or_else(|| KeyId::of(b"actionstate fence"))
}

/// The log key of a fence record: a tag byte, the key id and the epoch (big-endian).
pub fn fence_log_key(key: &KeyId, epoch: u64) -> [u8; 41] {
    let mut out = [0u8; 41];
    out[0] = FENCE_KEY_LAYOUT;
    out[1..33].copy_from_slice(&key.0);
    out[33..41].copy_from_slice(&epoch.to_be_bytes());
    out
}

/// First byte of a fence record's log key. A replay reads it before anything else: a fence
/// record is read whoever owns its key id.
pub const FENCE_KEY_LAYOUT: u8 = 0xF1;

#[cfg(test)]
mod tests {
    use super::*;

    fn groups(max_groups: u16, owned: Range<u16>) -> Ownership {
        Ownership::Groups { max_groups, owned }
    }

    #[test]
    fn fence_key_ids_land_in_their_partitions() {
        for partitions in [1, 2, 3, 16, 64] {
            for p in 0..partitions {
                assert_eq!(fence_key_id(p, partitions).partition(partitions), p, "{p} of {partitions}");
            }
        }
    }

    #[test]
    fn coverage_and_overlap_of_group_ranges() {
        assert!(Ownership::All.covers(&groups(8, 0..4)));
        assert!(!groups(8, 0..8).covers(&Ownership::All));
        assert!(groups(8, 0..8).covers(&groups(8, 2..5)));
        assert!(!groups(8, 0..4).covers(&groups(8, 2..5)));
        assert!(!groups(16, 0..16).covers(&groups(8, 0..1)), "different max_groups are not compared");
        assert!(groups(8, 0..4).covers(&groups(8, 6..6)), "an empty range is covered");
        assert_eq!(groups(8, 0..4).within(&groups(8, 2..6)), groups(8, 2..4));
        assert_eq!(groups(8, 0..2).within(&groups(8, 4..6)), groups(8, 4..4));
        assert!(!groups(8, 0..2).overlaps(&groups(8, 2..4)));
        assert!(groups(8, 0..3).overlaps(&groups(8, 2..4)));
        assert!(groups(8, 0..3).overlaps(&groups(16, 12..14)), "different max_groups may share keys");
        assert!(Ownership::All.overlaps(&groups(8, 1..2)));
    }
}
