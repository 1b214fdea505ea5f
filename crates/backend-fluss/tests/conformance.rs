//! The backend conformance suite, the bucket-function proof and SASL checks against a real
//! Fluss cluster.
//!
//! The cluster comes from `FLUSS_BOOTSTRAP` (and `FLUSS_SASL_*`) in the environment, or from
//! `<workspace>/target/services/fluss.env` as written by `cargo xtask services up fluss`.
//! Without either the tests print `ACTIONSTATE-SKIP` and pass, unless
//! `ACTIONSTATE_REQUIRE_SERVICES` is set, in which case they fail.

#![allow(clippy::unwrap_used)]

use actionstate_core::{Error, KeyId, Marker, StateLog, WireRecord};
use actionstate_fluss::{FlussConfig, FlussLog, Security, bucket};
use actionstate_recovery::testkit::conformance;
use actionstate_recovery::testkit::services::Service;
use fluss::row::GenericRow;
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// The database every test table lives in.
const DATABASE: &str = "actionstate_tests";

/// The cluster's settings (`FLUSS_BOOTSTRAP`, `FLUSS_SASL_*`).
#[derive(Debug, Clone)]
struct Cluster(Service);

impl Cluster {
    fn get(&self, key: &str) -> Option<String> {
        self.0.get(key).map(str::to_owned)
    }

    fn bootstrap(&self) -> String {
        self.get("FLUSS_BOOTSTRAP").unwrap()
    }
}

/// The configured cluster, or `None` after printing the skip marker.
fn cluster(test: &str) -> Option<Cluster> {
    Service::require("fluss", "FLUSS", test).map(Cluster)
}

fn unique_table(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::new_v4().simple())
}

fn test_config(bootstrap: &str, table: &str, buckets: u32) -> FlussConfig {
    let mut c = FlussConfig::new(bootstrap, DATABASE, table, buckets);
    c.delivery_timeout = Duration::from_secs(20);
    c.read_stall_timeout = Duration::from_secs(10);
    c.request_timeout = Duration::from_secs(15);
    c
}

/// Conformance harness: each fresh log is a new table on the shared cluster.
#[derive(Debug)]
struct FlussHarness {
    cluster: Cluster,
}

async fn drop_table(log: &FlussLog) {
    let admin = log.connection().get_admin().unwrap();
    admin.drop_table(log.table_path(), false).await.unwrap();
}

impl conformance::Harness for FlussHarness {
    type Log = FlussLog;

    async fn fresh(&self, buckets: u32) -> Result<FlussLog, Error> {
        FlussLog::open(test_config(&self.cluster.bootstrap(), &unique_table("conformance"), buckets)).await
    }

    async fn reopen(&self, log: FlussLog) -> Result<FlussLog, Error> {
        let config = log.config().clone();
        drop(log);
        FlussLog::open(config).await
    }

    async fn recreate(&self, log: FlussLog, buckets: u32) -> Result<FlussLog, Error> {
        let mut config = log.config().clone();
        drop_table(&log).await;
        drop(log);
        config.buckets = buckets;
        let started = Instant::now();
        loop {
            match FlussLog::open(config.clone()).await {
                Ok(log) => return Ok(log),
                Err(e) if started.elapsed() < Duration::from_secs(60) => {
                    eprintln!("recreate: {e}; retrying");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn unreachable(&self) -> Result<FlussLog, Error> {
        let mut c = FlussConfig::new("127.0.0.1:1", DATABASE, unique_table("unreachable"), 1);
        c.delivery_timeout = Duration::from_secs(3);
        c.read_stall_timeout = Duration::from_secs(3);
        c.request_timeout = Duration::from_secs(3);
        FlussLog::open(c).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fluss_log_conforms() {
    let Some(cluster) = cluster("conformance") else { return };
    conformance::assert_conforms(&FlussHarness { cluster }).await;
}

/// Every record of one bucket: (offset, state_key, payload).
async fn bucket_contents(log: &FlussLog, bucket: u32) -> Vec<(u64, Vec<u8>, Vec<u8>)> {
    let earliest = log.earliest_offsets().await.unwrap()[bucket as usize];
    let end = log.end_offsets().await.unwrap()[bucket as usize];
    conformance::read_all(log, bucket, earliest, end).await.unwrap()
}

/// The bucket function of `actionstate_fluss::bucket` is the client's: rows written through
/// fluss-rs' own writer with arbitrary bucket-key values (of every length modulo 4) are found,
/// by scanning each bucket, exactly in the bucket computed for them; and records appended
/// through the log for many keys land in `KeyId::partition`, all records of a key in one
/// bucket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bucket_function_matches_the_cluster() {
    let Some(cluster) = cluster("bucket-function") else { return };
    const BUCKETS: u32 = 7;
    let log = FlussLog::open(test_config(&cluster.bootstrap(), &unique_table("buckets"), BUCKETS)).await.unwrap();

    // Raw rows: the bucket-key column holds `column`, state_key repeats it so the scan can
    // tell which row it sees.
    let table = log.connection().get_table(log.table_path()).await.unwrap();
    let writer = table.new_append().unwrap().create_writer().unwrap();
    let mut expected: BTreeMap<Vec<u8>, u32> = BTreeMap::new();
    let mut acks = Vec::new();
    for i in 0..400u32 {
        let column: Vec<u8> = format!("raw-key-{i}-{}", "x".repeat((i % 5) as usize)).into_bytes();
        let mut row = GenericRow::new(3);
        row.set_field(0, column.clone());
        row.set_field(1, b"raw".to_vec());
        row.set_field(2, column.clone());
        acks.push(writer.append(&row).unwrap());
        expected.insert(column.clone(), bucket::bucket_of_column(&column, BUCKETS));
    }
    // Records of the log for 300 keys, three per key.
    let mut key_buckets: BTreeMap<Vec<u8>, u32> = BTreeMap::new();
    writer.flush().await.unwrap();
    for a in acks {
        a.await.unwrap();
    }
    for round in 0..3u32 {
        for k in 0..300u32 {
            let key_id = KeyId::of(format!("business-key-{k}").as_bytes());
            let state_key = format!("log-key-{k}-{round}").into_bytes();
            let p = log.append(WireRecord { key_id, key: state_key.clone(), value: b"log".to_vec() }).await.unwrap();
            assert_eq!(p.partition, key_id.partition(BUCKETS));
            key_buckets.insert(state_key, key_id.partition(BUCKETS));
        }
    }
    let mut found_raw: BTreeMap<Vec<u8>, u32> = BTreeMap::new();
    let mut found_log: BTreeMap<Vec<u8>, u32> = BTreeMap::new();
    let mut per_bucket = vec![0usize; BUCKETS as usize];
    for b in 0..BUCKETS {
        for (_, key, value) in bucket_contents(&log, b).await {
            per_bucket[b as usize] += 1;
            let found = if value == b"raw" { &mut found_raw } else { &mut found_log };
            assert!(found.insert(key, b).is_none(), "a row appears twice");
        }
    }
    eprintln!("rows per bucket: {per_bucket:?}");
    assert!(per_bucket.iter().all(|&n| n > 0), "every bucket holds rows: {per_bucket:?}");
    let wrong: Vec<_> = expected.iter().filter(|(k, b)| found_raw.get(*k) != Some(b)).collect();
    assert!(wrong.is_empty(), "{} of {} raw rows not in the computed bucket: {wrong:?}", wrong.len(), expected.len());
    assert_eq!(found_log, key_buckets, "log records not in KeyId::partition");
}

/// Sequential appends of a single writer report their exact offsets; with another writer in
/// between, the reported offsets stay lower bounds and never pass the real ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_offsets_are_lower_bounds_and_exact_for_a_single_writer() {
    let Some(cluster) = cluster("offsets") else { return };
    let config = test_config(&cluster.bootstrap(), &unique_table("offsets"), 2);
    let log = FlussLog::open(config.clone()).await.unwrap();
    let other = FlussLog::open(config).await.unwrap();
    let key = KeyId::of(b"offsets");
    let bucket = key.partition(2);
    let mut reported = Vec::new();
    for n in 0..30u8 {
        let p = log.append(WireRecord { key_id: key, key: vec![n], value: vec![n] }).await.unwrap();
        assert!(!p.exact);
        reported.push((vec![n], p.offset));
        if n % 10 == 9 {
            // Another handle appends to the same bucket: `log` does not know about it.
            for m in 0..3u8 {
                other.append(WireRecord { key_id: key, key: vec![200 + m], value: vec![] }).await.unwrap();
            }
        }
    }
    let actual: HashMap<Vec<u8>, u64> =
        bucket_contents(&log, bucket).await.into_iter().map(|(o, k, _)| (k, o)).collect();
    for (i, (k, lower)) in reported.iter().enumerate() {
        let real = actual[k];
        assert!(*lower <= real, "record {i}: reported {lower} > real offset {real}");
        if i < 10 {
            assert_eq!(*lower, real, "a single writer's offsets are exact");
        }
    }
    // After a listing the floor catches up with the other writer's records again.
    log.end_offsets().await.unwrap();
    let p = log.append(WireRecord { key_id: key, key: b"last".to_vec(), value: vec![] }).await.unwrap();
    let end = log.end_offsets().await.unwrap()[bucket as usize];
    assert_eq!(p.offset, end - 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_cluster_fails_within_seconds_and_is_retryable() {
    let Some(cluster) = cluster("unreachable") else { return };
    let started = Instant::now();
    let err = conformance::Harness::unreachable(&FlussHarness { cluster }).await.unwrap_err();
    let took = started.elapsed();
    eprintln!("unreachable after {took:?}: {err}");
    assert!(took < Duration::from_secs(10), "took {took:?}: {err}");
    assert!(err.is_retryable(), "an unreachable cluster should be retryable: {err}");
    assert!(err.to_string().contains("127.0.0.1:1"), "the error does not name the cluster: {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn existing_table_with_other_bucket_count_is_refused() {
    let Some(cluster) = cluster("buckets-changed") else { return };
    let table = unique_table("buckets_changed");
    let log = FlussLog::open(test_config(&cluster.bootstrap(), &table, 2)).await.unwrap();
    assert_eq!(log.identity().partitions, 2);
    assert_eq!(log.identity().backend, "fluss");
    let err = FlussLog::open(test_config(&cluster.bootstrap(), &table, 3)).await.unwrap_err();
    eprintln!("{err}");
    assert!(err.to_string().contains("has 2 buckets, configured 3"), "{err}");
    assert!(!err.is_retryable());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recreated_table_with_the_same_buckets_is_a_changed_log() {
    let Some(cluster) = cluster("recreated-table") else { return };
    let harness = FlussHarness { cluster };
    let log = conformance::Harness::fresh(&harness, 2).await.unwrap();
    let old = log.identity().clone();
    assert_eq!(old.id.split('/').count(), 3, "identity {old} carries database, table and table id");
    for n in 0..3u8 {
        log.append(WireRecord { key_id: KeyId::of(&[n]), key: vec![n], value: vec![n] }).await.unwrap();
    }
    let marker = Marker { log: old.clone(), offsets: log.end_offsets().await.unwrap() };

    // Dropped under a running handle: reported by current_identity.
    drop_table(&log).await;
    let err = log.current_identity().await.unwrap_err();
    eprintln!("dropped table: {err}");
    assert!(err.to_string().contains("does not exist"), "{err}");

    let config = log.config().clone();
    drop(log);
    let log = FlussLog::open(config).await.unwrap();
    let new = log.identity().clone();
    eprintln!("before: {old}\nafter:  {new}");
    assert_eq!(new.partitions, old.partitions);
    assert_ne!(new.id, old.id, "a recreated table must have another identity");
    for n in 0..3u8 {
        log.append(WireRecord { key_id: KeyId::of(&[n]), key: vec![n], value: vec![n] }).await.unwrap();
    }
    let current = log.current_identity().await.unwrap();
    let err = marker
        .validate(&current, &log.earliest_offsets().await.unwrap(), &log.end_offsets().await.unwrap())
        .unwrap_err();
    eprintln!("old marker on the recreated table: {err}");
    assert!(matches!(err, Error::LogChanged { .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_name_bucket_and_offset_when_they_stall() {
    let Some(cluster) = cluster("read-stall") else { return };
    let mut config = test_config(&cluster.bootstrap(), &unique_table("stall"), 1);
    config.read_stall_timeout = Duration::from_secs(2);
    let log = FlussLog::open(config).await.unwrap();
    for n in 0..3u8 {
        log.append(WireRecord { key_id: KeyId::of(b"s"), key: vec![n], value: vec![n] }).await.unwrap();
    }
    // A range reaching past the end returns what exists, then fails naming the offset.
    let batch = log.read(0, 0, 6, 10).await.unwrap();
    assert_eq!(batch.records.iter().map(|r| r.offset).collect::<Vec<_>>(), vec![0, 1, 2]);
    assert_eq!(batch.next, 3);
    let err = log.read(0, 3, 6, 10).await.unwrap_err();
    eprintln!("read past the end: {err}");
    assert!(err.to_string().contains("bucket 0") && err.to_string().contains("offset 3"), "{err}");
    assert!(err.is_retryable());
    let err = log.read(1, 0, 1, 10).await.unwrap_err();
    assert!(err.to_string().contains("bucket 1 out of range"), "{err}");
}

#[test]
fn debug_hides_the_password() {
    let mut c = FlussConfig::new("b:9123", "db", "t", 1);
    c.security = Some(Security::sasl_plain("user", "hunter2-secret"));
    let text = format!("{c:?}");
    assert!(!text.contains("hunter2-secret"), "{text}");
    assert!(text.contains("***") && text.contains("user"), "{text}");
}

fn sasl_config(cluster: &Cluster, table: &str, password: &str) -> Option<FlussConfig> {
    let bootstrap = cluster.get("FLUSS_SASL_BOOTSTRAP")?;
    let username = cluster.get("FLUSS_SASL_USERNAME")?;
    let mut c = test_config(&bootstrap, table, 2);
    c.security = Some(Security::sasl_plain(username, password));
    Some(c)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_plain_round_trip() {
    let Some(cluster) = cluster("sasl") else { return };
    let password = cluster.get("FLUSS_SASL_PASSWORD").expect("FLUSS_SASL_PASSWORD");
    let config = sasl_config(&cluster, &unique_table("sasl"), &password).expect("FLUSS_SASL_BOOTSTRAP");
    let log = FlussLog::open(config).await.unwrap();
    let record = WireRecord { key_id: KeyId::of(b"sasl-key"), key: b"k".to_vec(), value: b"v".to_vec() };
    let p = log.append(record.clone()).await.unwrap();
    let end = log.end_offsets().await.unwrap()[p.partition as usize];
    let batch = log.read(p.partition, p.offset, end, 10).await.unwrap();
    assert_eq!(batch.records.len(), 1);
    assert_eq!((batch.records[0].key.as_slice(), batch.records[0].value.as_slice()), (&b"k"[..], &b"v"[..]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_wrong_password_fails_with_authentication_error() {
    let Some(cluster) = cluster("sasl-wrong-password") else { return };
    let mut config =
        sasl_config(&cluster, &unique_table("sasl_bad"), "not-the-password").expect("FLUSS_SASL_BOOTSTRAP");
    config.request_timeout = Duration::from_secs(5);
    let started = Instant::now();
    let err = FlussLog::open(config).await.unwrap_err();
    let text = err.to_string();
    eprintln!("wrong password after {:?}: {text}", started.elapsed());
    assert!(text.to_lowercase().contains("authentication"), "not an authentication error: {text}");
    assert!(!err.is_retryable(), "a rejected password is not retryable: {text}");
    assert!(!text.contains("not-the-password"), "the error shows the password: {text}");
}
