//! The backend conformance suite: public async checks every [`StateLog`] implementation runs.
//!
//! A backend provides a [`Harness`] that opens fresh logs, reopens them and recreates them;
//! each check panics with a message naming the violated rule, so it can be called from any
//! test:
//!
//! ```
//! use actionstate_recovery::testkit::{MemoryHarness, conformance};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // In a backend's tests: `#[tokio::test] async fn conforms() { ... }` with its own harness.
//! conformance::run_all(&MemoryHarness).await;
//! # }
//! ```

use actionstate_core::{Error, KeyId, LogIdentity, Marker, Position, StateLog, WireRecord};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// How the suite reaches a backend.
pub trait Harness: Send + Sync {
    /// The backend's log type.
    type Log: StateLog;

    /// Opens a new, empty log with `partitions` partitions (a new topic, table or directory on
    /// every call).
    fn fresh(&self, partitions: u32) -> impl Future<Output = Result<Self::Log, Error>> + Send;

    /// Drops `log` and opens the same log again, as a restarted process would.
    fn reopen(&self, log: Self::Log) -> impl Future<Output = Result<Self::Log, Error>> + Send;

    /// Deletes the log behind `log` and creates it again under the same name with
    /// `partitions` partitions. Returns a handle on the log: the old handle where the backend
    /// lets it outlive the recreation (a topic recreated under a running client), or a new
    /// one where it cannot (an embedded store whose handle must be closed before its files are
    /// deleted). The suite captures the old identity before calling this and compares it with
    /// [`StateLog::current_identity`] of the returned handle, never with its
    /// [`StateLog::identity`].
    fn recreate(&self, log: Self::Log, partitions: u32) -> impl Future<Output = Result<Self::Log, Error>> + Send;

    /// Opens a log whose backend cannot be reached (a closed port, an inaccessible path). May
    /// fail right away; if it returns a handle, its operations must fail.
    fn unreachable(&self) -> impl Future<Output = Result<Self::Log, Error>> + Send;
}

/// Runs every check of the suite, in order, each on a fresh log.
pub async fn run_all<H: Harness>(h: &H) {
    acknowledged_appends_survive_reopen(h).await;
    per_partition_order(h).await;
    end_and_earliest_offsets(h).await;
    reads_stop_at_the_captured_end(h).await;
    partition_set_change_is_detected(h).await;
    concurrent_appends_from_many_tasks(h).await;
    unreachable_backend_fails_clearly(h).await;
}

fn record(key: u32, n: u32) -> WireRecord {
    let key_id = KeyId::of(format!("conformance-key-{key}").as_bytes());
    WireRecord { key_id, key: format!("k{key}-{n}").into_bytes(), value: format!("value {key}/{n}").into_bytes() }
}

async fn must<T>(what: &str, f: impl Future<Output = Result<T, Error>>) -> T {
    match f.await {
        Ok(v) => v,
        Err(e) => panic!("conformance: {what} failed: {e}"),
    }
}

/// Reads `[from, to)` of one partition completely.
pub async fn read_all<L: StateLog>(log: &L, partition: u32, from: u64, to: u64) -> Vec<(u64, Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    let mut next = from;
    while next < to {
        let batch = must("read", log.read(partition, next, to, 64)).await;
        assert!(
            batch.next > next || !batch.records.is_empty(),
            "conformance: read of partition {partition} made no progress at {next}"
        );
        for r in batch.records {
            assert!(
                r.offset >= next && r.offset < to,
                "conformance: read returned offset {} outside [{next}, {to})",
                r.offset
            );
            out.push((r.offset, r.key, r.value));
        }
        next = batch.next;
    }
    out
}

/// Every acknowledged append is readable, with its bytes, at its position after a reopen.
pub async fn acknowledged_appends_survive_reopen<H: Harness>(h: &H) {
    let log = must("open", h.fresh(4)).await;
    let mut acked: Vec<(Position, WireRecord)> = Vec::new();
    for n in 0..120 {
        let r = record(n % 12, n);
        let p = must("append", log.append(r.clone())).await;
        acked.push((p, r));
    }
    let log = must("reopen", h.reopen(log)).await;
    let end = must("end offsets", log.end_offsets()).await;
    for (p, r) in &acked {
        if !p.exact {
            continue;
        }
        let got = read_all(&log, p.partition, p.offset, p.offset + 1).await;
        assert_eq!(got.len(), 1, "conformance: acknowledged record at {p:?} not readable after reopen (end {end:?})");
        assert_eq!((&got[0].1, &got[0].2), (&r.key, &r.value), "conformance: record at {p:?} changed after reopen");
    }
    let mut per_partition: BTreeMap<u32, Vec<Vec<u8>>> = BTreeMap::new();
    for (p, r) in &acked {
        per_partition.entry(p.partition).or_default().push(r.key.clone());
    }
    let earliest = must("earliest offsets", log.earliest_offsets()).await;
    for (partition, keys) in per_partition {
        let got = read_all(&log, partition, earliest[partition as usize], end[partition as usize]).await;
        let got: Vec<Vec<u8>> = got.into_iter().map(|(_, k, _)| k).collect();
        assert_eq!(
            got, keys,
            "conformance: partition {partition} after reopen does not hold exactly the acknowledged records in order"
        );
    }
}

/// Records of one key land in one partition, in append order, at increasing offsets.
pub async fn per_partition_order<H: Harness>(h: &H) {
    let log = must("open", h.fresh(3)).await;
    let mut positions = Vec::new();
    for n in 0..50 {
        positions.push(must("append", log.append(record(7, n))).await);
    }
    let partition = positions[0].partition;
    assert!(
        positions.iter().all(|p| p.partition == partition),
        "conformance: one key's records spread over partitions: {positions:?}"
    );
    assert_eq!(partition, record(7, 0).key_id.partition(3), "conformance: partition is not KeyId::partition");
    for w in positions.windows(2) {
        assert!(
            w[1].offset > w[0].offset || !w[1].exact,
            "conformance: offsets do not increase: {:?} then {:?}",
            w[0],
            w[1]
        );
    }
    let earliest = must("earliest", log.earliest_offsets()).await[partition as usize];
    let end = must("end", log.end_offsets()).await[partition as usize];
    let got: Vec<Vec<u8>> = read_all(&log, partition, earliest, end).await.into_iter().map(|(_, k, _)| k).collect();
    let want: Vec<Vec<u8>> = (0..50).map(|n| record(7, n).key).collect();
    assert_eq!(got, want, "conformance: read order differs from append order");
}

/// End and earliest offsets bracket exactly the appended records.
pub async fn end_and_earliest_offsets<H: Harness>(h: &H) {
    let log = must("open", h.fresh(2)).await;
    let e0 = must("earliest", log.earliest_offsets()).await;
    let n0 = must("end", log.end_offsets()).await;
    assert_eq!(e0.len(), 2, "conformance: earliest offsets must cover every partition");
    assert_eq!(n0.len(), 2, "conformance: end offsets must cover every partition");
    assert_eq!(e0, n0, "conformance: a fresh log must be empty (earliest == end)");
    let mut counts = [0u64; 2];
    for n in 0..40 {
        let p = must("append", log.append(record(n % 5, n))).await;
        counts[p.partition as usize] += 1;
    }
    let e1 = must("earliest", log.earliest_offsets()).await;
    let n1 = must("end", log.end_offsets()).await;
    for p in 0..2 {
        assert_eq!(e1[p], e0[p], "conformance: earliest offset moved without cleanup");
        assert_eq!(n1[p] - e1[p], counts[p], "conformance: end - earliest of partition {p} != records appended");
        let got = read_all(&log, p as u32, e1[p], n1[p]).await;
        assert_eq!(got.len() as u64, counts[p], "conformance: partition {p} does not read back every record");
    }
}

/// A read bounded by an end offset captured earlier stops there, whatever was appended since.
pub async fn reads_stop_at_the_captured_end<H: Harness>(h: &H) {
    let log = must("open", h.fresh(1)).await;
    for n in 0..10 {
        must("append", log.append(record(1, n))).await;
    }
    let end = must("end", log.end_offsets()).await[0];
    for n in 10..25 {
        must("append", log.append(record(1, n))).await;
    }
    let earliest = must("earliest", log.earliest_offsets()).await[0];
    let got = read_all(&log, 0, earliest, end).await;
    assert_eq!(got.len(), 10, "conformance: read past the captured end offset");
    assert!(got.iter().all(|(o, _, _)| *o < end), "conformance: a record at or past the captured end was returned");
}

/// A recreated log (new identity or partition count) is reported, and markers of the old log
/// are refused.
pub async fn partition_set_change_is_detected<H: Harness>(h: &H) {
    let log = must("open", h.fresh(2)).await;
    must("append", log.append(record(3, 0))).await;
    let before: LogIdentity = log.identity().clone();
    let end = must("end", log.end_offsets()).await;
    let marker = Marker { log: before.clone(), offsets: end };
    let log = must("recreate", h.recreate(log, 3)).await;
    let now = must("current identity", log.current_identity()).await;
    assert_ne!(now, before, "conformance: recreating the log with another partition count went unnoticed");
    let earliest = must("earliest", log.earliest_offsets()).await;
    let end = must("end", log.end_offsets()).await;
    let err = marker.validate(&now, &earliest, &end).expect_err("conformance: a marker of the old log validated");
    assert!(matches!(err, Error::LogChanged { .. }), "conformance: expected LogChanged, got {err}");
}

/// Appends from many tasks at once are all acknowledged, and each key keeps its order.
pub async fn concurrent_appends_from_many_tasks<H: Harness>(h: &H) {
    let log = Arc::new(must("open", h.fresh(4)).await);
    let mut tasks = Vec::new();
    for task in 0..16u32 {
        let log = Arc::clone(&log);
        tasks.push(tokio::spawn(async move {
            let mut positions = Vec::new();
            for n in 0..25 {
                positions.push(must("append", log.append(record(100 + task, n))).await);
            }
            (task, positions)
        }));
    }
    let mut total = 0;
    for t in tasks {
        let (task, positions) = t.await.expect("conformance: append task panicked");
        total += positions.len();
        for w in positions.windows(2) {
            assert_eq!(w[0].partition, w[1].partition, "conformance: task {task}'s key changed partition");
            assert!(w[1].offset > w[0].offset || !w[1].exact, "conformance: task {task}'s offsets do not increase");
        }
        let p = positions[0].partition;
        let earliest = must("earliest", log.earliest_offsets()).await[p as usize];
        let end = must("end", log.end_offsets()).await[p as usize];
        let mine: Vec<Vec<u8>> = read_all(&*log, p, earliest, end)
            .await
            .into_iter()
            .map(|(_, k, _)| k)
            .filter(|k| k.starts_with(format!("k{}-", 100 + task).as_bytes()))
            .collect();
        let want: Vec<Vec<u8>> = (0..25).map(|n| record(100 + task, n).key).collect();
        assert_eq!(mine, want, "conformance: task {task}'s records are not all there in order");
    }
    assert_eq!(total, 16 * 25);
}

/// An unreachable backend gives an error, promptly — never a hang or a panic.
pub async fn unreachable_backend_fails_clearly<H: Harness>(h: &H) {
    let outcome = tokio::time::timeout(Duration::from_secs(120), async {
        match h.unreachable().await {
            Err(e) => Err(e),
            Ok(log) => log.append(record(9, 0)).await.map(|_| ()),
        }
    })
    .await
    .expect("conformance: an unreachable backend hung for 120 s instead of failing");
    let err = outcome.expect_err("conformance: an append to an unreachable backend succeeded");
    assert!(!err.to_string().is_empty(), "conformance: the unreachable-backend error has no message");
}
