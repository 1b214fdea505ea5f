//! `actionstate-bench`: the store's put and rebuild paths side by side with the raw client of
//! the backend, in the same run, so that the ratio of the two says what the store costs on top
//! of the storage it writes to. Not shipped; `cargo xtask bench file|kafka|fluss` drives it.
//!
//! - `--log file:DIR` (the default, on a fresh directory under the system temp dir): against
//!   raw redb (see the `file` module);
//! - `--log kafka://...`: against raw rdkafka clients, with the cost of transactions (see the
//!   `kafka` module);
//! - `--log fluss://...`: against raw fluss-rs clients (see the `fluss` module);
//! - `--restore`: a restore from the log's own checkpoints as its history grows (see the
//!   `restore` module);
//! - `--waits`: a durable wait, resolved and resumed, against a plain durable call, and a
//!   store holding 100,000 pending waits (see the `waits` module).
//!
//! The store side is measured as `actionstate bench` measures an operator's log
//! (`actionstate_cli::measure`), and the same claim rules hold: a data directory must be absent
//! or empty, and only what the benchmark created is removed; a server benchmark refuses a log
//! that holds records and measures on fresh topics or tables named after it.

/// Prints a line to standard output; a closed pipe ends the program quietly instead of
/// panicking.
macro_rules! outln {
    ($($arg:tt)*) => { actionstate_cli::write_line(format_args!($($arg)*)) };
}

// The same allocator and setting as the `actionstate` binary, so that the store side measures
// what an operator's process runs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod args;
mod file;
#[cfg(feature = "fluss")]
mod fluss;
#[cfg(feature = "kafka")]
mod kafka;
mod report;
mod restore;
mod waits;

use actionstate_cli::claim;
use actionstate_file::FileConfig;
use actionstate_recovery::LogConfig;
use anyhow::{Context, Result, bail};
use args::BenchArgs;
use clap::Parser as _;
use std::process::ExitCode;

async fn run(mut args: BenchArgs) -> Result<ExitCode> {
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
    if args.waits {
        return waits::run(&args, log).await;
    }
    match log {
        LogConfig::File(c) if args.restore => restore::run(&args, &c.dir).await,
        _ if args.restore => bail!("--restore measures the file backend only"),
        LogConfig::File(c) => file::run(&args, &c.dir).await,
        #[cfg(feature = "kafka")]
        LogConfig::Kafka(c) => kafka::run(args, *c).await,
        #[cfg(feature = "fluss")]
        LogConfig::Fluss(c) => fluss::run(args, *c).await,
        other => bail!("the benchmark runs on file, kafka or fluss logs, not {other}"),
    }
}

fn main() -> ExitCode {
    actionstate_cli::tune_allocator();
    let args = BenchArgs::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
