//! The checks that need no server, run beside the tests that do.
//!
//! First the Python package's wheel and its test environment (`python.rs`), handed to the
//! step that runs its suite once the fault tests are done with the broker; then:
//!
//! Once the test step is done, CI spends most of its time waiting on servers: the fault tests
//! stop and kill them and wait for elections, and a core idles. These checks take that time, at
//! the lowest CPU priority (`nice 19`, inherited by every process they start), so the fault
//! tests keep the machine as before:
//!
//! - the documentation as docs.rs builds it: every feature, `--cfg docsrs`, warnings denied;
//! - cargo-semver-checks on every published crate against the last release in `RELEASES`,
//!   from rustdoc's JSON of both, built in the workspace's target directory so that the
//!   dependencies are checked once for both;
//! - a crate outside the workspace built from the README's dependency lines, with the
//!   published crates as `cargo package` packs them;
//! - the published crates checked by the toolchain their `rust-version` names, with the lowest
//!   dependency versions their manifests allow.
//!
//! Their output goes to `target/ci-logs/beside.log`, printed whole when they end.

use super::{python, record};
use crate::cargo;
use crate::release::{published, releases};
use anyhow::{Context, Result, anyhow, bail};
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc::{Receiver, channel};
use std::thread::JoinHandle;
use std::time::Instant;

/// The cargo-semver-checks CI runs: one version, so that a new lint never fails a build by
/// surprise.
const SEMVER_CHECKS_VERSION: &str = "0.51.0";

/// Where cargo-semver-checks is installed when it is not on `PATH`.
const TOOLS: &str = "target/ci-tools";

/// Where the rustdoc JSON of the current tree and of the last release are kept.
const SEMVER_DIR: &str = "target/semver";

/// The checks beside the server tests, running.
pub(crate) struct Beside {
    running: JoinHandle<Result<()>>,
    log: PathBuf,
    /// The Python test environment's `python`, once the wheel is built and installed.
    python: Receiver<Result<PathBuf>>,
}

/// Starts the checks on a thread of their own.
pub(crate) fn start() -> Result<Beside> {
    let log = PathBuf::from("target/ci-logs/beside.log");
    fs::create_dir_all("target/ci-logs").context("creating target/ci-logs")?;
    let out = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    eprintln!(
        "==> beside the server tests: the Python wheel, docs.rs build, semver, scratch crate, and the oldest \
         Rust with the lowest versions, at low priority, into {}",
        log.display()
    );
    let (built, python) = channel();
    let running = std::thread::Builder::new()
        .name("beside".into())
        .spawn(move || {
            lower_priority();
            // The suite's step waits for this, and reports a failure itself.
            let _ = built.send(python::build(&|step, cmd| logged(&out, step, cmd)));
            checks(&out)
        })
        .context("starting the checks beside the server tests")?;
    Ok(Beside { running, log, python })
}

impl Beside {
    /// Waits for the Python wheel and its test environment: its `python`.
    pub(crate) fn python(&self) -> Result<PathBuf> {
        let started = Instant::now();
        let built = self.python.recv().unwrap_or_else(|_| Err(anyhow!("the checks beside the server tests ended")));
        record("python: waiting for the wheel", started.elapsed(), built.is_ok());
        built.with_context(|| format!("building the Python wheel (its log: {})", self.log.display()))
    }

    /// Waits for the checks, prints their output, and says whether they passed.
    pub(crate) fn finish(self) -> Result<()> {
        let passed =
            self.running.join().unwrap_or_else(|_| Err(anyhow!("the checks beside the server tests panicked")));
        eprintln!("==> beside the server tests: output ({})", self.log.display());
        if let Ok(text) = fs::read_to_string(&self.log) {
            eprintln!("{text}");
        }
        passed
    }
}

/// `cargo xtask semver`, `scratch`, `msrv` and `minimal-versions`: one of the checks alone, in
/// the foreground.
pub(crate) fn alone(check: &str) -> Result<()> {
    let log = PathBuf::from(format!("target/ci-logs/{check}.log"));
    fs::create_dir_all("target/ci-logs").context("creating target/ci-logs")?;
    let out = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    eprintln!("==> {check}: output into {}", log.display());
    let passed = match check {
        "semver" => semver(&out),
        "scratch" => scratch_crate(&out),
        "msrv" | "minimal-versions" => floors(&out),
        other => Err(anyhow!("no check named {other}")),
    };
    if let Ok(text) = fs::read_to_string(&log) {
        eprintln!("{text}");
    }
    passed
}

/// `nice 19` for this thread, and so for every process it starts. Best effort: without it the
/// checks only compete with the tests for the CPU.
fn lower_priority() {
    let tid = fs::read_link("/proc/thread-self")
        .ok()
        .and_then(|link| link.file_name().map(|tid| tid.to_string_lossy().into_owned()));
    if let Some(tid) = tid {
        let _ = Command::new("renice").args(["-n", "19", "-p", &tid]).output();
    }
}

fn checks(out: &File) -> Result<()> {
    logged(out, "beside: doc (docs.rs: all features, --cfg docsrs)", &mut docs_rs())?;
    semver(out)?;
    scratch_crate(out)?;
    floors(out)
}

/// The promises a published crate's manifest makes, kept: its crates, with every feature,
/// checked by the oldest Rust it declares (`rust-version`, installed by rustup, minimal
/// profile, when missing) with the lowest versions of its dependencies it declares (`cargo
/// +nightly update -Z direct-minimal-versions`; their own dependencies resolve as usual, to
/// versions that Rust can build where the registry has them). One build proves both. In a
/// checkout of `HEAD` under `target/floors`, so the workspace's own lock file is never touched.
fn floors(out: &File) -> Result<()> {
    let root = crate::services::workspace_root()?;
    let manifest = fs::read_to_string(root.join("Cargo.toml")).context("reading Cargo.toml")?;
    let rust = crate::release::workspace_package(&manifest, "rust-version")?;
    let toolchain = |cmd: &str| {
        let mut cmd = Command::new(cmd);
        // The toolchain of this run, which the rustup proxy set, must not override the one named.
        cmd.env_remove("RUSTUP_TOOLCHAIN").env_remove("CARGO").env_remove("RUSTC").env_remove("RUSTDOC");
        cmd
    };
    let present =
        toolchain("rustup").args(["run", &rust, "rustc", "--version"]).output().is_ok_and(|o| o.status.success());
    if !present {
        let mut install = toolchain("rustup");
        install.args(["toolchain", "install", &rust, "--profile", "minimal"]);
        logged(out, &format!("beside: install Rust {rust} (rust-version)"), &mut install)?;
    }
    let at = root.join("target/floors/src");
    worktree(&root, &at, "HEAD")?;
    let checked = (|| {
        let mut update = toolchain("cargo");
        update.args(["+nightly", "update", "-Z", "direct-minimal-versions"]).current_dir(&at);
        logged(out, "beside: lowest declared versions (nightly -Z direct-minimal-versions)", &mut update)?;
        let mut check = toolchain("rustup");
        check
            .args(["run", &rust, "cargo", "check", "--locked", "--all-features"])
            .args(published()?.iter().flat_map(|n| ["-p".to_owned(), n.clone()]))
            .env("CARGO_TARGET_DIR", root.join("target/floors/target"))
            .env("CARGO_INCREMENTAL", "0")
            .current_dir(&at);
        logged(out, &format!("beside: check the published crates with Rust {rust} and the lowest versions"), &mut check)
    })();
    let removed = git(&root, &["worktree", "remove", "--force", &at.display().to_string()]);
    checked?;
    removed
}

/// `cargo doc` as docs.rs runs it (`[package.metadata.docs.rs]` in each published crate):
/// every feature, `--cfg docsrs` for the feature badges. docs.rs builds with a nightly
/// compiler; `RUSTC_BOOTSTRAP=1` lets this toolchain's rustdoc take `feature(doc_cfg)` too.
fn docs_rs() -> Command {
    let mut cmd = cargo();
    cmd.args(["doc", "--workspace", "--no-deps", "--locked", "--all-features"])
        .env("RUSTDOCFLAGS", "-D warnings --cfg docsrs")
        .env("RUSTC_BOOTSTRAP", "1");
    cmd
}

/// cargo-semver-checks on every published crate that the last release had too.
fn semver(out: &File) -> Result<()> {
    let root = crate::services::workspace_root()?;
    let Some((version, commit)) = releases(&root)?.pop() else { bail!("RELEASES names no release") };
    let tool = semver_checks(out)?;
    let crates = published()?;
    let dir = root.join(SEMVER_DIR);
    let current = dir.join("current");
    let baseline = dir.join(format!("baseline-{version}"));
    rustdoc_json(out, "beside: rustdoc JSON of the current tree", &root, &crates, &current)?;
    let source = dir.join("baseline-src");
    worktree(&root, &source, &commit)?;
    let built = rustdoc_json(out, &format!("beside: rustdoc JSON of {version}"), &source, &crates, &baseline);
    let removed = git(&root, &["worktree", "remove", "--force", &source.display().to_string()]);
    built?;
    removed?;
    let mut failed = Vec::new();
    for name in &crates {
        let file = format!("{}.json", name.replace('-', "_"));
        let (old, new) = (baseline.join(&file), current.join(&file));
        if !old.is_file() {
            writeln_log(out, &format!("==> semver: {name} is not in {version}: nothing to compare"))?;
            continue;
        }
        let mut check = Command::new(&tool);
        check
            .args(["semver-checks", "check-release", "--baseline-rustdoc"])
            .arg(&old)
            .arg("--current-rustdoc")
            .arg(&new);
        if logged(out, &format!("beside: semver {name} against {version}"), &mut check).is_err() {
            failed.push(name.clone());
        }
    }
    if !failed.is_empty() {
        bail!(
            "semver: {} break the API of {version} without the version bump that says so: {}",
            failed.len(),
            failed.join(", ")
        );
    }
    Ok(())
}

/// rustdoc's JSON of `crates` in the workspace at `root`, with every feature, copied into
/// `into`. Built in this workspace's target directory, whichever tree it documents: the
/// dependencies are the same and are checked once.
fn rustdoc_json(out: &File, step: &str, root: &Path, crates: &[String], into: &Path) -> Result<()> {
    let target = crate::services::workspace_root()?.join("target");
    let mut cmd = cargo();
    cmd.current_dir(root)
        .args(["doc", "--no-deps", "--locked", "--all-features"])
        .args(crates.iter().flat_map(|name| ["-p", name.as_str()]))
        .env("CARGO_TARGET_DIR", &target)
        .env("RUSTDOCFLAGS", "-Z unstable-options --output-format json")
        .env("RUSTC_BOOTSTRAP", "1");
    logged(out, step, &mut cmd)?;
    fs::create_dir_all(into).with_context(|| format!("creating {}", into.display()))?;
    for name in crates {
        let file = format!("{}.json", name.replace('-', "_"));
        let from = target.join("doc").join(&file);
        if from.is_file() {
            fs::copy(&from, into.join(&file)).with_context(|| format!("copying {}", from.display()))?;
            fs::remove_file(&from).with_context(|| format!("removing {}", from.display()))?;
        }
    }
    Ok(())
}

/// The README's registry lines ("Depending on them"), in a crate outside the workspace, with
/// every published crate as `cargo package` packs it standing in for the registry's copy
/// (`[patch.crates-io]`): what a user who adds those lines builds.
fn scratch_crate(out: &File) -> Result<()> {
    let root = crate::services::workspace_root()?;
    let readme = fs::read_to_string(root.join("README.md")).context("reading README.md")?;
    let lines = readme_dependencies(&readme)?;
    let crates = published()?;
    let version = crate::release::workspace_version(&fs::read_to_string(root.join("Cargo.toml"))?)?;
    let mut package = cargo();
    // Not verified here: `cargo xtask release --dry-run` builds each package on its own.
    package
        .args(["package", "--no-verify", "--locked", "--allow-dirty"])
        .args(crates.iter().flat_map(|n| ["-p", n.as_str()]));
    logged(out, "beside: package the published crates", &mut package)?;
    let dir = root.join("target/scratch");
    if dir.exists() {
        fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    let registry = dir.join("registry");
    fs::create_dir_all(&registry).with_context(|| format!("creating {}", registry.display()))?;
    let mut patch = String::from("[patch.crates-io]\n");
    for name in &crates {
        let packed = root.join("target/package").join(format!("{name}-{version}.crate"));
        let unpacked = Command::new("tar").arg("xzf").arg(&packed).arg("-C").arg(&registry).status();
        if !unpacked.is_ok_and(|s| s.success()) {
            bail!("unpacking {}", packed.display());
        }
        patch.push_str(&format!("{name} = {{ path = \"../registry/{name}-{version}\" }}\n"));
    }
    let app = dir.join("app");
    fs::create_dir_all(app.join("src")).with_context(|| format!("creating {}", app.display()))?;
    let manifest = format!(
        "[package]\nname = \"scratch\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n\
         {lines}\n{patch}\n[workspace]\n"
    );
    fs::write(app.join("Cargo.toml"), manifest).context("writing the scratch crate's manifest")?;
    fs::write(app.join("src/main.rs"), "fn main() {}\n").context("writing the scratch crate")?;
    // The workspace's versions of everything else, so that its checked dependencies serve.
    fs::copy(root.join("Cargo.lock"), app.join("Cargo.lock")).context("copying Cargo.lock")?;
    let mut check = cargo();
    check.current_dir(&app).args(["check", "--quiet"]).env("CARGO_TARGET_DIR", root.join("target"));
    logged(out, "beside: a crate outside the workspace from the README's lines", &mut check)
}

/// The first `toml` block under the README's "Depending on them".
fn readme_dependencies(readme: &str) -> Result<String> {
    let section = readme.split("### Depending on them").nth(1).context("README.md has no `### Depending on them`")?;
    let block = section.split("```toml\n").nth(1).context("README.md: no ```toml block under Depending on them")?;
    let lines = block.split("```").next().unwrap_or_default();
    if !lines.trim_start().starts_with("[dependencies]") {
        bail!("README.md: the first block under Depending on them does not start with [dependencies]");
    }
    Ok(lines.to_owned())
}

/// A checkout of `commit` at `at`, replacing any left there.
fn worktree(root: &Path, at: &Path, commit: &str) -> Result<()> {
    if at.exists() {
        let _ = git(root, &["worktree", "remove", "--force", &at.display().to_string()]);
        let _ = fs::remove_dir_all(at);
    }
    let _ = git(root, &["worktree", "prune"]);
    git(root, &["worktree", "add", "--detach", &at.display().to_string(), commit])
        .with_context(|| format!("checking out {commit} into {} (a shallow clone may not hold it)", at.display()))
}

fn git(root: &Path, args: &[&str]) -> Result<()> {
    let out = Command::new("git").args(args).current_dir(root).output().context("running git")?;
    if !out.status.success() {
        bail!("git {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// The cargo-semver-checks to run: the one on `PATH` if it is [`SEMVER_CHECKS_VERSION`], else
/// one installed under [`TOOLS`], built for a quick build rather than a fast run (its checks
/// take well under a second a crate either way).
fn semver_checks(out: &File) -> Result<PathBuf> {
    let is_pinned = |tool: &Path| {
        Command::new(tool)
            .args(["semver-checks", "--version"])
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim().ends_with(SEMVER_CHECKS_VERSION))
    };
    let on_path = PathBuf::from("cargo-semver-checks");
    if is_pinned(&on_path) {
        return Ok(on_path);
    }
    let root = crate::services::workspace_root()?.join(TOOLS);
    let installed = root.join("bin").join("cargo-semver-checks");
    if is_pinned(&installed) {
        return Ok(installed);
    }
    let mut install = cargo();
    install
        .args(["install", "cargo-semver-checks", "--locked", "--version", SEMVER_CHECKS_VERSION, "--root"])
        .arg(&root)
        .arg("--target-dir")
        .arg(root.join("build"))
        .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "0")
        .env("CARGO_PROFILE_RELEASE_LTO", "false")
        .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "256")
        .env("CARGO_PROFILE_RELEASE_DEBUG", "0");
    logged(out, &format!("beside: install cargo-semver-checks {SEMVER_CHECKS_VERSION}"), &mut install)?;
    Ok(installed)
}

/// Runs `cmd` with its output into `out`, timed as a step of the table.
fn logged(out: &File, step: &str, cmd: &mut Command) -> Result<()> {
    writeln_log(out, &format!("==> {step}: {cmd:?}"))?;
    let started = Instant::now();
    let status = cmd
        .stdout(out.try_clone()?)
        .stderr(out.try_clone()?)
        .status()
        .with_context(|| format!("{step}: could not start {cmd:?}"))?;
    record(step, started.elapsed(), status.success());
    writeln_log(out, &format!("==> {step}: {status} in {:.1}s", started.elapsed().as_secs_f64()))?;
    if !status.success() {
        bail!("{step} failed ({status})");
    }
    Ok(())
}

fn writeln_log(mut out: &File, line: &str) -> Result<()> {
    use std::io::Write;
    writeln!(out, "{line}").context("writing the log of the checks beside the server tests")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    #[test]
    fn the_scratch_crate_takes_the_readmes_registry_lines_and_nothing_else() {
        let readme = "# x\n### Depending on them\n\ntext\n\n```toml\n[dependencies]\na = \"0.2\"\n```\n\n```toml\n[dependencies]\na = { git = \"g\" }\n```\n";
        assert_eq!(readme_dependencies(readme).unwrap(), "[dependencies]\na = \"0.2\"\n");
        assert!(readme_dependencies("# x\n```toml\n[dependencies]\n```\n").is_err());
        assert!(readme_dependencies("### Depending on them\n```toml\n[package]\n```\n").is_err());
        let ours = fs::read_to_string(crate::services::workspace_root().unwrap().join("README.md")).unwrap();
        let lines = readme_dependencies(&ours).unwrap();
        assert!(lines.contains("actionstate-recovery = \""), "{lines}");
    }
}
