//! `actionstate`: run the demo, and inspect, explain and verify a data directory.

/// Prints a line to standard output; a closed pipe (`actionstate inspect | head`) ends the
/// program quietly instead of panicking.
macro_rules! outln {
    () => { $crate::write_line(format_args!("")) };
    ($($arg:tt)*) => { $crate::write_line(format_args!($($arg)*)) };
}

// The store allocates many small objects while rebuilding; mimalloc's thread-local free
// lists keep that cheap on every core (measured in BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod bench;
mod demo;
mod inspect;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(name = "actionstate", version, about = "Durable action state with safe replay")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a simulated agent on the embedded store (or a Kafka topic), crash it partway,
    /// restore, replay, and report what was reused, resumed and re-executed.
    Demo(demo::DemoArgs),
    /// Show keys, rounds, states and the audit of divergences in a data directory.
    Inspect {
        /// Data directory of the embedded store.
        #[arg(long)]
        data: PathBuf,
        /// Only this business key (the runtime's key bytes as text, e.g. `sim-key-0`).
        #[arg(long)]
        key: Option<String>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Explain what a lookup of an action in a round would return, and why.
    Explain {
        /// Data directory of the embedded store.
        #[arg(long)]
        data: PathBuf,
        /// The business key (as text).
        #[arg(long)]
        key: String,
        /// The round (sequence number).
        #[arg(long)]
        seq: u64,
        /// The action name.
        #[arg(long)]
        action: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Measure store paths side by side with the raw backend client.
    Bench(bench::BenchArgs),
    /// Decode every record and check the index invariants; exits non-zero on any problem.
    Verify {
        /// Data directory of the embedded store.
        #[arg(long)]
        data: PathBuf,
    },
}

pub(crate) fn write_line(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.write_all(b"\n")) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("error: writing to standard output: {e}");
            std::process::exit(1);
        }
        std::process::exit(0);
    }
}

/// The error and its causes on one line, skipping a cause whose text its parent already
/// printed (error types that show their source in their own message).
fn one_line(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Demo(args) => demo::run(args).await,
            Command::Inspect { data, key, json } => inspect::inspect(&data, key.as_deref(), json).await,
            Command::Explain { data, key, seq, action, json } => {
                inspect::explain(&data, &key, seq, &action, json).await
            }
            Command::Verify { data } => inspect::verify(&data).await,
            Command::Bench(args) => bench::run(args).await,
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", one_line(&e));
            ExitCode::FAILURE
        }
    }
}
