//! `actionstate-bench --log kafka://...`: store paths on a Kafka topic side by side with raw
//! rdkafka clients, in the same run.
//!
//! - **put**: `ActionStateStore::complete` on a `KafkaLog` against a raw `FutureProducer` send
//!   of the same key and value bytes to the same topic and partition, with the log's producer
//!   settings (`acks=all`, `enable.idempotence=true`, `linger.ms=0`), awaiting the delivery
//!   report. The two alternate, so both see the same broker load.
//! - **linger**: the raw send of the same records with librdkafka's default `linger.ms`,
//!   awaiting the delivery report without flushing (the wait the put avoids), and the same
//!   send followed by a flush (the other way to avoid it, measured to justify `linger.ms=0`).
//! - **concurrent**: 64 keys putting at once (one task each), store against raw producer
//!   throughput at the same concurrency; for reference the log's append alone and the store on
//!   the in-memory log (the store's own cost).
//! - **rebuild**: `ActionStateStore::rebuild` from offset 0 against a raw `BaseConsumer`
//!   assigned every partition from offset 0, reading until each partition reaches the end
//!   offset captured before, copying each key and value out as any reader must. For reference
//!   the plain `StateLog::read` of all partitions (parallel, no decoding) is measured too.
//! - **txn**: puts through a transactional producer (one transaction per put, and per
//!   batch of puts) against the idempotent producer, and what a fenced producer sees: the cost
//!   of fencing zombie writers with transactions (see the `txn` module).

mod txn;

use crate::args::BenchArgs;
use crate::report::{PutFigures, ROUNDS, RawRead, RebuildFigures, RebuildRound, fenced_count, ratios_text};
use actionstate_cli::measure::{load, log_read, median, percentile, state, store_put};
use actionstate_core::{KeyId, LogRecord, Marker, StateLog, codec};
use actionstate_kafka::{KafkaConfig, KafkaLog};
use actionstate_memory::MemoryLog;
use actionstate_recovery::{
    ActionStateStore, CheckpointForm, LogConfig, Ownership, Round, Snapshot, StoreConfig, TwoPhase,
};
use anyhow::{Context, Result, anyhow, bail};
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::util::Timeout;
use rdkafka::{Offset, TopicPartitionList};
use serde::Serialize;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Records written and rebuilt unless `--records` says otherwise.
const DEFAULT_RECORDS: usize = 500_000;
/// Keys putting at once in the concurrent measurement.
const CONCURRENT_KEYS: usize = 64;
/// Measured rounds of the concurrent measurement, after one warm-up round (see
/// [`ROUNDS`]).
const CONCURRENT_ROUNDS: u64 = 15;

#[derive(Serialize, Debug)]
struct Report {
    backend: &'static str,
    bootstrap: String,
    partitions: u32,
    #[serde(flatten)]
    put: PutFigures,
    linger_wait_median_us: f64,
    send_flush_median_us: f64,
    concurrent_keys: usize,
    concurrent_puts_per_s: f64,
    raw_concurrent_per_s: f64,
    concurrent_ratio: f64,
    concurrent_round_ratios: Vec<f64>,
    log_concurrent_per_s: f64,
    store_memory_concurrent_per_s: f64,
    #[serde(flatten)]
    txn: txn::TxnFigures,
    #[serde(flatten)]
    rebuild: RebuildFigures,
}

/// Measures on fresh topics `<TOPIC>-<pid>-<n>`, with every other setting of `base` (the
/// `--log` URL's).
pub(crate) async fn run(args: BenchArgs, base: KafkaConfig) -> Result<ExitCode> {
    let mut topics = Vec::new();
    let result = measure(&base, &args, &mut topics).await;
    delete_topics(&base.bootstrap, &topics).await;
    let report = result?;
    if args.json {
        outln!("{}", serde_json::to_string(&report)?);
    } else {
        outln!(
            "kafka backend at {}, {} partitions, {} sequential puts each side:",
            report.bootstrap,
            report.partitions,
            report.put.puts
        );
        report.put.print("raw produce", 1.15);
        outln!(
            "  raw produce with the default linger.ms: awaiting delivery median {:.0} µs, send+flush+await {:.0} µs",
            report.linger_wait_median_us,
            report.send_flush_median_us
        );
        outln!(
            "{} keys putting concurrently, medians of {} rounds: store {:.0} puts/s, raw producer {:.0} sends/s",
            report.concurrent_keys,
            report.concurrent_round_ratios.len(),
            report.concurrent_puts_per_s,
            report.raw_concurrent_per_s,
        );
        outln!(
            "  concurrent_ratio {:.3} (target ≥ 0.8; rounds {})",
            report.concurrent_ratio,
            ratios_text(&report.concurrent_round_ratios)
        );
        outln!("  (KafkaLog::append alone, same keys: {:.0} appends/s)", report.log_concurrent_per_s);
        outln!("  (the store on the in-memory log, same tasks: {:.0} puts/s)", report.store_memory_concurrent_per_s);
        report.txn.print();
        report.rebuild.print("raw consumer", "partitions");
    }
    Ok(ExitCode::SUCCESS)
}

async fn measure(base: &KafkaConfig, args: &BenchArgs, topics: &mut Vec<String>) -> Result<Report> {
    let (ours, raw) = put_latency(base, args, topics).await?;
    let txn = txn::measure(base, args.puts, topics).await?;
    let (linger_wait, send_flush) = linger_latency(base, args, topics).await?;
    let concurrent = concurrent_throughput(base, topics, args.concurrent_puts).await?;
    let concurrent_round_ratios: Vec<f64> = concurrent.iter().map(|[store, _, raw]| store / raw.max(1e-9)).collect();
    let (records, bytes, rounds) = rebuild_throughput(base, args, topics).await?;
    Ok(Report {
        backend: "kafka",
        bootstrap: base.bootstrap.clone(),
        partitions: base.partitions,
        put: PutFigures::of(args.puts, &ours, &raw),
        linger_wait_median_us: percentile(&linger_wait, 0.5),
        send_flush_median_us: percentile(&send_flush, 0.5),
        concurrent_keys: CONCURRENT_KEYS,
        concurrent_puts_per_s: median(concurrent.iter().map(|r| r[0])),
        raw_concurrent_per_s: median(concurrent.iter().map(|r| r[2])),
        concurrent_ratio: median(concurrent_round_ratios.iter().copied()),
        concurrent_round_ratios,
        log_concurrent_per_s: median(concurrent.iter().map(|r| r[1])),
        store_memory_concurrent_per_s: memory_concurrent(args.concurrent_puts).await?,
        txn,
        rebuild: RebuildFigures::of(records, bytes, RawRead::Read, &rounds),
    })
}

/// Opens the log on a new, empty topic `actionstate-bench-<pid>-<n>`, skipping names a former
/// process of the same pid left with records, and remembers the topic for deletion.
async fn fresh_log(base: &KafkaConfig, topics: &mut Vec<String>) -> Result<KafkaLog> {
    let pid = std::process::id();
    for n in topics.len()..topics.len() + 100 {
        let topic = format!("{}-{pid}-{n}", base.topic);
        let config = KafkaConfig { topic: topic.clone(), ..base.clone() };
        // A topic that is there already is someone's: never written to, never deleted.
        if actionstate_cli::claim::exists(&LogConfig::Kafka(Box::new(config.clone()))).await {
            continue;
        }
        let log = KafkaLog::open(config).await.with_context(|| {
            format!(
                "cannot use kafka://{}/{topic} (is a broker running there? `cargo xtask services up kafka` \
                 starts one and writes its address to target/services/kafka.env)",
                base.bootstrap
            )
        })?;
        if log.end_offsets().await?.iter().all(|&e| e == 0) {
            topics.push(topic);
            return Ok(log);
        }
    }
    bail!("no empty topic {}-{pid}-<n> found; delete the old ones", base.topic)
}

/// A producer with the log's settings: `acks=all`, idempotent, `linger.ms=0`.
fn raw_producer(config: &KafkaConfig) -> Result<FutureProducer> {
    raw_producer_with(config, Some("0"))
}

/// A producer with the log's settings and `linger` (`None`: librdkafka's default).
fn raw_producer_with(config: &KafkaConfig, linger: Option<&str>) -> Result<FutureProducer> {
    raw_client_config(config, linger).create().context("creating the raw producer")
}

/// The raw producers' settings: the log's (`acks=all`, idempotent, its timeouts) and `linger`
/// (`None`: librdkafka's default).
fn raw_client_config(config: &KafkaConfig, linger: Option<&str>) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &config.bootstrap)
        .set("socket.timeout.ms", millis(config.request_timeout))
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("message.timeout.ms", millis(config.delivery_timeout))
        .set("allow.auto.create.topics", "false");
    if let Some(linger) = linger {
        c.set("linger.ms", linger);
    }
    c
}

fn millis(d: Duration) -> String {
    d.as_millis().max(1).to_string()
}

/// Alternates store puts and raw sends so both see the same broker load.
async fn put_latency(base: &KafkaConfig, args: &BenchArgs, topics: &mut Vec<String>) -> Result<(Vec<f64>, Vec<f64>)> {
    let log = fresh_log(base, topics).await?;
    let config = log.config().clone();
    let partitions = log.identity().partitions;
    // Fencing on, as a runtime runs it: the store restores first (from no snapshot), takes its
    // owner epoch and fences the partitions; every put then carries the epoch.
    let (store, _) =
        ActionStateStore::restore(log, StoreConfig::default(), &Ownership::All, Vec::<Snapshot>::new()).await?;
    let raw = raw_producer(&config)?;
    let key = KeyId::of(b"bench-put");
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    let warmup = 50;
    for n in 0..(args.puts + warmup) as u64 {
        let (s, ours_us) = store_put(&store, key, n, n).await?;

        let wire = codec::encode(&LogRecord::Upsert((*s).clone()))?;
        let partition = i32::try_from(wire.key_id.partition(partitions))?;
        let record = FutureRecord::to(&config.topic).partition(partition).key(&wire.key).payload(&wire.value);
        let t = Instant::now();
        raw.send(record, Timeout::After(config.delivery_timeout))
            .await
            .map_err(|(e, _)| anyhow!("raw produce to {}: {e}", config.topic))?;
        let raw_us = t.elapsed().as_secs_f64() * 1e6;
        if n >= warmup as u64 {
            ours.push(ours_us);
            theirs.push(raw_us);
        }
    }
    ours.sort_by(f64::total_cmp);
    theirs.sort_by(f64::total_cmp);
    Ok((ours, theirs))
}

/// Sequential raw sends of benchmark records with librdkafka's default `linger.ms`: awaiting
/// each delivery report as it comes (the producer holds the record for the linger first), and
/// flushing after each send before awaiting. A quarter of `--puts` each (at least 50).
async fn linger_latency(
    base: &KafkaConfig,
    args: &BenchArgs,
    topics: &mut Vec<String>,
) -> Result<(Vec<f64>, Vec<f64>)> {
    let log = fresh_log(base, topics).await?;
    let config = log.config().clone();
    let partitions = log.identity().partitions;
    let lingering = raw_producer_with(&config, None)?;
    let key = KeyId::of(b"bench-linger");
    let (mut waits, mut flushes) = (Vec::new(), Vec::new());
    let warmup = 10u64;
    for n in 0..(args.puts / 4).max(50) as u64 + warmup {
        let (s, _) = state(key, n, n);
        let wire = codec::encode(&LogRecord::Upsert(s))?;
        let partition = i32::try_from(wire.key_id.partition(partitions))?;
        let record = || FutureRecord::to(&config.topic).partition(partition).key(&wire.key).payload(&wire.value);
        let t = Instant::now();
        lingering
            .send(record(), Timeout::After(config.delivery_timeout))
            .await
            .map_err(|(e, _)| anyhow!("raw produce to {}: {e}", config.topic))?;
        let wait_us = t.elapsed().as_secs_f64() * 1e6;
        let t = Instant::now();
        let delivery =
            lingering.send_result(record()).map_err(|(e, _)| anyhow!("raw produce to {}: {e}", config.topic))?;
        lingering.flush(Timeout::After(config.delivery_timeout)).context("flushing the raw producer")?;
        delivery
            .await
            .map_err(|_| anyhow!("raw produce to {}: delivery report dropped", config.topic))?
            .map_err(|(e, _)| anyhow!("raw produce to {}: {e}", config.topic))?;
        let flush_us = t.elapsed().as_secs_f64() * 1e6;
        if n >= warmup {
            waits.push(wait_us);
            flushes.push(flush_us);
        }
    }
    waits.sort_by(f64::total_cmp);
    flushes.sort_by(f64::total_cmp);
    Ok((waits, flushes))
}

/// Throughput with [`CONCURRENT_KEYS`] keys putting at once, one task per key, each doing
/// `per_round` sequential store puts (`begin` + `complete`), against the same number of
/// tasks sending the same records through one raw producer, awaiting each delivery, and the
/// store's log appending alone. A warm-up round first, then [`CONCURRENT_ROUNDS`] rounds in
/// which the three run back to back, in an order that rotates, each round followed by a
/// [`checkpoint`] of the store. Returns each measured round's
/// [store puts/s, log appends/s, raw sends/s].
async fn concurrent_throughput(base: &KafkaConfig, topics: &mut Vec<String>, per_round: u64) -> Result<Vec<[f64; 3]>> {
    let log = fresh_log(base, topics).await?;
    let config = log.config().clone();
    let partitions = log.identity().partitions;
    // Two-phase, as a runtime that keeps its checkpoints: each round ends with a `checkpoint`.
    let (store, _) =
        ActionStateStore::restore(log, StoreConfig::default(), &Ownership::All, Vec::<Snapshot>::new()).await?;
    let store = Arc::new(store);
    let raw = raw_producer(&config)?;
    let keys = concurrent_keys();
    let mut rounds = Vec::new();
    let topic: Arc<str> = config.topic.as_str().into();
    let timeout = config.delivery_timeout;
    for round in 0..=CONCURRENT_ROUNDS {
        let seqs = round * per_round..(round + 1) * per_round;
        let mut rates = [0f64; 3];
        // The order rotates every round, so that no side always runs right after another.
        for side in (0..3).map(|i| (i + round as usize) % 3) {
            let rate = match side {
                0 => store_concurrent(&store, &keys, seqs.clone()).await?,
                // The log alone, with sequence numbers above the store's so the records differ.
                1 => {
                    let store = Arc::clone(&store);
                    per_key_rate(&keys, seqs.clone(), move |key, n| {
                        let store = Arc::clone(&store);
                        async move {
                            let (s, _) = state(key, n + 1_000_000, n);
                            store.log().append(codec::encode(&LogRecord::Upsert(s))?).await?;
                            Ok(())
                        }
                    })
                    .await?
                }
                // The raw producer: the store's records, to the same partitions.
                _ => {
                    let (raw, topic) = (raw.clone(), Arc::clone(&topic));
                    per_key_rate(&keys, seqs.clone(), move |key, n| {
                        let (raw, topic) = (raw.clone(), Arc::clone(&topic));
                        async move {
                            let (s, _) = state(key, n, n);
                            let wire = codec::encode(&LogRecord::Upsert(s))?;
                            let partition = i32::try_from(wire.key_id.partition(partitions))?;
                            let record =
                                FutureRecord::to(&topic).partition(partition).key(&wire.key).payload(&wire.value);
                            raw.send(record, Timeout::After(timeout))
                                .await
                                .map_err(|(e, _)| anyhow!("raw produce to {topic}: {e}"))?;
                            Ok(())
                        }
                    })
                    .await?
                }
            };
            rates[side] = rate;
        }
        checkpoint(&store, &keys, round, seqs.end - 1).await?;
        // Round 0 warms up.
        if round > 0 {
            rounds.push(rates);
        }
    }
    Ok(rounds)
}

/// What a runtime does between bursts of puts, untimed: marks the rounds up to `last`
/// completed for every key, takes checkpoint `id` and completes it, which prunes those rounds
/// from the index (and, with retention, reclaims what no retained checkpoint needs). Without it the store side's index grew with every round (to half a
/// million states), a cost that depends on how long the benchmark runs and that the raw
/// producer, which keeps nothing, never pays.
async fn checkpoint<L: StateLog>(
    store: &ActionStateStore<L, TwoPhase>,
    keys: &[KeyId],
    id: u64,
    last: u64,
) -> Result<()> {
    for &key in keys {
        // Round `last` of the key, with the input `store_put` put it with: every action of
        // the rounds up to it is done.
        store.round(Round::new(key, last, &state(key, last, last).1)).finish();
    }
    store.snapshot(id).await?;
    let pruned = store.checkpoint_complete(id);
    // Retention reclaims in the background once three checkpoints completed; off the put
    // path, so not part of the timed rounds either.
    let reclaim = store.wait_for_reclaim().await;
    if let Some(e) = reclaim.last_error {
        bail!("checkpoint {id}: reclaim failed: {e}");
    }
    let left = store.stats().states;
    if left != 0 {
        bail!("checkpoint {id} pruned {pruned} states and left {left}");
    }
    Ok(())
}

/// The business keys of the concurrent measurements.
fn concurrent_keys() -> Vec<KeyId> {
    (0..CONCURRENT_KEYS).map(|k| KeyId::of(format!("bench-concurrent-{k}").as_bytes())).collect()
}

/// Operations/s of one task per key running `op(key, n)` for each `n` of `seqs` in turn, all
/// keys at once.
async fn per_key_rate<F, Fut>(keys: &[KeyId], seqs: std::ops::Range<u64>, op: F) -> Result<f64>
where
    F: Fn(KeyId, u64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Result<()>> + Send + 'static,
{
    let t = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for &key in keys {
        let (op, seqs) = (op.clone(), seqs.clone());
        tasks.spawn(async move {
            for n in seqs {
                op(key, n).await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(joined) = tasks.join_next().await {
        joined??;
    }
    Ok((keys.len() as u64 * (seqs.end - seqs.start)) as f64 / t.elapsed().as_secs_f64())
}

/// Puts/s of one task per key putting the states `seqs` through `store` (`begin` + `complete`
/// each), all keys at once.
async fn store_concurrent<L: StateLog, F: CheckpointForm>(
    store: &Arc<ActionStateStore<L, F>>,
    keys: &[KeyId],
    seqs: std::ops::Range<u64>,
) -> Result<f64> {
    let store = Arc::clone(store);
    per_key_rate(keys, seqs, move |key, n| {
        let store = Arc::clone(&store);
        async move { store_put(&store, key, n, n).await.map(drop) }
    })
    .await
}

/// The store's own cost at the concurrency of `concurrent_throughput`: the same tasks and puts
/// on the in-memory log, where an append costs next to nothing, with a [`checkpoint`] after
/// each round. Median of three rounds after a warm-up round.
async fn memory_concurrent(per_round: u64) -> Result<f64> {
    let store = Arc::new(ActionStateStore::new_two_phase(MemoryLog::new(8), StoreConfig::default()));
    let keys = concurrent_keys();
    let mut rates = Vec::new();
    for round in 0..4u64 {
        let rate = store_concurrent(&store, &keys, round * per_round..(round + 1) * per_round).await?;
        checkpoint(&store, &keys, round, (round + 1) * per_round - 1).await?;
        if round > 0 {
            rates.push(rate);
        }
    }
    Ok(median(rates))
}

/// Writes the records through the log (many concurrent appends), then times a store rebuild
/// from offset 0, a raw consumer read of the same range and a plain `StateLog::read` of every
/// partition, in [`ROUNDS`] rounds, the three back to back in each.
async fn rebuild_throughput(
    base: &KafkaConfig,
    args: &BenchArgs,
    topics: &mut Vec<String>,
) -> Result<(u64, u64, Vec<RebuildRound>)> {
    let log = Arc::new(fresh_log(base, topics).await?);
    let config = log.config().clone();
    let bytes = load(&log, args.records.unwrap_or(DEFAULT_RECORDS), 0).await?;
    let end = log.end_offsets().await?;
    let written: u64 = end.iter().sum();
    // The whole log from offset 0, with no completed rounds to prune.
    let marker = Marker::new(log.identity().clone(), vec![0; end.len()]);
    let partitions = u64::from(marker.log.partitions);
    let from = [Snapshot { checkpoint: 0, marker, completed: Arc::default() }];
    drop(log);

    let mut rounds = Vec::new();
    for round in 0..ROUNDS {
        // A fresh log per round, so the rebuild creates its consumers as a restarted worker does.
        let log = KafkaLog::open(config.clone()).await?;
        let (store, restored) = ActionStateStore::restore(log, StoreConfig::default(), &Ownership::All, &from).await?;
        let report = restored.rebuild;
        // Besides what was written, a rebuild reads the fence records of the rounds' rebuilds
        // before it and its own: one per partition each (a restore fences, as a runtime's does).
        if !fenced_count(report.records, written, round, partitions) {
            bail!("rebuild read {} records, the topic holds {written} and fences", report.records);
        }
        drop(store);
        let (c, e) = (config.clone(), end.clone());
        let (n, rate) = tokio::task::spawn_blocking(move || raw_read(&c, &e)).await??;
        if n != written {
            bail!("raw read saw {n} records, the topic holds {written}");
        }
        // A fresh log again, so its consumers are created inside the measurement as well.
        let log = Arc::new(KafkaLog::open(config.clone()).await?);
        let log_read = log_read(&log, &end).await?;
        rounds.push(RebuildRound { rebuild: report.records_per_second(), raw: rate, log_read });
    }
    Ok((written, bytes, rounds))
}

/// One consumer assigned every partition from offset 0, polled until each partition reaches
/// `end`, copying key and value of every record out. Timed from creating the consumer, as the
/// rebuild's time includes creating its consumers.
fn raw_read(config: &KafkaConfig, end: &[u64]) -> Result<(u64, f64)> {
    let t = Instant::now();
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &config.bootstrap)
        .set("socket.timeout.ms", millis(config.request_timeout))
        .set("group.id", format!("actionstate-bench-raw-{}-{nanos}", std::process::id()))
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "error")
        .set("enable.partition.eof", "false")
        .set("fetch.wait.max.ms", "100")
        .create()
        .context("creating the raw consumer")?;
    let mut tpl = TopicPartitionList::new();
    let mut remaining = 0usize;
    for (p, &e) in (0i32..).zip(end) {
        if e > 0 {
            tpl.add_partition_offset(&config.topic, p, Offset::Offset(0))?;
            remaining += 1;
        }
    }
    consumer.assign(&tpl).context("assigning the partitions")?;
    let mut next = vec![0u64; end.len()];
    let (mut n, mut sink) = (0u64, 0usize);
    let mut last_progress = Instant::now();
    while remaining > 0 {
        match consumer.poll(Duration::from_millis(100)) {
            None => {
                if last_progress.elapsed() >= config.read_stall_timeout {
                    bail!("raw read of {} stalled at {next:?} (end {end:?})", config.topic);
                }
            }
            Some(Err(e)) => return Err(e).context("raw read"),
            Some(Ok(msg)) => {
                let (Ok(p), Ok(offset)) = (usize::try_from(msg.partition()), u64::try_from(msg.offset())) else {
                    bail!("raw read: record at partition {} offset {}", msg.partition(), msg.offset());
                };
                let (Some(slot), Some(&e)) = (next.get_mut(p), end.get(p)) else {
                    bail!("raw read: record of unknown partition {p}");
                };
                if offset < *slot || offset >= e {
                    continue;
                }
                let key = msg.key().map(<[u8]>::to_vec).unwrap_or_default();
                let value = msg.payload().map(<[u8]>::to_vec).unwrap_or_default();
                sink = sink.wrapping_add(key.len() + value.len());
                n += 1;
                *slot = offset + 1;
                if *slot >= e {
                    remaining -= 1;
                }
                last_progress = Instant::now();
            }
        }
    }
    std::hint::black_box(sink);
    Ok((n, n as f64 / t.elapsed().as_secs_f64()))
}

/// Deletes the benchmark's topics; failures only leave them behind.
async fn delete_topics(bootstrap: &str, topics: &[String]) {
    if topics.is_empty() {
        return;
    }
    let Ok(admin) =
        ClientConfig::new().set("bootstrap.servers", bootstrap).create::<AdminClient<DefaultClientContext>>()
    else {
        return;
    };
    let names: Vec<&str> = topics.iter().map(String::as_str).collect();
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    if let Err(e) = admin.delete_topics(&names, &opts).await {
        eprintln!("warning: deleting the benchmark topics {names:?}: {e}");
    }
}
