//! A failed restore releases what it took: every error path returns only once each partition
//! reader it started has stopped, so that the embedded store's directory can be opened again
//! the moment the restore returns. Each error path (a corrupt record, a stalled read, the
//! overall deadline) runs 100 times; every reopen must succeed at once, and the failed restore
//! must leave the log and its current writer as they were.
#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use actionstate_core::{
    ActionId, Error, InvalidationReason, KeyId, LogRecord, Marker, StateKey, StateLog, Trigger, WireRecord, codec,
};
use actionstate_recovery::{ActionStateStore, AnyLog, LogConfig, Ownership, StoreConfig, StoreError};
use common::{PARTITIONS, SlowReads, at_marker, input, key, process, with_slow_reads};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const REPETITIONS: usize = 100;

async fn open(dir: &Path) -> Result<AnyLog, StoreError> {
    actionstate_recovery::open(&LogConfig::File(actionstate_file::FileConfig::new(dir.to_path_buf(), PARTITIONS))).await
}

/// A key whose records land in `partition`.
fn key_in(partition: u32, n: usize) -> KeyId {
    (0..)
        .map(|i| key(&format!("failed-rebuild-{partition}-{n}-{i}")))
        .find(|k| k.partition(PARTITIONS) == partition)
        .unwrap()
}

/// A tombstone of a state of `key`: a valid record that a rebuild reads and that changes
/// nothing.
fn tombstone(key: KeyId, n: u64) -> WireRecord {
    let state = StateKey::new(key, n, &ActionId::new("gone"), &input(0), &Trigger::Input);
    codec::encode(&LogRecord::Delete { key: state, reason: InvalidationReason::ProducerReplaced }).unwrap()
}

/// A data directory with a thousand records in each of partitions 1 to 3 and a few in
/// partition 0 (the first of them corrupt when `corrupt`); returns the marker of its start.
async fn data(dir: &Path, corrupt: bool) -> Marker {
    let log = Arc::new(open(dir).await.unwrap());
    let start = Marker::new(log.identity().clone(), vec![0; PARTITIONS as usize]);
    if corrupt {
        let mut record = tombstone(key_in(0, 0), 0);
        *record.value.last_mut().unwrap() ^= 0xff;
        log.append(record).await.unwrap();
    }
    let mut appends = tokio::task::JoinSet::new();
    for p in 0..PARTITIONS {
        let n = if p == 0 { 4 } else { 1_000 };
        let key = key_in(p, 0);
        for i in 0..n {
            let log = Arc::clone(&log);
            appends.spawn(async move { log.append(tombstone(key, i)).await.unwrap() });
        }
    }
    appends.join_all().await;
    let end = log.end_offsets().await.unwrap();
    assert!(end[1..].iter().all(|e| *e == 1_000), "a thousand records in the other partitions: {end:?}");
    start
}

/// Fails a restore `REPETITIONS` times as `config` and `first` make it fail, each time
/// dropping every handle and opening the directory again at once. Fails on any reopen that
/// does not succeed at once.
async fn fail_drop_reopen(first: SlowReads, corrupt: bool, config: StoreConfig, check: fn(&StoreError) -> bool) {
    let dir = tempfile::tempdir().unwrap();
    let start = at_marker(&data(dir.path(), corrupt).await);
    let mut failed_reopens = Vec::new();
    let mut log = open(dir.path()).await.unwrap();
    for i in 0..REPETITIONS {
        // The embedded store takes one handle at a time: the writer and the failing restore
        // share it.
        let shared = Arc::new(log);
        let writer = ActionStateStore::new(Arc::clone(&shared), config.clone());
        let k = key(&format!("kept-{i}"));
        process(&writer, k, 0, &input(1)).await.unwrap();
        let (before, end) = (writer.stats(), shared.end_offsets().await.unwrap());
        let restore = ActionStateStore::restore(
            with_slow_reads(Arc::clone(&shared), first),
            config.clone(),
            &Ownership::All,
            std::slice::from_ref(&start),
        );
        let err = restore.await.unwrap_err();
        assert!(check(&err), "repetition {i}: unexpected error {err}");
        // Nothing of the failed restore stays: no record in the log (no fence, so the writer is
        // still the owner), and the writer's index as it was.
        assert_eq!(shared.end_offsets().await.unwrap(), end, "repetition {i}: a failed restore appended to the log");
        assert_eq!(writer.stats(), before, "repetition {i}: a failed restore changed the writer's index");
        drop(writer);
        let handles = Arc::strong_count(&shared);
        assert_eq!(handles, 1, "repetition {i}: a failed restore kept a handle on the log");
        drop(shared);
        log = match open(dir.path()).await {
            Ok(log) => log,
            Err(e) => {
                failed_reopens.push(format!("repetition {i}: {e}"));
                // Wait for the handle to go, so that the next repetition runs.
                loop {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    if let Ok(log) = open(dir.path()).await {
                        break log;
                    }
                }
            }
        };
    }
    assert!(failed_reopens.is_empty(), "{} of {REPETITIONS} reopens failed: {failed_reopens:?}", failed_reopens.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuild_failed_by_a_corrupt_record_releases_the_log() {
    let config = StoreConfig { read_batch: 1, ..StoreConfig::default() };
    fail_drop_reopen(SlowReads::Never, true, config, |e| {
        matches!(e, StoreError::Log(Error::Corrupt { partition: 0, offset: 0, .. }))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_rebuild_releases_the_log() {
    let config = StoreConfig { read_batch: 1, rebuild_stall: Duration::from_millis(30), ..StoreConfig::default() };
    fail_drop_reopen(SlowReads::Hang(0), false, config, |e| {
        matches!(e, StoreError::RebuildStalled { partition: 0, .. })
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuild_past_its_deadline_releases_the_log() {
    let config = StoreConfig {
        read_batch: 1,
        rebuild_deadline: Some(Duration::from_millis(30)),
        rebuild_stall: Duration::from_secs(10),
        ..StoreConfig::default()
    };
    fail_drop_reopen(SlowReads::Pause(0, Duration::from_millis(20)), false, config, |e| {
        matches!(e, StoreError::RebuildDeadline { .. })
    })
    .await;
}
