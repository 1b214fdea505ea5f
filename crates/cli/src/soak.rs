//! `actionstate soak`: conversations that live for a few inputs and go idle for good, on any
//! log (the embedded store by default), with a checkpoint every so many inputs; prints
//! resident memory, the bytes the backend holds and what each snapshot carries every tenth of
//! the run, then one JSON line. With `--owners N`, N stores share the log, each owning a share
//! of the key groups and writing its checkpoints into the log (retention runs from all of
//! them), optionally rescaling to `--rescale-to M` halfway; then one store owning every group
//! the same way runs on a second log, and a last line compares their throughput (`--pairs N`:
//! N such pairs, alternating which goes first, and the median of their ratios; `--warm-up`:
//! the owners run once before, unmeasured, so that no measured run is the process's first). With
//! `--two-phase` the soak keeps the owners' checkpoints itself, as Flink does, and rebuilds
//! the rescale from them.
//!
//! Bytes held: on `file:`, the data directory's files; on `kafka://`, the topic's partition
//! directories (`<DIR>/<topic>-<partition>`) under the broker's `log.dirs` on this machine,
//! given with `--broker-log-dir` (Kafka's own size on disk, segments and indexes, as
//! `DescribeLogDirs` would report it summed over the partitions); elsewhere not measured (0).

use actionstate_recovery::{LogConfig, Retention, StoreConfig};
use actionstate_sim::soak::{SoakConfig, SoakReport, SoakSample, directory_bytes, soak};
use actionstate_sim::soak_owners::{Fleet, soak_owners};
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

#[derive(clap::Args, Debug)]
pub(crate) struct SoakArgs {
    /// Inputs in all.
    #[arg(long, default_value_t = 1_000_000)]
    inputs: u64,
    /// Conversations in flight at once.
    #[arg(long, default_value_t = 64)]
    in_flight: usize,
    /// Inputs a conversation lives for.
    #[arg(long, default_value_t = 4)]
    inputs_per_conversation: u64,
    /// Inputs between checkpoints (each completed at once).
    #[arg(long, default_value_t = 1_000)]
    checkpoint_every: u64,
    /// Checkpoints whose history is kept (`all`: keep everything).
    #[arg(long, default_value = "3")]
    retention: String,
    /// Run once with `--retention` and once keeping everything, and report both.
    #[arg(long, conflicts_with = "owners")]
    compare: bool,
    /// Stores sharing the log, each owning a share of 128 key groups and writing its
    /// checkpoints into the log; then one store owning every group the same way on a second
    /// log, to compare throughput (`throughput_ratio`).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=128))]
    owners: Option<u16>,
    /// With `--owners`: halfway through, every owner checkpoints and stops, and this many
    /// new owners restore from the log and go on.
    #[arg(long, requires = "owners", value_parser = clap::value_parser!(u16).range(1..=128))]
    rescale_to: Option<u16>,
    /// With `--owners`: the soak keeps the checkpoints, as a runtime such as Flink does
    /// (`snapshot` and `checkpoint_complete`, the snapshots of each owner's last checkpoints
    /// kept, a rescale rebuilt from them), instead of the owners writing them into the log;
    /// the one-owner run does the same.
    #[arg(long, requires = "owners")]
    two_phase: bool,
    /// With `--owners`: run the owners and the one owner this many times each, in pairs that
    /// alternate which of the two goes first, each on a log of its own; the comparison gives
    /// every pair's ratio and their median. On a shared machine the same run's throughput moves
    /// by up to 15% from one run to the next, and a run late in a process is warmer than the
    /// first: the median of alternating pairs follows neither one slow run nor the order.
    #[arg(long, requires = "owners", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=99))]
    pairs: u16,
    /// With `--owners`: first run the owners this many inputs on a log of their own
    /// (`DIR/warmup`, `TOPIC-warmup` or `TABLE_warmup`), reported but left out of the
    /// comparison. The first run in a process also measures the process warming up (its
    /// allocator, the client's buffers, a broker's first topics), which is no store's cost.
    #[arg(long, requires = "owners", value_name = "INPUTS")]
    warm_up: Option<u64>,
    /// The log, which must be new or empty: the soak writes into it and reclaims what it wrote
    /// (a log that holds anything is refused, and nothing is written to it). Default: `file:`
    /// on a fresh directory under the system temp dir, removed after. With `--compare` or
    /// `--owners`, the second run uses `DIR/all` (file), `TOPIC-all` (Kafka) or `TABLE_all`
    /// (Fluss), and run N after it (`--pairs`) `DIR/runN`, `TOPIC-runN` or `TABLE_runN`.
    #[arg(long, value_name = "URL")]
    log: Option<String>,
    /// The broker's `log.dirs` on this machine, to measure a Kafka topic's bytes on disk.
    #[arg(long, value_name = "DIR")]
    broker_log_dir: Option<PathBuf>,
    /// Print only the JSON lines.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    pub(crate) metrics: crate::metrics::MetricsArgs,
}

fn retention(text: &str) -> Result<Retention> {
    match text {
        "all" => Ok(Retention::KeepAll),
        n => match n.parse::<u32>() {
            Ok(n) if n > 0 => Ok(Retention::LastCheckpoints(n)),
            _ => bail!("--retention expects a number of checkpoints (at least 1) or `all`, got `{n}`"),
        },
    }
}

/// One run of the soak: one store keeping its checkpoints with the runtime, or owners that
/// share the log and write their checkpoints into it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Run {
    Single(Retention),
    Fleet(Fleet, Retention),
}

impl Run {
    fn retention(self) -> Retention {
        match self {
            Run::Single(r) | Run::Fleet(_, r) => r,
        }
    }

    /// The name of its retention, as the report lines give it.
    fn name(self) -> String {
        match self.retention() {
            Retention::KeepAll => "all".to_owned(),
            Retention::LastCheckpoints(n) => n.to_string(),
        }
    }
}

pub(crate) async fn run(args: SoakArgs) -> Result<ExitCode> {
    crate::metrics::serve(&args.metrics)?;
    let first = retention(&args.retention)?;
    let runs = match args.owners {
        Some(owners) => {
            let many = Run::Fleet(Fleet { owners, rescale_to: args.rescale_to, two_phase: args.two_phase }, first);
            let one = Run::Fleet(Fleet { owners: 1, rescale_to: None, two_phase: args.two_phase }, first);
            (0..args.pairs).flat_map(|pair| if pair % 2 == 0 { [many, one] } else { [one, many] }).collect()
        }
        None if args.compare && first != Retention::KeepAll => {
            vec![Run::Single(first), Run::Single(Retention::KeepAll)]
        }
        None => vec![Run::Single(first)],
    };
    let config = SoakConfig {
        inputs: args.inputs.max(1),
        in_flight: args.in_flight.max(1),
        inputs_per_conversation: args.inputs_per_conversation.max(1),
        checkpoint_every: args.checkpoint_every.max(1),
        ..SoakConfig::default()
    };
    if let (Some(inputs), Some(&many)) = (args.warm_up, runs.first()) {
        let warm = SoakConfig { inputs: inputs.max(1), ..config.clone() };
        once(&args, &warm, many, Slot::WarmUp).await?;
    }
    let mut reports = Vec::new();
    for (n, run) in runs.into_iter().enumerate() {
        reports.push((run, once(&args, &config, run, Slot::Run(n)).await?));
    }
    if args.owners.is_some()
        && let Some((Run::Fleet(fleet, _), _)) = reports.first()
    {
        // Pair k is runs 2k and 2k+1, the owners first in even pairs and second in odd ones.
        let pairs: Vec<(f64, f64)> = reports
            .chunks(2)
            .enumerate()
            .filter_map(|(k, pair)| match pair {
                [(_, a), (_, b)] if k % 2 == 0 => Some((a.inputs_per_s, b.inputs_per_s)),
                [(_, a), (_, b)] => Some((b.inputs_per_s, a.inputs_per_s)),
                _ => None,
            })
            .collect();
        let ratios: Vec<f64> = pairs.iter().map(|(many, one)| many / one.max(1e-9)).collect();
        let line = serde_json::json!({
            "compare": "owners",
            "owners": fleet.owners,
            "rescale_to": fleet.rescale_to,
            "two_phase": fleet.two_phase,
            "pairs": pairs.len(),
            "inputs_per_s": round(median(pairs.iter().map(|p| p.0)), 10.0),
            "one_owner_inputs_per_s": round(median(pairs.iter().map(|p| p.1)), 10.0),
            "throughput_ratios": ratios.iter().map(|r| round(*r, 1000.0)).collect::<Vec<_>>(),
            "throughput_ratio": round(median(ratios.iter().copied()), 1000.0),
        });
        outln!("{line}");
    } else if let [(_, kept), (_, all)] = reports.as_slice()
        && !args.json
    {
        outln!(
            "retention vs keeping everything: inputs/s {:.0} vs {:.0} (ratio {:.2}), disk growth {:.2} vs {:.2}, rss growth {:.2} vs {:.2}",
            kept.inputs_per_s,
            all.inputs_per_s,
            kept.inputs_per_s / all.inputs_per_s.max(1e-9),
            kept.disk_growth,
            all.disk_growth,
            kept.rss_growth,
            all.rss_growth
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The median of `values` (0 for none): the middle one, or the mean of the middle two.
fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => f64::midpoint(v[n / 2 - 1], v[n / 2]),
    }
}

/// `x` rounded to `1 / per` (`per`: 10 for tenths).
fn round(x: f64, per: f64) -> f64 {
    (x * per).round() / per
}

/// Which run of the command: the warm-up, or run `n` of those reported.
#[derive(Clone, Copy, Debug)]
enum Slot {
    WarmUp,
    Run(usize),
}

/// The log of a run: `--log` as given for the first, a sibling for each run after it (`all`
/// for the second, the keep-everything run of `--compare` or the one owner of `--owners`) and
/// for the warm-up.
fn log_of(args: &SoakArgs, slot: Slot, temp: &Path) -> Result<LogConfig> {
    let sibling = match slot {
        Slot::Run(0) => None,
        Slot::Run(1) => Some("all".to_owned()),
        Slot::Run(n) => Some(format!("run{n}")),
        Slot::WarmUp => Some("warmup".to_owned()),
    };
    let Some(text) = &args.log else {
        let dir = temp.join(sibling.as_deref().unwrap_or("data"));
        return Ok(LogConfig::File(actionstate_file::FileConfig::new(dir, 8)));
    };
    let mut config: LogConfig = text.parse().context("--log")?;
    if let Some(sibling) = sibling {
        match &mut config {
            LogConfig::File(c) => c.dir = c.dir.join(sibling),
            #[cfg(feature = "kafka")]
            LogConfig::Kafka(c) => c.topic = format!("{}-{sibling}", c.topic),
            #[cfg(feature = "fluss")]
            LogConfig::Fluss(c) => c.table = format!("{}_{sibling}", c.table),
            other => bail!("--compare and --owners need a second log beside {other}"),
        }
    }
    Ok(config)
}

/// What the backend of `config` holds on disk, as far as this machine can see it.
fn bytes_held(config: &LogConfig, broker_log_dir: Option<&Path>) -> Result<Box<dyn Fn() -> u64 + Sync>> {
    match config {
        LogConfig::File(c) => {
            let dir = c.dir.clone();
            Ok(Box::new(move || directory_bytes(&dir)))
        }
        #[cfg(feature = "kafka")]
        LogConfig::Kafka(c) => {
            let Some(root) = broker_log_dir else {
                bail!("a Kafka soak measures the topic on disk: pass --broker-log-dir with the broker's log.dirs")
            };
            let dirs: Vec<PathBuf> = (0..c.partitions).map(|p| root.join(format!("{}-{p}", c.topic))).collect();
            Ok(Box::new(move || dirs.iter().map(|d| directory_bytes(d)).sum()))
        }
        _ => {
            // Measured only where this machine sees the backend's files.
            let _ = broker_log_dir;
            Ok(Box::new(|| 0))
        }
    }
}

async fn once(args: &SoakArgs, config: &SoakConfig, run: Run, slot: Slot) -> Result<SoakReport> {
    // Without `--log`, a data directory of the run's own under the system temp dir, removed
    // after the run whatever it did.
    let temp = match args.log {
        Some(_) => None,
        None => {
            let dir = std::env::temp_dir().join(format!("actionstate-soak-{}", std::process::id()));
            Some(crate::claim::Scratch::claim(&dir, "soak", "soak")?)
        }
    };
    let temp_dir = temp.as_ref().map_or(Path::new(""), |t| t.path.as_path());
    let report = run_once(args, config, run, slot, temp_dir).await;
    if let Some(temp) = temp {
        temp.remove()?;
    }
    report
}

/// One run of the soak (on its log: [`log_of`]), with `temp` the directory of its default
/// data directories.
async fn run_once(args: &SoakArgs, config: &SoakConfig, run: Run, slot: Slot, temp: &Path) -> Result<SoakReport> {
    let log_config = log_of(args, slot, temp)?;
    let held = bytes_held(&log_config, args.broker_log_dir.as_deref())?;
    // The soak writes a history of its own and reclaims it: never into a log that holds one.
    let log = crate::claim::claim_empty(&log_config, "soak").await?;
    let store_config = StoreConfig { retention: run.retention(), ..StoreConfig::default() };
    let name = run.name();
    let owners = match run {
        Run::Fleet(fleet, _) => format!(" owners={}", fleet.owners),
        Run::Single(_) => String::new(),
    };
    let json = args.json;
    let mut on_sample = |s: &SoakSample| {
        if !json {
            outln!(
                "retention={name}{owners} inputs={} elapsed={:.1}s rss={:.1}MB held={:.1}MB snapshot_entries={} snapshot_ms={:.1} reclaimed={} indexed={}",
                s.inputs,
                s.elapsed_s,
                s.rss_bytes as f64 / 1e6,
                s.backend_bytes as f64 / 1e6,
                s.snapshot_entries,
                s.snapshot_ms,
                s.records_reclaimed,
                s.indexed_states
            );
        }
    };
    let report = match run {
        Run::Single(_) => {
            // Returns once the store's reclaiming is done.
            soak(log, store_config, config, &*held, &mut on_sample).await?
        }
        Run::Fleet(fleet, _) => {
            soak_owners(Arc::new(log), &store_config, config, fleet, &*held, &mut on_sample).await?
        }
    };
    let (owners, rescale_to, two_phase) = match run {
        Run::Fleet(fleet, _) => (Some(fleet.owners), fleet.rescale_to, Some(fleet.two_phase)),
        Run::Single(_) => (None, None, None),
    };
    let line = serde_json::json!({
        "warm_up": matches!(slot, Slot::WarmUp),
        "log": log_config.to_string(),
        "retention": name,
        "owners": owners,
        "rescale_to": rescale_to,
        "two_phase": two_phase,
        "inputs": report.inputs,
        "inputs_per_s": (report.inputs_per_s * 10.0).round() / 10.0,
        "disk_growth": (report.disk_growth * 1000.0).round() / 1000.0,
        "rss_growth": (report.rss_growth * 1000.0).round() / 1000.0,
        "snapshot_entries": report.snapshot_entries,
        "snapshot_ms_max": (report.snapshot_ms_max * 10.0).round() / 10.0,
    });
    outln!("{line}");
    Ok(report)
}
