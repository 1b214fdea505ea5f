//! How many times an invalidation removed each state whose round is still live: a state's
//! incarnation, which goes into the idempotency keys of its durable calls, so that a history
//! that was invalidated (a divergence, an operator's repair) makes its calls under new keys
//! (docs/design.md, section 5.2).
//!
//! The count must come out the same from every restore, so every covering marker must replay
//! the removals that made it: each entry pins the position of the record the first removal
//! removed (the index holds it among the live positions), from which a replay upserts that
//! state and removes it again, once per invalidation. An entry lives as long as its round:
//! pruning the round (it completed) drops it and its pin.

use actionstate_core::{KeyId, Position, StateKey};
use std::collections::{BTreeMap, HashMap};

/// The removal counts of states of live rounds, per key.
#[derive(Clone, Debug, Default)]
pub(crate) struct Incarnations {
    by_key: HashMap<KeyId, BTreeMap<StateKey, Removals>>,
    /// Entries in `by_key`, kept so that counting them scans nothing.
    states: usize,
}

#[derive(Clone, Copy, Debug)]
struct Removals {
    count: u32,
    /// Where the record the first removal removed lived.
    pin: Position,
}

impl Incarnations {
    /// An invalidation removed `sk`, whose record lived `at`. Returns the position to pin when
    /// this is the state's first removal.
    pub(crate) fn removed(&mut self, sk: StateKey, at: Position) -> Option<Position> {
        let states = self.by_key.entry(sk.key).or_default();
        match states.get_mut(&sk) {
            Some(r) => {
                r.count = r.count.saturating_add(1);
                None
            }
            None => {
                states.insert(sk, Removals { count: 1, pin: at });
                self.states += 1;
                Some(at)
            }
        }
    }

    /// How many times an invalidation removed `sk` since its round began.
    pub(crate) fn of(&self, sk: &StateKey) -> u32 {
        if self.by_key.is_empty() {
            return 0;
        }
        self.by_key.get(&sk.key).and_then(|s| s.get(sk)).map_or(0, |r| r.count)
    }

    /// Drops the entries of `key`'s rounds up to `upto` (pruned: they completed); returns
    /// their pins.
    pub(crate) fn prune(&mut self, key: &KeyId, upto: u64) -> Vec<Position> {
        let Some(states) = self.by_key.get_mut(key) else { return Vec::new() };
        let mut pins = Vec::new();
        states.retain(|sk, r| {
            let keep = sk.seq > upto;
            if !keep {
                pins.push(r.pin);
            }
            keep
        });
        if states.is_empty() {
            self.by_key.remove(key);
        }
        self.states -= pins.len();
        pins
    }

    /// Moves `other`'s entries in (the keys of two partitions are disjoint).
    pub(crate) fn absorb(&mut self, other: Incarnations) {
        self.states += other.states;
        if self.by_key.is_empty() {
            self.by_key = other.by_key;
        } else {
            self.by_key.extend(other.by_key);
        }
    }

    /// Every pinned position (for the invariant check).
    pub(crate) fn pins(&self) -> impl Iterator<Item = Position> + '_ {
        self.by_key.values().flat_map(|s| s.values().map(|r| r.pin))
    }

    /// States with a removal count.
    pub(crate) fn len(&self) -> usize {
        self.states
    }
}
