//! What the servers' configuration files and command lines have in common: where a service keeps
//! its files ([`ServiceFiles`]), the classpath, the JVM flags, the log4j 2 configuration that sends everything to
//! stdout, and reading a listener's port back from a written configuration. Knows nothing of
//! Kafka or Fluss.

use crate::services::process::java;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `<workspace root>/target/services`, the directory of every service's files and env file.
pub(crate) fn services_dir(workspace_root: &Path) -> PathBuf {
    workspace_root.join("target").join("services")
}

/// The files every service of ours has, under `target/services/NAME/` (its env file beside
/// that directory).
#[derive(Debug, Clone)]
pub(crate) struct ServiceFiles {
    pub(crate) dir: PathBuf,
    /// The generated pom whose runtime classpath Maven resolves.
    pub(crate) pom: PathBuf,
    /// The resolved jars.
    pub(crate) lib: PathBuf,
    /// Where the jars are copied before `lib/` is replaced by them.
    pub(crate) lib_partial: PathBuf,
    /// The configuration files.
    pub(crate) config: PathBuf,
    /// `config/log4j2.properties`.
    pub(crate) log4j: PathBuf,
    /// `target/services/NAME.env`, for tests and benchmarks.
    pub(crate) env: PathBuf,
}

impl ServiceFiles {
    pub(crate) fn new(workspace_root: &Path, name: &str) -> Self {
        let services = services_dir(workspace_root);
        let dir = services.join(name);
        let config = dir.join("config");
        Self {
            pom: dir.join("pom.xml"),
            lib: dir.join("lib"),
            lib_partial: dir.join("lib.partial"),
            log4j: config.join("log4j2.properties"),
            config,
            env: services.join(format!("{name}.env")),
            dir,
        }
    }

    /// The classpath of the jars in `lib/`: `lib/*`.
    pub(crate) fn classpath(&self) -> String {
        format!("{}/*", self.lib.display())
    }
}

/// The garbage collector a server's JVM runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gc {
    /// G1 with a 20 ms pause goal: the brokers and Fluss servers, which serve the tests' latency.
    G1,
    /// The serial collector: ZooKeeper, whose heap is small.
    Serial,
}

/// A server's JVM: its heap and collector; every server also exits on running out of memory (a
/// half-dead server would only time tests out) and runs headless.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Jvm {
    /// `-Xmx`, e.g. `512m`.
    pub(crate) max_heap: &'static str,
    /// `-Xms`, e.g. `256m`.
    pub(crate) initial_heap: &'static str,
    pub(crate) gc: Gc,
}

impl Jvm {
    /// The JVM flags, in the order the command line gets them.
    pub(crate) fn options(&self) -> Vec<String> {
        let mut options = vec![format!("-Xmx{}", self.max_heap), format!("-Xms{}", self.initial_heap)];
        match self.gc {
            Gc::G1 => options.extend(["-XX:+UseG1GC".to_owned(), "-XX:MaxGCPauseMillis=20".to_owned()]),
            Gc::Serial => options.push("-XX:+UseSerialGC".to_owned()),
        }
        options.extend(["-XX:+ExitOnOutOfMemoryError".to_owned(), "-Djava.awt.headless=true".to_owned()]);
        options
    }

    /// `java` with [`options`](Self::options), the log4j 2 configuration `log4j`, the system
    /// properties `properties` (each `-Dkey=value`), the classpath and the main class; the
    /// caller adds the server's own arguments.
    pub(crate) fn command(&self, log4j: &Path, properties: &[String], classpath: &str, main_class: &str) -> Command {
        let mut cmd = Command::new(java());
        cmd.args(self.options())
            .arg(format!("-Dlog4j2.configurationFile={}", log4j.display()))
            .args(properties)
            .arg("-cp")
            .arg(classpath)
            .arg(main_class);
        cmd
    }
}

/// A log4j 2 configuration that prints at level info to stdout (which the server's log file
/// receives): `header` is its first line (a comment), `extra` the lines that follow the root
/// logger, e.g. quieter levels for chatty loggers.
pub(crate) fn log4j2_properties(header: &str, extra: &str) -> String {
    format!(
        "{header}\n\
         status = warn\n\
         appender.out.type = Console\n\
         appender.out.name = STDOUT\n\
         appender.out.layout.type = PatternLayout\n\
         appender.out.layout.pattern = [%d] %p %m (%c)%n\n\
         rootLogger.level = info\n\
         rootLogger.appenderRef.out.ref = STDOUT\n\
         {extra}"
    )
}

/// The port of listener `name` in a listener list such as `NAME://127.0.0.1:PORT, OTHER://...`,
/// on the first line of `text` that starts with `key` (`listeners=` in a `server.properties`,
/// `bind.listeners:` in a `server.yaml`).
pub(crate) fn listener_port(text: &str, key: &str, name: &str) -> Option<u16> {
    let listeners = text.lines().find_map(|line| line.strip_prefix(key))?;
    listeners
        .split(',')
        .find_map(|l| l.trim().strip_prefix(name)?.strip_prefix("://"))
        .and_then(|addr| addr.rsplit_once(':'))
        .and_then(|(_, port)| port.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jvm_options_are_the_servers_flags() {
        let broker = Jvm { max_heap: "512m", initial_heap: "256m", gc: Gc::G1 };
        assert_eq!(
            broker.options(),
            [
                "-Xmx512m",
                "-Xms256m",
                "-XX:+UseG1GC",
                "-XX:MaxGCPauseMillis=20",
                "-XX:+ExitOnOutOfMemoryError",
                "-Djava.awt.headless=true"
            ]
        );
        let zookeeper = Jvm { max_heap: "128m", initial_heap: "32m", gc: Gc::Serial };
        assert_eq!(
            zookeeper.options(),
            ["-Xmx128m", "-Xms32m", "-XX:+UseSerialGC", "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true"]
        );
        let cmd = broker.command(Path::new("/c/log4j2.properties"), &["-Dx=y".to_owned()], "/l/*", "Main");
        let args: Vec<String> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(args[6..], ["-Dlog4j2.configurationFile=/c/log4j2.properties", "-Dx=y", "-cp", "/l/*", "Main"]);
    }

    #[test]
    fn service_files_live_under_target_services() {
        let files = ServiceFiles::new(Path::new("/ws"), "svc");
        assert_eq!(files.env, Path::new("/ws/target/services/svc.env"));
        for p in [&files.pom, &files.lib, &files.lib_partial, &files.config, &files.log4j] {
            assert!(p.starts_with("/ws/target/services/svc"), "{}", p.display());
        }
        assert_eq!(files.log4j, Path::new("/ws/target/services/svc/config/log4j2.properties"));
        assert_eq!(files.classpath(), "/ws/target/services/svc/lib/*");
    }

    #[test]
    fn listener_ports_read_back() {
        let props = "listeners=PLAINTEXT://127.0.0.1:1,CONTROLLER://127.0.0.1:3\n";
        assert_eq!(listener_port(props, "listeners=", "CONTROLLER"), Some(3));
        let yaml = "bind.listeners: INTERNAL://127.0.0.1:7, CLIENT://127.0.0.1:8\n";
        assert_eq!(listener_port(yaml, "bind.listeners:", "CLIENT"), Some(8));
        assert_eq!(listener_port(yaml, "bind.listeners:", "OTHER"), None);
        assert_eq!(listener_port(yaml, "listeners=", "CLIENT"), None);
        assert!(log4j2_properties("# h", "x = 1\n").ends_with("rootLogger.appenderRef.out.ref = STDOUT\nx = 1\n"));
    }
}
