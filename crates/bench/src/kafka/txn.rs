//! The cost of fencing zombie writers with Kafka transactions, measured against today's
//! idempotent producer (the open fencing issue weighs this against epochs in the log).
//!
//! - **sequential**: one put per transaction (`begin_transaction`, send and await the delivery
//!   report, `commit_transaction`) on a raw transactional `FutureProducer` against the raw
//!   idempotent producer of the put measurement (same settings, `acks=all`, `linger.ms=0`),
//!   the same records to the same topic and partition. The two alternate, each going first
//!   every other put, so both see the same broker load.
//! - **batched**: [`BATCH`] puts of different keys (so different partitions) sent at once and
//!   committed in one transaction, against the same [`BATCH`] sends awaited together on the
//!   idempotent producer, alternating in the same way.
//! - **fencing**: whether `init_transactions` with the same `transactional.id` from a second
//!   producer makes the first producer's next send and commit fail, both between transactions
//!   and with one open, and which error rdkafka reports: the signal fencing by transactions
//!   would rely on.
//!
//! The transactional calls of rdkafka block until the coordinator answers, so they run in
//! `block_in_place`, as a runtime on tokio would have to run them.

use super::{fresh_log, raw_client_config, raw_producer};
use actionstate_cli::measure::{percentile, state};
use actionstate_core::{KeyId, LogRecord, StateLog, codec};
use actionstate_kafka::KafkaConfig;
use anyhow::{Context, Result, anyhow};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::util::Timeout;
use serde::Serialize;
use std::time::{Duration, Instant};

/// Puts per transaction in the batched measurement.
pub(super) const BATCH: usize = 16;
/// How long a fenced producer's send or commit may take to fail before the check gives up on
/// it (a hang is a finding too).
const FENCE_WAIT: Duration = Duration::from_secs(20);

/// Transactional put latency against the idempotent producer, in µs, and what fencing reports.
#[derive(Serialize, Debug)]
pub(super) struct TxnFigures {
    /// `init_transactions` of the measuring producer, in ms (once per ownership).
    txn_init_ms: f64,
    txn_put_median_us: f64,
    txn_put_p99_us: f64,
    /// The idempotent producer alternating with the transactional one.
    txn_idem_median_us: f64,
    txn_idem_p99_us: f64,
    /// Transactional median / idempotent median.
    txn_ratio: f64,
    /// Within a transactional put: the send awaited (it adds the partition to the transaction
    /// first) and `commit_transaction`.
    txn_send_median_us: f64,
    txn_send_p99_us: f64,
    txn_commit_median_us: f64,
    txn_commit_p99_us: f64,
    txn_batch_size: usize,
    txn_batches: usize,
    /// One transaction of [`BATCH`] puts, begin to commit.
    txn_batch_median_us: f64,
    txn_batch_p99_us: f64,
    /// [`BATCH`] idempotent sends awaited together.
    idem_batch_median_us: f64,
    idem_batch_p99_us: f64,
    txn_batch_ratio: f64,
    /// `txn_batch_median_us` / [`BATCH`].
    txn_batch_per_put_us: f64,
    /// `idem_batch_median_us` / [`BATCH`].
    idem_batch_per_put_us: f64,
    #[serde(flatten)]
    fence: FenceReport,
}

impl TxnFigures {
    pub(super) fn print(&self) {
        outln!("transactional puts (a transactional.id per ownership; init_transactions {:.1} ms):", self.txn_init_ms);
        outln!(
            "  one put per transaction   median {:.0} µs  p99 {:.0} µs",
            self.txn_put_median_us,
            self.txn_put_p99_us
        );
        outln!(
            "  idempotent produce        median {:.0} µs  p99 {:.0} µs",
            self.txn_idem_median_us,
            self.txn_idem_p99_us
        );
        outln!("  txn_ratio {:.3}", self.txn_ratio);
        outln!(
            "  within a transactional put: send+await median {:.0} µs  p99 {:.0} µs, commit median {:.0} µs  p99 {:.0} µs",
            self.txn_send_median_us,
            self.txn_send_p99_us,
            self.txn_commit_median_us,
            self.txn_commit_p99_us
        );
        outln!(
            "  {} puts per transaction, {} batches: median {:.0} µs  p99 {:.0} µs ({:.0} µs a put)",
            self.txn_batch_size,
            self.txn_batches,
            self.txn_batch_median_us,
            self.txn_batch_p99_us,
            self.txn_batch_per_put_us
        );
        outln!(
            "  {} idempotent sends at once:  median {:.0} µs  p99 {:.0} µs ({:.0} µs a put)",
            self.txn_batch_size,
            self.idem_batch_median_us,
            self.idem_batch_p99_us,
            self.idem_batch_per_put_us
        );
        outln!("  txn_batch_ratio {:.3}", self.txn_batch_ratio);
        self.fence.print();
    }
}

/// What the first producer of a `transactional.id` sees once a second one ran
/// `init_transactions` with the same id.
#[derive(Serialize, Debug)]
pub(super) struct FenceReport {
    /// The second producer's `init_transactions`, in ms, with no transaction open.
    fence_init_ms: f64,
    /// Fenced between transactions: the first producer's `begin_transaction`, send, commit.
    fence_begin_result: String,
    fence_send_result: String,
    fence_commit_result: String,
    /// The second producer's `init_transactions` while the first has a transaction open with
    /// a delivered record, in ms (the coordinator aborts the open transaction first).
    fence_open_init_ms: f64,
    /// That first producer's `commit_transaction` afterwards.
    fence_open_commit_result: String,
}

impl FenceReport {
    fn print(&self) {
        outln!("fencing: a second producer's init_transactions with the same transactional.id");
        outln!("  between transactions (init {:.1} ms), then the first producer's", self.fence_init_ms);
        outln!("    begin_transaction:  {}", self.fence_begin_result);
        outln!("    send:               {}", self.fence_send_result);
        outln!("    commit_transaction: {}", self.fence_commit_result);
        outln!("  with a transaction open (init {:.1} ms), the first producer's", self.fence_open_init_ms);
        outln!("    commit_transaction: {}", self.fence_open_commit_result);
    }
}

/// A raw producer with the log's settings and `transactional.id` = `id`, transactions
/// initialised; returns it with the time `init_transactions` took.
fn txn_producer(config: &KafkaConfig, id: &str) -> Result<(FutureProducer, Duration)> {
    let producer: FutureProducer = raw_client_config(config, Some("0"))
        .set("transactional.id", id)
        .create()
        .context("creating the transactional producer")?;
    let t = Instant::now();
    blocking(|| producer.init_transactions(Timeout::After(config.delivery_timeout)))
        .with_context(|| format!("init_transactions of {id}"))?;
    Ok((producer, t.elapsed()))
}

/// Runs one of rdkafka's blocking transactional calls off the async scheduler.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

fn micros(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e6
}

/// Sequential and batched transactional puts against the idempotent producer, `puts` each
/// side (the batched one in batches of [`BATCH`], at least 20), then the fencing check.
pub(super) async fn measure(base: &KafkaConfig, puts: usize, topics: &mut Vec<String>) -> Result<TxnFigures> {
    let log = fresh_log(base, topics).await?;
    let config = log.config().clone();
    let partitions = log.identity().partitions;
    drop(log);
    let topic = config.topic.as_str();
    let idem = raw_producer(&config)?;
    let (txn, init) = txn_producer(&config, &format!("{topic}-txn"))?;
    let sides = Sides { topic, partitions, timeout: Timeout::After(config.delivery_timeout), idem, txn };
    let mut sequential = sequential(&sides, puts).await?;
    let mut batched = batched(&sides, puts).await?;
    // The transactional producer goes before the fencing check; the idempotent one stays.
    let Sides { txn, idem: _idem, .. } = sides;
    drop(txn);

    let fence = fence_check(&config, partitions).await?;
    for v in [
        &mut sequential.txn_us,
        &mut sequential.idem_us,
        &mut sequential.send_us,
        &mut sequential.commit_us,
        &mut batched.txn_us,
        &mut batched.idem_us,
    ] {
        v.sort_by(f64::total_cmp);
    }
    Ok(figures(init, &sequential, &batched, fence))
}

/// The two producers the measurements alternate between, on one topic.
struct Sides<'a> {
    topic: &'a str,
    partitions: u32,
    timeout: Timeout,
    idem: FutureProducer,
    txn: FutureProducer,
}

impl Sides<'_> {
    /// The error of a send to the topic.
    fn send_err(&self, e: KafkaError) -> anyhow::Error {
        anyhow!("produce to {}: {e}", self.topic)
    }
}

/// The sequential measurement, in µs per put: a whole transactional put, the idempotent put
/// beside it, and the send and commit within the transactional one.
struct Sequential {
    txn_us: Vec<f64>,
    idem_us: Vec<f64>,
    send_us: Vec<f64>,
    commit_us: Vec<f64>,
}

/// One put per transaction against one idempotent put, `puts` of each after a warm-up,
/// alternating which goes first.
async fn sequential(sides: &Sides<'_>, puts: usize) -> Result<Sequential> {
    let Sides { topic, partitions, timeout, idem, txn } = sides;
    let key = KeyId::of(b"bench-txn");
    let mut out = Sequential { txn_us: Vec::new(), idem_us: Vec::new(), send_us: Vec::new(), commit_us: Vec::new() };
    let warmup = 50u64;
    for n in 0..puts as u64 + warmup {
        let (s, _) = state(key, n, n);
        let wire = codec::encode(&LogRecord::Upsert(s))?;
        let partition = i32::try_from(wire.key_id.partition(*partitions))?;
        let record = || FutureRecord::to(topic).partition(partition).key(&wire.key).payload(&wire.value);
        let (mut t_us, mut i_us, mut s_us, mut c_us) = (0.0, 0.0, 0.0, 0.0);
        for side in [n % 2, (n + 1) % 2] {
            let t = Instant::now();
            if side == 0 {
                blocking(|| txn.begin_transaction()).context("begin_transaction")?;
                let sent = Instant::now();
                txn.send(record(), *timeout).await.map_err(|(e, _)| sides.send_err(e))?;
                s_us = micros(sent);
                let committed = Instant::now();
                blocking(|| txn.commit_transaction(*timeout)).context("commit_transaction")?;
                c_us = micros(committed);
                t_us = micros(t);
            } else {
                idem.send(record(), *timeout).await.map_err(|(e, _)| sides.send_err(e))?;
                i_us = micros(t);
            }
        }
        if n >= warmup {
            out.txn_us.push(t_us);
            out.idem_us.push(i_us);
            out.send_us.push(s_us);
            out.commit_us.push(c_us);
        }
    }
    Ok(out)
}

/// The batched measurement, in µs per batch of [`BATCH`] puts.
struct Batched {
    batches: usize,
    txn_us: Vec<f64>,
    idem_us: Vec<f64>,
}

/// [`BATCH`] puts of different keys per transaction against the same sends awaited together
/// on the idempotent producer: `puts / BATCH` batches (at least 20) after a warm-up,
/// alternating which goes first.
async fn batched(sides: &Sides<'_>, puts: usize) -> Result<Batched> {
    let Sides { topic, partitions, timeout, idem, txn } = sides;
    let keys: Vec<KeyId> = (0..BATCH).map(|k| KeyId::of(format!("bench-txn-batch-{k}").as_bytes())).collect();
    let batches = (puts / BATCH).max(20);
    let mut out = Batched { batches, txn_us: Vec::new(), idem_us: Vec::new() };
    let warmup = 5usize;
    for b in 0..batches + warmup {
        let mut wires = Vec::with_capacity(BATCH);
        for &key in &keys {
            let (s, _) = state(key, b as u64, b as u64);
            let wire = codec::encode(&LogRecord::Upsert(s))?;
            let partition = i32::try_from(wire.key_id.partition(*partitions))?;
            wires.push((partition, wire));
        }
        let send_all = |producer: &FutureProducer| -> Result<Vec<_>> {
            wires
                .iter()
                .map(|(p, w)| {
                    producer
                        .send_result(FutureRecord::to(topic).partition(*p).key(&w.key).payload(&w.value))
                        .map_err(|(e, _)| sides.send_err(e))
                })
                .collect()
        };
        let (mut t_us, mut i_us) = (0.0, 0.0);
        for side in [b % 2, (b + 1) % 2] {
            let t = Instant::now();
            let producer = if side == 0 { txn } else { idem };
            if side == 0 {
                blocking(|| txn.begin_transaction()).context("begin_transaction")?;
            }
            for delivery in send_all(producer)? {
                delivery
                    .await
                    .map_err(|_| anyhow!("produce to {topic}: delivery report dropped"))?
                    .map_err(|(e, _)| sides.send_err(e))?;
            }
            if side == 0 {
                blocking(|| txn.commit_transaction(*timeout)).context("commit_transaction")?;
                t_us = micros(t);
            } else {
                i_us = micros(t);
            }
        }
        if b >= warmup {
            out.txn_us.push(t_us);
            out.idem_us.push(i_us);
        }
    }
    Ok(out)
}

/// The figures of the sorted measurements, with the fencing check's report.
fn figures(init: Duration, sequential: &Sequential, batched: &Batched, fence: FenceReport) -> TxnFigures {
    let Sequential { txn_us, idem_us, send_us, commit_us } = sequential;
    let (txn_median, idem_median) = (percentile(txn_us, 0.5), percentile(idem_us, 0.5));
    let (txn_batch_median, idem_batch_median) = (percentile(&batched.txn_us, 0.5), percentile(&batched.idem_us, 0.5));
    TxnFigures {
        txn_init_ms: init.as_secs_f64() * 1e3,
        txn_put_median_us: txn_median,
        txn_put_p99_us: percentile(txn_us, 0.99),
        txn_idem_median_us: idem_median,
        txn_idem_p99_us: percentile(idem_us, 0.99),
        txn_ratio: txn_median / idem_median.max(1e-9),
        txn_send_median_us: percentile(send_us, 0.5),
        txn_send_p99_us: percentile(send_us, 0.99),
        txn_commit_median_us: percentile(commit_us, 0.5),
        txn_commit_p99_us: percentile(commit_us, 0.99),
        txn_batch_size: BATCH,
        txn_batches: batched.batches,
        txn_batch_median_us: txn_batch_median,
        txn_batch_p99_us: percentile(&batched.txn_us, 0.99),
        idem_batch_median_us: idem_batch_median,
        idem_batch_p99_us: percentile(&batched.idem_us, 0.99),
        txn_batch_ratio: txn_batch_median / idem_batch_median.max(1e-9),
        txn_batch_per_put_us: txn_batch_median / BATCH as f64,
        idem_batch_per_put_us: idem_batch_median / BATCH as f64,
        fence,
    }
}

/// Two producers per `transactional.id`, as a restore elsewhere would make one: the second's
/// `init_transactions` between the first's transactions, then while the first has one open.
async fn fence_check(config: &KafkaConfig, partitions: u32) -> Result<FenceReport> {
    let topic = config.topic.as_str();
    let timeout = Timeout::After(config.delivery_timeout);
    let (s, _) = state(KeyId::of(b"bench-fence"), 0, 0);
    let wire = codec::encode(&LogRecord::Upsert(s))?;
    let partition = i32::try_from(wire.key_id.partition(partitions))?;
    let record = || FutureRecord::to(topic).partition(partition).key(&wire.key).payload(&wire.value);
    let send = async |producer: &FutureProducer| match tokio::time::timeout(
        FENCE_WAIT,
        producer.send(record(), timeout),
    )
    .await
    {
        Err(_) => format!("no delivery report within {} s", FENCE_WAIT.as_secs()),
        Ok(Ok(_)) => "ok".to_owned(),
        Ok(Err((e, _))) => describe(&e),
    };

    // Between transactions.
    let id = format!("{topic}-fence");
    let (zombie, _) = txn_producer(config, &id)?;
    blocking(|| zombie.begin_transaction()).context("begin_transaction")?;
    let first = send(&zombie).await;
    if first != "ok" {
        return Err(anyhow!("the first producer's send before fencing: {first}"));
    }
    blocking(|| zombie.commit_transaction(timeout)).context("commit_transaction before fencing")?;
    let (_successor, fence_init) = txn_producer(config, &id)?;
    let fence_begin_result = result_text(blocking(|| zombie.begin_transaction()));
    let fence_send_result = send(&zombie).await;
    let fence_commit_result = result_text(blocking(|| zombie.commit_transaction(Timeout::After(FENCE_WAIT))));

    // With a transaction open.
    let id = format!("{topic}-fence-open");
    let (zombie, _) = txn_producer(config, &id)?;
    blocking(|| zombie.begin_transaction()).context("begin_transaction")?;
    let first = send(&zombie).await;
    if first != "ok" {
        return Err(anyhow!("the first producer's send before fencing: {first}"));
    }
    let (_successor, fence_open_init) = txn_producer(config, &id)?;
    let fence_open_commit_result = result_text(blocking(|| zombie.commit_transaction(Timeout::After(FENCE_WAIT))));

    Ok(FenceReport {
        fence_init_ms: fence_init.as_secs_f64() * 1e3,
        fence_begin_result,
        fence_send_result,
        fence_commit_result,
        fence_open_init_ms: fence_open_init.as_secs_f64() * 1e3,
        fence_open_commit_result,
    })
}

fn result_text(r: KafkaResult<()>) -> String {
    match r {
        Ok(()) => "ok".to_owned(),
        Err(e) => describe(&e),
    }
}

/// rdkafka's text for `e`, with its code and, for transaction errors, whether librdkafka
/// holds it fatal (the producer is unusable) or abortable.
fn describe(e: &KafkaError) -> String {
    let code = e.rdkafka_error_code().map(|c| format!("{c:?}")).unwrap_or_else(|| "none".to_owned());
    match e {
        KafkaError::Transaction(t) => {
            format!("{e} [code {code}, fatal {}, txn_requires_abort {}]", t.is_fatal(), t.txn_requires_abort())
        }
        _ => format!("{e} [code {code}]"),
    }
}
