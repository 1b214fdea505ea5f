//! The Python package (`crates/python`): installed into a fresh virtual environment with the
//! README's command, `pip install ./crates/python`, which builds its wheel with maturin (in
//! the dev profile here, sharing the workspace's target directory, where a user's install
//! builds a release), and its pytest suite run against it.
//!
//! CI installs it beside the fault tests (`beside.rs`) and runs the suite after the cluster
//! fault tests, on a Kafka broker started for it (`mod.rs`); `cargo xtask python` does both in
//! the foreground.

use anyhow::Result;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The pytest the suite runs with, pinned.
const PYTEST: &str = "pytest==9.2.0";
/// Where the test environment goes.
const VENV: &str = "target/python/test-env";
/// How pip's build of the wheel runs maturin: the dev profile, the workspace's lock file, and
/// the server backend the suite runs on (as `MATURIN_PEP517_ARGS="--features kafka"` builds
/// it for a user).
const MATURIN_ARGS: &str = "--profile dev --locked --features kafka";

/// Installs the package, as the README says, and pytest into a fresh virtual environment;
/// returns its `python`. Each command goes through `log` (a step name and the command).
pub(crate) fn build(log: &dyn Fn(&str, &mut Command) -> Result<()>) -> Result<PathBuf> {
    let root = crate::services::workspace_root()?;
    let venv = root.join(VENV);
    log("python: fresh environment", Command::new("python3").args(["-m", "venv", "--clear"]).arg(&venv))?;
    let mut install = pip(&venv);
    install
        .arg("./crates/python")
        .current_dir(&root)
        .env("MATURIN_PEP517_ARGS", MATURIN_ARGS)
        .env("CARGO_TARGET_DIR", root.join("target"));
    if std::env::var_os("CI").is_some() {
        install.env("CARGO_INCREMENTAL", "0").env("CARGO_PROFILE_DEV_DEBUG", "line-tables-only");
    }
    log("python: pip install ./crates/python (maturin)", &mut install)?;
    log("python: install pytest", pip(&venv).arg(PYTEST))?;
    Ok(venv.join("bin").join("python"))
}

/// The pytest suite in CI, with `python` (from [`build`]) and `envs` (the servers' settings,
/// and `ACTIONSTATE_REQUIRE_SERVICES`): a test skipped for lack of a server fails the step.
pub(crate) fn tests(python: &Path, envs: &[(String, String)]) -> Result<()> {
    crate::run_no_skips("python tests (pytest, against the wheel)", &mut pytest(python, envs)?)
}

/// `cargo xtask python`: the wheel, a fresh environment and the suite, with the servers
/// `cargo xtask services up` published; without them their tests skip, loudly.
pub(crate) fn alone() -> Result<()> {
    // The agent example's HTTP service (CI's test build has made it already).
    crate::run(
        "python: the external service",
        crate::cargo().args(["build", "--locked", "-p", "actionstate-examples", "--bin", "external-service"]),
    )?;
    let python = build(&|step, cmd| crate::run(step, cmd))?;
    crate::run("python tests (pytest, against the wheel)", &mut pytest(&python, &[])?)
}

fn pytest(python: &Path, envs: &[(String, String)]) -> Result<Command> {
    let root = crate::services::workspace_root()?;
    let mut pytest = Command::new(python);
    pytest
        .args(["-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider"])
        .arg(root.join("crates/python/tests"))
        .envs(envs.iter().cloned())
        .current_dir(&root);
    Ok(pytest)
}

/// `cargo xtask bench python`: sequential puts through the Python package against the same
/// puts from Rust (`actionstate bench`), and a durable call's cost from Python, on the
/// embedded store and on a local Kafka broker (`crates/python/bench/put.py`). Both sides are
/// release builds: the command line with the Kafka backend, and the wheel as a user's
/// `pip install` builds it.
pub(crate) fn bench() -> Result<()> {
    let root = crate::services::workspace_root()?;
    crate::run(
        "bench python: the command line (release)",
        crate::cargo().args(["build", "--release", "--locked", "-p", "actionstate", "--features", "kafka"]),
    )?;
    let venv = root.join("target/python/bench-env");
    crate::run("bench python: environment", Command::new("python3").args(["-m", "venv", "--clear"]).arg(&venv))?;
    crate::run(
        "bench python: pip install ./crates/python (release)",
        pip(&venv)
            .arg("./crates/python")
            .current_dir(&root)
            .env("MATURIN_PEP517_ARGS", "--locked --features kafka")
            .env("CARGO_TARGET_DIR", root.join("target")),
    )?;
    let binary = root.join("target/release/actionstate");
    let script = root.join("crates/python/bench/put.py");
    let python = venv.join("bin").join("python");
    let data = root.join("target/python/bench-data");
    if data.exists() {
        std::fs::remove_dir_all(&data)?;
    }
    let on = |what: &str, prefix: &str| {
        crate::run(&format!("bench python: {what}"), Command::new(&python).arg(&script).arg(&binary).arg(prefix))
    };
    on("embedded store", &format!("file:{}", data.display()))?;
    let kafka = crate::services::up_kafka()?;
    let measured = on("kafka, one broker", &format!("kafka://{}/pybench", kafka.client.bootstrap));
    let stopped = crate::services::down_kafka();
    measured?;
    stopped
}

fn pip(venv: &Path) -> Command {
    let mut cmd = Command::new(venv.join("bin").join("python"));
    cmd.args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"]);
    cmd
}
