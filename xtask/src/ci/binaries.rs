//! The test binaries of one build, run two at a time.
//!
//! `cargo test` runs its binaries one after the other, and most of them spend much of their time
//! waiting on a server, a child process or a disk flush while a core idles. Here each binary runs
//! as cargo would run it (from its package's directory, with the same arguments), its output
//! kept aside and printed whole when it ends, so that two binaries' lines never interleave.

use crate::SKIP_MARKER;
use anyhow::{Context, Result, bail};
use std::collections::VecDeque;
use std::fs::{self, File};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How many binaries the test step runs at once: two cores, and binaries that often wait.
pub(crate) const JOBS: usize = 2;

/// The binaries that take longest, started first so that the run does not end on one of them
/// alone (names as `Binary::name` gives them; about 240, 80, 60 and 50 s on two cores).
const LONGEST_FIRST: [&str; 7] = [
    "actionstate-tests tests/all/main.rs",
    "actionstate-kafka tests/conformance.rs",
    "actionstate tests/cli.rs",
    "actionstate tests/server_safety.rs",
    "actionstate-index tests/cut.rs",
    "actionstate-index tests/model.rs",
    "actionstate tests/readme.rs",
];

/// A test binary the build made.
#[derive(Debug)]
pub(crate) struct Binary {
    /// Package and source of the target: `actionstate-tests tests/all/main.rs`.
    name: String,
    executable: PathBuf,
    /// The package's directory, where cargo runs its tests.
    dir: PathBuf,
}

/// The test binaries a `cargo test --no-run --message-format=json-render-diagnostics` run
/// reported on its standard output (compiler messages go to standard error, rendered).
pub(crate) fn from_build_output(stdout: &str) -> Result<Vec<Binary>> {
    let mut binaries = Vec::new();
    for line in stdout.lines().filter(|l| l.starts_with('{')) {
        let message: serde_json::Value = serde_json::from_str(line).with_context(|| format!("cargo printed {line}"))?;
        let (Some(executable), Some(true)) = (message["executable"].as_str(), message["profile"]["test"].as_bool())
        else {
            continue;
        };
        // What `cargo test` runs: the unit tests of libraries and binaries, and the integration
        // tests; benchmarks and examples the build only checks.
        let kinds = message["target"]["kind"].as_array().map(Vec::as_slice).unwrap_or_default();
        if kinds.iter().any(|k| k == "bench" || k == "example") {
            continue;
        }
        let manifest = Path::new(message["manifest_path"].as_str().context("an artifact without manifest_path")?);
        let dir = manifest.parent().context("a manifest path without a directory")?.to_path_buf();
        let source = Path::new(message["target"]["src_path"].as_str().context("an artifact without src_path")?);
        let package = package_name(&message);
        let source = source.strip_prefix(&dir).unwrap_or(source).display().to_string();
        binaries.push(Binary { name: format!("{package} {source}"), executable: executable.into(), dir });
    }
    if binaries.is_empty() {
        bail!("the test build reported no test binary");
    }
    binaries.sort_by_key(|b| {
        (LONGEST_FIRST.iter().position(|n| *n == b.name).unwrap_or(LONGEST_FIRST.len()), b.name.clone())
    });
    Ok(binaries)
}

/// The binaries of `binaries` built from `names` (`package source`, as [`Binary`] names them),
/// in that order; fails if one is missing.
pub(crate) fn named<'a>(binaries: &'a [Binary], names: &[&str]) -> Result<Vec<&'a Binary>> {
    names
        .iter()
        .map(|name| {
            binaries.iter().find(|b| b.name == *name).with_context(|| format!("the test build made no `{name}`"))
        })
        .collect()
}

/// `name` of `package_id` (`path+file:///…/crates/cli#actionstate@0.1.0` or
/// `…#0.1.0` when the directory has the package's name).
fn package_name(message: &serde_json::Value) -> String {
    let id = message["package_id"].as_str().unwrap_or_default();
    let fragment = id.rsplit('#').next().unwrap_or_default();
    match fragment.split_once('@') {
        Some((name, _)) => name.to_owned(),
        None => id.trim_end_matches(&format!("#{fragment}")).rsplit('/').next().unwrap_or_default().to_owned(),
    }
}

/// Runs every binary with `args`, `jobs` at a time, with `envs` added, writing each one's output
/// under `logs` and printing it when it ends. Fails, after all have run, if any failed or
/// printed the skip marker.
pub(crate) fn run_all(
    step: &str,
    binaries: &[&Binary],
    jobs: usize,
    args: &[String],
    envs: &[(String, String)],
    logs: &Path,
) -> Result<()> {
    eprintln!("==> {step}: {} test binaries, {jobs} at a time", binaries.len());
    let started = Instant::now();
    fs::create_dir_all(logs).with_context(|| format!("creating {}", logs.display()))?;
    let queue = Mutex::new(binaries.iter().copied().collect::<VecDeque<_>>());
    let failures = Mutex::new(Vec::new());
    let printing = Mutex::new(());
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| {
                while let Some(binary) = queue.lock().ok().and_then(|mut q| q.pop_front()) {
                    let outcome = run_one(binary, args, envs, logs, &printing);
                    if let (Err(e), Ok(mut failures)) = (outcome, failures.lock()) {
                        failures.push(format!("{}: {e:#}", binary.name));
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap_or_default();
    if !failures.is_empty() {
        bail!("{step}: {} test binaries failed:\n{}", failures.len(), failures.join("\n"));
    }
    eprintln!("==> {step}: ok in {:.1}s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Runs one binary to its end and prints its output; fails if it failed or skipped a test.
fn run_one(
    binary: &Binary,
    args: &[String],
    envs: &[(String, String)],
    logs: &Path,
    printing: &Mutex<()>,
) -> Result<()> {
    let file_name: String = binary.name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    let log = logs.join(format!("{file_name}.log"));
    let out = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let started = Instant::now();
    let status = Command::new(&binary.executable)
        .args(args)
        .envs(envs.iter().map(|(k, v)| (k, v)))
        .current_dir(&binary.dir)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .status()
        .with_context(|| format!("starting {}", binary.executable.display()))?;
    let took = started.elapsed();
    let skips = print(binary, &log, took, printing)?;
    if !status.success() {
        bail!("{status}");
    }
    if skips > 0 {
        bail!("{skips} test(s) skipped for lack of a server, which ci counts as failure");
    }
    Ok(())
}

/// Prints a binary's output under a header, whole; returns how many lines carry the skip marker.
fn print(binary: &Binary, log: &Path, took: Duration, printing: &Mutex<()>) -> Result<usize> {
    let _whole = printing.lock();
    println!("\n     Running {} ({}) in {:.1}s", binary.name, binary.executable.display(), took.as_secs_f64());
    let mut skips = 0;
    for line in BufReader::new(File::open(log)?).lines() {
        let line = line?;
        if line.contains(SKIP_MARKER) {
            skips += 1;
        }
        println!("{line}");
    }
    Ok(skips)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    fn artifact(package_id: &str, dir: &str, source: &str, test: bool, executable: Option<&str>) -> String {
        let kind = if source.starts_with("benches/") { "bench" } else { "test" };
        serde_json::json!({
            "reason": "compiler-artifact",
            "package_id": package_id,
            "manifest_path": format!("{dir}/Cargo.toml"),
            "target": {"kind": [kind], "name": "x", "src_path": format!("{dir}/{source}"), "test": true},
            "profile": {"opt_level": "0", "test": test},
            "executable": executable,
            "fresh": true,
        })
        .to_string()
    }

    #[test]
    fn the_build_output_names_each_test_binary_with_its_package_and_source_longest_first() {
        let stdout = [
            artifact(
                "path+file:///w/crates/state-core#actionstate-core@0.1.0",
                "/w/crates/state-core",
                "tests/codec/main.rs",
                true,
                Some("/w/target/debug/deps/codec-1"),
            ),
            // A library: no executable.
            artifact(
                "path+file:///w/crates/state-core#actionstate-core@0.1.0",
                "/w/crates/state-core",
                "src/lib.rs",
                false,
                None,
            ),
            // A binary built for the tests to run, not a test harness.
            artifact(
                "path+file:///w/tests#actionstate-tests@0.1.0",
                "/w/tests",
                "src/bin/sim-child.rs",
                false,
                Some("/w/target/debug/sim-child"),
            ),
            artifact(
                "path+file:///w/tests#actionstate-tests@0.1.0",
                "/w/tests",
                "tests/all/main.rs",
                true,
                Some("/w/target/debug/deps/all-2"),
            ),
            // A benchmark, built in test mode by `--all-targets`, which `cargo test` does not run.
            artifact(
                "path+file:///w/crates/state-index#actionstate-index@0.1.0",
                "/w/crates/state-index",
                "benches/index.rs",
                true,
                Some("/w/target/debug/deps/index-4"),
            ),
            // A package whose directory has its name: the id has no name before the version.
            artifact(
                "path+file:///w/xtask#0.1.0",
                "/w/xtask",
                "src/main.rs",
                true,
                Some("/w/target/debug/deps/xtask-3"),
            ),
            "{\"reason\":\"build-finished\",\"success\":true}".to_owned(),
        ]
        .join("\n");
        let binaries = from_build_output(&stdout).unwrap();
        let names: Vec<&str> = binaries.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(
            names,
            ["actionstate-tests tests/all/main.rs", "actionstate-core tests/codec/main.rs", "xtask src/main.rs"]
        );
        assert_eq!(binaries[0].dir, Path::new("/w/tests"));
        assert_eq!(binaries[0].executable, Path::new("/w/target/debug/deps/all-2"));
        assert!(from_build_output("{\"reason\":\"build-finished\",\"success\":true}").is_err());
    }
}
