//! Local services for integration tests and benchmarks: `cargo xtask services up|down|status
//! [kafka] [fluss]`. Without a service named, `up` starts Kafka, and `down` and `status` cover
//! both. The Fluss cluster lives in `fluss.rs` and shares the helpers here.
//!
//! # Kafka
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

use anyhow::{Context, Result, bail};
use std::fs::{self, File};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The Apache Kafka release the broker runs (`org.apache.kafka:kafka_2.13`).
pub(crate) const KAFKA_VERSION: &str = "4.3.1";
/// slf4j API 2.x; the Kafka poms name 1.7, which would not find the log4j 2 binding.
const SLF4J_VERSION: &str = "2.0.17";
/// The log4j 2 release Kafka itself depends on; the slf4j binding must match it.
pub(crate) const LOG4J_VERSION: &str = "2.25.4";
/// Pinned so that the result does not depend on the Maven version's default plugin.
const DEPENDENCY_PLUGIN: &str = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1";

/// The one user of the SASL/PLAIN listener.
pub(crate) const SASL_USERNAME: &str = "actionstate";
/// The password of [`SASL_USERNAME`].
pub(crate) const SASL_PASSWORD: &str = "actionstate-secret";

const NODE_ID: i32 = 1;
const JVM_OPTIONS: &[&str] = &[
    "-Xmx512m",
    "-Xms256m",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
];
pub(crate) const READY_TIMEOUT: Duration = Duration::from_secs(120);
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
const KILL_TIMEOUT: Duration = Duration::from_secs(10);
pub(crate) const POLL: Duration = Duration::from_millis(250);
/// Per-request timeout of the readiness probe.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

const JAVA_MISSING: &str = "`java` was not found: the local Kafka and Fluss servers need a Java 17 (or newer) \
                            runtime; install it with `apt-get install openjdk-17-jre-headless`";
const MAVEN_MISSING: &str = "`mvn` was not found: fetching the Kafka and Fluss server jars needs Maven; \
                             install it with `apt-get install maven`";

const USAGE: &str = "usage: cargo xtask services <up|down|status> [kafka] [fluss]";
const SERVICES: [&str; 2] = ["kafka", "fluss"];

/// `cargo xtask services <action> [service...]`. Without services, `up` starts Kafka only, and
/// `down` and `status` cover all of them; see `fluss.rs` for the Fluss cluster.
pub(crate) fn run(args: &[String]) -> Result<()> {
    let Some(action) = args.first() else { bail!(USAGE) };
    let mut named: Vec<&str> = Vec::new();
    for service in &args[1..] {
        let Some(known) = SERVICES.iter().copied().find(|s| *s == service.as_str()) else {
            bail!("unknown service `{service}` (known: {})\n{USAGE}", SERVICES.join(", "));
        };
        if !named.contains(&known) {
            named.push(known);
        }
    }
    let all = |default: &[&'static str]| if named.is_empty() { default.to_vec() } else { named.clone() };
    match action.as_str() {
        "up" => {
            for service in all(&["kafka"]) {
                match service {
                    "fluss" => print!("{}", crate::fluss::up_fluss()?.render()),
                    _ => print!("{}", up_kafka()?.render()),
                }
            }
            Ok(())
        }
        "down" => {
            // Every service is stopped even when one of them fails to stop.
            let results: Vec<Result<()>> = all(&["fluss", "kafka"])
                .into_iter()
                .map(|service| match service {
                    "fluss" => crate::fluss::down_fluss(),
                    _ => down_kafka(),
                })
                .collect();
            results.into_iter().collect()
        }
        "status" => {
            for service in all(&["kafka", "fluss"]) {
                match service {
                    "fluss" => crate::fluss::status_fluss()?,
                    _ => status_kafka()?,
                }
            }
            Ok(())
        }
        other => bail!("unknown services action `{other}`\n{USAGE}"),
    }
}

/// Where the broker keeps its files.
#[derive(Debug, Clone)]
struct Paths {
    dir: PathBuf,
    pom: PathBuf,
    lib: PathBuf,
    lib_partial: PathBuf,
    config: PathBuf,
    server_properties: PathBuf,
    log4j: PathBuf,
    sasl_client: PathBuf,
    data: PathBuf,
    log: PathBuf,
    pid: PathBuf,
    env: PathBuf,
}

impl Paths {
    fn new(workspace_root: &Path) -> Self {
        let services = workspace_root.join("target").join("services");
        let dir = services.join("kafka");
        let lib = dir.join("lib");
        let config = dir.join("config");
        Self {
            pom: dir.join("pom.xml"),
            lib_partial: dir.join("lib.partial"),
            lib,
            server_properties: config.join("server.properties"),
            log4j: config.join("log4j2.properties"),
            sasl_client: config.join("sasl-client.properties"),
            config,
            data: dir.join("data"),
            log: dir.join("broker.log"),
            pid: dir.join("kafka.pid"),
            env: services.join("kafka.env"),
            dir,
        }
    }

    fn current() -> Result<Self> {
        Ok(Self::new(&crate::workspace_root()?))
    }

    fn classpath(&self) -> String {
        format!("{}/*", self.lib.display())
    }
}

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

    fn render(&self) -> String {
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
        .current_dir(&paths.dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    // Its own process group: a Ctrl-C in the terminal that ran `up` later does not reach it.
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn().with_context(|| format!("starting the Kafka broker: {cmd:?}"))?;
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

fn status_kafka() -> Result<()> {
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

// ---------------------------------------------------------------------------------------------
// Tools and jars

pub(crate) fn java() -> PathBuf {
    match std::env::var_os("JAVA_HOME") {
        Some(home) if Path::new(&home).join("bin").join("java").is_file() => Path::new(&home).join("bin").join("java"),
        _ => PathBuf::from("java"),
    }
}

pub(crate) fn check_java() -> Result<()> {
    let java = java();
    let output = match Command::new(&java).arg("-version").output() {
        Ok(output) => output,
        Err(e) if e.kind() == ErrorKind::NotFound => bail!(JAVA_MISSING),
        Err(e) => return Err(e).with_context(|| format!("running `{} -version`", java.display())),
    };
    let text = String::from_utf8_lossy(&output.stderr);
    match java_major(&text) {
        Some(major) if major >= 17 => Ok(()),
        Some(major) => bail!(
            "`{}` is Java {major}, but the local Kafka and Fluss servers need Java 17 or newer; \
             install it with `apt-get install openjdk-17-jre-headless` (or point JAVA_HOME at it)",
            java.display()
        ),
        None => bail!("could not read the Java version from `{} -version`:\n{text}", java.display()),
    }
}

/// The major version from `java -version` output: `"17.0.15"` is 17, `"1.8.0_392"` is 8.
fn java_major(version_output: &str) -> Option<u32> {
    let quoted = version_output.split('"').nth(1)?;
    let mut parts = quoted.split(['.', '-', '+', '_']);
    let first: u32 = parts.next()?.parse().ok()?;
    if first == 1 { parts.next()?.parse().ok() } else { Some(first) }
}

fn check_maven() -> Result<()> {
    match Command::new("mvn").arg("-v").stdout(Stdio::null()).stderr(Stdio::null()).status() {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => bail!("`mvn -v` failed ({status}); fetching the server jars needs a working Maven"),
        Err(e) if e.kind() == ErrorKind::NotFound => bail!(MAVEN_MISSING),
        Err(e) => Err(e).context("running `mvn -v`"),
    }
}

/// A project whose runtime dependencies are the broker, the command-line tools (for the
/// storage formatter and manual checks) and a logging backend.
fn pom_xml() -> String {
    let dependency = |group: &str, artifact: &str, version: &str, exclusions: &str| {
        format!(
            "    <dependency>\n      <groupId>{group}</groupId>\n      <artifactId>{artifact}</artifactId>\n      \
             <version>{version}</version>{exclusions}\n    </dependency>\n"
        )
    };
    // The tools' Connect plugin-path command pulls in Connect, Jetty and Jersey, which nothing
    // here uses.
    let no_connect = "\n      <exclusions>\n        <exclusion>\n          <groupId>org.apache.kafka</groupId>\n          \
                      <artifactId>connect-runtime</artifactId>\n        </exclusion>\n      </exclusions>";
    let mut deps = String::new();
    deps += &dependency("org.apache.kafka", "kafka_2.13", KAFKA_VERSION, "");
    deps += &dependency("org.apache.kafka", "kafka-tools", KAFKA_VERSION, no_connect);
    deps += &dependency("org.slf4j", "slf4j-api", SLF4J_VERSION, "");
    deps += &dependency("org.apache.logging.log4j", "log4j-slf4j2-impl", LOG4J_VERSION, "");
    deps += &dependency("org.apache.logging.log4j", "log4j-core", LOG4J_VERSION, "");
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <!-- Generated by `cargo xtask services up kafka`; the runtime classpath of the local broker. -->\n\
         <project xmlns=\"http://maven.apache.org/POM/4.0.0\">\n  \
         <modelVersion>4.0.0</modelVersion>\n  \
         <groupId>actionstate.xtask</groupId>\n  \
         <artifactId>kafka-broker</artifactId>\n  \
         <version>{KAFKA_VERSION}</version>\n  \
         <packaging>pom</packaging>\n  \
         <dependencies>\n{deps}  </dependencies>\n\
         </project>\n"
    )
}

/// Copies the broker's jars into `lib/` unless the ones there came from the same pom.
fn ensure_jars(paths: &Paths) -> Result<()> {
    let jars = Jars {
        service: "kafka",
        what: "the Kafka broker jars",
        root: &format!("org.apache.kafka:kafka_2.13:{KAFKA_VERSION}"),
        pom: &pom_xml(),
        pom_path: &paths.pom,
        lib: &paths.lib,
        lib_partial: &paths.lib_partial,
        marker_jar: &format!("kafka_2.13-{KAFKA_VERSION}.jar"),
    };
    jars.ensure()
}

/// A set of jars resolved by Maven from a generated pom into a `lib/` directory.
#[derive(Debug)]
pub(crate) struct Jars<'a> {
    /// The service name that prefixes progress lines.
    pub(crate) service: &'a str,
    /// What the jars are, for error messages.
    pub(crate) what: &'a str,
    /// The main artifact, for the progress line.
    pub(crate) root: &'a str,
    pub(crate) pom: &'a str,
    pub(crate) pom_path: &'a Path,
    pub(crate) lib: &'a Path,
    /// Where Maven copies to; renamed to `lib` once complete.
    pub(crate) lib_partial: &'a Path,
    /// A jar that must be in `lib` after the copy.
    pub(crate) marker_jar: &'a str,
}

impl Jars<'_> {
    /// Copies the jars into `lib/` unless the ones there came from the same pom (recorded in
    /// `lib/.resolved-from.pom.xml`).
    pub(crate) fn ensure(&self) -> Result<()> {
        let Self { service, what, root, pom, pom_path, lib, lib_partial, marker_jar } = *self;
        let stamp = lib.join(".resolved-from.pom.xml");
        if fs::read_to_string(&stamp).is_ok_and(|stamp| stamp == pom) && lib.join(marker_jar).is_file() {
            eprintln!("==> {service}: jars cached in {}", lib.display());
            return Ok(());
        }
        check_maven()?;
        let started = Instant::now();
        eprintln!("==> {service}: resolving {root} and its dependencies with Maven");
        write_atomic(pom_path, pom)?;
        remove_dir_if_exists(lib_partial)?;
        let mut cmd = Command::new("mvn");
        cmd.args(["-q", "-B", "-Dstyle.color=never", "-f"])
            .arg(pom_path)
            .arg(format!("{DEPENDENCY_PLUGIN}:copy-dependencies"))
            .arg(format!("-DoutputDirectory={}", lib_partial.display()))
            .arg("-DincludeScope=runtime")
            .stdin(Stdio::null());
        // Quiet Maven prints nothing useful on success; on failure its output explains why.
        let output = cmd.output().with_context(|| format!("running {cmd:?}"))?;
        if !output.status.success() {
            bail!(
                "Maven could not resolve {what} ({}); it needs Maven Central (or a mirror \
                 configured in ~/.m2/settings.xml). Command: {cmd:?}\n{}{}",
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        if !lib_partial.join(marker_jar).is_file() {
            bail!("Maven finished, but {marker_jar} is not in {}", lib_partial.display());
        }
        fs::write(lib_partial.join(".resolved-from.pom.xml"), pom)?;
        remove_dir_if_exists(lib)?;
        fs::rename(lib_partial, lib)
            .with_context(|| format!("moving {} to {}", lib_partial.display(), lib.display()))?;
        let jars = fs::read_dir(lib)?.flatten().filter(|e| e.path().extension().is_some_and(|x| x == "jar")).count();
        eprintln!("==> {service}: fetched {jars} jars in {:.1}s", started.elapsed().as_secs_f64());
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Configuration

/// The broker's listener ports on 127.0.0.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ports {
    plaintext: u16,
    sasl: u16,
    controller: u16,
}

/// Three distinct ports that were free a moment ago: the listeners are held open together so
/// that the kernel hands out different ports, then closed for the broker to bind.
fn free_ports() -> Result<Ports> {
    let ports = free_port_list(3)?;
    match ports[..] {
        [plaintext, sasl, controller] => Ok(Ports { plaintext, sasl, controller }),
        _ => bail!("expected three ports, got {ports:?}"),
    }
}

/// `n` distinct ports on 127.0.0.1 that were free a moment ago (see [`free_ports`]).
pub(crate) fn free_port_list(n: usize) -> Result<Vec<u16>> {
    let listeners = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<Vec<_>>>()
        .context("finding free ports on 127.0.0.1")?;
    Ok(listeners.iter().map(|l| l.local_addr().map(|a| a.port())).collect::<std::io::Result<Vec<_>>>()?)
}

/// The broker's `server.properties`: one KRaft node acting as broker and controller, a
/// plaintext and a SASL/PLAIN listener, replication factors of one. The retention check and
/// the log cleaner (which deletes the segments of `compact,delete` topics below their start
/// offset) run every second, and a deleted segment's files go a second later (Kafka's
/// defaults: 5 min, 15 s and 1 min), so that disk given back by `DeleteRecords` shows within
/// seconds in tests and the soak.
fn server_properties(ports: Ports, data: &Path) -> String {
    let Ports { plaintext, sasl, controller } = ports;
    let data = data.display();
    let jaas = format!(
        "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"{SASL_USERNAME}\" \
         password=\"{SASL_PASSWORD}\" user_{SASL_USERNAME}=\"{SASL_PASSWORD}\";"
    );
    format!(
        "# Generated by `cargo xtask services up kafka`; rewritten on every start.\n\
         process.roles=broker,controller\n\
         node.id={NODE_ID}\n\
         controller.quorum.voters={NODE_ID}@127.0.0.1:{controller}\n\
         listeners=PLAINTEXT://127.0.0.1:{plaintext},SASL_PLAINTEXT://127.0.0.1:{sasl},CONTROLLER://127.0.0.1:{controller}\n\
         advertised.listeners=PLAINTEXT://127.0.0.1:{plaintext},SASL_PLAINTEXT://127.0.0.1:{sasl}\n\
         listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT\n\
         inter.broker.listener.name=PLAINTEXT\n\
         controller.listener.names=CONTROLLER\n\
         listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN\n\
         listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas}\n\
         log.dirs={data}\n\
         metadata.log.dir={data}\n\
         num.partitions=1\n\
         default.replication.factor=1\n\
         min.insync.replicas=1\n\
         auto.create.topics.enable=false\n\
         offsets.topic.replication.factor=1\n\
         transaction.state.log.replication.factor=1\n\
         transaction.state.log.min.isr=1\n\
         share.coordinator.state.topic.replication.factor=1\n\
         share.coordinator.state.topic.min.isr=1\n\
         group.initial.rebalance.delay.ms=0\n\
         log.retention.check.interval.ms=1000\n\
         log.cleaner.backoff.ms=1000\n\
         log.segment.delete.delay.ms=1000\n"
    )
}

/// The listener ports back from a `server.properties` written by [`server_properties`].
fn ports_from_config(text: &str) -> Option<Ports> {
    let listeners = text.lines().find_map(|line| line.strip_prefix("listeners="))?;
    let port = |name: &str| {
        listeners
            .split(',')
            .find_map(|l| l.trim().strip_prefix(name)?.strip_prefix("://"))
            .and_then(|addr| addr.rsplit_once(':'))
            .and_then(|(_, port)| port.parse().ok())
    };
    Some(Ports { plaintext: port("PLAINTEXT")?, sasl: port("SASL_PLAINTEXT")?, controller: port("CONTROLLER")? })
}

/// Client settings for the Kafka command-line tools (`--command-config`) on the SASL listener.
fn sasl_client_properties(username: &str, password: &str) -> String {
    format!(
        "security.protocol=SASL_PLAINTEXT\n\
         sasl.mechanism=PLAIN\n\
         sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
         username=\"{username}\" password=\"{password}\";\n"
    )
}

const LOG4J2_PROPERTIES: &str = "\
# Generated by `cargo xtask services up kafka`. The broker's stdout goes to broker.log.
status = warn
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = STDOUT
logger.request.name = kafka.request.logger
logger.request.level = warn
logger.state.name = state.change.logger
logger.state.level = warn
";

/// A Kafka cluster id: 16 random bytes in unpadded URL-safe base64. The first character is never
/// `-`, which the command-line tools would take for an option.
fn new_cluster_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut bytes = [0u8; 16];
    for (i, chunk) in bytes.chunks_mut(8).enumerate() {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u128(
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos(),
        );
        hasher.write_u32(std::process::id());
        hasher.write_usize(i);
        chunk.copy_from_slice(&hasher.finish().to_be_bytes());
    }
    bytes[0] &= 0x7f;
    base64_url(&bytes)
}

fn base64_url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
        }
    }
    out
}

/// Wipes the data directory and formats it for a new single-node cluster.
fn format_storage(paths: &Paths, log: &File) -> Result<()> {
    remove_dir_if_exists(&paths.data)?;
    let cluster_id = new_cluster_id();
    let mut cmd = Command::new(java());
    // Without a log4j configuration only errors are logged, which keeps the broker log readable.
    cmd.args(["-Xmx256m", "-Djava.awt.headless=true"])
        .arg("-cp")
        .arg(paths.classpath())
        .args(["kafka.tools.StorageTool", "format", "-t", &cluster_id, "-c"])
        .arg(&paths.server_properties)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log.try_clone()?);
    let status = cmd.status().with_context(|| format!("running {cmd:?}"))?;
    if !status.success() {
        bail!(
            "formatting the Kafka storage failed ({status}); last lines of {}:\n{}",
            paths.log.display(),
            tail(&paths.log, 30)
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Processes

pub(crate) fn read_pid(path: &Path) -> Result<Option<u32>> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(text.trim().parse().ok()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

fn have_proc() -> bool {
    Path::new("/proc/self/stat").exists()
}

/// Whether `pid` is a live broker started with our `server.properties`; a pid that was reused by
/// another process, or a broker that is exiting, is not.
fn process_is_ours(pid: u32, paths: &Paths) -> bool {
    process_runs(pid, "kafka.Kafka", &paths.server_properties)
}

/// Whether `pid` is a live JVM running `main_class` with `config` among the arguments after it;
/// a pid that was reused by another process, or a process that is exiting, is not.
pub(crate) fn process_runs(pid: u32, main_class: &str, config: &Path) -> bool {
    if have_proc() {
        process_alive(pid)
            && fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| cmdline_runs(&cmdline, main_class, config))
    } else {
        // Without /proc the best available check is that the pid exists.
        process_alive(pid)
    }
}

/// Whether `pid` exists and has not exited; a zombie (exited, not yet reaped) has.
fn process_alive(pid: u32) -> bool {
    if have_proc() {
        fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|stat| proc_stat_state(&stat).is_some_and(|state| !matches!(state, 'Z' | 'X' | 'x')))
    } else {
        Command::new("kill")
            .args(["-0", &pid.to_string()])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    }
}

/// The state letter of a `/proc/<pid>/stat` line, which follows the parenthesised command name.
fn proc_stat_state(stat: &str) -> Option<char> {
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Whether a NUL-separated `/proc/<pid>/cmdline` names `main_class` and, after it, `config`.
pub(crate) fn cmdline_runs(cmdline: &[u8], main_class: &str, config: &Path) -> bool {
    let config = config.to_string_lossy();
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    args.iter()
        .position(|arg| *arg == main_class.as_bytes())
        .is_some_and(|at| args[at + 1..].iter().any(|arg| *arg == config.as_bytes()))
}

fn signal(pid: u32, signal: &str) -> Result<()> {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .stderr(Stdio::null())
        .status()
        .context("running `kill`")?;
    if !status.success() {
        eprintln!("==> `kill -{signal} {pid}` failed ({status}); the process may have exited");
    }
    Ok(())
}

/// SIGTERM (a clean shutdown), then SIGKILL if the process is still there after [`STOP_TIMEOUT`].
/// The caller has made sure that `pid` is the process it means.
pub(crate) fn stop_process(pid: u32) -> Result<()> {
    let gone_within = |timeout: Duration| {
        let deadline = Instant::now() + timeout;
        while process_alive(pid) {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(POLL);
        }
        true
    };
    signal(pid, "TERM")?;
    if gone_within(STOP_TIMEOUT) {
        return Ok(());
    }
    eprintln!("==> pid {pid} still running {}s after SIGTERM; sending SIGKILL", STOP_TIMEOUT.as_secs());
    signal(pid, "KILL")?;
    if gone_within(KILL_TIMEOUT) {
        return Ok(());
    }
    bail!("pid {pid} survived SIGKILL")
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

/// Resident memory of a process, from `/proc/<pid>/status`.
pub(crate) fn rss_kib(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
    line.split_whitespace().next()?.parse().ok()
}

pub(crate) fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

pub(crate) fn write_atomic(path: &Path, contents: &str) -> Result<()> {
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, contents).with_context(|| format!("writing {}", tmp.display()))?;
    fs::rename(&tmp, path).with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
}

pub(crate) fn remove_file_if_exists(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != ErrorKind::NotFound => Err(e).with_context(|| format!("removing {}", path.display())),
        _ => Ok(()),
    }
}

pub(crate) fn remove_dir_if_exists(path: &Path) -> Result<()> {
    match fs::remove_dir_all(path) {
        Err(e) if e.kind() != ErrorKind::NotFound => Err(e).with_context(|| format!("removing {}", path.display())),
        _ => Ok(()),
    }
}

// ---------------------------------------------------------------------------------------------
// Readiness probe: a few requests of the Kafka wire protocol, enough to tell that the broker
// serves clients.

const API_METADATA: i16 = 3;
const API_SASL_HANDSHAKE: i16 = 17;
const API_API_VERSIONS: i16 = 18;
const API_SASL_AUTHENTICATE: i16 = 36;
/// The oldest Metadata version Kafka 4 still serves, and the last one without tagged fields.
const METADATA_VERSION: i16 = 4;
const CLIENT_ID: &str = "actionstate-xtask";

#[derive(Debug, Clone, PartialEq, Eq)]
struct Broker {
    node_id: i32,
    host: String,
    port: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct MetadataAnswer {
    cluster_id: Option<String>,
    controller_id: i32,
    brokers: Vec<Broker>,
}

impl MetadataAnswer {
    fn summary(&self) -> String {
        let brokers: Vec<String> =
            self.brokers.iter().map(|b| format!("{}@{}:{}", b.node_id, b.host, b.port)).collect();
        format!(
            "cluster {}, controller {}, brokers {}",
            self.cluster_id.as_deref().unwrap_or("?"),
            self.controller_id,
            brokers.join(" ")
        )
    }
}

/// Connects to `addr`, optionally authenticates with SASL/PLAIN, and asks for the cluster
/// metadata; succeeds only when our node is among the brokers.
fn probe(addr: &str, plain: Option<(&str, &str)>) -> Result<MetadataAnswer> {
    let socket: SocketAddr = addr.parse().with_context(|| format!("`{addr}` is not an address"))?;
    let mut stream =
        TcpStream::connect_timeout(&socket, PROBE_TIMEOUT).with_context(|| format!("connecting to {addr}"))?;
    stream.set_read_timeout(Some(PROBE_TIMEOUT))?;
    stream.set_write_timeout(Some(PROBE_TIMEOUT))?;

    let versions = decode_api_versions(&exchange(&mut stream, API_API_VERSIONS, 0, 1, &[])?)?;
    let supports =
        |key: i16, version: i16| versions.iter().any(|&(k, min, max)| k == key && (min..=max).contains(&version));
    if !supports(API_METADATA, METADATA_VERSION) {
        bail!("the broker does not serve Metadata v{METADATA_VERSION}");
    }
    if let Some((username, password)) = plain {
        if !supports(API_SASL_HANDSHAKE, 1) || !supports(API_SASL_AUTHENTICATE, 0) {
            bail!("the broker does not offer SASL on {addr}");
        }
        let mut body = Vec::new();
        put_string(&mut body, "PLAIN");
        decode_sasl_handshake(&exchange(&mut stream, API_SASL_HANDSHAKE, 1, 2, &body)?)?;
        let mut body = Vec::new();
        put_bytes(&mut body, &plain_token(username, password));
        decode_sasl_authenticate(&exchange(&mut stream, API_SASL_AUTHENTICATE, 0, 3, &body)?)?;
    }
    // No topics: only the brokers and the cluster id. Then allow_auto_topic_creation = false.
    let body = [0, 0, 0, 0, 0];
    let answer = decode_metadata(&exchange(&mut stream, API_METADATA, METADATA_VERSION, 4, &body)?)?;
    if !answer.brokers.iter().any(|b| b.node_id == NODE_ID) {
        bail!("node {NODE_ID} is not among the brokers yet ({})", answer.summary());
    }
    Ok(answer)
}

/// A request with header v1: api key, version, correlation id, client id.
fn request(api_key: i16, api_version: i16, correlation_id: i32, body: &[u8]) -> Vec<u8> {
    let mut message = Vec::new();
    message.extend_from_slice(&api_key.to_be_bytes());
    message.extend_from_slice(&api_version.to_be_bytes());
    message.extend_from_slice(&correlation_id.to_be_bytes());
    put_string(&mut message, CLIENT_ID);
    message.extend_from_slice(body);
    let mut frame = (message.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&message);
    frame
}

/// Sends one request and returns the response body after the correlation id (header v0).
fn exchange(
    stream: &mut TcpStream,
    api_key: i16,
    api_version: i16,
    correlation_id: i32,
    body: &[u8],
) -> Result<Vec<u8>> {
    stream.write_all(&request(api_key, api_version, correlation_id, body)).context("sending a request")?;
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).with_context(|| format!("reading the answer to api key {api_key}"))?;
    let size = u32::from_be_bytes(size) as usize;
    if !(4..=16 << 20).contains(&size) {
        bail!("implausible response size {size}");
    }
    let mut response = vec![0u8; size];
    stream.read_exact(&mut response).context("reading a response")?;
    let mut reader = Reader(&response);
    let got = reader.i32()?;
    if got != correlation_id {
        bail!("response correlation id {got}, expected {correlation_id}");
    }
    Ok(reader.0.to_vec())
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    out.extend_from_slice(bytes);
}

/// The SASL/PLAIN initial response (RFC 4616): no authorization id, user name, password.
fn plain_token(username: &str, password: &str) -> Vec<u8> {
    format!("\0{username}\0{password}").into_bytes()
}

/// Reads big-endian fields off the front of a response.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.0.len() < n {
            bail!("response ends early: need {n} more bytes, have {}", self.0.len());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn i16(&mut self) -> Result<i16> {
        Ok(i16::from_be_bytes(self.take(2)?.try_into()?))
    }

    fn i32(&mut self) -> Result<i32> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into()?))
    }

    fn nullable_string(&mut self) -> Result<Option<String>> {
        let len = self.i16()?;
        if len < 0 {
            return Ok(None);
        }
        Ok(Some(String::from_utf8_lossy(self.take(len as usize)?).into_owned()))
    }

    fn string(&mut self) -> Result<String> {
        self.nullable_string()?.context("null where a string belongs")
    }

    fn count(&mut self) -> Result<usize> {
        let n = self.i32()?;
        usize::try_from(n.max(0)).context("array length")
    }
}

fn check_error(api: &str, code: i16, message: Option<String>) -> Result<()> {
    if code != 0 {
        let name = match code {
            33 => "UNSUPPORTED_SASL_MECHANISM",
            34 => "ILLEGAL_SASL_STATE",
            35 => "UNSUPPORTED_VERSION",
            58 => "SASL_AUTHENTICATION_FAILED",
            _ => "error",
        };
        bail!("{api}: {name} ({code}){}", message.map(|m| format!(": {m}")).unwrap_or_default());
    }
    Ok(())
}

/// ApiVersions v0: error code, then (api key, min version, max version) triples.
fn decode_api_versions(body: &[u8]) -> Result<Vec<(i16, i16, i16)>> {
    let mut r = Reader(body);
    check_error("ApiVersions", r.i16()?, None)?;
    (0..r.count()?).map(|_| Ok((r.i16()?, r.i16()?, r.i16()?))).collect()
}

/// SaslHandshake v1: error code and the enabled mechanisms.
fn decode_sasl_handshake(body: &[u8]) -> Result<()> {
    let mut r = Reader(body);
    let code = r.i16()?;
    let mechanisms = (0..r.count()?).map(|_| r.string()).collect::<Result<Vec<_>>>()?;
    check_error("SaslHandshake", code, Some(format!("mechanisms offered: {}", mechanisms.join(", "))))
}

/// SaslAuthenticate v0: error code and message (then server bytes, empty for PLAIN).
fn decode_sasl_authenticate(body: &[u8]) -> Result<()> {
    let mut r = Reader(body);
    let code = r.i16()?;
    let message = r.nullable_string()?;
    check_error("SaslAuthenticate", code, message)
}

/// Metadata v4: throttle time, brokers, cluster id, controller id (topics follow, unread).
fn decode_metadata(body: &[u8]) -> Result<MetadataAnswer> {
    let mut r = Reader(body);
    let _throttle_ms = r.i32()?;
    let brokers = (0..r.count()?)
        .map(|_| {
            let node_id = r.i32()?;
            let host = r.string()?;
            let port = r.i32()?;
            let _rack = r.nullable_string()?;
            Ok(Broker { node_id, host, port })
        })
        .collect::<Result<Vec<_>>>()?;
    let cluster_id = r.nullable_string()?;
    let controller_id = r.i32()?;
    Ok(MetadataAnswer { cluster_id, controller_id, brokers })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_ports() -> Ports {
        Ports { plaintext: 40001, sasl: 40002, controller: 40003 }
    }

    #[test]
    fn free_ports_are_distinct_and_bindable() {
        let ports = free_ports().expect("free ports");
        let all = [ports.plaintext, ports.sasl, ports.controller];
        assert!(all.iter().all(|p| *p != 0), "{ports:?}");
        assert!(all[0] != all[1] && all[1] != all[2] && all[0] != all[2], "{ports:?}");
        for port in all {
            TcpListener::bind(("127.0.0.1", port)).expect("port is free again");
        }
    }

    #[test]
    fn server_properties_describe_a_single_node_kraft_broker() {
        let text = server_properties(sample_ports(), Path::new("/w/target/services/kafka/data"));
        let props: Vec<(&str, &str)> =
            text.lines().filter(|l| !l.starts_with('#')).filter_map(|l| l.split_once('=')).collect();
        let get = |key: &str| props.iter().find(|(k, _)| *k == key).map(|(_, v)| *v).unwrap_or_default();
        let keys: Vec<&str> = props.iter().map(|(k, _)| *k).collect();
        let mut unique = keys.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), keys.len(), "a key appears twice:\n{text}");

        assert_eq!(get("process.roles"), "broker,controller");
        assert_eq!(get("node.id"), "1");
        assert_eq!(get("controller.quorum.voters"), "1@127.0.0.1:40003");
        assert_eq!(
            get("listeners"),
            "PLAINTEXT://127.0.0.1:40001,SASL_PLAINTEXT://127.0.0.1:40002,CONTROLLER://127.0.0.1:40003"
        );
        assert_eq!(get("advertised.listeners"), "PLAINTEXT://127.0.0.1:40001,SASL_PLAINTEXT://127.0.0.1:40002");
        assert_eq!(get("controller.listener.names"), "CONTROLLER");
        assert_eq!(get("listener.name.sasl_plaintext.sasl.enabled.mechanisms"), "PLAIN");
        assert_eq!(
            get("listener.name.sasl_plaintext.plain.sasl.jaas.config"),
            "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"actionstate\" \
             password=\"actionstate-secret\" user_actionstate=\"actionstate-secret\";"
        );
        assert_eq!(get("log.dirs"), "/w/target/services/kafka/data");
        assert_eq!(get("auto.create.topics.enable"), "false");
        for key in ["offsets.topic.replication.factor", "transaction.state.log.replication.factor"] {
            assert_eq!(get(key), "1", "{key}");
        }
        assert_eq!(get("transaction.state.log.min.isr"), "1");
    }

    #[test]
    fn ports_read_back_from_the_generated_config() {
        let text = server_properties(sample_ports(), Path::new("/tmp/data"));
        assert_eq!(ports_from_config(&text), Some(sample_ports()));
        assert_eq!(ports_from_config("listeners=PLAINTEXT://127.0.0.1:1\n"), None);
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

    #[test]
    fn paths_live_under_the_workspace_target_directory() {
        let paths = Paths::new(Path::new("/ws"));
        assert_eq!(paths.env, Path::new("/ws/target/services/kafka.env"));
        for p in [&paths.lib, &paths.data, &paths.log, &paths.pid, &paths.server_properties, &paths.pom] {
            assert!(p.starts_with("/ws/target/services/kafka"), "{}", p.display());
        }
        assert_eq!(paths.classpath(), "/ws/target/services/kafka/lib/*");
    }

    #[test]
    fn pom_pins_the_broker_tools_and_logging() {
        let pom = pom_xml();
        for needle in [
            "<artifactId>kafka_2.13</artifactId>",
            "<artifactId>kafka-tools</artifactId>",
            "<artifactId>log4j-slf4j2-impl</artifactId>",
            &format!("<version>{KAFKA_VERSION}</version>"),
        ] {
            assert!(pom.contains(needle), "pom lacks {needle}:\n{pom}");
        }
        assert!(!pom.contains("LATEST") && !pom.contains("RELEASE") && !pom.contains('['), "unpinned version:\n{pom}");
    }

    #[test]
    fn java_versions_parse() {
        assert_eq!(java_major("openjdk version \"17.0.15\" 2025-04-15\nOpenJDK Runtime"), Some(17));
        assert_eq!(java_major("java version \"1.8.0_392\"\n"), Some(8));
        assert_eq!(java_major("openjdk version \"21\" 2023-09-19"), Some(21));
        assert_eq!(java_major("openjdk version \"26-ea\" 2026-03-17"), Some(26));
        assert_eq!(java_major("no version here"), None);
    }

    #[test]
    fn cluster_ids_look_like_kafka_uuids() {
        let a = new_cluster_id();
        let b = new_cluster_id();
        assert_ne!(a, b);
        for id in [a, b] {
            assert_eq!(id.len(), 22, "{id}");
            assert!(id.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'), "{id}");
            assert!(!id.starts_with('-'), "{id}");
        }
        assert_eq!(base64_url(b"\xfb\xff\xbf"), "-_-_");
        assert_eq!(base64_url(b"Ma"), "TWE");
        assert_eq!(base64_url(&[0; 16]), "AAAAAAAAAAAAAAAAAAAAAA");
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

    #[test]
    fn process_states_read_from_proc_stat() {
        assert_eq!(proc_stat_state("22809 (java) S 1 22809 22809 0 -1"), Some('S'));
        assert_eq!(proc_stat_state("7 (odd) name) Z 1 7"), Some('Z'));
        assert_eq!(proc_stat_state("garbage"), None);
        assert!(process_alive(std::process::id()));
    }

    #[test]
    fn requests_are_framed_with_header_v1() {
        let frame = request(API_API_VERSIONS, 0, 7, &[]);
        let mut expected = vec![0, 0, 0, 27, 0, 18, 0, 0, 0, 0, 0, 7, 0, 17];
        expected.extend_from_slice(b"actionstate-xtask");
        assert_eq!(frame, expected);
        assert_eq!(plain_token("u", "p"), b"\0u\0p");
    }

    #[test]
    fn responses_decode() {
        // ApiVersions v0: no error, Metadata 4..=13 and ApiVersions 0..=4.
        let versions = [0, 0, 0, 0, 0, 2, 0, 3, 0, 4, 0, 13, 0, 18, 0, 0, 0, 4];
        assert_eq!(decode_api_versions(&versions).expect("versions"), vec![(3, 4, 13), (18, 0, 4)]);
        assert!(decode_api_versions(&[0, 35, 0, 0, 0, 0]).is_err());

        let mut metadata = vec![0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1];
        put_string(&mut metadata, "127.0.0.1");
        metadata.extend_from_slice(&[0, 0, 0x9c, 0x41, 0xff, 0xff]);
        put_string(&mut metadata, "abc");
        metadata.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0]);
        let answer = decode_metadata(&metadata).expect("metadata");
        assert_eq!(answer.brokers, vec![Broker { node_id: 1, host: "127.0.0.1".into(), port: 40001 }]);
        assert_eq!(answer.cluster_id.as_deref(), Some("abc"));
        assert_eq!(answer.controller_id, 1);
        assert!(decode_metadata(&metadata[..10]).is_err());

        let mut failed = vec![0, 58];
        put_string(&mut failed, "Authentication failed: Invalid username or password");
        failed.extend_from_slice(&[0, 0, 0, 0]);
        let err = decode_sasl_authenticate(&failed).expect_err("rejected").to_string();
        assert!(err.contains("SASL_AUTHENTICATION_FAILED") && err.contains("Invalid username"), "{err}");
        let mut handshake = vec![0, 0, 0, 0, 0, 1];
        put_string(&mut handshake, "PLAIN");
        decode_sasl_handshake(&handshake).expect("handshake");
    }
}
