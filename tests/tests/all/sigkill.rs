//! Process crashes: the simulated agent runs in a child process (`sim-child`) that is killed
//! with SIGKILL at a random moment — while it opens the log, rebuilds, processes rounds,
//! writes checkpoints — and started again, restoring from the newest checkpoint it completed
//! and replaying the inputs, until one child gets through the whole input source. A quarter
//! of the kills land a random few milliseconds after the spawn, the others a random delay
//! after the child recorded its first ledger entry, so they hit the start-up as well as
//! every stage of the work whatever the machine's speed. After 8 kills in one run the next
//! child is left to finish. Each run uses a fresh log (a directory, or a topic) and a fresh
//! state directory; runs continue until enough children were actually killed.
//!
//! The child records every side effect in a ledger journal as it happens (an action body or
//! a durable call about to run, a completion or a call result acknowledged, a round's
//! outputs), and every completed checkpoint atomically (see `actionstate_sim::RunDir`). After
//! each run: no action or durable call whose completion or result had been acknowledged
//! executed again, no acknowledged completion is missing from the log, and the outputs of
//! every round and the final memory equal those of a crash-free run in memory. In some runs
//! rounds wait for approvals: a kill strikes while they wait, before and after they are
//! approved, and the next child hands their tokens out again to its approver and takes its
//! clock up where its checkpoint left it; every approval ends as in the crash-free run (its
//! outcome is in the final memory) and no waiting action completes twice. The approver is
//! another process (`sim-approver`), which the children hand their tokens to through the run's
//! inbox: on Kafka and Fluss it runs beside them and answers through resolve requests in the
//! log, which the children poll for; on a data directory, which one process holds, a child
//! whose approval is due and unanswered stops (exit code 3), the approver appends its resolve
//! requests while no child holds the directory, and the next child's restore records them.
//!
//! The agent's durable calls go to a local HTTP service (`actionstate_sim::external`), one per
//! run, started by this process, so it outlives the children: it deduplicates by the calls'
//! idempotency keys and answers the reconciler's questions about them, and after each run it
//! must have applied no effect twice for one logical call (the calls a kill made run again
//! were deduplicated or reconciled).
//!
//! `ACTIONSTATE_SIM_KILLS` sets the number of kills on the file backend (default 50),
//! `ACTIONSTATE_SIM_KILLS_KAFKA` on Kafka (default 20), `ACTIONSTATE_SIM_KILLS_FLUSS` on Fluss
//! (default 10); `ACTIONSTATE_SIM_KILL_SEED` the seed of
//! the run configurations and kill delays. The Kafka variant runs on the broker the
//! environment names (see `actionstate_tests::Backend::bootstrap`).
//!
//! With the `cluster-fault-tests` feature, `sim_survives_sigkill_and_a_broker_kill_on_kafka3`
//! runs the campaign on the three-node cluster of `cargo xtask services up kafka3` (topics
//! replicated three times) and kills a broker too: the leader of the run's partition 0, a few
//! seconds into the campaign, started again once another node leads that partition. Runs go
//! on until at least one broker was killed and back in sync. `ACTIONSTATE_SIM_KILLS_KAFKA3`
//! sets the agent kills (default 6), `ACTIONSTATE_SIM_BROKER_KILLS` the broker kills
//! (default 1). `sim_survives_sigkill_and_a_tablet_server_kill_on_fluss3` does the same on
//! the three-server Fluss cluster of `cargo xtask services up fluss3`, killing the tablet
//! server that leads bucket 0: `ACTIONSTATE_SIM_KILLS_FLUSS3` agent kills (default 6),
//! `ACTIONSTATE_SIM_TABLET_KILLS` tablet server kills (default 1).

use actionstate_fluss::{FlussConfig, FlussLog};
use actionstate_kafka::{KafkaConfig, KafkaLog};
use actionstate_recovery::LogConfig;
use actionstate_sim::chaos::Cluster;
use actionstate_sim::external::{ExternalReport, ExternalService};
use actionstate_sim::{Ledger, LogSource, RunDir, Sim, SimConfig};
use actionstate_tests::fluss3::Fluss3;
use actionstate_tests::kafka3::Kafka3;
use actionstate_tests::{Backend, ChildArgs, PARTITIONS, Rng, reference};
use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(value.trim().parse().unwrap_or_else(|_| panic!("{name}={value:?} is not a number")))
}

/// Kills per run at most; the child after the last one runs to the end.
const MAX_KILLS_PER_RUN: u64 = 8;
/// Longest a child may take before it counts as hung.
const CHILD_TIMEOUT: Duration = Duration::from_secs(120);

/// A campaign's backend and kill timing.
#[derive(Clone, Copy, Debug)]
struct Target {
    backend: Backend,
    /// One kill in four lands this many milliseconds after the spawn, often while the child
    /// still opens the log or rebuilds (a few milliseconds on file; a few hundred on Kafka,
    /// with its clients, metadata requests and reads).
    early_ms: (u64, u64),
    /// The others land this many milliseconds after the child recorded its first ledger
    /// entry, while it replays and processes inputs (some 30 ms per input on file, where
    /// every append is fsynced, and some 8 ms on Kafka).
    working_ms: (u64, u64),
    /// Inputs per run.
    inputs: usize,
    /// Kafka and Fluss: run on the three-node cluster (kafka3, fluss3) and kill its servers
    /// as well (see [`ServerKiller`]).
    broker_kills: u64,
}

/// The configuration of run `seed`, varied like the in-process campaign's.
fn config(target: Target, seed: u64) -> SimConfig {
    let mut rng = Rng::new(seed);
    SimConfig {
        seed,
        keys: rng.range(3, 6) as u32,
        inputs: target.inputs,
        checkpoint_every: rng.range(2, 4) as usize,
        abort_every: rng.pick(&[0, 2, 3]),
        owners: rng.range(1, 2) as u32,
        reconcile: rng.range(0, 1) == 1,
        // Some runs' rounds wait for approvals: a kill strikes while they wait too, and the
        // next child hands the tokens out again to its approver.
        approval_every: rng.pick(&[0, 2, 3]),
    }
}

/// The approver of a run, in a process of its own: `follow` runs beside the children until
/// killed; otherwise it answers once and exits.
fn approver(args: &ChildArgs, root: &Path, follow: bool) -> Child {
    let err = std::fs::OpenOptions::new().create(true).append(true).open(root.join("approver.err")).unwrap();
    Command::new(env!("CARGO_BIN_EXE_sim-approver"))
        .arg(format!("inbox={}", ChildArgs::inbox(&args.state).display()))
        .arg(format!("log={}", args.log))
        .arg(format!("seed={}", args.config.seed))
        .arg(format!("mode={}", if follow { "follow" } else { "once" }))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()
        .unwrap()
}

/// An approver that runs beside the children, stopped when the run ends however it ends.
struct Follower(Child);

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The most children of one run that may stop for the approver (each answers at least one
/// approval; a run has far fewer).
const MAX_APPROVER_STOPS: u64 = 400;

fn spawn(args: &ChildArgs, root: &Path) -> Child {
    let out = std::fs::File::create(root.join(format!("child-{}.out", args.attempt))).unwrap();
    let err = std::fs::File::create(root.join(format!("child-{}.err", args.attempt))).unwrap();
    Command::new(env!("CARGO_BIN_EXE_sim-child"))
        .args(args.to_args())
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .unwrap()
}

/// Waits up to `limit` for `child` to exit on its own or for the file at `grows` to grow
/// beyond `from` bytes; `Some` if the child exited.
async fn wait_until(child: &mut Child, limit: Duration, grows: &Path, from: u64) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() >= deadline || std::fs::metadata(grows).is_ok_and(|m| m.len() > from) {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Waits up to `limit` for `child` to exit on its own.
async fn wait_for(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// What one run observed.
#[derive(Debug, Default)]
struct RunReport {
    kills: u64,
    /// Children that stopped for the approver (a data directory: it answers while none runs).
    approver_stops: u64,
    /// Approvals the run's rounds waited for: each ended as in the crash-free run (its outcome
    /// is in the final memory, which must equal that run's).
    approvals: u64,
    /// Kills of children that had not recorded anything yet (opening the log, rebuilding).
    kills_before_work: u64,
    /// Children that failed with a retryable error of the log while brokers were being killed
    /// (restarted, as the runtime restarts a failed task).
    transient_failures: u64,
    children: u64,
    duplicates: u64,
    lost: u64,
    /// What the run's external service saw.
    external: ExternalReport,
    executed: u64,
    reexecuted: BTreeMap<String, u64>,
    problems: Vec<String>,
}

async fn lost<S: LogSource>(source: S, config: &SimConfig, ledger: &Ledger, dir: &RunDir) -> u64 {
    Sim::new(source, config.clone()).acknowledged_missing(ledger, dir).await.unwrap()
}

/// One run: children killed at random moments until one finishes, then the checks.
/// `open` is where the parent reopens the run's log: the log `log` names.
// Long: the kill loop and the final checks of one run share its state, read top to bottom.
async fn one_run(target: Target, seed: u64, rng: &mut Rng, log: String, root: &Path, open: LogConfig) -> RunReport {
    let config = config(target, seed);
    let state = root.join("state");
    let dir = RunDir::new(&state).unwrap();
    let mut report = RunReport::default();
    let mut killed_attempts = Vec::new();
    // Those of them that failed with a retryable error of the log rather than being killed.
    let mut transient_attempts = Vec::new();
    // The outside world of this run, which outlives its children.
    let service = ExternalService::start().await.unwrap();
    let outside_approver = config.approval_every > 0;
    let on_file = log.starts_with("file:");
    let template = ChildArgs {
        state: state.clone(),
        attempt: 0,
        log: log.clone(),
        config: config.clone(),
        external: Some(service.url()),
        outside_approver,
    };
    // Beside the children on a server log; between them on a data directory.
    let mut following = (outside_approver && !on_file).then(|| Follower(approver(&template, root, true)));
    for attempt in 0.. {
        let args = ChildArgs { attempt, ..template.clone() };
        let journal_len = std::fs::metadata(dir.journal_path()).map_or(0, |m| m.len());
        let mut child = spawn(&args, root);
        report.children += 1;
        let kill = report.kills < MAX_KILLS_PER_RUN;
        let exited = if !kill {
            wait_for(&mut child, CHILD_TIMEOUT).await
        } else if rng.range(0, 3) == 0 {
            wait_for(&mut child, Duration::from_millis(rng.range(target.early_ms.0, target.early_ms.1))).await
        } else {
            let delay = Duration::from_millis(rng.range(target.working_ms.0, target.working_ms.1));
            match wait_until(&mut child, CHILD_TIMEOUT, &dir.journal_path(), journal_len).await {
                Some(status) => Some(status),
                None if std::fs::metadata(dir.journal_path()).is_ok_and(|m| m.len() > journal_len) => {
                    wait_for(&mut child, delay).await
                }
                None => {
                    child.kill().unwrap();
                    child.wait().unwrap();
                    panic!("run seed={seed}: child {attempt} recorded nothing for {CHILD_TIMEOUT:?}");
                }
            }
        };
        let status = match exited {
            Some(status) => status,
            None => {
                child.kill().unwrap(); // SIGKILL on unix
                child.wait().unwrap()
            }
        };
        if status.signal() == Some(9) {
            if !kill {
                let err = std::fs::read_to_string(root.join(format!("child-{attempt}.err"))).unwrap_or_default();
                let journal = std::fs::metadata(dir.journal_path()).map_or(0, |m| m.len());
                panic!(
                    "run seed={seed}: child {attempt} hung for {CHILD_TIMEOUT:?} and was killed (journal {journal_len} \
                     -> {journal} bytes meanwhile); its standard error:\n{}",
                    err.trim()
                );
            }
            report.kills += 1;
            killed_attempts.push(attempt);
            continue;
        }
        if status.code() == Some(3) && outside_approver && on_file {
            report.approver_stops += 1;
            let answered = approver(&args, root, false).wait().unwrap();
            if !answered.success() || report.approver_stops > MAX_APPROVER_STOPS {
                let err = std::fs::read_to_string(root.join("approver.err")).unwrap_or_default();
                report.problems.push(format!(
                    "the approver ({answered}) after {} stops: {}; state in {}",
                    report.approver_stops,
                    err.trim(),
                    root.display()
                ));
                return report;
            }
            continue;
        }
        if !status.success() {
            let err = std::fs::read_to_string(root.join(format!("child-{attempt}.err"))).unwrap_or_default();
            // While brokers are being killed, a child that failed with a retryable error of the
            // log is a task the runtime restarts from its checkpoint, as it restarts a killed one.
            if target.broker_kills > 0 && err.contains("[retryable]") {
                report.transient_failures += 1;
                killed_attempts.push(attempt);
                transient_attempts.push(attempt);
                // As a runtime backs off before it restarts a failed task.
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            report.problems.push(format!(
                "child {attempt} failed ({status}): {}; config {config:?}, killed attempts {killed_attempts:?}, \
                 state in {}",
                err.trim(),
                root.display()
            ));
            return report;
        }
        break;
    }
    if let Some(follower) = following.as_mut()
        && let Some(exited) = follower.0.try_wait().unwrap()
    {
        let err = std::fs::read_to_string(root.join("approver.err")).unwrap_or_default();
        report.problems.push(format!("the approver exited ({exited}) during the run: {}", err.trim()));
    }
    drop(following);
    let journal = dir.journal().unwrap();
    report.kills_before_work = killed_attempts
        .iter()
        .filter(|a| !transient_attempts.contains(a) && !journal.lines_per_attempt.contains_key(a))
        .count() as u64;
    let ledger = &journal.ledger;
    report.duplicates = ledger.duplicates();
    report.executed = ledger.executed;
    report.reexecuted = ledger.reexecuted.clone();
    report.lost = lost(open, &config, ledger, &dir).await;
    report.external = service.report();
    let clean = reference(Backend::Memory, &config, None).await.unwrap();
    let problems = &mut report.problems;
    if ledger.duplicate_actions != 0 {
        problems.push(format!("{} acknowledged actions executed again", ledger.duplicate_actions));
    }
    if ledger.duplicate_calls != 0 {
        problems.push(format!("{} acknowledged durable calls executed again", ledger.duplicate_calls));
    }
    if report.lost != 0 {
        problems.push(format!("{} acknowledged completions lost", report.lost));
    }
    if report.external.duplicates != 0 {
        problems.push(format!("the external service applied {} effects twice", report.external.duplicates));
    }
    // The agents record a call before they send it (a kill may fall in between), so the service
    // sees at most the calls they ran, and some.
    if report.external.requests > ledger.calls_executed || report.external.effects == 0 {
        problems.push(format!("the agents ran {} calls; the service saw {:?}", ledger.calls_executed, report.external));
    }
    if journal.cut {
        problems.push("the journal ends in a cut line after a child that finished".into());
    }
    if journal.results != clean.results {
        let differ = clean.results.iter().filter(|(k, v)| journal.results.get(*k) != Some(*v)).count();
        problems.push(format!("outputs differ from the crash-free run in {differ} rounds"));
    }
    report.approvals =
        clean.memory.values().flat_map(|m| m.keys()).filter(|p| p.starts_with("approval/")).count() as u64;
    match dir.final_memory().unwrap() {
        Some(memory) if memory == clean.memory => {}
        Some(_) => problems.push("memory differs from the crash-free run".into()),
        None => problems.push("the finishing child wrote no final memory".into()),
    }
    if !problems.is_empty() {
        problems.push(format!("config {config:?}, killed attempts {killed_attempts:?}, state in {}", root.display()));
    }
    report
}

/// Kills servers of a three-node cluster (kafka3's brokers, fluss3's tablet servers) while a
/// campaign runs on it: the leader of partition 0 of the run's topic or table, once every
/// replica of it is in sync; keeps it down until another node leads the partition (an election
/// happened), starts it again and waits until it is back in sync before the next kill.
struct ServerKiller {
    /// The URL of a run's topic or table on the cluster, from its name.
    url: fn(&str) -> String,
    /// The topic or table of the run in progress.
    topic: Arc<Mutex<Option<String>>>,
    stop: Arc<AtomicBool>,
    kills: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl ServerKiller {
    /// On kafka3: its topics, read through a read-only log.
    fn on_kafka3(wanted: u64) -> ServerKiller {
        let cluster = Kafka3::find().expect("the three-node Kafka cluster");
        let bootstrap = cluster.bootstrap().to_owned();
        let open = move |name: String| {
            let mut config = KafkaConfig::new(&bootstrap, &name, PARTITIONS);
            config.read_only = true;
            config.request_timeout = Duration::from_secs(10);
            async move { KafkaLog::open(config).await.ok() }
        };
        ServerKiller::start(cluster, wanted, open, |name| {
            let bootstrap = Kafka3::find().expect("the three-node Kafka cluster").bootstrap().to_owned();
            format!(
                "kafka://{bootstrap}/{name}?partitions={PARTITIONS}&replication={}&delivery_timeout=30s\
                 &read_stall_timeout=30s&request_timeout=30s",
                actionstate_tests::kafka3::NODES
            )
        })
    }

    /// On fluss3: its tables, read through a read-only log.
    fn on_fluss3(wanted: u64) -> ServerKiller {
        let cluster = Fluss3::find().expect("the three-server Fluss cluster");
        let bootstrap = cluster.bootstrap().to_owned();
        let open = move |name: String| {
            let mut config = FlussConfig::new(&bootstrap, actionstate_tests::FLUSS_DATABASE, &name, PARTITIONS);
            config.read_only = true;
            config.request_timeout = Duration::from_secs(10);
            async move { FlussLog::open(config).await.ok() }
        };
        ServerKiller::start(cluster, wanted, open, |name| {
            Fluss3::find().expect("the three-server Fluss cluster").table_url(name, PARTITIONS)
        })
    }

    fn start<L, C, O, F>(cluster: C, wanted: u64, open: O, url: fn(&str) -> String) -> ServerKiller
    where
        L: Send + Sync + 'static,
        C: Cluster<L> + 'static,
        O: Fn(String) -> F + Send + 'static,
        F: std::future::Future<Output = Option<L>> + Send,
    {
        let topic: Arc<Mutex<Option<String>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let kills = Arc::new(AtomicU64::new(0));
        let (t, s, k) = (Arc::clone(&topic), Arc::clone(&stop), Arc::clone(&kills));
        // The task owns the cluster: should it panic, dropping it starts the node it killed.
        let mut cluster = cluster;
        let task = tokio::spawn(async move {
            // Into the campaign first: children open, rebuild and work on the log.
            tokio::time::sleep(Duration::from_secs(3)).await;
            while !s.load(Ordering::Relaxed) && k.load(Ordering::Relaxed) < wanted {
                let Some(name) = t.lock().unwrap().clone() else {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                };
                // Absent until the run's first child created it.
                let Some(log) = open(name.clone()).await else {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                };
                let leader = cluster.leaders(&log).await.ok().and_then(|l| l.first().copied().flatten());
                let (Some(victim), Ok(true)) = (leader, cluster.in_sync(&log).await) else {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                };
                let killed_at = Instant::now();
                cluster.kill(victim).await.unwrap();
                eprintln!("sim-sigkill: server {victim}, leader of partition 0 of {name}, killed");
                // Down until another server leads: a partition without a leader (Fluss drops a
                // killed server from its metadata before it elects) is still down.
                while !matches!(
                    cluster.leaders(&log).await.ok().and_then(|l| l.first().copied().flatten()),
                    Some(leader) if leader != victim
                ) && killed_at.elapsed() < Duration::from_secs(60)
                {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                let elected = killed_at.elapsed();
                cluster.restart(victim).await.unwrap();
                let restarted = Instant::now();
                while !cluster.in_sync(&log).await.unwrap_or(false) {
                    assert!(
                        restarted.elapsed() < Duration::from_secs(120),
                        "server {victim} not back in sync in 120 s"
                    );
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                k.fetch_add(1, Ordering::Relaxed);
                eprintln!(
                    "sim-sigkill: another server led partition 0 {:.1}s after the kill; server {victim} restarted, \
                     back in sync {:.1}s later",
                    elected.as_secs_f64(),
                    restarted.elapsed().as_secs_f64()
                );
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        });
        ServerKiller { url, topic, stop, kills, task }
    }

    /// The URL of the run's topic or table `name`, which the next kill targets.
    fn run_on(&self, name: &str) -> String {
        *self.topic.lock().unwrap() = Some(name.to_owned());
        (self.url)(name)
    }

    fn kills(&self) -> u64 {
        self.kills.load(Ordering::Relaxed)
    }

    /// Stops killing (a kill in progress finishes: its server back in sync) and returns how many
    /// servers were killed.
    async fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.expect("the server killer");
        self.kills.load(Ordering::Relaxed)
    }
}

// Long: one campaign read top to bottom: its runs, their totals and the checks of the totals.
async fn sigkill_campaign(target: Target, kills: u64) {
    let started = Instant::now();
    let killer = (target.broker_kills > 0).then(|| match target.backend {
        Backend::Fluss => ServerKiller::on_fluss3(target.broker_kills),
        _ => ServerKiller::on_kafka3(target.broker_kills),
    });
    let seed = env_u64("ACTIONSTATE_SIM_KILL_SEED").unwrap_or(0x51_6b11);
    let mut rng = Rng::new(seed);
    let (mut runs, mut total_kills, mut before_work, mut children, mut duplicates, mut lost, mut executed) =
        (0u64, 0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    let mut reexecuted: BTreeMap<String, u64> = BTreeMap::new();
    let (mut transient, mut approvals, mut approver_stops) = (0u64, 0u64, 0u64);
    let mut external = ExternalReport::default();
    let mut failures = Vec::new();
    let mut kept = Vec::new();
    while total_kills < kills || killer.as_ref().is_some_and(|k| k.kills() < target.broker_kills) {
        let run_seed = seed.wrapping_add(runs);
        let root = tempfile::Builder::new().prefix("sim-sigkill-").tempdir().unwrap();
        let log = match target.backend {
            Backend::Kafka => {
                let topic = format!(
                    "actionstate-sim-sigkill-{}-{runs}-{}",
                    std::process::id(),
                    &uuid::Uuid::new_v4().simple().to_string()[..8]
                );
                match &killer {
                    Some(killer) => killer.run_on(&topic),
                    None => actionstate_tests::kafka_topic_url(Backend::Kafka.bootstrap().unwrap(), &topic, PARTITIONS),
                }
            }
            Backend::Fluss => {
                let table = format!(
                    "sim_sigkill_{}_{runs}_{}",
                    std::process::id(),
                    &uuid::Uuid::new_v4().simple().to_string()[..8]
                );
                match &killer {
                    Some(killer) => killer.run_on(&table),
                    None => actionstate_tests::fluss_table_url(Backend::Fluss.bootstrap().unwrap(), &table),
                }
            }
            _ => format!("file:{}?partitions={PARTITIONS}", root.path().join("log").display()),
        };
        let open = actionstate_tests::log_config(&log);
        let report = one_run(target, run_seed, &mut rng, log, root.path(), open).await;
        runs += 1;
        total_kills += report.kills;
        before_work += report.kills_before_work;
        transient += report.transient_failures;
        children += report.children;
        duplicates += report.duplicates;
        lost += report.lost;
        approvals += report.approvals;
        approver_stops += report.approver_stops;
        executed += report.executed;
        external.requests += report.external.requests;
        external.effects += report.external.effects;
        external.deduplicated += report.external.deduplicated;
        external.duplicates += report.external.duplicates;
        external.lookups += report.external.lookups;
        for (reason, n) in &report.reexecuted {
            *reexecuted.entry(reason.clone()).or_default() += n;
        }
        if !report.problems.is_empty() {
            failures.push(format!(
                "sim-sigkill backend={} run seed={run_seed} (ACTIONSTATE_SIM_KILL_SEED={seed}): {}",
                target.backend.name(),
                report.problems.join("; ")
            ));
            kept.push(root.keep());
        }
    }
    let broker_kills = match killer {
        Some(killer) => killer.finish().await,
        None => 0,
    };
    println!(
        "sim-sigkill backend={}{} runs={runs} children={children} kills={total_kills} kills_before_work={before_work} \
         broker_kills={broker_kills} transient_failures={transient} executed={executed} reexecuted={reexecuted:?} \
         duplicates={duplicates} lost={lost} approvals={approvals} approver_stops={approver_stops} \
         external_effects={} external_deduplicated={} \
         external_lookups={} \
         external_duplicates={} failures={} seed={seed:#x} time={:.1}s",
        target.backend.name(),
        match (target.broker_kills, target.backend) {
            (0, _) => "",
            (_, Backend::Fluss) => " (fluss3)",
            _ => " (kafka3)",
        },
        external.effects,
        external.deduplicated,
        external.lookups,
        external.duplicates,
        failures.len(),
        started.elapsed().as_secs_f64()
    );
    for f in &failures {
        println!("{f}");
    }
    assert!(
        failures.is_empty(),
        "{} of {runs} runs failed (all printed above); the first:\n{}",
        failures.len(),
        failures[0]
    );
    // The kills must land while children do work, not only while they start, or they prove little.
    assert!(total_kills > before_work, "all {total_kills} kills hit children before they did any work");
    assert!(broker_kills >= target.broker_kills, "{broker_kills} brokers killed, {} wanted", target.broker_kills);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sim_survives_sigkill_on_file() {
    let target =
        Target { backend: Backend::File, early_ms: (1, 25), working_ms: (0, 400), inputs: 24, broker_kills: 0 };
    sigkill_campaign(target, env_u64("ACTIONSTATE_SIM_KILLS").unwrap_or(50)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sim_survives_sigkill_on_fluss() {
    if Backend::Fluss.available("sim-sigkill") {
        let target =
            Target { backend: Backend::Fluss, early_ms: (5, 500), working_ms: (0, 600), inputs: 120, broker_kills: 0 };
        sigkill_campaign(target, env_u64("ACTIONSTATE_SIM_KILLS_FLUSS").unwrap_or(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sim_survives_sigkill_on_kafka() {
    if Backend::Kafka.available("sim-sigkill") {
        let target =
            Target { backend: Backend::Kafka, early_ms: (5, 500), working_ms: (0, 600), inputs: 120, broker_kills: 0 };
        sigkill_campaign(target, env_u64("ACTIONSTATE_SIM_KILLS_KAFKA").unwrap_or(20)).await;
    }
}

#[cfg(feature = "cluster-fault-tests")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sim_survives_sigkill_and_a_broker_kill_on_kafka3() {
    if Kafka3::require("sim-sigkill").is_none() {
        return;
    }
    let broker_kills = env_u64("ACTIONSTATE_SIM_BROKER_KILLS").unwrap_or(1).max(1);
    let target =
        Target { backend: Backend::Kafka, early_ms: (5, 500), working_ms: (0, 600), inputs: 120, broker_kills };
    sigkill_campaign(target, env_u64("ACTIONSTATE_SIM_KILLS_KAFKA3").unwrap_or(6)).await;
}

#[cfg(feature = "cluster-fault-tests")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sim_survives_sigkill_and_a_tablet_server_kill_on_fluss3() {
    if Fluss3::require("sim-sigkill").is_none() {
        return;
    }
    let server_kills = env_u64("ACTIONSTATE_SIM_TABLET_KILLS").unwrap_or(1).max(1);
    let target = Target {
        backend: Backend::Fluss,
        early_ms: (5, 500),
        working_ms: (0, 600),
        inputs: 120,
        broker_kills: server_kills,
    };
    sigkill_campaign(target, env_u64("ACTIONSTATE_SIM_KILLS_FLUSS3").unwrap_or(6)).await;
}
