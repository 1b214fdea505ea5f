//! The servers' jars: the Java runtime check, and a set of jars that Maven resolves from Maven
//! Central, after a generated pom, into a `lib/` directory (`lib/*` is the classpath). Each server
//! writes its own pom; what it depends on is in its `config.rs`.

use super::process::{java, remove_dir_if_exists, write_atomic};
use anyhow::{Context, Result, bail};
use std::fs;
use std::io::ErrorKind;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// The log4j 2 release Kafka itself depends on; the slf4j binding must match it.
pub(crate) const LOG4J_VERSION: &str = "2.25.4";
/// Pinned so that the result does not depend on the Maven version's default plugin.
const DEPENDENCY_PLUGIN: &str = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1";
const JAVA_MISSING: &str = "`java` was not found: the local Kafka and Fluss servers need a Java 17 (or newer) \
                            runtime; install it with `apt-get install openjdk-17-jre-headless`";
const MAVEN_MISSING: &str = "`mvn` was not found: fetching the Kafka and Fluss server jars needs Maven; \
                             install it with `apt-get install maven`";

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_versions_parse() {
        assert_eq!(java_major("openjdk version \"17.0.15\" 2025-04-15\nOpenJDK Runtime"), Some(17));
        assert_eq!(java_major("java version \"1.8.0_392\"\n"), Some(8));
        assert_eq!(java_major("openjdk version \"21\" 2023-09-19"), Some(21));
        assert_eq!(java_major("openjdk version \"26-ea\" 2026-03-17"), Some(26));
        assert_eq!(java_major("no version here"), None);
    }
}
