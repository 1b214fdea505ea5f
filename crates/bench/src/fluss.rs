//! `actionstate-bench --log fluss://...`: store paths on an Apache Fluss log table side by side
//! with raw fluss-rs clients, in the same run.
//!
//! - **put**: `ActionStateStore::complete` on a `FlussLog` against a raw fluss-rs append of the
//!   same row (the same three columns, the same bucket key, so the same bucket) to the same
//!   table through a connection of its own, with the log's writer settings (`acks=all`,
//!   idempotence, the batch timeout, and a flush before awaiting the acknowledgement when the
//!   log flushes after each append), bounded by the same delivery timeout. The two alternate,
//!   so both see the same server load.
//! - **rebuild**: `ActionStateStore::rebuild` from offset 0 on a freshly opened log against a
//!   raw log scanner subscribed to every bucket from offset 0 and polled until each bucket
//!   reaches the end offset listed before, copying each `state_key` and `payload` out as any
//!   reader must. For reference the plain `StateLog::read` of all buckets (parallel, no
//!   decoding) is measured too.
//!
//! Every phase writes to a fresh table `actionstate_bench.bench_<pid>_<n>`; the tables are
//! dropped at the end.

use crate::args::BenchArgs;
use crate::report::{PutFigures, ROUNDS, RawRead, RebuildFigures, RebuildRound, fenced_count};
use actionstate_cli::measure::{load, log_read, store_put};
use actionstate_core::{KeyId, LogRecord, Marker, StateLog, WireRecord, codec};
use actionstate_fluss::{COLUMNS, FlussConfig, FlussLog, bucket};
use actionstate_recovery::{ActionStateStore, LogConfig, Ownership, Snapshot, StoreConfig};
use anyhow::{Context, Result, anyhow, bail};
use fluss::client::{AppendWriter, FlussConnection};
use fluss::config::Config;
use fluss::metadata::TablePath;
use fluss::row::{DataGetters, GenericRow};
use serde::Serialize;
use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Records written and rebuilt unless `--records` says otherwise.
const DEFAULT_RECORDS: usize = 200_000;
/// The database of the benchmark tables.
/// Longest single poll of the raw scanner.
const POLL: Duration = Duration::from_millis(100);
/// How long closing a raw connection and dropping the tables may take.
const CLEANUP_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Serialize, Debug)]
struct Report {
    backend: &'static str,
    bootstrap: String,
    buckets: u32,
    #[serde(flatten)]
    put: PutFigures,
    #[serde(flatten)]
    rebuild: RebuildFigures,
}

/// Measures on fresh tables `<DATABASE>.<TABLE>_<pid>_<n>`, with every other setting of
/// `base` (the `--log` URL's).
pub(crate) async fn run(args: BenchArgs, base: FlussConfig) -> Result<ExitCode> {
    let mut tables = Vec::new();
    let result = measure(&base, &args, &mut tables).await;
    drop_tables(&base, &tables).await;
    let report = result?;
    if args.json {
        outln!("{}", serde_json::to_string(&report)?);
    } else {
        outln!(
            "fluss backend at {}, {} buckets, {} sequential puts each side:",
            report.bootstrap,
            report.buckets,
            report.put.puts
        );
        report.put.print("raw append", 1.15);
        report.rebuild.print("raw scanner", "buckets");
    }
    Ok(ExitCode::SUCCESS)
}

async fn measure(base: &FlussConfig, args: &BenchArgs, tables: &mut Vec<String>) -> Result<Report> {
    let (ours, raw) = put_latency(base, args, tables).await?;
    let (records, bytes, rounds) = rebuild_throughput(base, args, tables).await?;
    Ok(Report {
        backend: "fluss",
        bootstrap: base.bootstrap.clone(),
        buckets: base.buckets,
        put: PutFigures::of(args.puts, &ours, &raw),
        rebuild: RebuildFigures::of(records, bytes, RawRead::Read, &rounds),
    })
}

/// Opens the log on a new, empty table `actionstate_bench.bench_<pid>_<n>`, skipping names a
/// former process of the same pid left with records, and remembers the table for dropping.
async fn fresh_log(base: &FlussConfig, tables: &mut Vec<String>) -> Result<FlussLog> {
    let pid = std::process::id();
    for n in tables.len()..tables.len() + 100 {
        let table = format!("{}_{pid}_{n}", base.table);
        let config = FlussConfig { table: table.clone(), ..base.clone() };
        // A table that is there already is someone's: never written to, never dropped.
        if actionstate_cli::claim::exists(&LogConfig::Fluss(Box::new(config.clone()))).await {
            continue;
        }
        let log = FlussLog::open(config).await.with_context(|| {
            format!(
                "cannot use fluss://{}/{}/{table} (is a Fluss cluster running there? `cargo xtask \
                 services up fluss` starts one and writes its address to target/services/fluss.env)",
                base.bootstrap, base.database
            )
        })?;
        if log.end_offsets().await?.iter().all(|&e| e == 0) {
            tables.push(table);
            return Ok(log);
        }
    }
    bail!("no empty table {}.{}_{pid}_<n> found; drop the old ones", base.database, base.table)
}

/// A connection of its own with the log's client settings: the writer's acks, idempotence and
/// batch timeout (at least 1 ms, as the log raises it), the connect timeout and credentials.
async fn raw_connection(config: &FlussConfig) -> Result<FlussConnection> {
    let c = config.client_config();
    tokio::time::timeout(config.request_timeout, FlussConnection::new(c))
        .await
        .map_err(|_| anyhow!("raw connection to {}: no answer after {:?}", config.bootstrap, config.request_timeout))?
        .with_context(|| format!("raw connection to {}", config.bootstrap))
}

/// Closes a raw connection; a failure only leaves it to be dropped.
async fn close(connection: FlussConnection) {
    if let Err(e) = connection.close(CLEANUP_TIMEOUT).await {
        eprintln!("warning: closing the raw connection: {e}");
    }
}

/// The row `FlussLog::append` writes for `wire`: log key, enveloped value and the bucket key
/// that places it in the key's bucket.
fn row<'a>(wire: &'a WireRecord, column: &'a [u8]) -> GenericRow<'a> {
    let mut row = GenericRow::new(COLUMNS.len());
    row.set_field(0, wire.key.as_slice());
    row.set_field(1, wire.value.as_slice());
    row.set_field(2, column);
    row
}

/// Appends `row` and awaits its acknowledgement as the log does: flushing the writer first when
/// the log flushes after each append, bounded by the delivery timeout.
async fn raw_append(writer: &AppendWriter, row: &GenericRow<'_>, config: &FlussConfig) -> Result<()> {
    let table = config.table_name();
    let acked = writer.append(row).with_context(|| format!("raw append to {table}"))?;
    tokio::time::timeout(config.delivery_timeout, async {
        if config.flush_on_append {
            // As in the log: the flush sends the batch; the record's own acknowledgement decides.
            let _ = writer.flush().await;
        }
        acked.await
    })
    .await
    .map_err(|_| anyhow!("raw append to {table} not acknowledged after {:?}", config.delivery_timeout))?
    .with_context(|| format!("raw append to {table}"))
}

/// Alternates store puts and raw appends so both see the same server load.
async fn put_latency(base: &FlussConfig, args: &BenchArgs, tables: &mut Vec<String>) -> Result<(Vec<f64>, Vec<f64>)> {
    let log = fresh_log(base, tables).await?;
    let config = log.config().clone();
    let path = log.table_path().clone();
    let buckets = log.identity().partitions;
    let store = ActionStateStore::new(log, StoreConfig::default());
    let connection = raw_connection(&config).await?;
    let writer = {
        let table = connection.get_table(&path).await.with_context(|| format!("raw lookup of {path}"))?;
        table.new_append().and_then(|a| a.create_writer()).context("creating the raw writer")?
    };
    let key = KeyId::of(b"bench-put");
    let column = bucket::bucket_key(&key, buckets).context("no bucket key for the benchmark key")?;
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    let warmup = 50;
    let measured = async {
        for n in 0..(args.puts + warmup) as u64 {
            let (s, ours_us) = store_put(&store, key, n, n).await?;

            let wire = codec::encode(&LogRecord::Upsert((*s).clone()))?;
            let row = row(&wire, &column[..]);
            let t = Instant::now();
            raw_append(&writer, &row, &config).await?;
            let raw_us = t.elapsed().as_secs_f64() * 1e6;
            if n >= warmup as u64 {
                ours.push(ours_us);
                theirs.push(raw_us);
            }
        }
        anyhow::Ok(())
    }
    .await;
    drop(writer);
    close(connection).await;
    measured?;
    ours.sort_by(f64::total_cmp);
    theirs.sort_by(f64::total_cmp);
    Ok((ours, theirs))
}

/// Writes the records through the log (many concurrent appends), then times a store rebuild
/// from offset 0, a raw scanner read of the same range and a plain `StateLog::read` of every
/// bucket, in [`ROUNDS`] rounds, the three back to back in each.
async fn rebuild_throughput(
    base: &FlussConfig,
    args: &BenchArgs,
    tables: &mut Vec<String>,
) -> Result<(u64, u64, Vec<RebuildRound>)> {
    let log = Arc::new(fresh_log(base, tables).await?);
    let config = log.config().clone();
    let path = log.table_path().clone();
    let total = args.records.unwrap_or(DEFAULT_RECORDS);
    let bytes = load(&log, total, 0).await?;
    let end = log.end_offsets().await?;
    let written: u64 = end.iter().sum();
    if written != total as u64 {
        bail!("{total} records appended, but the table {} holds {written}", config.table_name());
    }
    // The whole log from offset 0, with no completed rounds to prune.
    let marker = Marker::new(log.identity().clone(), vec![0; end.len()]);
    let partitions = u64::from(marker.log.partitions);
    let from = [Snapshot { checkpoint: 0, marker, completed: Arc::default() }];
    drop(log);

    let mut rounds = Vec::new();
    for round in 0..ROUNDS {
        // A fresh log per round, so the rebuild creates its scanners as a restarted worker does.
        let log = FlussLog::open(config.clone()).await?;
        let (store, restored) = ActionStateStore::restore(log, StoreConfig::default(), &Ownership::All, &from).await?;
        let report = restored.rebuild;
        // Besides what was written, a rebuild reads the fence records of the rounds' rebuilds
        // before it and its own: one per partition each (a restore fences, as a runtime's does).
        if !fenced_count(report.records, written, round, partitions) {
            bail!("rebuild read {} records, the table holds {written} and fences", report.records);
        }
        drop(store);
        let (n, rate) = raw_read(&config, &path, &end).await?;
        if n != written {
            bail!("raw read saw {n} records, the table holds {written}");
        }
        // A fresh log again, so its scanners are created inside the measurement as well.
        let log = Arc::new(FlussLog::open(config.clone()).await?);
        let log_read = log_read(&log, &end).await?;
        rounds.push(RebuildRound { rebuild: report.records_per_second(), raw: rate, log_read });
    }
    Ok((written, bytes, rounds))
}

/// One log scanner subscribed to every bucket from offset 0, polled until each bucket reaches
/// `end`, copying `state_key` and `payload` of every record out. The connection and table
/// metadata are set up first, as the rebuild's log is opened before it starts; timed from
/// creating the scanner, as the rebuild's time includes creating its scanners.
async fn raw_read(config: &FlussConfig, path: &TablePath, end: &[u64]) -> Result<(u64, f64)> {
    let connection = raw_connection(config).await?;
    let result = async {
        let table = connection.get_table(path).await.with_context(|| format!("raw lookup of {path}"))?;
        let t = Instant::now();
        let scanner = table.new_scan().create_log_scanner().context("creating the raw scanner")?;
        let mut from = HashMap::new();
        for (b, &e) in (0i32..).zip(end) {
            if e > 0 {
                from.insert(b, 0i64);
            }
        }
        let mut remaining = from.len();
        scanner.subscribe_buckets(&from).await.context("subscribing the raw scanner")?;
        let mut next = vec![0u64; end.len()];
        let (mut n, mut sink) = (0u64, 0usize);
        let mut last_progress = Instant::now();
        while remaining > 0 {
            if last_progress.elapsed() >= config.read_stall_timeout {
                bail!("raw read of {path} stalled at {next:?} (end {end:?})");
            }
            let polled = match tokio::time::timeout(POLL + config.request_timeout, scanner.poll(POLL)).await {
                Ok(polled) => polled.context("raw read")?,
                Err(_) => continue,
            };
            for (tb, records) in polled.records_by_buckets() {
                let b = usize::try_from(tb.bucket_id()).map_err(|_| anyhow!("raw read: bucket {}", tb.bucket_id()))?;
                let (Some(slot), Some(&e)) = (next.get_mut(b), end.get(b)) else {
                    bail!("raw read: record of unknown bucket {b}");
                };
                for r in records {
                    let Ok(offset) = u64::try_from(r.offset()) else {
                        bail!("raw read: record at bucket {b} offset {}", r.offset());
                    };
                    if offset < *slot || offset >= e {
                        continue;
                    }
                    let row = r.row();
                    let key = row.get_bytes(0).context("raw read: state_key")?.to_vec();
                    let value = row.get_bytes(1).context("raw read: payload")?.to_vec();
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
        anyhow::Ok((n, n as f64 / t.elapsed().as_secs_f64()))
    }
    .await;
    close(connection).await;
    result
}

/// Drops the benchmark's tables; failures only leave them behind.
async fn drop_tables(base: &FlussConfig, tables: &[String]) {
    let bootstrap = &base.bootstrap;
    if tables.is_empty() {
        return;
    }
    let dropped = tokio::time::timeout(CLEANUP_TIMEOUT, async {
        let connection = FlussConnection::new(Config {
            bootstrap_servers: bootstrap.to_owned(),
            connect_timeout_ms: 10_000,
            ..Config::default()
        })
        .await?;
        let admin = connection.get_admin()?;
        for table in tables {
            if let Err(e) = admin.drop_table(&TablePath::new(base.database.as_str(), table.as_str()), true).await {
                eprintln!("warning: dropping the benchmark table {}.{table}: {e}", base.database);
            }
        }
        Ok::<_, fluss::error::Error>(())
    })
    .await;
    match dropped {
        Ok(Ok(())) => {}
        Ok(Err(e)) => eprintln!("warning: dropping the benchmark tables {tables:?}: {e}"),
        Err(_) => eprintln!("warning: dropping the benchmark tables {tables:?}: no answer after {CLEANUP_TIMEOUT:?}"),
    }
}
