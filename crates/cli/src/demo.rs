//! `actionstate demo`: the simulator on the embedded store (or any log a URL names: a Kafka
//! topic, a Fluss table), crashed partway and restored, with its durable calls going to a local
//! HTTP service that deduplicates by idempotency key (and one it can only ask about a key).

use actionstate_core::StateLog;
use actionstate_memory::MemoryLog;
use actionstate_recovery::LogConfig;
use actionstate_sim::external::{ExternalClient, ExternalReport, ExternalService};
use actionstate_sim::{CrashPoint, MemorySource, Outcome, RunPlan, Sim, SimConfig};
use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub(crate) struct DemoArgs {
    /// The log to run on, which must be empty: `file:DIR` (the embedded default; without
    /// `--log`, a fresh directory under the system temp dir), `kafka://HOST:PORT/TOPIC` or
    /// `fluss://HOST:PORT/DATABASE/TABLE` (see docs/logs.md, "Naming a log").
    #[arg(long, value_name = "URL")]
    log: Option<String>,
    /// Inputs to process.
    #[arg(long, default_value_t = 200)]
    inputs: usize,
    /// Distinct business keys.
    #[arg(long, default_value_t = 8)]
    keys: u32,
    /// Seed of the run.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Where to crash, as a fraction of the run's appends.
    #[arg(long, default_value_t = 0.6)]
    crash_at: f64,
    /// Print the summary as one JSON object.
    #[arg(long)]
    json: bool,
    /// Send the external service no idempotency keys: the calls the crashes make run again
    /// take effect again (`external_duplicates` shows how often).
    #[arg(long)]
    no_idempotency: bool,
    #[command(flatten)]
    pub(crate) metrics: crate::metrics::MetricsArgs,
}

#[derive(Serialize, Debug)]
struct Summary {
    backend: &'static str,
    data: String,
    inputs: usize,
    actions: u64,
    executed: u64,
    reused: u64,
    resumed: u64,
    reexecuted: BTreeMap<String, u64>,
    durable_calls_executed: u64,
    durable_calls_replayed: u64,
    durable_calls_reconciled: u64,
    crashes: u64,
    restores: u64,
    checkpoints: u64,
    rebuild_ms: f64,
    /// Rebuilds of the crashing run: one per store of every attempt (a store with no
    /// checkpoint to restore rebuilds too, to take its owner epoch and fence).
    rebuilds: u64,
    rebuild_records: u64,
    duplicate_side_effects: u64,
    lost_acknowledged: u64,
    matches_crash_free_run: bool,
    /// Whether the calls carried idempotency keys (not with `--no-idempotency`).
    idempotency: bool,
    /// What the external service saw: requests, effects applied, requests it deduplicated,
    /// and effects applied twice for one logical call.
    external_requests: u64,
    external_effects: u64,
    external_deduplicated: u64,
    external_duplicates: u64,
    /// Questions the reconciler asked the service that cannot deduplicate.
    external_lookups: u64,
    /// The approval step's durable waits: made, approved, rejected, timed out, resumed, and
    /// outcomes delivered twice or lost (both must be 0).
    waits: Waits,
    elapsed_ms: f64,
}

/// The durable waits of the demo's approval step.
#[derive(Serialize, Debug)]
struct Waits {
    made: u64,
    resolved: u64,
    rejected: u64,
    timed_out: u64,
    resumed: u64,
    delivered_twice: u64,
    lost: u64,
}

/// The log `--log` names, or a fresh data directory.
fn log_of(args: &DemoArgs) -> Result<LogConfig> {
    match &args.log {
        Some(url) => url.parse().context("--log"),
        None => {
            let dir = std::env::temp_dir().join(format!("actionstate-demo-{}-{}", std::process::id(), args.seed));
            Ok(LogConfig::File(actionstate_file::FileConfig::new(dir, 8)))
        }
    }
}

pub(crate) async fn run(args: DemoArgs) -> Result<ExitCode> {
    let target = log_of(&args)?;
    let started = Instant::now();
    let config = SimConfig {
        seed: args.seed,
        keys: args.keys.max(1),
        inputs: args.inputs.max(1),
        checkpoint_every: 10,
        abort_every: 4,
        owners: 1,
        // `tool.fetch` goes to the service that cannot deduplicate and is reconciled by
        // asking it about the call's key.
        reconcile: true,
        // About one round in five asks for a person's approval.
        approval_every: 5,
    };
    // The log is claimed before anything else runs, so that a second command started during
    // the rehearsals below finds it taken (`claim`). The rehearsals run on as many partitions
    // as the log has: the appends of a run, and so its crash points, depend on them.
    let partitions = crate::claim::claim_empty(&target, "demo").await?.identity().partitions;
    // A crash-free reference run in memory: the expected outputs and memory, and the number
    // of appends, which places the crash.
    let reference_log = MemoryLog::new(partitions);
    let reference = Sim::new(MemorySource { log: reference_log.clone() }, config.clone())
        .run(&RunPlan::clean(), &|_| {})
        .await
        .context("crash-free reference run")?;
    let bar = progress_bar(args.json, config.inputs);
    let crashes = plan_crashes(&config, partitions, reference_log.appends(), args.crash_at).await?;
    let plan = RunPlan::crashing(crashes.points.clone());
    // After the rehearsals, so the metrics count the demo's run alone.
    bar.suspend(|| crate::metrics::serve(&args.metrics))?;
    let service = ExternalService::start().await.context("starting the demo's external service on 127.0.0.1")?;
    let client = ExternalClient::new(&service.url(), !args.no_idempotency)?;
    let progress = |pos: usize| bar.set_position(pos as u64);
    let sim = Sim::new(target.clone(), config.clone()).with_external(client);
    let outcome = sim.run(&plan, &progress).await.context("demo run")?;
    bar.finish_and_clear();

    let summary = summary_of(&outcome, &reference, &target, started, !args.no_idempotency, service.report());
    if args.json {
        outln!("{}", serde_json::to_string(&summary)?);
    } else {
        print_summary(&summary);
    }
    let ok = summary.duplicate_side_effects == 0
        && summary.lost_acknowledged == 0
        && summary.waits.delivered_twice == 0
        && summary.waits.lost == 0
        && summary.matches_crash_free_run
        && (!summary.idempotency || summary.external_duplicates == 0);
    if !ok {
        return Ok(ExitCode::FAILURE);
    }
    let missed = missed_plan(&summary, &crashes);
    if !missed.is_empty() {
        bail!(
            "the demo's plan did not happen on {}: {} (the run's results are above; try more --inputs, or \
             fewer partitions)",
            summary.data,
            missed.join("; ")
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The demo's progress bar on standard error, counting inputs; hidden for `--json`.
fn progress_bar(json: bool, inputs: usize) -> ProgressBar {
    if json {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(inputs as u64);
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg:<10} [{bar:40}] {pos}/{len} inputs")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_message("running");
    bar
}

/// The crashes of the demo's run, and which of the effects they were placed for were found.
struct Crashes {
    points: Vec<CrashPoint>,
    /// The append after which a crash makes an action resume from its journal.
    journal: Option<u64>,
    /// The append before which a crash strikes after a call's side effect: the call runs again.
    rerun: Option<u64>,
    /// The append before which a crash strikes after a reconciled call's side effect: the
    /// call is reconciled.
    reconciled: Option<u64>,
}

/// The first append `k` of `range` (200 at most are tried) such that a crash at `point(k)`,
/// with the crashes `before` in place, makes the rehearsal show `found`.
async fn find(
    config: &SimConfig,
    partitions: u32,
    before: &[CrashPoint],
    range: std::ops::Range<u64>,
    point: fn(u64) -> CrashPoint,
    found: impl Fn(&Outcome) -> bool,
) -> Result<Option<u64>> {
    for k in range.take(200) {
        let points = before.iter().copied().chain([point(k)]).collect();
        if found(&rehearse(config, partitions, points).await?) {
            return Ok(Some(k));
        }
    }
    Ok(None)
}

/// Rehearses a run of `config` crashing at `points` on the in-memory log.
async fn rehearse(config: &SimConfig, partitions: u32, points: Vec<CrashPoint>) -> Result<Outcome> {
    let probe = Sim::new(MemorySource { log: MemoryLog::new(partitions) }, config.clone());
    Ok(probe.run(&RunPlan::crashing(points), &|_| {}).await?)
}

/// Places the demo's crashes in a run of `config` whose crash-free run makes `appends`
/// appends, the first at fraction `crash_at` of them.
async fn plan_crashes(config: &SimConfig, partitions: u32, appends: u64, crash_at: f64) -> Result<Crashes> {
    let crash_append = ((appends as f64) * crash_at.clamp(0.0, 1.0)).max(1.0) as u64;
    // Four crashes, placed by rehearsing on the in-memory log (the run is deterministic, so
    // the chosen backend sees the same appends, whatever answers its calls): one loses the
    // acknowledgement of a durable call's journal entry, so the action resumes from its
    // journal; one loses the acknowledgement of a completion, which the rebuild recovers; one
    // strikes after a side effect but before its result is persisted, so that call runs again
    // (and the service deduplicates it by its key); one strikes there in a reconciled call,
    // which the reconciler settles by asking the service about its key.
    // Each is searched for with the ones before it in place: a crash shifts the appends
    // that follow it (the replay appends again).
    let mut points = Vec::new();
    let reconciled =
        find(config, partitions, &points, crash_append / 4..crash_append / 2, CrashPoint::BeforeAppend, |o| {
            o.ledger.calls_reconciled > 0
        })
        .await?;
    points.extend(reconciled.map(CrashPoint::BeforeAppend));
    let journal =
        find(config, partitions, &points, crash_append / 2..crash_append, CrashPoint::AfterAppend, |o| o.resumed > 0)
            .await?;
    points.extend(journal.map(CrashPoint::AfterAppend));
    points.push(CrashPoint::AfterAppend(crash_append));
    let second = (crash_append + (appends - crash_append) / 2).max(crash_append + 1);
    // Calls executed with the crashes so far: one more, and a call ran again.
    let executed = rehearse(config, partitions, points.clone()).await?.ledger.calls_executed;
    let rerun = find(config, partitions, &points, second..appends, CrashPoint::BeforeAppend, |o| {
        o.ledger.calls_executed > executed
    })
    .await?;
    points.push(CrashPoint::BeforeAppend(rerun.unwrap_or(second)));
    Ok(Crashes { points, journal, rerun, reconciled })
}

/// The summary of the demo's run `outcome` on `target`, checked against the crash-free
/// `reference` run.
fn summary_of(
    outcome: &Outcome,
    reference: &Outcome,
    target: &LogConfig,
    started: Instant,
    idempotency: bool,
    external: ExternalReport,
) -> Summary {
    Summary {
        backend: outcome.backend,
        data: target.to_string(),
        inputs: outcome.inputs,
        actions: outcome.ledger.executed + outcome.reused,
        executed: outcome.ledger.executed,
        reused: outcome.reused,
        resumed: outcome.resumed,
        reexecuted: outcome.ledger.reexecuted.clone(),
        durable_calls_executed: outcome.ledger.calls_executed,
        durable_calls_replayed: outcome.ledger.calls_replayed,
        durable_calls_reconciled: outcome.ledger.calls_reconciled,
        crashes: outcome.crashes,
        restores: outcome.restores,
        checkpoints: outcome.checkpoints,
        rebuild_ms: (outcome.rebuild_time.as_secs_f64() * 1e5).round() / 100.0,
        rebuilds: outcome.rebuilds,
        rebuild_records: outcome.rebuild_records,
        duplicate_side_effects: outcome.ledger.duplicates(),
        lost_acknowledged: outcome.lost_acknowledged,
        matches_crash_free_run: outcome.results == reference.results && outcome.memory == reference.memory,
        idempotency,
        external_requests: external.requests,
        external_effects: external.effects,
        external_deduplicated: external.deduplicated,
        external_duplicates: external.duplicates,
        external_lookups: external.lookups,
        waits: Waits {
            made: outcome.waits.made,
            resolved: outcome.waits.resolved,
            rejected: outcome.waits.rejected,
            timed_out: outcome.waits.timed_out,
            resumed: outcome.waits.resumed,
            delivered_twice: outcome.waits.delivered_twice,
            lost: outcome.waits.lost,
        },
        elapsed_ms: (started.elapsed().as_secs_f64() * 1e5).round() / 100.0,
    }
}

/// What the demo set out to show and the run did not: its planned crashes and restores, a
/// resume from a journal, a call run again and one reconciled when they were planned, and
/// reuse after a restore. A run that matched the crash-free one without them proves nothing
/// about recovery.
fn missed_plan(s: &Summary, crashes: &Crashes) -> Vec<String> {
    let planned_crashes = crashes.points.len() as u64;
    let mut missed = Vec::new();
    // A call that ran again reached the service twice: deduplicated with a key, applied
    // twice without one.
    if crashes.rerun.is_some() && s.external_deduplicated + s.external_duplicates == 0 {
        missed.push("a crash was placed to make a call run again, and none did".to_owned());
    }
    if crashes.reconciled.is_some() && (s.durable_calls_reconciled == 0 || s.external_lookups == 0) {
        missed.push("a crash was placed to reconcile a call, and none was".to_owned());
    }
    if s.crashes < planned_crashes {
        missed.push(format!("{planned_crashes} crashes were planned, {} took place", s.crashes));
    }
    if s.restores < s.crashes.max(1) {
        missed.push(format!("{} crashes but {} restores", s.crashes, s.restores));
    }
    if crashes.journal.is_some() && s.resumed == 0 {
        missed.push("a crash was placed to resume an action from its journal, and none resumed".to_owned());
    }
    if s.reused == 0 {
        missed.push("no completed action was reused after a restore".to_owned());
    }
    if s.waits.made == 0 || s.waits.resumed == 0 {
        missed.push(format!(
            "{} approvals waited for and {} resumed: the run showed no wait",
            s.waits.made, s.waits.resumed
        ));
    }
    missed
}

fn print_summary(s: &Summary) {
    outln!("actionstate demo — {} backend, data in {}", s.backend, s.data);
    outln!();
    outln!("  inputs processed            {}", s.inputs);
    outln!("  actions                     {} ({} executed, {} reused)", s.actions, s.executed, s.reused);
    outln!("  resumed from journal        {}", s.resumed);
    if s.reexecuted.is_empty() {
        outln!("  re-executed                 0");
    } else {
        let by: Vec<String> = s.reexecuted.iter().map(|(r, n)| format!("{n} {r}")).collect();
        outln!("  re-executed                 {}", by.join(", "));
    }
    outln!(
        "  durable calls               {} executed, {} replayed",
        s.durable_calls_executed,
        s.durable_calls_replayed
    );
    outln!("  crashes / restores          {} / {}", s.crashes, s.restores);
    outln!("  checkpoints                 {}", s.checkpoints);
    outln!(
        "  rebuild                     {} records in {:.1} ms ({} rebuilds: every attempt's store takes its epoch)",
        s.rebuild_records,
        s.rebuild_ms,
        s.rebuilds
    );
    outln!("  reconciled                  {} (asked the service about the call's key)", s.durable_calls_reconciled);
    outln!(
        "  external service            {} requests, {} effects, {} deduplicated by key ({})",
        s.external_requests,
        s.external_effects,
        s.external_deduplicated,
        if s.idempotency { "idempotency keys sent" } else { "no idempotency keys: --no-idempotency" }
    );
    let w = &s.waits;
    outln!(
        "  approvals waited for        {} ({} approved, {} rejected, {} timed out; {} resumed)",
        w.made,
        w.resolved,
        w.rejected,
        w.timed_out,
        w.resumed
    );
    outln!("  approvals twice / lost      {} / {}", w.delivered_twice, w.lost);
    outln!("  duplicate external effects  {}", s.external_duplicates);
    outln!("  duplicate side effects      {}", s.duplicate_side_effects);
    outln!("  acknowledged states lost    {}", s.lost_acknowledged);
    outln!("  matches a crash-free run    {}", if s.matches_crash_free_run { "yes" } else { "NO" });
    outln!();
    outln!("  inspect it: actionstate inspect --log {}", crate::shell_word(&s.data));
}
