//! The crash campaign: seeded runs of the simulated agent with 1–3 crashes at random points —
//! between any two store operations, after a side effect before its persist (`BeforeAppend`),
//! between an append and its acknowledgement (`AfterAppend`) — each followed by a restore
//! (from the latest or an older checkpoint, sometimes with another number of owners) and a
//! replay to the end.
//!
//! After every run: no action or durable call whose completion was acknowledged before a
//! crash executed again, no acknowledged completion is missing from the log, and the final
//! outputs and memory equal those of the crash-free run.
//!
//! The zombie campaign (`zombie_campaign_on_*`) lets each crashed attempt run on for 1–4
//! rounds after the next restore, as a writer presumed dead does: then, as seen by the
//! surviving attempts, still no acknowledged effect ran twice and none was lost, no record
//! the zombie appended after the restore's fence is replayed by a rebuild of a retained
//! checkpoint, and every zombie store's next snapshot failed with `Fenced`.
//!
//! `ACTIONSTATE_CAMPAIGN_RUNS` sets the number of runs per backend (default 500 on file, 300 in
//! memory). The Kafka campaign runs on the broker the environment names (see
//! `Backend::bootstrap`), each run on a fresh topic; it defaults to 20 runs and
//! takes its count from `ACTIONSTATE_CAMPAIGN_RUNS_KAFKA` only;
//! `ACTIONSTATE_CAMPAIGN_SEED` runs that one seed only, printing what it did;
//! `ACTIONSTATE_CAMPAIGN_JOBS` sets how many runs are in flight at once (default 4).

use actionstate_sim::{CrashPoint, Outcome, RestoreFrom, RunPlan, SimConfig};
use actionstate_tests::{Backend, Rng, reference, run};
use std::time::{Duration, Instant};

fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(value.trim().parse().unwrap_or_else(|_| panic!("{name}={value:?} is not a number")))
}

/// One seeded run: what to simulate and how it crashes.
#[derive(Clone, Debug)]
struct Case {
    seed: u64,
    config: SimConfig,
    plan: RunPlan,
}

/// The configuration of run `seed`. File runs use fewer inputs: every append is fsynced; so do
/// Kafka runs: every append waits for the broker's acknowledgement.
fn config(backend: Backend, seed: u64) -> SimConfig {
    let mut rng = Rng::new(seed);
    let inputs = match backend {
        Backend::File | Backend::Kafka | Backend::Fluss => 10,
        Backend::Memory => rng.range(16, 24) as usize,
    };
    SimConfig {
        seed,
        // Four keys or more split among two owners (keys 0-2 fall to the second owner).
        keys: rng.range(3, 6) as u32,
        inputs,
        checkpoint_every: rng.range(2, 4) as usize,
        abort_every: rng.pick(&[0, 2, 3]),
        owners: rng.range(1, 2) as u32,
        reconcile: rng.range(0, 1) == 1,
        // Some runs' rounds ask for approvals, which the actions wait for durably.
        approval_every: rng.pick(&[0, 2, 3]),
    }
}

/// The crashes and restore policy of run `seed`, over a run whose crash-free version counts
/// `operations` store operations and `appends` appends.
fn plan(seed: u64, operations: u64, appends: u64, zombies: bool) -> RunPlan {
    let mut rng = Rng::new(seed ^ 0xc4a5_4e5f);
    let n = rng.range(1, 3) as usize;
    let mut crashes = Vec::with_capacity(n);
    while crashes.len() < n {
        // Anywhere up to a little past the crash-free counts (replays after a crash add
        // operations), and now and then right at the start, where the first checkpoint is.
        let early = rng.range(0, 7) == 0;
        let kind = rng.range(0, 2);
        let total = if kind == 0 { operations } else { appends };
        let n = if early { rng.range(1, 12) } else { rng.range(1, total + total / 4) };
        let point = match kind {
            0 => CrashPoint::BeforeOperation(n),
            1 => CrashPoint::BeforeAppend(n),
            _ => CrashPoint::AfterAppend(n),
        };
        if !crashes.contains(&point) {
            crashes.push(point);
        }
    }
    crashes.sort();
    let policies = [RestoreFrom::Latest, RestoreFrom::Latest, RestoreFrom::Back(1), RestoreFrom::Back(2)];
    let restore_from: Vec<RestoreFrom> = (0..n).map(|_| rng.pick(&policies)).collect();
    let owners_after_restore = match rng.range(0, 4) {
        0 | 1 => Vec::new(),
        2 => vec![rng.range(1, 3) as u32],
        _ => (0..n).map(|_| rng.range(1, 3) as u32).collect(),
    };
    let zombie_rounds = if zombies { (0..n).map(|_| rng.range(1, 4)).collect() } else { Vec::new() };
    RunPlan { crashes, restore_from, owners_after_restore, change: None, truncate_after_restore: None, zombie_rounds }
}

/// Totals over a campaign.
#[derive(Debug, Default)]
struct Totals {
    runs: u64,
    crashes: u64,
    restores: u64,
    rescaled: u64,
    reused: u64,
    resumed: u64,
    calls_replayed: u64,
    calls_reconciled: u64,
    duplicates: u64,
    lost: u64,
    zombies: u64,
    zombie_effects: u64,
    zombie_appends: u64,
    zombie_replayed: u64,
    waits: u64,
    waits_resumed: u64,
}

impl Totals {
    fn add(&mut self, case: &Case, o: &Outcome) {
        self.runs += 1;
        self.crashes += o.crashes;
        self.restores += o.restores;
        self.rescaled +=
            u64::from(o.restores > 0 && case.plan.owners_after_restore.iter().any(|n| *n != case.config.owners));
        self.reused += o.reused;
        self.resumed += o.resumed;
        self.calls_replayed += o.ledger.calls_replayed;
        self.calls_reconciled += o.ledger.calls_reconciled;
        self.duplicates += o.ledger.duplicates();
        self.lost += o.lost_acknowledged;
        self.zombies += o.zombies;
        self.zombie_effects += o.ledger.zombie_effects;
        self.zombie_appends += o.zombie_appends;
        self.zombie_replayed += o.zombie_appends_replayed;
        self.waits += o.waits.made;
        self.waits_resumed += o.waits.resumed;
    }
}

/// Runs one seed: the crash-free reference in memory, then the crashing run on `backend`.
/// Returns the case, its outcome, and what went wrong.
async fn one(backend: Backend, seed: u64, zombies: bool) -> (Case, Option<Outcome>, Vec<String>) {
    let config = config(backend, seed);
    let clean = reference(Backend::Memory, &config, None).await.unwrap();
    let case = Case { seed, plan: plan(seed, clean.operations, clean.appends, zombies), config };
    let outcome = match run(backend, &case.config, &case.plan).await {
        Ok(o) => o,
        Err(e) => return (case, None, vec![format!("the run failed: {e}")]),
    };
    let mut problems = Vec::new();
    let l = &outcome.ledger;
    if l.duplicate_actions != 0 {
        problems.push(format!("{} acknowledged actions executed again", l.duplicate_actions));
    }
    if l.duplicate_calls != 0 {
        problems.push(format!("{} acknowledged durable calls executed again", l.duplicate_calls));
    }
    if outcome.lost_acknowledged != 0 {
        problems.push(format!("{} acknowledged completions lost", outcome.lost_acknowledged));
    }
    if outcome.results != clean.results {
        let differ = clean.results.iter().filter(|(k, v)| outcome.results.get(*k) != Some(*v)).count();
        problems.push(format!("outputs differ from the crash-free run in {differ} rounds"));
    }
    if outcome.memory != clean.memory {
        problems.push("memory differs from the crash-free run".into());
    }
    if outcome.waits.delivered_twice != 0 || outcome.waits.lost != 0 {
        problems.push(format!(
            "wait outcomes delivered twice: {}, lost: {}",
            outcome.waits.delivered_twice, outcome.waits.lost
        ));
    }
    if outcome.zombie_appends_replayed != 0 {
        problems.push(format!("{} records of zombies replayed", outcome.zombie_appends_replayed));
    }
    let zombie_stores = outcome.zombies_fenced;
    if outcome.zombies > 0 && zombie_stores < outcome.zombies {
        problems.push(format!("{} zombies, only {zombie_stores} zombie stores fenced", outcome.zombies));
    }
    if outcome.crashes != outcome.crashed_at.len() as u64 || outcome.crashes > case.plan.crashes.len() as u64 {
        problems.push(format!("{} crashes fired for {} points", outcome.crashes, case.plan.crashes.len()));
    }
    (case, Some(outcome), problems)
}

// Long: the campaign's loop over runs and its checks of each run read as one scenario.
async fn campaign(backend: Backend, default_runs: u64, first_seed: u64, zombies: bool) {
    let started = Instant::now();
    let single = env_u64("ACTIONSTATE_CAMPAIGN_SEED");
    let seeds: Vec<u64> = match single {
        Some(seed) => vec![seed],
        None => {
            let runs = match backend {
                Backend::Kafka | Backend::Fluss => env_u64("ACTIONSTATE_CAMPAIGN_RUNS_KAFKA"),
                Backend::File | Backend::Memory => env_u64("ACTIONSTATE_CAMPAIGN_RUNS"),
            };
            let runs = runs.unwrap_or(default_runs);
            (first_seed..first_seed + runs).collect()
        }
    };
    let jobs = env_u64("ACTIONSTATE_CAMPAIGN_JOBS").unwrap_or(4).max(1) as usize;
    let mut totals = Totals::default();
    let mut failures = Vec::new();
    let mut pending = seeds.into_iter();
    let mut set = tokio::task::JoinSet::new();
    loop {
        while set.len() < jobs
            && let Some(seed) = pending.next()
        {
            set.spawn(one(backend, seed, zombies));
        }
        let Some(joined) = set.join_next().await else { break };
        let (case, outcome, problems) = joined.unwrap();
        if let Some(o) = &outcome {
            totals.add(&case, o);
            if single.is_some() {
                println!(
                    "seed {}: config {:?}\n  plan {:?}\n  crashes {} at inputs {:?}, restored from {:?}, reused {}, \
                     resumed {}, executed {}, calls executed {} replayed {} reconciled {}",
                    case.seed,
                    case.config,
                    case.plan,
                    o.crashes,
                    o.crashed_at,
                    o.restored_from,
                    o.reused,
                    o.resumed,
                    o.ledger.executed,
                    o.ledger.calls_executed,
                    o.ledger.calls_replayed,
                    o.ledger.calls_reconciled
                );
            }
        }
        if !problems.is_empty() {
            let at = outcome.as_ref().map(|o| format!(" (crashed at inputs {:?})", o.crashed_at)).unwrap_or_default();
            failures.push(format!(
                "campaign backend={} seed={}: {}\n  config: {:?}\n  crash points: {:?}{at}\n  restore: {:?}, owners \
                 after restore: {:?}\n  replay: ACTIONSTATE_CAMPAIGN_SEED={} cargo test -p actionstate-tests --test all \
                 campaign::crash_campaign_on_{} -- --nocapture",
                backend.name(),
                case.seed,
                problems.join("; "),
                case.config,
                case.plan.crashes,
                case.plan.restore_from,
                case.plan.owners_after_restore,
                case.seed,
                backend.name()
            ));
        }
    }
    let elapsed: Duration = started.elapsed();
    println!(
        "{} backend={} runs={} crashes={} restores={} rescaled={} reused={} resumed={} calls_replayed={} \
         calls_reconciled={} duplicates={} lost={} zombies={} zombie_effects={} zombie_appends={} \
         zombie_appends_replayed={} waits={} waits_resumed={} failures={} time={:.1}s",
        if zombies { "zombie-campaign" } else { "campaign" },
        backend.name(),
        totals.runs,
        totals.crashes,
        totals.restores,
        totals.rescaled,
        totals.reused,
        totals.resumed,
        totals.calls_replayed,
        totals.calls_reconciled,
        totals.duplicates,
        totals.lost,
        totals.zombies,
        totals.zombie_effects,
        totals.zombie_appends,
        totals.zombie_replayed,
        totals.waits,
        totals.waits_resumed,
        failures.len(),
        elapsed.as_secs_f64()
    );
    for f in &failures {
        println!("{f}");
    }
    assert!(
        failures.is_empty(),
        "{} of {} campaign runs failed (all printed above); the first:\n{}",
        failures.len(),
        totals.runs,
        failures[0]
    );
    if single.is_none() && totals.runs >= 100 {
        // The campaign must actually crash, restore, resume and reconcile, or it proves nothing.
        assert!(totals.crashes >= totals.runs, "only {} crashes in {} runs", totals.crashes, totals.runs);
        assert!(totals.reused > 0 && totals.resumed > 0 && totals.calls_replayed > 0 && totals.calls_reconciled > 0);
        assert!(totals.waits > 0 && totals.waits_resumed > 0, "no run waited: {totals:?}");
    }
    if zombies && single.is_none() {
        // Zombies must have run and written after their fence, or the campaign proves nothing.
        assert!(
            totals.zombies > 0 && totals.zombie_appends > 0,
            "zombies {} appends {}",
            totals.zombies,
            totals.zombie_appends
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_campaign_on_file() {
    campaign(Backend::File, 500, 0, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_campaign_on_memory() {
    campaign(Backend::Memory, 300, 1_000_000, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_campaign_on_kafka() {
    if Backend::Kafka.available("campaign") {
        campaign(Backend::Kafka, 20, 2_000_000, false).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zombie_campaign_on_memory() {
    campaign(Backend::Memory, 200, 3_000_000, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zombie_campaign_on_file() {
    campaign(Backend::File, 100, 4_000_000, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zombie_campaign_on_kafka() {
    if Backend::Kafka.available("zombie campaign") {
        campaign(Backend::Kafka, 10, 5_000_000, true).await;
    }
}
