//! A local Apache Fluss cluster: `cargo xtask services up|down|status fluss`.
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
//!   authentication use it too ([`FlussEnv::bootstrap`] is the coordinator's);
//! - `CLIENT` — SASL/PLAIN as [`SASL_USERNAME`] / [`SASL_PASSWORD`], the only user the servers
//!   know ([`FlussEnv::sasl_bootstrap`] is the coordinator's). Metadata answered on a listener
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

use crate::services::{
    Jars, LOG4J_VERSION, POLL, READY_TIMEOUT, SASL_PASSWORD, SASL_USERNAME, check_java, free_port_list, java,
    process_runs, read_pid, remove_dir_if_exists, remove_file_if_exists, rss_kib, stop_process, tail, write_atomic,
};
use anyhow::{Context, Result, bail};
use std::fs::{self, File};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The Apache Fluss release the servers run (`org.apache.fluss:fluss-server`).
pub(crate) const FLUSS_VERSION: &str = "0.9.1-incubating";
/// The Apache ZooKeeper release (`org.apache.zookeeper:zookeeper`).
pub(crate) const ZOOKEEPER_VERSION: &str = "3.9.5";
/// ZooKeeper's default metrics provider needs Dropwizard Metrics; the version its parent pom names.
const DROPWIZARD_METRICS_VERSION: &str = "4.1.12.1";

const TABLET_SERVER_ID: i32 = 0;
/// The size in MiB at which the tablet server rolls a bucket's log segment
/// (`log.segment.file-size`; Fluss's default is 1 GiB); see "Segments and remote storage".
const TABLET_SEGMENT_MIB: u64 = 4;
/// How often, in seconds, the tablet server copies rolled segments to the remote data directory
/// and deletes expired ones (`remote.log.task-interval-duration`; Fluss's default is 1 min).
const REMOTE_LOG_TASK_INTERVAL_SECS: u64 = 1;
/// The database the readiness probe creates and drops.
const PROBE_DATABASE: &str = "xtask_readiness_probe";

const ZOOKEEPER_JVM_OPTIONS: &[&str] =
    &["-Xmx128m", "-Xms32m", "-XX:+UseSerialGC", "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true"];
const FLUSS_JVM_OPTIONS: &[&str] = &[
    "-Xmx512m",
    "-Xms128m",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
];
/// Per-request timeout of the readiness probes.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// The three processes of the cluster, in start order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    ZooKeeper,
    Coordinator,
    Tablet,
}

impl Role {
    const ALL: [Role; 3] = [Role::ZooKeeper, Role::Coordinator, Role::Tablet];

    fn name(self) -> &'static str {
        match self {
            Role::ZooKeeper => "zookeeper",
            Role::Coordinator => "coordinator",
            Role::Tablet => "tablet",
        }
    }

    /// The name in progress lines and errors.
    fn label(self) -> &'static str {
        match self {
            Role::ZooKeeper => "ZooKeeper server",
            Role::Coordinator => "coordinator",
            Role::Tablet => "tablet server",
        }
    }

    fn main_class(self) -> &'static str {
        match self {
            Role::ZooKeeper => "org.apache.zookeeper.server.ZooKeeperServerMain",
            Role::Coordinator => "org.apache.fluss.server.coordinator.CoordinatorServer",
            Role::Tablet => "org.apache.fluss.server.tablet.TabletServer",
        }
    }
}

/// Where the cluster keeps its files.
#[derive(Debug, Clone)]
struct Paths {
    dir: PathBuf,
    pom: PathBuf,
    lib: PathBuf,
    lib_partial: PathBuf,
    config: PathBuf,
    log4j: PathBuf,
    zoo_cfg: PathBuf,
    coordinator_conf: PathBuf,
    tablet_conf: PathBuf,
    plugins: PathBuf,
    data: PathBuf,
    zookeeper_data: PathBuf,
    tablet_data: PathBuf,
    remote_data: PathBuf,
    env: PathBuf,
}

impl Paths {
    fn new(workspace_root: &Path) -> Self {
        let services = workspace_root.join("target").join("services");
        let dir = services.join("fluss");
        let config = dir.join("config");
        let data = dir.join("data");
        Self {
            pom: dir.join("pom.xml"),
            lib: dir.join("lib"),
            lib_partial: dir.join("lib.partial"),
            log4j: config.join("log4j2.properties"),
            zoo_cfg: config.join("zookeeper").join("zoo.cfg"),
            coordinator_conf: config.join("coordinator"),
            tablet_conf: config.join("tablet"),
            config,
            plugins: dir.join("plugins"),
            zookeeper_data: data.join("zookeeper"),
            tablet_data: data.join("tablet"),
            remote_data: data.join("remote"),
            data,
            env: services.join("fluss.env"),
            dir,
        }
    }

    fn current() -> Result<Self> {
        Ok(Self::new(&crate::workspace_root()?))
    }

    fn classpath(&self) -> String {
        format!("{}/*", self.lib.display())
    }

    fn pid(&self, role: Role) -> PathBuf {
        self.dir.join(format!("{}.pid", role.name()))
    }

    fn log(&self, role: Role) -> PathBuf {
        self.dir.join(format!("{}.log", role.name()))
    }

    /// The argument that identifies our process of `role` on its command line: the ZooKeeper
    /// configuration file, or a Fluss server's configuration directory.
    fn config_arg(&self, role: Role) -> &Path {
        match role {
            Role::ZooKeeper => &self.zoo_cfg,
            Role::Coordinator => &self.coordinator_conf,
            Role::Tablet => &self.tablet_conf,
        }
    }

    fn is_ours(&self, role: Role, pid: u32) -> bool {
        process_runs(pid, role.main_class(), self.config_arg(role))
    }
}

/// The listener ports on 127.0.0.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ports {
    zookeeper: u16,
    coordinator: u16,
    coordinator_sasl: u16,
    tablet: u16,
    tablet_sasl: u16,
}

impl Ports {
    fn free() -> Result<Self> {
        match free_port_list(5)?[..] {
            [zookeeper, coordinator, coordinator_sasl, tablet, tablet_sasl] => {
                Ok(Self { zookeeper, coordinator, coordinator_sasl, tablet, tablet_sasl })
            }
            ref other => bail!("expected five ports, got {other:?}"),
        }
    }

    /// The ports back from the configuration files that [`write_configs`] wrote.
    fn read(paths: &Paths) -> Option<Self> {
        let zoo = fs::read_to_string(&paths.zoo_cfg).ok()?;
        let zookeeper = zoo.lines().find_map(|l| l.strip_prefix("clientPort="))?.trim().parse().ok()?;
        let coordinator = fs::read_to_string(paths.coordinator_conf.join("server.yaml")).ok()?;
        let tablet = fs::read_to_string(paths.tablet_conf.join("server.yaml")).ok()?;
        Some(Self {
            zookeeper,
            coordinator: listener_port(&coordinator, "INTERNAL")?,
            coordinator_sasl: listener_port(&coordinator, "CLIENT")?,
            tablet: listener_port(&tablet, "INTERNAL")?,
            tablet_sasl: listener_port(&tablet, "CLIENT")?,
        })
    }
}

/// The port of listener `name` in the `bind.listeners` line of a `server.yaml`.
fn listener_port(yaml: &str, name: &str) -> Option<u16> {
    let listeners = yaml.lines().find_map(|line| line.strip_prefix("bind.listeners:"))?;
    listeners
        .split(',')
        .find_map(|l| l.trim().strip_prefix(name)?.strip_prefix("://"))
        .and_then(|addr| addr.rsplit_once(':'))
        .and_then(|(_, port)| port.trim().parse().ok())
}

/// How tests and benchmarks reach the cluster; the contents of `target/services/fluss.env`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FlussEnv {
    /// `host:port` of the coordinator's plaintext listener.
    pub(crate) bootstrap: String,
    /// `host:port` of the coordinator's SASL/PLAIN listener.
    pub(crate) sasl_bootstrap: String,
    pub(crate) sasl_username: String,
    pub(crate) sasl_password: String,
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
            bootstrap: format!("127.0.0.1:{}", ports.coordinator),
            sasl_bootstrap: format!("127.0.0.1:{}", ports.coordinator_sasl),
            sasl_username: SASL_USERNAME.to_owned(),
            sasl_password: SASL_PASSWORD.to_owned(),
            zookeeper: format!("127.0.0.1:{}", ports.zookeeper),
            zookeeper_pid,
            coordinator_pid,
            tablet_pid,
            log_segment_bytes: TABLET_SEGMENT_MIB << 20,
            remote_log_task_interval_ms: REMOTE_LOG_TASK_INTERVAL_SECS * 1000,
        }
    }

    /// The settings as environment variables, in the order of the env file.
    pub(crate) fn vars(&self) -> [(&'static str, String); 10] {
        [
            ("FLUSS_BOOTSTRAP", self.bootstrap.clone()),
            ("FLUSS_SASL_BOOTSTRAP", self.sasl_bootstrap.clone()),
            ("FLUSS_SASL_USERNAME", self.sasl_username.clone()),
            ("FLUSS_SASL_PASSWORD", self.sasl_password.clone()),
            ("FLUSS_ZOOKEEPER", self.zookeeper.clone()),
            ("FLUSS_ZOOKEEPER_PID", self.zookeeper_pid.to_string()),
            ("FLUSS_COORDINATOR_PID", self.coordinator_pid.to_string()),
            ("FLUSS_TABLET_PID", self.tablet_pid.to_string()),
            ("FLUSS_LOG_SEGMENT_BYTES", self.log_segment_bytes.to_string()),
            ("FLUSS_REMOTE_LOG_TASK_INTERVAL_MS", self.remote_log_task_interval_ms.to_string()),
        ]
    }

    pub(crate) fn render(&self) -> String {
        self.vars().iter().map(|(k, v)| format!("{k}={v}\n")).collect()
    }

    fn parse(text: &str) -> Result<Self> {
        let get = |key: &str| {
            text.lines()
                .filter_map(|line| line.split_once('='))
                .find(|(k, _)| k.trim() == key)
                .map(|(_, v)| v.trim().to_owned())
                .with_context(|| format!("no {key} line"))
        };
        let pid = |key: &str| -> Result<u32> { get(key)?.parse().with_context(|| format!("{key} is not a pid")) };
        let number = |key: &str| -> Result<u64> { get(key)?.parse().with_context(|| format!("{key} is not a number")) };
        Ok(Self {
            bootstrap: get("FLUSS_BOOTSTRAP")?,
            sasl_bootstrap: get("FLUSS_SASL_BOOTSTRAP")?,
            sasl_username: get("FLUSS_SASL_USERNAME")?,
            sasl_password: get("FLUSS_SASL_PASSWORD")?,
            zookeeper: get("FLUSS_ZOOKEEPER")?,
            zookeeper_pid: pid("FLUSS_ZOOKEEPER_PID")?,
            coordinator_pid: pid("FLUSS_COORDINATOR_PID")?,
            tablet_pid: pid("FLUSS_TABLET_PID")?,
            log_segment_bytes: number("FLUSS_LOG_SEGMENT_BYTES")?,
            remote_log_task_interval_ms: number("FLUSS_REMOTE_LOG_TASK_INTERVAL_MS")?,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// up, down, status

/// Starts ZooKeeper and the two Fluss servers unless the ones started here already run, waits
/// until the cluster answers, writes `target/services/fluss.env` and returns its contents.
pub(crate) fn up_fluss() -> Result<FlussEnv> {
    let started = Instant::now();
    let paths = Paths::current()?;
    fs::create_dir_all(&paths.config).with_context(|| format!("creating {}", paths.config.display()))?;

    let running = running_pids(&paths)?;
    if let [Some(zookeeper), Some(coordinator), Some(tablet)] = running {
        let ports = Ports::read(&paths)
            .with_context(|| format!("the cluster runs, but {} lacks its ports", paths.config.display()))?;
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
            write_atomic(&paths.env, &env.render())?;
            eprintln!("==> fluss: {} (SASL/PLAIN {})", env.bootstrap, env.sasl_bootstrap);
            return Ok(env);
        }
        eprintln!("==> fluss: the running cluster was started with other server settings; starting it afresh");
    } else if running.iter().any(Option::is_some) {
        eprintln!("==> fluss: only part of the cluster runs; stopping it to start afresh");
    }
    stop_all(&paths)?;
    remove_file_if_exists(&paths.env)?;

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
    write_atomic(&paths.env, &env.render())?;
    eprintln!(
        "==> fluss: ready in {:.1}s at {} (SASL/PLAIN {}), pids {} {} {}; settings in {}",
        started.elapsed().as_secs_f64(),
        env.bootstrap,
        env.sasl_bootstrap,
        env.zookeeper_pid,
        env.coordinator_pid,
        env.tablet_pid,
        paths.env.display()
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
    remove_file_if_exists(&paths.env)
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
                let rss = rss_kib(pid).map(|kib| format!(", {:.0} MiB resident", kib as f64 / 1024.0));
                println!("  {:<11} running, pid {pid}{}", role.name(), rss.unwrap_or_default());
            }
            None => println!("  {:<11} not running", role.name()),
        }
    }
    let env = match fs::read_to_string(&paths.env) {
        Ok(text) => FlussEnv::parse(&text).with_context(|| format!("reading {}", paths.env.display()))?,
        Err(_) => {
            println!("  {} missing: the cluster has not answered yet", paths.env.display());
            return Ok(());
        }
    };
    match zookeeper_command(&env.zookeeper, "srvr") {
        Ok(answer) => {
            let mode = answer.lines().find(|l| l.starts_with("Mode:")).unwrap_or("answers");
            println!("  zookeeper   {}: {mode}", env.zookeeper);
        }
        Err(e) => println!("  zookeeper   {}: does not answer: {e:#}", env.zookeeper),
    }
    match FlussConn::open(&env.bootstrap, None).and_then(|mut c| c.metadata()) {
        Ok(metadata) => println!("  plaintext   {}: answers ({})", env.bootstrap, metadata.summary()),
        Err(e) => println!("  plaintext   {}: does not answer: {e:#}", env.bootstrap),
    }
    match FlussConn::open(&env.sasl_bootstrap, Some((&env.sasl_username, &env.sasl_password)))
        .and_then(|mut c| c.metadata())
    {
        Ok(metadata) => println!(
            "  sasl        {}: PLAIN as {} accepted, answers ({})",
            env.sasl_bootstrap,
            env.sasl_username,
            metadata.summary()
        ),
        Err(e) => println!("  sasl        {}: does not answer: {e:#}", env.sasl_bootstrap),
    }
    println!("  env file    {}", paths.env.display());
    println!("  logs        {}/{{zookeeper,coordinator,tablet}}.log", paths.dir.display());
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
        self.children.iter_mut().find_map(|(role, child)| match child.try_wait() {
            Ok(Some(status)) => Some((*role, format!("the {} exited ({status})", role.label()))),
            Ok(None) => None,
            Err(e) => Some((*role, format!("waiting for the {} failed: {e}", role.label()))),
        })
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
        pids[1], pids[2], env.bootstrap
    );
    wait_until_ready(&env, paths, &mut || cluster.exited())?;
    Ok(env)
}

fn spawn(paths: &Paths, role: Role, cluster: &mut Cluster) -> Result<()> {
    let log_path = paths.log(role);
    let log = File::create(&log_path).with_context(|| format!("creating {}", log_path.display()))?;
    let mut cmd = Command::new(java());
    match role {
        Role::ZooKeeper => cmd.args(ZOOKEEPER_JVM_OPTIONS),
        Role::Coordinator | Role::Tablet => cmd.args(FLUSS_JVM_OPTIONS),
    };
    cmd.arg(format!("-Dlog4j2.configurationFile={}", paths.log4j.display()))
        .arg("-cp")
        .arg(paths.classpath())
        .arg(role.main_class());
    match role {
        Role::ZooKeeper => cmd.arg(&paths.zoo_cfg),
        Role::Coordinator | Role::Tablet => cmd.arg("--configDir").arg(paths.config_arg(role)),
    };
    // Fluss looks for file system and other plugins there; none are needed, but an absent
    // directory is logged as a warning.
    cmd.env("FLUSS_PLUGINS_DIR", &paths.plugins)
        .current_dir(&paths.dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    // Its own process group: a Ctrl-C in the terminal that ran `up` later does not reach it.
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let child = cmd.spawn().with_context(|| format!("starting the {}: {cmd:?}", role.label()))?;
    write_atomic(&paths.pid(role), &format!("{}\n", child.id()))?;
    cluster.children.push((role, child));
    Ok(())
}

/// Polls the coordinator until the readiness checks of the module documentation pass, a process
/// exits (`exited` says which), or [`READY_TIMEOUT`] passes.
fn wait_until_ready(env: &FlussEnv, paths: &Paths, exited: &mut dyn FnMut() -> Option<(Role, String)>) -> Result<()> {
    let started = Instant::now();
    loop {
        if let Some((role, why)) = exited() {
            bail!("{why} before the cluster answered; {}", log_tail(paths, role, 40));
        }
        let last_error = match check_ready(env) {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        if started.elapsed() >= READY_TIMEOUT {
            bail!(
                "the Fluss cluster did not answer within {}s (last attempt: {last_error:#}); {}\n{}",
                READY_TIMEOUT.as_secs(),
                log_tail(paths, Role::Coordinator, 20),
                log_tail(paths, Role::Tablet, 20)
            );
        }
        std::thread::sleep(POLL);
    }
}

fn check_ready(env: &FlussEnv) -> Result<()> {
    let mut plain = FlussConn::open(&env.bootstrap, None)?;
    let metadata = plain.metadata()?;
    if !metadata.tablet_servers.iter().any(|s| s.id == TABLET_SERVER_ID) {
        bail!("tablet server {TABLET_SERVER_ID} has not registered yet ({})", metadata.summary());
    }
    plain.create_database(PROBE_DATABASE).context("creating the probe database")?;
    plain.drop_database(PROBE_DATABASE).context("dropping the probe database")?;
    let mut sasl = FlussConn::open(&env.sasl_bootstrap, Some((&env.sasl_username, &env.sasl_password)))?;
    sasl.metadata().context("metadata on the SASL listener")?;
    Ok(())
}

fn log_tail(paths: &Paths, role: Role, lines: usize) -> String {
    let log = paths.log(role);
    format!("last lines of {}:\n{}", log.display(), tail(&log, lines))
}

// ---------------------------------------------------------------------------------------------
// Jars and configuration

/// A project whose runtime dependencies are the Fluss server, ZooKeeper and a logging backend.
fn pom_xml() -> String {
    let dependency = |group: &str, artifact: &str, version: &str, exclusions: &[(&str, &str)]| {
        let exclusions = if exclusions.is_empty() {
            String::new()
        } else {
            let list: String = exclusions
                .iter()
                .map(|(g, a)| {
                    format!(
                        "        <exclusion>\n          <groupId>{g}</groupId>\n          \
                         <artifactId>{a}</artifactId>\n        </exclusion>\n"
                    )
                })
                .collect();
            format!("\n      <exclusions>\n{list}      </exclusions>")
        };
        format!(
            "    <dependency>\n      <groupId>{group}</groupId>\n      <artifactId>{artifact}</artifactId>\n      \
             <version>{version}</version>{exclusions}\n    </dependency>\n"
        )
    };
    let mut deps = String::new();
    deps += &dependency("org.apache.fluss", "fluss-server", FLUSS_VERSION, &[]);
    // The native TLS libraries for every platform are the bulk of ZooKeeper's dependencies, and
    // TLS is not used here; logback would compete with the log4j binding.
    deps += &dependency(
        "org.apache.zookeeper",
        "zookeeper",
        ZOOKEEPER_VERSION,
        &[("io.netty", "netty-tcnative-boringssl-static"), ("ch.qos.logback", "logback-classic")],
    );
    deps += &dependency("io.dropwizard.metrics", "metrics-core", DROPWIZARD_METRICS_VERSION, &[]);
    // The server jar bundles the slf4j 1.7 API, so the binding is the one for slf4j 1.x.
    deps += &dependency("org.apache.logging.log4j", "log4j-slf4j-impl", LOG4J_VERSION, &[]);
    deps += &dependency("org.apache.logging.log4j", "log4j-core", LOG4J_VERSION, &[]);
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <!-- Generated by `cargo xtask services up fluss`; the runtime classpath of the local cluster. -->\n\
         <project xmlns=\"http://maven.apache.org/POM/4.0.0\">\n  \
         <modelVersion>4.0.0</modelVersion>\n  \
         <groupId>actionstate.xtask</groupId>\n  \
         <artifactId>fluss-cluster</artifactId>\n  \
         <version>{FLUSS_VERSION}</version>\n  \
         <packaging>pom</packaging>\n  \
         <dependencies>\n{deps}  </dependencies>\n\
         </project>\n"
    )
}

fn ensure_jars(paths: &Paths) -> Result<()> {
    Jars {
        service: "fluss",
        what: "the Fluss server and ZooKeeper jars",
        root: &format!("org.apache.fluss:fluss-server:{FLUSS_VERSION}"),
        pom: &pom_xml(),
        pom_path: &paths.pom,
        lib: &paths.lib,
        lib_partial: &paths.lib_partial,
        marker_jar: &format!("fluss-server-{FLUSS_VERSION}.jar"),
    }
    .ensure()
}

fn write_configs(paths: &Paths, ports: Ports) -> Result<()> {
    for dir in [paths.zoo_cfg.parent().unwrap_or(&paths.config), &paths.coordinator_conf, &paths.tablet_conf] {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    write_atomic(&paths.log4j, LOG4J2_PROPERTIES)?;
    write_atomic(&paths.zoo_cfg, &zoo_cfg(ports.zookeeper, &paths.zookeeper_data))?;
    write_atomic(&paths.coordinator_conf.join("server.yaml"), &server_yaml(Role::Coordinator, ports, paths))?;
    write_atomic(&paths.tablet_conf.join("server.yaml"), &server_yaml(Role::Tablet, ports, paths))
}

/// Whether the Fluss servers' configuration files are what [`write_configs`] writes now for
/// `ports`: a cluster started by an earlier xtask with other settings is not reused.
fn configs_are_current(paths: &Paths, ports: Ports) -> bool {
    [(Role::Coordinator, &paths.coordinator_conf), (Role::Tablet, &paths.tablet_conf)].into_iter().all(|(role, dir)| {
        fs::read_to_string(dir.join("server.yaml")).is_ok_and(|yaml| yaml == server_yaml(role, ports, paths))
    })
}

fn zoo_cfg(port: u16, data: &Path) -> String {
    format!(
        "# Generated by `cargo xtask services up fluss`; rewritten on every start.\n\
         tickTime=2000\n\
         dataDir={}\n\
         clientPort={port}\n\
         clientPortAddress=127.0.0.1\n\
         maxClientCnxns=0\n\
         admin.enableServer=false\n\
         4lw.commands.whitelist=ruok,srvr\n",
        data.display()
    )
}

/// The `server.yaml` of the coordinator or the tablet server.
fn server_yaml(role: Role, ports: Ports, paths: &Paths) -> String {
    let (plain, sasl) = match role {
        Role::Tablet => (ports.tablet, ports.tablet_sasl),
        Role::ZooKeeper | Role::Coordinator => (ports.coordinator, ports.coordinator_sasl),
    };
    let mut yaml = format!(
        "# Generated by `cargo xtask services up fluss`; rewritten on every start.\n\
         zookeeper.address: 127.0.0.1:{zookeeper}\n\
         bind.listeners: INTERNAL://127.0.0.1:{plain}, CLIENT://127.0.0.1:{sasl}\n\
         internal.listener.name: INTERNAL\n\
         security.protocol.map: CLIENT:SASL\n\
         security.sasl.enabled.mechanisms: PLAIN\n\
         security.sasl.plain.jaas.config: org.apache.fluss.security.auth.sasl.plain.PlainLoginModule required \
         user_{SASL_USERNAME}=\"{SASL_PASSWORD}\";\n\
         default.bucket.number: 1\n\
         default.replication.factor: 1\n\
         remote.data.dir: {remote}\n",
        zookeeper = ports.zookeeper,
        remote = paths.remote_data.display(),
    );
    if role == Role::Tablet {
        yaml += &format!(
            "tablet-server.id: {TABLET_SERVER_ID}\n\
             data.dir: {}\n\
             log.segment.file-size: {TABLET_SEGMENT_MIB}mb\n\
             remote.log.task-interval-duration: {REMOTE_LOG_TASK_INTERVAL_SECS}s\n",
            paths.tablet_data.display()
        );
    }
    yaml
}

const LOG4J2_PROPERTIES: &str = "\
# Generated by `cargo xtask services up fluss`. Each process's stdout goes to its own log.
status = warn
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = STDOUT
";

// ---------------------------------------------------------------------------------------------
// Readiness probes: ZooKeeper's four-letter commands, and a few requests of the Fluss RPC
// protocol.

/// Sends a four-letter command and returns ZooKeeper's answer (it closes the connection after it).
fn zookeeper_command(addr: &str, command: &str) -> Result<String> {
    let socket: SocketAddr = addr.parse().with_context(|| format!("`{addr}` is not an address"))?;
    let mut stream =
        TcpStream::connect_timeout(&socket, PROBE_TIMEOUT).with_context(|| format!("connecting to {addr}"))?;
    stream.set_read_timeout(Some(PROBE_TIMEOUT))?;
    stream.write_all(command.as_bytes())?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).with_context(|| format!("reading the answer to `{command}`"))?;
    Ok(answer.trim().to_owned())
}

const API_VERSIONS: i16 = 1000;
const API_CREATE_DATABASE: i16 = 1001;
const API_DROP_DATABASE: i16 = 1002;
const API_METADATA: i16 = 1012;
const API_AUTHENTICATE: i16 = 1038;
const CLIENT_NAME: &str = "actionstate-xtask";

/// One connection to a Fluss server, after `ApiVersions` (and, on a SASL listener, `Authenticate`).
#[derive(Debug)]
struct FlussConn {
    stream: TcpStream,
    next_request_id: i32,
}

impl FlussConn {
    fn open(addr: &str, plain: Option<(&str, &str)>) -> Result<Self> {
        let socket: SocketAddr = addr.parse().with_context(|| format!("`{addr}` is not an address"))?;
        let stream =
            TcpStream::connect_timeout(&socket, PROBE_TIMEOUT).with_context(|| format!("connecting to {addr}"))?;
        stream.set_read_timeout(Some(PROBE_TIMEOUT))?;
        stream.set_write_timeout(Some(PROBE_TIMEOUT))?;
        let mut conn = Self { stream, next_request_id: 0 };

        let mut body = Vec::new();
        put_string_field(&mut body, 1, CLIENT_NAME);
        put_string_field(&mut body, 2, env!("CARGO_PKG_VERSION"));
        let versions = decode_api_versions(&conn.call(API_VERSIONS, &body)?)?;
        for key in [API_CREATE_DATABASE, API_DROP_DATABASE, API_METADATA] {
            if !versions.iter().any(|&(k, min, _)| k == i32::from(key) && min == 0) {
                bail!("{addr} does not serve version 0 of api {key}");
            }
        }
        if let Some((username, password)) = plain {
            let mut body = Vec::new();
            put_string_field(&mut body, 1, "PLAIN");
            put_bytes_field(&mut body, 2, format!("\0{username}\0{password}").as_bytes());
            conn.call(API_AUTHENTICATE, &body).context("SASL/PLAIN authentication")?;
        }
        Ok(conn)
    }

    fn metadata(&mut self) -> Result<Metadata> {
        decode_metadata(&self.call(API_METADATA, &[])?)
    }

    fn create_database(&mut self, name: &str) -> Result<()> {
        let mut body = Vec::new();
        put_string_field(&mut body, 1, name);
        put_varint_field(&mut body, 2, 1); // ignore_if_exists
        self.call(API_CREATE_DATABASE, &body).map(drop)
    }

    fn drop_database(&mut self, name: &str) -> Result<()> {
        let mut body = Vec::new();
        put_string_field(&mut body, 1, name);
        put_varint_field(&mut body, 2, 1); // ignore_if_not_exists
        put_varint_field(&mut body, 3, 1); // cascade
        self.call(API_DROP_DATABASE, &body).map(drop)
    }

    /// Sends one request (api version 0) and returns the body of a successful response.
    fn call(&mut self, api_key: i16, body: &[u8]) -> Result<Vec<u8>> {
        let request_id = self.next_request_id;
        self.next_request_id += 1;
        self.stream.write_all(&request_frame(api_key, request_id, body)).context("sending a request")?;
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).with_context(|| format!("reading the answer to api {api_key}"))?;
        let size = u32::from_be_bytes(size) as usize;
        if !(5..=16 << 20).contains(&size) {
            bail!("implausible response size {size}");
        }
        let mut response = vec![0u8; size];
        self.stream.read_exact(&mut response).context("reading a response")?;
        decode_response(&response, request_id, api_key)
    }
}

/// A request frame: length, api key, api version 0, request id, protobuf body.
fn request_frame(api_key: i16, request_id: i32, body: &[u8]) -> Vec<u8> {
    let mut frame = ((8 + body.len()) as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&api_key.to_be_bytes());
    frame.extend_from_slice(&0i16.to_be_bytes());
    frame.extend_from_slice(&request_id.to_be_bytes());
    frame.extend_from_slice(body);
    frame
}

/// A response after its length: type (0 success, 1 error, 2 server failure), request id, then the
/// response message or an `ErrorResponse`.
fn decode_response(response: &[u8], request_id: i32, api_key: i16) -> Result<Vec<u8>> {
    let [kind, id @ ..] = response else { bail!("empty response") };
    let (id, body) = id.split_at_checked(4).context("response ends early")?;
    let id = i32::from_be_bytes(id.try_into()?);
    if id != request_id {
        bail!("response to request {id}, expected {request_id}");
    }
    if *kind == 0 {
        return Ok(body.to_vec());
    }
    let mut code = None;
    let mut message = None;
    for field in Fields(body) {
        match field? {
            (1, Value::Varint(v)) => code = Some(v as i32),
            (2, Value::Bytes(b)) => message = Some(String::from_utf8_lossy(b).into_owned()),
            _ => {}
        }
    }
    let code = code.context("error response without a code")?;
    bail!("api {api_key}: {} ({code}){}", error_name(code), message.map(|m| format!(": {m}")).unwrap_or_default())
}

fn error_name(code: i32) -> &'static str {
    match code {
        -1 => "UNKNOWN_SERVER_ERROR",
        1 => "NETWORK_EXCEPTION",
        2 => "UNSUPPORTED_VERSION",
        4 => "DATABASE_NOT_EXIST",
        6 => "DATABASE_ALREADY_EXIST",
        46 => "AUTHENTICATE_EXCEPTION",
        51 => "RETRIABLE_AUTHENTICATE_EXCEPTION",
        _ => "error",
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct ServerNode {
    id: i32,
    host: String,
    port: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Metadata {
    coordinator: Option<ServerNode>,
    tablet_servers: Vec<ServerNode>,
}

impl Metadata {
    fn summary(&self) -> String {
        let node = |n: &ServerNode| format!("{}@{}:{}", n.id, n.host, n.port);
        let tablets: Vec<String> = self.tablet_servers.iter().map(node).collect();
        format!(
            "coordinator {}, tablet servers {}",
            self.coordinator.as_ref().map(node).unwrap_or_else(|| "?".into()),
            if tablets.is_empty() { "none".into() } else { tablets.join(" ") }
        )
    }
}

/// ApiVersionsResponse: repeated `PbApiVersion { api_key = 1, min_version = 2, max_version = 3 }`
/// in field 1.
fn decode_api_versions(body: &[u8]) -> Result<Vec<(i32, i32, i32)>> {
    let mut versions = Vec::new();
    for field in Fields(body) {
        if let (1, Value::Bytes(entry)) = field? {
            let (mut key, mut min, mut max) = (None, None, None);
            for inner in Fields(entry) {
                match inner? {
                    (1, Value::Varint(v)) => key = Some(v as i32),
                    (2, Value::Varint(v)) => min = Some(v as i32),
                    (3, Value::Varint(v)) => max = Some(v as i32),
                    _ => {}
                }
            }
            versions.push((key.context("api version without a key")?, min.unwrap_or(0), max.unwrap_or(0)));
        }
    }
    Ok(versions)
}

/// MetadataResponse: `coordinator_server = 1`, repeated `tablet_servers = 2`, both
/// `PbServerNode { node_id = 1, host = 2, port = 3 }`; the table fields that follow are skipped.
fn decode_metadata(body: &[u8]) -> Result<Metadata> {
    let node = |bytes: &[u8]| -> Result<ServerNode> {
        let (mut id, mut host, mut port) = (None, String::new(), 0);
        for field in Fields(bytes) {
            match field? {
                (1, Value::Varint(v)) => id = Some(v as i32),
                (2, Value::Bytes(b)) => host = String::from_utf8_lossy(b).into_owned(),
                (3, Value::Varint(v)) => port = v as i32,
                _ => {}
            }
        }
        Ok(ServerNode { id: id.context("server node without an id")?, host, port })
    };
    let mut metadata = Metadata { coordinator: None, tablet_servers: Vec::new() };
    for field in Fields(body) {
        match field? {
            (1, Value::Bytes(b)) => metadata.coordinator = Some(node(b)?),
            (2, Value::Bytes(b)) => metadata.tablet_servers.push(node(b)?),
            _ => {}
        }
    }
    Ok(metadata)
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn put_varint_field(out: &mut Vec<u8>, field: u32, value: u64) {
    put_varint(out, u64::from(field) << 3);
    put_varint(out, value);
}

fn put_bytes_field(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    put_varint(out, (u64::from(field) << 3) | 2);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn put_string_field(out: &mut Vec<u8>, field: u32, s: &str) {
    put_bytes_field(out, field, s.as_bytes());
}

/// A decoded protobuf field value; fixed-width fields are skipped as `Other`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Other,
}

/// Iterates the fields of a protobuf message as `(field number, value)`.
#[derive(Debug)]
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn varint(&mut self) -> Result<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let [byte, rest @ ..] = self.0 else { bail!("message ends inside a varint") };
            self.0 = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        bail!("varint longer than ten bytes")
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(n).context("message ends inside a field")?;
        self.0 = rest;
        Ok(head)
    }

    fn field(&mut self) -> Result<(u32, Value<'a>)> {
        let key = self.varint()?;
        let number = u32::try_from(key >> 3).context("field number out of range")?;
        let value = match key & 7 {
            0 => Value::Varint(self.varint()?),
            1 => self.take(8).map(|_| Value::Other)?,
            2 => {
                let len = usize::try_from(self.varint()?).context("length out of range")?;
                Value::Bytes(self.take(len)?)
            }
            5 => self.take(4).map(|_| Value::Other)?,
            wire => bail!("unsupported wire type {wire} for field {number}"),
        };
        Ok((number, value))
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Value<'a>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.0.is_empty() {
            return None;
        }
        let item = self.field();
        if item.is_err() {
            self.0 = &[];
        }
        Some(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_ports() -> Ports {
        Ports { zookeeper: 40000, coordinator: 40001, coordinator_sasl: 40002, tablet: 40003, tablet_sasl: 40004 }
    }

    #[test]
    fn paths_live_under_the_workspace_target_directory() {
        let paths = Paths::new(Path::new("/ws"));
        assert_eq!(paths.env, Path::new("/ws/target/services/fluss.env"));
        for p in [&paths.lib, &paths.data, &paths.zoo_cfg, &paths.tablet_data, &paths.remote_data, &paths.pom] {
            assert!(p.starts_with("/ws/target/services/fluss"), "{}", p.display());
        }
        assert!(paths.zookeeper_data.starts_with(&paths.data) && paths.remote_data.starts_with(&paths.data));
        assert_eq!(paths.pid(Role::Tablet), Path::new("/ws/target/services/fluss/tablet.pid"));
        assert_eq!(paths.log(Role::ZooKeeper), Path::new("/ws/target/services/fluss/zookeeper.log"));
        assert_eq!(paths.classpath(), "/ws/target/services/fluss/lib/*");
    }

    #[test]
    fn server_yaml_describes_two_listeners_and_sasl() {
        let paths = Paths::new(Path::new("/ws"));
        let coordinator = server_yaml(Role::Coordinator, sample_ports(), &paths);
        let tablet = server_yaml(Role::Tablet, sample_ports(), &paths);
        let get = |yaml: &str, key: &str| {
            yaml.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(": ")).unwrap_or_default().to_owned()
        };
        assert_eq!(get(&coordinator, "zookeeper.address"), "127.0.0.1:40000");
        assert_eq!(get(&coordinator, "bind.listeners"), "INTERNAL://127.0.0.1:40001, CLIENT://127.0.0.1:40002");
        assert_eq!(get(&tablet, "bind.listeners"), "INTERNAL://127.0.0.1:40003, CLIENT://127.0.0.1:40004");
        assert_eq!(get(&tablet, "tablet-server.id"), "0");
        assert_eq!(get(&tablet, "data.dir"), "/ws/target/services/fluss/data/tablet");
        assert_eq!(get(&tablet, "log.segment.file-size"), "4mb");
        assert_eq!(get(&tablet, "remote.log.task-interval-duration"), "1s");
        assert_eq!(get(&coordinator, "tablet-server.id"), "");
        assert_eq!(get(&coordinator, "log.segment.file-size"), "");
        for yaml in [&coordinator, &tablet] {
            assert_eq!(get(yaml, "security.protocol.map"), "CLIENT:SASL");
            assert_eq!(get(yaml, "internal.listener.name"), "INTERNAL");
            assert_eq!(
                get(yaml, "security.sasl.plain.jaas.config"),
                "org.apache.fluss.security.auth.sasl.plain.PlainLoginModule required \
                 user_actionstate=\"actionstate-secret\";"
            );
            assert_eq!(get(yaml, "remote.data.dir"), "/ws/target/services/fluss/data/remote");
        }
        assert_eq!(listener_port(&tablet, "CLIENT"), Some(40004));
        assert_eq!(listener_port(&tablet, "OTHER"), None);
    }

    #[test]
    fn ports_read_back_from_the_generated_configs() {
        let dir = std::env::temp_dir().join(format!("xtask-fluss-ports-{}", std::process::id()));
        let paths = Paths::new(&dir);
        write_configs(&paths, sample_ports()).expect("write configs");
        assert_eq!(Ports::read(&paths), Some(sample_ports()));
        assert!(configs_are_current(&paths, sample_ports()));
        let other = Ports { tablet: 40005, ..sample_ports() };
        assert!(!configs_are_current(&paths, other), "another port is another configuration");
        let tablet_yaml = paths.tablet_conf.join("server.yaml");
        let yaml = fs::read_to_string(&tablet_yaml).expect("server.yaml");
        fs::write(&tablet_yaml, yaml.replace("log.segment.file-size: 4mb\n", "")).expect("rewrite");
        assert!(!configs_are_current(&paths, sample_ports()), "a cluster started with other segments is stale");
        let zoo = fs::read_to_string(&paths.zoo_cfg).expect("zoo.cfg");
        assert!(zoo.contains("admin.enableServer=false\n") && zoo.contains("clientPortAddress=127.0.0.1\n"), "{zoo}");
        fs::remove_dir_all(&dir).expect("clean up");
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

    #[test]
    fn pom_pins_every_artifact() {
        let pom = pom_xml();
        for needle in [
            "<artifactId>fluss-server</artifactId>",
            "<artifactId>zookeeper</artifactId>",
            "<artifactId>metrics-core</artifactId>",
            "<artifactId>log4j-slf4j-impl</artifactId>",
            "<artifactId>netty-tcnative-boringssl-static</artifactId>",
            &format!("<version>{FLUSS_VERSION}</version>"),
            &format!("<version>{ZOOKEEPER_VERSION}</version>"),
        ] {
            assert!(pom.contains(needle), "pom lacks {needle}:\n{pom}");
        }
        assert!(!pom.contains("LATEST") && !pom.contains("RELEASE") && !pom.contains('['), "unpinned version:\n{pom}");
    }

    #[test]
    fn processes_are_recognised_by_main_class_and_config() {
        let paths = Paths::new(Path::new("/ws"));
        let tablet = b"java\0-Xmx512m\0-cp\0/ws/target/services/fluss/lib/*\0\
                       org.apache.fluss.server.tablet.TabletServer\0--configDir\0/ws/target/services/fluss/config/tablet\0";
        assert!(crate::services::cmdline_runs(tablet, Role::Tablet.main_class(), paths.config_arg(Role::Tablet)));
        assert!(!crate::services::cmdline_runs(
            tablet,
            Role::Coordinator.main_class(),
            paths.config_arg(Role::Coordinator)
        ));
        assert!(!crate::services::cmdline_runs(tablet, Role::Tablet.main_class(), Path::new("/elsewhere")));
    }

    #[test]
    fn requests_are_framed() {
        let mut body = Vec::new();
        put_string_field(&mut body, 1, "db");
        put_varint_field(&mut body, 2, 1);
        assert_eq!(body, [0x0a, 2, b'd', b'b', 0x10, 1]);
        let frame = request_frame(API_CREATE_DATABASE, 7, &body);
        assert_eq!(frame, [0, 0, 0, 14, 0x03, 0xe9, 0, 0, 0, 0, 0, 7, 0x0a, 2, b'd', b'b', 0x10, 1]);
        let mut long = Vec::new();
        put_varint(&mut long, 300);
        assert_eq!(long, [0xac, 0x02]);
    }

    #[test]
    fn responses_decode() {
        let mut ok = vec![0, 0, 0, 0, 3];
        ok.extend_from_slice(&[0x08, 1]);
        assert_eq!(decode_response(&ok, 3, API_METADATA).expect("ok"), [0x08, 1]);
        assert!(decode_response(&ok, 4, API_METADATA).is_err());

        let mut failed = vec![1, 0, 0, 0, 3];
        put_varint_field(&mut failed, 1, 46);
        put_string_field(&mut failed, 2, "Authentication failed");
        let err = decode_response(&failed, 3, API_AUTHENTICATE).expect_err("error").to_string();
        assert!(err.contains("AUTHENTICATE_EXCEPTION (46)") && err.contains("Authentication failed"), "{err}");

        let node = |id: u64, port: u64| {
            let mut n = Vec::new();
            put_varint_field(&mut n, 1, id);
            put_string_field(&mut n, 2, "127.0.0.1");
            put_varint_field(&mut n, 3, port);
            n
        };
        let mut metadata = Vec::new();
        put_bytes_field(&mut metadata, 1, &node(7, 40001));
        put_bytes_field(&mut metadata, 2, &node(0, 40003));
        put_bytes_field(&mut metadata, 3, b"\x08\x01");
        let decoded = decode_metadata(&metadata).expect("metadata");
        assert_eq!(decoded.coordinator, Some(ServerNode { id: 7, host: "127.0.0.1".into(), port: 40001 }));
        assert_eq!(decoded.tablet_servers, vec![ServerNode { id: 0, host: "127.0.0.1".into(), port: 40003 }]);
        assert_eq!(decoded.summary(), "coordinator 7@127.0.0.1:40001, tablet servers 0@127.0.0.1:40003");
        assert!(decode_metadata(&metadata[..metadata.len() - 1]).is_err());

        let mut versions = Vec::new();
        let mut entry = Vec::new();
        put_varint_field(&mut entry, 1, 1001);
        put_varint_field(&mut entry, 3, 0);
        put_bytes_field(&mut versions, 1, &entry);
        put_varint_field(&mut versions, 2, 1);
        assert_eq!(decode_api_versions(&versions).expect("versions"), vec![(1001, 0, 0)]);
    }
}
