//! A read-only open writes nothing, creates nothing, needs read permission only, and refuses
//! what it cannot read as it is; an existing file is never made into a new log.
#![allow(clippy::unwrap_used, reason = "tests")]

use actionstate_core::{KeyId, StateLog, WireRecord};
use actionstate_file::{DB_FILE_NAME, FileConfig, FileError, FileLog};
use std::collections::BTreeMap;
use std::path::Path;

const PARTITIONS: u32 = 3;

fn record(n: u64) -> WireRecord {
    let key = format!("k{}", n % 7).into_bytes();
    WireRecord { key_id: KeyId::of(&key), key, value: format!("value {n}").repeat(1 + (n % 9) as usize).into_bytes() }
}

async fn write_store(dir: &Path, records: u64) {
    let log = FileLog::open(FileConfig::new(dir, PARTITIONS)).unwrap();
    for n in 0..records {
        log.append(record(n)).await.unwrap();
    }
}

fn read_only(dir: &Path, verify: bool) -> FileConfig {
    FileConfig { read_only: true, verify_on_open: verify, ..FileConfig::new(dir, 8) }
}

/// Every file under `dir` with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap())
        })
        .collect()
}

async fn read_everything(log: &FileLog) -> usize {
    let end = log.end_offsets().await.unwrap();
    let mut n = 0;
    for p in 0..log.identity().partitions {
        n += log.read(p, 0, end[p as usize], usize::MAX).await.unwrap().records.len();
    }
    n
}

#[tokio::test]
async fn a_read_only_open_changes_no_byte_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    write_store(dir.path(), 120).await;
    let before = snapshot(dir.path());
    for verify in [true, false] {
        let log = FileLog::open(read_only(dir.path(), verify)).unwrap();
        // Two readers at once: a read-only open shares the file.
        let other = FileLog::open(read_only(dir.path(), verify)).unwrap();
        assert_eq!(read_everything(&log).await, 120);
        assert_eq!(read_everything(&other).await, 120);
        assert_eq!(log.current_identity().await.unwrap(), *log.identity());
        drop((log, other));
        assert_eq!(snapshot(dir.path()), before, "verify_on_open={verify}: the directory changed");
    }
}

#[tokio::test]
async fn a_read_only_open_works_with_read_permission_alone() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    write_store(&data, 30).await;
    let before = snapshot(&data);
    let set = |path: &Path, mode| std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    set(&data.join(DB_FILE_NAME), 0o444);
    set(&data, 0o555);
    let opened = FileLog::open(read_only(&data, true));
    let count = match &opened {
        Ok(log) => Some(read_everything(log).await),
        Err(_) => None,
    };
    drop(opened);
    set(&data, 0o755);
    // As root, modes are not enforced; the CLI test runs this as another user.
    assert_eq!(count, Some(30));
    assert_eq!(snapshot(&data), before);
}

#[tokio::test]
async fn a_read_only_open_beside_a_writer_is_refused_as_locked() {
    let dir = tempfile::tempdir().unwrap();
    let writer = FileLog::open(FileConfig::new(dir.path(), PARTITIONS)).unwrap();
    writer.append(record(0)).await.unwrap();
    let err = FileLog::open(read_only(dir.path(), true)).unwrap_err();
    assert!(matches!(err, FileError::Locked { .. }), "{err:?}");
}

#[test]
fn a_missing_store_is_not_created_by_a_read_only_open() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("absent");
    let err = FileLog::open(read_only(&missing, true)).unwrap_err();
    assert!(matches!(&err, FileError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound), "{err:?}");
    assert!(!missing.exists());
    // An existing but empty directory stays empty.
    let err = FileLog::open(read_only(dir.path(), true)).unwrap_err();
    assert!(matches!(err, FileError::Io { .. }), "{err:?}");
    assert!(snapshot(dir.path()).is_empty());
}

/// A file its writer did not close (the copy a crash leaves) opens read-only: recovered in
/// memory, read whole, and never written; appends are refused. A writer recovers it for real.
#[tokio::test]
async fn a_file_its_writer_did_not_close_is_recovered_in_memory_and_left_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let copy = tempfile::tempdir().unwrap();
    {
        let writer = FileLog::open(FileConfig::new(dir.path(), PARTITIONS)).unwrap();
        for n in 0..40 {
            writer.append(record(n)).await.unwrap();
        }
        // A copy taken while the writer is live is the file a crash of the writer leaves.
        std::fs::copy(dir.path().join(DB_FILE_NAME), copy.path().join(DB_FILE_NAME)).unwrap();
    }
    let before = snapshot(copy.path());
    for verify in [true, false] {
        let log = FileLog::open(read_only(copy.path(), verify)).unwrap();
        assert_eq!(read_everything(&log).await, 40);
        let err = log.append(record(99)).await.unwrap_err();
        assert!(err.to_string().contains("read-only"), "{err}");
        drop(log);
        assert_eq!(snapshot(copy.path()), before, "a read-only open repaired the file");
    }
    // A writer recovers it, after which it opens read-only as a cleanly closed file does.
    drop(FileLog::open(FileConfig::new(copy.path(), PARTITIONS)).unwrap());
    assert_ne!(snapshot(copy.path()), before, "the writer did not recover the file");
    let log = FileLog::open(read_only(copy.path(), true)).unwrap();
    assert_eq!(read_everything(&log).await, 40);
}

fn assert_corrupt(err: &FileError, path: &Path, says: &str) {
    match err {
        FileError::Corrupt { path: p, .. } => assert_eq!(p, path),
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert!(err.to_string().contains(says), "{err}");
}

#[test]
fn an_empty_file_is_corrupt_and_stays_empty() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(DB_FILE_NAME);
    std::fs::write(&path, b"").unwrap();
    for config in [FileConfig::new(dir.path(), PARTITIONS), read_only(dir.path(), true), read_only(dir.path(), false)] {
        let err = FileLog::open(config).unwrap_err();
        assert_corrupt(&err, &path, "empty");
        assert_eq!(snapshot(dir.path()), BTreeMap::from([(DB_FILE_NAME.to_owned(), Vec::new())]));
    }
    // Neither does opening the directory without the file's name.
    assert_corrupt(&FileLog::open_existing(dir.path()).unwrap_err(), &path, "empty");
}

#[test]
fn a_redb_file_without_the_actionstate_tables_is_corrupt_and_not_initialized() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(DB_FILE_NAME);
    {
        let db = redb::Database::create(&path).unwrap();
        let txn = db.begin_write().unwrap();
        let table: redb::TableDefinition<'_, u64, u64> = redb::TableDefinition::new("something-else");
        txn.open_table(table).unwrap().insert(1, 2).unwrap();
        txn.commit().unwrap();
    }
    let before = snapshot(dir.path());
    for verify in [true, false] {
        let err = FileLog::open(read_only(dir.path(), verify)).unwrap_err();
        assert_corrupt(&err, &path, "without the actionstate meta table");
        assert_eq!(snapshot(dir.path()), before);
    }
    let err = FileLog::open(FileConfig::new(dir.path(), PARTITIONS)).unwrap_err();
    assert_corrupt(&err, &path, "without the actionstate meta table");
    // Still not a log: the writable open did not write a meta record into it.
    let err = FileLog::open(read_only(dir.path(), true)).unwrap_err();
    assert_corrupt(&err, &path, "without the actionstate meta table");
}

#[tokio::test]
async fn after_the_engine_fails_on_a_page_the_handle_stays_broken() {
    // Unverified opens of copies with one byte flipped, until one opens and then fails a read
    // on a page the engine cannot make sense of.
    let dir = tempfile::tempdir().unwrap();
    write_store(dir.path(), 200).await;
    let bytes = std::fs::read(dir.path().join(DB_FILE_NAME)).unwrap();
    // The first bytes of each page hold a node's entry count and offsets: damage there sends
    // the engine's reads out of the page.
    let candidates: Vec<usize> = (4096..bytes.len())
        .step_by(4096)
        .flat_map(|page| (2..10).map(move |i| page + i))
        .filter(|&i| bytes[i] != 0)
        .collect();
    for &at in &candidates {
        let copy = tempfile::tempdir().unwrap();
        let path = copy.path().join(DB_FILE_NAME);
        let mut damaged = bytes.clone();
        damaged[at] ^= 0xff;
        std::fs::write(&path, &damaged).unwrap();
        let config = FileConfig { verify_on_open: false, ..FileConfig::new(copy.path(), PARTITIONS) };
        let Ok(log) = FileLog::open(config) else { continue };
        let end = log.end_offsets().await.unwrap();
        for p in 0..PARTITIONS {
            let Err(first) = log.read(p, 0, end[p as usize], usize::MAX).await else { continue };
            let Some(FileError::Corrupt { path: p1, .. }) = FileError::find(&first) else { continue };
            assert_eq!(p1, &path);
            assert!(first.to_string().contains("file read failed"), "{first}");
            if !first.to_string().contains("inconsistent page") {
                continue;
            }
            // Every later call fails with the same error, a write included.
            let again = log.read((p + 1) % PARTITIONS, 0, 1, 1).await.unwrap_err();
            assert_eq!(again.to_string(), first.to_string());
            let write = log.append(record(0)).await.unwrap_err();
            assert!(write.to_string().contains("inconsistent page"), "{write}");
            assert!(matches!(FileError::find(&write), Some(FileError::Corrupt { .. })), "{write:?}");
            return;
        }
    }
    panic!("no flipped byte made the engine fail on a page: the test exercises nothing");
}
