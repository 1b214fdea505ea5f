//! `actionstate`: run the demo, and inspect, explain, verify and reset any log a URL names.

/// Prints a line to standard output; a closed pipe (`actionstate inspect | head`) ends the
/// program quietly instead of panicking.
macro_rules! outln {
    () => { $crate::write_line(format_args!("")) };
    ($($arg:tt)*) => { $crate::write_line(format_args!($($arg)*)) };
}

// The store allocates many small objects while rebuilding; mimalloc's thread-local free
// lists keep that cheap on every core (measured: docs/benchmarks-history.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod bench;
mod demo;
mod inspect;
mod metrics;
mod offline;
mod otlp;
mod reset;
mod soak;
mod waits;

// Shared with the benchmark crate; `crate::claim` and `crate::hint` name them here as before.
use actionstate_cli::{claim, hint, write_line};
use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(name = "actionstate", version, about = "Durable action state with safe replay")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The log of the offline commands without `--log`: the embedded store in `./actionstate-data`.
pub(crate) const DEFAULT_LOG: &str = "file:./actionstate-data";

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a simulated agent on the embedded store (or any log `--log` names), crash it
    /// partway, restore, replay, and report what was reused, resumed and re-executed.
    Demo(demo::DemoArgs),
    /// Show keys, rounds, states and the audit of divergences of a log.
    Inspect {
        /// The log (`file:DIR`, `kafka://HOST:PORT/TOPIC`, `fluss://HOST:PORT/DATABASE/TABLE`).
        #[arg(long, value_name = "URL", default_value = DEFAULT_LOG)]
        log: String,
        /// Only this business key (the runtime's key bytes as text, e.g. `sim-key-0`).
        #[arg(long)]
        key: Option<String>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Explain what a lookup of an action in a round would return, and why.
    Explain {
        /// The log.
        #[arg(long, value_name = "URL", default_value = DEFAULT_LOG)]
        log: String,
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
    /// Measure the store on a log of your own: put latency and throughput, and rebuild rate.
    Bench(bench::BenchArgs),
    /// Run conversations that go idle for good, with checkpoints, and print whether memory,
    /// the data directory and the snapshots stay flat (retention on, or `--compare` with off).
    Soak(soak::SoakArgs),
    /// Invalidate every state of a key's rounds from one on (an operator's repair, audited in
    /// the log): prints what it removes, and writes only with `--yes`.
    Reset(reset::ResetArgs),
    /// List the durable waits of a log: pending, and resolved but not resumed (key, round,
    /// action, wait, age, deadline). Read-only; never shows a token or a reply.
    Waits(waits::WaitsArgs),
    /// Resolve (or reject) a durable wait by its token: checks everything before it writes;
    /// offline on a data directory, through a request the running owner records on Kafka and
    /// Fluss.
    Resolve(waits::ResolveArgs),
    /// Decode every record and check the index invariants; exits non-zero on any problem.
    Verify {
        /// The log.
        #[arg(long, value_name = "URL", default_value = DEFAULT_LOG)]
        log: String,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
}

impl Command {
    /// The `--otlp` endpoint of a command that runs long, if it was given.
    fn otlp(&self) -> Option<&str> {
        match self {
            Command::Demo(args) => args.metrics.otlp.as_deref(),
            Command::Soak(args) => args.metrics.otlp.as_deref(),
            Command::Bench(args) => args.metrics.otlp.as_deref(),
            _ => None,
        }
    }
}

/// `text` as one word of a POSIX shell command line: as it is when it holds nothing a shell
/// reads specially, else in single quotes. A log URL's `&` would otherwise end the command
/// in the middle of its parameters, so a hint could not be pasted back.
pub(crate) fn shell_word(text: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_./:,=@%+-".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// The error and its causes on one line, skipping a cause whose text its parent already
/// printed (error types that show their source in their own message).
fn one_line(e: &anyhow::Error) -> String {
    let mut out = String::new();
    // A hint is printed on its own line (`main`).
    let skip = usize::from(e.downcast_ref::<hint::Hint>().is_some());
    for cause in e.chain().skip(skip) {
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
    actionstate_cli::tune_allocator();
    let cli = Cli::parse();
    // Warnings of the library and the backends (a topic that deletes by age read by a
    // read-only tool, a reclaim that failed) reach the operator on standard error; with
    // `--otlp`, the store's spans go to a collector too.
    let tracing = match otlp::install(cli.command.otlp()) {
        Ok(tracing) => tracing,
        Err(e) => {
            eprintln!("error: {}", one_line(&e));
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        let result = match cli.command {
            Command::Demo(args) => demo::run(args).await,
            Command::Inspect { log, key, json } => inspect::inspect(&log, key.as_deref(), json).await,
            Command::Explain { log, key, seq, action, json } => inspect::explain(&log, &key, seq, &action, json).await,
            Command::Verify { log, json } => inspect::verify(&log, json).await,
            Command::Reset(args) => reset::run(args).await,
            Command::Waits(args) => waits::list(args).await,
            Command::Resolve(args) => waits::resolve(args).await,
            Command::Bench(args) => bench::run(args).await,
            Command::Soak(args) => soak::run(args).await,
        };
        if result.is_ok() {
            metrics::linger().await;
        }
        result
    });
    drop(runtime);
    tracing.shutdown();
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", one_line(&e));
            if let Some(hint) = e.downcast_ref::<hint::Hint>() {
                eprintln!("hint: {hint}");
            }
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_paste_back() {
        assert_eq!(shell_word("file:/tmp/d"), "file:/tmp/d");
        assert_eq!(shell_word("kafka://h:1/t?a=1&b=2"), "'kafka://h:1/t?a=1&b=2'");
        assert_eq!(shell_word("file:/it's"), "'file:/it'\\''s'");
        assert_eq!(shell_word(""), "''");
    }
}
