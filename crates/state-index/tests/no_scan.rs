//! No operation scans all keys or all states (docs/design.md, section 4, costs): over an index of
//! more than 3,000 states across 100 keys, every operation visits no more entries than it
//! removes plus the rounds it touches plus a small constant. The `scan-guard` feature counts
//! every entry the index's maps yield, and makes whole-map iteration outside an
//! [`allow_scans`] scope panic.
#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use actionstate_core::{
    ActionState, EventId, InvalidationReason, KeyId, LogRecord, MissReason, Position, Progress, StateKey, Trigger,
};
use actionstate_index::{Decision, Index, allow_scans, visits};
use common::{action, done, emitted, input, key, output, probe};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Once;

const KEYS: usize = 100;
const ROUNDS: u64 = 6;
const PARTITIONS: u32 = 4;
/// States per round: a root with two outputs, two children with one output each, two
/// grandchildren, and a bootstrap-triggered state.
const PER_ROUND: usize = 6;
/// Rounds of one extra key with a long history (one state per round).
const LONG_ROUNDS: u64 = 400;
/// Slack allowed beyond what an operation removes and the rounds it touches.
const SLACK: u64 = 8;

/// The states of one round of one key.
#[derive(Clone, Debug)]
struct RoundStates {
    root: ActionState,
    children: Vec<ActionState>,
    grandchildren: Vec<ActionState>,
    boot: ActionState,
}

impl RoundStates {
    fn all(&self) -> Vec<ActionState> {
        let mut v = vec![self.root.clone()];
        v.extend(self.children.iter().cloned());
        v.extend(self.grandchildren.iter().cloned());
        v.push(self.boot.clone());
        v
    }
}

/// A big index and what is in it.
#[derive(Debug)]
struct Big {
    index: Index,
    rounds: Vec<Vec<RoundStates>>,
    end: Vec<u64>,
}

fn round_states(k: KeyId, seq: u64, ids: &mut u128) -> RoundStates {
    let mut id = || {
        *ids += 1;
        *ids
    };
    let ev = input(id(), 0);
    let fp = ev.fingerprint();
    let root = done(k, seq, &action("plan"), Trigger::Input, &ev, fp, vec![output(id(), 1), output(id(), 1)]);
    let children: Vec<ActionState> = (0..2)
        .map(|i| {
            done(k, seq, &action("tool"), emitted(&root, i), &root.outputs()[i as usize], fp, vec![output(id(), 2)])
        })
        .collect();
    let grandchildren: Vec<ActionState> = children
        .iter()
        .map(|c| done(k, seq, &action("summarize"), emitted(c, 0), &c.outputs()[0], fp, Vec::new()))
        .collect();
    let boot_ev = common::bootstrap(id(), "start");
    let boot = done(k, seq, &action("greet"), Trigger::Bootstrap { label: "start".into() }, &boot_ev, fp, Vec::new());
    RoundStates { root, children, grandchildren, boot }
}

/// Every state of the big index.
const TOTAL: usize = KEYS * ROUNDS as usize * PER_ROUND + LONG_ROUNDS as usize;

fn long_key() -> KeyId {
    key(KEYS + 1)
}

/// The root state of round `seq` of the long key, for the input with attribute `v`.
fn long_state(seq: u64, v: i64) -> ActionState {
    let ev = input(u128::from(seq) + 7_000_000, v);
    done(long_key(), seq, &action("plan"), Trigger::Input, &ev, ev.fingerprint(), Vec::new())
}

fn position(end: &mut [u64], k: &KeyId) -> Position {
    let p = k.partition(PARTITIONS);
    let offset = end[p as usize];
    end[p as usize] += 1;
    Position { partition: p, offset, exact: true }
}

fn big() -> Big {
    let mut index = Index::new();
    let mut end = vec![0u64; PARTITIONS as usize];
    let mut ids = 0u128;
    let mut rounds = Vec::new();
    for ki in 0..KEYS {
        let k = key(ki);
        let mut per_key = Vec::new();
        for seq in 0..ROUNDS {
            let r = round_states(k, seq, &mut ids);
            for s in r.all() {
                let pos = position(&mut end, &k);
                index.apply(LogRecord::Upsert(s), pos, 200);
            }
            per_key.push(r);
        }
        rounds.push(per_key);
    }
    let long = long_key();
    for seq in 0..LONG_ROUNDS {
        let s = long_state(seq, 0);
        let pos = position(&mut end, &long);
        index.apply(LogRecord::Upsert(s), pos, 100);
    }
    let stats = index.stats();
    assert_eq!(stats.keys, KEYS + 1);
    assert_eq!(stats.states, TOTAL);
    assert!(stats.states >= 3_000);
    Big { index, rounds, end }
}

/// Runs `f` and returns what it returned and how many entries the index visited meanwhile.
fn visited<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let before = visits();
    let out = f();
    (out, visits() - before)
}

fn assert_bounded(what: &str, n: u64, removed: usize, rounds_touched: u64) {
    let bound = removed as u64 + rounds_touched + SLACK;
    assert!(n <= bound, "{what} visited {n} entries; bound {bound} (removed {removed}, rounds {rounds_touched})");
}

#[test]
fn lookups_visit_only_what_they_remove() {
    let b = big();
    let r = &b.rounds[40];

    // Hit.
    let mut index = b.index.clone();
    let root = &r[2].root;
    let (found, n) = visited(|| index.lookup(&probe(root, EventId(1), root.input)));
    assert!(matches!(found.decision, Decision::Hit(_)));
    assert_bounded("hit", n, 0, 0);

    // Hit of a child with its recorded trigger event.
    let child = &r[2].children[1];
    let (found, n) = visited(|| index.lookup(&probe(child, child.trigger_event, child.input)));
    assert!(matches!(found.decision, Decision::Hit(_)));
    assert_bounded("child hit", n, 0, 0);

    // Miss, absent, in the last round: nothing later to remove.
    let ev = input(1, 0);
    let last = ROUNDS - 1;
    let absent = done(key(40), last, &action("never"), Trigger::Input, &ev, root.input, Vec::new());
    let (found, n) = visited(|| index.lookup(&probe(&absent, ev.id, root.input)));
    assert!(matches!(found.decision, Decision::Miss(MissReason::Absent)));
    assert!(found.invalidation.removed.is_empty());
    assert_bounded("absent miss", n, 0, 0);

    // Miss, absent, of a key that is not indexed at all.
    let stranger = done(key(10_000), 3, &action("plan"), Trigger::Input, &ev, root.input, Vec::new());
    let (found, n) = visited(|| index.lookup(&probe(&stranger, ev.id, root.input)));
    assert!(found.invalidation.removed.is_empty());
    assert_bounded("absent key", n, 0, 0);

    // Invalidation: an absent miss in round 3 removes rounds 4 and 5.
    let mut index = b.index.clone();
    let absent3 = ActionState { key: StateKey { seq: 3, ..absent.key }, ..absent.clone() };
    let (found, n) = visited(|| index.lookup(&probe(&absent3, ev.id, root.input)));
    assert_eq!(found.invalidation.removed.len(), 2 * PER_ROUND);
    assert_bounded("absent invalidation", n, 2 * PER_ROUND, 2);

    // Root changed in round 4: rounds 4 and 5.
    let mut index = b.index.clone();
    let changed = input(2, 9);
    let changed_root = done(key(40), 4, &action("plan"), Trigger::Input, &changed, changed.fingerprint(), Vec::new());
    let (found, n) = visited(|| index.lookup(&probe(&changed_root, changed.id, changed.fingerprint())));
    assert!(matches!(found.decision, Decision::Miss(MissReason::RootChanged)));
    assert_eq!(found.invalidation.removed.len(), 2 * PER_ROUND);
    assert_bounded("root changed", n, 2 * PER_ROUND, 2);

    // Conflict on a child in round 2: it, its child, and rounds 3 to 5.
    let mut index = b.index.clone();
    let (found, n) = visited(|| index.lookup(&probe(child, EventId(u128::MAX), child.input)));
    assert!(matches!(found.decision, Decision::Miss(MissReason::OccurrenceConflict)));
    let removed = found.invalidation.removed.len();
    assert_eq!(removed, 2 + 3 * PER_ROUND);
    assert_bounded("conflict", n, removed, 3);

    // Explain visits at most the later rounds it counts.
    let index = b.index.clone();
    let (_, n) = visited(|| index.explain(&probe(child, EventId(u128::MAX), child.input)));
    assert_bounded("explain", n, 0, 3);
}

#[test]
fn writes_replays_deletes_and_prunes_visit_only_what_they_touch() {
    let b = big();
    let r = &b.rounds[77];
    let k = key(77);

    // A new state in an existing round (put, or the replay of its record).
    let mut index = b.index.clone();
    let mut end = b.end.clone();
    let extra = done(k, 2, &action("log"), Trigger::Input, &input(5, 0), r[2].root.input, Vec::new());
    let pos = position(&mut end, &k);
    let (inv, n) = visited(|| index.apply(LogRecord::Upsert(extra), pos, 100));
    assert!(inv.is_empty());
    assert_bounded("put", n, 0, 1);

    // A new round of a new key.
    let fresh = round_states(key(5_000), 0, &mut 1_000_000);
    let pos = position(&mut end, &key(5_000));
    let (_, n) = visited(|| index.apply(LogRecord::Upsert(fresh.root), pos, 100));
    assert_bounded("put new key", n, 0, 1);

    // Re-indexing a producer with other outputs removes its four descendants.
    let mut replaced = r[3].root.clone();
    replaced.progress = Progress::Completed { outputs: vec![output(9_000_000, 1)], memory: Vec::new() };
    let pos = position(&mut end, &k);
    let (inv, n) = visited(|| index.apply(LogRecord::Upsert(replaced), pos, 100));
    assert_eq!(inv.removed.len(), 4);
    assert_bounded("producer replaced", n, 4, 1);

    // Replaying a record of the same state with the same evidence.
    let same = r[4].children[0].clone();
    let pos = position(&mut end, &k);
    let (inv, n) = visited(|| index.apply(LogRecord::Upsert(same), pos, 100));
    assert!(inv.is_empty());
    assert_bounded("replayed record", n, 0, 1);

    // A tombstone.
    let pos = position(&mut end, &k);
    let (inv, n) = visited(|| {
        index.apply(
            LogRecord::Delete { key: r[5].boot.key, reason: InvalidationReason::Miss(MissReason::Absent) },
            pos,
            50,
        )
    });
    assert!(inv.is_empty());
    assert!(index.get(&r[5].boot.key).is_none());
    assert_bounded("delete", n, 1, 1);

    // Prune rounds 0 to 2 of one key.
    let mut index = b.index.clone();
    let (pruned, n) = visited(|| index.prune(&k, 2));
    assert_eq!(pruned, 3 * PER_ROUND);
    assert_bounded("prune", n, pruned, 3);
    // Pruning a key that holds nothing.
    let (pruned, n) = visited(|| index.prune(&key(6_000), u64::MAX));
    assert_eq!(pruned, 0);
    assert_bounded("prune absent key", n, 0, 0);

    // Markers, statistics and point reads.
    let (offsets, n) = visited(|| index.covering_offsets(&b.end));
    assert_eq!(offsets.len(), PARTITIONS as usize);
    assert_bounded("covering offsets", n, 0, 0);
    let (_, n) = visited(|| index.stats());
    assert_bounded("stats", n, 0, 0);
    let (_, n) = visited(|| (index.get(&r[4].root.key), index.position(&r[4].root.key)));
    assert_bounded("get", n, 0, 0);
    // One key's history is bounded by that key.
    let (rounds, n) = visited(|| index.rounds_of(&k));
    assert_eq!(rounds.len(), 3);
    assert_bounded("rounds_of", n, 3 * PER_ROUND, 3);
    let (_, n) = visited(|| index.last_seq(&k));
    assert_bounded("last_seq", n, 0, 3);
}

#[test]
fn long_histories_are_not_scanned() {
    let b = big();
    let long = long_key();
    let last = LONG_ROUNDS - 1;

    // Hit in the middle of the history.
    let mut index = b.index.clone();
    let mid = long_state(200, 0);
    let (found, n) = visited(|| index.lookup(&probe(&mid, EventId(1), mid.input)));
    assert!(matches!(found.decision, Decision::Hit(_)));
    assert_bounded("long hit", n, 0, 0);

    // Absent near the end: removes the nine rounds after it.
    let other = done(long, last - 9, &action("never"), Trigger::Input, &input(1, 0), mid.input, Vec::new());
    let (found, n) = visited(|| index.lookup(&probe(&other, EventId(1), mid.input)));
    assert_eq!(found.invalidation.removed.len(), 9);
    assert_bounded("long absent", n, 9, 9);

    // Explain of an absent miss counts the later rounds (now up to `last - 9`) only.
    let earlier = ActionState { key: StateKey { seq: last - 20, ..other.key }, ..other.clone() };
    let (explained, n) = visited(|| index.explain(&probe(&earlier, EventId(1), mid.input)));
    assert_eq!(explained.2, 11);
    assert_bounded("long explain", n, 0, 11);

    // Root changed near the end: the round and the ones after it.
    let changed = long_state(last - 20, 5);
    let (found, n) = visited(|| index.lookup(&probe(&changed, EventId(2), changed.input)));
    assert!(matches!(found.decision, Decision::Miss(MissReason::RootChanged)));
    assert_eq!(found.invalidation.removed.len(), 12);
    assert_bounded("long root changed", n, 12, 12);

    // A write in the middle of the history.
    let mut end = b.end.clone();
    let pos = position(&mut end, &long);
    let (_, n) = visited(|| index.apply(LogRecord::Upsert(long_state(100, 0)), pos, 100));
    assert_bounded("long put", n, 0, 1);

    // Prune the first rounds.
    let (pruned, n) = visited(|| index.prune(&long, 10));
    assert_eq!(pruned, 11);
    assert_bounded("long prune", n, 11, 11);
}

#[test]
fn visits_are_counted() {
    // Without live counting the bounds above would prove nothing.
    let b = big();
    let mut index = b.index.clone();
    let (pruned, n) = visited(|| index.prune(&key(3), u64::MAX));
    assert_eq!(pruned, ROUNDS as usize * PER_ROUND);
    assert!(n >= pruned as u64, "prune of {pruned} states visited {n}");
    let (_, n) = visited(|| b.index.rounds_of(&key(4)));
    assert!(n >= (ROUNDS as usize * PER_ROUND) as u64);
}

/// What the scan guard's panic says when `f` makes it panic (none: `f` did not panic). The
/// guard's panics are expected here and not printed: with `RUST_BACKTRACE` set, as CI runs the
/// tests, each printed a backtrace that buried the output of a test that really failed. Every
/// other panic is printed by the hook that was there before.
fn scan_panic<R>(f: impl FnOnce() -> R) -> Option<String> {
    static QUIET: Once = Once::new();
    QUIET.call_once(|| {
        let before = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.to_string().contains(GUARD_PANIC) {
                before(info);
            }
        }));
    });
    let p = catch_unwind(AssertUnwindSafe(f)).err()?;
    Some(
        p.downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_string()))
            .unwrap_or_default(),
    )
}

/// What the scan guard's panic says (`state-index/src/maps.rs`).
const GUARD_PANIC: &str = "outside an allow_scans scope";

#[test]
fn whole_scans_panic_outside_an_allow_scans_scope() {
    let b = big();
    let index = &b.index;

    let said = scan_panic(|| index.dump()).unwrap();
    assert!(said.contains(GUARD_PANIC), "{said}");
    let said = scan_panic(|| index.check_invariants()).unwrap();
    assert!(said.contains(GUARD_PANIC), "{said}");

    // Inside a scope (nested too) they work and see everything.
    {
        let _outer = allow_scans();
        {
            let _inner = allow_scans();
            assert_eq!(index.check_invariants(), Ok(()));
        }
        assert_eq!(index.dump().len(), TOTAL);
    }
    // Once the scope is gone, the guard is live again.
    assert!(scan_panic(|| index.dump()).is_some());
    // Even an empty index refuses a whole scan outside a scope.
    let empty = Index::new();
    assert!(scan_panic(|| empty.dump()).is_some());
}
