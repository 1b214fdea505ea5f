//! Where a restore that combines several checkpoints starts each key group's replay: at the
//! marker of the checkpoint chosen for that group, not at the merged (smallest) marker.
//!
//! Why: a checkpoint's marker covers its owner's keys, and its completed rounds name only the
//! keys that still have records at or above it (a key whose rounds were pruned leaves them
//! once a marker passes its records). Replaying a group from an older owner's smaller marker
//! would bring back such a key's pruned rounds, which no checkpoint prunes again and which
//! would then hold retention back for good.

use crate::coverage::Taken;
use actionstate_core::KeyId;

/// Per chosen checkpoint, the keys it was chosen for and its marker's offsets.
#[derive(Clone, Debug, Default)]
pub(crate) struct Floors {
    chosen: Vec<(Taken, Vec<u64>)>,
}

impl Floors {
    /// Records of the keys `taken` holds start at `offsets` (one per partition).
    pub(crate) fn push(&mut self, taken: Taken, offsets: Vec<u64>) {
        self.chosen.push((taken, offsets));
    }

    /// The first offset of `partition` whose records of `key` are replayed: the marker of its
    /// group's checkpoint; 0 for a key of no checkpoint (replayed from the earliest record).
    pub(crate) fn floor(&self, key: &KeyId, partition: u32) -> u64 {
        self.chosen
            .iter()
            .find(|(taken, _)| taken.holds(key))
            .and_then(|(_, offsets)| offsets.get(partition as usize).copied())
            .unwrap_or(0)
    }

    /// Whether some group starts past `merged` (else the merged marker is every group's start).
    pub(crate) fn above(&self, merged: &[u64]) -> bool {
        self.chosen.iter().any(|(_, offsets)| offsets.iter().zip(merged).any(|(o, m)| o > m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_starts_at_its_own_checkpoints_marker() {
        let key = KeyId::of(b"k");
        let group = usize::from(key.key_group(4));
        let mut mine = vec![false; 4];
        mine[group] = true;
        let others: Vec<bool> = mine.iter().map(|m| !m).collect();
        let mut floors = Floors::default();
        floors.push(Taken::Groups { max_groups: 4, groups: others }, vec![5, 5]);
        assert_eq!(floors.floor(&key, 1), 0, "no checkpoint holds its group yet");
        floors.push(Taken::Groups { max_groups: 4, groups: mine }, vec![10, 20]);
        assert_eq!((floors.floor(&key, 0), floors.floor(&key, 1)), (10, 20));
        assert!(floors.above(&[5, 5]) && !floors.above(&[10, 20]));
    }
}
