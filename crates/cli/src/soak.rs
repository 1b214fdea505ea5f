//! `actionstate soak`: conversations that live for a few inputs and go idle for good, on the
//! embedded store, with a checkpoint every so many inputs; prints resident memory, the data
//! directory's size and what each snapshot carries every tenth of the run, then one JSON line.

use actionstate_recovery::{ActionStateStore, Retention, StoreConfig};
use actionstate_sim::soak::{SoakConfig, SoakReport, directory_bytes, soak};
use anyhow::{Context, Result, bail};
use std::path::PathBuf;
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
    #[arg(long)]
    compare: bool,
    /// Data directory (default: a fresh directory under the system temp dir, removed after).
    #[arg(long)]
    data: Option<PathBuf>,
    /// Print only the JSON lines.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    metrics: crate::metrics::MetricsArgs,
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

pub(crate) async fn run(args: SoakArgs) -> Result<ExitCode> {
    crate::metrics::serve(&args.metrics)?;
    let first = retention(&args.retention)?;
    let mut runs = vec![first];
    if args.compare && first != Retention::KeepAll {
        runs.push(Retention::KeepAll);
    }
    let config = SoakConfig {
        inputs: args.inputs.max(1),
        in_flight: args.in_flight.max(1),
        inputs_per_conversation: args.inputs_per_conversation.max(1),
        checkpoint_every: args.checkpoint_every.max(1),
        ..SoakConfig::default()
    };
    let mut reports = Vec::new();
    for retention in runs {
        reports.push((retention, once(&args, &config, retention).await?));
    }
    if let [(_, kept), (_, all)] = reports.as_slice()
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

async fn once(args: &SoakArgs, config: &SoakConfig, retention: Retention) -> Result<SoakReport> {
    let temp;
    let data = match &args.data {
        Some(d) if args.compare => d.join(format!("{retention:?}").to_lowercase().replace(['(', ')'], "")),
        Some(d) => d.clone(),
        None => {
            temp = tempfile::tempdir().context("creating a temporary data directory")?;
            temp.path().join("data")
        }
    };
    let log = actionstate_file::FileLog::open(actionstate_file::FileConfig::new(&data, 8))
        .with_context(|| format!("opening the data directory {}", data.display()))?;
    let store = Arc::new(ActionStateStore::new(log, StoreConfig { retention, ..StoreConfig::default() }));
    let name = match retention {
        Retention::KeepAll => "all".to_owned(),
        Retention::LastCheckpoints(n) => n.to_string(),
    };
    let json = args.json;
    let report = soak(Arc::clone(&store), config, &|| directory_bytes(&data), &mut |s| {
        if !json {
            outln!(
                "retention={name} inputs={} elapsed={:.1}s rss={:.1}MB data_dir={:.1}MB snapshot_entries={} snapshot_ms={:.1} reclaimed={} indexed={}",
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
    })
    .await?;
    store.wait_for_reclaim().await;
    let line = serde_json::json!({
        "retention": name,
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
