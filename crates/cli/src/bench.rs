//! `actionstate bench`: the store on a log of the operator's own, measured through the store
//! and the `StateLog` trait alone, with the records a runtime writes (about 300 bytes each):
//!
//! - **put**: sequential store puts of one key, `begin` then `complete`, after a restore that
//!   fences the partitions as a runtime's does; the latency of `complete` (encode, durable
//!   append, index) and the puts per second of the whole sequence;
//! - **rebuild**: records written from many tasks at once, then a store's rebuild of all of
//!   them on a freshly opened log, and for reference the log's own read of every partition
//!   without decoding, in a few rounds.
//!
//! It writes only into what it claimed: `--log file:DIR` needs DIR absent or empty, writes into
//! `DIR/bench` and removes that (and DIR, if it created it) when done; any other log must be new
//! or empty, is claimed as `demo` and `soak` claim theirs, and keeps the benchmark's records.
//! The store against the raw client of each backend is the benchmark crate's (`cargo xtask
//! bench file|kafka|fluss`).

use actionstate_cli::claim;
use actionstate_cli::measure::{load, log_read, median, percentile, store_put};
use actionstate_core::{KeyId, Marker, StateLog};
use actionstate_file::FileConfig;
use actionstate_recovery::{ActionStateStore, AnyLog, CheckpointForm, LogConfig, Ownership, Snapshot, StoreConfig};
use anyhow::{Context, Result, bail};
use serde::Serialize;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub(crate) struct BenchArgs {
    /// The log to measure: `file:DIR` (DIR must be absent or empty; the benchmark writes into
    /// `DIR/bench` and removes that, and DIR if it created it, when done; without `--log`, a
    /// fresh directory under the system temp dir), or a new or empty `kafka://HOST:PORT/TOPIC`
    /// or `fluss://HOST:PORT/DATABASE/TABLE`, which keeps the benchmark's records; or
    /// `memory` (no durable append: what the store itself costs).
    #[arg(long, value_name = "URL")]
    log: Option<String>,
    /// Sequential puts measured.
    #[arg(long, default_value_t = 2000)]
    puts: usize,
    /// Records written and rebuilt (default: 1,000,000 for `file`, 500,000 for `kafka`,
    /// 200,000 for `fluss`).
    #[arg(long)]
    records: Option<usize>,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    pub(crate) metrics: crate::metrics::MetricsArgs,
}

/// Rounds of the rebuild measurement; the rebuild rate is their median. A round's rate varies
/// with what else the machine and the server do, and the first round of a process is the slow
/// one.
const ROUNDS: usize = 3;
/// Puts before the measured ones, so that connections, caches and the index are warm.
const WARMUP_PUTS: usize = 50;

#[derive(Serialize, Debug)]
struct Report {
    log: String,
    partitions: u32,
    puts: usize,
    put_median_us: f64,
    put_p99_us: f64,
    puts_per_s: f64,
    records: u64,
    record_bytes: u64,
    rebuild_records_per_s: f64,
    rebuild_round_records_per_s: Vec<f64>,
    log_read_records_per_s: f64,
    rebuild_vs_log_read: f64,
}

pub(crate) async fn run(args: BenchArgs) -> Result<ExitCode> {
    crate::metrics::serve(&args.metrics)?;
    let config: LogConfig = match &args.log {
        Some(url) => url.parse().context("--log")?,
        None => {
            let dir = std::env::temp_dir().join(format!("actionstate-bench-{}", std::process::id()));
            LogConfig::File(FileConfig::new(dir, 8))
        }
    };
    // A data directory is held as scratch, and only what the benchmark creates in it is
    // removed: `DIR/bench`, and `DIR` if it was absent.
    let (target, scratch) = match &config {
        LogConfig::File(c) => {
            let scratch = claim::Scratch::claim(&c.dir, "bench", "bench")?;
            (LogConfig::File(FileConfig { dir: scratch.path.join("log"), ..c.clone() }), Some(scratch))
        }
        other => (other.clone(), None),
    };
    let measured = measure(&config, &target, &args).await;
    if let Some(scratch) = scratch {
        scratch.remove()?;
    } else if measured.is_ok() && !matches!(config, LogConfig::Memory(_)) {
        eprintln!("note: the benchmark's records stay in {config}; delete it when done");
    }
    let report = measured?;
    if args.json {
        outln!("{}", serde_json::to_string(&report)?);
    } else {
        print(&report);
    }
    Ok(ExitCode::SUCCESS)
}

fn print(r: &Report) {
    outln!("bench on {}, {} partitions:", r.log, r.partitions);
    outln!(
        "  {} sequential puts: median {:.0} µs  p99 {:.0} µs, {:.0} puts/s",
        r.puts,
        r.put_median_us,
        r.put_p99_us,
        r.puts_per_s
    );
    let rounds: Vec<String> = r.rebuild_round_records_per_s.iter().map(|x| format!("{x:.0}")).collect();
    outln!(
        "  rebuild of {} records ({} bytes each): {:.0} records/s, median of {} rounds ({})",
        r.records,
        r.record_bytes,
        r.rebuild_records_per_s,
        rounds.len(),
        rounds.join(" ")
    );
    outln!(
        "  StateLog::read of all partitions, no decoding: {:.0} records/s (rebuild at {:.3} of it)",
        r.log_read_records_per_s,
        r.rebuild_vs_log_read
    );
}

/// Records written and rebuilt unless `--records` says otherwise: fewer on a server, whose
/// writes and reads cross the network.
fn default_records(config: &LogConfig) -> usize {
    match config {
        LogConfig::File(_) => 1_000_000,
        #[cfg(feature = "kafka")]
        LogConfig::Kafka(_) => 500_000,
        _ => 200_000,
    }
}

/// Claims `target` (the log `shown` names, or a scratch directory inside it) and measures on it.
async fn measure(shown: &LogConfig, target: &LogConfig, args: &BenchArgs) -> Result<Report> {
    let log = claim::claim_empty(target, "bench").await?;
    let partitions = log.identity().partitions;
    // Fencing on, as a runtime runs it: the store restores first (from no snapshot), takes its
    // owner epoch and fences the partitions; every put then carries the epoch, and so do the
    // loaded records, or a rebuild would skip them as a fenced writer's.
    let (store, _) =
        ActionStateStore::restore(Arc::clone(&log), StoreConfig::default(), &Ownership::All, Vec::<Snapshot>::new())
            .await?;
    let (latencies, puts_per_s) = put_latency(&store, args.puts).await?;
    let epoch = store.epoch();
    drop(store);
    let total = args.records.unwrap_or_else(|| default_records(target));
    let bytes = load(&log, total, epoch).await?;
    let end = log.end_offsets().await?;
    let written: u64 = end.iter().sum();
    // The whole log from offset 0, with no completed rounds to prune.
    let from = [Snapshot {
        checkpoint: 0,
        marker: Marker::new(log.identity().clone(), vec![0; end.len()]),
        completed: Arc::default(),
    }];
    // A memory log lives in this process alone: its rounds read the handle that wrote it.
    // Any other is closed before the rounds open it again: a data directory admits one
    // handle at a time.
    let memory = matches!(target, LogConfig::Memory(_)).then_some(log);
    let mut rounds = Vec::new();
    for _ in 0..ROUNDS {
        // A fresh log per round, as a restarted worker opens it.
        let log = match &memory {
            Some(log) => Arc::clone(log),
            None => Arc::new(reopen(target).await?),
        };
        let (store, restored) = ActionStateStore::restore(log, StoreConfig::default(), &Ownership::All, &from).await?;
        let report = restored.rebuild;
        if report.records < written {
            bail!("the rebuild read {} records, the log holds {written}", report.records);
        }
        // Every record the benchmark wrote carries the epoch of the fences before it; one
        // skipped as a fenced writer's would leave the rebuild less to do than it reports.
        if report.fenced > 0 {
            bail!("the rebuild skipped {} of the benchmark's records as a fenced writer's", report.fenced);
        }
        drop(store);
        // A fresh handle again, so that its caches are as cold as the rebuild's were.
        let read = match &memory {
            Some(log) => log_read(log, &end).await?,
            None => log_read(&Arc::new(reopen(target).await?), &end).await?,
        };
        rounds.push((report.records_per_second(), read));
    }
    let rebuild: Vec<f64> = rounds.iter().map(|r| r.0).collect();
    Ok(Report {
        log: shown.to_string(),
        partitions,
        puts: args.puts,
        put_median_us: percentile(&latencies, 0.5),
        put_p99_us: percentile(&latencies, 0.99),
        puts_per_s,
        records: written,
        record_bytes: bytes / (total as u64).max(1),
        rebuild_records_per_s: median(rebuild.iter().copied()),
        rebuild_round_records_per_s: rebuild,
        log_read_records_per_s: median(rounds.iter().map(|r| r.1)),
        rebuild_vs_log_read: median(rounds.iter().map(|r| r.0 / r.1.max(1e-9))),
    })
}

/// `puts` sequential store puts of one key after [`WARMUP_PUTS`]: the sorted µs of each
/// `complete`, and the puts per second of the measured sequence, `begin` included.
async fn put_latency<L: StateLog, F: CheckpointForm>(
    store: &ActionStateStore<L, F>,
    puts: usize,
) -> Result<(Vec<f64>, f64)> {
    let key = KeyId::of(b"bench-put");
    let mut latencies = Vec::with_capacity(puts);
    let mut started = Instant::now();
    for n in 0..(puts + WARMUP_PUTS) as u64 {
        if n == WARMUP_PUTS as u64 {
            started = Instant::now();
        }
        let (_, us) = store_put(store, key, n, n).await?;
        if n >= WARMUP_PUTS as u64 {
            latencies.push(us);
        }
    }
    let per_s = puts as f64 / started.elapsed().as_secs_f64().max(1e-9);
    latencies.sort_by(f64::total_cmp);
    Ok((latencies, per_s))
}

/// Opens the benchmark's log again, for reading what it wrote: a data directory without the
/// checksum pass of its open, which would read every record before the measurement does.
async fn reopen(target: &LogConfig) -> Result<AnyLog> {
    let mut config = target.clone();
    if let LogConfig::File(c) = &mut config {
        c.verify_on_open = false;
    }
    actionstate_recovery::open(&config).await.with_context(|| format!("opening {target} again"))
}
