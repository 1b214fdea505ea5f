//! The Kafka service under a SIGKILL campaign, on the broker `cargo xtask services up kafka`
//! starts: a fresh input topic of 4 partitions holds inputs of a few dozen keys; the service is
//! started, killed with SIGKILL after a random delay (seeded, printed) and started again, at
//! least 20 times, and then left to finish. After each kill a store restored from the state
//! log, as the next run restores it, must reuse every acknowledged input the restored
//! checkpoint does not cover; at the end the ledger must hold every input's side effect exactly
//! once, and the last checkpoint must cover every input.
//!
//! `ACTIONSTATE_KAFKA_SERVICE_KILLS` sets the number of kills (default 20),
//! `ACTIONSTATE_KAFKA_SERVICE_SEED` the seed of the kill delays.
#![allow(clippy::unwrap_used, reason = "tests")]

use actionstate_core::{ActionId, Trigger};
use actionstate_examples::{Entry, Input, Kind, Ledger, Positions};
use actionstate_recovery::{ActionStateStore, Begin, LogConfig, Ownership, RestoreFrom, StoreConfig, open};
use actionstate_testkit::services::Service;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const PARTITIONS: i32 = 4;
const KEYS: u64 = 32;
const PER_KEY: u64 = 15;
const INPUTS: u64 = KEYS * PER_KEY;
/// Kill delays after a start, in milliseconds.
const DELAY_MS: (u64, u64) = (20, 800);
/// How long each side effect takes, so that the runs between kills get through part of the
/// input and not all of it: the work is some 20 ms an input, the kills leave a run some 400 ms.
const EFFECT_MS: u64 = 10;
/// Longest the last run may take.
const LAST_RUN: Duration = Duration::from_secs(60);

/// Where an input lies in the input topic: (key, seq) → (partition, offset).
type Offsets = HashMap<(String, u64), (i32, i64)>;

/// A small deterministic generator (splitmix64) for the kill delays.
struct Rng(u64);

impl Rng {
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        lo + (z ^ (z >> 31)) % (hi - lo + 1)
    }
}

/// The `seq`-th input of `key`, as the producer writes it and an audit replays it.
fn input(key: &str, seq: u64) -> Input {
    Input { key: key.to_owned(), seq, text: format!("request {seq} of {key}") }
}

fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(value.trim().parse().unwrap_or_else(|_| panic!("{name}={value:?} is not a number")))
}

fn admin(bootstrap: &str) -> AdminClient<DefaultClientContext> {
    ClientConfig::new().set("bootstrap.servers", bootstrap).create().unwrap()
}

async fn create_input_topic(bootstrap: &str, topic: &str) {
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let new = NewTopic::new(topic, PARTITIONS, TopicReplication::Fixed(1));
    for result in admin(bootstrap).create_topics([&new], &opts).await.unwrap() {
        result.unwrap_or_else(|(t, code)| panic!("creating topic {t}: {code}"));
    }
}

/// Produces `PER_KEY` inputs of each of `KEYS` keys, the keys' inputs interleaved, and returns
/// where each landed.
async fn produce(bootstrap: &str, topic: &str) -> Offsets {
    let producer: FutureProducer =
        ClientConfig::new().set("bootstrap.servers", bootstrap).set("enable.idempotence", "true").create().unwrap();
    let mut offsets = Offsets::new();
    for seq in 0..PER_KEY {
        let mut sent = Vec::new();
        for k in 0..KEYS {
            let input = input(&format!("key-{k:02}"), seq);
            let value = input.value();
            let record = FutureRecord::to(topic).key(&input.key).payload(&value);
            let delivery = producer.send_result(record).map_err(|(e, _)| e).unwrap();
            sent.push((input, delivery));
        }
        for (input, delivery) in sent {
            let delivered = delivery.await.unwrap().map_err(|(e, _)| e).unwrap();
            offsets.insert((input.key, input.seq), (delivered.partition, delivered.offset));
        }
    }
    offsets
}

async fn delete_topics(bootstrap: &str, topics: &[&str]) {
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    // Best effort: the topics' names are fresh, a leftover harms no later run.
    let _ = admin(bootstrap).delete_topics(topics, &opts).await;
}

fn spawn(bootstrap: &str, topic: &str, state_log: &str, dir: &Path) -> Child {
    let append = |name: &str| std::fs::OpenOptions::new().create(true).append(true).open(dir.join(name)).unwrap();
    Command::new(env!("CARGO_BIN_EXE_kafka-service"))
        .args([bootstrap, topic, state_log])
        .arg(dir.join("ledger"))
        .arg(INPUTS.to_string())
        .args(["--effect-ms", &EFFECT_MS.to_string()])
        .stdin(Stdio::null())
        .stdout(append("service.out"))
        .stderr(append("service.err"))
        .spawn()
        .unwrap()
}

/// Waits up to `limit` for `child` to exit on its own.
async fn wait_for(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// What a restore of the state log keeps of the acknowledged inputs.
#[derive(Debug, Default)]
struct Audit {
    /// Acknowledged inputs before the restored checkpoint's positions: a restart does not
    /// replay them.
    covered: u64,
    /// Acknowledged inputs after them whose state a restart reuses.
    reused: u64,
    /// Acknowledged inputs after them whose state a restart would not reuse.
    lost: Vec<Entry>,
    /// The restored positions.
    positions: Positions,
}

/// Restores a store from the state log, as the service's next run does, and replays each
/// acknowledged input the restored checkpoint does not cover: its action must be reused.
async fn audit(state_log: &str, ledger: &Ledger, offsets: &Offsets) -> Audit {
    let log = open(&state_log.parse::<LogConfig>().unwrap()).await.unwrap();
    let (store, restored) =
        ActionStateStore::restore(log, StoreConfig::default(), &Ownership::All, RestoreFrom::Latest).await.unwrap();
    let positions = restored.metadata().map(|m| Positions::decode(m).unwrap()).unwrap_or_default();
    let acked: BTreeSet<Entry> = ledger.entries().unwrap().into_iter().filter(|e| e.kind == Kind::Ack).collect();
    let mut audit = Audit::default();
    for ack in acked {
        let (partition, offset) = offsets[&(ack.key.clone(), ack.seq)];
        if positions.covers(partition, offset) {
            audit.covered += 1;
            continue;
        }
        let input = input(&ack.key, ack.seq);
        let event = input.event();
        let begin = store.begin(&input.round(&event), &ActionId::new("record-effect"), &event, &Trigger::Input).await;
        match begin.unwrap() {
            Begin::Reuse(_) => audit.reused += 1,
            Begin::Resume(_) | Begin::Fresh(..) => audit.lost.push(ack),
        }
    }
    audit.positions = positions;
    audit
}

/// Effect lines per input: (effects, duplicates, missing).
fn effects(ledger: &Ledger, offsets: &Offsets) -> (u64, u64, u64) {
    let mut count: BTreeMap<(String, u64), u64> = BTreeMap::new();
    for e in ledger.entries().unwrap().into_iter().filter(|e| e.kind == Kind::Effect) {
        assert!(offsets.contains_key(&(e.key.clone(), e.seq)), "an effect of no input: {e}");
        *count.entry((e.key, e.seq)).or_default() += 1;
    }
    let effects = count.values().sum();
    let duplicates = count.values().map(|n| n - 1).sum();
    (effects, duplicates, offsets.len() as u64 - count.len() as u64)
}

/// What the kills and the audits after them found.
#[derive(Debug, Default)]
struct Tally {
    kills: u64,
    /// Kills of runs that had not written to the ledger yet (opening the logs, restoring).
    while_starting: u64,
    /// Acknowledged inputs the audits found covered by the restored checkpoint, summed.
    covered: u64,
    /// Acknowledged inputs the audits replayed and found reused, summed.
    reused: u64,
    /// Acknowledged inputs an audit found neither covered nor reused.
    lost: BTreeSet<Entry>,
}

/// Starts the service, kills it after a random delay, audits the state log, and again, until
/// `kills` runs were killed.
async fn campaign(kills: u64, rng: &mut Rng, args: (&str, &str, &str), dir: &Path, offsets: &Offsets) -> Tally {
    let (bootstrap, topic, state_log) = args;
    let ledger = Ledger::new(dir.join("ledger"));
    let mut tally = Tally::default();
    while tally.kills < kills {
        let before = ledger.entries().unwrap().len();
        let delay = Duration::from_millis(rng.range(DELAY_MS.0, DELAY_MS.1));
        let mut child = spawn(bootstrap, topic, state_log, dir);
        if let Some(status) = wait_for(&mut child, delay).await {
            let err = std::fs::read_to_string(dir.join("service.err")).unwrap_or_default();
            panic!("the service exited ({status}) after {} kills, before its kill after {delay:?}: {err}", tally.kills);
        }
        child.kill().unwrap(); // SIGKILL on Unix
        assert_eq!(child.wait().unwrap().signal(), Some(9));
        tally.kills += 1;
        tally.while_starting += u64::from(ledger.entries().unwrap().len() == before);
        let audit = audit(state_log, &ledger, offsets).await;
        println!(
            "kill {} after {delay:?}: {} inputs checkpointed, {} acknowledged since then reused, {} lost",
            tally.kills,
            audit.positions.inputs(),
            audit.reused,
            audit.lost.len()
        );
        tally.covered += audit.covered;
        tally.reused += audit.reused;
        tally.lost.extend(audit.lost);
    }
    tally
}

/// Lets the last run finish; its summary line.
async fn last_run(args: (&str, &str, &str), dir: &Path) -> String {
    let (bootstrap, topic, state_log) = args;
    let mut child = spawn(bootstrap, topic, state_log, dir);
    let status = wait_for(&mut child, LAST_RUN).await;
    if status.is_none() {
        child.kill().unwrap();
        child.wait().unwrap();
    }
    let err = std::fs::read_to_string(dir.join("service.err")).unwrap();
    assert!(status.is_some_and(|s| s.success()), "the last run failed ({status:?}): {err}");
    let out = std::fs::read_to_string(dir.join("service.out")).unwrap();
    out.lines().rfind(|l| l.starts_with("kafka-service: ")).unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_survives_sigkill_with_each_effect_once_and_no_acknowledged_state_lost() {
    let Some(kafka) = Service::require("kafka", "KAFKA", "kafka_service") else { return };
    let started = Instant::now();
    let kills = env_u64("ACTIONSTATE_KAFKA_SERVICE_KILLS").unwrap_or(20);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let seed = env_u64("ACTIONSTATE_KAFKA_SERVICE_SEED").unwrap_or(now.as_secs() ^ u64::from(now.subsec_nanos()));
    println!("kafka_service: seed {seed} (ACTIONSTATE_KAFKA_SERVICE_SEED={seed} repeats the kill delays)");
    let bootstrap = kafka.bootstrap().to_owned();
    let suffix = format!("{:x}-{}", now.as_nanos(), std::process::id());
    let (input_topic, state_topic) = (format!("kafka-service-in-{suffix}"), format!("kafka-service-state-{suffix}"));
    let state_log = format!("kafka://{bootstrap}/{state_topic}?partitions=4");
    create_input_topic(&bootstrap, &input_topic).await;
    let offsets = produce(&bootstrap, &input_topic).await;
    let dir = tempfile::tempdir().unwrap();

    let args = (bootstrap.as_str(), input_topic.as_str(), state_log.as_str());
    let mut tally = campaign(kills, &mut Rng(seed), args, dir.path(), &offsets).await;
    let summary = last_run(args, dir.path()).await;
    println!("{summary}");

    let ledger = Ledger::new(dir.path().join("ledger"));
    let last = audit(&state_log, &ledger, &offsets).await;
    tally.lost.extend(last.lost);
    let (effects, duplicates, missing) = effects(&ledger, &offsets);
    let out = std::fs::read_to_string(dir.path().join("service.out")).unwrap();
    let reconciled = out.lines().filter(|l| l.starts_with("reconciled ")).count();
    delete_topics(&bootstrap, &[&input_topic, &state_topic]).await;
    println!(
        "{{\"test\":\"kafka_service\",\"seed\":{seed},\"kills\":{},\"kills_while_starting\":{},\
         \"inputs\":{INPUTS},\"effects\":{effects},\"duplicates\":{duplicates},\"missing\":{missing},\
         \"lost\":{},\"reuse_checks\":{},\"covered_checks\":{},\"reconciled\":{reconciled},\"wall_s\":{:.1}}}",
        tally.kills,
        tally.while_starting,
        tally.lost.len(),
        tally.reused,
        tally.covered,
        started.elapsed().as_secs_f64()
    );
    assert_eq!((duplicates, missing), (0, 0), "every input's side effect exactly once");
    assert!(tally.lost.is_empty(), "acknowledged states lost: {:?}", tally.lost);
    assert_eq!(last.positions.inputs(), INPUTS, "the last checkpoint counts every input");
    for ((key, seq), (partition, offset)) in &offsets {
        assert!(last.positions.covers(*partition, *offset), "the last checkpoint does not cover {key} {seq}");
    }
    let acked: BTreeSet<(String, u64)> =
        ledger.entries().unwrap().into_iter().filter(|e| e.kind == Kind::Ack).map(|e| (e.key, e.seq)).collect();
    assert_eq!(acked.len() as u64, INPUTS, "every input acknowledged");
}
