//! The options of `actionstate-bench`, read by every backend's benchmark.

use clap::Parser;

#[derive(Parser, Debug)]
#[command(name = "actionstate-bench", about = "The store's put and rebuild against the backend's raw client")]
pub(crate) struct BenchArgs {
    /// What to measure, as a log URL: `file:DIR` (the embedded default; DIR must be absent or
    /// empty, the benchmark writes into `DIR/bench` and removes that, and DIR if it created it,
    /// when done; without `--log`, a fresh directory under the system temp dir),
    /// `kafka://HOST:PORT/TOPIC` (fresh topics `TOPIC-<pid>-<n>` on that cluster, with the
    /// URL's partitions, timeouts and credentials) or `fluss://HOST:PORT/DATABASE/TABLE` (fresh
    /// tables `DATABASE.TABLE_<pid>_<n>`).
    #[arg(long, value_name = "URL")]
    pub(crate) log: Option<String>,
    /// Sequential puts measured (each side).
    #[arg(long, default_value_t = 2000)]
    pub(crate) puts: usize,
    /// Records written and rebuilt (default: 1,000,000 for `file`, 500,000 for `kafka`,
    /// 200,000 for `fluss`).
    #[arg(long)]
    pub(crate) records: Option<usize>,
    /// Puts per key in one round of the Kafka benchmark's concurrent measurement (each side):
    /// about half a second per side with the default. Sides of 0.3 s (300 puts) were often
    /// caught whole by a pause of the shared machine; single rounds then spread from 0.37 to
    /// 1.59. Smaller only for a quick check that the benchmark runs.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..))]
    #[cfg_attr(not(feature = "kafka"), allow(dead_code, reason = "read by the Kafka benchmark"))]
    pub(crate) concurrent_puts: u64,
    /// Partitions of the log, from the URL.
    #[arg(skip)]
    pub(crate) partitions: u32,
    /// Instead of put and rebuild: a restore from the log's own checkpoints after histories
    /// of `--restore-sizes` inputs, on the file backend (see the `restore` module).
    #[arg(long)]
    pub(crate) restore: bool,
    /// The history sizes of `--restore`, in inputs.
    #[arg(long, value_delimiter = ',', default_value = "10000,100000,1000000")]
    pub(crate) restore_sizes: Vec<u64>,
    /// Instead of put and rebuild: a durable wait, resolved and resumed, against a plain
    /// durable call, and (on a file log) a store holding `--pending-waits` pending waits (see
    /// the `waits` module).
    #[arg(long, conflicts_with = "restore")]
    pub(crate) waits: bool,
    /// The pending waits `--waits` makes on a file log.
    #[arg(long, default_value_t = 100_000)]
    pub(crate) pending_waits: u64,
    /// Print one JSON object (with `--restore`, one per run).
    #[arg(long)]
    pub(crate) json: bool,
}
