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
use crate::services::env::{self, SASL_PASSWORD, SASL_USERNAME};
use crate::services::process::{
    POLL, READY_TIMEOUT, java, process_runs, read_pid, remove_file_if_exists, rss_kib, spawn_detached, stop_process,
    tail, write_atomic,
};
use anyhow::{Context, Result, bail};
use config::{
    KAFKA_VERSION, LOG4J2_PROPERTIES, Paths, Ports, ensure_jars, format_storage, free_ports, ports_from_config,
    sasl_client_properties, server_properties,
};
use probe::probe;
use std::fs::{self, File};
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

const JVM_OPTIONS: &[&str] = &[
    "-Xmx512m",
    "-Xms256m",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
];

/// How tests and benchmarks reach the broker; the contents of `target/services/kafka.env`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KafkaEnv {
    /// `host:port` of the plaintext listener.
    pub(crate) bootstrap: String,
    /// `host:port` of the SASL_PLAINTEXT listener (mechanism PLAIN).
    pub(crate) sasl_bootstrap: String,
    pub(crate) sasl_username: String,
    pub(crate) sasl_password: String,
    /// The broker's process id.
    pub(crate) pid: u32,
}

impl KafkaEnv {
    fn new(ports: Ports, pid: u32) -> Self {
        Self {
            bootstrap: format!("127.0.0.1:{}", ports.plaintext),
            sasl_bootstrap: format!("127.0.0.1:{}", ports.sasl),
            sasl_username: SASL_USERNAME.to_owned(),
            sasl_password: SASL_PASSWORD.to_owned(),
            pid,
        }
    }

    /// The settings as environment variables, in the order of the env file.
    pub(crate) fn vars(&self) -> [(&'static str, String); 5] {
        [
            ("KAFKA_BOOTSTRAP", self.bootstrap.clone()),
            ("KAFKA_SASL_BOOTSTRAP", self.sasl_bootstrap.clone()),
            ("KAFKA_SASL_USERNAME", self.sasl_username.clone()),
            ("KAFKA_SASL_PASSWORD", self.sasl_password.clone()),
            ("KAFKA_PID", self.pid.to_string()),
        ]
    }

    pub(crate) fn render(&self) -> String {
        env::render(&self.vars())
    }

    fn parse(text: &str) -> Result<Self> {
        let get = |key: &str| env::value(text, key);
        Ok(Self {
            bootstrap: get("KAFKA_BOOTSTRAP")?,
            sasl_bootstrap: get("KAFKA_SASL_BOOTSTRAP")?,
            sasl_username: get("KAFKA_SASL_USERNAME")?,
            sasl_password: get("KAFKA_SASL_PASSWORD")?,
            pid: get("KAFKA_PID")?.parse().context("KAFKA_PID is not a pid")?,
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
    fs::create_dir_all(&paths.config).with_context(|| format!("creating {}", paths.config.display()))?;

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
            write_atomic(&paths.env, &env.render())?;
            eprintln!("==> kafka: {} (SASL/PLAIN {}), pid {pid}", env.bootstrap, env.sasl_bootstrap);
            return Ok(env);
        }
        eprintln!("==> kafka: pid {pid} from {} no longer runs the broker; starting afresh", paths.pid.display());
        remove_file_if_exists(&paths.pid)?;
    }
    remove_file_if_exists(&paths.env)?;

    check_java()?;
    ensure_jars(&paths)?;

    let ports = free_ports()?;
    write_atomic(&paths.server_properties, &server_properties(ports, &paths.data))?;
    write_atomic(&paths.log4j, LOG4J2_PROPERTIES)?;
    write_atomic(&paths.sasl_client, &sasl_client_properties(SASL_USERNAME, SASL_PASSWORD))?;

    let log = File::create(&paths.log).with_context(|| format!("creating {}", paths.log.display()))?;
    format_storage(&paths, &log)?;

    let mut cmd = Command::new(java());
    cmd.args(JVM_OPTIONS)
        .arg(format!("-Dlog4j2.configurationFile={}", paths.log4j.display()))
        .arg(format!("-Dkafka.logs.dir={}", paths.dir.display()))
        .arg("-cp")
        .arg(paths.classpath())
        .arg("kafka.Kafka")
        .arg(&paths.server_properties)
        .current_dir(&paths.dir);
    let mut child = spawn_detached(&mut cmd, log, "Kafka broker")?;
    let pid = child.id();
    write_atomic(&paths.pid, &format!("{pid}\n"))?;
    let env = KafkaEnv::new(ports, pid);
    eprintln!("==> kafka: broker {KAFKA_VERSION} started (pid {pid}), waiting until it answers on {}", env.bootstrap);

    let mut exited = || match child.try_wait() {
        Ok(Some(status)) => Some(format!("it exited ({status})")),
        Ok(None) => None,
        Err(e) => Some(format!("waiting for it failed: {e}")),
    };
    if let Err(e) = wait_until_ready(&env, &paths, &mut exited) {
        if child.try_wait().ok().flatten().is_none() {
            eprintln!("==> kafka: stopping the broker that did not come up");
            let _ = stop_process(pid);
            let _ = child.wait();
        }
        remove_file_if_exists(&paths.pid)?;
        return Err(e);
    }
    write_atomic(&paths.env, &env.render())?;
    eprintln!(
        "==> kafka: ready in {:.1}s at {} (SASL/PLAIN {}), pid {pid}; settings in {}",
        started.elapsed().as_secs_f64(),
        env.bootstrap,
        env.sasl_bootstrap,
        paths.env.display()
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
    remove_file_if_exists(&paths.env)
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
    let env = match fs::read_to_string(&paths.env) {
        Ok(text) => KafkaEnv::parse(&text).with_context(|| format!("reading {}", paths.env.display()))?,
        Err(_) => {
            println!("  {} missing: the broker has not answered yet", paths.env.display());
            return Ok(());
        }
    };
    match probe(&env.bootstrap, None) {
        Ok(info) => println!("  plaintext {}: answers ({})", env.bootstrap, info.summary()),
        Err(e) => println!("  plaintext {}: does not answer: {e:#}", env.bootstrap),
    }
    match probe(&env.sasl_bootstrap, Some((&env.sasl_username, &env.sasl_password))) {
        Ok(info) => {
            println!(
                "  sasl      {}: PLAIN as {} accepted, answers ({})",
                env.sasl_bootstrap,
                env.sasl_username,
                info.summary()
            )
        }
        Err(e) => println!("  sasl      {}: does not answer: {e:#}", env.sasl_bootstrap),
    }
    if let Some(rss) = rss_kib(pid) {
        println!("  memory    {:.0} MiB resident", rss as f64 / 1024.0);
    }
    println!("  env file  {}", paths.env.display());
    println!("  log       {}", paths.log.display());
    Ok(())
}

/// Whether `pid` is a live broker started with our `server.properties`; a pid that was reused by
/// another process, or a broker that is exiting, is not.
fn process_is_ours(pid: u32, paths: &Paths) -> bool {
    process_runs(pid, "kafka.Kafka", &paths.server_properties)
}

/// Polls the broker until it answers on both client listeners, it exits (`exited` returns why),
/// or [`READY_TIMEOUT`] passes.
fn wait_until_ready(env: &KafkaEnv, paths: &Paths, exited: &mut dyn FnMut() -> Option<String>) -> Result<()> {
    let started = Instant::now();
    loop {
        if let Some(why) = exited() {
            bail!(
                "the Kafka broker stopped before it answered: {why}; last lines of {}:\n{}",
                paths.log.display(),
                tail(&paths.log, 40)
            );
        }
        let ready = probe(&env.bootstrap, None)
            .and_then(|_| probe(&env.sasl_bootstrap, Some((&env.sasl_username, &env.sasl_password))));
        let last_error = match ready {
            Ok(_) => return Ok(()),
            Err(e) => e,
        };
        if started.elapsed() >= READY_TIMEOUT {
            bail!(
                "the Kafka broker did not answer within {}s (last attempt: {last_error:#}); last lines of {}:\n{}",
                READY_TIMEOUT.as_secs(),
                paths.log.display(),
                tail(&paths.log, 40)
            );
        }
        std::thread::sleep(POLL);
    }
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
