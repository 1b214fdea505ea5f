//! The servers backend tests run against (a Kafka broker, a Fluss cluster), found the way
//! `cargo xtask services up` publishes them, and the skip rule every such test follows.
//!
//! A service `NAME` with variable prefix `PREFIX` is configured when `PREFIX_BOOTSTRAP` is set
//! in the environment (then every `PREFIX_*` variable comes from the environment), or else when
//! `target/services/NAME.env` exists in the workspace this crate was built in (`KEY=VALUE`
//! lines, as xtask writes them). A test that finds no service, or one without a setting it
//! needs ([`skip_because`]), prints the `ACTIONSTATE-SKIP` marker and passes — unless
//! `ACTIONSTATE_REQUIRE_SERVICES` is set, as `cargo xtask ci` sets it, and then it fails: a
//! skipped backend test is never counted as passed there.

use std::collections::HashMap;
use std::path::PathBuf;

/// The marker a test prints when it skips for lack of a server; `cargo xtask ci` fails on it.
pub const SKIP_MARKER: &str = "ACTIONSTATE-SKIP";

/// The settings of one configured service.
#[derive(Clone, Debug)]
pub struct Service {
    prefix: String,
    vars: HashMap<String, String>,
    /// Where the settings came from: `"environment"` or the path of the env file.
    pub source: String,
}

impl Service {
    /// The service `name` (settings prefix `prefix`, e.g. `"kafka"` and `"KAFKA"`), if one is
    /// configured.
    pub fn find(name: &str, prefix: &str) -> Option<Service> {
        let bootstrap = format!("{prefix}_BOOTSTRAP");
        if std::env::var(&bootstrap).is_ok_and(|v| !v.trim().is_empty()) {
            let vars = std::env::vars()
                .filter(|(k, _)| k.starts_with(&format!("{prefix}_")))
                .map(|(k, v)| (k, v.trim().to_owned()))
                .collect();
            return Some(Service { prefix: prefix.to_owned(), vars, source: "environment".to_owned() });
        }
        Service::in_env_file(name, prefix)
    }

    /// The service `name` as `target/services/NAME.env` describes it, whatever the
    /// environment says: for a fault test that restarts the service's processes, since the
    /// restart rewrites that file's pids (see [`ServerProcess::restart`]) but cannot change
    /// the environment the test was started with.
    pub fn in_env_file(name: &str, prefix: &str) -> Option<Service> {
        let path = env_file(name)?;
        let text = std::fs::read_to_string(&path).ok()?;
        let vars: HashMap<String, String> = text
            .lines()
            .filter_map(|line| line.split_once('='))
            .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
            .collect();
        vars.get(&format!("{prefix}_BOOTSTRAP")).is_some_and(|v| !v.is_empty()).then(|| Service {
            prefix: prefix.to_owned(),
            vars,
            source: path.display().to_string(),
        })
    }

    /// The service `name` for `test`, or `None` after [`skip`]ping it.
    pub fn require(name: &str, prefix: &str, test: &str) -> Option<Service> {
        let found = Service::find(name, prefix);
        if found.is_none() {
            skip(name, test);
        }
        found
    }

    /// The value of `key` (e.g. `KAFKA_BOOTSTRAP`), if set and not empty.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.vars.get(key).map(String::as_str).filter(|v| !v.is_empty())
    }

    /// `PREFIX_BOOTSTRAP`, the plaintext listener: a found service always has it.
    pub fn bootstrap(&self) -> &str {
        self.get(&format!("{}_BOOTSTRAP", self.prefix)).unwrap_or_default()
    }

    /// `PREFIX_SASL_BOOTSTRAP`, `PREFIX_SASL_USERNAME` and `PREFIX_SASL_PASSWORD`: the SASL/PLAIN
    /// listener and its user, if the service names them.
    pub fn sasl(&self) -> Option<Sasl> {
        let get = |key: &str| self.get(&format!("{}_SASL_{key}", self.prefix)).map(str::to_owned);
        Some(Sasl { bootstrap: get("BOOTSTRAP")?, username: get("USERNAME")?, password: get("PASSWORD")? })
    }
}

/// A service's SASL/PLAIN listener and the user it knows (see [`Service::sasl`]).
#[derive(Clone, Debug)]
pub struct Sasl {
    /// `host:port` of the listener.
    pub bootstrap: String,
    /// The user.
    pub username: String,
    /// The user's password.
    pub password: String,
}

/// A server process that a fault test stops and restarts, as `cargo xtask services up`
/// started it: which service, what to call it, the variable of the env file that holds its
/// pid, its main class, and the names of its log and pid files in its working directory.
#[derive(Clone, Copy, Debug)]
pub struct ServerRole<'a> {
    /// The service's name, e.g. `kafka`.
    pub service: &'a str,
    /// The prefix of its settings, e.g. `KAFKA`.
    pub prefix: &'a str,
    /// What `cargo xtask services up` starts for it, for the skip message: `broker`, `cluster`.
    pub started: &'a str,
    /// The env file's variable with the process's pid, e.g. `KAFKA_PID`.
    pub pid_var: &'a str,
    /// The class the process runs, which its command line must name.
    pub main_class: &'a str,
    /// The process's log file in its working directory, which a restart appends to.
    pub log_file: &'a str,
    /// The process's pid file in its working directory, which a restart rewrites.
    pub pid_file: &'a str,
}

/// A server process found for a fault test (see [`ServerRole::find`]).
#[derive(Clone, Debug)]
pub struct FaultServer {
    /// The service's settings, from its env file.
    pub service: Service,
    /// The running process.
    pub process: ServerProcess,
    env_file: PathBuf,
    pid_var: String,
    log_file: String,
    pid_file: String,
}

impl FaultServer {
    /// Restarts a stopped `process` of this server as [`ServerProcess::restart`] does, with
    /// the role's log and pid files and the env file's pid variable.
    pub fn restarter(&self) -> impl FnOnce(&ServerProcess) -> std::io::Result<ServerProcess> + Send + 'static {
        let FaultServer { env_file, pid_var, log_file, pid_file, .. } = self.clone();
        move |process: &ServerProcess| {
            let dir = process.dir();
            process.restart(&dir.join(log_file), &dir.join(pid_file), &env_file, &pid_var)
        }
    }
}

impl ServerRole<'_> {
    /// The process of this role that `cargo xtask services up` started, for `test`; `None`
    /// after [`skip`]ping it when the service was not started that way (a fault test restarts
    /// the process, so any bootstrap address will not do). Fails when the recorded pid does not
    /// run the role's main class.
    pub fn find(&self, test: &str) -> Option<std::io::Result<FaultServer>> {
        let Some(env_file) = env_file(self.service).filter(|f| f.exists()) else {
            let why = format!("no {} started by `cargo xtask services up {}`", self.started, self.service);
            skip(self.service, &format!("{test}: {why}"));
            return None;
        };
        let Some(service) = Service::find(self.service, self.prefix) else {
            skip(self.service, test);
            return None;
        };
        let pid = service.get(self.pid_var).and_then(|pid| pid.parse().ok());
        let Some(pid) = pid else {
            return Some(Err(std::io::Error::other(format!("{} names no pid", self.pid_var))));
        };
        Some(ServerProcess::of(pid, self.main_class).map(|process| FaultServer {
            service,
            process,
            env_file,
            pid_var: self.pid_var.to_owned(),
            log_file: self.log_file.to_owned(),
            pid_file: self.pid_file.to_owned(),
        }))
    }
}

/// `target/services/NAME.env` of the workspace this crate was built in, if there is one.
pub fn env_file(name: &str) -> Option<PathBuf> {
    Some(workspace_root()?.join("target/services").join(format!("{name}.env")))
}

/// The directory above this crate whose `Cargo.toml` declares the workspace.
fn workspace_root() -> Option<PathBuf> {
    let mut dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    loop {
        if std::fs::read_to_string(dir.join("Cargo.toml")).is_ok_and(|text| text.contains("[workspace]")) {
            return Some(dir);
        }
        if !dir.pop() {
            return None;
        }
    }
}

/// Reports that `test` cannot run for lack of the service `name`: prints the skip marker on
/// stdout and stderr, or panics when `ACTIONSTATE_REQUIRE_SERVICES` is set.
pub fn skip(name: &str, test: &str) {
    skip_because(name, test, &format!("no {name} service configured (run cargo xtask services up {name})"));
}

/// Reports that `test` cannot run on the configured service `name` for the reason `why` (say,
/// the server lacks a setting the test needs), as [`skip`] does: the skip marker, or a panic
/// when `ACTIONSTATE_REQUIRE_SERVICES` is set.
pub fn skip_because(name: &str, test: &str, why: &str) {
    let msg = format!("{SKIP_MARKER} {name} tests ({test}): {why}");
    if std::env::var_os("ACTIONSTATE_REQUIRE_SERVICES").is_some() {
        panic!("{msg}; ACTIONSTATE_REQUIRE_SERVICES is set");
    }
    eprintln!("{msg}");
    println!("{msg}");
}

/// A server process a fault test stops and starts again (Linux: read from `/proc`): its pid,
/// command line and working directory.
#[derive(Clone, Debug)]
pub struct ServerProcess {
    /// The running process.
    pub pid: u32,
    argv: Vec<String>,
    cwd: PathBuf,
}

impl ServerProcess {
    /// The process `pid`, which must run `main_class` (its command line names it).
    pub fn of(pid: u32, main_class: &str) -> std::io::Result<ServerProcess> {
        let raw = std::fs::read(format!("/proc/{pid}/cmdline"))?;
        let argv: Vec<String> =
            raw.split(|b| *b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
        if !argv.iter().any(|a| a == main_class) {
            return Err(std::io::Error::other(format!("pid {pid} does not run {main_class}: {argv:?}")));
        }
        let cwd = std::fs::read_link(format!("/proc/{pid}/cwd"))?;
        Ok(ServerProcess { pid, argv, cwd })
    }

    /// Whether it still runs (a zombie, exited but not reaped, does not).
    pub fn alive(&self) -> bool {
        std::fs::read_to_string(format!("/proc/{}/stat", self.pid))
            .is_ok_and(|s| s.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')))
    }

    /// Stops it with SIGTERM (a clean shutdown), SIGKILL after `patience`, and waits until it
    /// is gone.
    pub fn stop(&self, patience: std::time::Duration) -> std::io::Result<()> {
        let kill = |signal: &str| std::process::Command::new("kill").args([signal, &self.pid.to_string()]).status();
        if !kill("-TERM")?.success() && self.alive() {
            return Err(std::io::Error::other(format!("kill -TERM {} failed", self.pid)));
        }
        let started = std::time::Instant::now();
        let mut killed = false;
        while self.alive() {
            if !killed && started.elapsed() > patience {
                kill("-KILL")?;
                killed = true;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        Ok(())
    }

    /// Kills it with SIGKILL (no shutdown: what a crash or a power cut leaves) and waits until
    /// it is gone.
    pub fn kill(&self) -> std::io::Result<()> {
        let status = std::process::Command::new("kill").args(["-KILL", &self.pid.to_string()]).status()?;
        if !status.success() && self.alive() {
            return Err(std::io::Error::other(format!("kill -KILL {} failed", self.pid)));
        }
        while self.alive() {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        Ok(())
    }

    /// Starts the same command line again in the same directory, in a process group of its
    /// own (it outlives the test, like the server xtask started), its output appended to `log`.
    /// Writes the new pid to `pid_file` and as `pid_var` into the env file `env_file`, where
    /// `cargo xtask services down` and later tests look for it.
    pub fn restart(
        &self,
        log: &std::path::Path,
        pid_file: &std::path::Path,
        env_file: &std::path::Path,
        pid_var: &str,
    ) -> std::io::Result<ServerProcess> {
        let out = std::fs::OpenOptions::new().append(true).create(true).open(log)?;
        let (program, args) = self.argv.split_first().ok_or_else(|| std::io::Error::other("empty command line"))?;
        let mut cmd = std::process::Command::new(program);
        cmd.args(args).current_dir(&self.cwd).stdin(std::process::Stdio::null()).stdout(out.try_clone()?).stderr(out);
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let pid = cmd.spawn()?.id();
        std::fs::write(pid_file, format!("{pid}\n"))?;
        let env: String = std::fs::read_to_string(env_file)?
            .lines()
            .map(
                |l| if l.starts_with(&format!("{pid_var}=")) { format!("{pid_var}={pid}\n") } else { format!("{l}\n") },
            )
            .collect();
        std::fs::write(env_file, env)?;
        Ok(ServerProcess { pid, argv: self.argv.clone(), cwd: self.cwd.clone() })
    }

    /// The working directory (where xtask keeps the server's files).
    pub fn dir(&self) -> &std::path::Path {
        &self.cwd
    }
}
