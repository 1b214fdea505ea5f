//! A local Apache Fluss cluster: `cargo xtask services up|down|status fluss`. Its jars and
//! configuration files are in [`config`], its readiness probes in [`probe`].
//!
//! `services up fluss` runs three JVM processes, each detached from the terminal in its own
//! process group:
//!
//! 1. a standalone Apache ZooKeeper server ([`ZOOKEEPER_VERSION`], `ZooKeeperServerMain`), which
//!    Fluss keeps its metadata in;
//! 2. one Fluss CoordinatorServer ([`FLUSS_VERSION`]), which clients bootstrap from and which
//!    handles databases, tables and metadata;
//! 3. one Fluss TabletServer (id 0), which stores the buckets and serves appends and fetches.
//!
//! They need Java 17 or newer, and Maven the first time, to resolve `org.apache.fluss:fluss-server`
//! (a shaded jar that carries Fluss's own dependencies, RocksDB included, and a bundled slf4j 1.7
//! API), `org.apache.zookeeper:zookeeper` with `io.dropwizard.metrics:metrics-core` (ZooKeeper's
//! default metrics provider, which its pom leaves `provided`), and the log4j 2 binding for slf4j
//! 1.x. The jars are copied once into `target/services/fluss/lib/`; later starts need neither Maven
//! nor the network. The local file system is built into the server jar, so the remote data
//! directory needs no plugin.
//!
//! Each start picks free ports on 127.0.0.1: one for ZooKeeper's clients and two for each Fluss
//! server, one per listener:
//!
//! - `INTERNAL` — plaintext; the servers talk to each other on it, and clients without
//!   authentication use it too (the `bootstrap` of [`FlussEnv::client`] is the coordinator's);
//! - `CLIENT` — SASL/PLAIN as [`SASL_USERNAME`](env::SASL_USERNAME) /
//!   [`SASL_PASSWORD`](env::SASL_PASSWORD), the only user the servers
//!   know (its `sasl_bootstrap` is the coordinator's). Metadata answered on a listener
//!   names the other servers' addresses on the same listener, so a client that bootstraps there
//!   stays on SASL.
//!
//! The data directories (ZooKeeper's, the tablet server's log and KV data, and the "remote" data
//! directory, all under `target/services/fluss/data/`) are wiped on each start, so every run
//! begins with an empty cluster holding only Fluss's default database `fluss`.
//!
//! # Segments and remote storage
//!
//! The tablet server rolls a bucket's log segment at 4 MiB (`log.segment.file-size`, Fluss's
//! default is 1 GiB) and runs its remote-log tasks every second
//! (`remote.log.task-interval-duration`, default one minute). Those tasks copy rolled segments
//! to the remote data directory, keep the newest two segments of a bucket on the tablet
//! server's disk (`table.log.tiered.local-segments`), and delete remote segments whose newest
//! record is older than the table's `table.log.ttl`. So a table that holds a few segments per
//! bucket tiers them within seconds, and with a TTL of a second loses its oldest records a
//! second or two after they were written: the backend's expiry test sees the earliest offset
//! rise on this cluster. `fluss.env` declares both settings (`FLUSS_LOG_SEGMENT_BYTES`,
//! `FLUSS_REMOTE_LOG_TASK_INTERVAL_MS`), and that test runs only where they are declared.
//!
//! 4 MiB rather than smaller: the other tests' tables stay below two segments per bucket, so
//! they run as on Fluss's defaults, and so does the `bench fluss` rebuild of 200,000 records
//! (about 10 MiB per bucket). With 64 KiB segments nearly every table tiered and was read back
//! from remote storage: the SIGKILL campaign took about a second longer, the benchmark's store
//! rebuild ran at half its rate, and its raw fluss-rs scanner stalled on the remote segments.
//!
//! `up` does not reuse a running cluster whose configuration files differ from the ones it
//! would write now: it starts the cluster afresh.
//!
//! # Readiness
//!
//! `up` returns once:
//!
//! 1. ZooKeeper answers the `ruok` four-letter command with `imok` (before the Fluss servers
//!    start: a server that cannot reach ZooKeeper for a while gives up and exits);
//! 2. the coordinator, on its plaintext listener, answers `ApiVersions`, lists tablet server 0
//!    in a `Metadata` answer (so the tablet server has registered and the coordinator has seen
//!    it), creates a database `xtask_readiness_probe` and drops it again;
//! 3. the coordinator, on its SASL listener, accepts the test user and answers `Metadata`.
//!
//! Those requests are the Fluss RPC protocol spoken directly (a length-prefixed frame with api
//! key, version and request id, then a protobuf message), so the xtask needs no Fluss client. `up`
//! is a no-op when the three processes it started still run and answer. `down` stops the tablet
//! server, the coordinator and then ZooKeeper, each only if its recorded pid still runs that
//! process with our configuration; `status` reports what runs and whether it answers.
//!
//! Files, all under `<workspace root>/target/services/`:
//!
//! - `fluss.env` — the addresses and the tablet server's segment settings, written once the
//!   cluster answers, removed by `down`;
//! - `fluss/pom.xml`, `fluss/lib/` — the resolved jars;
//! - `fluss/config/` — `zookeeper/zoo.cfg`, `coordinator/server.yaml`, `tablet/server.yaml`,
//!   `log4j2.properties`;
//! - `fluss/data/` — `zookeeper/`, `tablet/` (`data.dir`) and `remote/` (`remote.data.dir`);
//! - `fluss/zookeeper.log`, `fluss/coordinator.log`, `fluss/tablet.log` — what each prints;
//! - `fluss/zookeeper.pid`, `fluss/coordinator.pid`, `fluss/tablet.pid`.
//!
//! `fluss.env` holds one `KEY=VALUE` per line, no quoting:
//!
//! ```text
//! FLUSS_BOOTSTRAP=127.0.0.1:40123
//! FLUSS_SASL_BOOTSTRAP=127.0.0.1:40124
//! FLUSS_SASL_USERNAME=actionstate
//! FLUSS_SASL_PASSWORD=actionstate-secret
//! FLUSS_ZOOKEEPER=127.0.0.1:40120
//! FLUSS_ZOOKEEPER_PID=12345
//! FLUSS_COORDINATOR_PID=12346
//! FLUSS_TABLET_PID=12347
//! FLUSS_LOG_SEGMENT_BYTES=4194304
//! FLUSS_REMOTE_LOG_TASK_INTERVAL_MS=1000
//! ```

mod config;
mod probe;

use crate::services::artifacts::check_java;
use crate::services::config::{Gc, Jvm};
use crate::services::env::{self, Client};
use crate::services::process::{
    POLL, READY_TIMEOUT, child_exited, read_pid, remove_dir_if_exists, remove_file_if_exists, resident, spawn_detached,
    stop_process, write_atomic,
};
use anyhow::{Context, Result, anyhow, bail};
use config::{
    FLUSS_VERSION, Paths, Ports, REMOTE_LOG_TASK_INTERVAL_SECS, Role, TABLET_SEGMENT_MIB, TABLET_SERVER_ID,
    ZOOKEEPER_VERSION, configs_are_current, ensure_jars, write_configs,
};
use probe::{FlussConn, zookeeper_command};
use std::fs::{self, File};
use std::process::Child;
use std::time::Instant;

/// The database the readiness probe creates and drops.
const PROBE_DATABASE: &str = "xtask_readiness_probe";

const ZOOKEEPER_JVM: Jvm = Jvm { max_heap: "128m", initial_heap: "32m", gc: Gc::Serial };
const FLUSS_JVM: Jvm = Jvm { max_heap: "512m", initial_heap: "128m", gc: Gc::G1 };

/// How tests and benchmarks reach the cluster; the contents of `target/services/fluss.env`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FlussEnv {
    /// The coordinator's plaintext and SASL/PLAIN listeners, and the user.
    pub(crate) client: Client,
    /// `host:port` of ZooKeeper.
    pub(crate) zookeeper: String,
    pub(crate) zookeeper_pid: u32,
    pub(crate) coordinator_pid: u32,
    pub(crate) tablet_pid: u32,
    /// The tablet server's `log.segment.file-size`, in bytes.
    pub(crate) log_segment_bytes: u64,
    /// The tablet server's `remote.log.task-interval-duration`, in milliseconds.
    pub(crate) remote_log_task_interval_ms: u64,
}

impl FlussEnv {
    fn new(ports: Ports, [zookeeper_pid, coordinator_pid, tablet_pid]: [u32; 3]) -> Self {
        Self {
            client: Client::local(ports.coordinator, ports.coordinator_sasl),
            zookeeper: format!("127.0.0.1:{}", ports.zookeeper),
            zookeeper_pid,
            coordinator_pid,
            tablet_pid,
            log_segment_bytes: TABLET_SEGMENT_MIB << 20,
            remote_log_task_interval_ms: REMOTE_LOG_TASK_INTERVAL_SECS * 1000,
        }
    }

    /// The settings as environment variables, in the order of the env file.
    pub(crate) fn vars(&self) -> Vec<(String, String)> {
        let mut vars = self.client.vars("FLUSS");
        vars.extend(
            [
                ("FLUSS_ZOOKEEPER", self.zookeeper.clone()),
                ("FLUSS_ZOOKEEPER_PID", self.zookeeper_pid.to_string()),
                ("FLUSS_COORDINATOR_PID", self.coordinator_pid.to_string()),
                ("FLUSS_TABLET_PID", self.tablet_pid.to_string()),
                ("FLUSS_LOG_SEGMENT_BYTES", self.log_segment_bytes.to_string()),
                ("FLUSS_REMOTE_LOG_TASK_INTERVAL_MS", self.remote_log_task_interval_ms.to_string()),
            ]
            .map(|(key, value)| (key.to_owned(), value)),
        );
        vars
    }

    pub(crate) fn render(&self) -> String {
        env::render(&self.vars())
    }

    fn parse(text: &str) -> Result<Self> {
        let get = |key: &str| env::value(text, key);
        let pid = |key: &str| -> Result<u32> { get(key)?.parse().with_context(|| format!("{key} is not a pid")) };
        let number = |key: &str| -> Result<u64> { get(key)?.parse().with_context(|| format!("{key} is not a number")) };
        Ok(Self {
            client: Client::parse(text, "FLUSS")?,
            zookeeper: get("FLUSS_ZOOKEEPER")?,
            zookeeper_pid: pid("FLUSS_ZOOKEEPER_PID")?,
            coordinator_pid: pid("FLUSS_COORDINATOR_PID")?,
            tablet_pid: pid("FLUSS_TABLET_PID")?,
            log_segment_bytes: number("FLUSS_LOG_SEGMENT_BYTES")?,
            remote_log_task_interval_ms: number("FLUSS_REMOTE_LOG_TASK_INTERVAL_MS")?,
        })
    }
}

/// Starts ZooKeeper and the two Fluss servers unless the ones started here already run, waits
/// until the cluster answers, writes `target/services/fluss.env` and returns its contents.
pub(crate) fn up_fluss() -> Result<FlussEnv> {
    let started = Instant::now();
    let paths = Paths::current()?;
    fs::create_dir_all(&paths.files.config).with_context(|| format!("creating {}", paths.files.config.display()))?;

    let running = running_pids(&paths)?;
    if let [Some(zookeeper), Some(coordinator), Some(tablet)] = running {
        let ports = Ports::read(&paths)
            .with_context(|| format!("the cluster runs, but {} lacks its ports", paths.files.config.display()))?;
        if configs_are_current(&paths, ports) {
            let env = FlussEnv::new(ports, [zookeeper, coordinator, tablet]);
            eprintln!(
                "==> fluss: already running (pids {zookeeper}, {coordinator}, {tablet}); checking that it answers"
            );
            let mut exited = || {
                Role::ALL
                    .into_iter()
                    .zip([zookeeper, coordinator, tablet])
                    .find(|(role, pid)| !paths.is_ours(*role, *pid))
                    .map(|(role, pid)| (role, format!("the {} (pid {pid}) exited", role.label())))
            };
            wait_until_ready(&env, &paths, &mut exited)
                .context("the running cluster does not answer; `cargo xtask services down fluss` stops it")?;
            write_atomic(&paths.files.env, &env.render())?;
            eprintln!("==> fluss: {} (SASL/PLAIN {})", env.client.bootstrap, env.client.sasl_bootstrap);
            return Ok(env);
        }
        eprintln!("==> fluss: the running cluster was started with other server settings; starting it afresh");
    } else if running.iter().any(Option::is_some) {
        eprintln!("==> fluss: only part of the cluster runs; stopping it to start afresh");
    }
    stop_all(&paths)?;
    remove_file_if_exists(&paths.files.env)?;

    check_java()?;
    ensure_jars(&paths)?;

    let ports = Ports::free()?;
    write_configs(&paths, ports)?;
    remove_dir_if_exists(&paths.data)?;
    for dir in [&paths.zookeeper_data, &paths.tablet_data, &paths.remote_data, &paths.plugins] {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }

    let mut cluster = Cluster { children: Vec::new() };
    let result = start(&paths, ports, &mut cluster);
    let env = match result {
        Ok(env) => env,
        Err(e) => {
            eprintln!("==> fluss: stopping what did not come up");
            cluster.stop(&paths);
            return Err(e);
        }
    };
    write_atomic(&paths.files.env, &env.render())?;
    eprintln!(
        "==> fluss: ready in {:.1}s at {} (SASL/PLAIN {}), pids {} {} {}; settings in {}",
        started.elapsed().as_secs_f64(),
        env.client.bootstrap,
        env.client.sasl_bootstrap,
        env.zookeeper_pid,
        env.coordinator_pid,
        env.tablet_pid,
        paths.files.env.display()
    );
    Ok(env)
}

/// Stops the processes `up_fluss` started, those that still run, and removes the pid and env
/// files.
pub(crate) fn down_fluss() -> Result<()> {
    let paths = Paths::current()?;
    let started = Instant::now();
    let stopped = stop_all(&paths)?;
    if stopped == 0 {
        eprintln!("==> fluss: not running");
    } else {
        eprintln!("==> fluss: stopped in {:.1}s", started.elapsed().as_secs_f64());
    }
    remove_file_if_exists(&paths.files.env)
}

pub(crate) fn status_fluss() -> Result<()> {
    let paths = Paths::current()?;
    let running = running_pids(&paths)?;
    if running.iter().all(Option::is_none) {
        println!("fluss: not running");
        return Ok(());
    }
    println!("fluss: Apache Fluss {FLUSS_VERSION}, ZooKeeper {ZOOKEEPER_VERSION}");
    for (role, pid) in Role::ALL.iter().zip(running) {
        match pid {
            Some(pid) => {
                let rss = resident(pid).map(|memory| format!(", {memory}"));
                println!("  {:<11} running, pid {pid}{}", role.name(), rss.unwrap_or_default());
            }
            None => println!("  {:<11} not running", role.name()),
        }
    }
    let Some(env) = env::read_for_status(&paths.files.env, "the cluster", FlussEnv::parse)? else { return Ok(()) };
    match zookeeper_command(&env.zookeeper, "srvr") {
        Ok(answer) => {
            let mode = answer.lines().find(|l| l.starts_with("Mode:")).unwrap_or("answers");
            println!("  zookeeper   {}: {mode}", env.zookeeper);
        }
        Err(e) => println!("  zookeeper   {}: does not answer: {e:#}", env.zookeeper),
    }
    env.client.print_status(11, &|addr, plain| Ok(FlussConn::open(addr, plain)?.metadata()?.summary()));
    println!("  env file    {}", paths.files.env.display());
    println!("  logs        {}/{{zookeeper,coordinator,tablet}}.log", paths.files.dir.display());
    Ok(())
}

/// The recorded pid of each role that still runs our process, in [`Role::ALL`] order.
fn running_pids(paths: &Paths) -> Result<[Option<u32>; 3]> {
    let mut pids = [None; 3];
    for (slot, role) in pids.iter_mut().zip(Role::ALL) {
        *slot = read_pid(&paths.pid(role))?.filter(|pid| paths.is_ours(role, *pid));
    }
    Ok(pids)
}

/// Stops whichever of our processes run, the tablet server first and ZooKeeper last, and removes
/// the pid files; returns how many were stopped.
fn stop_all(paths: &Paths) -> Result<usize> {
    let mut stopped = 0;
    let mut first_error = None;
    for role in Role::ALL.into_iter().rev() {
        let pid_file = paths.pid(role);
        match read_pid(&pid_file)? {
            Some(pid) if paths.is_ours(role, pid) => {
                eprintln!("==> fluss: stopping the {} (pid {pid})", role.label());
                if let Err(e) = stop_process(pid) {
                    first_error.get_or_insert(e);
                }
                stopped += 1;
            }
            Some(pid) => eprintln!("==> fluss: pid {pid} no longer runs the {}; nothing to stop", role.label()),
            None => {}
        }
        remove_file_if_exists(&pid_file)?;
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(stopped),
    }
}

/// The processes this `up` started, so that a failed start can stop them.
#[derive(Debug)]
struct Cluster {
    children: Vec<(Role, Child)>,
}

impl Cluster {
    fn pid(&self, role: Role) -> Option<u32> {
        self.children.iter().find(|(r, _)| *r == role).map(|(_, child)| child.id())
    }

    /// Why the cluster cannot come up any more: one of its processes exited.
    fn exited(&mut self) -> Option<(Role, String)> {
        self.children
            .iter_mut()
            .find_map(|(role, child)| Some((*role, child_exited(child, &format!("the {}", role.label()))?)))
    }

    fn stop(mut self, paths: &Paths) {
        while let Some((role, mut child)) = self.children.pop() {
            if child.try_wait().ok().flatten().is_none() {
                let _ = stop_process(child.id());
            }
            let _ = child.wait();
            let _ = remove_file_if_exists(&paths.pid(role));
        }
    }
}

fn start(paths: &Paths, ports: Ports, cluster: &mut Cluster) -> Result<FlussEnv> {
    let zookeeper = format!("127.0.0.1:{}", ports.zookeeper);
    spawn(paths, Role::ZooKeeper, cluster)?;
    eprintln!("==> fluss: ZooKeeper {ZOOKEEPER_VERSION} started, waiting until it answers on {zookeeper}");
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if let Some((role, why)) = cluster.exited() {
            bail!("{why} before it answered; {}", log_tail(paths, role, 40));
        }
        match zookeeper_command(&zookeeper, "ruok") {
            Ok(answer) if answer == "imok" => break,
            Ok(answer) if Instant::now() >= deadline => bail!("ZooKeeper answers `ruok` with `{answer}`"),
            Err(e) if Instant::now() >= deadline => {
                return Err(e).context(format!("ZooKeeper did not answer within {}s", READY_TIMEOUT.as_secs()));
            }
            _ => std::thread::sleep(POLL),
        }
    }

    spawn(paths, Role::Coordinator, cluster)?;
    spawn(paths, Role::Tablet, cluster)?;
    let pids = Role::ALL.map(|role| cluster.pid(role).unwrap_or_default());
    let env = FlussEnv::new(ports, pids);
    eprintln!(
        "==> fluss: coordinator and tablet server {FLUSS_VERSION} started (pids {} {}), waiting until they answer on {}",
        pids[1], pids[2], env.client.bootstrap
    );
    wait_until_ready(&env, paths, &mut || cluster.exited())?;
    Ok(env)
}

fn spawn(paths: &Paths, role: Role, cluster: &mut Cluster) -> Result<()> {
    let log_path = paths.log(role);
    let log = File::create(&log_path).with_context(|| format!("creating {}", log_path.display()))?;
    let jvm = if role == Role::ZooKeeper { ZOOKEEPER_JVM } else { FLUSS_JVM };
    let mut cmd = jvm.command(&paths.files.log4j, &[], &paths.classpath(), role.main_class());
    match role {
        Role::ZooKeeper => cmd.arg(&paths.zoo_cfg),
        Role::Coordinator | Role::Tablet => cmd.arg("--configDir").arg(paths.config_arg(role)),
    };
    // Fluss looks for file system and other plugins there; none are needed, but an absent
    // directory is logged as a warning.
    cmd.env("FLUSS_PLUGINS_DIR", &paths.plugins).current_dir(&paths.files.dir);
    let child = spawn_detached(&mut cmd, log, role.label())?;
    write_atomic(&paths.pid(role), &format!("{}\n", child.id()))?;
    cluster.children.push((role, child));
    Ok(())
}

/// Polls the coordinator until the readiness checks of the module documentation pass, a process
/// exits (`exited` says which), or [`READY_TIMEOUT`] passes.
fn wait_until_ready(env: &FlussEnv, paths: &Paths, exited: &mut dyn FnMut() -> Option<(Role, String)>) -> Result<()> {
    crate::services::probe::wait_until_ready(
        &mut || exited().map(|(role, why)| anyhow!("{why} before the cluster answered; {}", log_tail(paths, role, 40))),
        &mut || check_ready(env),
        &|last_error| {
            anyhow!(
                "the Fluss cluster did not answer within {}s (last attempt: {last_error:#}); {}\n{}",
                READY_TIMEOUT.as_secs(),
                log_tail(paths, Role::Coordinator, 20),
                log_tail(paths, Role::Tablet, 20)
            )
        },
    )
}

fn check_ready(env: &FlussEnv) -> Result<()> {
    let mut plain = FlussConn::open(&env.client.bootstrap, None)?;
    let metadata = plain.metadata()?;
    if !metadata.tablet_servers.iter().any(|s| s.id == TABLET_SERVER_ID) {
        bail!("tablet server {TABLET_SERVER_ID} has not registered yet ({})", metadata.summary());
    }
    plain.create_database(PROBE_DATABASE).context("creating the probe database")?;
    plain.drop_database(PROBE_DATABASE).context("dropping the probe database")?;
    let mut sasl = FlussConn::open(&env.client.sasl_bootstrap, env.client.plain())?;
    sasl.metadata().context("metadata on the SASL listener")?;
    Ok(())
}

fn log_tail(paths: &Paths, role: Role, lines: usize) -> String {
    crate::services::process::log_tail(&paths.log(role), lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_ports() -> Ports {
        Ports { zookeeper: 40000, coordinator: 40001, coordinator_sasl: 40002, tablet: 40003, tablet_sasl: 40004 }
    }

    #[test]
    fn env_file_round_trips_and_has_the_documented_keys() {
        let env = FlussEnv::new(sample_ports(), [7, 8, 9]);
        let text = env.render();
        assert_eq!(
            text,
            "FLUSS_BOOTSTRAP=127.0.0.1:40001\nFLUSS_SASL_BOOTSTRAP=127.0.0.1:40002\n\
             FLUSS_SASL_USERNAME=actionstate\nFLUSS_SASL_PASSWORD=actionstate-secret\n\
             FLUSS_ZOOKEEPER=127.0.0.1:40000\nFLUSS_ZOOKEEPER_PID=7\nFLUSS_COORDINATOR_PID=8\nFLUSS_TABLET_PID=9\n\
             FLUSS_LOG_SEGMENT_BYTES=4194304\nFLUSS_REMOTE_LOG_TASK_INTERVAL_MS=1000\n"
        );
        assert_eq!(FlussEnv::parse(&text).expect("parse"), env);
        assert!(FlussEnv::parse("FLUSS_BOOTSTRAP=127.0.0.1:1\n").is_err());
    }
}
