//! What both servers hand to tests and benchmarks: the one SASL/PLAIN user they know, the client
//! settings every env file starts with, and the format of their env files
//! (`target/services/<service>.env`): one `KEY=VALUE` per line, no quoting.

use anyhow::{Context, Result};
use std::fs;
use std::path::Path;

/// The one user of the SASL/PLAIN listener.
pub(crate) const SASL_USERNAME: &str = "actionstate";
/// The password of [`SASL_USERNAME`].
pub(crate) const SASL_PASSWORD: &str = "actionstate-secret";

/// A probe of one listener: its address and, on the SASL listener, the user and password; a
/// summary of what the server answered.
pub(crate) type Probe<'a> = &'a dyn Fn(&str, Option<(&str, &str)>) -> Result<String>;

/// How a client reaches a server, the first four lines of its env file under the server's
/// prefix `P`: `P_BOOTSTRAP`, `P_SASL_BOOTSTRAP`, `P_SASL_USERNAME`, `P_SASL_PASSWORD`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Client {
    /// `host:port` of the plaintext listener.
    pub(crate) bootstrap: String,
    /// `host:port` of the SASL/PLAIN listener.
    pub(crate) sasl_bootstrap: String,
    pub(crate) sasl_username: String,
    pub(crate) sasl_password: String,
}

impl Client {
    /// Listeners on 127.0.0.1 at ports `plain` and `sasl`, for the one user the servers know.
    pub(crate) fn local(plain: u16, sasl: u16) -> Self {
        Self {
            bootstrap: format!("127.0.0.1:{plain}"),
            sasl_bootstrap: format!("127.0.0.1:{sasl}"),
            sasl_username: SASL_USERNAME.to_owned(),
            sasl_password: SASL_PASSWORD.to_owned(),
        }
    }

    /// The user and password, as the probes take them.
    pub(crate) fn plain(&self) -> Option<(&str, &str)> {
        Some((&self.sasl_username, &self.sasl_password))
    }

    /// The settings as environment variables under `prefix`, in the order of the env file.
    pub(crate) fn vars(&self, prefix: &str) -> Vec<(String, String)> {
        vec![
            (format!("{prefix}_BOOTSTRAP"), self.bootstrap.clone()),
            (format!("{prefix}_SASL_BOOTSTRAP"), self.sasl_bootstrap.clone()),
            (format!("{prefix}_SASL_USERNAME"), self.sasl_username.clone()),
            (format!("{prefix}_SASL_PASSWORD"), self.sasl_password.clone()),
        ]
    }

    /// The settings back from an env file written with [`vars`](Self::vars).
    pub(crate) fn parse(text: &str, prefix: &str) -> Result<Self> {
        let get = |key: &str| value(text, &format!("{prefix}_{key}"));
        Ok(Self {
            bootstrap: get("BOOTSTRAP")?,
            sasl_bootstrap: get("SASL_BOOTSTRAP")?,
            sasl_username: get("SASL_USERNAME")?,
            sasl_password: get("SASL_PASSWORD")?,
        })
    }

    /// Prints, for `status`, whether each listener answers `probe` (which returns a summary of
    /// the answer), the labels padded to `width`.
    pub(crate) fn print_status(&self, width: usize, probe: Probe<'_>) {
        match probe(&self.bootstrap, None) {
            Ok(summary) => println!("  {:<width$} {}: answers ({summary})", "plaintext", self.bootstrap),
            Err(e) => println!("  {:<width$} {}: does not answer: {e:#}", "plaintext", self.bootstrap),
        }
        match probe(&self.sasl_bootstrap, self.plain()) {
            Ok(summary) => println!(
                "  {:<width$} {}: PLAIN as {} accepted, answers ({summary})",
                "sasl", self.sasl_bootstrap, self.sasl_username
            ),
            Err(e) => println!("  {:<width$} {}: does not answer: {e:#}", "sasl", self.sasl_bootstrap),
        }
    }
}

/// The lines of an env file, one per variable, in the order given.
pub(crate) fn render<K: AsRef<str>>(vars: &[(K, String)]) -> String {
    vars.iter().map(|(k, v)| format!("{}={v}\n", k.as_ref())).collect()
}

/// The value of `key` in an env file: each line splits at its first `=`; unknown keys are ignored.
pub(crate) fn value(text: &str, key: &str) -> Result<String> {
    text.lines()
        .filter_map(|line| line.split_once('='))
        .find(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim().to_owned())
        .with_context(|| format!("no {key} line"))
}

/// For `status`: the env file at `path` as `parse` reads it, or `None` after printing that it is
/// missing because `server` (e.g. `the broker`) has not answered yet.
pub(crate) fn read_for_status<T>(path: &Path, server: &str, parse: impl Fn(&str) -> Result<T>) -> Result<Option<T>> {
    match fs::read_to_string(path) {
        Ok(text) => parse(&text).with_context(|| format!("reading {}", path.display())).map(Some),
        Err(_) => {
            println!("  {} missing: {server} has not answered yet", path.display());
            Ok(None)
        }
    }
}
