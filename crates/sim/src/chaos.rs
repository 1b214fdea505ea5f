//! Scenarios that kill nodes of a replicated cluster while a store writes and rebuilds, and
//! count what they saw: [`leader_kills`] (the node leading the partitions written to dies,
//! again and again, also during a rebuild) and [`lost_quorum`] (two of three nodes die at
//! once, then one comes back).
//!
//! They drive any [`Cluster`]: something that says which node leads each partition of a log,
//! whether every replica is in sync, and kills and restarts nodes. The local three-node Kafka
//! cluster (`cargo xtask services up kafka3`) implements it in `actionstate_tests::kafka3`.
//! Each scenario returns its counts as a report instead of asserting, so that the same code
//! serves the tests (`tests/tests/all/kafka3.rs`, few kills, asserting that a report passed)
//! and `cargo xtask chaos kafka` (many kills, printing a [`ChaosReport`] as one JSON line).
//! Only what the scenario cannot go on from (a node that does not start again, replicas that
//! never get back in sync) panics.
//!
//! A further scenario is a function returning a report of its own (`Serialize`, with field
//! names unique in the JSON line) and a field `Option<ItsReport>` of [`ChaosReport`] with
//! `#[serde(flatten)]`, whose problems [`ChaosReport::problems`] lists. The plans and reports
//! are in `chaos_report.rs`, the zombie episodes in `chaos_zombie.rs`.

pub use crate::chaos_report::{ChaosReport, LeaderKillPlan, LeaderKillReport, LostQuorumReport, ZombieReport};
pub use crate::chaos_zombie::zombie_episodes;
use crate::faults::{self, MARGIN, Outcome, Put};
use actionstate_core::{ActionState, Error, StateKey, StateLog};
use actionstate_recovery::{ActionStateStore, CheckpointForm, Ownership, Snapshot, StoreConfig, StoreError, TwoPhase};
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A replicated cluster holding a log of type `L`, whose nodes (ids `0..nodes()`) a scenario
/// kills and starts again.
pub trait Cluster<L>: Send {
    /// How many nodes the cluster has.
    fn nodes(&self) -> usize;
    /// The node leading each partition of `log`, by partition, as the cluster reports it now
    /// (`None` for a partition without a leader).
    fn leaders(&self, log: &L) -> impl Future<Output = Result<Vec<Option<usize>>, String>> + Send;
    /// Whether every partition of `log` has a leader and every replica of it in sync, with
    /// every node running.
    fn in_sync(&self, log: &L) -> impl Future<Output = Result<bool, String>> + Send;
    /// Kills node `node` at once (SIGKILL: no shutdown) and returns once it is gone.
    fn kill(&mut self, node: usize) -> impl Future<Output = Result<(), String>> + Send;
    /// Starts the killed node `node` again on its data.
    fn restart(&mut self, node: usize) -> impl Future<Output = Result<(), String>> + Send;
}

/// Rounds every writer puts before the marker the rebuilds start from.
const EARLY_ROUNDS: u64 = 3;
/// Pause between two puts of one writer.
const PUT_PAUSE: Duration = Duration::from_millis(20);

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// `per_partition` writers (see [`faults::key`]) for each of `partitions` partitions.
fn writers(partitions: u32, per_partition: u32) -> Vec<u64> {
    let mut left: Vec<u32> = vec![per_partition; partitions as usize];
    let mut out = Vec::new();
    for k in 0.. {
        if left.iter().all(|n| *n == 0) {
            break;
        }
        let p = faults::key(k).partition(partitions) as usize;
        if left[p] > 0 {
            left[p] -= 1;
            out.push(k);
        }
    }
    out
}

/// Writers putting one round after another into a store, each put recorded as it ends.
struct Stream {
    puts: Arc<Mutex<Vec<Put>>>,
    stop: Arc<AtomicBool>,
    tasks: tokio::task::JoinSet<()>,
    partitions: u32,
}

impl Stream {
    fn start<L: StateLog + Send + Sync + 'static, C: CheckpointForm>(
        store: &Arc<ActionStateStore<L, C>>,
        writers: &[u64],
        first_seq: u64,
    ) -> Stream {
        let puts = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = tokio::task::JoinSet::new();
        for &k in writers {
            let (store, stop, puts) = (Arc::clone(store), Arc::clone(&stop), Arc::clone(&puts));
            tasks.spawn(async move {
                let mut seq = first_seq;
                while !stop.load(Ordering::Relaxed) {
                    let p = faults::put(&store, k, seq).await;
                    puts.lock().push(p);
                    seq += 1;
                    tokio::time::sleep(PUT_PAUSE).await;
                }
            });
        }
        Stream { puts, stop, tasks, partitions: store.log().identity().partitions }
    }

    /// Waits until every partition has acknowledged a put begun at or after `since`, and
    /// returns how long after `since` the last of them was acknowledged; `Err` naming the
    /// partitions still failing after `limit`.
    async fn resumed(&self, since: Instant, limit: Duration) -> Result<Duration, String> {
        loop {
            let mut first: Vec<Option<Instant>> = vec![None; self.partitions as usize];
            for p in self.puts.lock().iter().filter(|p| p.at >= since && p.acked()) {
                let at = &mut first[p.state.key.key.partition(self.partitions) as usize];
                let done = p.at + p.took;
                if at.is_none_or(|t| done < t) {
                    *at = Some(done);
                }
            }
            if first.iter().all(Option::is_some) {
                return Ok(first.into_iter().flatten().max().map_or(Duration::ZERO, |t| t - since));
            }
            if since.elapsed() > limit {
                let failing: Vec<usize> = (0..first.len()).filter(|p| first[*p].is_none()).collect();
                return Err(format!("partitions {failing:?} acknowledged no put within {limit:?}"));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Stops the writers and returns every put, in the order they ended.
    async fn finish(mut self) -> Vec<Put> {
        self.stop.store(true, Ordering::Relaxed);
        while let Some(joined) = self.tasks.join_next().await {
            joined.expect("a putting task");
        }
        std::mem::take(&mut *self.puts.lock())
    }
}

/// Waits until every replica of `log` is in sync; how long that took. Panics after `limit`:
/// the next kill would find too few replicas to survive.
async fn wait_in_sync<L, C: Cluster<L>>(cluster: &C, log: &L, limit: Duration) -> Duration {
    let started = Instant::now();
    loop {
        let last = match cluster.in_sync(log).await {
            Ok(true) => return started.elapsed(),
            Ok(false) => "not every replica in sync".to_owned(),
            Err(e) => e,
        };
        assert!(started.elapsed() < limit, "the cluster was not back in sync within {limit:?}: {last}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The node leading the most partitions of `log` (the lowest id among equals), and those
/// partitions.
async fn busiest_leader<L, C: Cluster<L>>(cluster: &C, log: &L) -> (usize, Vec<u32>) {
    let leaders = cluster.leaders(log).await.unwrap_or_else(|e| panic!("asking the cluster for leaders: {e}"));
    let mut led: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
    for (p, leader) in (0u32..).zip(&leaders) {
        if let Some(node) = leader {
            led.entry(*node).or_default().push(p);
        }
    }
    let most = led.values().map(Vec::len).max().unwrap_or_else(|| panic!("no partition has a leader: {leaders:?}"));
    led.into_iter().find(|(_, ps)| ps.len() == most).expect("a busiest leader")
}

/// What the checks of a stream's puts found.
#[derive(Debug, Default)]
struct PutChecks {
    puts: u64,
    acked: u64,
    failed: u64,
    failed_indexed: u64,
    failed_late: u64,
    failed_terminal: u64,
    /// Acknowledged states not where they were acknowledged.
    lost: BTreeSet<StateKey>,
    problems: Vec<String>,
}

/// Checks every put of a stream against the writer's index and the log: a failed put failed
/// within the delivery timeout, retryably, and is not indexed; an acknowledged one is indexed
/// and its record is in the log where it was acknowledged.
async fn check_puts<L: StateLog, C: CheckpointForm>(
    store: &ActionStateStore<L, C>,
    puts: &[Put],
    delivery_timeout: Duration,
) -> PutChecks {
    let acked = puts.iter().filter(|p| p.acked()).count() as u64;
    let mut c = PutChecks { puts: puts.len() as u64, acked, failed: puts.len() as u64 - acked, ..PutChecks::default() };
    for p in puts.iter().filter(|p| !p.acked()) {
        let Outcome::Failed { error, retryable } = &p.outcome else { continue };
        let key = &p.state.key;
        if store.with_index(|i| i.get(key).is_some()) {
            c.failed_indexed += 1;
            c.problems.push(format!("failed put {key:?} is indexed ({error})"));
        }
        if p.took > delivery_timeout + MARGIN {
            c.failed_late += 1;
            c.problems.push(format!("a put failed only after {:?}: {error}", p.took));
        }
        if !retryable {
            c.failed_terminal += 1;
            c.problems.push(format!("a put failed with an error that is not retryable: {error}"));
        }
    }
    let stored = match faults::stored_records(store.log()).await {
        Ok(stored) => stored,
        Err(e) => {
            c.problems.push(format!("reading the log back failed: {e}"));
            return c;
        }
    };
    for p in puts.iter().filter(|p| p.acked()) {
        if let Err(e) = faults::check_acked(store, &stored, p) {
            c.lost.insert(p.state.key);
            c.problems.push(e);
        }
    }
    c
}

/// Opens the log afresh and restores a store on it from `snapshot`: what a restarting process
/// does. The writers' puts finish no round, so the snapshot completed none and the rebuild
/// starts from its marker alone. The states it holds, or the error.
async fn rebuild_from<L, F, Fut>(open: &F, snapshot: &Snapshot) -> Result<BTreeMap<StateKey, ActionState>, StoreError>
where
    L: StateLog,
    F: Fn() -> Fut,
    Fut: Future<Output = Result<L, Error>>,
{
    let from = std::slice::from_ref(snapshot);
    let (store, _) = ActionStateStore::restore(open().await?, StoreConfig::default(), &Ownership::All, from).await?;
    Ok(faults::indexed_states(&store))
}

/// What a scenario expects a rebuild to hold: every acknowledged state, and any of the failed
/// ones.
struct Expected<'a> {
    acked: HashMap<StateKey, &'a ActionState>,
    failed: HashMap<StateKey, &'a ActionState>,
}

impl<'a> Expected<'a> {
    fn new(early: &'a [ActionState], puts: &'a [Put]) -> Self {
        let mut acked: HashMap<StateKey, &ActionState> = early.iter().map(|s| (s.key, s)).collect();
        acked.extend(puts.iter().filter(|p| p.acked()).map(|p| (p.state.key, &p.state)));
        let failed = puts.iter().filter(|p| !p.acked()).map(|p| (p.state.key, &p.state)).collect();
        Expected { acked, failed }
    }

    /// Compares what a rebuild holds; adds acknowledged states it lacks to `lost`.
    fn check(&self, states: &BTreeMap<StateKey, ActionState>, lost: &mut BTreeSet<StateKey>) -> faults::RebuildCheck {
        let check = faults::compare_rebuilt(states, &self.acked, &self.failed);
        lost.extend(self.acked.keys().filter(|k| states.get(*k) != self.acked.get(*k).copied()).copied());
        check
    }
}

/// Kills, `plan.leader_kills` times, the node leading the most partitions of the log `open`
/// returns while writers put completed states into every partition through a store, waits
/// until every partition has acknowledged a put begun after the kill (the gap), starts the
/// node again and waits until every replica is back in sync before the next kill. Then checks
/// every put (an acknowledged one is indexed and in the log where acknowledged; a failed one
/// failed retryably within the delivery timeout and is not indexed) and rebuilds from a
/// marker taken before the first kill: the rebuild holds exactly the acknowledged states,
/// and failed ones only where their record landed all the same (counted). Last,
/// `plan.rebuild_kills` times, rebuilds from that marker on a freshly opened log and kills
/// the busiest leader a moment after the rebuild began (while it opens the log or reads):
/// the rebuild either completes with the same states, or fails with a retryable error and a
/// retry completes with them.
///
/// Progress goes to standard error; the counts come back as a report. Panics only when the
/// cluster cannot go on (a node that does not come back in sync within
/// `plan.in_sync_timeout`).
// Long: one chaos scenario read top to bottom: each kill, its waits and its counts work on the state of the put streams the kills before it left.
pub async fn leader_kills<C, L, F, Fut>(cluster: &mut C, open: F, plan: &LeaderKillPlan) -> LeaderKillReport
where
    C: Cluster<L>,
    L: StateLog + Send + Sync + 'static,
    F: Fn() -> Fut,
    Fut: Future<Output = Result<L, Error>>,
{
    let started = Instant::now();
    let mut report = LeaderKillReport::default();
    // Two-phase: the snapshot taken before the kills is what the rebuilds restore from.
    let store: Arc<ActionStateStore<L, TwoPhase>> =
        Arc::new(ActionStateStore::new_two_phase(open().await.expect("opening the log"), StoreConfig::default()));
    let partitions = store.log().identity().partitions;
    wait_in_sync(cluster, store.log(), plan.in_sync_timeout).await;
    let writers = writers(partitions, plan.writers_per_partition);
    let mut early = Vec::new();
    for seq in 0..EARLY_ROUNDS {
        for &k in &writers {
            let p = faults::put(&store, k, seq).await;
            assert!(p.acked(), "a put before any kill failed: {p:?}");
            early.push(p.state);
        }
    }
    let before = store.snapshot(1).await.expect("a snapshot before the first kill");

    let stream = Stream::start(&store, &writers, EARLY_ROUNDS);
    tokio::time::sleep(Duration::from_secs(1)).await;
    for n in 1..=plan.leader_kills {
        let (victim, led) = busiest_leader(cluster, store.log()).await;
        let killed_at = Instant::now();
        cluster.kill(victim).await.unwrap_or_else(|e| panic!("killing node {victim}: {e}"));
        report.leader_kills += 1;
        let resumed = stream.resumed(killed_at, plan.resume_timeout).await;
        match &resumed {
            Ok(gap) => {
                report.unavailable_ms.push(ms(*gap));
                eprintln!(
                    "leader kill {n}/{}: node {victim} (leading partitions {led:?}) killed; every partition \
                     acknowledged a put begun after the kill within {} ms",
                    plan.leader_kills,
                    ms(*gap)
                );
            }
            Err(e) => report.problems.push(format!("after leader kill {n} (node {victim}): {e}")),
        }
        // Puts go on without the node for a moment, then it comes back.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let restarted_at = Instant::now();
        cluster.restart(victim).await.unwrap_or_else(|e| panic!("restarting node {victim}: {e}"));
        let rejoined = wait_in_sync(cluster, store.log(), plan.in_sync_timeout).await;
        report.max_rejoin_ms = report.max_rejoin_ms.max(ms(restarted_at.elapsed()));
        eprintln!("node {victim} restarted and back in sync after {} ms", ms(rejoined));
        if resumed.is_err() {
            break;
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let puts = stream.finish().await;
    report.max_unavailable_ms = report.unavailable_ms.iter().copied().max().unwrap_or(0);

    let checks = check_puts(&store, &puts, plan.delivery_timeout).await;
    report.puts = checks.puts;
    report.acked = checks.acked;
    report.failed = checks.failed;
    report.failed_indexed = checks.failed_indexed;
    report.failed_late = checks.failed_late;
    report.failed_terminal = checks.failed_terminal;
    report.problems.extend(checks.problems);
    let mut lost = checks.lost;
    if report.failed == 0 && report.leader_kills > 0 {
        eprintln!("leader-kill: no put failed: every put outlived the elections within the delivery timeout");
    }

    let expected = Expected::new(&early, &puts);
    match rebuild_from(&open, &before).await {
        Ok(states) => {
            let check = expected.check(&states, &mut lost);
            report.landed_although_failed = check.landed_although_failed;
            report.rebuild_unexpected += check.unexpected;
            report.problems.extend(check.problems);
        }
        Err(e) => report.problems.push(format!("the rebuild after the kills failed: {e}")),
    }

    for n in 1..=plan.rebuild_kills {
        wait_in_sync(cluster, store.log(), plan.in_sync_timeout).await;
        let (victim, led) = busiest_leader(cluster, store.log()).await;
        // The kill lands a moment after the rebuild began: while it opens the log, asks for
        // the offsets or reads, depending on the delay.
        let delay = Duration::from_millis(20 + u64::from(n - 1) * 97 % 300);
        let finished = AtomicBool::new(false);
        let rebuild = async {
            let result = rebuild_from(&open, &before).await;
            finished.store(true, Ordering::Relaxed);
            result
        };
        let kill = async {
            tokio::time::sleep(delay).await;
            let mid_way = !finished.load(Ordering::Relaxed);
            cluster.kill(victim).await.unwrap_or_else(|e| panic!("killing node {victim}: {e}"));
            mid_way
        };
        let (mut result, mid_way) = tokio::join!(rebuild, kill);
        report.rebuild_kills += 1;
        report.rebuilds_killed_mid_way += u64::from(mid_way);
        let first = match &result {
            Ok(_) => "completed".to_owned(),
            Err(e) => format!("failed: {e}"),
        };
        if result.is_err() {
            report.rebuilds_failed += 1;
        }
        let retrying = Instant::now();
        let mut retries = 0;
        while let Err(e) = &result {
            if !e.is_retryable() {
                report.problems.push(format!("a rebuild a kill interrupted failed with a terminal error: {e}"));
                break;
            }
            if retrying.elapsed() > plan.resume_timeout {
                report.problems.push(format!("no rebuild succeeded within {:?} of a kill: {e}", plan.resume_timeout));
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            retries += 1;
            result = rebuild_from(&open, &before).await;
        }
        if let Ok(states) = &result {
            let check = expected.check(states, &mut lost);
            report.rebuild_unexpected += check.unexpected;
            report.problems.extend(check.problems);
        }
        eprintln!(
            "rebuild kill {n}/{}: node {victim} (leading partitions {led:?}) killed {} ms after the rebuild began{}; \
             the rebuild {first}{}",
            plan.rebuild_kills,
            ms(delay),
            if mid_way { "" } else { ", after it had finished" },
            if retries > 0 && result.is_ok() { format!(", and retry {retries} completed") } else { String::new() }
        );
        report.rebuild_retries += retries;
        let restarted_at = Instant::now();
        cluster.restart(victim).await.unwrap_or_else(|e| panic!("restarting node {victim}: {e}"));
        wait_in_sync(cluster, store.log(), plan.in_sync_timeout).await;
        report.max_rejoin_ms = report.max_rejoin_ms.max(ms(restarted_at.elapsed()));
    }
    report.acked_lost = lost.len() as u64;
    report.seconds = started.elapsed().as_secs_f64();
    report
}

/// Kills two of the cluster's three nodes at once (the leader of partition 0 and the next
/// node) while writers put into every partition of the log `open` returns, keeps them down for
/// `down_for`, starts one of them again, waits until every partition has acknowledged a put
/// begun after that, then starts the other and waits until every replica is in sync. Checks
/// that every put begun after the kills and finished before the restart failed with a
/// retryable error (too few in-sync replicas, or the delivery timeout) and none is indexed,
/// that every put failed within the delivery timeout, that the acknowledged ones are in the
/// log where acknowledged, and that a rebuild from a marker taken before the kills holds
/// exactly the acknowledged states (and failed ones only where their record landed all the
/// same).
// Long: one chaos scenario read top to bottom: the kills, the failed puts, and the checks of the log and of a rebuild share the put stream's state.
pub async fn lost_quorum<C, L, F, Fut>(
    cluster: &mut C,
    open: F,
    delivery_timeout: Duration,
    down_for: Duration,
) -> LostQuorumReport
where
    C: Cluster<L>,
    L: StateLog + Send + Sync + 'static,
    F: Fn() -> Fut,
    Fut: Future<Output = Result<L, Error>>,
{
    let mut report = LostQuorumReport::default();
    let limit = Duration::from_secs(120);
    assert_eq!(cluster.nodes(), 3, "the lost-quorum scenario kills two nodes of three");
    // Two-phase: the snapshot taken before the kills is what the rebuilds restore from.
    let store: Arc<ActionStateStore<L, TwoPhase>> =
        Arc::new(ActionStateStore::new_two_phase(open().await.expect("opening the log"), StoreConfig::default()));
    let partitions = store.log().identity().partitions;
    wait_in_sync(cluster, store.log(), limit).await;
    let writers = writers(partitions, 1);
    let mut early = Vec::new();
    for seq in 0..EARLY_ROUNDS {
        for &k in &writers {
            let p = faults::put(&store, k, seq).await;
            assert!(p.acked(), "a put before the kills failed: {p:?}");
            early.push(p.state);
        }
    }
    let before = store.snapshot(1).await.expect("a snapshot before the kills");

    let stream = Stream::start(&store, &writers, EARLY_ROUNDS);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let leaders = cluster.leaders(store.log()).await.unwrap_or_else(|e| panic!("asking for leaders: {e}"));
    let first = leaders.first().copied().flatten().unwrap_or(0);
    let victims = [first, (first + 1) % cluster.nodes()];
    for &node in &victims {
        cluster.kill(node).await.unwrap_or_else(|e| panic!("killing node {node}: {e}"));
    }
    let lost_at = Instant::now();
    eprintln!("lost-quorum: nodes {victims:?} killed; one node of three left");
    tokio::time::sleep(down_for).await;
    let restarted_at = Instant::now();
    cluster.restart(victims[0]).await.unwrap_or_else(|e| panic!("restarting node {}: {e}", victims[0]));
    match stream.resumed(restarted_at, limit).await {
        Ok(after) => {
            report.resumed_after_ms = ms(after);
            eprintln!(
                "lost-quorum: node {} restarted; every partition acknowledged a put {} ms later",
                victims[0],
                ms(after)
            );
        }
        Err(e) => report.problems.push(format!("with two nodes of three up again: {e}")),
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let puts = stream.finish().await;
    // The checks read the log back: with every node running and in sync, as a restore would.
    cluster.restart(victims[1]).await.unwrap_or_else(|e| panic!("restarting node {}: {e}", victims[1]));
    wait_in_sync(cluster, store.log(), limit).await;

    for p in puts.iter().filter(|p| p.at >= lost_at && p.at + p.took < restarted_at) {
        report.puts_without_quorum += 1;
        match &p.outcome {
            Outcome::Acked(_) => {
                report.acked_without_quorum += 1;
                report.problems.push(format!("put {:?} was acknowledged by a single node", p.state.key));
            }
            Outcome::Failed { error, .. } if report.first_error.is_empty() => report.first_error = error.clone(),
            Outcome::Failed { .. } => {}
        }
    }
    if report.puts_without_quorum == 0 {
        report.problems.push(format!("no put began and ended within the {down_for:?} without a quorum"));
    }
    let checks = check_puts(&store, &puts, delivery_timeout).await;
    report.puts = checks.puts;
    report.acked = checks.acked;
    report.failed = checks.failed;
    report.failed_indexed = checks.failed_indexed;
    report.failed_late = checks.failed_late;
    report.failed_terminal = checks.failed_terminal;
    report.problems.extend(checks.problems);
    let mut lost = checks.lost;

    let expected = Expected::new(&early, &puts);
    match rebuild_from(&open, &before).await {
        Ok(states) => {
            let check = expected.check(&states, &mut lost);
            report.landed_although_failed = check.landed_although_failed;
            report.rebuild_unexpected = check.unexpected;
            report.problems.extend(check.problems);
        }
        Err(e) => report.problems.push(format!("the rebuild after the quorum came back failed: {e}")),
    }
    report.acked_lost = lost.len() as u64;
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys of `writers(partitions, n)` land in every partition, `n` each.
    #[test]
    fn writers_cover_every_partition_evenly() {
        for partitions in [1, 3, 4, 8] {
            let ws = writers(partitions, 2);
            let mut count = vec![0; partitions as usize];
            for k in &ws {
                count[faults::key(*k).partition(partitions) as usize] += 1;
            }
            assert_eq!(count, vec![2; partitions as usize]);
        }
    }
}
