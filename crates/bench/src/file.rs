//! `actionstate-bench --log file:DIR`: end-to-end store paths side by side with the raw
//! embedded database, in the same run.
//!
//! - **put**: `ActionStateStore::complete` (encode, durable append, index) against a raw redb
//!   write transaction inserting the same bytes with the same durability and committing.
//! - **rebuild**: `ActionStateStore::rebuild` of N records (read, checksum, decode, index)
//!   against a raw scan of the same records in the same database file, copying each key and
//!   value out as any reader must.

use crate::args::BenchArgs;
use crate::report::{PutFigures, ROUNDS, RawRead, RebuildFigures, RebuildRound};
use actionstate_cli::claim;
use actionstate_cli::measure::{load, log_read, store_put};
use actionstate_core::{KeyId, LogRecord, StateLog, codec};
use actionstate_file::{FileConfig, FileLog};
use actionstate_recovery::{ActionStateStore, Ownership, Snapshot, StoreConfig};
use anyhow::{Context, Result, bail};
use redb::{ReadableDatabase, ReadableTable};
use serde::Serialize;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

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

/// Measures in `DIR/bench` of `dir`, which must be absent or empty, and removes what it created.
pub(crate) async fn run(args: &BenchArgs, dir: &Path) -> Result<ExitCode> {
    // Only what the benchmark creates is removed: `DIR/bench`, and `DIR` if it was absent.
    let scratch = claim::Scratch::claim(dir, "bench", "bench")?;
    let measured = measure(&scratch.path, args).await;
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

async fn measure(dir: &Path, args: &BenchArgs) -> Result<Report> {
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

/// Writes `records` states through the log (many concurrent appends share commits), then
/// runs [`ROUNDS`] rounds of a store rebuild, a raw scan of the same file and a plain
/// `StateLog::read` of every partition (in parallel, like the rebuild, without decoding).
async fn rebuild_throughput(dir: &Path, args: &BenchArgs) -> Result<(u64, u64, Vec<RebuildRound>)> {
    let path = dir.join("rebuild");
    let log = Arc::new(FileLog::open(FileConfig::new(&path, args.partitions)).map_err(actionstate_core::Error::from)?);
    let bytes = load(&log, args.records.unwrap_or(1_000_000), 0).await?;
    let end = log.end_offsets().await?;
    // The whole log from offset 0, with no completed rounds to prune.
    let marker = actionstate_core::Marker::new(log.identity().clone(), vec![0; end.len()]);
    let from = [Snapshot { checkpoint: 0, marker, completed: Arc::default() }];
    drop(log);

    let (mut rounds, mut records) = (Vec::new(), 0u64);
    for _ in 0..ROUNDS {
        let log = FileLog::open(FileConfig { verify_on_open: false, ..FileConfig::new(&path, args.partitions) })
            .map_err(actionstate_core::Error::from)?;
        let (store, restored) =
            ActionStateStore::restore(Arc::new(log), StoreConfig::default(), &Ownership::All, &from).await?;
        let report = restored.rebuild;
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
