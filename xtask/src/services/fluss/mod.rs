//! A local Apache Fluss cluster: `cargo xtask services up|down|status fluss`. Its jars and
//! configuration files are in [`config`], its readiness probes in [`probe`], what its env file
//! holds in [`settings`](mod@settings). The same with three tablet servers and tables
//! replicated three times, `services up fluss3`, is in [`cluster`]; it runs on this module's
//! code, which takes the number of tablet servers from a [`Layout`].
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
//!    it);
//! 3. the tablet server, on its plaintext listener, answers `Metadata` listing itself (a tablet
//!    server answers before it registers, with no tablet servers, and learns them from the
//!    coordinator once the coordinator has seen it);
//! 4. the coordinator creates a database `xtask_readiness_probe` and drops it again;
//! 5. the coordinator, on its SASL listener, accepts the test user and answers `Metadata`.
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
//! - `fluss/zookeeper.log`, `fluss/coordinator.log`, `fluss/tablet.log` — what each prints
//!   (emptied on a fresh start, appended to by a process started again);
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

pub(crate) mod cluster;
mod config;
mod probe;
mod settings;

use crate::services::artifacts::check_java;
use crate::services::env;
use crate::services::process::{
    POLL, READY_TIMEOUT, child_exited, read_pid, remove_dir_if_exists, remove_file_if_exists, resident, spawn_detached,
    stop_process, write_atomic,
};
use anyhow::{Context, Result, anyhow, bail};
use config::{
    FLUSS_VERSION, Layout, Paths, Ports, Role, SINGLE, ZOOKEEPER_JVM, ZOOKEEPER_VERSION, configs_are_current,
    ensure_jars, write_configs,
};
use probe::{FlussConn, Metadata, zookeeper_command};
use std::fs::{self, File, OpenOptions};
use std::process::Child;
use std::time::Instant;

pub(crate) use settings::FlussEnv;

/// The database the readiness probe creates and drops.
const PROBE_DATABASE: &str = "xtask_readiness_probe";

/// Starts ZooKeeper and the two Fluss servers unless the ones started here already run, waits
/// until the cluster answers, writes `target/services/fluss.env` and returns its contents.
pub(crate) fn up_fluss() -> Result<FlussEnv> {
    start(SINGLE, Start::Up)
}

/// Stops the processes `up_fluss` started, those that still run, and removes the pid and env
/// files.
pub(crate) fn down_fluss() -> Result<()> {
    down(SINGLE)
}

pub(crate) fn status_fluss() -> Result<()> {
    status(SINGLE)
}

/// What [`start`] does with a cluster that runs in part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    /// `up`: a cluster that runs, with the configuration `up` writes now, is checked and kept;
    /// a replicated one of which only tablet servers are missing gets those started on their
    /// data; anything else is stopped and started afresh.
    Up,
    /// `restart-node`: the tablet servers that do not run are started on their data, if
    /// ZooKeeper and the coordinator run; the cluster is never started afresh.
    Revive,
}

/// Starts the cluster of `layout` or the part of it that does not run, as `how` says, waits
/// until it answers, writes its env file and returns its contents.
fn start(layout: Layout, how: Start) -> Result<FlussEnv> {
    let started = Instant::now();
    let paths = Paths::current(layout)?;
    fs::create_dir_all(&paths.files.config).with_context(|| format!("creating {}", paths.files.config.display()))?;

    let running = running_pids(&paths)?;
    let ports = Ports::read(&paths).filter(|ports| configs_are_current(&paths, ports));
    let servers_run = running[..2].iter().all(Option::is_some);
    let all_run = running.iter().all(Option::is_some);
    match ports {
        Some(ports) if servers_run && (all_run || how == Start::Revive || layout.replicated()) => {
            return keep(&paths, &ports, &running, started);
        }
        _ if how == Start::Revive => bail!(
            "{}: ZooKeeper and the coordinator do not both run, or run with other settings; \
             `cargo xtask services up {0}` starts the cluster afresh",
            layout.name
        ),
        Some(_) if all_run => {}
        _ if all_run => {
            eprintln!(
                "==> {}: the running cluster was started with other server settings; starting it afresh",
                layout.name
            )
        }
        _ if running.iter().any(Option::is_some) => {
            eprintln!("==> {}: only part of the cluster runs; stopping it to start afresh", layout.name)
        }
        _ => {}
    }
    stop_all(&paths)?;
    remove_file_if_exists(&paths.files.env)?;
    check_java()?;
    ensure_jars(&paths)?;
    fresh(&paths, started)
}

/// Keeps the processes that run (`running`, in [`Paths::roles`] order), starts the others (tablet
/// servers only) on their data, waits until the cluster answers and writes the env file.
fn keep(paths: &Paths, ports: &Ports, running: &[Option<u32>], started: Instant) -> Result<FlussEnv> {
    let name = paths.layout.name;
    let mut cluster = Cluster { processes: Vec::new() };
    let mut missing = Vec::new();
    for (role, pid) in paths.roles().into_iter().zip(running) {
        match pid {
            Some(pid) => cluster.processes.push((role, Process::Running(*pid))),
            None => missing.push(role),
        }
    }
    if missing.is_empty() {
        let pids: Vec<String> = running.iter().flatten().map(u32::to_string).collect();
        eprintln!("==> {name}: already running (pids {}); checking that it answers", pids.join(", "));
    } else {
        check_java()?;
        ensure_jars(paths)?;
        for role in missing {
            spawn(paths, role, &mut cluster)?;
            let pid = cluster.pid(role).unwrap_or_default();
            eprintln!("==> {name}: {} started on its data (pid {pid}), port {}", role.label(), ports.of(role).plain);
        }
    }
    let env = FlussEnv::new(paths.layout, ports, &cluster.pids(paths));
    if let Err(e) = wait_until_ready(&env, paths, ports, &mut || cluster.exited(paths)) {
        cluster.stop_started(paths);
        return Err(
            e.context(format!("the running cluster does not answer; `cargo xtask services down {name}` stops it"))
        );
    }
    write_atomic(&paths.files.env, &env.render())?;
    eprintln!(
        "==> {name}: ready in {:.1}s at {} (SASL/PLAIN {})",
        started.elapsed().as_secs_f64(),
        env.client.bootstrap,
        env.client.sasl_bootstrap
    );
    Ok(env)
}

/// Starts the cluster afresh: new ports and configuration files, empty data directories and
/// logs; then waits until it answers and writes the env file.
fn fresh(paths: &Paths, started: Instant) -> Result<FlussEnv> {
    let ports = Ports::free(paths.layout.tablets)?;
    write_configs(paths, &ports)?;
    remove_dir_if_exists(&paths.data)?;
    let tablet_data = paths.tablets.iter().map(|t| &t.data);
    for dir in [&paths.zookeeper_data, &paths.remote_data, &paths.plugins].into_iter().chain(tablet_data) {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    for role in paths.roles() {
        File::create(paths.log(role)).with_context(|| format!("creating {}", paths.log(role).display()))?;
    }

    let mut cluster = Cluster { processes: Vec::new() };
    let env = match start_all(paths, &ports, &mut cluster) {
        Ok(env) => env,
        Err(e) => {
            eprintln!("==> {}: stopping what did not come up", paths.layout.name);
            cluster.stop_started(paths);
            return Err(e);
        }
    };
    write_atomic(&paths.files.env, &env.render())?;
    let pids: Vec<String> = env.pids().iter().map(u32::to_string).collect();
    eprintln!(
        "==> {}: ready in {:.1}s at {} (SASL/PLAIN {}), pids {}; settings in {}",
        paths.layout.name,
        started.elapsed().as_secs_f64(),
        env.client.bootstrap,
        env.client.sasl_bootstrap,
        pids.join(" "),
        paths.files.env.display()
    );
    Ok(env)
}

/// Stops the processes that `up` started for `layout`, those that still run, and removes the
/// pid and env files.
fn down(layout: Layout) -> Result<()> {
    let paths = Paths::current(layout)?;
    let started = Instant::now();
    let stopped = stop_all(&paths)?;
    if stopped == 0 {
        eprintln!("==> {}: not running", layout.name);
    } else {
        eprintln!("==> {}: stopped in {:.1}s", layout.name, started.elapsed().as_secs_f64());
    }
    remove_file_if_exists(&paths.files.env)
}

/// Prints what runs of the cluster of `layout` and whether it answers.
fn status(layout: Layout) -> Result<()> {
    let paths = Paths::current(layout)?;
    let running = running_pids(&paths)?;
    if running.iter().all(Option::is_none) {
        println!("{}: not running", layout.name);
        return Ok(());
    }
    println!("{}: Apache Fluss {FLUSS_VERSION}, ZooKeeper {ZOOKEEPER_VERSION}", layout.name);
    for (role, pid) in paths.roles().into_iter().zip(running) {
        match pid {
            Some(pid) => {
                let rss = resident(pid).map(|memory| format!(", {memory}"));
                println!("  {:<11} running, pid {pid}{}", paths.name(role), rss.unwrap_or_default());
            }
            None => println!("  {:<11} not running", paths.name(role)),
        }
    }
    let parse = |text: &str| FlussEnv::parse(layout, text);
    let Some(env) = env::read_for_status(&paths.files.env, "the cluster", parse)? else { return Ok(()) };
    match zookeeper_command(&env.zookeeper, "srvr") {
        Ok(answer) => {
            let mode = answer.lines().find(|l| l.starts_with("Mode:")).unwrap_or("answers");
            println!("  zookeeper   {}: {mode}", env.zookeeper);
        }
        Err(e) => println!("  zookeeper   {}: does not answer: {e:#}", env.zookeeper),
    }
    env.client.print_status(11, &|addr, plain| Ok(FlussConn::open(addr, plain)?.metadata()?.summary()));
    for (id, listeners) in Ports::read(&paths).map(|ports| ports.tablets).unwrap_or_default().into_iter().enumerate() {
        let (name, addr) = (paths.name(Role::Tablet(id)), listeners.plain_addr());
        match FlussConn::open(&addr, None).and_then(|mut conn| conn.metadata()) {
            Ok(metadata) => println!("  {name:<11} {addr}: answers ({})", metadata.summary()),
            Err(e) => println!("  {name:<11} {addr}: does not answer: {e:#}"),
        }
    }
    println!("  env file    {}", paths.files.env.display());
    println!("  logs        {}/*.log", paths.files.dir.display());
    Ok(())
}

/// Stops tablet server `id` of the cluster of `layout` if it runs (SIGTERM, SIGKILL after
/// 30 s), then starts it, and any other tablet server that does not run, on its data, and waits
/// until the cluster answers with every tablet server registered; rewrites the env file.
fn restart_tablet(layout: Layout, id: usize) -> Result<FlussEnv> {
    if id >= layout.tablets {
        bail!("{} has tablet servers 0 to {}, not {id}", layout.name, layout.tablets - 1);
    }
    let paths = Paths::current(layout)?;
    if !running_pids(&paths)?[..2].iter().all(Option::is_some) {
        bail!("{0}: the cluster does not run; `cargo xtask services up {0}` starts it", layout.name);
    }
    let role = Role::Tablet(id);
    if let Some(pid) = read_pid(&paths.pid(role))?.filter(|pid| paths.is_ours(role, *pid)) {
        let started = Instant::now();
        eprintln!("==> {}: stopping {} (pid {pid})", layout.name, role.label());
        stop_process(pid)?;
        eprintln!("==> {}: {} stopped in {:.1}s", layout.name, role.label(), started.elapsed().as_secs_f64());
    }
    remove_file_if_exists(&paths.pid(role))?;
    start(layout, Start::Revive)
}

/// The recorded pid of each role that still runs our process, in [`Paths::roles`] order.
fn running_pids(paths: &Paths) -> Result<Vec<Option<u32>>> {
    paths
        .roles()
        .into_iter()
        .map(|role| Ok(read_pid(&paths.pid(role))?.filter(|pid| paths.is_ours(role, *pid))))
        .collect()
}

/// Stops whichever of our processes run: the tablet servers (side by side), then the
/// coordinator, then ZooKeeper; removes the pid files and returns how many were stopped. Every
/// process is stopped even when stopping another one failed; the first error is returned.
fn stop_all(paths: &Paths) -> Result<usize> {
    let tablets: Vec<Role> = paths.roles().into_iter().filter(|role| matches!(role, Role::Tablet(_))).collect();
    let mut results: Vec<Result<bool>> = std::thread::scope(|scope| {
        let stops: Vec<_> = tablets.iter().map(|role| scope.spawn(move || stop_role(paths, *role))).collect();
        stops.into_iter().map(|h| h.join().unwrap_or_else(|_| bail!("a stopping thread panicked"))).collect()
    });
    for role in [Role::Coordinator, Role::ZooKeeper] {
        results.push(stop_role(paths, role));
    }
    let mut stopped = 0;
    for result in results {
        stopped += usize::from(result?);
    }
    Ok(stopped)
}

/// Stops the process of `role` if its recorded pid still runs it, and removes its pid file;
/// whether there was one to stop.
fn stop_role(paths: &Paths, role: Role) -> Result<bool> {
    let name = paths.layout.name;
    let pid_file = paths.pid(role);
    let stopped = match read_pid(&pid_file)? {
        Some(pid) if paths.is_ours(role, pid) => {
            eprintln!("==> {name}: stopping the {} (pid {pid})", role.label());
            stop_process(pid).map(|()| true)
        }
        Some(pid) => {
            eprintln!("==> {name}: pid {pid} no longer runs the {}; nothing to stop", role.label());
            Ok(false)
        }
        None => Ok(false),
    };
    remove_file_if_exists(&pid_file)?;
    stopped
}

/// A process of the cluster: one this `up` started, or one that already ran.
#[derive(Debug)]
enum Process {
    Started(Child),
    Running(u32),
}

/// The cluster's processes as this `up` found and started them, so that a failed start can
/// stop the ones it started.
#[derive(Debug)]
struct Cluster {
    processes: Vec<(Role, Process)>,
}

impl Cluster {
    fn pid(&self, role: Role) -> Option<u32> {
        self.processes.iter().find(|(r, _)| *r == role).map(|(_, process)| match process {
            Process::Started(child) => child.id(),
            Process::Running(pid) => *pid,
        })
    }

    /// Every process's pid, in [`Paths::roles`] order (0 for one not started yet).
    fn pids(&self, paths: &Paths) -> Vec<u32> {
        paths.roles().into_iter().map(|role| self.pid(role).unwrap_or_default()).collect()
    }

    /// Why the cluster cannot come up any more: one of its processes exited.
    fn exited(&mut self, paths: &Paths) -> Option<(Role, String)> {
        self.processes.iter_mut().find_map(|(role, process)| {
            let who = format!("the {}", role.label());
            let why = match process {
                Process::Started(child) => child_exited(child, &who),
                Process::Running(pid) => (!paths.is_ours(*role, *pid)).then(|| format!("{who} (pid {pid}) exited")),
            };
            Some((*role, why?))
        })
    }

    /// Stops the processes this `up` started, the last started first, and removes their pid
    /// files.
    fn stop_started(mut self, paths: &Paths) {
        while let Some((role, process)) = self.processes.pop() {
            if let Process::Started(mut child) = process {
                if child.try_wait().ok().flatten().is_none() {
                    let _ = stop_process(child.id());
                }
                let _ = child.wait();
                let _ = remove_file_if_exists(&paths.pid(role));
            }
        }
    }
}

/// Starts ZooKeeper, waits until it answers, then starts the coordinator and the tablet
/// servers and waits until the cluster answers.
fn start_all(paths: &Paths, ports: &Ports, cluster: &mut Cluster) -> Result<FlussEnv> {
    let name = paths.layout.name;
    let zookeeper = format!("127.0.0.1:{}", ports.zookeeper);
    spawn(paths, Role::ZooKeeper, cluster)?;
    eprintln!("==> {name}: ZooKeeper {ZOOKEEPER_VERSION} started, waiting until it answers on {zookeeper}");
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if let Some((role, why)) = cluster.exited(paths) {
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

    for role in &paths.roles()[1..] {
        spawn(paths, *role, cluster)?;
    }
    let env = FlussEnv::new(paths.layout, ports, &cluster.pids(paths));
    let tablets: Vec<String> = env.tablet_pids.iter().map(u32::to_string).collect();
    eprintln!(
        "==> {name}: coordinator (pid {}) and {} tablet server{} {FLUSS_VERSION} started (pids {}), waiting until \
         they answer on {}",
        env.coordinator_pid,
        tablets.len(),
        if tablets.len() == 1 { "" } else { "s" },
        tablets.join(" "),
        env.client.bootstrap
    );
    wait_until_ready(&env, paths, ports, &mut || cluster.exited(paths))?;
    Ok(env)
}

/// Starts the process of `role`, its output appended to its log, and records its pid.
fn spawn(paths: &Paths, role: Role, cluster: &mut Cluster) -> Result<()> {
    let log_path = paths.log(role);
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .with_context(|| format!("opening {}", log_path.display()))?;
    let jvm = if role == Role::ZooKeeper { ZOOKEEPER_JVM } else { paths.layout.server_jvm };
    let mut cmd = jvm.command(&paths.files.log4j, &[], &paths.classpath(), role.main_class());
    match role {
        Role::ZooKeeper => cmd.arg(&paths.zoo_cfg),
        Role::Coordinator | Role::Tablet(_) => cmd.arg("--configDir").arg(paths.config_arg(role)),
    };
    // Fluss looks for file system and other plugins there; none are needed, but an absent
    // directory is logged as a warning. Without the variable it looks in `plugins` in its
    // working directory, the same directory: a test that starts a server again with its
    // command line alone gets the same.
    cmd.env("FLUSS_PLUGINS_DIR", &paths.plugins).current_dir(&paths.files.dir);
    let child = spawn_detached(&mut cmd, log, &role.label())?;
    write_atomic(&paths.pid(role), &format!("{}\n", child.id()))?;
    cluster.processes.push((role, Process::Started(child)));
    Ok(())
}

/// Polls the cluster until the readiness checks of the module documentation pass, a process
/// exits (`exited` says which), or [`READY_TIMEOUT`] passes.
fn wait_until_ready(
    env: &FlussEnv,
    paths: &Paths,
    ports: &Ports,
    exited: &mut dyn FnMut() -> Option<(Role, String)>,
) -> Result<()> {
    crate::services::probe::wait_until_ready(
        &mut || exited().map(|(role, why)| anyhow!("{why} before the cluster answered; {}", log_tail(paths, role, 40))),
        &mut || check_ready(env, ports),
        &|last_error| {
            let logs: Vec<String> = paths.roles()[1..].iter().map(|role| log_tail(paths, *role, 15)).collect();
            anyhow!(
                "the {} cluster did not answer within {}s (last attempt: {last_error:#}); {}",
                paths.layout.name,
                READY_TIMEOUT.as_secs(),
                logs.join("\n")
            )
        },
    )
}

fn check_ready(env: &FlussEnv, ports: &Ports) -> Result<()> {
    let mut plain = FlussConn::open(&env.client.bootstrap, None)?;
    let metadata = plain.metadata()?;
    let missing = unlisted(&metadata, ports.tablets.len());
    if !missing.is_empty() {
        bail!("tablet servers {missing:?} have not registered yet ({})", metadata.summary());
    }
    // A tablet server answers before it has registered, and learns the cluster from the
    // coordinator once the coordinator has seen it register: a tablet server started again
    // after a SIGKILL waits, until the session of the one killed expires, with an empty list.
    for (id, listeners) in ports.tablets.iter().enumerate() {
        let addr = listeners.plain_addr();
        let answer = FlussConn::open(&addr, None)
            .and_then(|mut conn| conn.metadata())
            .with_context(|| format!("tablet server {id} on {addr}"))?;
        let unknown = unlisted(&answer, ports.tablets.len());
        if !unknown.is_empty() {
            bail!("tablet server {id} does not know tablet servers {unknown:?} yet ({})", answer.summary());
        }
    }
    plain.create_database(PROBE_DATABASE).context("creating the probe database")?;
    plain.drop_database(PROBE_DATABASE).context("dropping the probe database")?;
    let mut sasl = FlussConn::open(&env.client.sasl_bootstrap, env.client.plain())?;
    sasl.metadata().context("metadata on the SASL listener")?;
    Ok(())
}

/// The tablet servers `0..tablets` that a `Metadata` answer does not list.
fn unlisted(metadata: &Metadata, tablets: usize) -> Vec<usize> {
    (0..tablets).filter(|id| !metadata.tablet_servers.iter().any(|s| s.id == *id as i32)).collect()
}

fn log_tail(paths: &Paths, role: Role, lines: usize) -> String {
    crate::services::process::log_tail(&paths.log(role), lines)
}
