//! The `StateLog` contract on the file backend, and its open-time errors.
#![allow(clippy::unwrap_used, reason = "tests")]

use actionstate_core::{Error, KeyId, Marker, Position, RangeRead, ReadRecord, StateLog, WireRecord};
use actionstate_file::{DB_FILE_NAME, FileConfig, FileError, FileLog};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

const PARTITIONS: u32 = 4;

fn open(dir: &Path) -> FileLog {
    FileLog::open(FileConfig::new(dir, PARTITIONS)).unwrap()
}

fn rec(key: &str, n: u64) -> WireRecord {
    WireRecord {
        key_id: KeyId::of(key.as_bytes()),
        key: format!("{key}/key").into_bytes(),
        value: format!("{key}/{n}").into_bytes(),
    }
}

/// A business key that lands in `partition`.
fn key_in(partition: u32, salt: &str) -> String {
    (0..).map(|i| format!("{salt}-{i}")).find(|k| KeyId::of(k.as_bytes()).partition(PARTITIONS) == partition).unwrap()
}

/// Reads `[from, to)` batch by batch; `RangeRead` fails on a batch that breaks the read rules
/// (no progress, more than `max` records, a record out of range or order).
async fn read_all(log: &FileLog, partition: u32, from: u64, to: u64, max: usize) -> Vec<ReadRecord> {
    let mut out = Vec::new();
    let mut range = RangeRead::new(partition, from, to, max);
    while let Some(records) = range.next_batch(log).await.unwrap() {
        out.extend(records);
    }
    out
}

#[tokio::test]
async fn append_read_order_end_earliest() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    assert_eq!(log.end_offsets().await.unwrap(), vec![0; 4]);
    assert_eq!(log.earliest_offsets().await.unwrap(), vec![0; 4]);

    let mut expected: HashMap<u32, Vec<WireRecord>> = HashMap::new();
    for n in 0..120 {
        let record = rec(&format!("key-{}", n % 10), n);
        let position = log.append(record.clone()).await.unwrap();
        let list = expected.entry(position.partition).or_default();
        assert_eq!(
            position,
            Position { partition: record.key_id.partition(PARTITIONS), offset: list.len() as u64, exact: true }
        );
        list.push(record);
    }
    let end = log.end_offsets().await.unwrap();
    assert_eq!(log.earliest_offsets().await.unwrap(), vec![0; 4]);
    for p in 0..PARTITIONS {
        let want = expected.remove(&p).unwrap_or_default();
        assert_eq!(end[p as usize], want.len() as u64);
        let got = read_all(&log, p, 0, end[p as usize], 7).await;
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.offset, i as u64);
            assert_eq!(g.key, w.key);
            assert_eq!(g.value, w.value);
        }
        // A sub-range, and an empty one.
        if end[p as usize] >= 3 {
            let batch = log.read(p, 1, 3, 100).await.unwrap();
            assert_eq!(batch.records.iter().map(|r| r.offset).collect::<Vec<_>>(), vec![1, 2]);
            assert_eq!(batch.next, 3);
        }
        let empty = log.read(p, end[p as usize], end[p as usize], 10).await.unwrap();
        assert!(empty.records.is_empty());
        assert!(empty.next >= end[p as usize]);
    }
    assert_eq!(log.identity(), &log.current_identity().await.unwrap());
    assert_eq!(log.identity().backend, "file");
    assert_eq!(log.identity().partitions, PARTITIONS);
}

#[tokio::test]
async fn reopen_keeps_acknowledged_appends() {
    let dir = tempfile::tempdir().unwrap();
    let mut acked = Vec::new();
    let identity = {
        let log = open(dir.path());
        for n in 0..50 {
            let record = rec(&format!("k{}", n % 3), n);
            acked.push((log.append(record.clone()).await.unwrap(), record));
        }
        log.identity().clone()
    };
    let log = open(dir.path());
    assert_eq!(log.identity(), &identity, "the directory keeps its identity");
    assert_eq!(log.current_identity().await.unwrap(), identity);
    for (position, record) in &acked {
        let batch = log.read(position.partition, position.offset, position.offset + 1, 1).await.unwrap();
        assert_eq!(batch.records.len(), 1);
        assert_eq!(batch.records[0].key, record.key);
        assert_eq!(batch.records[0].value, record.value);
    }
    // Appends continue after the last acknowledged offset.
    let next = log.append(rec("k0", 99)).await.unwrap();
    let before = acked.iter().filter(|(p, _)| p.partition == next.partition).count() as u64;
    assert_eq!(next.offset, before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_keep_per_partition_order() {
    const TASKS: u64 = 16;
    const PER_TASK: u64 = 40;
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(open(dir.path()));
    let mut handles = Vec::new();
    for t in 0..TASKS {
        let log = log.clone();
        handles.push(tokio::spawn(async move {
            let mut positions = Vec::new();
            for n in 0..PER_TASK {
                positions.push(log.append(rec(&format!("task-{t}"), n)).await.unwrap());
            }
            positions
        }));
    }
    let mut acked = 0;
    for handle in handles {
        let positions = handle.await.unwrap();
        // One task's appends land in one partition, at increasing offsets.
        assert!(positions.windows(2).all(|w| w[0].partition == w[1].partition && w[0].offset < w[1].offset));
        acked += positions.len() as u64;
    }
    assert_eq!(acked, TASKS * PER_TASK);
    let end = log.end_offsets().await.unwrap();
    assert_eq!(end.iter().sum::<u64>(), TASKS * PER_TASK);
    let mut seen: HashMap<String, u64> = HashMap::new();
    for p in 0..PARTITIONS {
        let records = read_all(&log, p, 0, end[p as usize], 1000).await;
        for (i, r) in records.iter().enumerate() {
            assert_eq!(r.offset, i as u64, "offsets are dense");
            let value = String::from_utf8(r.value.clone()).unwrap();
            let (task, n) = value.split_once('/').unwrap();
            let n: u64 = n.parse().unwrap();
            let next = seen.entry(task.to_string()).or_insert(0);
            assert_eq!(n, *next, "records of {task} out of order in partition {p}");
            *next += 1;
        }
    }
    assert_eq!(seen.len() as u64, TASKS);
    assert!(seen.values().all(|&n| n == PER_TASK));
}

#[tokio::test]
async fn read_stops_at_captured_end() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    let key = key_in(2, "stop");
    for n in 0..10 {
        log.append(rec(&key, n)).await.unwrap();
    }
    let captured = log.end_offsets().await.unwrap()[2];
    assert_eq!(captured, 10);
    for n in 10..25 {
        log.append(rec(&key, n)).await.unwrap();
    }
    let batch = log.read(2, 0, captured, 1000).await.unwrap();
    assert_eq!(batch.records.len(), 10);
    assert_eq!(batch.next, captured);
    let batched = read_all(&log, 2, 0, captured, 3).await;
    assert_eq!(batched.len(), 10);
    assert_eq!(batched.last().unwrap().value, format!("{key}/9").into_bytes());
    // A batch that fills `max` continues right after its last record.
    let first = log.read(2, 0, captured, 4).await.unwrap();
    assert_eq!(first.next, 4);
}

#[tokio::test]
async fn unknown_partition_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    let err = log.read(PARTITIONS, 0, 1, 10).await.unwrap_err();
    assert!(matches!(err, Error::UnknownPartition { partition: 4, partitions: 4, .. }), "{err}");
    let err = log.truncate_before(7, 0).await.unwrap_err();
    assert!(matches!(err, Error::UnknownPartition { partition: 7, .. }), "{err}");
}

#[test]
fn zero_partitions_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = FileLog::open(FileConfig::new(dir.path(), 0)).unwrap_err();
    assert!(matches!(err, FileError::NoPartitions { .. }), "{err}");
}

#[test]
fn unknown_format_version_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path()));
    let path = dir.path().join(DB_FILE_NAME);
    {
        let db = redb::Database::open(&path).unwrap();
        let txn = db.begin_write().unwrap();
        let meta: redb::TableDefinition<'_, &str, &[u8]> = redb::TableDefinition::new("meta");
        txn.open_table(meta).unwrap().insert("format", 99u32.to_le_bytes().as_slice()).unwrap();
        txn.commit().unwrap();
    }
    let err = FileLog::open(FileConfig::new(dir.path(), PARTITIONS)).unwrap_err();
    match &err {
        FileError::UnknownFormat { path: p, found: 99, supported: 1 } => assert_eq!(p, &path),
        other => panic!("expected UnknownFormat, got {other:?}"),
    }
    assert!(err.to_string().contains(&path.display().to_string()), "{err}");
    let core: Error = err.into();
    assert!(!core.is_retryable());
    assert!(matches!(core, Error::Backend(_)));
}

fn garbage(len: usize) -> Vec<u8> {
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x.to_le_bytes()[0]
        })
        .collect()
}

#[tokio::test]
async fn corrupted_file_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = open(dir.path());
        for n in 0..20 {
            log.append(rec("c", n)).await.unwrap();
        }
    }
    let path = dir.path().join(DB_FILE_NAME);
    let len = std::fs::metadata(&path).unwrap().len() as usize;
    std::fs::write(&path, garbage(len)).unwrap();
    let err = FileLog::open(FileConfig::new(dir.path(), PARTITIONS)).unwrap_err();
    match &err {
        FileError::Corrupt { path: p, .. } => assert_eq!(p, &path),
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert!(err.to_string().contains(&path.display().to_string()), "{err}");
    let core: Error = err.into();
    assert!(!core.is_retryable());
}

#[test]
fn non_database_file_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(DB_FILE_NAME);
    std::fs::write(&path, b"this is not a database\n").unwrap();
    let err = FileLog::open(FileConfig::new(dir.path(), PARTITIONS)).unwrap_err();
    match &err {
        FileError::Corrupt { path: p, .. } => assert_eq!(p, &path),
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

#[test]
fn partition_count_change_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path()));
    let err = FileLog::open(FileConfig::new(dir.path(), 8)).unwrap_err();
    match &err {
        FileError::PartitionsChanged { stored: 4, requested: 8, path } => {
            assert_eq!(path, &dir.path().join(DB_FILE_NAME));
        }
        other => panic!("expected PartitionsChanged, got {other:?}"),
    }
    let core: Error = err.into();
    assert!(matches!(core, Error::LogChanged { .. }), "{core}");
    // The original count still opens.
    assert_eq!(open(dir.path()).identity().partitions, PARTITIONS);
}

#[test]
fn second_open_of_a_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let _first = open(dir.path());
    let err = FileLog::open(FileConfig::new(dir.path(), PARTITIONS)).unwrap_err();
    assert!(matches!(err, FileError::Locked { .. }), "{err}");
}

#[tokio::test]
async fn truncate_before_advances_earliest() {
    let dir = tempfile::tempdir().unwrap();
    let key = key_in(1, "trunc");
    let identity = {
        let log = open(dir.path());
        for n in 0..10 {
            log.append(rec(&key, n)).await.unwrap();
        }
        assert_eq!(log.truncate_before(1, 4).await.unwrap(), 4);
        // Moving it backwards is a no-op.
        assert_eq!(log.truncate_before(1, 2).await.unwrap(), 4);
        let err = log.truncate_before(1, 11).await.unwrap_err();
        assert!(matches!(err, Error::OffsetBeyondEnd { partition: 1, offset: 11, end: 10 }), "{err}");
        assert_eq!(log.earliest_offsets().await.unwrap(), vec![0, 4, 0, 0]);
        let records = read_all(&log, 1, 0, 10, 100).await;
        assert_eq!(records.first().unwrap().offset, 4);
        assert_eq!(records.len(), 6);

        let earliest = log.earliest_offsets().await.unwrap();
        let end = log.end_offsets().await.unwrap();
        let marker = Marker::new(log.identity().clone(), vec![0, 2, 0, 0]);
        let err = marker.validate(log.identity(), &earliest, &end).unwrap_err();
        assert!(matches!(err, Error::DataLoss { partition: 1, offset: 2, earliest: 4 }), "{err}");
        log.identity().clone()
    };
    let log = open(dir.path());
    assert_eq!(log.identity(), &identity);
    assert_eq!(log.earliest_offsets().await.unwrap(), vec![0, 4, 0, 0]);
    // Truncating everything keeps the end: offsets are never reused.
    assert_eq!(log.truncate_before(1, 10).await.unwrap(), 10);
    drop(log);
    let log = open(dir.path());
    assert_eq!(log.earliest_offsets().await.unwrap()[1], 10);
    assert_eq!(log.end_offsets().await.unwrap()[1], 10);
    assert_eq!(log.append(rec(&key, 10)).await.unwrap().offset, 10);
}

#[test]
fn usable_without_a_tokio_runtime() {
    use std::future::Future;
    use std::task::{Context, Poll, Waker};
    // Outside a runtime the work runs inline, so each call completes on its first poll.
    fn now<T>(fut: impl Future<Output = T>) -> T {
        let mut cx = Context::from_waker(Waker::noop());
        match std::pin::pin!(fut).poll(&mut cx) {
            Poll::Ready(v) => v,
            Poll::Pending => panic!("the call did not complete inline"),
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    let position = now(log.append(rec("plain", 0))).unwrap();
    let batch = now(log.read(position.partition, 0, 1, 10)).unwrap();
    assert_eq!(batch.records[0].value, b"plain/0");
    assert_eq!(now(log.current_identity()).unwrap(), *log.identity());
}

#[tokio::test]
async fn damaged_pages_are_reported_on_open() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = open(dir.path());
        for n in 0..300 {
            log.append(rec(&format!("d{}", n % 5), n)).await.unwrap();
        }
    }
    let path = dir.path().join(DB_FILE_NAME);
    let mut bytes = std::fs::read(&path).unwrap();
    let len = bytes.len();
    for at in (len / 4..len).step_by(4096) {
        bytes[at + 100..at + 164].copy_from_slice(&garbage(64));
    }
    std::fs::write(&path, bytes).unwrap();
    let err = FileLog::open(FileConfig::new(dir.path(), PARTITIONS)).unwrap_err();
    match &err {
        FileError::Corrupt { path: p, .. } => assert_eq!(p, &path),
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

/// Appends joined within one task: on a multi-threaded runtime the first commits on the
/// caller's thread, and the ones it finds queued behind it commit in the background; on a
/// current-thread runtime all go to a blocking thread. Either way each lands once, in order.
async fn joined_appends_land_once_each() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    for round in 0..10u64 {
        let (a, b, c) = tokio::join!(
            log.append(rec("joined", round * 3)),
            log.append(rec("joined", round * 3 + 1)),
            log.append(rec("joined", round * 3 + 2))
        );
        let offsets = [a.unwrap().offset, b.unwrap().offset, c.unwrap().offset];
        let mut sorted = offsets;
        sorted.sort_unstable();
        assert_eq!(sorted, [round * 3, round * 3 + 1, round * 3 + 2], "round {round}: {offsets:?}");
    }
    let partition = KeyId::of(b"joined").partition(PARTITIONS);
    assert_eq!(log.end_offsets().await.unwrap()[partition as usize], 30);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joined_appends_on_a_multi_threaded_runtime() {
    joined_appends_land_once_each().await;
}

#[tokio::test(flavor = "current_thread")]
async fn joined_appends_on_a_current_thread_runtime() {
    joined_appends_land_once_each().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopen_right_after_the_last_append_returns() {
    // The committer thread must have let go of the database by the time an append returns, or
    // an immediate reopen finds it still locked.
    let dir = tempfile::tempdir().unwrap();
    for n in 0..30 {
        let log = open(dir.path());
        assert_eq!(log.append(rec("again", n)).await.unwrap().offset, n);
        drop(log);
    }
}

#[test]
fn a_url_names_the_directory_and_its_settings() {
    let c = FileConfig::from_url("file:./state?partitions=3&cache_mb=16&verify_on_open=false").unwrap();
    assert_eq!(c.dir, std::path::PathBuf::from("./state"));
    assert_eq!((c.partitions, c.cache_bytes, c.verify_on_open, c.read_only), (3, 16 << 20, false, false));
    assert_eq!(FileConfig::from_url("file:///var/lib/s").unwrap(), FileConfig::new("/var/lib/s", 8));
    assert_eq!(FileConfig::from_url("file://localhost/var/lib/s").unwrap(), FileConfig::new("/var/lib/s", 8));
    assert_eq!(
        FileConfig::from_url("file://LocalHost/var/lib/s?partitions=2").unwrap(),
        FileConfig::new("/var/lib/s", 2)
    );
    for (url, says) in [
        ("file://host/tmp/x", "names host `host`"),
        ("file://db.example:22/tmp/x", "names host `db.example:22`"),
        ("file://u@remote/tmp/x", "credentials in the host part"),
        ("file://localhost", "needs a directory"),
        ("file://localhost/", "needs a directory"),
        ("file://", "needs a directory"),
        ("file:", "needs a directory"),
        ("kafka://h:1/t", "expected `file:DIR`"),
        ("file:d?partitions=0", "positive integer"),
        ("file:d?cache=1", "unknown parameter `cache`"),
    ] {
        let text = FileConfig::from_url(url).unwrap_err().to_string();
        assert!(text.contains(says), "{url}: {text}");
    }
}

#[tokio::test]
async fn a_read_only_log_takes_the_stored_partitions_and_refuses_to_write() {
    let dir = tempfile::tempdir().unwrap();
    let missing = FileConfig { read_only: true, ..FileConfig::new(dir.path().join("absent"), 8) };
    assert!(matches!(FileLog::open(missing), Err(FileError::Io { .. })));
    assert!(!dir.path().join("absent").exists(), "a read-only open created the directory");
    let log = FileLog::open(FileConfig::new(dir.path(), 3)).unwrap();
    log.append(WireRecord { key_id: KeyId::of(b"k"), key: b"k".to_vec(), value: b"v".to_vec() }).await.unwrap();
    let end = log.end_offsets().await.unwrap();
    drop(log);
    let log = FileLog::open(FileConfig { read_only: true, ..FileConfig::new(dir.path(), 8) }).unwrap();
    assert_eq!(log.identity().partitions, 3);
    assert_eq!(log.end_offsets().await.unwrap(), end);
    let err = log.append(WireRecord { key_id: KeyId::of(b"k"), key: b"k".to_vec(), value: b"w".to_vec() }).await;
    assert!(matches!(err, Err(Error::Unsupported { operation: "append", .. })), "{err:?}");
    assert!(matches!(log.reclaim(&[1, 0, 0]).await, Err(Error::Unsupported { operation: "reclaim", .. })));
    assert_eq!(log.end_offsets().await.unwrap(), end);
}
