//! Fencing zombie writers: the owner's epoch, the fences a restore appends, the fence table
//! markers carry, and the check that tells a fenced store so
//! ([`check_fenced`](crate::ActionStateStore::check_fenced), failing with
//! [`StoreError::Fenced`]). The replay rule is [`actionstate_index::Fences`]; the mechanism
//! and why it was chosen: docs/design.md, section 7.1.
//!
//! This file holds the state and its rules; `log.rs` the store's reads and appends of fence
//! records.

pub(crate) mod log;

use crate::error::{Result, StoreError};
use actionstate_core::{Fence, FenceMark, Ownership};
use std::time::{SystemTime, UNIX_EPOCH};

/// What a store knows of ownership and fences.
#[derive(Clone, Debug)]
pub(crate) struct Fencing {
    /// The writer epoch of every record the store appends (0: an unfenced writer, which has
    /// not been rebuilt).
    pub(crate) epoch: u64,
    /// The keys the store owns since its last rebuild.
    pub(crate) ownership: Ownership,
    /// The fences over its keys that a replay from its next marker must know.
    pub(crate) marks: Vec<FenceMark>,
    /// Per partition, the offset up to which the store has looked for newer fences; `None`
    /// until a rebuild (an unfenced writer does not look).
    pub(crate) seen: Option<Vec<u64>>,
    /// The keys of this store a newer owner restored, and that owner's epoch (`None`: its
    /// fence was reclaimed before this store looked), once known.
    pub(crate) fenced: Option<(Ownership, Option<u64>)>,
}

impl Default for Fencing {
    fn default() -> Self {
        Fencing { epoch: 0, ownership: Ownership::All, marks: Vec::new(), seen: None, fenced: None }
    }
}

impl Fencing {
    /// The error every write and snapshot of a fenced store fails with.
    pub(crate) fn check(&self) -> Result<()> {
        match &self.fenced {
            Some((groups, fenced_by)) => {
                Err(StoreError::Fenced { groups: groups.clone(), epoch: self.epoch, fenced_by: *fenced_by })
            }
            None => Ok(()),
        }
    }

    /// The fence table for a marker at `offsets`: every mark over the store's keys, less the
    /// marks a newer one makes redundant for a replay from `offsets` (the newer fence covers
    /// the same keys of this store and its records lie at or below `offsets` everywhere, so
    /// every record the older fence would skip the newer one skips too).
    pub(crate) fn marks_for(&self, offsets: &[u64]) -> Vec<FenceMark> {
        let mut kept: Vec<FenceMark> = Vec::new();
        for m in &self.marks {
            let mine = self.ownership.within(&m.groups);
            let redundant = self.marks.iter().any(|n| {
                n.epoch > m.epoch && n.groups.covers(&mine) && n.offsets.iter().zip(offsets).all(|(at, to)| at <= to)
            });
            if !redundant && !kept.contains(m) {
                kept.push(m.clone());
            }
        }
        kept
    }
}

/// A fence record read in a partition, at its offset.
pub(crate) type FenceRead = (u32, Fence, u64);

/// The fence table after a rebuild: the marker's marks and the fences read, one mark per fence
/// (keys and epoch) with the offset of its record in each partition (`u64::MAX` where none was
/// found: a restore that failed part way appended only some), those over `ownership` only.
pub(crate) fn table(marks: &[FenceMark], read: &[FenceRead], partitions: u32, ownership: &Ownership) -> Vec<FenceMark> {
    let mut table: Vec<FenceMark> = marks.to_vec();
    for (partition, fence, offset) in read {
        let at = match table.iter_mut().find(|m| m.groups == fence.groups && m.epoch == fence.epoch) {
            Some(m) => m,
            None => {
                table.push(FenceMark {
                    groups: fence.groups.clone(),
                    epoch: fence.epoch,
                    offsets: vec![u64::MAX; partitions as usize],
                });
                let last = table.len() - 1;
                &mut table[last]
            }
        };
        if let Some(o) = at.offsets.get_mut(*partition as usize) {
            *o = (*o).min(*offset);
        }
    }
    table.retain(|m| m.groups.overlaps(ownership));
    table
}

/// The epoch a restore of `ownership` takes: one above every epoch it knows of, and no lower
/// than the clock in microseconds.
pub(crate) fn next_epoch(known: impl IntoIterator<Item = u64>) -> u64 {
    let newest = known.into_iter().max().unwrap_or(0);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(0));
    newest.saturating_add(1).max(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups(owned: std::ops::Range<u16>) -> Ownership {
        Ownership::Groups { max_groups: 8, owned }
    }

    #[test]
    fn the_table_joins_marks_and_fences_read_and_keeps_those_over_the_owners_keys() {
        let key = actionstate_core::KeyId([0; 32]);
        let marks = [FenceMark { groups: groups(0..4), epoch: 2, offsets: vec![5, 7] }];
        let read = [
            (1, Fence { key, groups: groups(0..4), epoch: 2 }, 3),
            (0, Fence { key, groups: groups(4..8), epoch: 9 }, 40),
            (1, Fence { key, groups: groups(0..8), epoch: 10 }, 41),
        ];
        let t = table(&marks, &read, 2, &groups(0..4));
        assert_eq!(
            t,
            vec![
                FenceMark { groups: groups(0..4), epoch: 2, offsets: vec![5, 3] },
                FenceMark { groups: groups(0..8), epoch: 10, offsets: vec![u64::MAX, 41] },
            ]
        );
    }

    #[test]
    fn a_newer_mark_over_the_same_keys_makes_an_older_one_redundant_only_once_the_marker_passes_it() {
        let fencing = Fencing {
            ownership: groups(0..4),
            marks: vec![
                FenceMark { groups: groups(0..8), epoch: 1, offsets: vec![10, 10] },
                FenceMark { groups: groups(0..4), epoch: 2, offsets: vec![20, 20] },
            ],
            ..Fencing::default()
        };
        assert_eq!(fencing.marks_for(&[15, 30]).len(), 2, "the newer fence lies past the marker in partition 0");
        assert_eq!(fencing.marks_for(&[20, 30]), vec![fencing.marks[1].clone()]);
    }

    #[test]
    fn a_new_epoch_outranks_every_known_one_and_the_clock() {
        assert!(next_epoch([]) > 1_700_000_000_000_000, "microseconds since 1970");
        assert_eq!(next_epoch([u64::MAX - 1]), u64::MAX);
        let clock = next_epoch([]);
        assert!(next_epoch([clock + 5]) == clock + 6);
    }
}
