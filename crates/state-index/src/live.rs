//! Where the indexed states live in the log: per partition, the offsets of their records, with
//! counts, so that a covering marker is the oldest live offset of each partition.

use crate::maps::{check_scan, visit};
use std::collections::VecDeque;

/// Per partition (partitions are the small dense numbers `0..n` of a log), a sorted deque of
/// `(offset, count)`.
///
/// Records reach the index in log order (a rebuild) or nearly so (concurrent puts), so adding
/// an offset appends it or inserts it close to the end. A removal zeroes a count in place;
/// zeroed entries are dropped at once from either end — the front is therefore always live and
/// is the partition's oldest offset — and from the middle when they outnumber the live ones,
/// which costs `O(1)` amortized per removal. A B-tree entry per record, which this replaces,
/// cost a rebuild a tree descent and a node write per replayed record.
#[derive(Clone, Debug, Default)]
pub(crate) struct Live {
    partitions: Vec<Offsets>,
}

#[derive(Clone, Debug, Default)]
struct Offsets {
    /// Sorted by offset, unique; the first and last entries have a non-zero count.
    entries: VecDeque<(u64, u32)>,
    /// Entries whose count is zero (all in the middle).
    zeroed: usize,
}

/// Zeroed entries tolerated in the middle of a partition before they are compacted, as long
/// as they do not outnumber the live ones.
const ZEROED_SLACK: usize = 64;

impl Live {
    /// Records one more state living at `offset` of `partition`.
    pub(crate) fn add(&mut self, partition: u32, offset: u64) {
        self.offsets_mut(partition).add(offset, 1);
    }

    /// Records that one state living at `offset` of `partition` is gone.
    pub(crate) fn remove(&mut self, partition: u32, offset: u64) {
        if let Some(o) = self.partitions.get_mut(partition as usize) {
            o.remove(offset);
        }
    }

    /// The oldest offset of `partition` a state lives at.
    pub(crate) fn oldest(&self, partition: u32) -> Option<u64> {
        self.partitions.get(partition as usize).and_then(|o| o.entries.front()).map(|e| e.0)
    }

    /// Adds every position of `other` (a rebuild joins the indexes of its partitions, which
    /// usually hold disjoint partitions: those are moved whole).
    pub(crate) fn absorb(&mut self, other: Live) {
        for (partition, theirs) in (0u32..).zip(other.partitions) {
            if theirs.entries.is_empty() {
                continue;
            }
            let mine = self.offsets_mut(partition);
            if mine.entries.is_empty() {
                visit(1);
                *mine = theirs;
                continue;
            }
            visit(theirs.entries.len());
            for (offset, n) in theirs.entries {
                if n > 0 {
                    mine.add(offset, n);
                }
            }
        }
    }

    /// Every `(partition, offset, count)` with a non-zero count. Scans everything: for
    /// verification only (guarded under `scan-guard`).
    pub(crate) fn scan(&self) -> impl Iterator<Item = (u32, u64, u32)> + '_ {
        check_scan("live", self.partitions.iter().map(|o| o.entries.len()).sum());
        (0u32..)
            .zip(&self.partitions)
            .flat_map(|(p, o)| o.entries.iter().filter(|e| e.1 > 0).map(move |e| (p, e.0, e.1)))
    }

    fn offsets_mut(&mut self, partition: u32) -> &mut Offsets {
        let i = partition as usize;
        if self.partitions.len() <= i {
            self.partitions.resize_with(i + 1, Offsets::default);
        }
        &mut self.partitions[i]
    }
}

impl Offsets {
    fn add(&mut self, offset: u64, n: u32) {
        match self.entries.back() {
            Some(&(last, _)) if last >= offset => match self.entries.binary_search_by_key(&offset, |e| e.0) {
                Ok(i) => {
                    let e = &mut self.entries[i];
                    if e.1 == 0 {
                        self.zeroed -= 1;
                    }
                    e.1 += n;
                }
                Err(i) => self.entries.insert(i, (offset, n)),
            },
            _ => self.entries.push_back((offset, n)),
        }
    }

    fn remove(&mut self, offset: u64) {
        let Ok(i) = self.entries.binary_search_by_key(&offset, |e| e.0) else {
            return;
        };
        let e = &mut self.entries[i];
        if e.1 == 0 {
            return;
        }
        e.1 -= 1;
        if e.1 > 0 {
            return;
        }
        self.zeroed += 1;
        while self.entries.front().is_some_and(|e| e.1 == 0) {
            self.entries.pop_front();
            self.zeroed -= 1;
        }
        while self.entries.back().is_some_and(|e| e.1 == 0) {
            self.entries.pop_back();
            self.zeroed -= 1;
        }
        if self.zeroed > ZEROED_SLACK && self.zeroed * 2 > self.entries.len() {
            self.entries.retain(|e| e.1 > 0);
            self.zeroed = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Adds and removes in a scrambled order, checked step by step against a B-tree of counts.
    #[test]
    fn live_matches_a_map_of_counts() {
        let mut live = Live::default();
        let mut model: BTreeMap<(u32, u64), u32> = BTreeMap::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut added: Vec<(u32, u64)> = Vec::new();
        for step in 0..20_000u64 {
            let r = next();
            if r % 3 != 0 || added.is_empty() {
                // Mostly near the end of the partition, sometimes anywhere, sometimes again.
                let p = (r >> 8) as u32 % 3;
                let offset = match r % 7 {
                    0 => (r >> 16) % (step + 1),
                    1 => added.last().map_or(0, |a| a.1),
                    _ => step + (r >> 16) % 4,
                };
                live.add(p, offset);
                *model.entry((p, offset)).or_default() += 1;
                added.push((p, offset));
            } else {
                let (p, offset) = added.swap_remove((r >> 8) as usize % added.len());
                live.remove(p, offset);
                let n = model.get_mut(&(p, offset)).expect("added before");
                *n -= 1;
                if *n == 0 {
                    model.remove(&(p, offset));
                }
            }
            for p in 0..3 {
                let oldest = model.range((p, 0)..(p + 1, 0)).next().map(|((_, o), _)| *o);
                assert_eq!(live.oldest(p), oldest, "oldest of partition {p} at step {step}");
            }
        }
        let _scope = crate::maps::allow_scans();
        let have: BTreeMap<(u32, u64), u32> = live.scan().map(|(p, o, n)| ((p, o), n)).collect();
        assert_eq!(have, model);
        for o in &live.partitions {
            assert!(o.zeroed <= ZEROED_SLACK.max(o.entries.len() / 2) + 1, "zeroed entries are compacted");
        }
    }

    #[test]
    fn absorb_moves_disjoint_partitions_and_merges_shared_ones() {
        let (mut a, mut b) = (Live::default(), Live::default());
        a.add(0, 5);
        a.add(2, 9);
        b.add(1, 3);
        b.add(2, 4);
        b.add(2, 9);
        a.absorb(b);
        assert_eq!((a.oldest(0), a.oldest(1), a.oldest(2)), (Some(5), Some(3), Some(4)));
        a.remove(2, 4);
        a.remove(2, 9);
        assert_eq!(a.oldest(2), Some(9), "offset 9 was added twice");
        a.remove(2, 9);
        assert_eq!(a.oldest(2), None);
    }
}
