//! The backend conformance suite, the bucket-function proof, SASL and retention checks against
//! a real Fluss cluster.
//!
//! The cluster comes from `FLUSS_BOOTSTRAP` (and `FLUSS_SASL_*`) in the environment, or from
//! `<workspace>/target/services/fluss.env` as written by `cargo xtask services up fluss`.
//! Without either the tests print `ACTIONSTATE-SKIP` and pass, unless
//! `ACTIONSTATE_REQUIRE_SERVICES` is set, in which case they fail.
//!
//! `segments_expire_only_under_an_accepted_ttl_and_older_markers_are_data_loss` also needs a
//! tablet server that tiers and expires segments within seconds, as the one of `cargo xtask
//! services up fluss` does (`log.segment.file-size: 4mb`, `remote.log.task-interval-duration:
//! 1s`): the cluster's settings must declare them as `FLUSS_LOG_SEGMENT_BYTES` (at most 4 MiB)
//! and `FLUSS_REMOTE_LOG_TASK_INTERVAL_MS` (at most 5 s), which xtask writes into `fluss.env`.
//! Without them the test prints `ACTIONSTATE-SKIP` like the others (a failure under
//! `ACTIONSTATE_REQUIRE_SERVICES`).

#![allow(clippy::unwrap_used)]

use actionstate_core::{Error, KeyId, Marker, StateLog, WireRecord};
use actionstate_fluss::retention::{self, RetentionProblem};
use actionstate_fluss::{FlussConfig, FlussError, FlussLog, Security, bucket};
use actionstate_testkit::conformance;
use actionstate_testkit::scenarios::{self, LogCapture};
use actionstate_testkit::services::{self, Service};
use fluss::metadata::{
    AlterConfig, AlterConfigOpType, AlterTableChanges, DataTypes, Schema, TableDescriptor, TablePath,
};
use fluss::row::GenericRow;
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// The database every test table lives in.
const DATABASE: &str = "actionstate_tests";

/// The configured cluster (`FLUSS_BOOTSTRAP`, `FLUSS_SASL_*`), or `None` after printing the
/// skip marker.
fn cluster(test: &str) -> Option<Service> {
    Service::require("fluss", "FLUSS", test)
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
    cluster: Service,
}

async fn drop_table(log: &FlussLog) {
    let admin = log.connection().get_admin().unwrap();
    admin.drop_table(log.table_path(), false).await.unwrap();
}

impl conformance::Harness for FlussHarness {
    type Log = FlussLog;

    async fn fresh(&self, buckets: u32) -> Result<FlussLog, Error> {
        FlussLog::open(test_config(self.cluster.bootstrap(), &unique_table("conformance"), buckets)).await
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
        scenarios::retry_for(Duration::from_secs(60), "recreate", || FlussLog::open(config.clone())).await
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
    let log = FlussLog::open(test_config(cluster.bootstrap(), &unique_table("buckets"), BUCKETS)).await.unwrap();

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
    let config = test_config(cluster.bootstrap(), &unique_table("offsets"), 2);
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
    scenarios::assert_unreachable_fails_fast(&FlussHarness { cluster }, "cluster").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn existing_table_with_other_bucket_count_is_refused() {
    let Some(cluster) = cluster("buckets-changed") else { return };
    let table = unique_table("buckets_changed");
    let open = |buckets| FlussLog::open(test_config(cluster.bootstrap(), &table, buckets));
    scenarios::assert_changed_partition_count_is_refused(open, "fluss", "buckets").await;
}

/// A table the log creates gets the configured replication factor as its
/// `table.replication.factor`; more replicas than the cluster has tablet servers are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn created_tables_take_the_configured_replication() {
    let Some(cluster) = cluster("replication") else { return };
    let mut config = test_config(cluster.bootstrap(), &unique_table("replication"), 2);
    config.replication = Some(1);
    let log = FlussLog::open(config).await.unwrap();
    let properties = log.table_info().get_properties();
    assert_eq!(properties.get("table.replication.factor").map(String::as_str), Some("1"), "{properties:?}");
    drop_table(&log).await;

    let mut config = test_config(cluster.bootstrap(), &unique_table("replication"), 2);
    config.replication = Some(1000);
    let err = FlussLog::open(config).await.unwrap_err();
    assert!(err.to_string().contains("Replication factor: 1000"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recreated_table_with_the_same_buckets_is_a_changed_log() {
    let Some(cluster) = cluster("recreated-table") else { return };
    let harness = FlussHarness { cluster };
    let log = conformance::Harness::fresh(&harness, 2).await.unwrap();
    // The identity carries database, table and table id.
    let recreate = |log: FlussLog| async move {
        // Dropped under a running handle: reported by current_identity.
        drop_table(&log).await;
        let err = log.current_identity().await.unwrap_err();
        eprintln!("dropped table: {err}");
        assert!(err.to_string().contains("does not exist"), "{err}");
        let config = log.config().clone();
        drop(log);
        FlussLog::open(config).await.unwrap()
    };
    scenarios::assert_recreated_log_is_changed(log, "table", recreate).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_name_bucket_and_offset_when_they_stall() {
    let Some(cluster) = cluster("read-stall") else { return };
    let mut config = test_config(cluster.bootstrap(), &unique_table("stall"), 1);
    config.read_stall_timeout = Duration::from_secs(2);
    let log = FlussLog::open(config).await.unwrap();
    for n in 0..3u8 {
        log.append(WireRecord { key_id: KeyId::of(b"s"), key: vec![n], value: vec![n] }).await.unwrap();
    }
    // A range reaching past the end returns what exists, then fails naming the offset.
    let err = scenarios::assert_read_past_the_end_fails(&log, 0, 0, 3, "bucket").await;
    assert!(err.is_retryable());
    let err = log.read(1, 0, 1, 10).await.unwrap_err();
    assert!(err.to_string().contains("bucket 1 out of range"), "{err}");
}

#[test]
fn debug_hides_the_password() {
    let mut c = FlussConfig::new("b:9123", "db", "t", 1);
    c.security = Some(Security::sasl_plain("user", "hunter2-secret"));
    scenarios::assert_debug_hides(&format!("{c:?}"), "user", &["hunter2-secret"]);
}

fn sasl_config(cluster: &Service, table: &str, password: &str) -> Option<FlussConfig> {
    let sasl = cluster.sasl()?;
    let mut c = test_config(&sasl.bootstrap, table, 2);
    c.security = Some(Security::sasl_plain(sasl.username, password));
    Some(c)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_plain_round_trip() {
    let Some(cluster) = cluster("sasl") else { return };
    let password = cluster.sasl().expect("FLUSS_SASL_*").password;
    let config = sasl_config(&cluster, &unique_table("sasl"), &password).expect("FLUSS_SASL_BOOTSTRAP");
    let log = FlussLog::open(config).await.unwrap();
    scenarios::assert_round_trip(&log).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_wrong_password_fails_with_authentication_error() {
    let Some(cluster) = cluster("sasl-wrong-password") else { return };
    let mut config =
        sasl_config(&cluster, &unique_table("sasl_bad"), "not-the-password").expect("FLUSS_SASL_BOOTSTRAP");
    config.request_timeout = Duration::from_secs(5);
    let started = Instant::now();
    let text = scenarios::assert_wrong_password_refused(FlussLog::open(config).await, "not-the-password");
    eprintln!("refused after {:?}", started.elapsed());
    assert!(text.contains("`username=`") && text.contains("`password_env=`"), "{text}");
}

/// A client without credentials on the SASL listener is told which URL parameters to add.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sasl_listener_without_credentials_names_the_url_parameters() {
    let Some(cluster) = cluster("sasl-no-credentials") else { return };
    let bootstrap = cluster.sasl().expect("FLUSS_SASL_*").bootstrap;
    let mut config = test_config(&bootstrap, &unique_table("sasl_none"), 2);
    config.request_timeout = Duration::from_secs(5);
    let err = FlussLog::open(config).await.unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(fluss_error(&err), Some(FlussError::Authentication { credentials: false, .. })),
        "not an authentication error: {text}"
    );
    assert!(text.contains("add `username=U&password_env=VAR` to the log URL"), "{text}");
}

/// A read-only open (the offline tools') changes nothing on the cluster: a missing table, or
/// one in a missing database, is `TableMissing` and neither is created; a table whose TTL
/// deletes records by age is read as it is, with a warning saying what may be gone; and it
/// accepts no append.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_open_creates_and_writes_nothing() {
    let Some(cluster) = cluster("read-only") else { return };
    let helper = FlussLog::open(test_config(cluster.bootstrap(), &unique_table("ro_helper"), 1)).await.unwrap();
    let admin = helper.connection().get_admin().unwrap();
    let read_only = |database: &str, table: &str| {
        let mut c = test_config(cluster.bootstrap(), table, 8);
        c.database = database.to_owned();
        c.read_only = true;
        c
    };
    let missing_database = unique_table("ro_db");
    for (database, table) in
        [(DATABASE.to_owned(), unique_table("ro_missing")), (missing_database.clone(), unique_table("t"))]
    {
        let err = FlussLog::open(read_only(&database, &table)).await.unwrap_err();
        assert!(matches!(fluss_error(&err), Some(FlussError::TableMissing { .. })), "{err}");
        assert!(err.to_string().contains(&table), "{err}");
        assert!(!admin.table_exists(&TablePath::new(database.as_str(), table.as_str())).await.unwrap());
    }
    assert!(!admin.database_exists(&missing_database).await.unwrap(), "a read-only open created {missing_database}");

    let table = unique_table("ro_ttl");
    create_table_without_a_log_ttl(&helper, &table, 2).await;
    let writer = {
        let mut c = test_config(cluster.bootstrap(), &table, 2);
        c.log_ttl = Some(retention::DEFAULT_LOG_TTL);
        FlussLog::open(c).await.unwrap()
    };
    let p =
        writer.append(WireRecord { key_id: KeyId::of(b"ro"), key: b"k".to_vec(), value: b"v".to_vec() }).await.unwrap();
    let ends = writer.end_offsets().await.unwrap();
    let path = TablePath::new(DATABASE, table.as_str());
    let before = admin.get_table_info(&path).await.unwrap();

    let logged = LogCapture::new();
    let subscriber = tracing_subscriber::fmt().with_writer(logged.writer()).finish();
    let log = {
        let _guard = tracing::subscriber::set_default(subscriber);
        FlussLog::open(read_only(DATABASE, &table)).await.unwrap()
    };
    let logged = logged.text();
    assert!(
        logged.contains("WARN") && logged.contains("table.log.ttl") && logged.contains("may already be gone"),
        "{logged}"
    );
    assert_eq!(log.identity().partitions, 2, "the buckets it has, not those configured");
    assert_eq!(log.end_offsets().await.unwrap(), ends);
    assert_eq!(bucket_contents(&log, p.partition).await.len(), 1);
    let append = log.append(WireRecord { key_id: KeyId::of(b"ro"), key: b"k".to_vec(), value: b"v".to_vec() });
    assert!(matches!(append.await, Err(Error::Unsupported { .. })));
    drop(log);
    let after = admin.get_table_info(&path).await.unwrap();
    assert_eq!((after.get_table_id(), after.get_modified_time()), (before.get_table_id(), before.get_modified_time()));
    assert_eq!(after.get_properties(), before.get_properties());
    assert_eq!(writer.end_offsets().await.unwrap(), ends);
    drop_table(&writer).await;
    drop_table(&helper).await;
}

/// The `FlussError` inside an error of the log, if there is one.
fn fluss_error(err: &Error) -> Option<&FlussError> {
    match err {
        Error::Backend(b) => std::error::Error::source(b)?.downcast_ref::<FlussError>(),
        _ => None,
    }
}

/// Creates `table` as earlier versions of the backend did: the log table's layout without
/// `table.log.ttl`, so with Fluss's default TTL of 7 days.
async fn create_table_without_a_log_ttl(log_on_cluster: &FlussLog, table: &str, buckets: i32) {
    let admin = log_on_cluster.connection().get_admin().unwrap();
    let mut schema = Schema::builder();
    for column in actionstate_fluss::COLUMNS {
        schema = schema.column(column, DataTypes::bytes());
    }
    let descriptor = TableDescriptor::builder()
        .schema(schema.build().unwrap())
        .distributed_by(Some(buckets), vec![actionstate_fluss::BUCKET_KEY.to_owned()])
        .build()
        .unwrap();
    let path = TablePath::new(DATABASE, table);
    admin.create_table(&path, &descriptor, false).await.unwrap();
    let info = admin.get_table_info(&path).await.unwrap();
    assert_eq!(info.get_properties().get(retention::LOG_TTL_PROPERTY), None, "{:?}", info.get_properties());
}

/// A table created without `table.log.ttl` (as this backend created them before) deletes
/// records older than 7 days: opening it is refused, naming table, property, value and what to
/// do, unless the configuration accepts deletion after 7 days or sooner. The server cannot be
/// told to keep its records instead: Fluss 0.9 refuses to alter the property.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_with_the_default_log_ttl_is_refused_unless_its_ttl_is_accepted() {
    let Some(cluster) = cluster("default-log-ttl") else { return };
    let helper = FlussLog::open(test_config(cluster.bootstrap(), &unique_table("ttl_helper"), 1)).await.unwrap();
    let table = unique_table("default_ttl");
    create_table_without_a_log_ttl(&helper, &table, 2).await;

    let mut config = test_config(cluster.bootstrap(), &table, 2);
    let err = FlussLog::open(config.clone()).await.unwrap_err();
    let text = err.to_string();
    eprintln!("default TTL: {text}");
    assert!(!err.is_retryable(), "{text}");
    match fluss_error(&err) {
        Some(FlussError::LogRetention { table: named, property, value, problem }) => {
            assert_eq!(named, &format!("{DATABASE}.{table}"));
            assert_eq!(*property, "table.log.ttl");
            assert!(value.contains("not set") && value.contains("7 d"), "{value}");
            assert_eq!(problem, &RetentionProblem::NotAccepted { ttl: retention::DEFAULT_LOG_TTL });
        }
        other => panic!("expected FlussError::LogRetention, got {other:?}: {text}"),
    }
    assert!(!text.contains("FlussConfig"), "the error names a Rust field: {text}");
    for needle in [&table[..], "table.log.ttl", "7 d", "`log_ttl=7d`", "0 ms"] {
        assert!(text.contains(needle), "the error does not name {needle:?}: {text}");
    }

    // Accepting a longer bound is not enough; accepting 7 days (or less) opens it.
    config.log_ttl = Some(Duration::from_secs(8 * 24 * 3600));
    let err = FlussLog::open(config.clone()).await.unwrap_err();
    assert!(
        matches!(
            fluss_error(&err),
            Some(FlussError::LogRetention { problem: RetentionProblem::ShorterThanAccepted { .. }, .. })
        ),
        "{err}"
    );
    config.log_ttl = Some(retention::DEFAULT_LOG_TTL);
    let log = FlussLog::open(config.clone()).await.unwrap();
    let p =
        log.append(WireRecord { key_id: KeyId::of(b"ttl"), key: b"k".to_vec(), value: b"v".to_vec() }).await.unwrap();
    assert_eq!(bucket_contents(&log, p.partition).await.len(), 1);
    config.log_ttl = Some(Duration::from_secs(3600));
    FlussLog::open(config).await.unwrap();

    // The server keeps the default: its TTL cannot be altered.
    let admin = log.connection().get_admin().unwrap();
    let change =
        AlterConfig::new(retention::LOG_TTL_PROPERTY, Some(retention::NO_LOG_TTL.to_owned()), AlterConfigOpType::Set);
    let altered = admin
        .alter_table(log.table_path(), false, AlterTableChanges { config_changes: vec![change], ..Default::default() })
        .await;
    eprintln!("altering table.log.ttl: {altered:?}");
    let info = admin.get_table_info(log.table_path()).await.unwrap();
    let value = info.get_properties().get(retention::LOG_TTL_PROPERTY).cloned();
    assert_eq!(altered.is_ok(), value.is_some(), "alter answered {altered:?}, the table holds {value:?}");
    drop_table(&log).await;
    drop_table(&helper).await;
}

/// Tables the log creates carry `table.log.ttl`: `0 ms` (no deletion by age) by default, and
/// reopen; with an accepted bound they carry it in milliseconds, and reopen only with a bound
/// no longer than theirs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn created_tables_delete_by_age_only_what_the_configuration_accepts() {
    let Some(cluster) = cluster("created-log-ttl") else { return };
    let config = test_config(cluster.bootstrap(), &unique_table("no_ttl"), 1);
    let log = FlussLog::open(config.clone()).await.unwrap();
    let property = |log: &FlussLog| log.table_info().get_properties().get(retention::LOG_TTL_PROPERTY).cloned();
    assert_eq!(property(&log).as_deref(), Some("0 ms"));
    let admin = log.connection().get_admin().unwrap();
    let info = admin.get_table_info(log.table_path()).await.unwrap();
    assert_eq!(info.get_properties().get(retention::LOG_TTL_PROPERTY).map(String::as_str), Some("0 ms"));
    drop(log);
    let log = FlussLog::open(config.clone()).await.unwrap();
    drop_table(&log).await;

    let hour = Duration::from_secs(3600);
    let mut config = test_config(cluster.bootstrap(), &unique_table("hour_ttl"), 1);
    config.log_ttl = Some(hour);
    let log = FlussLog::open(config.clone()).await.unwrap();
    assert_eq!(property(&log).as_deref(), Some("3600000 ms"));
    config.log_ttl = Some(hour / 2);
    FlussLog::open(config.clone()).await.unwrap();
    for accepted in [None, Some(2 * hour)] {
        config.log_ttl = accepted;
        let err = FlussLog::open(config.clone()).await.unwrap_err();
        eprintln!("{accepted:?} on a 1 h table: {err}");
        assert!(matches!(fluss_error(&err), Some(FlussError::LogRetention { .. })), "{err}");
    }
    config.log_ttl = Some(Duration::ZERO);
    let err = FlussLog::open(config).await.unwrap_err();
    assert!(matches!(fluss_error(&err), Some(FlussError::InvalidConfig(_))), "{err}");
    drop_table(&log).await;
}

/// How the cluster's tablet server tiers and expires segments, as the cluster's settings
/// declare it: `FLUSS_LOG_SEGMENT_BYTES` (its `log.segment.file-size`) and
/// `FLUSS_REMOTE_LOG_TASK_INTERVAL_MS` (its `remote.log.task-interval-duration`), which
/// `cargo xtask services up fluss` writes for the shared cluster.
#[derive(Debug, Clone, Copy)]
struct Tiering {
    segment_bytes: u64,
    task_interval: Duration,
}

/// The largest segment the expiry test writes past: it writes four of them per table, in
/// values of a 32nd of a segment each.
const MAX_TIERING_SEGMENT_BYTES: u64 = 4 << 20;
/// The longest remote-log task interval the expiry test waits for.
const MAX_TIERING_TASK_INTERVAL: Duration = Duration::from_secs(5);

/// The cluster's tiering settings, or `None` after the skip marker (a failure under
/// `ACTIONSTATE_REQUIRE_SERVICES`) when they are not declared or are too large for a test.
fn tiering(cluster: &Service, test: &str) -> Option<Tiering> {
    let number = |key: &str| cluster.get(key).and_then(|v| v.parse::<u64>().ok());
    let segment_bytes = number("FLUSS_LOG_SEGMENT_BYTES");
    let task_interval = number("FLUSS_REMOTE_LOG_TASK_INTERVAL_MS").map(Duration::from_millis);
    match (segment_bytes, task_interval) {
        (Some(segment_bytes), Some(task_interval))
            if segment_bytes <= MAX_TIERING_SEGMENT_BYTES && task_interval <= MAX_TIERING_TASK_INTERVAL =>
        {
            Some(Tiering { segment_bytes, task_interval })
        }
        _ => {
            let declared = |key: &str| format!("{key}={}", cluster.get(key).unwrap_or("(unset)"));
            services::skip_because(
                "fluss",
                test,
                &format!(
                    "the cluster's settings (from {}) have {} and {}; the test needs the tablet server's \
                     log.segment.file-size (at most {MAX_TIERING_SEGMENT_BYTES} bytes) and \
                     remote.log.task-interval-duration (at most {} ms) declared there, as cargo xtask services up \
                     fluss does",
                    cluster.source,
                    declared("FLUSS_LOG_SEGMENT_BYTES"),
                    declared("FLUSS_REMOTE_LOG_TASK_INTERVAL_MS"),
                    MAX_TIERING_TASK_INTERVAL.as_millis()
                ),
            );
            None
        }
    }
}

/// `n` bytes that do not compress (Fluss compresses record batches), from a xorshift seeded
/// with `seed`.
fn incompressible(seed: u32, n: usize) -> Vec<u8> {
    let mut x = u64::from(seed) ^ 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// On a cluster that tiers and expires segments within seconds (the shared one: its tablet
/// server rolls 4 MiB segments and runs its remote-log tasks every second): a table the log
/// created with an accepted TTL of one second loses its oldest segments by age, its earliest
/// offset rises, a marker below it fails validation as data loss, a read below it fails
/// instead of skipping, and the records from the earliest offset on are all there; a table
/// created without a TTL, written alike, keeps every record (its older segments copied to
/// remote storage by then, and read from there) and its marker stays valid.
// Long: one retention scenario on a real server: write, wait for expiry, read, and compare with a table without a TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn segments_expire_only_under_an_accepted_ttl_and_older_markers_are_data_loss() {
    const TEST: &str = "segment-expiry";
    let Some(cluster) = cluster(TEST) else { return };
    let Some(tiering) = tiering(&cluster, TEST) else { return };
    let bootstrap = cluster.bootstrap();
    let mut config = test_config(bootstrap, &unique_table("ttl_second"), 1);
    config.log_ttl = Some(Duration::from_secs(1));
    let expiring = FlussLog::open(config).await.unwrap();
    let kept = FlussLog::open(test_config(bootstrap, &unique_table("ttl_none"), 1)).await.unwrap();
    let markers: Vec<Marker> = vec![
        Marker::new(expiring.identity().clone(), expiring.end_offsets().await.unwrap()),
        Marker::new(kept.identity().clone(), kept.end_offsets().await.unwrap()),
    ];
    // Values of four segments per table, a 32nd of a segment each, so that each table rolls
    // at least four segments (the batches' overhead adds more), of which the tablet server keeps
    // the last two on its own disk once the others are in remote storage. The two tables are
    // written side by side.
    let value_bytes = usize::try_from(tiering.segment_bytes / 32).unwrap().max(1024);
    let records = u32::try_from((4 * tiering.segment_bytes).div_ceil(value_bytes as u64)).unwrap();
    let writing = Instant::now();
    async fn write(log: &FlussLog, records: u32, value_bytes: usize) {
        for n in 0..records {
            let value = incompressible(n, value_bytes);
            log.append(WireRecord { key_id: KeyId::of(b"age"), key: n.to_be_bytes().to_vec(), value }).await.unwrap();
        }
    }
    tokio::join!(write(&expiring, records, value_bytes), write(&kept, records, value_bytes));
    eprintln!(
        "{records} records of {value_bytes} bytes in each table, segments of {} bytes, written in {:?}",
        tiering.segment_bytes,
        writing.elapsed()
    );
    let started = Instant::now();
    let earliest = loop {
        let earliest = expiring.earliest_offsets().await.unwrap();
        if earliest[0] > 0 {
            break earliest;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "no segment expired in {:?}", started.elapsed());
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    eprintln!("earliest offset {} after {:?}", earliest[0], started.elapsed());
    // Later segments age past the TTL too, once copied to remote storage (the two the tablet
    // server keeps on its disk stay): wait until the earliest offset stays put for two rounds
    // of the remote-log tasks, so that the reads below do not race with an expiry.
    let mut earliest = earliest;
    loop {
        tokio::time::sleep(2 * tiering.task_interval).await;
        let now = expiring.earliest_offsets().await.unwrap();
        if now == earliest {
            break;
        }
        earliest = now;
        assert!(started.elapsed() < Duration::from_secs(60), "expiry did not settle in {:?}", started.elapsed());
    }
    eprintln!("earliest offset settled at {} after {:?}", earliest[0], started.elapsed());
    let end = expiring.end_offsets().await.unwrap();
    let current = expiring.current_identity().await.unwrap();
    match markers[0].validate(&current, &earliest, &end) {
        Err(Error::DataLoss { partition: 0, offset: 0, earliest: e }) => assert_eq!(e, earliest[0]),
        other => panic!("a marker below the expired segment must be data loss, got {other:?}"),
    }
    let below = expiring.read(0, 0, end[0], 10).await;
    eprintln!("read below the earliest offset: {below:?}");
    assert!(below.is_err(), "a read of expired offsets must fail, got {below:?}");
    let rest = conformance::read_all(&expiring, 0, earliest[0], end[0]).await.unwrap();
    let offsets: Vec<u64> = rest.iter().map(|r| r.0).collect();
    assert_eq!(offsets, (earliest[0]..end[0]).collect::<Vec<_>>());

    // The same history in a table without a TTL: nothing expired, everything readable (after
    // a few more rounds of the remote-log tasks).
    tokio::time::sleep(3 * tiering.task_interval).await;
    let (earliest, end) = (kept.earliest_offsets().await.unwrap(), kept.end_offsets().await.unwrap());
    assert_eq!(earliest, [0]);
    markers[1].validate(&kept.current_identity().await.unwrap(), &earliest, &end).unwrap();
    let all = conformance::read_all(&kept, 0, 0, end[0]).await.unwrap();
    let read: Vec<(Vec<u8>, Vec<u8>)> = all.into_iter().map(|r| (r.1, r.2)).collect();
    let written: Vec<(Vec<u8>, Vec<u8>)> =
        (0..records).map(|n| (n.to_be_bytes().to_vec(), incompressible(n, value_bytes))).collect();
    assert!(read == written, "the table without a TTL does not read back its {records} records");
    drop_table(&expiring).await;
    drop_table(&kept).await;
}
