//! The conformance suite rejects backends that break the contract: five logs around
//! [`MemoryLog`], each with one flaw, fail the check that must catch it; the memory log itself
//! passes every check.

#![allow(clippy::unwrap_used)]

use super::conformance::{self, CHECKS, ConformanceReport, Harness};
use crate::Faulty;
use actionstate_core::{Error, LogIdentity, Position, ReadBatch, StateLog, WireRecord};
use actionstate_memory::MemoryLog;

/// The in-memory log the flawed logs wrap, in the wrapper that takes it down for the
/// unreachable log.
type Mem = Faulty<MemoryLog>;

fn new_log(partitions: u32) -> Mem {
    Faulty::wrap(MemoryLog::new(partitions))
}

/// Another handle on the log of `log`, with its faults.
fn reopened(log: &Mem) -> Mem {
    log.with_inner(log.inner().reopen())
}
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// The one rule a [`BrokenLog`] breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flaw {
    /// A reopened log has lost the last append (acknowledged before the reopen).
    DropsLastAppendOnReopen,
    /// Reads return the records of a partition in another order than appended (each pair of
    /// neighbours swapped, at the offsets they were read at).
    ReordersPartition,
    /// Reads ignore their bound `to` and return records at or past it.
    IgnoresReadBound,
    /// End offsets are one short of the last record.
    EndOneShort,
    /// The identity names the log, not its incarnation: a log recreated with the same
    /// partition count reports the old identity.
    KeepsIdentityOnRecreate,
}

/// The suite's harness of the in-memory log, which the flawed logs below wrap.
#[derive(Debug)]
struct MemoryHarness;

impl Harness for MemoryHarness {
    type Log = Mem;

    async fn fresh(&self, partitions: u32) -> Result<Mem, Error> {
        Ok(new_log(partitions))
    }

    async fn reopen(&self, log: Mem) -> Result<Mem, Error> {
        Ok(reopened(&log))
    }

    async fn recreate(&self, log: Mem, partitions: u32) -> Result<Mem, Error> {
        log.inner().recreate(partitions);
        Ok(log)
    }

    async fn unreachable(&self) -> Result<Mem, Error> {
        let log = new_log(1);
        log.faults().set_down(true);
        Ok(log)
    }
}

static NEXT_NAME: AtomicU64 = AtomicU64::new(0);

/// A [`MemoryLog`] with one [`Flaw`].
#[derive(Debug)]
struct BrokenLog {
    inner: Mem,
    flaw: Flaw,
    /// The identity it reports (kept across a lossy reopen; a name only, with
    /// [`Flaw::KeepsIdentityOnRecreate`]).
    identity: LogIdentity,
    /// Every append acknowledged, in order (what a lossy reopen replays, all but the last).
    appended: Arc<Mutex<Vec<WireRecord>>>,
}

impl BrokenLog {
    fn new(inner: Mem, flaw: Flaw, name: &str) -> Self {
        let identity = match flaw {
            Flaw::KeepsIdentityOnRecreate => {
                LogIdentity { backend: "broken".into(), id: name.to_owned(), partitions: inner.identity().partitions }
            }
            _ => inner.identity().clone(),
        };
        BrokenLog { inner, flaw, identity, appended: Arc::default() }
    }
}

impl StateLog for BrokenLog {
    fn identity(&self) -> &LogIdentity {
        &self.identity
    }

    async fn current_identity(&self) -> Result<LogIdentity, Error> {
        let now = self.inner.current_identity().await?;
        Ok(match self.flaw {
            Flaw::KeepsIdentityOnRecreate => LogIdentity { partitions: now.partitions, ..self.identity.clone() },
            Flaw::DropsLastAppendOnReopen => self.identity.clone(),
            _ => now,
        })
    }

    async fn append(&self, record: WireRecord) -> Result<Position, Error> {
        let p = self.inner.append(record.clone()).await?;
        self.appended.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(record);
        Ok(p)
    }

    async fn earliest_offsets(&self) -> Result<Vec<u64>, Error> {
        self.inner.earliest_offsets().await
    }

    async fn end_offsets(&self) -> Result<Vec<u64>, Error> {
        let end = self.inner.end_offsets().await?;
        Ok(match self.flaw {
            Flaw::EndOneShort => end.into_iter().map(|e| e.saturating_sub(1)).collect(),
            _ => end,
        })
    }

    async fn read(&self, partition: u32, from: u64, to: u64, max: usize) -> Result<ReadBatch, Error> {
        match self.flaw {
            Flaw::IgnoresReadBound => {
                let end = self.inner.end_offsets().await?;
                let to = end.get(partition as usize).copied().unwrap_or(to).max(to);
                self.inner.read(partition, from, to, max).await
            }
            Flaw::ReordersPartition => {
                let mut batch = self.inner.read(partition, from, to, max).await?;
                for pair in batch.records.chunks_exact_mut(2) {
                    let (a, b) = pair.split_at_mut(1);
                    std::mem::swap(&mut a[0].key, &mut b[0].key);
                    std::mem::swap(&mut a[0].value, &mut b[0].value);
                }
                Ok(batch)
            }
            _ => self.inner.read(partition, from, to, max).await,
        }
    }
}

/// Opens [`BrokenLog`]s with one flaw; otherwise the [`MemoryHarness`].
#[derive(Debug)]
struct BrokenHarness(Flaw);

impl Harness for BrokenHarness {
    type Log = BrokenLog;

    async fn fresh(&self, partitions: u32) -> Result<BrokenLog, Error> {
        let name = format!("broken-{}", NEXT_NAME.fetch_add(1, Ordering::Relaxed));
        Ok(BrokenLog::new(new_log(partitions), self.0, &name))
    }

    async fn reopen(&self, log: BrokenLog) -> Result<BrokenLog, Error> {
        if log.flaw != Flaw::DropsLastAppendOnReopen {
            return Ok(BrokenLog { inner: reopened(&log.inner), ..log });
        }
        // Everything but the last acknowledged append, replayed into a log of its own.
        let inner = new_log(log.identity.partitions);
        let mut appended = log.appended.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        appended.pop();
        for r in &appended {
            inner.append(r.clone()).await?;
        }
        Ok(BrokenLog { inner, appended: Arc::new(Mutex::new(appended)), ..log })
    }

    async fn recreate(&self, log: BrokenLog, partitions: u32) -> Result<BrokenLog, Error> {
        log.inner.inner().recreate(partitions);
        let name = log.identity.id.clone();
        Ok(BrokenLog::new(reopened(&log.inner), log.flaw, &name))
    }

    async fn unreachable(&self) -> Result<BrokenLog, Error> {
        let log = MemoryHarness.unreachable().await?;
        Ok(BrokenLog::new(log, self.0, "unreachable"))
    }
}

/// Runs the suite on a log with `flaw` and checks that `check` (and perhaps others) failed.
async fn rejected(flaw: Flaw, check: &str) -> ConformanceReport {
    assert!(CHECKS.contains(&check), "no check {check}");
    let report = conformance::run_all(&BrokenHarness(flaw)).await;
    eprintln!("{flaw:?}: {report}");
    assert!(!report.passed(), "a log that {flaw:?} passed the suite");
    assert!(report.failure(check).is_some(), "a log that {flaw:?} passed {check}: {report}");
    assert!(report.to_string().contains(check), "the report does not name {check}: {report}");
    report
}

#[tokio::test]
async fn the_memory_log_passes_every_check() {
    let report = conformance::run_all(&MemoryHarness).await;
    assert_eq!(report.failures, vec![], "{report}");
    assert_eq!(report.checks, CHECKS);
    assert!(report.passed());
    assert_eq!(report.to_string(), format!("conformance: all {} checks passed", CHECKS.len()));
    report.assert_passed();
}

#[tokio::test]
async fn conformance_rejects_a_log_that_drops_the_last_append_on_reopen() {
    let report = rejected(Flaw::DropsLastAppendOnReopen, "acknowledged_appends_survive_reopen").await;
    let message = report.failure("acknowledged_appends_survive_reopen").unwrap();
    assert!(message.contains("k11-119") && message.contains("after reopen"), "{message}");
}

#[tokio::test]
async fn conformance_rejects_a_log_that_reorders_a_partition() {
    let report = rejected(Flaw::ReordersPartition, "per_partition_order").await;
    let message = report.failure("per_partition_order").unwrap();
    assert!(message.contains("read order differs from append order"), "{message}");
}

#[tokio::test]
async fn conformance_rejects_a_log_that_ignores_the_read_bound() {
    let report = rejected(Flaw::IgnoresReadBound, "reads_stop_at_the_captured_end").await;
    let message = report.failure("reads_stop_at_the_captured_end").unwrap();
    assert!(message.contains("record at offset 10 outside the range [0, 10)"), "{message}");
    // The progress check sees it too, with the bound it passed.
    assert!(report.failure("reads_make_progress_and_skip_nothing").is_some(), "{report}");
}

#[tokio::test]
async fn conformance_rejects_a_log_whose_end_offset_is_one_short() {
    let report = rejected(Flaw::EndOneShort, "end_and_earliest_offsets").await;
    let message = report.failure("end_and_earliest_offsets").unwrap();
    assert!(message.contains("is not the") && message.contains("records appended"), "{message}");
}

#[tokio::test]
async fn conformance_rejects_a_log_that_keeps_its_identity_when_recreated() {
    let report = rejected(Flaw::KeepsIdentityOnRecreate, "recreation_with_the_same_partition_count_is_detected").await;
    let message = report.failure("recreation_with_the_same_partition_count_is_detected").unwrap();
    assert!(message.contains("went unnoticed"), "{message}");
    // Only the same partition count goes unnoticed: another count changes the identity.
    assert_eq!(report.failures.len(), 1, "{report}");
}

/// A check that panics (here: a harness that cannot open logs) fails under its own name; the
/// others still run.
#[tokio::test]
async fn a_panicking_check_is_a_named_failure() {
    #[derive(Debug)]
    struct Panics;
    impl Harness for Panics {
        type Log = Mem;
        async fn fresh(&self, partitions: u32) -> Result<Mem, Error> {
            assert!(partitions != 3, "no logs of 3 partitions here");
            Ok(new_log(partitions))
        }
        async fn reopen(&self, log: Mem) -> Result<Mem, Error> {
            MemoryHarness.reopen(log).await
        }
        async fn recreate(&self, log: Mem, partitions: u32) -> Result<Mem, Error> {
            MemoryHarness.recreate(log, partitions).await
        }
        async fn unreachable(&self) -> Result<Mem, Error> {
            MemoryHarness.unreachable().await
        }
    }
    let report = conformance::run_all(&Panics).await;
    assert_eq!(report.checks, CHECKS);
    assert_eq!(report.failures.len(), 1, "{report}");
    assert_eq!(report.failures[0].check, "per_partition_order");
    assert!(report.failures[0].message.contains("panicked: no logs of 3 partitions here"), "{report}");
    let panic = std::panic::catch_unwind(|| report.assert_passed()).unwrap_err();
    let text = panic.downcast_ref::<String>().unwrap();
    assert!(
        text.contains(&format!("1 of {} checks failed", CHECKS.len())) && text.contains("per_partition_order"),
        "{text}"
    );
}
