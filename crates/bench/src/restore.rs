//! `actionstate-bench --restore`: a restore from the log's own checkpoints as the history
//! grows. For each history size, a service writes that many inputs (one completed action
//! each, 256 keys in flight) with a checkpoint into the log every 10,000 inputs, then 1,000
//! inputs more after its last checkpoint, and stops; then `ActionStateStore::restore` finds
//! the checkpoint and rebuilds from it. Once with the whole history kept
//! (`Retention::KeepAll`: the log holds every record) and once with the default retention.
//!
//! Reported per run: the records the log holds, the records of partition 0 read to find the
//! checkpoint (`scanned`) and the time that took, the records the rebuild read and its time.
//! Finding must stay flat as the history grows; the rebuild follows the retained window
//! after the checkpoint, not the history.

use crate::args::BenchArgs;
use actionstate_cli::claim;
use actionstate_cli::measure::{state, store_put};
use actionstate_core::{KeyId, StateLog};
use actionstate_file::{FileConfig, FileLog};
use actionstate_recovery::{ActionStateStore, Ownership, RestoreFrom, Retention, Round, StoreConfig};
use anyhow::Result;
use serde::Serialize;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

/// Inputs between checkpoints.
const CHECKPOINT_EVERY: u64 = 10_000;
/// Inputs after the last checkpoint, which the restore replays.
const AFTER: u64 = 1_000;
/// Keys written at once.
const KEYS: u64 = 256;

#[derive(Serialize, Debug)]
struct Row {
    retention: String,
    history_inputs: u64,
    log_records: u64,
    scanned: u64,
    find_ms: f64,
    rebuild_records: u64,
    rebuild_ms: f64,
    restore_ms: f64,
}

/// Measures in `DIR/restore` of `dir`, which must be absent or empty, and removes what it
/// created.
pub(crate) async fn run(args: &BenchArgs, dir: &Path) -> Result<ExitCode> {
    let scratch = claim::Scratch::claim(dir, "restore", "bench")?;
    let measured = measure(&scratch.path, args).await;
    scratch.remove()?;
    let rows = measured?;
    if args.json {
        for row in &rows {
            outln!("{}", serde_json::to_string(row)?);
        }
    } else {
        outln!("restore from the log's checkpoints (file backend, 8 partitions):");
        outln!("  retention  history  log records  scanned  find ms  rebuilt  rebuild ms  restore ms");
        for r in &rows {
            outln!(
                "  {:<9}  {:>7}  {:>11}  {:>7}  {:>7.2}  {:>7}  {:>10.1}  {:>10.1}",
                r.retention,
                r.history_inputs,
                r.log_records,
                r.scanned,
                r.find_ms,
                r.rebuild_records,
                r.rebuild_ms,
                r.restore_ms
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn measure(dir: &Path, args: &BenchArgs) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for (name, retention) in [("all", Retention::KeepAll), ("last 3", Retention::default())] {
        for &inputs in &args.restore_sizes {
            let path = dir.join(format!("{}-{inputs}", name.replace(' ', "-")));
            rows.push(once(&path, inputs, retention).await?);
        }
    }
    Ok(rows)
}

async fn once(dir: &Path, inputs: u64, retention: Retention) -> Result<Row> {
    let config = StoreConfig { retention, ..StoreConfig::default() };
    let log = FileLog::open(FileConfig::new(dir.to_path_buf(), 8))?;
    let (store, _) = ActionStateStore::restore(log, config.clone(), &Ownership::All, RestoreFrom::Latest).await?;
    let store = Arc::new(store);
    let mut n = 0u64;
    while n < inputs + AFTER {
        let batch = KEYS.min(inputs + AFTER - n);
        let mut tasks = tokio::task::JoinSet::new();
        for k in 0..batch {
            let store = Arc::clone(&store);
            let (key, seq, i) = (KeyId::of(format!("restore-key-{k}").as_bytes()), n / KEYS, n + k);
            tasks.spawn(async move {
                // The round `store_put` puts, with its input: finished once the put is durable.
                let round = store.round(Round::new(key, seq, &state(key, seq, i).1));
                store_put(&store, key, seq, i).await?;
                round.finish();
                anyhow::Ok(())
            });
        }
        while let Some(done) = tasks.join_next().await {
            done??;
        }
        let before = n;
        n += batch;
        // Every 10,000 inputs, and once the history is written: the last checkpoint.
        let crossed = n / CHECKPOINT_EVERY > before / CHECKPOINT_EVERY;
        if (n <= inputs && crossed) || (before < inputs && n >= inputs) {
            store.checkpoint(&n.to_le_bytes()).await?;
        }
    }
    store.wait_for_reclaim().await;
    let (earliest, end) = (store.log().earliest_offsets().await?, store.log().end_offsets().await?);
    let log_records = end.iter().zip(&earliest).map(|(e, s)| e - s).sum();
    drop(store);
    let log = FileLog::open(FileConfig::new(dir.to_path_buf(), 8))?;
    let started = Instant::now();
    let (restored_store, restored) =
        ActionStateStore::restore(log, config, &Ownership::All, RestoreFrom::Latest).await?;
    let restore = started.elapsed();
    drop(restored_store);
    let rebuild = restored.rebuild.duration;
    Ok(Row {
        retention: match retention {
            Retention::KeepAll => "all".into(),
            Retention::LastCheckpoints(k) => format!("last {k}"),
        },
        history_inputs: inputs + AFTER,
        log_records,
        scanned: restored.scanned,
        find_ms: restore.saturating_sub(rebuild).as_secs_f64() * 1e3,
        rebuild_records: restored.rebuild.records,
        rebuild_ms: rebuild.as_secs_f64() * 1e3,
        restore_ms: restore.as_secs_f64() * 1e3,
    })
}
