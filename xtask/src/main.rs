//! Developer tasks: `cargo xtask <task>`.
//!
//! - `ci` — everything CI checks: formatting, clippy with warnings denied on all targets, all
//!   tests including doc tests (with a local Kafka broker and a local Fluss cluster started for
//!   them and stopped after; then the tests that kill nodes of a three-node Kafka cluster, on
//!   one started for them and stopped after), and rustdoc with warnings denied. A test that
//!   reports a skip (a missing server) fails the run. The workspace's tests include the
//!   checks of the fuzz target over its seed corpus and generated inputs
//!   (`crates/state-core/tests/codec/fuzz_target.rs`) and every shell example of the README
//!   and the documents it links (`docs/cli.md`, `docs/logs.md`, ...), run in order against
//!   the local servers (`crates/cli/tests/readme.rs`). The tracing test's OTLP receiver, the `oteltest`
//!   Python package, is installed once into `target/services/otlp-sink` (`services/otlp_sink.rs`).
//! - `bench index` — criterion benchmarks of the replay index and its summary line.
//! - `bench restore` — a restore from the log's own checkpoints after histories of 10,000,
//!   100,000 and 1,000,000 inputs, with everything kept and with the default retention
//!   (`actionstate-bench --restore`).
//! - `bench file` — store put and rebuild on the embedded backend against raw redb
//!   (`actionstate-bench`, the benchmark crate in `crates/bench`, which is not shipped).
//! - `bench kafka` — store put and rebuild on a Kafka topic against raw rdkafka clients, on a
//!   local broker started for it and stopped after (`actionstate-bench`).
//! - `bench fluss` — store put and rebuild on a Fluss log table against raw fluss-rs clients, on
//!   a local Fluss cluster started for it and stopped after (`actionstate-bench`).
//! - `bench soak` — `actionstate soak` over a million inputs on the embedded store: retention
//!   on and then keeping everything; four owners sharing the log against one; four owners that
//!   rescale to three halfway; both again with the soak keeping the checkpoints (two-phase).
//!   `bench soak kafka` makes the same runs with 200,000 inputs on
//!   topics of a local broker started for it, measuring the topics' partition directories.
//! - `bench waits` — a durable wait, resolved and resumed, against a plain durable call, and
//!   100,000 pending waits (bytes each, the restore that finds them), on the embedded store;
//!   `bench waits kafka` makes the first on a local broker.
//! - `bench tracing` — what the store's spans cost: put and rebuild of `actionstate bench` built
//!   without the `otlp` feature, built with it and run without `--otlp`, and run with `--otlp`
//!   to a local endpoint, in alternating rounds (`bench_tracing.rs`).
//! - `release --dry-run` — `cargo publish --workspace --dry-run`: every published crate packaged
//!   in dependency order and built from its package; `release VERSION` bumps the versions, cuts
//!   CHANGELOG.md's "Unreleased" under the new version, and runs the dry run (`release.rs`).
//! - `semver` — cargo-semver-checks on every published crate against the last release that
//!   `RELEASES` names, from rustdoc's JSON of both (`ci/beside.rs`; `ci` runs it too).
//! - `scratch` — the README's registry lines in a crate outside the workspace, with the
//!   published crates as `cargo package` packs them (`ci/beside.rs`; `ci` runs it too).
//! - `python` — the Python package's wheel, built by maturin and installed into a fresh
//!   virtual environment, and its pytest suite (`crates/python/tests`), on the servers
//!   `services up` started (`ci/python.rs`; `ci` runs it too).
//! - `msrv` (or `minimal-versions`) — the published crates, every feature, checked by the
//!   toolchain that the workspace's `rust-version` names (installed by rustup when missing)
//!   with the lowest dependency versions the manifests allow (`cargo +nightly update -Z
//!   direct-minimal-versions`, in a checkout of `HEAD`; `ci/beside.rs`; `ci` runs it too).
//! - `fuzz [--time SECONDS]` — the decoder fuzz target from its seed corpus (needs cargo-fuzz
//!   and a nightly toolchain, installed on demand when missing; without nightly, the stable
//!   compiler with `RUSTC_BOOTSTRAP=1`). Its checks also run in `ci`, inside the workspace's
//!   tests (`crates/state-core/tests/codec/fuzz_target.rs`).
//! - `chaos kafka|fluss [--leader-kills N] [--zombie-episodes N]` — the leader-kill and
//!   zombie-writer scenarios on a local three-node Kafka cluster, or on the leader kills a
//!   local Fluss cluster of three tablet servers, started for it and stopped after (10 kills
//!   and 10 zombie episodes by default), one JSON line of counts.
//! - `services up|down|status [kafka] [kafka3] [fluss] [fluss3]` — a local Apache Kafka broker, a
//!   local three-node Kafka cluster (replication factor 3; `services restart-node kafka3 N`
//!   restarts a node), a local Apache Fluss cluster (ZooKeeper, a coordinator and a tablet
//!   server), and one with three tablet servers (replication factor 3; `services restart-node
//!   fluss3 N` restarts a tablet server), for integration tests and benchmarks (needs Java 17,
//!   and Maven to fetch them once); see `services/` (the broker in `services/kafka/`, the three
//!   nodes in `services/kafka/cluster.rs`, the Fluss clusters in `services/fluss/`, the three
//!   tablet servers in `services/fluss/cluster.rs`).
//! - `shape` — lines per crate, files over 600 lines, import circles between the files of one
//!   crate (from their `use` statements) and functions over 80 lines: the measures the tidy
//!   tests hold the code to (`shape.rs`).

mod bench_tracing;
mod ci;
mod release;
mod services;
mod shape;
#[cfg(test)]
mod tidy;

use anyhow::{Context, Result, bail};
use services::{fluss, workspace_root};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// Tests print this marker when a server they need is not configured; `ci` turns it into a
/// failure so that no skipped test counts as passed.
const SKIP_MARKER: &str = "ACTIONSTATE-SKIP";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = workspace_root()?;
    std::env::set_current_dir(&root)?;
    match args.first().map(String::as_str) {
        Some("ci") => ci::ci(),
        Some("bench") => bench(args.get(1).map(String::as_str), args.get(2).map(String::as_str)),
        Some("fuzz") => fuzz(parse_time(&args[1..])?),
        Some("chaos") => chaos(&args[1..]),
        Some("release") => release::run_release(&args[1..]),
        Some(check @ ("semver" | "scratch" | "msrv" | "minimal-versions" | "python")) => ci::alone(check),
        Some("services") => services::run(&args[1..]),
        Some("shape") => {
            shape::report(&root);
            Ok(())
        }
        Some("help") | None => {
            print_help();
            Ok(())
        }
        Some(other) => {
            print_help();
            bail!("unknown task `{other}`")
        }
    }
}

fn print_help() {
    eprintln!(
        "usage: cargo xtask <task>\n\n\
         tasks:\n  \
         ci                   fmt check, clippy -D warnings, all tests, rustdoc -D warnings\n  \
         bench index          replay-index benchmarks and their summary line\n  \
         bench restore        restore from the log's checkpoints after 10k, 100k and 1M inputs\n  \
         bench file           store put and rebuild on the embedded backend vs raw redb\n  \
         bench kafka          store put and rebuild vs raw rdkafka: a local broker, then the 3-node cluster\n  \
         bench fluss          store put and rebuild vs raw fluss-rs: a local Fluss cluster, then 3 tablet servers\n  \
         bench python         sequential puts through Python vs the same from Rust, and a durable call from Python\n  \
         bench soak           a million inputs: retention on and off, 4 owners vs 1, 4 rescaled to 3, both two-phase too\n  \
         bench soak kafka     the same, 200,000 inputs on a local Kafka broker\n  \
         bench waits [kafka]  a durable wait, resolved and resumed, vs a plain call; 100,000 pending waits\n  \
         bench tracing        store put and rebuild without the otel feature, with it off, with it exporting\n  \
         release --dry-run    package every published crate in dependency order and build each from its package\n  \
         release VERSION      bump the published crates to VERSION, cut CHANGELOG.md, run the dry run\n  \
         semver               cargo-semver-checks on every published crate against the last release in RELEASES\n  \
         scratch              the README's dependency lines in a crate outside the workspace, against the packaged crates\n  \
         msrv                 the published crates checked by the Rust that rust-version names, with the lowest\n  \
                              dependency versions the manifests allow (also: minimal-versions)\n  \
         python               the Python package's wheel (maturin), installed into a fresh virtual environment, and its pytest suite\n  \
         fuzz [--time SECS]   run the record-decoder fuzz target (default 60 s)\n  \
         chaos kafka [--leader-kills N] [--zombie-episodes N]   kill Kafka partition leaders under puts, run zombie writers (local 3-node cluster)\n  \
         chaos fluss [--leader-kills N]   kill the busiest Fluss tablet server under puts and rebuilds (local 3-server cluster)\n  \
         services up [kafka]  start a local Kafka broker; addresses in target/services/kafka.env\n  \
         services up kafka3   start a local 3-node Kafka cluster; addresses in target/services/kafka3.env\n  \
         services restart-node kafka3 N   stop node N of it and start it again\n  \
         services up fluss    start a local Fluss cluster; addresses in target/services/fluss.env\n  \
         services up fluss3   start a local Fluss cluster of 3 tablet servers; addresses in target/services/fluss3.env\n  \
         services restart-node fluss3 N   stop tablet server N of it and start it again\n  \
         services down [SVC]  stop the services `services up` started (all of them by default)\n  \
         services up otlp-sink  install the tracing test's OTLP receiver (oteltest, from PyPI) into target/services\n  \
         services status      whether they run and answer
           shape                lines per crate, long files and functions, import circles between files"
    );
}

fn parse_time(args: &[String]) -> Result<u64> {
    match args {
        [] => Ok(60),
        [flag, n] if flag == "--time" => n.parse().with_context(|| format!("--time expects seconds, got `{n}`")),
        _ => bail!("usage: cargo xtask fuzz [--time SECONDS]"),
    }
}

fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    // A CI run builds once from a clean checkout: incremental caches would only take disk
    // (several GiB for this workspace) and time to write.
    if std::env::var_os("CI").is_some() {
        cmd.env("CARGO_INCREMENTAL", "0");
        // Line tables are what a test's backtrace needs; the full debug info of every test
        // binary and dependency would only make the build and its links slower.
        cmd.env("CARGO_PROFILE_DEV_DEBUG", "line-tables-only");
    }
    cmd
}

/// Free space, in GiB, of the file system that holds `target/` (or the workspace before the
/// first build), as `df` reports it; `None` when `df` is unavailable or prints something else.
fn free_gib(path: &Path) -> Option<f64> {
    let out = Command::new("df").args(["-Pk"]).arg(path).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let available_kib: f64 = text.lines().nth(1)?.split_whitespace().nth(3)?.parse().ok()?;
    Some(available_kib / (1024.0 * 1024.0))
}

/// Runs a command, echoing it, and fails with its exit status.
fn run(step: &str, cmd: &mut Command) -> Result<()> {
    eprintln!("==> {step}: {cmd:?}");
    let started = Instant::now();
    let status = cmd.status().with_context(|| format!("{step}: could not start {cmd:?}"))?;
    ci::record(step, started.elapsed(), status.success());
    if !status.success() {
        bail!("{step} failed ({status})");
    }
    eprintln!("==> {step}: ok in {:.1}s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Runs a command, passing its output through, and fails if any line carries the skip marker.
fn run_no_skips(step: &str, cmd: &mut Command) -> Result<()> {
    eprintln!("==> {step}: {cmd:?}");
    let started = Instant::now();
    let mut child = cmd.stdout(Stdio::piped()).spawn().with_context(|| format!("{step}: could not start {cmd:?}"))?;
    let stdout = child.stdout.take().context("child stdout")?;
    let mut skips = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line?;
        println!("{line}");
        if line.contains(SKIP_MARKER) {
            skips.push(line);
        }
    }
    let status = child.wait()?;
    ci::record(step, started.elapsed(), status.success() && skips.is_empty());
    if !status.success() {
        bail!("{step} failed ({status})");
    }
    if !skips.is_empty() {
        bail!(
            "{step}: {} test(s) skipped for lack of a server, which ci counts as failure:\n{}",
            skips.len(),
            skips.join("\n")
        );
    }
    eprintln!("==> {step}: ok in {:.1}s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Starts or stops a cluster.
type Step = fn() -> Result<()>;

/// `cargo xtask chaos kafka|fluss [--leader-kills N] [--rebuild-kills N] [--zombie-episodes N]`:
/// starts the three-node cluster (kafka3, fluss3), runs the leader-kill and zombie scenarios
/// (`tests/src/bin/chaos.rs`, which prints the JSON line) and stops the cluster, whatever the
/// scenarios did.
fn chaos(args: &[String]) -> Result<()> {
    const USAGE: &str =
        "usage: cargo xtask chaos kafka|fluss [--leader-kills N] [--rebuild-kills N] [--zombie-episodes N]";
    // The scenario binary checks the options; what it is given is passed on as it is.
    let (up, down): (Step, Step) = match args.first().map(String::as_str) {
        Some("kafka") => (|| services::up_kafka3().map(drop), services::down_kafka3),
        Some("fluss") => (|| fluss::cluster::up_fluss3().map(drop), fluss::cluster::down_fluss3),
        _ => bail!(USAGE),
    };
    let (backend, cluster) = (&args[0], format!("{}3", args[0]));
    // Built before the cluster starts, so that the build does not compete with three JVMs.
    run("chaos build", cargo().args(["build", "-p", "actionstate-tests", "--bin", "chaos", "--locked"]))?;
    up().with_context(|| format!("starting the {cluster} cluster"))?;
    let ran = run(
        &format!("chaos {backend}"),
        cargo().args(["run", "-q", "-p", "actionstate-tests", "--bin", "chaos", "--locked", "--"]).args(args),
    );
    let stopped = down();
    ran?;
    stopped.with_context(|| format!("stopping the {cluster} cluster"))
}

/// `actionstate-bench --log URL --json`, in release, with its server backends (its default
/// features).
fn bench_on(backend: &str, url: &str) -> Result<()> {
    let args = ["run", "--release", "-p", "actionstate-bench", "--", "--log", url, "--json"];
    run(&format!("bench {backend}"), cargo().args(args))
}

/// The runs of `bench soak`, beyond the inputs and the log: retention against keeping
/// everything; four owners sharing the log against one; four that rescale to three; the same
/// two with the soak keeping the checkpoints (the two-phase form, as Flink does), each as
/// three pairs of the owners and one owner in alternating order, for the median ratio.
const SOAK_RUNS: [&[&str]; 5] = [
    &["--compare"],
    &["--owners", "4"],
    &["--owners", "4", "--rescale-to", "3"],
    &["--owners", "4", "--two-phase", "--pairs", "3"],
    &["--owners", "4", "--rescale-to", "3", "--two-phase", "--pairs", "3"],
];

/// The arguments of soak run `extra` for `inputs` inputs: runs of owners warm up first on a
/// fifth as many (`--warm-up`), so that no measured run pays for the process warming up.
fn soak_args(extra: &[&str], inputs: u64) -> Vec<String> {
    let mut args: Vec<String> = ["--inputs".to_owned(), inputs.to_string()].into();
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    if extra.contains(&"--owners") {
        args.extend(["--warm-up".to_owned(), (inputs / 5).to_string()]);
    }
    args
}

/// `bench soak [kafka]`: the runs of `SOAK_RUNS`, on the embedded store or on a local broker.
fn bench_soak(on: Option<&str>) -> Result<()> {
    match on {
        // A million inputs with retention on, then keeping everything: flat or growing; then
        // four owners sharing the log against one, and four that rescale to three halfway.
        None => {
            for (n, extra) in SOAK_RUNS.iter().enumerate() {
                let soak = ["run", "--release", "-p", "actionstate", "--", "soak"];
                let name = format!("bench soak ({}/{})", n + 1, SOAK_RUNS.len());
                run(&name, cargo().args(soak).args(soak_args(extra, 1_000_000)))?;
            }
            Ok(())
        }
        // The same runs on Kafka topics, 200,000 inputs each: the topics' partition
        // directories on the broker's disk, flat or growing.
        Some("kafka") => {
            let kafka = services::up_kafka().context("starting the Kafka broker for the soak")?;
            let log_dir = services::kafka_log_dir()?;
            let measured = SOAK_RUNS.iter().enumerate().try_for_each(|(n, extra)| {
                let url = format!(
                    "kafka://{}/actionstate-soak-{}-{n}?replication=1&topic.segment.bytes=1048576",
                    kafka.client.bootstrap,
                    std::process::id()
                );
                let soak = ["run", "--release", "-p", "actionstate", "--features", "kafka", "--", "soak"];
                let name = format!("bench soak kafka ({}/{})", n + 1, SOAK_RUNS.len());
                let mut soak_run = cargo();
                soak_run.args(soak).args(["--log", &url, "--broker-log-dir"]).arg(&log_dir);
                run(&name, soak_run.args(soak_args(extra, 200_000)))
            });
            let stopped = services::down_kafka();
            measured?;
            stopped.context("stopping the Kafka broker")
        }
        Some(_) => bail!("usage: cargo xtask bench soak [kafka]"),
    }
}

/// `bench waits [kafka]`: a durable wait against a plain durable call (`actionstate-bench --waits`).
fn bench_waits(on: Option<&str>) -> Result<()> {
    match on {
        // A durable wait, resolved and resumed, against a plain durable call; on the embedded
        // store also 100,000 pending waits (memory per wait, the restore that finds them).
        None => run(
            "bench waits",
            cargo().args(["run", "--release", "-p", "actionstate-bench", "--no-default-features", "--", "--waits"]),
        ),
        Some("kafka") => {
            let kafka = services::up_kafka().context("starting the Kafka broker for the benchmark")?;
            let url = format!("kafka://{}/actionstate-bench?replication=1", kafka.client.bootstrap);
            let bench =
                ["run", "--release", "-p", "actionstate-bench", "--features", "kafka", "--", "--waits", "--log"];
            let measured = run("bench waits kafka", cargo().args(bench).arg(&url));
            let stopped = services::down_kafka();
            measured?;
            stopped.context("stopping the Kafka broker")
        }
        Some(_) => bail!("usage: cargo xtask bench waits [kafka]"),
    }
}

fn bench(what: Option<&str>, on: Option<&str>) -> Result<()> {
    match what {
        Some("index") => run("bench index", cargo().args(["bench", "-p", "actionstate-index", "--bench", "index"])),
        Some("restore") => run(
            "bench restore",
            cargo().args(["run", "--release", "-p", "actionstate-bench", "--no-default-features", "--", "--restore"]),
        ),
        // The embedded backend alone: without the server backends, no librdkafka to build.
        Some("file") => run(
            "bench file",
            cargo().args(["run", "--release", "-p", "actionstate-bench", "--no-default-features", "--"]),
        ),
        Some("soak") => bench_soak(on),
        Some("tracing") => bench_tracing::run(),
        Some("python") => ci::bench_python(),
        Some("kafka") => {
            let kafka = services::up_kafka().context("starting the Kafka broker for the benchmark")?;
            let measured =
                bench_on("kafka", &format!("kafka://{}/actionstate-bench?replication=1", kafka.client.bootstrap));
            let stopped = services::down_kafka();
            measured?;
            stopped.context("stopping the Kafka broker")?;
            // The same on the three-node cluster: replication 3, two in-sync replicas for an
            // acknowledgement, the raw producer with the same acks on a topic like the store's.
            let cluster = services::up_kafka3().context("starting the kafka3 cluster for the benchmark")?;
            let url = format!("kafka://{}/actionstate-bench3?replication=3", cluster.bootstrap());
            let measured = bench_on("kafka3", &url);
            let stopped = services::down_kafka3();
            measured?;
            stopped.context("stopping the kafka3 cluster")
        }
        Some("fluss") => {
            let env = fluss::up_fluss().context("starting the Fluss cluster for the benchmark")?;
            let measured = bench_on("fluss", &format!("fluss://{}/actionstate_bench/bench", env.client.bootstrap));
            let stopped = fluss::down_fluss();
            measured?;
            stopped.context("stopping the Fluss cluster")?;
            // The same on three tablet servers: tables replicated three times, the raw writer
            // on a table of the same replication.
            let env = fluss::cluster::up_fluss3().context("starting the fluss3 cluster for the benchmark")?;
            let url = format!("fluss://{}/actionstate_bench/bench3?replication=3", env.client.bootstrap);
            let measured = bench_on("fluss3", &url);
            let stopped = fluss::cluster::down_fluss3();
            measured?;
            stopped.context("stopping the fluss3 cluster")
        }
        Some("waits") => bench_waits(on),
        Some(other) => bail!("unknown benchmark `{other}` (known: index, restore, file, kafka, fluss, soak, waits)"),
        None => bail!("usage: cargo xtask bench <index|restore|file|kafka|fluss|soak|waits>"),
    }
}

/// `cargo xtask fuzz [--time SECONDS]`: the `decode` fuzz target for that long, in one
/// process, from the seed corpus `fuzz/seed-corpus.sh` writes (kept in `fuzz/corpus/decode`
/// with what the fuzzer adds to it). cargo-fuzz builds with sanitizer flags that only a nightly
/// compiler takes: nightly when rustup has it or can install it, else the stable compiler with
/// `RUSTC_BOOTSTRAP=1`, which takes the same flags. The target's checks also run on stable in
/// every `cargo test` (`crates/state-core/tests/codec/fuzz_target.rs`).
fn fuzz(seconds: u64) -> Result<()> {
    let fuzz_dir = Path::new("fuzz");
    if !fuzz_dir.join("Cargo.toml").exists() {
        bail!("fuzz/Cargo.toml is missing");
    }
    let nightly = has_nightly()
        || Command::new("rustup")
            .args(["toolchain", "install", "nightly", "--profile", "minimal"])
            .status()
            .is_ok_and(|s| s.success());
    if !nightly {
        eprintln!("==> fuzz: no nightly toolchain; building with the stable compiler and RUSTC_BOOTSTRAP=1");
    }
    let has_cargo_fuzz = cargo()
        .args(["fuzz", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has_cargo_fuzz {
        run("install cargo-fuzz", cargo().args(["install", "cargo-fuzz", "--locked"]))?;
    }
    run("fuzz seed corpus", Command::new("bash").arg(fuzz_dir.join("seed-corpus.sh")))?;
    let mut cmd = Command::new("cargo");
    cmd.current_dir(fuzz_dir);
    if nightly {
        cmd.arg("+nightly");
    } else {
        cmd.env("RUSTC_BOOTSTRAP", "1");
    }
    // One process (libFuzzer runs one unless given `-jobs`, which would also send its output
    // to log files), so that a run leaves the machine's other cores free.
    cmd.args(["fuzz", "run", "decode", "--", &format!("-max_total_time={seconds}"), "-print_final_stats=1"]);
    run("fuzz decode", &mut cmd)
}

/// Whether rustup has a nightly toolchain.
fn has_nightly() -> bool {
    Command::new("rustup")
        .args(["run", "nightly", "rustc", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
