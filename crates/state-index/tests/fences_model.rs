//! Model test of fencing (the replay rule of docs/design.md, section 7.1): random
//! histories are written through a simulated store by owners of different epochs — the newest
//! owner, zombies of older epochs, a newer owner whose fences are not in the log — between
//! fence records over every key or a range of key groups, with epochs newer than the newest
//! owner's, equal to it or older, appended to every partition or, as a restore that failed
//! part way leaves them, to some.
//!
//! The log is replayed as a rebuild replays it (`index_batch` of `actionstate-recovery`: per
//! partition in log order, a fence observed by [`Fences`], a record of a key the replay does not
//! own passed over, any other peeked and then skipped unless [`Fences::admits`] its key and
//! writer epoch, upserts kept encoded), and by a naive reference that decides each record's
//! fate by scanning the whole prefix of its partition for a fence record covering its key
//! with a newer epoch, and applies the records it keeps, decoded, to a plain index. Both must
//! skip the same records and index the same states, from offset 0 and from a random offset of
//! every partition with the fence marks of what lies before it ([`Fences::from_marks`]); the
//! latter skips exactly what the former skips after the start.
#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use actionstate_core::codec::{self, Peeked};
use actionstate_core::{
    ActionState, FENCE_KEY_LAYOUT, FenceMark, InvalidationReason, KeyId, LogRecord, MissReason, Ownership, Position,
    StateKey, WireRecord,
};
use actionstate_index::{Fences, Index, Probe, Recorded};
use common::ops::{Ids, Op, Step, key_name, op_strategy, resolve_all, short_key};
use common::{Store, dump, invariants};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// Partitions of the simulated log.
const PARTITIONS: u32 = 3;

/// The epoch the writer of an operation's records has, relative to the newest owner's.
#[derive(Clone, Copy, Debug)]
enum WriterEpoch {
    /// The newest owner's.
    Current,
    /// A zombie's: that many epochs older (down to 0, the epoch of a store never restored).
    Older(u64),
    /// A newer owner's whose restore appended no fence yet.
    Newer,
}

/// The epoch of a restore's fences, relative to the newest owner's.
#[derive(Clone, Copy, Debug)]
enum FenceEpoch {
    /// A new owner's: one above the newest, which it becomes.
    Next,
    /// The newest owner's again.
    Same,
    /// An older owner's, appended late: that many epochs older.
    Older(u64),
}

/// One event of a history.
#[derive(Clone, Debug)]
enum Hist {
    /// An operation, its records written with the writer's epoch.
    Write { op: Op, epoch: WriterEpoch },
    /// A restore's fences of `groups`: in every partition (`partitions: None`) or in those
    /// whose bit the mask sets.
    Fence { groups: Ownership, epoch: FenceEpoch, partitions: Option<u8> },
}

/// Every key, or a range of key groups (empty at times) among 1, 4, 8 or 16 groups.
fn ownership_strategy() -> BoxedStrategy<Ownership> {
    prop_oneof![
        1 => Just(Ownership::All),
        3 => (prop::sample::select(vec![1u16, 4, 8, 16]), any::<u16>(), any::<u16>()).prop_map(|(max_groups, a, b)| {
            let (a, b) = (a % (max_groups + 1), b % (max_groups + 1));
            Ownership::Groups { max_groups, owned: a.min(b)..a.max(b) }
        }),
    ]
    .boxed()
}

fn hist_strategy() -> BoxedStrategy<Hist> {
    let writer = prop_oneof![
        6 => Just(WriterEpoch::Current),
        3 => (1u64..4).prop_map(WriterEpoch::Older),
        1 => Just(WriterEpoch::Newer),
    ];
    let fence = prop_oneof![
        5 => Just(FenceEpoch::Next),
        1 => Just(FenceEpoch::Same),
        2 => (1u64..4).prop_map(FenceEpoch::Older),
    ];
    prop_oneof![
        10 => (op_strategy(), writer).prop_map(|(op, epoch)| Hist::Write { op, epoch }),
        2 => (ownership_strategy(), fence, prop::option::weighted(0.4, 1u8..7))
            .prop_map(|(groups, epoch, partitions)| Hist::Fence { groups, epoch, partitions }),
    ]
    .boxed()
}

/// A history, the keys the replaying owner holds, and where in each partition (modulo its
/// length plus one) the replay from a marker starts.
fn case_strategy() -> impl Strategy<Value = (Vec<Hist>, Ownership, [u16; 3])> {
    (
        prop::collection::vec(hist_strategy(), 1..60),
        prop_oneof![3 => Just(Ownership::All), 1 => ownership_strategy()],
        any::<[u16; 3]>(),
    )
}

/// Runs one step on the writer, logging whatever it invalidates.
fn write_step(store: &mut Store, step: &Step) {
    match step {
        Step::Upsert(state) => {
            store.put(state.clone());
        }
        Step::Lookup { key, trigger, event, input, .. } => {
            store.lookup(&Probe { key: *key, trigger, event: *event, input: *input });
        }
        Step::Delete(sk) => {
            store.delete(*sk, InvalidationReason::Miss(MissReason::Absent));
        }
        Step::Operator { key, from_seq } => {
            store.operator(*key, *from_seq, common::ops::OPERATOR_TEXT);
        }
        Step::Prune { key, upto } => {
            store.index.prune(key, *upto);
        }
        Step::Cut { lookup, .. } => write_step(store, lookup),
        Step::Nothing => {}
    }
}

/// Writes a history; returns its log.
fn write(hist: &[Hist]) -> Vec<Vec<WireRecord>> {
    let mut store = Store::new(PARTITIONS);
    let mut ids = Ids(1_000);
    let mut newest = 1u64;
    for h in hist {
        match h {
            Hist::Write { op, epoch } => {
                store.epoch = match epoch {
                    WriterEpoch::Current => newest,
                    WriterEpoch::Older(back) => newest.saturating_sub(*back),
                    WriterEpoch::Newer => newest + 1,
                };
                let known: BTreeMap<StateKey, ActionState> =
                    dump(&store.index).into_iter().map(|(k, (s, _))| (k, s)).collect();
                for step in resolve_all(op, &known, &mut ids) {
                    write_step(&mut store, &step);
                }
            }
            Hist::Fence { groups, epoch, partitions } => {
                let epoch = match epoch {
                    FenceEpoch::Next => newest + 1,
                    FenceEpoch::Same => newest,
                    FenceEpoch::Older(back) => newest.saturating_sub(*back),
                };
                newest = newest.max(epoch);
                let reach = (0..PARTITIONS).filter(|p| partitions.is_none_or(|mask| mask & (1 << p) != 0));
                store.fence(groups, epoch, reach);
            }
        }
    }
    store.log
}

/// One record of the log, decoded, with its writer's epoch as its envelope carries it.
#[derive(Clone, Debug)]
struct Read {
    record: LogRecord,
    epoch: u64,
    bytes: usize,
}

fn decode_log(log: &[Vec<WireRecord>]) -> Vec<Vec<Read>> {
    log.iter()
        .map(|records| {
            records
                .iter()
                .map(|w| Read {
                    record: codec::decode(&w.key, &w.value).unwrap(),
                    epoch: codec::writer_epoch(&w.value).unwrap(),
                    bytes: w.key.len() + w.value.len(),
                })
                .collect()
        })
        .collect()
}

/// What a replay did.
#[derive(Debug, Default)]
struct Replayed {
    index: Index,
    /// (partition, offset) of every record skipped as a fenced writer's.
    fenced: BTreeSet<(u32, u64)>,
    /// Records of keys the replaying owner does not hold.
    foreign: usize,
}

/// Replays every partition from `from` as a rebuild does (`index_batch`), knowing the fences
/// of `marks` that lie before it.
fn replay(log: &[Vec<WireRecord>], ownership: &Ownership, from: &[u64], marks: &[FenceMark]) -> Replayed {
    let mut out = Replayed::default();
    for (p, records) in (0u32..).zip(log) {
        let start = from[p as usize];
        let mut fences = Fences::from_marks(marks, p, start);
        for (offset, r) in (0u64..).zip(records).skip(usize::try_from(start).unwrap()) {
            let bytes = r.key.len() + r.value.len();
            if r.key.first() == Some(&FENCE_KEY_LAYOUT)
                && let LogRecord::Fence(fence) = codec::decode(&r.key, &r.value).unwrap()
            {
                fences.observe(&fence);
                continue;
            }
            let key = KeyId(r.key[1..33].try_into().unwrap());
            if !ownership.owns(&key) {
                out.foreign += 1;
                continue;
            }
            let position = Position { partition: p, offset, exact: true };
            let peeked = codec::peek(&r.key, &r.value).unwrap();
            if !fences.is_empty() && !fences.admits(&key, codec::writer_epoch(&r.value).unwrap()) {
                out.fenced.insert((p, offset));
                continue;
            }
            match peeked {
                Peeked::Upsert(evidence) => {
                    let recorded = Recorded::encoded(evidence, r.value.clone().into_boxed_slice(), position);
                    out.index.upsert(recorded, position, bytes);
                }
                Peeked::Other(record) => {
                    out.index.apply(*record, position, bytes);
                }
            }
        }
    }
    out
}

/// Whether the record at `offset` of a partition is a fenced writer's, by scanning every
/// record before it: some fence record there covers its key with an epoch newer than its
/// writer's.
fn fenced_by_scan(records: &[Read], offset: usize) -> bool {
    let r = &records[offset];
    let key = r.record.key_id();
    records[..offset]
        .iter()
        .any(|f| matches!(&f.record, LogRecord::Fence(f) if f.groups.owns(&key) && f.epoch > r.epoch))
}

/// The reference: every partition from `from`, each record kept or skipped by
/// [`fenced_by_scan`] and the kept ones applied decoded (fence records too: the index ignores
/// them).
fn reference(log: &[Vec<Read>], ownership: &Ownership, from: &[u64]) -> Result<Replayed, TestCaseError> {
    let mut out = Replayed::default();
    for (p, records) in (0u32..).zip(log) {
        for (offset, r) in (0u64..).zip(records).skip(usize::try_from(from[p as usize]).unwrap()) {
            let position = Position { partition: p, offset, exact: true };
            if matches!(r.record, LogRecord::Fence(_)) {
                prop_assert!(out.index.apply(r.record.clone(), position, r.bytes).is_empty(), "a fence invalidated");
                continue;
            }
            if !ownership.owns(&r.record.key_id()) {
                out.foreign += 1;
            } else if fenced_by_scan(records, usize::try_from(offset).unwrap()) {
                out.fenced.insert((p, offset));
            } else {
                out.index.apply(r.record.clone(), position, r.bytes);
            }
        }
    }
    Ok(out)
}

/// The fence marks a rebuild of the whole log records (`fencing::table` of
/// `actionstate-recovery`): one per fence (keys and epoch), with its first offset in every
/// partition (`u64::MAX` where it has none), those over keys the owner holds only.
fn marks(log: &[Vec<Read>], ownership: &Ownership) -> Vec<FenceMark> {
    let mut table: Vec<FenceMark> = Vec::new();
    for (p, records) in log.iter().enumerate() {
        for (offset, r) in (0u64..).zip(records) {
            let LogRecord::Fence(f) = &r.record else { continue };
            match table.iter_mut().find(|m| m.groups == f.groups && m.epoch == f.epoch) {
                Some(m) => m.offsets[p] = m.offsets[p].min(offset),
                None => {
                    let mut offsets = vec![u64::MAX; PARTITIONS as usize];
                    offsets[p] = offset;
                    table.push(FenceMark { groups: f.groups.clone(), epoch: f.epoch, offsets });
                }
            }
        }
    }
    table.retain(|m| m.groups.overlaps(ownership));
    table
}

fn label(record: &LogRecord) -> String {
    match record {
        LogRecord::Upsert(s) => format!("upsert {}", short_key(&s.key)),
        LogRecord::Delete { key, .. } => format!("delete {}", short_key(key)),
        LogRecord::Audit(a) => format!("audit {} s{}", key_name(&a.key), a.seq),
        LogRecord::Fence(f) => format!("FENCE {} epoch {}", f.groups, f.epoch),
        LogRecord::Checkpoint(c) => format!("checkpoint {} of {} epoch {}", c.id, c.owner, c.epoch),
        LogRecord::Resolve(r) => format!("resolve request {}", key_name(&r.key)),
    }
}

/// The log, one record a line, with the reference's fate of each.
fn describe(log: &[Vec<Read>], ownership: &Ownership, from: &[u64], want: &Replayed) -> String {
    let mut out = format!("replay by the owner of {ownership} from {from:?}\n");
    for (p, records) in (0u32..).zip(log) {
        for (offset, r) in (0u64..).zip(records) {
            let fate = if matches!(r.record, LogRecord::Fence(_)) {
                ""
            } else if want.fenced.contains(&(p, offset)) {
                " -> fenced"
            } else if !ownership.owns(&r.record.key_id()) {
                " -> foreign"
            } else {
                ""
            };
            let _ = writeln!(out, "  p{p}@{offset} {} by epoch {}{fate}", label(&r.record), r.epoch);
        }
    }
    out
}

/// Both replays skipped the same records and indexed the same states.
fn compare(got: &Replayed, want: &Replayed, end: &[u64], context: &dyn Fn() -> String) -> Result<(), TestCaseError> {
    prop_assert_eq!(&got.fenced, &want.fenced, "fenced records\n{}", context());
    prop_assert_eq!(got.foreign, want.foreign, "foreign records\n{}", context());
    prop_assert_eq!(invariants(&got.index), Ok(()), "invariants\n{}", context());
    let (g, w) = (dump(&got.index), dump(&want.index));
    if g != w {
        let extra: Vec<String> = g.keys().filter(|k| !w.contains_key(k)).map(short_key).collect();
        let missing: Vec<String> = w.keys().filter(|k| !g.contains_key(k)).map(short_key).collect();
        return Err(TestCaseError::fail(format!(
            "content differs: extra {extra:?}, missing {missing:?}, or a state/position differs\n{}",
            context()
        )));
    }
    prop_assert_eq!(got.index.stats(), want.index.stats(), "stats\n{}", context());
    prop_assert_eq!(got.index.covering_offsets(end), want.index.covering_offsets(end), "covering\n{}", context());
    Ok(())
}

fn run(hist: &[Hist], ownership: &Ownership, starts: [u16; 3]) -> Result<(), TestCaseError> {
    let log = write(hist);
    let read = decode_log(&log);
    let end: Vec<u64> = log.iter().map(|p| p.len() as u64).collect();
    let marks = marks(&read, ownership);

    let zero = vec![0u64; PARTITIONS as usize];
    let want = reference(&read, ownership, &zero)?;
    let full = replay(&log, ownership, &zero, &marks);
    compare(&full, &want, &end, &|| describe(&read, ownership, &zero, &want))?;

    let from: Vec<u64> = starts.iter().zip(&end).map(|(s, e)| u64::from(*s) % (e + 1)).collect();
    let want = reference(&read, ownership, &from)?;
    let context = || format!("{}marks {marks:?}", describe(&read, ownership, &from, &want));
    let mid = replay(&log, ownership, &from, &marks);
    compare(&mid, &want, &end, &context)?;
    let after: BTreeSet<(u32, u64)> = full.fenced.iter().filter(|(p, o)| *o >= from[*p as usize]).copied().collect();
    prop_assert_eq!(&mid.fenced, &after, "a replay from the marks skips what a full replay skips\n{}", context());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn fenced_replay_agrees_with_reference_model((hist, ownership, starts) in case_strategy()) {
        run(&hist, &ownership, starts)?;
    }
}

/// The generated histories must reach every case of the rule, or the model test would
/// compare little.
// Long: the table of every case of the fence rule the generated histories must reach, read whole.
#[test]
fn generated_fenced_logs_exercise_every_case() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

    let mut runner = TestRunner::new_with_rng(Config::default(), TestRng::from_seed(RngAlgorithm::ChaCha, &[11; 32]));
    let strategy = case_strategy();
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for _ in 0..300 {
        let (hist, ownership, starts) = strategy.new_tree(&mut runner).unwrap().current();
        let read = decode_log(&write(&hist));
        let mut once: BTreeSet<&str> = BTreeSet::new();
        if marks(&read, &Ownership::All).iter().any(|m| m.offsets.contains(&u64::MAX)) {
            once.insert("a fence in some partitions only");
        }
        for (records, start) in read.iter().zip(starts) {
            let start = usize::from(start) % (records.len() + 1);
            let fences: Vec<(usize, &actionstate_core::Fence)> = records
                .iter()
                .enumerate()
                .filter_map(|(o, r)| match &r.record {
                    LogRecord::Fence(f) => Some((o, f)),
                    _ => None,
                })
                .collect();
            let max_groups: BTreeSet<Option<u16>> = fences
                .iter()
                .map(|(_, f)| match f.groups {
                    Ownership::All => None,
                    Ownership::Groups { max_groups, .. } => Some(max_groups),
                })
                .collect();
            if max_groups.len() >= 3 {
                once.insert("fences of three shapes in a partition");
            }
            for (i, (_, f)) in fences.iter().enumerate() {
                let earlier = &fences[..i];
                if earlier.iter().any(|(_, e)| e.epoch > f.epoch && e.groups.covers(&f.groups)) {
                    once.insert("a fence older than one before it over its keys");
                }
                if earlier.iter().any(|(_, e)| e.epoch < f.epoch && f.groups.covers(&e.groups)) {
                    once.insert("a fence replacing one before it");
                }
            }
            for (offset, r) in records.iter().enumerate() {
                if matches!(r.record, LogRecord::Fence(_)) {
                    continue;
                }
                let key = r.record.key_id();
                let before = || fences.iter().filter(|(o, _)| *o < offset).map(|(_, f)| f);
                if !ownership.owns(&key) {
                    once.insert("a foreign record");
                } else if fenced_by_scan(records, offset) {
                    once.insert(match r.record {
                        LogRecord::Upsert(_) => "a fenced upsert",
                        LogRecord::Delete { .. } => "a fenced delete",
                        _ => "a fenced audit",
                    });
                    let fencing = |o: &usize, f: &&actionstate_core::Fence| {
                        *o < offset && f.epoch > r.epoch && f.groups.owns(&key)
                    };
                    let by_mark = fences.iter().any(|(o, f)| *o < start && fencing(o, f));
                    let by_read = fences.iter().any(|(o, f)| *o >= start && fencing(o, f));
                    if offset >= start && by_mark && !by_read {
                        once.insert("a record fenced by marks only");
                    }
                } else {
                    if before().any(|f| f.epoch > r.epoch) {
                        once.insert("an older epoch kept: key not covered");
                    }
                    if before().any(|f| f.epoch == r.epoch && f.groups.owns(&key)) {
                        once.insert("a covered record of the fence's own epoch kept");
                    }
                    if before().any(|f| f.epoch < r.epoch && f.groups.owns(&key)) {
                        once.insert("a covered record of a newer epoch kept");
                    }
                    if fences.iter().any(|(o, f)| *o > offset && f.epoch > r.epoch && f.groups.owns(&key)) {
                        once.insert("an older epoch kept before its fence");
                    }
                }
            }
        }
        for kind in once {
            *seen.entry(kind).or_default() += 1;
        }
    }
    for kind in [
        "a fence in some partitions only",
        "fences of three shapes in a partition",
        "a fence older than one before it over its keys",
        "a fence replacing one before it",
        "a foreign record",
        "a fenced upsert",
        "a fenced delete",
        "a fenced audit",
        "a record fenced by marks only",
        "an older epoch kept: key not covered",
        "a covered record of the fence's own epoch kept",
        "a covered record of a newer epoch kept",
        "an older epoch kept before its fence",
    ] {
        assert!(
            seen.get(kind).copied().unwrap_or(0) >= 20,
            "{kind} in {:?} of 300 histories: {seen:?}",
            seen.get(kind)
        );
    }
}
