//! The local Apache Kafka broker: `cargo xtask services up|down|status kafka`. Its jars and
//! configuration files are in [`config`], its readiness probe in [`probe`](mod@probe). A
//! replicated cluster of three nodes from the same jars, `services up kafka3`, is in [`cluster`].
//!
//! `services up kafka` runs one Apache Kafka broker ([`KAFKA_VERSION`]) as a local JVM process in
//! KRaft combined mode (broker and controller in one process, node id 1). It needs Java 17 or
//! newer, and Maven the first time, to resolve `org.apache.kafka:kafka_2.13` and its runtime
//! dependencies from Maven Central. The jars are copied once into `target/services/kafka/lib/`
//! (Maven keeps its own copy in the local repository, normally `~/.m2/repository`), so later starts
//! need neither Maven nor the network.
//!
//! Each start picks free ports on 127.0.0.1 for three listeners:
//!
//! - `PLAINTEXT` — clients without authentication;
//! - `SASL_PLAINTEXT` — clients authenticating with SASL/PLAIN as [`SASL_USERNAME`] /
//!   [`SASL_PASSWORD`], the only user the broker knows;
//! - `CONTROLLER` — the KRaft quorum, internal to the broker.
//!
//! The data directory is wiped and formatted on each start, so every run begins with an empty
//! cluster (no topics, a new cluster id). `up` returns once the broker answers an `ApiVersions`
//! and a `Metadata` request on the plaintext listener and accepts the test user on the SASL
//! listener; it is a no-op when a broker it started is already running. `down` stops only the
//! process whose pid `up` recorded (and only if that pid still runs this broker); `status`
//! reports what runs and whether it answers.
//!
//! Files, all under `<workspace root>/target/services/` (the workspace's own `target/`, whatever
//! `CARGO_TARGET_DIR` says):
//!
//! - `kafka.env` — the broker's addresses, written once it answers, removed by `down`;
//! - `kafka/pom.xml`, `kafka/lib/` — the resolved broker jars;
//! - `kafka/config/` — `server.properties`, `log4j2.properties`, and `sasl-client.properties`
//!   (a client configuration for the Kafka command-line tools on the SASL listener);
//! - `kafka/data/` — log and metadata directory;
//! - `kafka/broker.log` — everything the broker and the storage formatter print;
//! - `kafka/kafka.pid` — the broker's pid.
//!
//! # How tests and benchmarks find the broker
//!
//! `kafka.env` holds one `KEY=VALUE` per line, no quoting:
//!
//! ```text
//! KAFKA_BOOTSTRAP=127.0.0.1:40123
//! KAFKA_SASL_BOOTSTRAP=127.0.0.1:40124
//! KAFKA_SASL_USERNAME=actionstate
//! KAFKA_SASL_PASSWORD=actionstate-secret
//! KAFKA_PID=12345
//! ```
//!
//! `up` also prints these lines on stdout, so a shell can take them over with
//! `set -a; . target/services/kafka.env; set +a`. A test looks for the settings in this order:
//!
//! 1. the process environment (`KAFKA_BOOTSTRAP` and the others), which lets a caller point the
//!    tests at any broker;
//! 2. the file `target/services/kafka.env` under the workspace root, found from the test crate's
//!    `CARGO_MANIFEST_DIR` by walking up to the directory whose `Cargo.toml` has `[workspace]`;
//!    each line splits at its first `=`; unknown keys are ignored;
//! 3. neither: the test prints the `ACTIONSTATE-SKIP` marker and returns, which `cargo xtask ci`
//!    counts as a failure.
//!
//! Topics are not created automatically (`auto.create.topics.enable=false`); a test creates the
//! topics it uses, with replication factor 1, and should give them unique names because the broker
//! is shared by all tests of a run.

pub(crate) mod cluster;
mod config;
mod probe;

use crate::services::artifacts::check_java;
use crate::services::config::{Gc, Jvm};
use crate::services::env::{self, Client, SASL_PASSWORD, SASL_USERNAME};
use crate::services::process::{
    child_exited, log_tail, process_runs, read_pid, remove_file_if_exists, resident, spawn_detached, stop_process,
    write_atomic,
};
use anyhow::{Context, Result, anyhow};
use config::{
    KAFKA_VERSION, Paths, Ports, ensure_jars, format_storage, free_ports, log4j2_properties, ports_from_config,
    sasl_client_properties, server_properties,
};
use probe::probe;
use std::fs::{self, File};
use std::path::PathBuf;
use std::time::Instant;

const JVM: Jvm = Jvm { max_heap: "512m", initial_heap: "256m", gc: Gc::G1 };

/// How tests and benchmarks reach the broker; the contents of `target/services/kafka.env`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KafkaEnv {
    /// The plaintext and the SASL_PLAINTEXT listener (mechanism PLAIN), and the user.
    pub(crate) client: Client,
    /// The broker's process id.
    pub(crate) pid: u32,
}

impl KafkaEnv {
    fn new(ports: Ports, pid: u32) -> Self {
        Self { client: Client::local(ports.plaintext, ports.sasl), pid }
    }

    /// The settings as environment variables, in the order of the env file.
    pub(crate) fn vars(&self) -> Vec<(String, String)> {
        let mut vars = self.client.vars("KAFKA");
        vars.push(("KAFKA_PID".to_owned(), self.pid.to_string()));
        vars
    }

    pub(crate) fn render(&self) -> String {
        env::render(&self.vars())
    }

    fn parse(text: &str) -> Result<Self> {
        Ok(Self {
            client: Client::parse(text, "KAFKA")?,
            pid: env::value(text, "KAFKA_PID")?.parse().context("KAFKA_PID is not a pid")?,
        })
    }
}

/// The broker's `log.dirs`: its partitions' directories are `<this>/<topic>-<partition>`.
pub(crate) fn kafka_log_dir() -> Result<PathBuf> {
    Ok(Paths::current()?.data)
}

/// Starts the broker unless one started here already runs, waits until it answers, writes
/// `target/services/kafka.env` and returns its contents.
pub(crate) fn up_kafka() -> Result<KafkaEnv> {
    let started = Instant::now();
    let paths = Paths::current()?;
    fs::create_dir_all(&paths.files.config).with_context(|| format!("creating {}", paths.files.config.display()))?;

    if let Some(pid) = read_pid(&paths.pid)? {
        if process_is_ours(pid, &paths) {
            let ports = fs::read_to_string(&paths.server_properties)
                .ok()
                .and_then(|text| ports_from_config(&text))
                .with_context(|| {
                    format!("pid {pid} runs, but {} has no listeners", paths.server_properties.display())
                })?;
            let env = KafkaEnv::new(ports, pid);
            eprintln!("==> kafka: broker already running (pid {pid}); checking that it answers");
            wait_until_ready(&env, &paths, &mut || (!process_is_ours(pid, &paths)).then(|| "it exited".to_owned()))
                .context("the running broker does not answer; `cargo xtask services down` stops it")?;
            write_atomic(&paths.files.env, &env.render())?;
            eprintln!("==> kafka: {} (SASL/PLAIN {}), pid {pid}", env.client.bootstrap, env.client.sasl_bootstrap);
            return Ok(env);
        }
        eprintln!("==> kafka: pid {pid} from {} no longer runs the broker; starting afresh", paths.pid.display());
        remove_file_if_exists(&paths.pid)?;
    }
    remove_file_if_exists(&paths.files.env)?;

    check_java()?;
    ensure_jars(&paths)?;

    let ports = free_ports()?;
    write_atomic(&paths.server_properties, &server_properties(ports, &paths.data))?;
    write_atomic(&paths.files.log4j, &log4j2_properties())?;
    write_atomic(&paths.sasl_client, &sasl_client_properties(SASL_USERNAME, SASL_PASSWORD))?;

    let log = File::create(&paths.log).with_context(|| format!("creating {}", paths.log.display()))?;
    format_storage(&paths, &log)?;

    let logs_dir = format!("-Dkafka.logs.dir={}", paths.files.dir.display());
    let mut cmd = JVM.command(&paths.files.log4j, &[logs_dir], &paths.classpath(), "kafka.Kafka");
    cmd.arg(&paths.server_properties).current_dir(&paths.files.dir);
    let mut child = spawn_detached(&mut cmd, log, "Kafka broker")?;
    let pid = child.id();
    write_atomic(&paths.pid, &format!("{pid}\n"))?;
    let env = KafkaEnv::new(ports, pid);
    eprintln!(
        "==> kafka: broker {KAFKA_VERSION} started (pid {pid}), waiting until it answers on {}",
        env.client.bootstrap
    );

    let mut exited = || child_exited(&mut child, "it");
    if let Err(e) = wait_until_ready(&env, &paths, &mut exited) {
        if child.try_wait().ok().flatten().is_none() {
            eprintln!("==> kafka: stopping the broker that did not come up");
            let _ = stop_process(pid);
            let _ = child.wait();
        }
        remove_file_if_exists(&paths.pid)?;
        return Err(e);
    }
    write_atomic(&paths.files.env, &env.render())?;
    eprintln!(
        "==> kafka: ready in {:.1}s at {} (SASL/PLAIN {}), pid {pid}; settings in {}",
        started.elapsed().as_secs_f64(),
        env.client.bootstrap,
        env.client.sasl_bootstrap,
        paths.files.env.display()
    );
    Ok(env)
}

/// Stops the broker `up_kafka` started, if it still runs, and removes the pid and env files.
pub(crate) fn down_kafka() -> Result<()> {
    let paths = Paths::current()?;
    match read_pid(&paths.pid)? {
        None => eprintln!("==> kafka: not running"),
        Some(pid) if process_is_ours(pid, &paths) => {
            let started = Instant::now();
            eprintln!("==> kafka: stopping the broker (pid {pid})");
            stop_process(pid)?;
            eprintln!("==> kafka: stopped in {:.1}s", started.elapsed().as_secs_f64());
        }
        Some(pid) => eprintln!("==> kafka: pid {pid} no longer runs the broker; nothing to stop"),
    }
    remove_file_if_exists(&paths.pid)?;
    remove_file_if_exists(&paths.files.env)
}

/// Prints whether the broker runs and answers.
pub(crate) fn status_kafka() -> Result<()> {
    let paths = Paths::current()?;
    let pid = match read_pid(&paths.pid)? {
        Some(pid) if process_is_ours(pid, &paths) => pid,
        Some(pid) => {
            println!("kafka: not running (stale pid file names pid {pid}; `services down` removes it)");
            return Ok(());
        }
        None => {
            println!("kafka: not running");
            return Ok(());
        }
    };
    println!("kafka: running, pid {pid}, Apache Kafka {KAFKA_VERSION}");
    let Some(env) = env::read_for_status(&paths.files.env, "the broker", KafkaEnv::parse)? else { return Ok(()) };
    env.client.print_status(9, &|addr, plain| probe(addr, plain).map(|info| info.summary()));
    if let Some(memory) = resident(pid) {
        println!("  memory    {memory}");
    }
    println!("  env file  {}", paths.files.env.display());
    println!("  log       {}", paths.log.display());
    Ok(())
}

/// Whether `pid` is a live broker started with our `server.properties`; a pid that was reused by
/// another process, or a broker that is exiting, is not.
fn process_is_ours(pid: u32, paths: &Paths) -> bool {
    process_runs(pid, "kafka.Kafka", &paths.server_properties)
}

/// Polls the broker until it answers on both client listeners, it exits (`exited` returns why),
/// or [`READY_TIMEOUT`](crate::services::process::READY_TIMEOUT) passes.
fn wait_until_ready(env: &KafkaEnv, paths: &Paths, exited: &mut dyn FnMut() -> Option<String>) -> Result<()> {
    let log = || log_tail(&paths.log, 40);
    let client = &env.client;
    crate::services::probe::wait_until_ready(
        &mut || exited().map(|why| anyhow!("the Kafka broker stopped before it answered: {why}; {}", log())),
        &mut || probe(&client.bootstrap, None).and_then(|_| probe(&client.sasl_bootstrap, client.plain())).map(drop),
        &|last_error| {
            anyhow!(
                "the Kafka broker did not answer within {}s (last attempt: {last_error:#}); {}",
                crate::services::process::READY_TIMEOUT.as_secs(),
                log()
            )
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::services::process::cmdline_runs;
    use std::path::Path;

    fn sample_ports() -> Ports {
        Ports { plaintext: 40001, sasl: 40002, controller: 40003 }
    }

    #[test]
    fn env_file_round_trips_and_has_the_documented_keys() {
        let env = KafkaEnv::new(sample_ports(), 4242);
        let text = env.render();
        assert_eq!(
            text,
            "KAFKA_BOOTSTRAP=127.0.0.1:40001\nKAFKA_SASL_BOOTSTRAP=127.0.0.1:40002\n\
             KAFKA_SASL_USERNAME=actionstate\nKAFKA_SASL_PASSWORD=actionstate-secret\nKAFKA_PID=4242\n"
        );
        assert_eq!(KafkaEnv::parse(&text).expect("parse"), env);
        assert!(KafkaEnv::parse("KAFKA_BOOTSTRAP=127.0.0.1:1\n").is_err());
    }

    fn cmdline_runs_broker(cmdline: &[u8], config: &Path) -> bool {
        cmdline_runs(cmdline, "kafka.Kafka", config)
    }

    #[test]
    fn broker_process_is_recognised_by_its_command_line() {
        let config = Path::new("/ws/target/services/kafka/config/server.properties");
        let ours = b"java\0-Xmx512m\0-cp\0/ws/target/services/kafka/lib/*\0kafka.Kafka\0\
                     /ws/target/services/kafka/config/server.properties\0";
        assert!(cmdline_runs_broker(ours, config));
        let other_config = b"java\0kafka.Kafka\0/elsewhere/server.properties\0";
        assert!(!cmdline_runs_broker(other_config, config));
        assert!(!cmdline_runs_broker(b"sleep\x00100\x00", config));
        assert!(!cmdline_runs_broker(b"", config));
    }
}
