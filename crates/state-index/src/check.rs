//! Whole-index reads for verification, dumps and tests: they scan every key, so the lookup
//! path never calls them.

use crate::Index;
use crate::recorded::Recorded;
use actionstate_core::{EventId, Fingerprint, Position, StateKey};
use std::collections::BTreeMap;

impl Index {
    /// Every indexed state with its position, ordered by state key. Scans the whole index:
    /// for verification, dumps and tests only.
    pub fn dump(&self) -> BTreeMap<StateKey, (Recorded, Position)> {
        let mut out = BTreeMap::new();
        for (key, ki) in self.keys.scan("keys") {
            for (seq, round) in ki.rounds.iter() {
                for e in round.iter() {
                    let sk = *e.state.key();
                    debug_assert_eq!((sk.key, sk.seq), (*key, *seq));
                    out.insert(sk, (e.state.clone(), e.position));
                }
            }
        }
        out
    }

    /// Recomputes every derived structure from the states and compares: counters, input and
    /// producer evidence, live positions, state placement and order. Scans the whole
    /// index: for `verify` and tests. Returns the first violation found.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut states = 0usize;
        let mut rounds = 0usize;
        let mut live: BTreeMap<(u32, u64), u32> = BTreeMap::new();
        for (key, ki) in self.keys.scan("keys") {
            if ki.rounds.is_empty() {
                return Err(format!("key {key} has no rounds but is indexed"));
            }
            for (seq, round) in ki.rounds.iter() {
                rounds += 1;
                if round.is_empty() {
                    return Err(format!("round {seq} of key {key} is empty but indexed"));
                }
                let mut inputs: BTreeMap<Fingerprint, u32> = BTreeMap::new();
                let mut produced: Vec<EventId> = Vec::new();
                let mut previous = None;
                for e in round.iter() {
                    states += 1;
                    let s = &e.state;
                    let sk = s.key();
                    if sk.key != *key || sk.seq != *seq {
                        return Err(format!("state {sk:?} is filed under key {key} round {seq}"));
                    }
                    if previous.is_some_and(|p| p >= sk.local()) {
                        return Err(format!("states of key {key} round {seq} are not sorted and unique"));
                    }
                    previous = Some(sk.local());
                    *inputs.entry(s.input()).or_default() += 1;
                    produced.extend(s.output_ids());
                    *live.entry((e.position.partition, e.position.offset)).or_default() += 1;
                }
                let mut have_inputs = round.input_counts();
                have_inputs.sort();
                if have_inputs != inputs.into_iter().collect::<Vec<_>>() {
                    return Err(format!("input evidence of key {key} round {seq} is inconsistent"));
                }
                produced.sort();
                if round.produced_ids() != produced {
                    return Err(format!("producer evidence of key {key} round {seq} is inconsistent"));
                }
            }
        }
        for pin in self.incarnations.pins() {
            *live.entry((pin.partition, pin.offset)).or_default() += 1;
        }
        let mut have_live: BTreeMap<(u32, u64), u32> = BTreeMap::new();
        for (p, o, n) in self.live.scan() {
            have_live.insert((p, o), n);
        }
        if have_live != live {
            return Err("live positions are inconsistent with the indexed states".into());
        }
        if states != self.states || rounds != self.rounds {
            return Err(format!(
                "counters say {} states in {} rounds, index holds {states} in {rounds}",
                self.states, self.rounds
            ));
        }
        Ok(())
    }
}
