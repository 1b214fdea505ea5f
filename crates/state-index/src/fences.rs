//! The replay rule of fencing: which records of a partition a replay applies.

use actionstate_core::{Fence, FenceMark, KeyId, Ownership};

/// The fences a replay of one partition has met, and the rule they impose: a record of a key
/// some fence covers, written with an epoch older than that fence's, is a zombie's — the
/// writer the fence's owner replaced — and is not applied.
///
/// A replay feeds it, in log order, the fences of its [`Marker`](actionstate_core::Marker)
/// that lie before where it starts ([`Fences::from_marks`]) and every fence record it reads
/// ([`Fences::observe`]), and asks [`Fences::admits`] of every other record. A fence only
/// ever governs records after it: what the fenced writer appended before the restore
/// replays, so the acknowledged history of a current owner is kept.
///
/// It stays as small as the shapes of ownership in the log: a fence replaces every fence it
/// makes redundant (an older epoch over keys it covers).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fences {
    active: Vec<(Ownership, u64)>,
}

impl Fences {
    /// No fence met yet.
    pub fn new() -> Self {
        Fences::default()
    }

    /// The fences of `marks` whose records lie in `partition` below `from`, where a replay of
    /// the partition from `from` starts (those at or above it it reads itself).
    pub fn from_marks(marks: &[FenceMark], partition: u32, from: u64) -> Self {
        let mut fences = Fences::new();
        for m in marks {
            if m.offsets.get(partition as usize).is_some_and(|&at| at < from) {
                fences.add(m.groups.clone(), m.epoch);
            }
        }
        fences
    }

    /// Takes in a fence record read in log order.
    pub fn observe(&mut self, fence: &Fence) {
        self.add(fence.groups.clone(), fence.epoch);
    }

    fn add(&mut self, groups: Ownership, epoch: u64) {
        if self.active.iter().any(|(g, e)| *e >= epoch && g.covers(&groups)) {
            return;
        }
        self.active.retain(|(g, e)| !(epoch >= *e && groups.covers(g)));
        self.active.push((groups, epoch));
    }

    /// Whether a record of `key` written with writer epoch `epoch`, met after every fence
    /// observed so far, is applied: no fence covering the key has a newer epoch.
    pub fn admits(&self, key: &KeyId, epoch: u64) -> bool {
        self.active.iter().all(|(groups, fenced)| epoch >= *fenced || !groups.owns(key))
    }

    /// The newest epoch of a fence overlapping `groups`, if any.
    pub fn newest_over(&self, groups: &Ownership) -> Option<u64> {
        self.active.iter().filter(|(g, _)| g.overlaps(groups)).map(|(_, e)| *e).max()
    }

    /// Whether no fence was met.
    pub fn is_empty(&self) -> bool {
        self.active.is_empty()
    }

    /// The fences in force: each one's keys and epoch.
    pub fn active(&self) -> &[(Ownership, u64)] {
        &self.active
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups(owned: std::ops::Range<u16>) -> Ownership {
        Ownership::Groups { max_groups: 8, owned }
    }

    fn key_in_group(g: u16) -> KeyId {
        (0u32..).map(|i| KeyId::of(&i.to_le_bytes())).find(|k| k.key_group(8) == g).unwrap_or(KeyId([0; 32]))
    }

    #[test]
    fn a_fence_shuts_out_older_epochs_of_the_keys_it_covers_only() {
        let mut f = Fences::new();
        assert!(f.admits(&key_in_group(1), 0));
        f.observe(&Fence { key: KeyId([0; 32]), groups: groups(0..4), epoch: 5 });
        assert!(!f.admits(&key_in_group(1), 4), "older epoch, covered key");
        assert!(f.admits(&key_in_group(1), 5), "the fence's own epoch");
        assert!(f.admits(&key_in_group(1), 6), "a newer owner");
        assert!(f.admits(&key_in_group(4), 0), "a key the fence does not cover");
        assert_eq!(f.newest_over(&groups(3..5)), Some(5));
        assert_eq!(f.newest_over(&groups(4..8)), None);
    }

    #[test]
    fn a_newer_fence_over_the_same_keys_replaces_the_older() {
        let mut f = Fences::new();
        f.observe(&Fence { key: KeyId([0; 32]), groups: groups(0..4), epoch: 1 });
        f.observe(&Fence { key: KeyId([0; 32]), groups: groups(4..8), epoch: 2 });
        f.observe(&Fence { key: KeyId([0; 32]), groups: Ownership::All, epoch: 3 });
        assert_eq!(f.active(), &[(Ownership::All, 3)]);
        // An older fence met later changes nothing it does not already cover.
        f.observe(&Fence { key: KeyId([0; 32]), groups: groups(0..2), epoch: 2 });
        assert_eq!(f.active(), &[(Ownership::All, 3)]);
    }

    #[test]
    fn marks_before_the_start_apply_and_later_ones_are_left_to_the_read() {
        let marks = [
            FenceMark { groups: groups(0..4), epoch: 2, offsets: vec![10, 50] },
            FenceMark { groups: groups(4..8), epoch: 3, offsets: vec![30, 5] },
        ];
        let p0 = Fences::from_marks(&marks, 0, 20);
        assert_eq!(p0.active(), &[(groups(0..4), 2)]);
        let p1 = Fences::from_marks(&marks, 1, 20);
        assert_eq!(p1.active(), &[(groups(4..8), 3)]);
        assert!(Fences::from_marks(&marks, 2, 100).is_empty(), "no offset for the partition");
    }
}
