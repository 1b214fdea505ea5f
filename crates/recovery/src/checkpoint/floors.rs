//! Where a restore that combines several checkpoints starts each key group's replay: at the
//! marker of the checkpoint chosen for that group, not at the merged (smallest) marker.
//!
//! Why: a checkpoint's marker covers its owner's keys, and its completed rounds name only the
//! keys that still have records at or above it (a key whose rounds were pruned leaves them
//! once a marker passes its records). Replaying a group from an older owner's smaller marker
//! would bring back such a key's pruned rounds, which no checkpoint prunes again and which
//! would then hold retention back for good.

//!
//! A runtime that keeps its checkpoints restores a rescale with `rebuild` from the snapshots of
//! several former owners; the same rule applies there, each marker's keys being its owner's
//! ([`Floors::of_snapshots`]).

use crate::checkpoint::coverage::Taken;
use actionstate_core::{KeyId, Marker, Ownership};

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

    /// The floors of a rebuild from `markers`, the snapshots of several former owners: each
    /// marker's keys are its owner's, the groups of its newest fence mark (the fence its
    /// owner's own rebuild appended, newer than every other it knows). None (every key replays
    /// from the merged marker, as before) with fewer than two markers, when a marker names no
    /// fence, or when two markers' owners overlap (snapshots of one owner's keys at two
    /// moments: which one a key's replay starts at is not known).
    pub(crate) fn of_snapshots(markers: &[Marker]) -> Floors {
        if markers.len() < 2 {
            return Floors::default();
        }
        let mut owners: Vec<(&Ownership, &Vec<u64>)> = Vec::new();
        for m in markers {
            let Some(newest) = m.fences.iter().max_by_key(|f| f.epoch) else { return Floors::default() };
            if owners.iter().any(|(o, _)| o.overlaps(&newest.groups)) {
                return Floors::default();
            }
            owners.push((&newest.groups, &m.offsets));
        }
        let chosen = owners
            .into_iter()
            .map(|(owner, offsets)| {
                let taken = match owner {
                    Ownership::All => Taken::Every,
                    Ownership::Groups { max_groups, owned } => Taken::Groups {
                        max_groups: *max_groups,
                        groups: (0..*max_groups).map(|g| owned.contains(&g)).collect(),
                    },
                };
                (taken, offsets.clone())
            })
            .collect();
        Floors { chosen }
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

    fn snapshot(owned: std::ops::Range<u16>, epoch: u64, offsets: Vec<u64>) -> Marker {
        let log = actionstate_core::LogIdentity { backend: "memory".into(), id: "m".into(), partitions: 2 };
        let groups = Ownership::Groups { max_groups: 4, owned };
        let mut marker = Marker::new(log, offsets);
        marker.fences = vec![
            actionstate_core::FenceMark { groups: Ownership::All, epoch: 1, offsets: vec![0, 0] },
            actionstate_core::FenceMark { groups, epoch, offsets: vec![1, 1] },
        ];
        marker
    }

    #[test]
    fn snapshots_of_several_owners_floor_each_key_at_its_owners_marker() {
        let key = KeyId::of(b"k");
        let group = key.key_group(4);
        let (mine, others) = if group < 2 { (0..2, 2..4) } else { (2..4, 0..2) };
        let floors = Floors::of_snapshots(&[snapshot(others.clone(), 7, vec![5, 5]), snapshot(mine, 8, vec![10, 20])]);
        assert_eq!((floors.floor(&key, 0), floors.floor(&key, 1)), (10, 20));
        assert!(floors.above(&[5, 5]));
        // Two snapshots of one owner's keys, or one without its owner's fence: no floors.
        let same = Floors::of_snapshots(&[snapshot(others.clone(), 7, vec![5, 5]), snapshot(others, 9, vec![9, 9])]);
        assert!(!same.above(&[0, 0]));
        let mut bare = snapshot(0..2, 3, vec![9, 9]);
        bare.fences.clear();
        assert!(!Floors::of_snapshots(&[bare, snapshot(2..4, 4, vec![9, 9])]).above(&[0, 0]));
    }
}
