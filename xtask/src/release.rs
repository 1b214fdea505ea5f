//! `cargo xtask release --dry-run` and `cargo xtask release VERSION`.
//!
//! The published crates are the workspace's members whose manifests do not say `publish =
//! false`: the libraries, the test kit a backend author checks a backend with, the simulator the
//! command line's demo runs, and the command line. The benchmarks, the examples, the
//! workspace's own tests and xtask stay unpublished: they are programs about this workspace,
//! not something a user depends on.
//!
//! A release is recorded in `RELEASES`, one line per version with the commit that made it, so
//! that a fresh clone finds it without tags.

use crate::{cargo, run};
use anyhow::{Context, Result, bail};
use std::fs;
use std::path::Path;
use std::process::Command;

const USAGE: &str = "usage: cargo xtask release --dry-run | cargo xtask release VERSION";

/// The file that names each release's commit.
pub(crate) const RELEASES: &str = "RELEASES";

pub(crate) fn run_release(args: &[String]) -> Result<()> {
    match args {
        [flag] if flag == "--dry-run" => dry_run(),
        [version] if !version.starts_with('-') => prepare(version),
        _ => bail!(USAGE),
    }
}

/// Packages every published crate in dependency order and builds each from its package, as the
/// registry would serve it, without uploading anything.
fn dry_run() -> Result<()> {
    let crates = published()?;
    eprintln!("==> release: {} published crates: {}", crates.len(), crates.join(", "));
    if let Some((version, commit)) = releases(Path::new("."))?.last() {
        eprintln!("==> release: the last release is {version}, commit {commit} ({RELEASES})");
    }
    run("release dry run", cargo().args(["publish", "--workspace", "--dry-run", "--locked"]))
}

/// The names of the workspace's published crates.
pub(crate) fn published() -> Result<Vec<String>> {
    let out = cargo()
        .args(["metadata", "--format-version", "1", "--no-deps", "--locked"])
        .output()
        .context("running cargo metadata")?;
    if !out.status.success() {
        bail!("cargo metadata failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).context("reading cargo metadata")?;
    let packages = metadata["packages"].as_array().context("cargo metadata lists no packages")?;
    let mut names: Vec<String> = packages
        .iter()
        // `publish` is null when publishing is allowed anywhere, `[]` for `publish = false`.
        .filter(|p| p["publish"].as_array().is_none_or(|registries| !registries.is_empty()))
        .filter_map(|p| p["name"].as_str().map(str::to_owned))
        .collect();
    names.sort();
    Ok(names)
}

/// Bumps every published crate to `version`, cuts "Unreleased" in CHANGELOG.md under its
/// heading, and runs the release checks. Committing, and naming the commit in `RELEASES`, is
/// left to the one who runs it.
fn prepare(version: &str) -> Result<()> {
    let manifest = fs::read_to_string("Cargo.toml").context("reading Cargo.toml")?;
    let current = workspace_version(&manifest)?;
    if parse(version)? <= parse(&current)? {
        bail!("{version} is not newer than the current version {current}");
    }
    fs::write("Cargo.toml", bump(&manifest, &current, version)?).context("writing Cargo.toml")?;
    let changelog = fs::read_to_string("CHANGELOG.md").context("reading CHANGELOG.md")?;
    let date = today()?;
    fs::write("CHANGELOG.md", cut_changelog(&changelog, version, &date)?).context("writing CHANGELOG.md")?;
    let readme = fs::read_to_string("README.md").context("reading README.md")?;
    fs::write("README.md", readme_lines(&readme, &current, version)?).context("writing README.md")?;
    // The lock file names the workspace's own versions too.
    run("release: lock file", cargo().args(["update", "--workspace", "--offline"]))?;
    // And the fuzz target's, a workspace of its own that depends on actionstate-core.
    run(
        "release: the fuzz target's lock file",
        cargo().args(["update", "-p", "actionstate-core", "--offline", "--manifest-path", "fuzz/Cargo.toml"]),
    )?;
    dry_run()?;
    eprintln!(
        "==> release {version}: versions bumped from {current}, CHANGELOG.md cut. Commit it, then add \
         `{version} <commit>` to {RELEASES}, and that commit to the README's git lines, in the next commit."
    );
    Ok(())
}

/// `[workspace.package] version`.
pub(crate) fn workspace_version(manifest: &str) -> Result<String> {
    workspace_package(manifest, "version")
}

/// A string field of the workspace manifest's `[workspace.package]`.
pub(crate) fn workspace_package(manifest: &str, field: &str) -> Result<String> {
    let section = manifest.split("[workspace.package]").nth(1).context("Cargo.toml has no [workspace.package]")?;
    let prefix = format!("{field} = \"");
    section
        .lines()
        .take_while(|line| !line.starts_with('['))
        .find_map(|line| line.strip_prefix(prefix.as_str()).and_then(|v| v.strip_suffix('"')))
        .map(str::to_owned)
        .with_context(|| format!("[workspace.package] has no {field}"))
}

/// The workspace's version and the versions its members require of each other, from `current`
/// to `version`.
fn bump(manifest: &str, current: &str, version: &str) -> Result<String> {
    let package = format!("version = \"{current}\"\nedition");
    if !manifest.contains(&package) {
        bail!("Cargo.toml: [workspace.package] does not start with `version = \"{current}\"` followed by `edition`");
    }
    let bumped = manifest.replacen(&package, &format!("version = \"{version}\"\nedition"), 1);
    let internal = format!("{{ version = \"{current}\", path = ");
    Ok(bumped.replace(&internal, &format!("{{ version = \"{version}\", path = ")))
}

/// The README's registry lines (`actionstate-… = "MAJOR.MINOR"`) from `current` to `version`.
fn readme_lines(readme: &str, current: &str, version: &str) -> Result<String> {
    let short = |v: &str| -> Result<String> {
        let (major, minor, _) = parse(v)?;
        Ok(format!("= \"{major}.{minor}\""))
    };
    let (from, to) = (short(current)?, short(version)?);
    let lines: Vec<String> = readme
        .lines()
        .map(|line| if line.starts_with("actionstate") { line.replace(&from, &to) } else { line.to_owned() })
        .collect();
    Ok(lines.join("\n") + if readme.ends_with('\n') { "\n" } else { "" })
}

/// "Unreleased" keeps its heading, empty; what it held goes under `## VERSION — DATE`.
fn cut_changelog(changelog: &str, version: &str, date: &str) -> Result<String> {
    let heading = "## Unreleased\n";
    if !changelog.contains(heading) {
        bail!("CHANGELOG.md has no `## Unreleased` heading");
    }
    Ok(changelog.replacen(heading, &format!("{heading}\n## {version} — {date}\n"), 1))
}

/// `MAJOR.MINOR.PATCH` as numbers.
fn parse(version: &str) -> Result<(u64, u64, u64)> {
    let parts: Vec<&str> = version.split('.').collect();
    let [major, minor, patch] = parts.as_slice() else { bail!("`{version}` is not MAJOR.MINOR.PATCH") };
    let number = |s: &str| s.parse::<u64>().with_context(|| format!("`{version}` is not MAJOR.MINOR.PATCH"));
    Ok((number(major)?, number(minor)?, number(patch)?))
}

/// Today's date, UTC, as `YYYY-MM-DD`.
fn today() -> Result<String> {
    let out = Command::new("date").args(["-u", "+%F"]).output().context("running date")?;
    Ok(String::from_utf8(out.stdout).context("date printed something else")?.trim().to_owned())
}

/// The releases `RELEASES` names: version and commit, oldest first.
pub(crate) fn releases(root: &Path) -> Result<Vec<(String, String)>> {
    let path = root.join(RELEASES);
    let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .filter(|line| !line.trim().is_empty() && !line.starts_with('#'))
        .map(|line| match line.split_whitespace().collect::<Vec<_>>().as_slice() {
            [version, commit] => Ok(((*version).to_owned(), (*commit).to_owned())),
            _ => bail!("{}: `{line}` is not `VERSION COMMIT`", path.display()),
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const MANIFEST: &str = "[workspace.package]\nversion = \"0.2.0\"\nedition = \"2024\"\n\n\
        [workspace.dependencies]\nactionstate-core = { version = \"0.2.0\", path = \"crates/state-core\" }\n\
        serde = { version = \"0.2.0\" }\n";

    #[test]
    fn a_bump_moves_the_workspace_and_its_members_and_nothing_else() {
        assert_eq!(workspace_version(MANIFEST).unwrap(), "0.2.0");
        let bumped = bump(MANIFEST, "0.2.0", "0.3.0").unwrap();
        assert_eq!(workspace_version(&bumped).unwrap(), "0.3.0");
        assert!(bumped.contains("actionstate-core = { version = \"0.3.0\", path"));
        assert!(bumped.contains("serde = { version = \"0.2.0\" }"), "{bumped}");
        assert!(bump(MANIFEST, "0.1.0", "0.3.0").is_err());
    }

    #[test]
    fn a_cut_keeps_an_empty_unreleased_above_the_new_version() {
        let cut = cut_changelog("# Changelog\n\n## Unreleased\n\n- a change\n", "0.3.0", "2026-12-07").unwrap();
        assert_eq!(cut, "# Changelog\n\n## Unreleased\n\n## 0.3.0 — 2026-12-07\n\n- a change\n");
        assert!(cut_changelog("# Changelog\n", "0.3.0", "2026-12-07").is_err());
    }

    #[test]
    fn a_release_moves_the_readmes_registry_lines_only() {
        let readme = "actionstate-core = \"0.2\"\ntokio = \"0.2\"\n";
        assert_eq!(readme_lines(readme, "0.2.0", "0.3.0").unwrap(), "actionstate-core = \"0.3\"\ntokio = \"0.2\"\n");
    }

    #[test]
    fn versions_compare_as_numbers() {
        assert!(parse("0.10.0").unwrap() > parse("0.9.1").unwrap());
        assert!(parse("1.0").is_err());
        assert!(parse("1.0.x").is_err());
    }

    #[test]
    fn every_release_names_a_commit_of_this_repository() {
        let root = crate::services::workspace_root().unwrap();
        let releases = releases(&root).unwrap();
        assert!(!releases.is_empty(), "{RELEASES} names no release");
        let shallow = Command::new("git")
            .args(["rev-parse", "--is-shallow-repository"])
            .current_dir(&root)
            .output()
            .is_ok_and(|out| out.stdout.starts_with(b"true"));
        for (version, commit) in releases {
            parse(&version).unwrap();
            assert!(commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_hexdigit()), "{version}: {commit}");
            if shallow {
                eprintln!("{RELEASES}: a shallow clone may not hold {version}'s commit {commit}; its form was checked");
                continue;
            }
            let found = Command::new("git")
                .args(["cat-file", "-e", &format!("{commit}^{{commit}}")])
                .current_dir(&root)
                .status()
                .unwrap();
            assert!(found.success(), "{RELEASES}: {version} names {commit}, which is not a commit here");
        }
    }

    #[test]
    fn the_readme_depends_on_the_current_version_and_the_last_releases_commit() {
        let root = crate::services::workspace_root().unwrap();
        let readme = fs::read_to_string(root.join("README.md")).unwrap();
        let section = readme.split("### Depending on them").nth(1).unwrap();
        let version = workspace_version(&fs::read_to_string(root.join("Cargo.toml")).unwrap()).unwrap();
        let (major, minor, _) = parse(&version).unwrap();
        assert!(
            section.contains(&format!("actionstate-recovery = \"{major}.{minor}\"")),
            "README.md: not {major}.{minor}"
        );
        let (last, commit) = releases(&root).unwrap().pop().unwrap();
        assert!(
            section.contains(&format!("rev = \"{commit}\"")),
            "README.md's git lines do not name {last}'s commit {commit} ({RELEASES})"
        );
    }
}
