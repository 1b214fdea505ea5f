//! Crash-test child: appends deterministic records to a [`FileLog`] until it is killed.
//!
//! Usage: `file-append-child <dir> <partitions> <first-seq> <tasks> [reclaim]`.
//!
//! Task `t` appends the records `first-seq + t`, `first-seq + t + tasks`, ... one at a time,
//! so each business key is written by one task, in sequence order. After each append
//! returns, the child prints `ack <partition> <offset> <seq> <value-hash>` and flushes stdout,
//! so every line the parent reads stands for an acknowledged, durable append.
//!
//! With `reclaim`, one more task reclaims over and over, each partition below all but its
//! last [`KEEP`] records, and prints `reclaim <offset> <offset> ...` before each call: no
//! record at or above an offset so printed may go.

mod record;

use actionstate_core::StateLog;
use actionstate_file::{FileConfig, FileLog};
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

/// Upper bound on appends per task, so an orphaned child stops on its own.
const MAX_PER_TASK: u64 = 1_000_000;

/// Records per partition a reclaim leaves.
const KEEP: u64 = 40;

fn arg<T: std::str::FromStr>(args: &[String], i: usize, name: &str) -> Result<T, String> {
    args.get(i).ok_or_else(|| format!("missing argument <{name}>"))?.parse().map_err(|_| format!("bad <{name}>"))
}

async fn run(args: &[String]) -> Result<(), String> {
    let dir: String = arg(args, 1, "dir")?;
    let partitions: u32 = arg(args, 2, "partitions")?;
    let first: u64 = arg(args, 3, "first-seq")?;
    let tasks: u64 = arg(args, 4, "tasks")?;
    let log = Arc::new(FileLog::open(FileConfig::new(dir, partitions)).map_err(|e| e.to_string())?);
    let mut handles = Vec::new();
    for t in 0..tasks {
        let log = log.clone();
        handles.push(tokio::spawn(async move {
            for i in 0..MAX_PER_TASK {
                let seq = first + t + i * tasks;
                let wire = record::wire(seq).map_err(|e| e.to_string())?;
                let hash = record::hash(&wire.value);
                let position = log.append(wire).await.map_err(|e| e.to_string())?;
                let mut out = std::io::stdout().lock();
                writeln!(out, "ack {} {} {seq} {hash:016x}", position.partition, position.offset)
                    .and_then(|()| out.flush())
                    .map_err(|e| e.to_string())?;
            }
            Ok::<(), String>(())
        }));
    }
    if args.get(5).map(String::as_str) == Some("reclaim") {
        let log = log.clone();
        handles.push(tokio::spawn(async move {
            for _ in 0..MAX_PER_TASK {
                let end = log.end_offsets().await.map_err(|e| e.to_string())?;
                let below: Vec<u64> = end.iter().map(|e| e.saturating_sub(KEEP)).collect();
                {
                    let mut out = std::io::stdout().lock();
                    let offsets: Vec<String> = below.iter().map(u64::to_string).collect();
                    writeln!(out, "reclaim {}", offsets.join(" "))
                        .and_then(|()| out.flush())
                        .map_err(|e| e.to_string())?;
                }
                log.reclaim(&below).await.map_err(|e| e.to_string())?;
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            }
            Ok::<(), String>(())
        }));
    }
    for handle in handles {
        handle.await.map_err(|e| e.to_string())??;
    }
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    match run(&args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("file-append-child: {e}");
            ExitCode::FAILURE
        }
    }
}
