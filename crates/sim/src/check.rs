//! The final check of a run: acknowledged completions missing from the log.

use crate::ledger::Ledger;
use crate::source::LogSource;
use crate::zombie::fenced_out;
use actionstate_core::{KeyId, LogRecord, RangeRead, StateKey, StateLog, codec};
use actionstate_recovery::{Ownership, StoreError};
use std::collections::{HashMap, HashSet};

/// Replays the whole log of `source` into a fresh index and counts acknowledged completions
/// that are missing, except in rounds whose history was changed on purpose and in rounds
/// `reclaimable` says a retained checkpoint completed (retention may have reclaimed them).
pub(crate) async fn lost_acknowledged<S: LogSource>(
    source: &S,
    ledger: &Ledger,
    changed: &HashMap<KeyId, u64>,
    reclaimable: &HashMap<KeyId, u64>,
) -> Result<u64, StoreError> {
    let log = source.open().await?;
    let end = log.end_offsets().await?;
    let earliest = log.earliest_offsets().await?;
    let mut present: HashSet<StateKey> = HashSet::new();
    let mut gone: HashSet<StateKey> = HashSet::new();
    for (p, (&from, &to)) in (0u32..).zip(earliest.iter().zip(&end)) {
        // A fenced writer's records are not history (checked by scanning, not by the
        // store's rule).
        let mut fences: Vec<(Ownership, u64)> = Vec::new();
        let mut range = RangeRead::new(p, from, to, 4096);
        while let Some(records) = range.next_batch(&log).await? {
            for r in &records {
                let record = codec::decode(&r.key, &r.value).map_err(|e| e.at(p, r.offset))?;
                let epoch = codec::writer_epoch(&r.value).map_err(|e| e.at(p, r.offset))?;
                if fenced_out(&fences, &record.key_id(), epoch) && !matches!(record, LogRecord::Fence(_)) {
                    continue;
                }
                match record {
                    LogRecord::Fence(f) => fences.push((f.groups, f.epoch)),
                    LogRecord::Upsert(s) if s.is_completed() => {
                        gone.remove(&s.key);
                        present.insert(s.key);
                    }
                    LogRecord::Delete { key, .. } => {
                        present.remove(&key);
                        gone.insert(key);
                    }
                    _ => {}
                }
            }
        }
    }
    let lost = ledger
        .acked()
        .iter()
        .filter(|k| !present.contains(k))
        .filter(|k| changed.get(&k.key).is_none_or(|from| k.seq < *from))
        .filter(|k| reclaimable.get(&k.key).is_none_or(|upto| k.seq > *upto))
        .count();
    Ok(lost as u64)
}
