//! The `actionstate` binary on a real Kafka broker and Fluss cluster: the commands that only
//! read change nothing, the commands that need an empty log refuse a non-empty one and leave it
//! alone, no secret is ever printed, and the hint the demo prints opens the log it names.
//!
//! Each test compares what the server holds before and after the commands: per partition (or
//! bucket) the earliest and end offsets, every record, the topic's described configuration or
//! the table's properties, and the topics or tables whose names the test chose.
//!
//! The servers come from `cargo xtask services up kafka` and `cargo xtask services up fluss`
//! (or `KAFKA_*` and `FLUSS_*` in the environment); without them each test prints the
//! `ACTIONSTATE-SKIP` marker, which `cargo xtask ci` turns into a failure. Built only with the
//! binary's `kafka` and `fluss` features (`cargo test -p actionstate --features kafka,fluss`).
#![cfg(all(feature = "kafka", feature = "fluss"))]
#![allow(clippy::unwrap_used, reason = "tests")]

use actionstate_core::StateLog;
use actionstate_testkit::services::Service;
use rdkafka::admin::{AdminClient, AdminOptions, AlterConfig, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};
use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// A secret written inline into a URL (`password=`), which no output may show.
const INLINE_SECRET: &str = "s3cr3t-XYZ";
/// A wrong password handed over by `password_env`, which no output may show either.
const ENV_SECRET: &str = "s3cr3t-XYZ-from-env";
/// The variable the tests name with `password_env=`.
const PASSWORD_VAR: &str = "ACTIONSTATE_SAFETY_PASSWORD";

fn actionstate(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_actionstate"));
    command.args(args).env_remove(PASSWORD_VAR);
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().unwrap()
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// A name no earlier run used.
fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("{prefix}_{}_{nanos}", std::process::id())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// The demo every test starts from: 40 inputs over 4 keys into `url`, which must succeed; its
/// report, in JSON or (`json` false) as text, hints included.
fn demo(url: &str, env: &[(&str, &str)], json: bool) -> String {
    let mut args = vec!["demo", "--log", url, "--inputs", "40", "--keys", "4"];
    if json {
        args.push("--json");
    }
    let out = actionstate(&args, env);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "demo on {url} failed: {stdout}{stderr}");
    stdout
}

/// The commands that only read, each on `url`: `(name, arguments)`.
fn read_only_commands(url: &str) -> Vec<(&'static str, Vec<String>)> {
    let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    vec![
        ("inspect", args(&["inspect", "--log", url, "--json"])),
        ("verify", args(&["verify", "--log", url])),
        ("explain", args(&["explain", "--log", url, "--key", "sim-key-0", "--seq", "0", "--action", "plan"])),
        (
            "reset --dry-run",
            args(&["reset", "--log", url, "--key", "sim-key-0", "--from-seq", "3", "--reason", "audit", "--dry-run"]),
        ),
    ]
}

/// Runs every read-only command on `url`: each must succeed.
fn run_read_only_commands(url: &str) {
    for (name, args) in read_only_commands(url) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = actionstate(&args, &[]);
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{name} on {url} failed: {stdout}{stderr}");
    }
}

/// Runs every read-only command on `url`, which names no log: each must fail saying so.
fn assert_missing_log_is_an_error(url: &str) {
    for (name, args) in read_only_commands(url) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = actionstate(&args, &[]);
        let (stdout, stderr) = text(&out);
        assert!(!out.status.success(), "{name} on the missing {url} succeeded: {stdout}");
        assert!(stderr.contains("does not exist"), "{name} on the missing {url}: {stderr}");
    }
}

/// `bench` and `soak` on `url`, which holds a log: each must refuse, saying the log is not
/// empty.
fn assert_bench_and_soak_refuse(url: &str) {
    // A Kafka soak takes the broker's `log.dirs` to measure its topic there; it must refuse
    // before it measures anything, so any directory does.
    let measured = tempfile::tempdir().unwrap();
    let measured = measured.path().to_str().unwrap();
    let mut soak = vec!["soak", "--log", url, "--inputs", "2000"];
    if url.starts_with("kafka:") {
        soak.extend(["--broker-log-dir", measured]);
    }
    for args in [&["bench", "--log", url, "--puts", "10", "--records", "100"][..], &soak[..]] {
        let out = actionstate(args, &[]);
        let (stdout, stderr) = text(&out);
        assert!(!out.status.success(), "{} on a non-empty log succeeded: {stdout}{stderr}", args[0]);
        assert!(stderr.contains("not empty"), "{} on a non-empty log: {stderr}", args[0]);
    }
}

/// Runs `args` with `env` and checks that neither output shows a secret.
fn assert_no_secret(args: &[&str], env: &[(&str, &str)]) {
    let out = actionstate(args, env);
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "{args:?} succeeded: {stdout}");
    for secret in [INLINE_SECRET, ENV_SECRET] {
        assert!(!stdout.contains(secret) && !stderr.contains(secret), "{args:?} showed a secret: {stdout}{stderr}");
    }
}

/// Every command that takes `--log` on `url`, checked to show no secret.
fn assert_commands_show_no_secret(url: &str, env: &[(&str, &str)]) {
    for (_, args) in read_only_commands(url) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_no_secret(&args, env);
    }
    let reset = ["reset", "--log", url, "--key", "sim-key-0", "--from-seq", "3", "--reason", "audit", "--yes"];
    assert_no_secret(&reset, env);
}

/// The line the demo prints to reopen its log (`inspect it: actionstate inspect --log ...`),
/// run as a shell runs it, with `actionstate` found on the `PATH` and `env` set: it must
/// succeed and print the inspection of a log holding the demo's 4 keys.
fn assert_hint_reopens_the_log(demo_output: &str, env: &[(&str, &str)]) {
    let prefix = "inspect it: actionstate inspect --log ";
    let hint = demo_output.lines().map(str::trim).find(|l| l.starts_with(prefix));
    let hint = hint.unwrap_or_else(|| panic!("no line `{prefix}...` in: {demo_output}"));
    let command = hint.strip_prefix("inspect it: ").unwrap();
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_actionstate")).parent().unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let mut shell = Command::new("sh");
    shell.arg("-c").arg(command).env("PATH", path);
    for (k, v) in env {
        shell.env(k, v);
    }
    let started = Instant::now();
    let out = shell.output().unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "the hint `{command}` failed after {:?}: {stdout}{stderr}", started.elapsed());
    // A URL the shell splits (at `&`) runs a truncated command in the background, and the
    // shell's own status is then that of what follows: the inspection must be there.
    assert!(stdout.contains("4 keys"), "the hint `{command}` printed no inspection of the log: {stdout}{stderr}");
    assert!(!stderr.contains("error"), "the hint `{command}`: {stderr}");
}

/// The same log without credentials fails within its request timeout, saying that
/// authentication is needed.
fn assert_no_credentials_fails_naming_authentication(url: &str) {
    let started = Instant::now();
    let out = actionstate(&["inspect", "--log", url], &[]);
    let waited = started.elapsed();
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "inspect without credentials succeeded: {stdout}");
    assert!(stderr.to_lowercase().contains("authentication"), "{stderr}");
    assert!(waited < Duration::from_secs(5 + 10), "inspect without credentials took {waited:?}: {stderr}");
}

// ---------------------------------------------------------------------------------------
// Kafka

struct Kafka {
    bootstrap: String,
    sasl_bootstrap: String,
    username: String,
    password: String,
}

fn kafka(test: &str) -> Option<Kafka> {
    let s = Service::require("kafka", "KAFKA", test)?;
    let get = |k: &str| s.get(k).unwrap_or_else(|| panic!("the broker's settings lack {k}")).to_owned();
    Some(Kafka {
        bootstrap: get("KAFKA_BOOTSTRAP"),
        sasl_bootstrap: get("KAFKA_SASL_BOOTSTRAP"),
        username: get("KAFKA_SASL_USERNAME"),
        password: get("KAFKA_SASL_PASSWORD"),
    })
}

impl Kafka {
    fn admin(&self) -> AdminClient<DefaultClientContext> {
        ClientConfig::new().set("bootstrap.servers", &self.bootstrap).create().unwrap()
    }

    fn consumer(&self) -> BaseConsumer {
        ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("group.id", unique("safety-reader"))
            .set("enable.auto.commit", "false")
            .set("enable.partition.eof", "false")
            .create()
            .unwrap()
    }

    /// The topics whose names start with `prefix`.
    fn topics(&self, prefix: &str) -> BTreeSet<String> {
        let md = self.consumer().fetch_metadata(None, Duration::from_secs(10)).unwrap();
        md.topics().iter().map(|t| t.name().to_owned()).filter(|n| n.starts_with(prefix)).collect()
    }

    /// The topic's configuration as the broker describes it.
    fn configs(&self, topic: &str) -> BTreeMap<String, Option<String>> {
        runtime().block_on(async {
            let described = self
                .admin()
                .describe_configs([&ResourceSpecifier::Topic(topic)], &AdminOptions::new())
                .await
                .unwrap()
                .remove(0)
                .unwrap();
            described.entries.into_iter().map(|e| (e.name, e.value)).collect()
        })
    }

    /// Replaces the topic's dynamic settings by `settings` (and waits until the broker
    /// describes them).
    fn alter(&self, topic: &str, settings: &[(&str, &str)]) {
        runtime().block_on(async {
            let mut alter = AlterConfig::new(ResourceSpecifier::Topic(topic));
            for (k, v) in settings {
                alter = alter.set(k, v);
            }
            for r in self.admin().alter_configs([&alter], &AdminOptions::new()).await.unwrap() {
                r.unwrap();
            }
        });
        let started = Instant::now();
        while !settings.iter().all(|(k, v)| self.configs(topic).get(*k) == Some(&Some((*v).to_owned()))) {
            assert!(started.elapsed() < Duration::from_secs(30), "the broker never described {settings:?}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Everything the topic holds (see [`TopicState`]).
    fn state(&self, topic: &str) -> TopicState {
        let consumer = self.consumer();
        let md = consumer.fetch_metadata(Some(topic), Duration::from_secs(10)).unwrap();
        let partitions = md.topics()[0].partitions().len() as i32;
        assert!(partitions > 0, "topic {topic} has no partitions");
        let marks: Vec<(i64, i64)> =
            (0..partitions).map(|p| consumer.fetch_watermarks(topic, p, Duration::from_secs(10)).unwrap()).collect();
        let mut tpl = TopicPartitionList::new();
        for (p, (lo, _)) in (0..partitions).zip(&marks) {
            tpl.add_partition_offset(topic, p, Offset::Offset(*lo)).unwrap();
        }
        consumer.assign(&tpl).unwrap();
        let mut records = BTreeSet::new();
        let wanted: i64 = marks.iter().map(|(lo, hi)| hi - lo).sum();
        let started = Instant::now();
        while (records.len() as i64) < wanted {
            assert!(started.elapsed() < Duration::from_secs(60), "read {} of {wanted} records", records.len());
            let Some(m) = consumer.poll(Duration::from_millis(200)) else { continue };
            let m = m.unwrap();
            let headers: Vec<(String, Vec<u8>)> = m
                .headers()
                .map(|h| h.iter().map(|h| (h.key.to_owned(), h.value.unwrap_or_default().to_vec())).collect())
                .unwrap_or_default();
            records.insert(KafkaRecord {
                partition: m.partition(),
                offset: m.offset(),
                key: m.key().unwrap_or_default().to_vec(),
                value: m.payload().unwrap_or_default().to_vec(),
                headers,
            });
        }
        let bytes = records.iter().map(|r| r.key.len() + r.value.len()).sum();
        TopicState {
            earliest: marks.iter().map(|m| m.0).collect(),
            end: marks.iter().map(|m| m.1).collect(),
            bytes,
            records,
            configs: self.configs(topic),
        }
    }

    fn url(&self, topic: &str) -> String {
        format!("kafka://{}/{topic}?replication=1", self.bootstrap)
    }
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct KafkaRecord {
    partition: i32,
    offset: i64,
    key: Vec<u8>,
    value: Vec<u8>,
    headers: Vec<(String, Vec<u8>)>,
}

/// What a topic holds, compared before and after a command.
#[derive(Debug, PartialEq)]
struct TopicState {
    earliest: Vec<i64>,
    end: Vec<i64>,
    bytes: usize,
    records: BTreeSet<KafkaRecord>,
    configs: BTreeMap<String, Option<String>>,
}

/// Asserts that running `commands` leaves `topic`, and the topics starting with `prefix`,
/// as they were.
fn assert_kafka_unchanged(kafka: &Kafka, topic: &str, prefix: &str, what: &str, commands: impl FnOnce()) {
    let (before, topics) = (kafka.state(topic), kafka.topics(prefix));
    assert!(!before.records.is_empty(), "{topic} holds no records");
    commands();
    let after = kafka.state(topic);
    assert_eq!(after.earliest, before.earliest, "{what}: earliest offsets of {topic} changed");
    assert_eq!(after.end, before.end, "{what}: end offsets of {topic} changed");
    assert_eq!((after.records.len(), after.bytes), (before.records.len(), before.bytes), "{what}: records");
    assert!(after.records == before.records, "{what}: the records of {topic} changed");
    assert_eq!(after.configs, before.configs, "{what}: the configuration of {topic} changed");
    assert_eq!(kafka.topics(prefix), topics, "{what}: topics appeared");
}

/// Rows 3 and 16: `inspect`, `verify`, `explain` and `reset --dry-run` change nothing on a
/// demo's topic, on the same topic made compact-only (which a writer's open would migrate to
/// `compact,delete` with unlimited retention), and on it with a time retention (which a
/// writer's open refuses without `allow_retention=true`): they read it as it is. A topic that
/// does not exist is an error and is not created.
#[test]
fn kafka_read_only_commands_change_nothing() {
    let Some(kafka) = kafka("kafka_read_only_commands_change_nothing") else { return };
    let topic = unique("safety-ro").replace('_', "-");
    let url = kafka.url(&topic);
    demo(&url, &[], true);
    assert_kafka_unchanged(&kafka, &topic, &topic, "on the demo's topic", || run_read_only_commands(&url));

    kafka.alter(&topic, &[("cleanup.policy", "compact")]);
    assert_kafka_unchanged(&kafka, &topic, &topic, "on a compact-only topic", || run_read_only_commands(&url));
    assert_eq!(kafka.configs(&topic)["cleanup.policy"].as_deref(), Some("compact"));

    kafka.alter(&topic, &[("cleanup.policy", "compact,delete"), ("retention.ms", "604800000")]);
    assert_kafka_unchanged(&kafka, &topic, &topic, "on a topic with retention.ms", || run_read_only_commands(&url));

    let absent = format!("{topic}-absent");
    assert_missing_log_is_an_error(&kafka.url(&absent));
    assert!(kafka.topics(&absent).is_empty(), "a read-only command created {absent}");
}

/// Rows 1 and 2: `bench` and `soak` refuse a log that holds records, saying it is not empty,
/// and leave it (and every topic named after it) as it was.
#[test]
fn kafka_bench_and_soak_refuse_a_non_empty_log() {
    let Some(kafka) = kafka("kafka_bench_and_soak_refuse_a_non_empty_log") else { return };
    let topic = unique("safety-full").replace('_', "-");
    let url = kafka.url(&topic);
    demo(&url, &[], true);
    assert_kafka_unchanged(&kafka, &topic, &topic, "bench and soak", || assert_bench_and_soak_refuse(&url));
}

/// Row 8: with a password written into the URL, or a wrong one the broker rejects handed over
/// by `password_env`, no command prints the secret.
#[test]
fn kafka_commands_never_print_a_secret() {
    let Some(kafka) = kafka("kafka_commands_never_print_a_secret") else { return };
    let topic = unique("safety-secret").replace('_', "-");
    let inline =
        format!("kafka://{}/{topic}?username={}&password={INLINE_SECRET}", kafka.sasl_bootstrap, kafka.username);
    assert_commands_show_no_secret(&inline, &[]);
    let env = format!(
        "kafka://{}/{topic}?request_timeout=5s&username={}&password_env={PASSWORD_VAR}",
        kafka.sasl_bootstrap, kafka.username
    );
    assert_commands_show_no_secret(&env, &[(PASSWORD_VAR, ENV_SECRET)]);
    assert!(kafka.topics(&topic).is_empty(), "a failed command created {topic}");
}

/// Row 17: the demo on the SASL listener, with the password in a variable, prints a hint that
/// reopens its log as printed; the same log without credentials fails within its request
/// timeout with an error that names authentication.
#[test]
fn kafka_demo_hint_on_sasl_reopens_the_log() {
    let Some(kafka) = kafka("kafka_demo_hint_on_sasl_reopens_the_log") else { return };
    let topic = unique("safety-sasl").replace('_', "-");
    let env = [(PASSWORD_VAR, kafka.password.as_str())];
    let url = format!(
        "kafka://{}/{topic}?replication=1&username={}&password_env={PASSWORD_VAR}",
        kafka.sasl_bootstrap, kafka.username
    );
    let out = demo(&url, &env, false);
    assert!(!out.contains(&kafka.password), "the demo printed the password: {out}");
    assert_hint_reopens_the_log(&out, &env);
    assert_no_credentials_fails_naming_authentication(&format!(
        "kafka://{}/{topic}?request_timeout=5s",
        kafka.sasl_bootstrap
    ));
}

// ---------------------------------------------------------------------------------------
// Fluss

/// The database of every table these tests create.
const DATABASE: &str = "actionstate_safety";

struct Fluss {
    bootstrap: String,
    sasl_bootstrap: String,
    username: String,
    password: String,
}

fn fluss(test: &str) -> Option<Fluss> {
    let s = Service::require("fluss", "FLUSS", test)?;
    let get = |k: &str| s.get(k).unwrap_or_else(|| panic!("the cluster's settings lack {k}")).to_owned();
    Some(Fluss {
        bootstrap: get("FLUSS_BOOTSTRAP"),
        sasl_bootstrap: get("FLUSS_SASL_BOOTSTRAP"),
        username: get("FLUSS_SASL_USERNAME"),
        password: get("FLUSS_SASL_PASSWORD"),
    })
}

/// What a table holds, compared before and after a command.
#[derive(Debug, PartialEq)]
struct TableState {
    table_id: i64,
    earliest: Vec<i64>,
    end: Vec<i64>,
    bytes: usize,
    records: Vec<(u32, u64, Vec<u8>, Vec<u8>)>,
    properties: BTreeMap<String, String>,
    custom_properties: BTreeMap<String, String>,
    modified: i64,
}

impl Fluss {
    fn url(&self, table: &str) -> String {
        format!("fluss://{}/{DATABASE}/{table}", self.bootstrap)
    }

    async fn admin(&self) -> (fluss::client::FlussConnection, std::sync::Arc<fluss::client::FlussAdmin>) {
        let config = fluss::config::Config { bootstrap_servers: self.bootstrap.clone(), ..Default::default() };
        let connection = fluss::client::FlussConnection::new(config).await.unwrap();
        let admin = connection.get_admin().unwrap();
        (connection, admin)
    }

    /// The tables of [`DATABASE`] whose names start with `prefix`, and whether the database
    /// `database` exists.
    fn tables(&self, prefix: &str, database: &str) -> (BTreeSet<String>, bool) {
        runtime().block_on(async {
            let (_connection, admin) = self.admin().await;
            let tables = admin.list_tables(DATABASE).await.unwrap_or_default();
            let exists = admin.database_exists(database).await.unwrap();
            (tables.into_iter().filter(|t| t.starts_with(prefix)).collect(), exists)
        })
    }

    /// Everything the table holds (see [`TableState`]); the records are read through a
    /// read-only log.
    fn state(&self, table: &str) -> TableState {
        runtime().block_on(async {
            let (_connection, admin) = self.admin().await;
            let path = fluss::metadata::TablePath::new(DATABASE, table);
            let info = admin.get_table_info(&path).await.unwrap();
            let buckets: Vec<i32> = (0..info.get_num_buckets()).collect();
            let listed = |spec| {
                let (admin, path, buckets) = (admin.clone(), path.clone(), buckets.clone());
                async move {
                    let offsets = admin.list_offsets(&path, &buckets, spec).await.unwrap();
                    buckets.iter().map(|b| offsets[b]).collect::<Vec<i64>>()
                }
            };
            let earliest = listed(fluss::rpc::message::OffsetSpec::Earliest).await;
            let end = listed(fluss::rpc::message::OffsetSpec::Latest).await;
            let mut config = actionstate_fluss::FlussConfig::new(&self.bootstrap, DATABASE, table, 1);
            config.read_only = true;
            let log = actionstate_fluss::FlussLog::open(config).await.unwrap();
            let mut records = Vec::new();
            for (b, (lo, hi)) in (0u32..).zip(earliest.iter().zip(&end)) {
                let read = actionstate_testkit::conformance::read_all(&log, b, *lo as u64, *hi as u64).await.unwrap();
                records.extend(read.into_iter().map(|(offset, key, value)| (b, offset, key, value)));
            }
            assert_eq!(log.identity().partitions as usize, buckets.len());
            let sorted = |m: &std::collections::HashMap<String, String>| m.clone().into_iter().collect();
            TableState {
                table_id: info.get_table_id(),
                earliest,
                end,
                bytes: records.iter().map(|r| r.2.len() + r.3.len()).sum(),
                records,
                properties: sorted(info.get_properties()),
                custom_properties: sorted(info.get_custom_properties()),
                modified: info.get_modified_time(),
            }
        })
    }
}

/// Asserts that running `commands` leaves `table`, and the tables starting with `prefix`, as
/// they were.
fn assert_fluss_unchanged(fluss: &Fluss, table: &str, prefix: &str, what: &str, commands: impl FnOnce()) {
    let (before, tables) = (fluss.state(table), fluss.tables(prefix, DATABASE));
    assert!(!before.records.is_empty(), "{table} holds no records");
    commands();
    let after = fluss.state(table);
    assert_eq!(after.table_id, before.table_id, "{what}: {table} was recreated");
    assert_eq!(after.earliest, before.earliest, "{what}: earliest offsets of {table} changed");
    assert_eq!(after.end, before.end, "{what}: end offsets of {table} changed");
    assert_eq!((after.records.len(), after.bytes), (before.records.len(), before.bytes), "{what}: records");
    assert!(after.records == before.records, "{what}: the records of {table} changed");
    assert_eq!(after.properties, before.properties, "{what}: the properties of {table} changed");
    assert_eq!(after.custom_properties, before.custom_properties, "{what}: the properties of {table} changed");
    assert_eq!(after.modified, before.modified, "{what}: {table} was altered");
    assert_eq!(fluss.tables(prefix, DATABASE), tables, "{what}: tables appeared");
}

/// Rows 3 and 16 on Fluss: `inspect`, `verify`, `explain` and `reset --dry-run` change nothing
/// on a demo's table, nor on one whose TTL deletes records after 7 days (which a writer's open
/// refuses without `log_ttl=`): they read it as it is. A table, or a database, that does not
/// exist is an error and is not created.
#[test]
fn fluss_read_only_commands_change_nothing() {
    let Some(fluss) = fluss("fluss_read_only_commands_change_nothing") else { return };
    let table = unique("safety_ro");
    let url = fluss.url(&table);
    demo(&url, &[], true);
    assert_fluss_unchanged(&fluss, &table, &table, "on the demo's table", || run_read_only_commands(&url));

    let with_ttl = format!("{table}_ttl");
    demo(&format!("{}?log_ttl=7d", fluss.url(&with_ttl)), &[], true);
    assert_eq!(fluss.state(&with_ttl).properties.get("table.log.ttl").map(String::as_str), Some("604800000 ms"));
    assert_fluss_unchanged(&fluss, &with_ttl, &table, "on a table with a TTL", || {
        run_read_only_commands(&fluss.url(&with_ttl))
    });

    let absent = format!("{table}_absent");
    assert_missing_log_is_an_error(&fluss.url(&absent));
    let absent_database = unique("safety_absent_db");
    assert_missing_log_is_an_error(&format!("fluss://{}/{absent_database}/{table}", fluss.bootstrap));
    assert_eq!(fluss.tables(&absent, &absent_database), (BTreeSet::new(), false), "a read-only command created");
}

/// Rows 1 and 2 on Fluss: `bench` and `soak` refuse a table that holds records, saying it is
/// not empty, and leave it (and every table named after it) as it was.
#[test]
fn fluss_bench_and_soak_refuse_a_non_empty_log() {
    let Some(fluss) = fluss("fluss_bench_and_soak_refuse_a_non_empty_log") else { return };
    let table = unique("safety_full");
    let url = fluss.url(&table);
    demo(&url, &[], true);
    assert_fluss_unchanged(&fluss, &table, &table, "bench and soak", || assert_bench_and_soak_refuse(&url));
}

/// Row 8 on Fluss: with a password written into the URL, or a wrong one the cluster rejects
/// handed over by `password_env`, no command prints the secret.
#[test]
fn fluss_commands_never_print_a_secret() {
    let Some(fluss) = fluss("fluss_commands_never_print_a_secret") else { return };
    let table = unique("safety_secret");
    let inline = format!(
        "fluss://{}/{DATABASE}/{table}?username={}&password={INLINE_SECRET}",
        fluss.sasl_bootstrap, fluss.username
    );
    assert_commands_show_no_secret(&inline, &[]);
    let env = format!(
        "fluss://{}/{DATABASE}/{table}?request_timeout=5s&username={}&password_env={PASSWORD_VAR}",
        fluss.sasl_bootstrap, fluss.username
    );
    assert_commands_show_no_secret(&env, &[(PASSWORD_VAR, ENV_SECRET)]);
    assert!(fluss.tables(&table, DATABASE).0.is_empty(), "a failed command created {table}");
}

/// Row 17 on Fluss: the demo on the SASL listener prints a hint that reopens its log as
/// printed; the same log without credentials fails with an error that names authentication.
#[test]
fn fluss_demo_hint_on_sasl_reopens_the_log() {
    let Some(fluss) = fluss("fluss_demo_hint_on_sasl_reopens_the_log") else { return };
    let table = unique("safety_sasl");
    let env = [(PASSWORD_VAR, fluss.password.as_str())];
    let url = format!(
        "fluss://{}/{DATABASE}/{table}?username={}&password_env={PASSWORD_VAR}",
        fluss.sasl_bootstrap, fluss.username
    );
    let out = demo(&url, &env, false);
    assert!(!out.contains(&fluss.password), "the demo printed the password: {out}");
    assert_hint_reopens_the_log(&out, &env);
    assert_no_credentials_fails_naming_authentication(&format!(
        "fluss://{}/{DATABASE}/{table}?request_timeout=5s",
        fluss.sasl_bootstrap
    ));
}
