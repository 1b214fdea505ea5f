//! `actionstate bench` (`--log file:DIR`): end-to-end store paths side by side with the raw
//! embedded database, in the same run. `--log kafka://...` does the same on a Kafka topic against
//! raw rdkafka clients (see the `kafka` module), `--log fluss://...` on an Apache Fluss log table
//! against raw fluss-rs clients (see the `fluss` module).
//!
//! - **put**: `ActionStateStore::complete` (encode, durable append, index) against a raw redb
//!   write transaction inserting the same bytes with the same durability and committing.
//! - **rebuild**: `ActionStateStore::rebuild` of N records (read, checksum, decode, index)
//!   against a raw scan of the same records in the same database file, copying each key and
//!   value out as any reader must.

use crate::claim;
use actionstate_core::{
    ActionId, ActionState, Attributes, Event, EventId, KeyId, LogRecord, MemoryOp, MemoryUpdate, Progress, StateKey,
    StateLog, TaggedBytes, Trigger, Value, codec,
};
use actionstate_file::{FileConfig, FileLog};
use actionstate_recovery::{ActionStateStore, Begin, LogConfig, Ownership, Round, StoreConfig};
use anyhow::{Context, Result, bail};
use redb::{ReadableDatabase, ReadableTable};
use serde::Serialize;
use std::collections::HashMap;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub(crate) struct BenchArgs {
    /// What to measure, as a log URL: `file:DIR` (the embedded default; DIR must be absent or
    /// empty, the benchmark writes into `DIR/bench` and removes that, and DIR if it created it,
    /// when done; without `--log`, a fresh directory under the system temp dir),
    /// `kafka://HOST:PORT/TOPIC` (fresh topics `TOPIC-<pid>-<n>` on that cluster, with the
    /// URL's partitions, timeouts and credentials) or `fluss://HOST:PORT/DATABASE/TABLE` (fresh
    /// tables `DATABASE.TABLE_<pid>_<n>`).
    #[arg(long, value_name = "URL")]
    log: Option<String>,
    /// Sequential puts measured (each side).
    #[arg(long, default_value_t = 2000)]
    puts: usize,
    /// Records written and rebuilt (default: 1,000,000 for `file`, 500,000 for `kafka`,
    /// 200,000 for `fluss`).
    #[arg(long)]
    records: Option<usize>,
    /// Partitions of the log, from the URL.
    #[arg(skip)]
    partitions: u32,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    metrics: crate::metrics::MetricsArgs,
}

/// Sequential put latency of the store against the raw client, in µs, from the sorted
/// samples of one run. Every backend's report carries it.
#[derive(Serialize, Debug)]
pub(crate) struct PutFigures {
    puts: usize,
    put_median_us: f64,
    put_p99_us: f64,
    raw_median_us: f64,
    raw_p99_us: f64,
    put_ratio: f64,
}

impl PutFigures {
    pub(crate) fn of(puts: usize, ours: &[f64], raw: &[f64]) -> Self {
        PutFigures {
            puts,
            put_median_us: percentile(ours, 0.5),
            put_p99_us: percentile(ours, 0.99),
            raw_median_us: percentile(raw, 0.5),
            raw_p99_us: percentile(raw, 0.99),
            put_ratio: percentile(ours, 0.5) / percentile(raw, 0.5).max(1e-9),
        }
    }

    /// The store and raw lines; `raw` names the raw operation, `target` is the highest
    /// `put_ratio` the backend's issue accepts.
    pub(crate) fn print(&self, raw: &str, target: f64) {
        outln!("  store put     median {:.0} µs  p99 {:.0} µs", self.put_median_us, self.put_p99_us);
        outln!("  {raw:<13} median {:.0} µs  p99 {:.0} µs", self.raw_median_us, self.raw_p99_us);
        outln!("  put_ratio     {:.3} (target ≤ {target})", self.put_ratio);
    }
}

/// One round of a rebuild measurement: the store's rebuild, the raw client's read of the same
/// records and the backend's own `StateLog::read`, run back to back, in records/s.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RebuildRound {
    pub(crate) rebuild: f64,
    pub(crate) raw: f64,
    pub(crate) log_read: f64,
}

/// Rebuild throughput of the store against a raw client reading the same records, and
/// against the backend's own `StateLog::read` of every partition without decoding. Rates are
/// medians over the rounds; ratios are taken within each round (its sides ran back to back
/// against the same server state) and the median reported, with every round's ratio.
#[derive(Serialize, Debug)]
pub(crate) struct RebuildFigures {
    records: u64,
    record_bytes: u64,
    rebuild_records_per_s: f64,
    #[serde(flatten)]
    raw: RawRead,
    rebuild_ratio: f64,
    rebuild_round_ratios: Vec<f64>,
    log_read_records_per_s: f64,
    rebuild_vs_log_read: f64,
}

/// Records/s of the raw client, named for how it reads: a consumer or scanner of the log
/// (Kafka, Fluss), or a scan of the database file (embedded backend).
#[derive(Serialize, Debug, Clone, Copy)]
pub(crate) enum RawRead {
    #[serde(rename = "raw_read_records_per_s")]
    #[cfg_attr(
        not(any(feature = "kafka", feature = "fluss")),
        allow(dead_code, reason = "read by the server backends")
    )]
    Read(f64),
    #[serde(rename = "raw_scan_records_per_s")]
    Scan(f64),
}

impl RawRead {
    fn per_s(self) -> f64 {
        match self {
            RawRead::Read(r) | RawRead::Scan(r) => r,
        }
    }
}

impl RebuildFigures {
    /// `raw` names the raw client's figure (`RawRead::Read` or `RawRead::Scan`).
    pub(crate) fn of(records: u64, bytes: u64, raw: fn(f64) -> RawRead, rounds: &[RebuildRound]) -> Self {
        let ratios: Vec<f64> = rounds.iter().map(|r| r.rebuild / r.raw.max(1e-9)).collect();
        RebuildFigures {
            records,
            record_bytes: bytes / records.max(1),
            rebuild_records_per_s: median(rounds.iter().map(|r| r.rebuild)),
            raw: raw(median(rounds.iter().map(|r| r.raw))),
            rebuild_ratio: median(ratios.iter().copied()),
            rebuild_round_ratios: ratios,
            log_read_records_per_s: median(rounds.iter().map(|r| r.log_read)),
            rebuild_vs_log_read: median(rounds.iter().map(|r| r.rebuild / r.log_read.max(1e-9))),
        }
    }

    /// The rebuild lines; `raw` names the raw reader, `partitions` what the log is split into.
    pub(crate) fn print(&self, raw: &str, partitions: &str) {
        outln!(
            "rebuild of {} records ({} bytes each), medians of {} rounds:",
            self.records,
            self.record_bytes,
            self.rebuild_round_ratios.len()
        );
        outln!("  store rebuild {:.0} records/s", self.rebuild_records_per_s);
        outln!("  {raw:<13} {:.0} records/s", self.raw.per_s());
        outln!(
            "  rebuild_ratio {:.3} (target ≥ 0.7; rounds {})",
            self.rebuild_ratio,
            ratios_text(&self.rebuild_round_ratios)
        );
        outln!(
            "  StateLog::read of all {partitions}, no decoding: {:.0} records/s (rebuild at {:.3} of it)",
            self.log_read_records_per_s,
            self.rebuild_vs_log_read
        );
    }
}

/// `0.61 0.72 ...`: the ratio of every round, in the order they ran.
pub(crate) fn ratios_text(ratios: &[f64]) -> String {
    ratios.iter().map(|r| format!("{r:.2}")).collect::<Vec<_>>().join(" ")
}

/// The median of `values` (0 when there are none).
pub(crate) fn median(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.into_iter().collect();
    v.sort_by(f64::total_cmp);
    percentile(&v, 0.5)
}

#[derive(Serialize, Debug)]
struct Report {
    backend: &'static str,
    #[serde(flatten)]
    put: PutFigures,
    #[serde(flatten)]
    rebuild: RebuildFigures,
}

/// A stored record: log key and enveloped value.
type Row<'a> = (&'a [u8], &'a [u8]);
const RAW: redb::TableDefinition<'_, u64, Row<'static>> = redb::TableDefinition::new("raw");
/// The backend's record table (see `actionstate_file`'s on-disk layout).
const RECORDS: redb::TableDefinition<'_, (u32, u64), Row<'static>> = redb::TableDefinition::new("records");

/// Rounds of each rebuild measurement. On a small machine shared with the server, single
/// rounds vary by 2× (BENCHMARKS.md), so each round runs every side back to back and the
/// figures are medians over the rounds. Nine: one run's Kafka rounds spread from 0.37 to 0.90,
/// and the first round of a process is always the slow one, so with five the median was
/// often the second-slowest warm round.
const ROUNDS: usize = 9;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).copied().unwrap_or(0.0)
}

/// What a runtime holds when it runs benchmark action `n`: the action, its input event, and
/// the outputs and memory writes it completes with (one output event, one memory write).
struct Parts {
    action: ActionId,
    input: Event,
    outputs: Vec<Event>,
    memory: Vec<MemoryUpdate>,
}

fn parts(n: u64) -> Parts {
    let mut a = Attributes::new();
    a.insert("n".into(), Value::Int(n as i64));
    a.insert("text".into(), Value::String("a moderately long input text for the benchmark".into()));
    let input = Event { id: EventId(u128::from(n) + 1), event_type: "input".into(), attributes: a };
    let mut out = Attributes::new();
    out.insert("answer".into(), Value::Bytes(vec![7; 48]));
    let output = Event { id: EventId((u128::from(n) << 64) | 1), event_type: "answer".into(), attributes: out };
    let memory = vec![MemoryUpdate {
        path: "answers/last".into(),
        op: MemoryOp::Set(TaggedBytes { tag: "bytes".into(), bytes: vec![1; 32] }),
    }];
    Parts { action: ActionId::new("bench-action"), input, outputs: vec![output], memory }
}

/// The state the store records for benchmark action `n` of `key` in round `seq` (about 300
/// encoded bytes), and its input event. The raw clients send these records.
fn state(key: KeyId, seq: u64, n: u64) -> (ActionState, Event) {
    let Parts { action, input, outputs, memory } = parts(n);
    let s = ActionState {
        label: None,
        key: StateKey::new(key, seq, &action, &input, &Trigger::Input),
        action,
        trigger: Trigger::Input,
        trigger_event: input.id,
        input: input.fingerprint(),
        progress: Progress::Completed { outputs, memory },
    };
    (s, input)
}

#[cfg(feature = "fluss")]
mod fluss;
/// One store put of benchmark action `n` of `key` in round `seq`, from what a runtime holds
/// (`parts`): `begin` (a fresh action), then `complete`, which alone is timed. Returns the
/// state put (the record `state` builds) and the µs `complete` took.
pub(crate) async fn store_put<L: StateLog>(
    store: &ActionStateStore<L>,
    key: KeyId,
    seq: u64,
    n: u64,
) -> Result<(Arc<ActionState>, f64)> {
    let Parts { action, input, outputs, memory } = parts(n);
    let round = Round::new(key, seq, &input);
    let Begin::Fresh(handle, _) = store.begin(&round, &action, &input, &Trigger::Input).await? else {
        bail!("benchmark state {seq} of {key} unexpectedly recorded");
    };
    let t = Instant::now();
    let s = store.complete(handle, outputs, memory).await?;
    Ok((s, t.elapsed().as_secs_f64() * 1e6))
}

#[cfg(feature = "kafka")]
mod kafka;

pub(crate) async fn run(args: BenchArgs) -> Result<ExitCode> {
    crate::metrics::serve(&args.metrics)?;
    let mut args = args;
    let log = match &args.log {
        Some(url) => url.parse().context("--log")?,
        None => {
            let dir = std::env::temp_dir().join(format!("actionstate-bench-{}", std::process::id()));
            LogConfig::File(FileConfig::new(dir, 8))
        }
    };
    args.partitions = log.partitions();
    // The server benchmarks measure on fresh topics or tables named after the URL's; the one
    // it names must not hold a history either, so that a bench pointed at a live log by
    // mistake refuses rather than running beside it. (A data directory is claimed below.)
    if !matches!(log, LogConfig::File(_)) {
        claim::refuse_if_holding(&log, "bench").await?;
    }
    let dir = match log {
        LogConfig::File(c) => c.dir,
        #[cfg(feature = "kafka")]
        LogConfig::Kafka(c) => return kafka::run(args, *c).await,
        #[cfg(feature = "fluss")]
        LogConfig::Fluss(c) => return fluss::run(args, *c).await,
        other => bail!("the benchmark runs on file, kafka or fluss logs, not {other}"),
    };
    // Only what the benchmark creates is removed: `DIR/bench`, and `DIR` if it was absent.
    let scratch = claim::Scratch::claim(&dir, "bench", "bench")?;
    let measured = measure_file(&scratch.path, &args).await;
    scratch.remove()?;
    let report = measured?;
    if args.json {
        outln!("{}", serde_json::to_string(&report)?);
    } else {
        outln!("file backend, {} sequential puts each side:", report.put.puts);
        report.put.print("raw redb", 1.3);
        report.rebuild.print("raw scan", "partitions");
    }
    Ok(ExitCode::SUCCESS)
}

async fn measure_file(dir: &Path, args: &BenchArgs) -> Result<Report> {
    let (ours, raw) = put_latency(dir, args).await?;
    let (records, bytes, rounds) = rebuild_throughput(dir, args).await?;
    Ok(Report {
        backend: "file",
        put: PutFigures::of(args.puts, &ours, &raw),
        rebuild: RebuildFigures::of(records, bytes, RawRead::Scan, &rounds),
    })
}

/// Alternates store puts and raw commits so both see the same disk and background load.
async fn put_latency(dir: &Path, args: &BenchArgs) -> Result<(Vec<f64>, Vec<f64>)> {
    let log =
        FileLog::open(FileConfig::new(dir.join("store"), args.partitions)).map_err(actionstate_core::Error::from)?;
    let store = ActionStateStore::new(log, StoreConfig::default());
    let raw = redb::Database::create(dir.join("raw.redb")).context("creating the raw redb database")?;
    let key = KeyId::of(b"bench-put");
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    let warmup = 50;
    for n in 0..(args.puts + warmup) as u64 {
        let (s, ours_us) = store_put(&store, key, n, n).await?;

        let wire = codec::encode(&LogRecord::Upsert((*s).clone()))?;
        let t = Instant::now();
        let txn = raw.begin_write()?;
        {
            let mut table = txn.open_table(RAW)?;
            table.insert(n, (wire.key.as_slice(), wire.value.as_slice()))?;
        }
        txn.commit()?;
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

/// Writes `total` completed states through `log` from 256 concurrent tasks (so appends share
/// commits and batches) and returns the bytes written.
pub(crate) async fn load<L: StateLog>(log: &Arc<L>, total: usize) -> Result<u64> {
    let writers = 256usize;
    let per = total.div_ceil(writers);
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..writers {
        let log = Arc::clone(log);
        tasks.spawn(async move {
            let key = KeyId::of(format!("bench-key-{w}").as_bytes());
            let mut bytes = 0u64;
            for i in 0..per {
                let n = (w * per + i) as u64;
                if n as usize >= total {
                    break;
                }
                let wire = codec::encode(&LogRecord::Upsert(state(key, i as u64, n).0))?;
                bytes += (wire.key.len() + wire.value.len()) as u64;
                log.append(wire).await?;
            }
            anyhow::Ok(bytes)
        });
    }
    let mut bytes = 0;
    while let Some(r) = tasks.join_next().await {
        bytes += r??;
    }
    Ok(bytes)
}

/// Writes `records` states through the log (many concurrent appends share commits), then
/// runs [`ROUNDS`] rounds of a store rebuild, a raw scan of the same file and a plain
/// `StateLog::read` of every partition (in parallel, like the rebuild, without decoding).
async fn rebuild_throughput(dir: &Path, args: &BenchArgs) -> Result<(u64, u64, Vec<RebuildRound>)> {
    let path = dir.join("rebuild");
    let log = Arc::new(FileLog::open(FileConfig::new(&path, args.partitions)).map_err(actionstate_core::Error::from)?);
    let bytes = load(&log, args.records.unwrap_or(1_000_000)).await?;
    let end = log.end_offsets().await?;
    let marker = actionstate_core::Marker::new(log.identity().clone(), vec![0; end.len()]);
    drop(log);

    let (mut rounds, mut records) = (Vec::new(), 0u64);
    for _ in 0..ROUNDS {
        let log = FileLog::open(FileConfig { verify_on_open: false, ..FileConfig::new(&path, args.partitions) })
            .map_err(actionstate_core::Error::from)?;
        let store = ActionStateStore::new(Arc::new(log), StoreConfig::default());
        let report = store.rebuild(std::slice::from_ref(&marker), &Ownership::All, &HashMap::new()).await?;
        records = report.records;
        drop(store);
        let (n, raw) = raw_scan(&path.join(actionstate_file::DB_FILE_NAME))?;
        if n != records {
            bail!("raw scan saw {n} records, rebuild {records}");
        }
        // A fresh handle, so its engine cache is as cold as the rebuild's was.
        let log = FileLog::open(FileConfig { verify_on_open: false, ..FileConfig::new(&path, args.partitions) })
            .map_err(actionstate_core::Error::from)?;
        let log_read = log_read(&Arc::new(log), &end).await?;
        rounds.push(RebuildRound { rebuild: report.records_per_second(), raw, log_read });
    }
    Ok((records, bytes, rounds))
}

/// Reads every partition to `end` through the backend's `StateLog::read`, partitions in
/// parallel, touching but not decoding the records.
async fn log_read<L: StateLog>(log: &Arc<L>, end: &[u64]) -> Result<f64> {
    let t = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (p, &e) in (0u32..).zip(end) {
        let log = Arc::clone(log);
        tasks.spawn(async move {
            let mut n = 0u64;
            let mut range = actionstate_core::RangeRead::new(p, 0, e, 4096);
            while let Some(records) = range.next_batch(&*log).await? {
                n += records.iter().map(|r| u64::from(!r.value.is_empty())).sum::<u64>();
            }
            anyhow::Ok(n)
        });
    }
    let mut n = 0;
    while let Some(r) = tasks.join_next().await {
        n += r??;
    }
    Ok(n as f64 / t.elapsed().as_secs_f64())
}
/// Iterates every record of the database file, copying key and value out.
fn raw_scan(file: &Path) -> Result<(u64, f64)> {
    let db = redb::Database::builder().set_check_integrity_on_open(false).open(file)?;
    let t = Instant::now();
    let txn = db.begin_read()?;
    let table = txn.open_table(RECORDS)?;
    let mut n = 0u64;
    let mut sink = 0usize;
    for row in table.iter()? {
        let (_, v) = row?;
        let (key, value) = v.value();
        let (key, value) = (key.to_vec(), value.to_vec());
        sink = sink.wrapping_add(key.len() + value.len());
        n += 1;
    }
    std::hint::black_box(sink);
    Ok((n, n as f64 / t.elapsed().as_secs_f64()))
}

/// Whether a rebuild that read `records` read the `written` records and the fence records of
/// round `round`'s rebuild and of every one before it (one per partition each).
#[cfg(any(feature = "kafka", feature = "fluss"))]
fn fenced_count(records: u64, written: u64, round: usize, partitions: u64) -> bool {
    u64::try_from(round + 1).is_ok_and(|rebuilds| records == written + rebuilds * partitions)
}
