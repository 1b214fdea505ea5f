//! The servers backend tests run against (a Kafka broker, a Fluss cluster), found the way
//! `cargo xtask services up` publishes them, and the skip rule every such test follows.
//!
//! A service `NAME` with variable prefix `PREFIX` is configured when `PREFIX_BOOTSTRAP` is set
//! in the environment (then every `PREFIX_*` variable comes from the environment), or else when
//! `target/services/NAME.env` exists in the workspace this crate was built in (`KEY=VALUE`
//! lines, as xtask writes them). A test that finds no service prints the `ACTIONSTATE-SKIP`
//! marker and passes — unless `ACTIONSTATE_REQUIRE_SERVICES` is set, as `cargo xtask ci` sets
//! it, and then it fails: a skipped backend test is never counted as passed there.

use std::collections::HashMap;
use std::path::PathBuf;

/// The marker a test prints when it skips for lack of a server; `cargo xtask ci` fails on it.
pub const SKIP_MARKER: &str = "ACTIONSTATE-SKIP";

/// The settings of one configured service.
#[derive(Clone, Debug)]
pub struct Service {
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
            return Some(Service { vars, source: "environment".to_owned() });
        }
        let path = env_file(name)?;
        let text = std::fs::read_to_string(&path).ok()?;
        let vars: HashMap<String, String> = text
            .lines()
            .filter_map(|line| line.split_once('='))
            .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
            .collect();
        vars.get(&bootstrap)
            .is_some_and(|v| !v.is_empty())
            .then(|| Service { vars, source: path.display().to_string() })
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
    let msg = format!(
        "{SKIP_MARKER} {name} tests ({test}): no {name} service configured (run cargo xtask services up {name})"
    );
    if std::env::var_os("ACTIONSTATE_REQUIRE_SERVICES").is_some() {
        panic!("{msg}; ACTIONSTATE_REQUIRE_SERVICES is set");
    }
    eprintln!("{msg}");
    println!("{msg}");
}
