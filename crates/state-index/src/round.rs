//! One round: the states of one (key, seq) and their evidence, kept compact.
//!
//! A round usually holds a handful of states, so it is a few sorted vectors rather than hash
//! maps: a 1-state round costs tens of bytes instead of hundreds. States are sorted by
//! [`LocalKey`], whose first field is the occurrence; the children of a producer's output
//! `i` all share the occurrence of `Trigger::Emitted { producer, index: i }`, so they form one
//! contiguous run found by binary search — no child links to store or keep consistent.

use crate::Recorded;
use crate::maps::visit;
use actionstate_core::{EventId, Fingerprint, LocalKey, OccurrenceId, Position, Trigger};

/// An indexed state: the record (immutable evidence) and where it lives in the log.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub(crate) state: Recorded,
    pub(crate) position: Position,
    pub(crate) bytes: u32,
}

impl Entry {
    fn local(&self) -> LocalKey {
        self.state.key().local()
    }
}

/// Input fingerprints of the round's states with counts. Almost always one fingerprint.
#[derive(Clone, Debug, Default)]
enum Inputs {
    #[default]
    Empty,
    One(Fingerprint, u32),
    Many(Vec<(Fingerprint, u32)>),
}

impl Inputs {
    fn add(&mut self, fp: Fingerprint) {
        match self {
            Inputs::Empty => *self = Inputs::One(fp, 1),
            Inputs::One(f, n) if *f == fp => *n += 1,
            Inputs::One(f, n) => *self = Inputs::Many(vec![(*f, *n), (fp, 1)]),
            Inputs::Many(v) => match v.iter_mut().find(|(f, _)| *f == fp) {
                Some((_, n)) => *n += 1,
                None => v.push((fp, 1)),
            },
        }
    }

    fn remove(&mut self, fp: Fingerprint) {
        match self {
            Inputs::One(f, n) if *f == fp => {
                *n -= 1;
                if *n == 0 {
                    *self = Inputs::Empty;
                }
            }
            Inputs::Many(v) => {
                if let Some(i) = v.iter().position(|(f, _)| *f == fp) {
                    v[i].1 -= 1;
                    if v[i].1 == 0 {
                        v.swap_remove(i);
                    }
                }
                if let [(f, n)] = v.as_slice() {
                    *self = Inputs::One(*f, *n);
                }
            }
            _ => {}
        }
    }

    fn as_vec(&self) -> Vec<(Fingerprint, u32)> {
        match self {
            Inputs::Empty => Vec::new(),
            Inputs::One(f, n) => vec![(*f, *n)],
            Inputs::Many(v) => v.clone(),
        }
    }

    fn any_other_than(&self, fp: &Fingerprint) -> bool {
        match self {
            Inputs::Empty => false,
            Inputs::One(f, _) => f != fp,
            Inputs::Many(v) => v.iter().any(|(f, _)| f != fp),
        }
    }
}

/// Grows a vector by a quarter (at least one) when full: rounds are small and many, so the
/// default doubling would waste most of the memory of the index.
fn reserve_compact<T>(v: &mut Vec<T>) {
    if v.len() == v.capacity() {
        v.reserve_exact((v.len() / 4).max(1));
    }
}

/// A short sequence that holds a single element inline. Most rounds hold one state with one
/// output, and allocating a vector for each of those was two of the six allocations a rebuild
/// made per replayed record.
#[derive(Clone, Debug, Default)]
enum Few<T> {
    #[default]
    Zero,
    One(T),
    Many(Vec<T>),
}

impl<T> Few<T> {
    fn as_slice(&self) -> &[T] {
        match self {
            Few::Zero => &[],
            Few::One(t) => std::slice::from_ref(t),
            Few::Many(v) => v,
        }
    }

    fn as_mut_slice(&mut self) -> &mut [T] {
        match self {
            Few::Zero => &mut [],
            Few::One(t) => std::slice::from_mut(t),
            Few::Many(v) => v,
        }
    }

    /// Inserts `t` at `i` (at most the length), shifting what follows.
    fn insert(&mut self, i: usize, t: T) {
        *self = match std::mem::take(self) {
            Few::Zero => Few::One(t),
            Few::One(a) => Few::Many(if i == 0 { vec![t, a] } else { vec![a, t] }),
            Few::Many(mut v) => {
                reserve_compact(&mut v);
                v.insert(i.min(v.len()), t);
                Few::Many(v)
            }
        };
    }

    /// Removes the element at `i`, if there is one.
    fn remove(&mut self, i: usize) -> Option<T> {
        match std::mem::take(self) {
            Few::One(a) if i == 0 => Some(a),
            Few::Many(mut v) if i < v.len() => {
                let t = v.remove(i);
                if !v.is_empty() {
                    *self = Few::Many(v);
                }
                Some(t)
            }
            other => {
                *self = other;
                None
            }
        }
    }

    fn into_vec(self) -> Vec<T> {
        match self {
            Few::Zero => Vec::new(),
            Few::One(t) => vec![t],
            Few::Many(v) => v,
        }
    }
}

impl<T> std::ops::Deref for Few<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T> std::ops::DerefMut for Few<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.as_mut_slice()
    }
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Round {
    /// Sorted by local key.
    states: Few<Entry>,
    /// The round's evidence, kept while it holds two states or more. A round of one state —
    /// most rounds — reads its evidence from that state, which halves the memory a replayed
    /// record costs the round (64 bytes instead of 128).
    evidence: Option<Box<Evidence>>,
    /// Whether the round may hold a child that its producer's current record does not reach
    /// through its outputs (the producer was tombstoned alone, or the child was indexed
    /// before or beyond its producer's outputs). Such a round finds descendants by trigger.
    loose: bool,
}

/// The evidence of a round of several states.
#[derive(Clone, Debug, Default)]
struct Evidence {
    /// Output event ids of completed states: a sorted multiset (the producer evidence).
    produced: Few<EventId>,
    inputs: Inputs,
}

impl Evidence {
    fn add(&mut self, s: &Recorded) {
        self.inputs.add(s.input());
        for out in s.output_ids() {
            let i = self.produced.partition_point(|id| id < &out);
            self.produced.insert(i, out);
        }
    }

    fn remove(&mut self, s: &Recorded) {
        self.inputs.remove(s.input());
        for out in s.output_ids() {
            if let Ok(i) = self.produced.binary_search(&out) {
                self.produced.remove(i);
            }
        }
    }
}

impl Round {
    fn find(&self, local: &LocalKey) -> Result<usize, usize> {
        self.states.binary_search_by(|e| e.local().cmp(local))
    }

    pub(crate) fn get(&self, local: &LocalKey) -> Option<&Entry> {
        self.find(local).ok().map(|i| &self.states[i])
    }

    pub(crate) fn len(&self) -> usize {
        self.states.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.states.is_empty()
    }

    /// The only state, when the round holds one and so keeps no evidence of its own.
    fn single(&self) -> Option<&Recorded> {
        match &self.evidence {
            Some(_) => None,
            None => self.states.first().map(|e| &e.state),
        }
    }

    /// Whether a completed state of this round emitted the event `id`.
    pub(crate) fn produced(&self, id: &EventId) -> bool {
        match &self.evidence {
            Some(ev) => ev.produced.binary_search(id).is_ok(),
            None => self.single().is_some_and(|s| s.output_ids().any(|o| o == *id)),
        }
    }

    /// The recorded input fingerprints, if any differs from `fp`.
    pub(crate) fn other_inputs(&self, fp: &Fingerprint) -> Option<Vec<Fingerprint>> {
        match &self.evidence {
            Some(ev) => ev.inputs.any_other_than(fp).then(|| ev.inputs.as_vec().into_iter().map(|(f, _)| f).collect()),
            None => self.single().map(Recorded::input).filter(|input| input != fp).map(|input| vec![input]),
        }
    }

    /// Input fingerprints with counts (for invariant checks).
    pub(crate) fn input_counts(&self) -> Vec<(Fingerprint, u32)> {
        match &self.evidence {
            Some(ev) => ev.inputs.as_vec(),
            None => self.single().map(|s| vec![(s.input(), 1)]).unwrap_or_default(),
        }
    }

    /// The producer-evidence multiset, sorted (for invariant checks).
    pub(crate) fn produced_ids(&self) -> Vec<EventId> {
        match &self.evidence {
            Some(ev) => ev.produced.to_vec(),
            None => {
                let mut ids: Vec<EventId> = self.single().map(|s| s.output_ids().collect()).unwrap_or_default();
                ids.sort();
                ids
            }
        }
    }

    /// Inserts or replaces the state of `entry`, returning the replaced entry.
    pub(crate) fn insert(&mut self, entry: Entry) -> Option<Entry> {
        if let Trigger::Emitted { producer, index } = *entry.state.trigger()
            && producer.key == entry.state.key().key
            && producer.seq == entry.state.key().seq
            && self.get(&producer.local()).is_none_or(|p| p.state.output_count() <= index as usize)
        {
            self.loose = true;
        }
        match self.find(&entry.local()) {
            Ok(i) => {
                let old = std::mem::replace(&mut self.states[i], entry);
                if let Some(ev) = &mut self.evidence {
                    ev.add(&self.states[i].state);
                    ev.remove(&old.state);
                }
                Some(old)
            }
            Err(i) => {
                self.states.insert(i, entry);
                match &mut self.evidence {
                    Some(ev) => ev.add(&self.states[i].state),
                    // The second state: from now on the round keeps its evidence.
                    None if self.states.len() > 1 => {
                        let mut ev = Evidence::default();
                        for e in self.states.iter() {
                            ev.add(&e.state);
                        }
                        self.evidence = Some(Box::new(ev));
                    }
                    None => {}
                }
                None
            }
        }
    }

    /// Removes one state and its evidence.
    pub(crate) fn take(&mut self, local: &LocalKey) -> Option<Entry> {
        let i = self.find(local).ok()?;
        let old = self.states.remove(i)?;
        if self.states.len() <= 1 {
            // One state left (or none): the round reads its evidence from it again.
            self.evidence = None;
        } else if let Some(ev) = &mut self.evidence {
            ev.remove(&old.state);
        }
        Some(old)
    }

    /// Notes that a state was removed without its descendants (a tombstone): its children
    /// stay, unreachable from any producer record.
    pub(crate) fn orphaned_children(&mut self) {
        self.loose = true;
    }

    /// Removes every state; visits exactly what it removes.
    pub(crate) fn drain(&mut self) -> Vec<Entry> {
        visit(self.states.len());
        self.evidence = None;
        std::mem::take(&mut self.states).into_vec()
    }

    /// Iterates the round's states (bounded by the round; visits are counted).
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Entry> {
        visit(self.states.len());
        self.states.iter()
    }

    /// Every state reachable from the completed `producer` through emitted triggers, not
    /// including the producer itself. Visits what it returns plus one probe per output.
    pub(crate) fn descendants(&self, producer: &Recorded) -> Vec<LocalKey> {
        if self.loose {
            return self.descendants_by_trigger(*producer.key());
        }
        let mut out: Vec<LocalKey> = Vec::new();
        let mut frontier: Vec<(actionstate_core::StateKey, usize)> = vec![(*producer.key(), producer.output_count())];
        while let Some((p, outputs)) = frontier.pop() {
            for index in 0..outputs {
                let occurrence = Trigger::Emitted { producer: p, index: index as u32 }.occurrence();
                for e in self.with_occurrence(occurrence) {
                    out.push(e.local());
                    frontier.push((*e.state.key(), e.state.output_count()));
                }
                // Each state has one producer, so the walk is a tree within the round; the
                // bound only protects against a corrupted round.
                if out.len() > self.states.len() {
                    return out;
                }
            }
        }
        out
    }

    /// Every state reachable from `producer` through the producers named by triggers,
    /// whatever outputs the producers' records hold now. Visits the round once per state
    /// found (plus once): only for loose rounds.
    fn descendants_by_trigger(&self, producer: actionstate_core::StateKey) -> Vec<LocalKey> {
        let mut out: Vec<LocalKey> = Vec::new();
        let mut frontier = vec![producer];
        while let Some(p) = frontier.pop() {
            for e in self.iter() {
                if e.state.trigger().producer() == Some(&p) && !out.contains(&e.local()) {
                    out.push(e.local());
                    frontier.push(*e.state.key());
                }
            }
        }
        out
    }

    /// The contiguous run of states with this occurrence.
    fn with_occurrence(&self, occurrence: OccurrenceId) -> &[Entry] {
        let start = self.states.partition_point(|e| e.state.key().occurrence < occurrence);
        let len = self.states[start..].partition_point(|e| e.state.key().occurrence == occurrence);
        visit(len + 1);
        &self.states[start..start + len]
    }
}

#[cfg(test)]
mod tests {
    use super::{Few, Round};

    /// A replayed record costs its round one allocation of this size (mimalloc and glibc both
    /// serve 64 bytes from a 64-byte class); the evidence of larger rounds lives behind a box.
    #[test]
    fn a_round_is_64_bytes() {
        assert!(std::mem::size_of::<Round>() <= 64, "Round is {} bytes", std::mem::size_of::<Round>());
    }

    #[test]
    fn few_keeps_order_through_inserts_and_removes() {
        let mut few: Few<u32> = Few::default();
        assert!(few.is_empty());
        assert_eq!(few.remove(0), None);
        few.insert(0, 5);
        assert!(matches!(few, Few::One(5)), "one element stays inline");
        few.insert(0, 3);
        few.insert(2, 9);
        few.insert(1, 4);
        assert_eq!(&*few, &[3, 4, 5, 9]);
        few[2] = 6;
        assert_eq!(few.remove(4), None);
        assert_eq!(&*few, &[3, 4, 6, 9], "a miss changes nothing");
        assert_eq!(few.remove(1), Some(4));
        assert_eq!(few.remove(2), Some(9));
        assert_eq!(few.remove(0), Some(3));
        assert_eq!(few.remove(0), Some(6));
        assert!(matches!(few, Few::Zero), "emptied");
        few.insert(0, 1);
        assert_eq!(few.remove(0), Some(1));
        assert!(matches!(few, Few::Zero));
        few.insert(0, 2);
        few.insert(1, 7);
        assert_eq!(few.into_vec(), vec![2, 7]);
    }
}
