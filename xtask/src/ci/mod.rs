//! `cargo xtask ci`: everything CI checks, in order, with the time of each step printed at the
//! end (whether the run passed or not).
//!
//! One test build serves clippy and every test step. It is compiled with clippy's driver as
//! the workspace's compiler wrapper, as `cargo clippy` does for a check, so the workspace's
//! code is linted while it is built; and with every feature a test step needs, the fault
//! tests' too, so the fault and cluster steps run what the build made without compiling again.
//! The test step leaves the fault tests out by name; they run after it, alone.

mod beside;
mod binaries;
mod python;

use crate::services::{self, fluss};
use crate::{Step, cargo, free_gib, run, run_no_skips};
use anyhow::{Context, Result, bail};
use binaries::Binary;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The feature that builds the test which stops and restarts the broker.
const BROKER_FAULT_FEATURE: &str = "actionstate-kafka/broker-fault-tests";
/// The command line's server backends, off by default (see `crates/cli/Cargo.toml`): the tests,
/// clippy and the docs cover them.
const CLI_BACKENDS: &str = "actionstate/kafka,actionstate/fluss";
/// The feature that builds the Kafka example and its SIGKILL campaign (`examples/`), which
/// needs the broker the test step starts.
const EXAMPLES_KAFKA: &str = "actionstate-examples/kafka";
/// The store's spans as OpenTelemetry spans (`actionstate-recovery/otel`, `tests/otel.rs`),
/// exported by the command line (`--otlp`, `tests/otlp.rs` with its OTLP receiver).
const OTEL: &str = "actionstate-recovery/otel,actionstate/otlp";
/// The feature that builds the test which stops and restarts the Fluss tablet server.
const TABLET_FAULT_FEATURE: &str = "actionstate-fluss/server-fault-tests";
/// The feature that builds the tests which kill nodes of the three-node Kafka cluster.
const CLUSTER_FAULT_FEATURE: &str = "actionstate-tests/cluster-fault-tests";

/// What the test step leaves to the steps after it (libtest `--skip` filters, which match
/// test names by substring): the broker-stop and tablet-stop tests
/// (`*_stop_during_puts_loses_no_acknowledged_state`), and the cluster fault tests, whose names
/// carry their cluster's.
const FAULT_TESTS: [&str; 3] = ["stop_during_puts_loses_no_acknowledged_state", "kafka3", "fluss3"];

/// What a cold `ci` run writes under `target/` (debug build of every test binary, clippy's
/// metadata, rustdoc, the servers' artifacts and data): 3.0 GiB measured on a clean checkout, plus slack.
const CI_DISK_GIB: f64 = 4.0;

/// The steps run so far: name, time, whether it passed.
static STEPS: Mutex<Vec<(String, Duration, bool)>> = Mutex::new(Vec::new());

/// Notes a step's time for the table `ci` prints at the end.
pub(crate) fn record(step: &str, took: Duration, passed: bool) {
    if let Ok(mut steps) = STEPS.lock() {
        steps.push((step.to_owned(), took, passed));
    }
}

/// Runs `work` as a step of its own in the table.
fn timed<T>(step: &str, work: impl FnOnce() -> Result<T>) -> Result<T> {
    let started = Instant::now();
    let done = work();
    record(step, started.elapsed(), done.is_ok());
    done
}

/// Every step of CI, in order: lints and the secret tests on the default build, the test
/// build, the tests against the servers, rustdoc. The first failing step ends the run.
pub(crate) fn ci() -> Result<()> {
    let started = Instant::now();
    warn_free_disk();
    let passed = steps();
    print_steps(started.elapsed());
    passed?;
    eprintln!("==> ci: all steps passed in {:.0}s", started.elapsed().as_secs_f64());
    Ok(())
}

fn steps() -> Result<()> {
    run("fmt", cargo().args(["fmt", "--all", "--", "--check"]))?;
    default_build()?;
    let binaries = test_build()?;
    server_tests(&binaries)
}

/// `cargo xtask bench python`.
pub(crate) fn bench_python() -> Result<()> {
    python::bench()
}

/// `cargo xtask semver`, `cargo xtask scratch`, `cargo xtask msrv`, `cargo xtask python`.
pub(crate) fn alone(check: &str) -> Result<()> {
    match check {
        "python" => python::alone(),
        other => beside::alone(other),
    }
}

/// The step table: each step's time and share of the run.
fn print_steps(total: Duration) {
    let Ok(steps) = STEPS.lock() else { return };
    let width = steps.iter().map(|(step, ..)| step.len()).max().unwrap_or(0).max("total".len());
    eprintln!("==> ci: step times");
    for (step, took, passed) in steps.iter() {
        let share = 100.0 * took.as_secs_f64() / total.as_secs_f64().max(f64::EPSILON);
        let outcome = if *passed { "ok" } else { "FAILED" };
        eprintln!("    {step:<width$}  {:>7.1} s  {share:>4.1}%  {outcome}", took.as_secs_f64());
    }
    eprintln!("    {:<width$}  {:>7.1} s", "total", total.as_secs_f64());
}

/// Says how much disk `target/` has, warning when a cold run would not fit.
fn warn_free_disk() {
    match free_gib(Path::new(".")) {
        Some(free) if free < CI_DISK_GIB => eprintln!(
            "==> ci: WARNING: only {free:.1} GiB free on the disk that holds target/; a cold run \
             needs about {CI_DISK_GIB:.0} GiB and fails with `No space left on device` without it"
        ),
        Some(free) => eprintln!("==> ci: {free:.1} GiB free on the disk that holds target/"),
        None => {}
    }
}

/// The command line as a newcomer builds it, the embedded store alone: clippy with warnings
/// denied, and no secret printed whether or not the server backends are compiled in (the
/// secret tests once more on the default build; the server tests build them with the backends).
fn default_build() -> Result<()> {
    run(
        "clippy (actionstate without server backends)",
        cargo().args([
            "clippy",
            "-p",
            "actionstate",
            "--no-default-features",
            "--all-targets",
            "--locked",
            "--",
            "-D",
            "warnings",
        ]),
    )?;
    run(
        "secret tests without server backends",
        cargo().args(["test", "-p", "actionstate-recovery", "--locked", "--test", "secrets"]),
    )?;
    run(
        "secret tests of the command line without server backends",
        cargo().args([
            "test",
            "-p",
            "actionstate",
            "--locked",
            "--test",
            "operator",
            "--",
            "no_command_prints_a_secret_from_a_url",
        ]),
    )
}

/// The test build: every target of the workspace, linted; the test binaries it made.
fn test_build() -> Result<Vec<Binary>> {
    let step = "test build, with clippy";
    let mut build = cargo_test()?;
    build.args(["--all-targets", "--no-run", "--message-format=json-render-diagnostics"]).stdout(Stdio::piped());
    eprintln!("==> {step}: {build:?}");
    let started = Instant::now();
    let out = build.output().with_context(|| format!("{step}: could not start {build:?}"))?;
    record(step, started.elapsed(), out.status.success());
    if !out.status.success() {
        bail!("{step} failed ({})", out.status);
    }
    eprintln!("==> {step}: ok in {:.1}s", started.elapsed().as_secs_f64());
    binaries::from_build_output(&String::from_utf8_lossy(&out.stdout))
}

/// `cargo test` as the test build and every step that runs its tests call it: on the
/// workspace with every feature a test step needs, the workspace's crates compiled by clippy's
/// driver with warnings denied (what `cargo clippy` sets for a check; here for a build that
/// also makes the test binaries). Every step passes the same features and wrapper, so none
/// compiles again.
fn cargo_test() -> Result<Command> {
    let mut cmd = cargo();
    cmd.env("RUSTC_WORKSPACE_WRAPPER", clippy_driver()?)
        // How `cargo clippy` hands its arguments to the driver.
        .env("CLIPPY_ARGS", "-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__")
        .env("RUST_BACKTRACE", "1")
        .args([
            "test",
            "--workspace",
            "--locked",
            "--features",
            &format!(
                "{CLI_BACKENDS},{EXAMPLES_KAFKA},{OTEL},{BROKER_FAULT_FEATURE},{TABLET_FAULT_FEATURE},{CLUSTER_FAULT_FEATURE}"
            ),
        ]);
    Ok(cmd)
}

/// Clippy's driver of the toolchain that runs this: beside `cargo`, or in the sysroot.
fn clippy_driver() -> Result<PathBuf> {
    let cargo = PathBuf::from(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    let beside = cargo.with_file_name("clippy-driver");
    if beside.is_file() {
        return Ok(beside);
    }
    let out = Command::new("rustc").args(["--print", "sysroot"]).output().context("running `rustc --print sysroot`")?;
    let sysroot = String::from_utf8(out.stdout).context("the sysroot is not UTF-8")?;
    let driver = Path::new(sysroot.trim()).join("bin").join("clippy-driver");
    if !driver.is_file() {
        bail!("clippy is not installed: no {} (rustup component add clippy)", driver.display());
    }
    Ok(driver)
}

/// The tests against real servers, started here and always stopped again: the workspace's
/// tests and the fault tests on a Kafka broker and a Fluss cluster, then the cluster fault
/// tests on a three-node Kafka cluster and a Fluss cluster of three tablet servers. Once the
/// workspace's tests are done, the checks that need no server run beside the rest
/// ([`beside`]); every step after that runs the test build's binaries without cargo, which
/// those checks hold.
fn server_tests(binaries: &[Binary]) -> Result<()> {
    let kafka = timed("kafka up", services::up_kafka).context("starting the Kafka broker for the tests")?;
    let fluss_env = match timed("fluss up", fluss::up_fluss) {
        Ok(env) => env,
        Err(e) => {
            let stopped = services::down_kafka();
            let _ = fluss::down_fluss();
            stopped.context("stopping the Kafka broker")?;
            return Err(e.context("starting the Fluss cluster for the tests"));
        }
    };
    let envs = test_envs(&kafka, &fluss_env);
    let mut tested =
        envs.as_ref().map_err(|e| anyhow::anyhow!("{e:#}")).and_then(|envs| workspace_tests(binaries, envs));
    let checks = match &tested {
        Ok(()) => Some(beside::start()),
        Err(_) => None,
    };
    if let (Ok(()), Ok(envs)) = (&tested, &envs) {
        tested = fault_tests(binaries, envs);
    }
    let fluss_stopped = timed("fluss down", fluss::down_fluss);
    let stopped = timed("kafka down", services::down_kafka);
    // The clusters after the single broker and Fluss are gone: three more JVMs beside them
    // would crowd a small machine.
    for (cluster, up, down) in [
        ("kafka3", (|| services::up_kafka3().map(drop)) as fn() -> Result<()>, services::down_kafka3 as Step),
        ("fluss3", || fluss::cluster::up_fluss3().map(drop), fluss::cluster::down_fluss3),
    ] {
        if tested.is_ok() {
            tested = cluster_fault_tests_on(binaries, cluster, timed(&format!("{cluster} up"), up), down);
        }
    }
    // Last, the Python package, whose wheel the checks beside have built by now: its suite on
    // a broker of its own (the single broker is stopped before the clusters start).
    if let (Ok(()), Some(Ok(beside))) = (&tested, &checks) {
        tested = beside.python().and_then(|python| python_on_broker(&python));
    }
    let checked = checks.map(|started| started.and_then(beside::Beside::finish));
    tested?;
    checked.transpose()?;
    stopped.context("stopping the Kafka broker")?;
    fluss_stopped.context("stopping the Fluss cluster")
}

/// The Python package's suite against a Kafka broker started for it, and stopped after.
fn python_on_broker(python: &Path) -> Result<()> {
    let kafka =
        timed("kafka up (python)", services::up_kafka).context("starting the Kafka broker for the Python tests")?;
    let mut envs = vec![
        ("ACTIONSTATE_REQUIRE_SERVICES".to_owned(), "1".to_owned()),
        ("RUST_BACKTRACE".to_owned(), "1".to_owned()),
    ];
    envs.extend(kafka.vars());
    let tested = python::tests(python, &envs);
    let stopped = timed("kafka down (python)", services::down_kafka);
    tested?;
    stopped.context("stopping the Kafka broker")
}

/// What every test binary runs with: the servers' addresses, skips turned into failures, and
/// the tracing test's OTLP receiver, a Python package.
fn test_envs(kafka: &services::kafka::KafkaEnv, fluss_env: &fluss::FlussEnv) -> Result<Vec<(String, String)>> {
    let sink = timed("otlp-sink venv", services::otlp_sink::python)?;
    let mut envs = vec![
        ("ACTIONSTATE_REQUIRE_SERVICES".to_owned(), "1".to_owned()),
        ("RUST_BACKTRACE".to_owned(), "1".to_owned()),
        (services::otlp_sink::PYTHON_VAR.to_owned(), sink.display().to_string()),
    ];
    envs.extend(kafka.vars());
    envs.extend(fluss_env.vars());
    Ok(envs)
}

/// The workspace's tests against the broker and the Fluss cluster, but the fault tests, and the
/// doc tests. A test that reports a skip fails the step.
fn workspace_tests(binaries: &[Binary], envs: &[(String, String)]) -> Result<()> {
    // Among them the fuzz target's checks (state-core's `codec` tests, `fuzz_target`) and the
    // documents' shell examples (the command line's `readme` test, which needs the broker too).
    let mut args = vec!["--nocapture".to_owned()];
    args.extend(FAULT_TESTS.iter().flat_map(|name| ["--skip".to_owned(), (*name).to_owned()]));
    let all: Vec<&Binary> = binaries.iter().collect();
    let logs = Path::new("target/ci-logs");
    timed("test", || binaries::run_all("test", &all, binaries::JOBS, &args, envs, logs))?;
    run_no_skips("doc tests", cargo_test()?.args(["--doc", "--", "--nocapture"]).envs(envs.iter().cloned()))
}

/// The tests that stop and restart a shared server: alone, after every other test is done with
/// it, one after the other.
fn fault_tests(binaries: &[Binary], envs: &[(String, String)]) -> Result<()> {
    let args = ["--nocapture".to_owned()];
    for (step, test) in [
        ("broker-stop test", "actionstate-kafka tests/broker_stop.rs"),
        ("tablet-stop test", "actionstate-fluss tests/tablet_stop.rs"),
    ] {
        let binary = binaries::named(binaries, &[test])?;
        timed(step, || binaries::run_all(step, &binary, 1, &args, envs, Path::new("target/ci-logs")))?;
    }
    Ok(())
}

/// The cluster fault tests of `cluster` (its name, the name of its test file and in the names
/// of its tests), once `started` it; `down` stops it. On kafka3: leader kills and a lost quorum
/// under puts, zombie writers fenced out (`tests/tests/kafka3.rs`), and the simulator's SIGKILL
/// campaign with a broker kill (`sim_survives_sigkill_and_a_broker_kill_on_kafka3`); on fluss3
/// the same with tablet servers (`tests/tests/fluss3.rs`,
/// `sim_survives_sigkill_and_a_tablet_server_kill_on_fluss3`). One test at a time, since each
/// kills nodes, and one cluster at a time, since two would crowd a small machine.
fn cluster_fault_tests_on(binaries: &[Binary], cluster: &str, started: Result<()>, down: Step) -> Result<()> {
    let step = format!("{cluster} cluster fault tests");
    let tested =
        started.with_context(|| format!("starting the {cluster} cluster for the cluster fault tests")).and_then(|()| {
            let tests = binaries::named(
                binaries,
                &[&format!("actionstate-tests tests/{cluster}.rs"), "actionstate-tests tests/all/main.rs"],
            )?;
            let args = [cluster.to_owned(), "--test-threads=1".to_owned(), "--nocapture".to_owned()];
            let envs = [
                ("ACTIONSTATE_REQUIRE_SERVICES".to_owned(), "1".to_owned()),
                ("RUST_BACKTRACE".to_owned(), "1".to_owned()),
            ];
            timed(&step, || binaries::run_all(&step, &tests, 1, &args, &envs, Path::new("target/ci-logs")))
        });
    let stopped = timed(&format!("{cluster} down"), down);
    tested?;
    stopped.with_context(|| format!("stopping the {cluster} cluster"))
}
