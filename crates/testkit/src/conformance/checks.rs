//! The checks of the suite, one public function each, in the order of
//! [`CHECKS`](super::CHECKS).

use super::report::{CheckResult, Harness};
use super::support::{Records, at, check_batch, check_positions, contents, must, read_range, record, text};
use actionstate_core::{Error, LogIdentity, Marker, Position, StateLog, WireRecord};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// Every acknowledged append is readable, with its bytes, at or after its position after a
/// reopen, and each partition holds exactly the acknowledged records in order.
pub async fn acknowledged_appends_survive_reopen<H: Harness>(h: &H) -> CheckResult {
    let log = must("open", h.fresh(4)).await?;
    let mut acked: Vec<(Position, WireRecord)> = Vec::new();
    for n in 0..120 {
        let r = record(n % 12, n);
        let p = must("append", log.append(r.clone())).await?;
        acked.push((p, r));
    }
    let log = must("reopen", h.reopen(log)).await?;
    let stored = contents(&log).await?;
    check_positions(&log, &acked, &stored, "after reopen").await?;
    let mut per_partition: BTreeMap<u32, Vec<Vec<u8>>> = BTreeMap::new();
    for (p, r) in &acked {
        per_partition.entry(p.partition).or_default().push(r.key.clone());
    }
    for (p, records) in (0u32..).zip(&stored) {
        let got: Vec<String> = records.iter().map(|(_, k, _)| text(k)).collect();
        let want: Vec<String> = per_partition.get(&p).into_iter().flatten().map(|k| text(k)).collect();
        ensure!(
            got == want,
            "partition {p} after reopen does not hold exactly the acknowledged records in order: holds {got:?}, \
             acknowledged {want:?}"
        );
    }
    Ok(())
}

/// Records of one key land in one partition, in append order, at increasing offsets.
pub async fn per_partition_order<H: Harness>(h: &H) -> CheckResult {
    let log = must("open", h.fresh(3)).await?;
    let mut appended = Vec::new();
    for n in 0..50 {
        let r = record(7, n);
        appended.push((must("append", log.append(r.clone())).await?, r));
    }
    let partition = appended[0].0.partition;
    ensure!(
        appended.iter().all(|(p, _)| p.partition == partition),
        "one key's records spread over partitions: {:?}",
        appended.iter().map(|(p, _)| p.partition).collect::<BTreeSet<_>>()
    );
    ensure!(
        partition == record(7, 0).key_id.partition(3),
        "partition {partition} is not KeyId::partition ({})",
        record(7, 0).key_id.partition(3)
    );
    let stored = contents(&log).await?;
    let got: Vec<String> = stored[partition as usize].iter().map(|(_, k, _)| text(k)).collect();
    let want: Vec<String> = appended.iter().map(|(_, r)| text(&r.key)).collect();
    ensure!(got == want, "read order differs from append order: read {got:?}, appended {want:?}");
    check_positions(&log, &appended, &stored, "one key").await
}

/// End and earliest offsets bracket exactly the appended records, and `offsets` gives both.
pub async fn end_and_earliest_offsets<H: Harness>(h: &H) -> CheckResult {
    let log = must("open", h.fresh(2)).await?;
    let e0 = must("earliest", log.earliest_offsets()).await?;
    let n0 = must("end", log.end_offsets()).await?;
    ensure!(e0.len() == 2, "earliest offsets must cover every partition: {e0:?} for 2 partitions");
    ensure!(n0.len() == 2, "end offsets must cover every partition: {n0:?} for 2 partitions");
    ensure!(e0 == n0, "a fresh log must be empty (earliest == end): earliest {e0:?}, end {n0:?}");
    let mut counts = [0u64; 2];
    for n in 0..40 {
        let p = must("append", log.append(record(n % 5, n))).await?;
        let count = counts.get_mut(p.partition as usize).ok_or_else(|| format!("append reported {p:?}"))?;
        *count += 1;
    }
    let e1 = must("earliest", log.earliest_offsets()).await?;
    let n1 = must("end", log.end_offsets()).await?;
    for p in 0..2u32 {
        let (e0, e1, n1) = (at(&e0, p, "earliest")?, at(&e1, p, "earliest")?, at(&n1, p, "end")?);
        let count = counts[p as usize];
        ensure!(e1 == e0, "earliest offset of partition {p} moved from {e0} to {e1} without cleanup");
        ensure!(
            n1.checked_sub(e1) == Some(count),
            "partition {p}: end {n1} - earliest {e1} is not the {count} records appended"
        );
        let got = read_range(&log, p, e1, n1).await?;
        ensure!(got.len() as u64 == count, "partition {p} reads back {} records of the {count} appended", got.len());
    }
    // Both at once (a backend may answer them in one request) give the same.
    let both = must("offsets", log.offsets()).await?;
    ensure!(both == (e1.clone(), n1.clone()), "offsets() gave {both:?}, earliest and end gave {e1:?} and {n1:?}");
    Ok(())
}

/// A read bounded by an end offset captured earlier stops there, whatever was appended since.
pub async fn reads_stop_at_the_captured_end<H: Harness>(h: &H) -> CheckResult {
    let log = must("open", h.fresh(1)).await?;
    for n in 0..10 {
        must("append", log.append(record(1, n))).await?;
    }
    let end = at(&must("end", log.end_offsets()).await?, 0, "end")?;
    for n in 10..25 {
        must("append", log.append(record(1, n))).await?;
    }
    let earliest = at(&must("earliest", log.earliest_offsets()).await?, 0, "earliest")?;
    let got = read_range(&log, 0, earliest, end).await?;
    ensure!(got.len() == 10, "a read to the captured end {end} returned {} records, not 10", got.len());
    ensure!(got.iter().all(|(o, _, _)| *o < end), "a record at or past the captured end {end} was returned");
    Ok(())
}

/// Reads keep the progress rules of the contract: with `from < to` and `max > 0` a read
/// returns a record or advances, returns at most `max` records of `[from, to)` in increasing
/// order and a `next` past them, and leaves out no record below `next` — from any offset, with
/// any `max` and any bound; a read at the end, where nothing can be fetched, fails with a
/// retryable error or advances, never returns an empty batch that stays put.
pub async fn reads_make_progress_and_skip_nothing<H: Harness>(h: &H) -> CheckResult {
    let log = must("open", h.fresh(2)).await?;
    for n in 0..30 {
        must("append", log.append(record(n % 4, n))).await?;
    }
    let earliest = must("earliest", log.earliest_offsets()).await?;
    let end = must("end", log.end_offsets()).await?;
    for p in 0..2u32 {
        let (first, end) = (at(&earliest, p, "earliest")?, at(&end, p, "end")?);
        let all = read_range(&log, p, first, end).await?;
        if all.is_empty() {
            continue;
        }
        let mid = first + (end - first) / 2;
        let starts: BTreeSet<u64> = [first, first + 1, mid, end - 1].into_iter().filter(|&o| o < end).collect();
        for &from in &starts {
            for to in [end, (from + 3).min(end)] {
                for max in [1, 5, 1000] {
                    let batch = must("read", log.read(p, from, to, max)).await?;
                    check_batch(p, (from, to, max), &batch, &all)?;
                }
            }
        }
        // One record a read, each read where the previous one stopped.
        let (mut next, mut walked) = (first, Vec::new());
        while next < end {
            let batch = must("read", log.read(p, next, end, 2)).await?;
            check_batch(p, (next, end, 2), &batch, &all)?;
            walked.extend(batch.records.iter().map(|r| r.offset));
            next = batch.next;
        }
        let want: Vec<u64> = all.iter().map(|(o, _, _)| *o).collect();
        ensure!(walked == want, "reading partition {p} two records at a time returned {walked:?}, not {want:?}");
    }
    // Nothing can be fetched at the end of a partition: an error (retryable) or progress.
    let end0 = at(&end, 0, "end")?;
    match log.read(0, end0, end0 + 3, 10).await {
        Err(e) => {
            ensure!(e.is_retryable(), "a read at the end {end0} of partition 0 failed with a terminal error: {e}")
        }
        Ok(batch) => check_batch(0, (end0, end0 + 3, 10), &batch, &Vec::new())?,
    }
    Ok(())
}

/// A log recreated with another partition count is reported, and markers of the old log are
/// refused as [`Error::LogChanged`].
pub async fn partition_set_change_is_detected<H: Harness>(h: &H) -> CheckResult {
    let log = must("open", h.fresh(2)).await?;
    must("append", log.append(record(3, 0))).await?;
    let before: LogIdentity = log.identity().clone();
    let end = must("end", log.end_offsets()).await?;
    let marker = Marker::new(before.clone(), end);
    let log = must("recreate", h.recreate(log, 3)).await?;
    let now = must("current identity", log.current_identity()).await?;
    ensure!(now != before, "recreating the log with another partition count went unnoticed: {now}");
    ensure!(now.partitions == 3, "the log recreated with 3 partitions reports {now}");
    let earliest = must("earliest", log.earliest_offsets()).await?;
    let end = must("end", log.end_offsets()).await?;
    match marker.validate(&now, &earliest, &end) {
        Ok(()) => Err(format!("a marker of the old log {before} validated on the recreated log {now}")),
        Err(Error::LogChanged { .. }) => Ok(()),
        Err(e) => Err(format!("a marker of the old log was refused with {e}, not as a changed log")),
    }
}

/// A log deleted and created again with the same partition count is another log: its
/// identity differs, and a marker of the old log is refused as [`Error::LogChanged`] even when
/// the new log holds as many records, so that only the identity tells them apart.
pub async fn recreation_with_the_same_partition_count_is_detected<H: Harness>(h: &H) -> CheckResult {
    let log = must("open", h.fresh(2)).await?;
    for n in 0..4 {
        must("append", log.append(record(n, 0))).await?;
    }
    let before: LogIdentity = log.identity().clone();
    let marker = Marker::new(before.clone(), must("end", log.end_offsets()).await?);
    let log = must("recreate", h.recreate(log, 2)).await?;
    let now = must("current identity", log.current_identity()).await?;
    ensure!(
        now != before,
        "recreating the log with the same partition count went unnoticed: the recreated log reports the old \
         identity {now}"
    );
    ensure!(now.partitions == 2, "the log recreated with 2 partitions reports {now}");
    // A restarted writer fills the new log to the old offsets.
    let log = must("reopen", h.reopen(log)).await?;
    for n in 0..4 {
        must("append to the recreated log", log.append(record(n, 0))).await?;
    }
    let current = must("current identity", log.current_identity()).await?;
    ensure!(current != before, "a reopened handle on the recreated log reports the old identity {current}");
    let earliest = must("earliest", log.earliest_offsets()).await?;
    let end = must("end", log.end_offsets()).await?;
    match marker.validate(&current, &earliest, &end) {
        Ok(()) => Err(format!("a marker of the old log {before} validated on the recreated log {current}")),
        Err(Error::LogChanged { .. }) => Ok(()),
        Err(e) => Err(format!("a marker of the old log was refused with {e}, not as a changed log")),
    }
}

/// Appends from many tasks at once are all acknowledged, and each key keeps its order.
pub async fn concurrent_appends_from_many_tasks<H: Harness>(h: &H) -> CheckResult {
    let log = Arc::new(must("open", h.fresh(4)).await?);
    let mut tasks = Vec::new();
    for task in 0..16u32 {
        let log = Arc::clone(&log);
        tasks.push(async move {
            let mut appended = Vec::new();
            for n in 0..25 {
                let r = record(100 + task, n);
                appended.push((must("append", log.append(r.clone())).await?, r));
            }
            Ok::<_, String>((task, appended))
        });
    }
    let mut done = Vec::new();
    for t in crate::join_all(tasks).await {
        done.push(t?);
    }
    let stored = contents(&*log).await?;
    let mut total = 0;
    for (task, appended) in done {
        total += appended.len();
        let p = appended[0].0.partition;
        ensure!(
            appended.iter().all(|(q, _)| q.partition == p),
            "task {task}'s key changed partition: {:?}",
            appended.iter().map(|(q, _)| q.partition).collect::<BTreeSet<_>>()
        );
        check_positions(&*log, &appended, &stored, &format!("task {task}")).await?;
        let prefix = format!("k{}-", 100 + task);
        let records = stored.get(p as usize).ok_or_else(|| format!("task {task}: no partition {p}"))?;
        let mine: Vec<String> =
            records.iter().filter(|(_, k, _)| k.starts_with(prefix.as_bytes())).map(|(_, k, _)| text(k)).collect();
        let want: Vec<String> = appended.iter().map(|(_, r)| text(&r.key)).collect();
        ensure!(mine == want, "task {task}'s records are not all there in order: {mine:?}");
    }
    ensure!(total == 16 * 25, "{total} appends acknowledged of {}", 16 * 25);
    Ok(())
}

/// A backend that reclaims keeps every record at or above the offsets it was given, with its
/// bytes, reports its new earliest offsets (a marker below them is then data loss), treats an
/// offset at or below the earliest as nothing to do and refuses one beyond the end; appends
/// go on at the end. A backend that cannot reclaim says so in its capabilities, fails the
/// call with [`Error::Unsupported`] and keeps everything.
pub async fn reclaim_keeps_what_it_must<H: Harness>(h: &H) -> CheckResult {
    let log = must("open", h.fresh(2)).await?;
    for n in 0..40 {
        must("append", log.append(record(n % 6, n))).await?;
    }
    let identity = log.identity().clone();
    let earliest = must("earliest offsets", log.earliest_offsets()).await?;
    let end = must("end offsets", log.end_offsets()).await?;
    let before = contents(&log).await?;
    let mid: Vec<u64> = earliest.iter().zip(&end).map(|(e, n)| e + (n.saturating_sub(*e)) / 2).collect();
    if !log.capabilities().reclaim {
        return match log.reclaim(&mid).await {
            Ok(got) => Err(format!("reclaim succeeded ({got:?}) although the capabilities say it is not supported")),
            Err(Error::Unsupported { .. }) => match must("earliest offsets", log.earliest_offsets()).await? {
                now if now == earliest => Ok(()),
                now => Err(format!("an unsupported reclaim moved the earliest offsets from {earliest:?} to {now:?}")),
            },
            Err(e) => Err(format!("a backend without reclaim must fail it with Error::Unsupported, got: {e}")),
        };
    }
    let got = must("reclaim", log.reclaim(&mid)).await?;
    let now = must("earliest offsets", log.earliest_offsets()).await?;
    if got != now {
        return Err(format!("reclaim returned earliest offsets {got:?}, but the log lists {now:?}"));
    }
    for p in 0..identity.partitions {
        let (was, asked, is) = (at(&earliest, p, "earliest")?, at(&mid, p, "reclaim")?, at(&now, p, "earliest")?);
        if is > asked || is < was {
            return Err(format!(
                "partition {p}: reclaiming below {asked} moved the earliest offset from {was} to {is} \
                 (it must stay within [{was}, {asked}])"
            ));
        }
        let kept = read_range(&log, p, asked, at(&end, p, "end")?).await?;
        let want: Records = before[p as usize].iter().filter(|(o, _, _)| *o >= asked).cloned().collect();
        if kept != want {
            return Err(format!(
                "partition {p}: records at or above the reclaim offset {asked} changed: read {} of {}",
                kept.len(),
                want.len()
            ));
        }
    }
    if now != earliest {
        let marker = Marker::new(identity.clone(), earliest.clone());
        match marker.validate(&identity, &now, &end) {
            Err(Error::DataLoss { .. }) => {}
            other => return Err(format!("a marker below the reclaimed offsets must be data loss, got {other:?}")),
        }
    }
    let again = must("reclaim at the earliest offsets", log.reclaim(&earliest)).await?;
    if again != now {
        return Err(format!("reclaiming at or below the earliest offsets moved them from {now:?} to {again:?}"));
    }
    let beyond: Vec<u64> = end.iter().map(|e| e + 1).collect();
    match log.reclaim(&beyond).await {
        Err(Error::OffsetBeyondEnd { .. }) => {}
        other => return Err(format!("reclaiming beyond the end must be OffsetBeyondEnd, got {other:?}")),
    }
    let p = must("append after reclaim", log.append(record(0, 99))).await?;
    let end_after = must("end offsets", log.end_offsets()).await?;
    if at(&end_after, p.partition, "end")? <= at(&end, p.partition, "end")? {
        return Err(format!("an append after reclaim did not advance the end: {end:?} then {end_after:?}"));
    }
    Ok(())
}

/// An unreachable backend gives an error, promptly — never a hang or a panic.
pub async fn unreachable_backend_fails_clearly<H: Harness>(h: &H) -> CheckResult {
    let outcome = crate::within(Duration::from_secs(120), async {
        match h.unreachable().await {
            Err(e) => Err(e),
            Ok(log) => log.append(record(9, 0)).await.map(|_| ()),
        }
    })
    .await
    .ok_or_else(|| "an unreachable backend hung for 120 s instead of failing".to_owned())?;
    match outcome {
        Ok(()) => Err("an append to an unreachable backend succeeded".to_owned()),
        Err(e) => {
            ensure!(!e.to_string().is_empty(), "the unreachable-backend error has no message");
            Ok(())
        }
    }
}
