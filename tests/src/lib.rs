//! # actionstate-tests
//!
//! Helpers shared by the integration tests (`tests/all`): the backends every scenario runs
//! on, simulated runs over a fresh log of each, and views of a run's ledger and log that the
//! scenarios and the crash campaign assert on.
//!
//! A server backend needs its server: `KAFKA_BOOTSTRAP` (or `FLUSS_BOOTSTRAP`) in the
//! environment, or `<workspace>/target/services/kafka.env` (`fluss.env`) as `cargo xtask
//! services up kafka` (`fluss`) writes it. Tests on one call [`Backend::available`] first,
//! which prints the `ACTIONSTATE-SKIP` marker when no server is configured (and panics instead
//! when `ACTIONSTATE_REQUIRE_SERVICES` is set); [`Backend::bootstrap`] is its address. The fault tests that kill nodes of the three-node Kafka cluster find it
//! through [`kafka3::Kafka3`], those that kill tablet servers of the three-server Fluss cluster
//! through [`fluss3::Fluss3`], and check the scenarios' reports with [`cluster_checks`].
#![forbid(unsafe_code)]
#![deny(clippy::unwrap_used)]

pub mod cluster_checks;
pub mod fluss3;
pub mod kafka3;

use actionstate_core::{ActionDigest, KeyId, LogRecord, RangeRead, StateKey, StateLog, codec};
use actionstate_memory::MemoryLog;
use actionstate_recovery::{AnyLog, LogConfig, StoreError};
use actionstate_sim::agent::Kind;
use actionstate_sim::{Ledger, LedgerEntry, LogSource, MemorySource, Outcome, RunPlan, Sim, SimConfig};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use tempfile::TempDir;

/// Partitions of every log the tests open.
pub const PARTITIONS: u32 = 4;

pub use actionstate_testkit::Backend;

/// The URL of a fresh log of the server backend `backend` on its server at `bootstrap`.
fn server_test_url(backend: Backend, bootstrap: &str) -> String {
    match backend {
        Backend::Kafka => kafka_test_url(bootstrap),
        _ => fluss_test_url(bootstrap),
    }
}

/// The database the tests' Fluss tables live in.
pub const FLUSS_DATABASE: &str = "actionstate_tests";

/// The URL of a fresh, uniquely named table of [`PARTITIONS`] buckets on the configured Fluss
/// cluster, with timeouts of a few seconds.
pub fn fluss_test_url(bootstrap: &str) -> String {
    fluss_table_url(bootstrap, &format!("scenario_{}", uuid::Uuid::new_v4().simple()))
}

/// The URL of the table `table` of [`PARTITIONS`] buckets in [`FLUSS_DATABASE`] on the
/// configured Fluss cluster, with the tests' timeouts.
pub fn fluss_table_url(bootstrap: &str, table: &str) -> String {
    format!(
        "fluss://{bootstrap}/{FLUSS_DATABASE}/{table}?buckets={PARTITIONS}\
         &delivery_timeout=20s&read_stall_timeout=10s&request_timeout=15s"
    )
}

/// The URL of a fresh, uniquely named topic of [`PARTITIONS`] partitions on the configured
/// broker, with a replication factor of 1 and timeouts of a few seconds.
pub fn kafka_test_url(bootstrap: &str) -> String {
    kafka_topic_url(bootstrap, &format!("actionstate-tests-{}", uuid::Uuid::new_v4().simple()), PARTITIONS)
}

/// The URL [`kafka_test_url`] uses, for a topic of the caller's choosing with `partitions`
/// partitions (for processes that must reopen the same topic).
pub fn kafka_topic_url(bootstrap: &str, topic: &str, partitions: u32) -> String {
    format!(
        "kafka://{bootstrap}/{topic}?partitions={partitions}&replication=1\
         &delivery_timeout=20s&read_stall_timeout=10s&request_timeout=15s"
    )
}

/// The log `url` names, for a test: a URL the tests built must parse.
pub fn log_config(url: &str) -> LogConfig {
    url.parse().unwrap_or_else(|e| panic!("the test URL {url} does not parse: {e}"))
}

/// One fresh, empty log of a backend; a file log's directory is deleted when this is
/// dropped. A Kafka log is a new topic, created on first open and left on the broker; a Fluss
/// log a new table, likewise.
#[derive(Debug)]
pub struct Env {
    backend: Backend,
    memory: MemoryLog,
    /// Holds a file log's directory until the environment is dropped.
    _dir: Option<TempDir>,
    /// The log by URL; `None` for the memory log, which survives a reopen only through
    /// [`MemorySource`].
    log: Option<LogConfig>,
}

impl Env {
    /// A fresh log of `backend`. Kafka and Fluss fail with [`std::io::ErrorKind::NotFound`]
    /// when no broker or cluster is configured.
    pub fn new(backend: Backend) -> std::io::Result<Env> {
        let missing = |what: &str| std::io::Error::new(std::io::ErrorKind::NotFound, what.to_owned());
        let (dir, log) = match backend {
            Backend::Memory => (None, None),
            Backend::File => {
                let dir = tempfile::tempdir()?;
                let url = format!("file:{}?partitions={PARTITIONS}", dir.path().join("log").display());
                (Some(dir), Some(log_config(&url)))
            }
            Backend::Kafka | Backend::Fluss => {
                let bootstrap = backend.bootstrap().ok_or_else(|| missing(&backend.missing()))?;
                (None, Some(log_config(&server_test_url(backend, bootstrap))))
            }
        };
        Ok(Env { backend, memory: MemoryLog::new(PARTITIONS), _dir: dir, log })
    }

    /// The backend.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The log by URL (`None` for the memory log).
    pub fn log_config(&self) -> Option<&LogConfig> {
        self.log.as_ref()
    }

    /// Runs the simulator over this log: the source `config` derives, or `inputs` if given.
    pub async fn run(
        &self,
        config: &SimConfig,
        inputs: Option<&[(u32, i64)]>,
        plan: &RunPlan,
    ) -> Result<Outcome, StoreError> {
        async fn go<S: LogSource>(
            sim: Sim<S>,
            inputs: Option<&[(u32, i64)]>,
            plan: &RunPlan,
        ) -> Result<Outcome, StoreError> {
            let sim = match inputs {
                Some(i) => sim.with_inputs(i.to_vec()),
                None => sim,
            };
            // On the heap: a run over any backend nests deeper than the compiler lays out inline.
            Box::pin(sim.run(plan, &|_| {})).await
        }
        match &self.log {
            Some(log) => go(Sim::new(log.clone(), config.clone()), inputs, plan).await,
            None => go(Sim::new(MemorySource { log: self.memory.clone() }, config.clone()), inputs, plan).await,
        }
    }

    /// Opens (a new handle on) the log. A file log must not be open elsewhere.
    pub async fn open(&self) -> Result<AnyLog, StoreError> {
        match &self.log {
            Some(log) => actionstate_recovery::open(log).await,
            None => Ok(AnyLog::Memory(self.memory.reopen())),
        }
    }

    /// Every record of the log, decoded, per partition in log order: (partition, offset,
    /// record).
    pub async fn records(&self) -> Result<Vec<(u32, u64, LogRecord)>, StoreError> {
        let log = self.open().await?;
        read_records(&log).await
    }
}

/// Every record of `log` from its earliest retained offsets to its end, decoded.
pub async fn read_records<L: StateLog>(log: &L) -> Result<Vec<(u32, u64, LogRecord)>, StoreError> {
    let earliest = log.earliest_offsets().await?;
    let end = log.end_offsets().await?;
    let mut out = Vec::new();
    for (p, (&from, &to)) in (0u32..).zip(earliest.iter().zip(&end)) {
        let mut range = RangeRead::new(p, from, to, 1024);
        while let Some(records) = range.next_batch(log).await? {
            for r in records {
                let record = codec::decode(&r.key, &r.value).map_err(|e| e.at(p, r.offset))?;
                out.push((p, r.offset, record));
            }
        }
    }
    Ok(out)
}

/// Runs `plan` on a fresh log of `backend`.
pub async fn run(backend: Backend, config: &SimConfig, plan: &RunPlan) -> Result<Outcome, StoreError> {
    Env::new(backend).map_err(|e| StoreError::Task(e.to_string()))?.run(config, None, plan).await
}

/// A crash-free run of `config` on a fresh log of `backend`, over `inputs` if given.
pub async fn reference(
    backend: Backend,
    config: &SimConfig,
    inputs: Option<&[(u32, i64)]>,
) -> Result<Outcome, StoreError> {
    Env::new(backend).map_err(|e| StoreError::Task(e.to_string()))?.run(config, inputs, &RunPlan::clean()).await
}

/// Per input position of `source`, the round it starts: (business key, sequence number).
pub fn rounds(source: &[(u32, i64)]) -> Vec<(KeyId, u64)> {
    let mut next: HashMap<u32, u64> = HashMap::new();
    source
        .iter()
        .map(|&(k, _)| {
            let seq = next.entry(k).or_insert(0);
            *seq += 1;
            (actionstate_sim::key_id(k), *seq - 1)
        })
        .collect()
}

/// The action digest of an agent action, as state keys carry it.
pub fn action(kind: Kind) -> ActionDigest {
    kind.action().digest()
}

/// Actions the simulated agent runs per round: plan, greet, two works, jot, two summarizes.
pub const ACTIONS_PER_ROUND: usize = 7;

/// One execution of an action body, from the ledger's history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Execution {
    /// The attempt it ran in (0 before the first crash).
    pub attempt: u64,
    /// The action's state key.
    pub key: StateKey,
    /// Why it ran (a miss reason, or `resumed`).
    pub reason: String,
    /// The attempt in which a completion of the same state had been acknowledged before this
    /// execution, if any (the latest such attempt).
    pub acked_in: Option<u64>,
}

/// Every execution of an action body, in order, each with the latest earlier acknowledged
/// completion of its state.
pub fn executions(ledger: &Ledger) -> Vec<Execution> {
    let mut acked: HashMap<StateKey, u64> = HashMap::new();
    let mut out = Vec::new();
    for entry in ledger.history() {
        match entry {
            LedgerEntry::Executed { attempt, key, reason } => out.push(Execution {
                attempt: *attempt,
                key: *key,
                reason: reason.clone(),
                acked_in: acked.get(key).copied(),
            }),
            LedgerEntry::Completed { attempt, key } => {
                acked.insert(*key, *attempt);
            }
        }
    }
    out
}

/// Executions in `attempt` of actions of round `seq` of `key`.
pub fn executed_in_round(ledger: &Ledger, attempt: u64, key: KeyId, seq: u64) -> Vec<Execution> {
    executions(ledger).into_iter().filter(|e| e.attempt == attempt && e.key.key == key && e.key.seq == seq).collect()
}

/// The states whose completion was acknowledged in `attempt`.
pub fn completed_in(ledger: &Ledger, attempt: u64) -> Vec<StateKey> {
    ledger
        .history()
        .iter()
        .filter_map(|e| match e {
            LedgerEntry::Completed { attempt: a, key } if *a == attempt => Some(*key),
            _ => None,
        })
        .collect()
}

/// Executions of states whose completion had already been acknowledged (the ledger's
/// duplicates), in order.
pub fn repeats(ledger: &Ledger) -> Vec<Execution> {
    executions(ledger).into_iter().filter(|e| e.acked_in.is_some()).collect()
}

/// Delete and audit records per business key in a log's records.
pub fn invalidations_by_key(records: &[(u32, u64, LogRecord)]) -> BTreeMap<KeyId, usize> {
    let mut out = BTreeMap::new();
    for (_, _, r) in records {
        if matches!(r, LogRecord::Delete { .. } | LogRecord::Audit(_)) {
            *out.entry(r.key_id()).or_default() += 1;
        }
    }
    out
}

/// The smallest `n` in `lo..hi` for which the monotone predicate `holds` is true, or `hi`.
pub async fn smallest(lo: u64, hi: u64, holds: impl AsyncFn(u64) -> bool) -> u64 {
    let (mut lo, mut hi) = (lo, hi);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if holds(mid).await {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

/// A small deterministic generator (splitmix64) for seeded choices.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x5851_f42d_4c95_7f2d)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi.saturating_sub(lo).saturating_add(1)).max(1)
    }

    /// One of `items`.
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[(self.next_u64() % items.len().max(1) as u64) as usize]
    }
}

/// The command line of the `sim-child` binary (`tests/src/bin/sim-child.rs`): one attempt of a
/// simulated run whose state lives in a [`RunDir`](actionstate_sim::RunDir), as `name=value`
/// arguments.
#[derive(Clone, Debug)]
pub struct ChildArgs {
    /// The run's state directory.
    pub state: PathBuf,
    /// The attempt number (one per process of a run, from 0).
    pub attempt: u64,
    /// The log, as a URL (`actionstate_recovery::LogConfig`).
    pub log: String,
    /// What to simulate.
    pub config: SimConfig,
    /// The external service the agent's durable calls go to, with idempotency keys
    /// (`actionstate_sim::external`), as its URL; `None`: answered in process.
    pub external: Option<String>,
    /// Whether the approvals go to the approver in another process (`sim-approver`), through
    /// the inbox file [`ChildArgs::inbox`] of the state directory; `false`: answered in
    /// process.
    pub outside_approver: bool,
}

impl ChildArgs {
    /// The arguments, one `name=value` each.
    pub fn to_args(&self) -> Vec<String> {
        let c = &self.config;
        vec![
            format!("state={}", self.state.display()),
            format!("attempt={}", self.attempt),
            format!("log={}", self.log),
            format!("seed={}", c.seed),
            format!("keys={}", c.keys),
            format!("inputs={}", c.inputs),
            format!("checkpoint_every={}", c.checkpoint_every),
            format!("abort_every={}", c.abort_every),
            format!("owners={}", c.owners),
            format!("reconcile={}", c.reconcile),
            format!("approval_every={}", c.approval_every),
        ]
        .into_iter()
        .chain(self.external.as_ref().map(|url| format!("external={url}")))
        .chain(self.outside_approver.then(|| "outside_approver=true".to_owned()))
        .collect()
    }

    /// The inbox the children of a run whose state lives in `state` hand their approval
    /// tokens to, one line each, for the approver in another process.
    pub fn inbox(state: &std::path::Path) -> PathBuf {
        state.join("approvals.inbox")
    }

    /// Parses what [`to_args`](Self::to_args) produced.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<ChildArgs, String> {
        let mut values: HashMap<String, String> = HashMap::new();
        for arg in args {
            let (name, value) = arg.split_once('=').ok_or_else(|| format!("expected name=value, got {arg:?}"))?;
            values.insert(name.to_owned(), value.to_owned());
        }
        let mut take = |name: &str| values.remove(name).ok_or_else(|| format!("missing argument {name}=..."));
        fn num<T: std::str::FromStr>(name: &str, v: String) -> Result<T, String> {
            v.parse().map_err(|_| format!("bad {name}={v:?}"))
        }
        let args = ChildArgs {
            state: PathBuf::from(take("state")?),
            attempt: num("attempt", take("attempt")?)?,
            log: take("log")?,
            config: SimConfig {
                seed: num("seed", take("seed")?)?,
                keys: num("keys", take("keys")?)?,
                inputs: num("inputs", take("inputs")?)?,
                checkpoint_every: num("checkpoint_every", take("checkpoint_every")?)?,
                abort_every: num("abort_every", take("abort_every")?)?,
                owners: num("owners", take("owners")?)?,
                reconcile: num("reconcile", take("reconcile")?)?,
                approval_every: num("approval_every", take("approval_every")?)?,
            },
            external: values.remove("external"),
            outside_approver: values
                .remove("outside_approver")
                .map(|v| num("outside_approver", v))
                .transpose()?
                .unwrap_or(false),
        };
        match values.keys().next() {
            Some(extra) => Err(format!("unknown argument {extra}=...")),
            None => Ok(args),
        }
    }
}
