//! Retention when stores share a log (docs/design.md, section 6): the reclaim point from the
//! checkpoints and fences the log itself holds, read newest first.
//!
//! For every key group, its current owner is the one of the newest epoch that fenced it or
//! checkpointed it; the group's retained checkpoints are its last `keep` valid commits: its
//! current owner's, and, while the current owner has fewer than `keep`, those of the owners
//! before it (the runtime's retained checkpoints span failovers and rescales, as a store owning
//! every key keeps its `n` before its first restore). A commit a fence voids (its owner was
//! replaced while writing it) does not count. A group whose current owner has not checkpointed
//! yet (its fence comes before any commit of its epoch) waits, and while any group waits
//! nothing is reclaimed. Otherwise the reclaim point of a partition is the smallest offset that
//! the markers of the retained checkpoints name there.
//!
//! The landmarks come in their compact form ([`Mark`]); whether a fence voids a commit is the
//! one rule of the checkpoint partition, [`CommitAt::voided_by`], which a restore applies too.

use crate::checkpoint::partition::{CommitAt, FenceAt, Mark};
use actionstate_core::Ownership;
use std::ops::Range;

/// What the scan decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Reclaim below these offsets, per partition.
    Reclaim(Vec<u64>),
    /// These key groups (ranges among the scan's group count) wait for a first checkpoint of
    /// their current owner.
    Waiting(Vec<Range<u16>>),
    /// A record divides the keys among another number of key groups: the owners' needs cannot
    /// be compared, and nothing is reclaimed.
    Mixed(Ownership),
}

#[derive(Clone, Debug, Default)]
struct Group {
    /// The epoch of the group's current owner, once a commit of it is kept.
    epoch: Option<u64>,
    /// Whether the scan has read back past the current owner's fence: the commits met from
    /// there on are its former owners', and count while the group has fewer than `keep`.
    passed: bool,
    /// The commits kept, newest first, as indexes into the scan's commits.
    commits: Vec<usize>,
    state: State,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum State {
    #[default]
    Open,
    Done,
    Waiting,
}

/// The scan's state: per key group, what it found so far.
#[derive(Debug)]
pub(crate) struct OwnersScan {
    max_groups: u16,
    keep: usize,
    groups: Vec<Group>,
    open: usize,
    /// The commits some group keeps (or kept), each once however many groups it holds.
    commits: Vec<CommitAt>,
    mixed: Option<Ownership>,
}

impl OwnersScan {
    /// A scan of owners of groups among `max_groups` that keep their last `keep` checkpoints.
    pub(crate) fn new(max_groups: u16, keep: usize) -> Self {
        let n = usize::from(max_groups.max(1));
        OwnersScan {
            max_groups: max_groups.max(1),
            keep: keep.max(1),
            groups: vec![Group::default(); n],
            open: n,
            commits: Vec::new(),
            mixed: None,
        }
    }

    /// Whether every group is decided once the scan has read back to offset `lo`: each is
    /// settled, and the window of every commit kept (where a fence that voids it would lie) is
    /// read.
    pub(crate) fn done(&self, lo: u64) -> bool {
        self.mixed.is_some()
            || (self.open == 0 && self.groups.iter().flat_map(|g| &g.commits).all(|&c| self.commits[c].from >= lo))
    }

    fn range(&mut self, owner: &Ownership) -> Option<Range<u16>> {
        match owner {
            Ownership::All => Some(0..self.max_groups),
            Ownership::Groups { max_groups, owned } if *max_groups == self.max_groups => {
                Some(owned.start.min(self.max_groups)..owned.end.min(self.max_groups))
            }
            Ownership::Groups { .. } => {
                self.mixed.get_or_insert_with(|| owner.clone());
                None
            }
        }
    }

    fn set(&mut self, g: usize, state: State) {
        let was = self.groups[g].state;
        if was == state {
            return;
        }
        match (was, state) {
            (State::Open, _) => self.open -= 1,
            (_, State::Open) => self.open += 1,
            _ => {}
        }
        self.groups[g].state = state;
    }

    /// A landmark met going backwards.
    pub(crate) fn meet(&mut self, mark: &Mark) {
        match mark {
            Mark::Fence(f) => self.fence(f),
            Mark::Commit(c) => self.commit(c),
        }
    }

    /// A fence, met going backwards. A kept commit it voids ([`CommitAt::voided_by`]) no longer
    /// counts. Every commit of the fence's owner lies after it, so a group that keeps none of
    /// its epoch or a newer one waits, and one that keeps commits of its epoch has all of them:
    /// it is done if they are `keep`, and takes its former owners' commits otherwise.
    pub(crate) fn fence(&mut self, fence: &FenceAt) {
        let epoch = fence.epoch;
        let Some(range) = self.range(&fence.groups) else { return };
        for g in range.map(usize::from) {
            let group = &mut self.groups[g];
            if group.state == State::Waiting {
                continue;
            }
            let kept = group.epoch;
            let before = group.commits.len();
            let commits = &self.commits;
            group.commits.retain(|&c| !commits[c].voided_by(fence));
            if group.commits.len() < before {
                self.set(g, State::Open);
            }
            if self.groups[g].state != State::Open {
                continue;
            }
            match kept {
                Some(kept) if kept >= epoch => {
                    self.groups[g].passed = true;
                    if self.groups[g].commits.len() >= self.keep {
                        self.set(g, State::Done);
                    }
                }
                // Its owner, or a newer one, never checkpointed: commits of an older epoch
                // kept so far are a replaced owner's.
                _ => {
                    self.groups[g].commits.clear();
                    self.groups[g].epoch = None;
                    self.groups[g].passed = false;
                    self.set(g, State::Waiting);
                }
            }
        }
    }

    /// A commit (or a completed checkpoint its runtime keeps), met going backwards.
    pub(crate) fn commit(&mut self, commit: &CommitAt) {
        let epoch = commit.epoch;
        let Some(range) = self.range(&commit.owner) else { return };
        let index = self.commits.len();
        let mut used = false;
        for g in range.map(usize::from) {
            let keep = self.keep;
            let group = &mut self.groups[g];
            // A group that waits, or keeps all it needs of an owner this one does not
            // replace, takes nothing more. (Commits of an older epoch met before the current
            // owner's fence are a replaced owner's late ones; met past it, a former owner's.)
            let newer = group.epoch.is_some_and(|kept| epoch > kept);
            if group.state == State::Waiting || (group.state == State::Done && !newer) {
                continue;
            }
            match group.epoch {
                Some(kept) if kept > epoch && !group.passed => continue,
                Some(kept) if kept >= epoch => {}
                // A newer owner's commit before a replaced owner's late one: the newer counts.
                _ => {
                    group.commits.clear();
                    group.epoch = Some(epoch);
                    group.passed = false;
                }
            }
            group.commits.push(index);
            used = true;
            let full = group.commits.len() >= keep;
            self.set(g, if full { State::Done } else { State::Open });
        }
        if used {
            self.commits.push(commit.clone());
        }
    }

    /// The decision, once [`done`](Self::done) or the earliest record was read: a group still
    /// open with commits has all that are left of its owner's; one without any waits.
    pub(crate) fn finish(self) -> Outcome {
        if let Some(owner) = self.mixed {
            return Outcome::Mixed(owner);
        }
        let mut waiting: Vec<Range<u16>> = Vec::new();
        let mut used = vec![false; self.commits.len()];
        for (g, group) in (0u16..).zip(&self.groups) {
            if group.state == State::Waiting || group.commits.len() < self.keep {
                match waiting.last_mut() {
                    Some(r) if r.end == g => r.end = g + 1,
                    _ => waiting.push(g..g + 1),
                }
                continue;
            }
            for &c in &group.commits {
                used[c] = true;
            }
        }
        if !waiting.is_empty() {
            return Outcome::Waiting(waiting);
        }
        let mut point: Option<Vec<u64>> = None;
        for (offsets, _) in self.commits.iter().map(|c| &c.offsets).zip(&used).filter(|(_, u)| **u) {
            match &mut point {
                None => point = Some(offsets.clone()),
                Some(p) => p.iter_mut().zip(offsets).for_each(|(p, o)| *p = (*p).min(*o)),
            }
        }
        point.map_or_else(|| Outcome::Waiting(std::iter::once(0..self.max_groups).collect()), Outcome::Reclaim)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups(owned: Range<u16>) -> Ownership {
        Ownership::Groups { max_groups: 4, owned }
    }

    fn commit(offset: u64, from: u64, owner: &Ownership, epoch: u64, offsets: &[u64]) -> CommitAt {
        CommitAt { offset, owner: owner.clone(), epoch, id: 0, from, offsets: offsets.to_vec() }
    }

    fn fence(offset: u64, groups: &Ownership, epoch: u64) -> FenceAt {
        FenceAt { offset, groups: groups.clone(), epoch }
    }

    #[test]
    fn the_point_is_the_smallest_offset_of_each_owners_last_checkpoints() {
        let mut scan = OwnersScan::new(4, 2);
        scan.commit(&commit(100, 99, &groups(0..2), 5, &[30, 40]));
        scan.commit(&commit(98, 97, &groups(2..4), 6, &[35, 20]));
        scan.commit(&commit(96, 95, &groups(0..2), 5, &[25, 38]));
        assert!(!scan.done(95), "groups 2..4 have one of two");
        scan.commit(&commit(94, 93, &groups(2..4), 6, &[33, 18]));
        assert!(!scan.done(94), "the last commit's window is not read yet");
        assert!(scan.done(93));
        assert_eq!(scan.finish(), Outcome::Reclaim(vec![25, 18]));
    }

    #[test]
    fn an_owner_that_has_not_checkpointed_holds_reclaim_back() {
        let mut scan = OwnersScan::new(4, 1);
        scan.commit(&commit(50, 49, &groups(0..2), 5, &[30, 40]));
        scan.fence(&fence(48, &groups(2..4), 7));
        assert!(scan.done(48));
        assert_eq!(scan.finish(), Outcome::Waiting(std::iter::once(2..4).collect()));
    }

    #[test]
    fn a_replaced_owners_late_checkpoint_does_not_count() {
        // Newest first: the zombie's commit (epoch 5, snapshot at 80), then the new owner's
        // fence (epoch 9) inside its window.
        let mut scan = OwnersScan::new(4, 1);
        scan.commit(&commit(90, 80, &Ownership::All, 5, &[90, 90]));
        assert!(!scan.done(85));
        scan.fence(&fence(85, &Ownership::All, 9));
        assert_eq!(scan.finish(), Outcome::Waiting(std::iter::once(0..4).collect()));
        // Once the new owner checkpointed, its commit counts and the zombie's does not.
        let mut scan = OwnersScan::new(4, 1);
        scan.commit(&commit(90, 80, &Ownership::All, 5, &[90, 90]));
        scan.commit(&commit(88, 87, &Ownership::All, 9, &[10, 12]));
        scan.fence(&fence(85, &Ownership::All, 9));
        assert!(scan.done(80));
        assert_eq!(scan.finish(), Outcome::Reclaim(vec![10, 12]));
    }

    #[test]
    fn after_a_rescale_the_former_owners_checkpoints_count_until_the_new_owner_has_its_own() {
        // Keeping three: the new owner has one, so the former owners' last two count too.
        let mut scan = OwnersScan::new(4, 3);
        scan.commit(&commit(60, 59, &groups(0..4), 8, &[50, 50]));
        scan.fence(&fence(40, &groups(0..4), 8));
        assert!(!scan.done(40), "the new owner has one of three");
        scan.commit(&commit(30, 29, &groups(0..2), 3, &[20, 21]));
        scan.commit(&commit(28, 27, &groups(2..4), 4, &[22, 19]));
        scan.commit(&commit(26, 25, &groups(0..2), 3, &[10, 11]));
        scan.commit(&commit(24, 23, &groups(2..4), 4, &[12, 9]));
        assert!(scan.done(23));
        scan.commit(&commit(20, 19, &groups(0..2), 3, &[1, 1]));
        assert_eq!(scan.finish(), Outcome::Reclaim(vec![10, 9]), "a fourth checkpoint back does not count");
        // Once the new owner has three of its own, the former owners' no longer count.
        let mut scan = OwnersScan::new(4, 3);
        for (at, m) in [(70, 60), (65, 55), (60, 50)] {
            scan.commit(&commit(at, at - 1, &groups(0..4), 8, &[m, m]));
        }
        scan.fence(&fence(40, &groups(0..4), 8));
        assert!(scan.done(40), "the new owner's commits are all after its fence");
        scan.commit(&commit(30, 29, &groups(0..2), 3, &[1, 1]));
        assert_eq!(scan.finish(), Outcome::Reclaim(vec![50, 50]));
    }

    #[test]
    fn a_group_no_record_names_waits_and_other_group_counts_stop_reclaim() {
        let mut scan = OwnersScan::new(4, 1);
        scan.commit(&commit(10, 9, &groups(0..3), 5, &[30, 40]));
        assert_eq!(scan.finish(), Outcome::Waiting(std::iter::once(3..4).collect()));
        let mut scan = OwnersScan::new(4, 1);
        scan.commit(&commit(10, 9, &Ownership::Groups { max_groups: 8, owned: 0..8 }, 5, &[1, 1]));
        assert!(scan.done(10));
        assert!(matches!(scan.finish(), Outcome::Mixed(_)));
    }
}
