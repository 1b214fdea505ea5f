//! Marker validation on restore: every way a marker can fail to describe the log is a clear
//! error naming what is wrong, and a failed restore leaves no trace: the log's writer keeps
//! its index and its ownership (nothing is appended, not even a fence).
#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use actionstate_core::{Error, KeyId, Marker, StateLog, WireRecord};
use actionstate_memory::MemoryLog;
use actionstate_recovery::{
    ActionStateStore, AnyLog, LogConfig, Ownership, Snapshot, StoreConfig, StoreError, TwoPhase,
};
use common::*;
use std::sync::Arc;

/// Writes a few rounds of two keys, takes a snapshot, and writes one more round after it.
async fn history<L: StateLog>(store: &ActionStateStore<L, TwoPhase>, prefix: &str) -> (Snapshot, Vec<Probe>) {
    let keys = [key(&format!("{prefix}-a")), key(&format!("{prefix}-b"))];
    let inputs: Vec<_> = (0..3).map(input).collect();
    let mut probes = Vec::new();
    for seq in 0..2u64 {
        for k in keys {
            process(store, k, seq, &inputs[seq as usize]).await.unwrap();
            probes.push(Probe::root(k, seq, &inputs[seq as usize]));
        }
    }
    let snap = store.snapshot(1).await.unwrap();
    process(store, keys[0], 2, &inputs[2]).await.unwrap();
    probes.push(Probe::root(keys[0], 2, &inputs[2]));
    probes.push(Probe::root(keys[1], 2, &inputs[2]));
    (snap, probes)
}

/// A two-phase store over a handle on `log` that a restore can share (the embedded store
/// takes one handle at a time).
fn writer_over<L: StateLog>(log: L) -> ActionStateStore<Arc<L>, TwoPhase> {
    ActionStateStore::new_two_phase(Arc::new(log), StoreConfig::default())
}

/// Restores a new store over `writer`'s log from `markers`, expecting it to fail; checks that
/// the failed restore appended nothing to the log (no fence: the writer is still the owner)
/// and that the writer's index did not change.
async fn refused<L: StateLog>(
    writer: &ActionStateStore<Arc<L>, TwoPhase>,
    markers: &[Marker],
    probes: &[Probe],
) -> Error {
    let before = view(writer, probes);
    let end = writer.log().end_offsets().await.unwrap();
    let from: Vec<Snapshot> = markers.iter().map(at_marker).collect();
    let log = Arc::clone(writer.log());
    let err = ActionStateStore::restore(log, StoreConfig::default(), &Ownership::All, from).await.unwrap_err();
    assert_eq!(writer.log().end_offsets().await.unwrap(), end, "a failed restore appended to the log ({err})");
    assert_eq!(view(writer, probes), before, "a failed restore changed the writer's index ({err})");
    match err {
        StoreError::Log(e) => e,
        other => panic!("expected a log error, got {other}"),
    }
}

#[tokio::test]
async fn recreated_memory_log_is_refused_as_changed() {
    let log = MemoryLog::new(PARTITIONS);
    let store = writer_over(log.reopen());
    let (snap, probes) = history(&store, "recreated").await;
    // Recreated with the same partition count: another log all the same.
    log.recreate(PARTITIONS);
    let err = refused(&store, std::slice::from_ref(&snap.marker), &probes).await;
    assert!(matches!(err, Error::LogChanged { .. }), "{err}");
    // Recreated with another partition count.
    log.recreate(PARTITIONS * 2);
    let err = refused(&store, &[snap.marker], &probes).await;
    let Error::LogChanged { expected, found } = &err else { panic!("expected LogChanged, got {err}") };
    assert!(expected.contains(&format!("({PARTITIONS} partitions)")), "{err}");
    assert!(found.contains(&format!("({} partitions)", PARTITIONS * 2)), "{err}");
}

#[tokio::test]
async fn recreated_file_log_with_other_partitions_is_refused_as_changed() {
    let env = Env::new(Backend::File);
    let snap = {
        let store = env.two_phase().await;
        history(&store, "recreated-file").await.0
    };
    std::fs::remove_dir_all(env.data_dir()).unwrap();
    let config = LogConfig::File(actionstate_file::FileConfig::new(env.data_dir(), PARTITIONS * 2));
    let store = writer_over(actionstate_recovery::open(&config).await.unwrap());
    let (_, probes) = history(&store, "recreated-file-new").await;
    let err = refused(&store, &[snap.marker], &probes).await;
    let Error::LogChanged { expected, found } = &err else { panic!("expected LogChanged, got {err}") };
    assert!(expected.contains(&format!("({PARTITIONS} partitions)")), "{err}");
    assert!(found.contains(&format!("({} partitions)", PARTITIONS * 2)), "{err}");
}

async fn unknown_partition(backend: Backend) {
    let env = Env::new(backend);
    let store = writer_over(env.open().await);
    let (snap, probes) = history(&store, "unknown-partition").await;
    let mut more = snap.marker.clone();
    more.offsets.push(0);
    let err = refused(&store, &[more], &probes).await;
    assert!(matches!(err, Error::UnknownPartition { partition: PARTITIONS, partitions: PARTITIONS, .. }), "{err}");
    let mut fewer = snap.marker;
    fewer.offsets.pop();
    let err = refused(&store, &[fewer], &probes).await;
    assert!(
        matches!(err, Error::UnknownPartition { partition: p, partitions: PARTITIONS, .. } if p == PARTITIONS - 1),
        "{err}"
    );
}
on_every_backend!(marker_for_an_unknown_partition_is_refused, unknown_partition);

async fn beyond_end(backend: Backend) {
    let env = Env::new(backend);
    let store = writer_over(env.open().await);
    let (snap, probes) = history(&store, "beyond-end").await;
    let end = store.log().end_offsets().await.unwrap();
    let p = key("beyond-end-a").partition(PARTITIONS);
    let mut forged = snap.marker;
    forged.offsets[p as usize] = end[p as usize] + 3;
    let err = refused(&store, &[forged], &probes).await;
    match err {
        Error::OffsetBeyondEnd { partition, offset, end: e } => {
            assert_eq!((partition, offset, e), (p, end[p as usize] + 3, end[p as usize]));
        }
        other => panic!("expected OffsetBeyondEnd, got {other}"),
    }
}
on_every_backend!(marker_beyond_the_end_is_refused_naming_partition_offset_and_end, beyond_end);

async fn data_loss(backend: Backend) {
    let env = Env::new(backend);
    let store = writer_over(env.open().await);
    let (snap, probes) = history(&store, "data-loss").await;
    let p = key("data-loss-a").partition(PARTITIONS);
    let offset = snap.marker.offsets[p as usize];
    let earliest = offset + 2;
    match &**store.log() {
        AnyLog::Memory(m) => m.truncate_before(p, earliest),
        AnyLog::File(f) => assert_eq!(f.truncate_before(p, earliest).await.unwrap(), earliest),
        _ => unreachable!("no other backend in these tests"),
    }
    let err = refused(&store, &[snap.marker], &probes).await;
    match err {
        Error::DataLoss { partition, offset: o, earliest: e } => assert_eq!((partition, o, e), (p, offset, earliest)),
        other => panic!("expected DataLoss, got {other}"),
    }
}
on_every_backend!(marker_below_the_earliest_offset_is_data_loss, data_loss);

async fn mixed(backend: Backend) {
    let (one, other) = (Env::new(backend), Env::new(backend));
    let other_marker = {
        let store = other.two_phase().await;
        history(&store, "mixed-other").await.0.marker
    };
    let store = writer_over(one.open().await);
    let (snap, probes) = history(&store, "mixed-one").await;
    assert_ne!(snap.marker.log, other_marker.log, "two logs share an identity");
    let err = refused(&store, &[snap.marker.clone(), other_marker.clone()], &probes).await;
    match err {
        Error::MixedMarkers { first, second } => {
            assert_eq!((first, second), (snap.marker.log.to_string(), other_marker.log.to_string()));
        }
        other => panic!("expected MixedMarkers, got {other}"),
    }
}
on_every_backend!(markers_of_different_logs_are_refused, mixed);

#[tokio::test]
async fn corrupt_record_in_memory_log_fails_rebuild_naming_its_position() {
    let log = MemoryLog::new(PARTITIONS);
    let store = writer_over(log.reopen());
    let (snap, probes) = history(&store, "corrupt").await;
    let sk = *dump(&store).keys().last().unwrap();
    let at = store.with_index(|ix| ix.position(&sk)).unwrap();
    let original = decoded_value(&log, at.partition, at.offset).await;
    let mut bad_checksum = original.clone();
    *bad_checksum.last_mut().unwrap() ^= 0x55;
    for (value, what) in [(b"garbage".to_vec(), "bad magic"), (bad_checksum, "bad checksum")] {
        log.corrupt(at.partition, at.offset, value);
        let err = refused(&store, std::slice::from_ref(&snap.marker), &probes).await;
        match err {
            Error::Corrupt { partition, offset, source } => {
                assert_eq!((partition, offset), (at.partition, at.offset), "{what}");
                let expected = if what == "bad magic" {
                    matches!(*source, Error::BadMagic { .. })
                } else {
                    matches!(*source, Error::BadChecksum)
                };
                assert!(expected, "{what}: {source}");
            }
            other => panic!("{what}: expected Corrupt, got {other}"),
        }
    }
    // Repaired, the log restores at once.
    log.corrupt(at.partition, at.offset, original);
    ActionStateStore::restore(log.reopen(), StoreConfig::default(), &Ownership::All, &[at_marker(&snap.marker)])
        .await
        .unwrap();
}

async fn decoded_value(log: &MemoryLog, partition: u32, offset: u64) -> Vec<u8> {
    log.read(partition, offset, offset + 1, 1).await.unwrap().records.remove(0).value
}

#[tokio::test]
async fn corrupt_record_in_file_log_fails_rebuild_naming_its_position() {
    let env = Env::new(Backend::File);
    let store = writer_over(env.open().await);
    let (snap, probes) = history(&store, "corrupt-file").await;
    let k: KeyId = key("corrupt-file-a");
    let sk = *dump(&store).keys().find(|sk| sk.key == k).unwrap();
    // A record that is not an envelope, appended where a state record of the key would be.
    let garbage = WireRecord { key_id: k, key: sk.to_bytes().to_vec(), value: b"AcSt\x01\x01 truncated".to_vec() };
    let at = store.log().append(garbage).await.unwrap();
    let err = refused(&store, &[snap.marker], &probes).await;
    match err {
        Error::Corrupt { partition, offset, source } => {
            assert_eq!((partition, offset), (at.partition, at.offset));
            assert!(matches!(*source, Error::Truncated { .. }), "{source}");
        }
        other => panic!("expected Corrupt, got {other}"),
    }
}

/// The rebuild reads one batch ahead of the indexing: a corrupt record at the start of a long
/// partition must still end the rebuild at once, not leave the read-ahead waiting.
#[tokio::test]
async fn a_corrupt_first_record_ends_a_rebuild_that_reads_ahead() {
    let log = MemoryLog::new(1);
    let store = ActionStateStore::new(log.reopen(), StoreConfig::default());
    let k = key("read-ahead");
    for seq in 0..20 {
        process(&store, k, seq, &input(seq as i64)).await.unwrap();
    }
    let marker = Marker::new(log.identity().clone(), vec![0]);
    log.corrupt(0, 0, b"garbage".to_vec());
    let (before, end) = (stats(&store), log.end_offsets().await.unwrap());
    // One record per read: the reader is always a batch ahead and most of the log is unread.
    let config = StoreConfig { read_batch: 1, ..StoreConfig::default() };
    let from = [at_marker(&marker)];
    let restore = ActionStateStore::restore(log.reopen(), config, &Ownership::All, from.as_slice());
    let err = tokio::time::timeout(std::time::Duration::from_secs(10), restore)
        .await
        .expect("the rebuild did not end after the corrupt record")
        .expect_err("a corrupt record must fail the rebuild");
    match err {
        StoreError::Log(Error::Corrupt { partition: 0, offset: 0, source }) => {
            assert!(matches!(*source, Error::BadMagic { .. }), "{source}");
        }
        other => panic!("expected Corrupt at 0/0, got {other}"),
    }
    // The failed restore left nothing behind: nothing appended, the writer as it was.
    assert_eq!(log.end_offsets().await.unwrap(), end, "a failed restore appended to the log");
    assert_eq!(stats(&store), before, "a failed restore changed the writer's index");
}
