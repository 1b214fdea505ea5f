//! What the checks share: test records, reading a partition whole, and the checks of reported
//! positions and of one read batch against the contract's rules.

use super::report::CheckResult;
use actionstate_core::{Error, KeyId, Position, RangeRead, StateLog, WireRecord};
use std::collections::BTreeMap;
use std::future::Future;

pub(super) fn record(key: u32, n: u32) -> WireRecord {
    let key_id = KeyId::of(format!("conformance-key-{key}").as_bytes());
    WireRecord { key_id, key: format!("k{key}-{n}").into_bytes(), value: format!("value {key}/{n}").into_bytes() }
}

pub(super) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub(super) async fn must<T>(what: &str, f: impl Future<Output = Result<T, Error>>) -> Result<T, String> {
    f.await.map_err(|e| format!("{what} failed: {e}"))
}

/// The entry of `partition` in per-partition offsets a backend listed.
pub(super) fn at(offsets: &[u64], partition: u32, what: &str) -> Result<u64, String> {
    offsets.get(partition as usize).copied().ok_or_else(|| {
        format!("{what} list {} partitions ({offsets:?}), no entry for partition {partition}", offsets.len())
    })
}

/// A partition's records as [`read_all`] returns them: (offset, key, value).
pub type Records = Vec<(u64, Vec<u8>, Vec<u8>)>;

/// Reads `[from, to)` of one partition completely with [`RangeRead`], which fails on a batch
/// that breaks the read rules of the contract (no progress, a record out of range or order).
pub async fn read_all<L: StateLog>(log: &L, partition: u32, from: u64, to: u64) -> Result<Records, Error> {
    let mut out = Vec::new();
    let mut range = RangeRead::new(partition, from, to, 64);
    while let Some(records) = range.next_batch(log).await? {
        out.extend(records.into_iter().map(|r| (r.offset, r.key, r.value)));
    }
    Ok(out)
}

pub(super) async fn read_range<L: StateLog>(log: &L, partition: u32, from: u64, to: u64) -> Result<Records, String> {
    read_all(log, partition, from, to).await.map_err(|e| format!("reading partition {partition} [{from}, {to}): {e}"))
}

/// Every record of every partition, from its earliest offset to its end.
pub(super) async fn contents<L: StateLog>(log: &L) -> Result<Vec<Records>, String> {
    let earliest = must("earliest offsets", log.earliest_offsets()).await?;
    let end = must("end offsets", log.end_offsets()).await?;
    let partitions = log.identity().partitions;
    let mut out = Vec::new();
    for p in 0..partitions {
        out.push(read_range(log, p, at(&earliest, p, "earliest offsets")?, at(&end, p, "end offsets")?).await?);
    }
    Ok(out)
}

/// Checks the positions reported for records one task appended one after another against
/// where the records are (`stored`, every partition read in full):
///
/// - the record is in the reported partition, with its bytes;
/// - an exact position is the record's offset, and a read of that one offset returns it;
/// - a lower bound (`exact: false`) is no greater than the record's offset, and reading from
///   it to the end finds the record;
/// - per partition, positions increase (strictly where both are exact, never decrease where
///   one is a lower bound).
pub(super) async fn check_positions<L: StateLog>(
    log: &L,
    appended: &[(Position, WireRecord)],
    stored: &[Records],
    who: &str,
) -> CheckResult {
    let end = must("end offsets", log.end_offsets()).await?;
    let mut last: BTreeMap<u32, Position> = BTreeMap::new();
    // Lower bounds, by (partition, reported offset): each range is read once.
    let mut bounds: BTreeMap<(u32, u64), Vec<&WireRecord>> = BTreeMap::new();
    for (p, r) in appended {
        let records = stored.get(p.partition as usize).ok_or_else(|| format!("{who}: {p:?} names no partition"))?;
        let found = records.iter().find(|(_, k, _)| *k == r.key);
        let Some((real, _, value)) = found else {
            return Err(format!(
                "{who}: acknowledged record {} ({p:?}) is not in partition {}",
                text(&r.key),
                p.partition
            ));
        };
        ensure!(*value == r.value, "{who}: record {} at offset {real} holds other bytes", text(&r.key));
        if p.exact {
            ensure!(*real == p.offset, "{who}: record {} reported at exact {p:?} is at offset {real}", text(&r.key));
            let got = read_range(log, p.partition, p.offset, p.offset + 1).await?;
            ensure!(
                got.len() == 1 && got[0].1 == r.key && got[0].2 == r.value,
                "{who}: a read of the one offset {p:?} does not return record {}",
                text(&r.key)
            );
        } else {
            ensure!(
                p.offset <= *real,
                "{who}: lower bound {} of record {} is past its offset {real} in partition {}",
                p.offset,
                text(&r.key),
                p.partition
            );
            bounds.entry((p.partition, p.offset)).or_default().push(r);
        }
        if let Some(prev) = last.insert(p.partition, *p) {
            if prev.exact && p.exact {
                ensure!(p.offset > prev.offset, "{who}: exact offsets do not increase: {prev:?} then {p:?}");
            } else {
                ensure!(p.offset >= prev.offset, "{who}: positions go backwards: {prev:?} then {p:?}");
            }
        }
    }
    for ((partition, offset), records) in bounds {
        let to = at(&end, partition, "end offsets")?;
        let scanned = read_range(log, partition, offset, to).await?;
        for r in records {
            ensure!(
                scanned.iter().any(|(_, k, v)| *k == r.key && *v == r.value),
                "{who}: record {} is not found reading partition {partition} from its lower bound {offset} to the \
                 end {to}",
                text(&r.key)
            );
        }
    }
    Ok(())
}

/// Checks one batch of `read(partition, from, to, max)` against the read rules, with `all`
/// every record of the partition: progress, at most `max` records in range and in order, a
/// `next` past the last one, and no record of `[from, next)` left out.
pub(super) fn check_batch(
    partition: u32,
    (from, to, max): (u64, u64, usize),
    batch: &actionstate_core::ReadBatch,
    all: &Records,
) -> CheckResult {
    let what = format!("read(partition {partition}, from {from}, to {to}, max {max})");
    RangeRead::new(partition, from, to, max).check(batch).map_err(|e| format!("{what}: {e}"))?;
    let upto = batch.next.min(to);
    let want: Vec<u64> = all.iter().map(|(o, _, _)| *o).filter(|o| (from..upto).contains(o)).collect();
    let got: Vec<u64> = batch.records.iter().map(|r| r.offset).collect();
    ensure!(
        got == want,
        "{what}: returned offsets {got:?} with next {}, but the partition holds {want:?} in [{from}, {upto})",
        batch.next
    );
    for r in &batch.records {
        let stored = all.iter().find(|(o, _, _)| *o == r.offset);
        ensure!(
            stored.is_some_and(|(_, k, v)| *k == r.key && *v == r.value),
            "{what}: the record at offset {} differs from the one a full read returns",
            r.offset
        );
    }
    Ok(())
}
