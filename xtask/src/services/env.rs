//! What both servers hand to tests and benchmarks: the one SASL/PLAIN user they know, and the
//! format of their env files (`target/services/<service>.env`): one `KEY=VALUE` per line, no
//! quoting.

use anyhow::{Context, Result};

/// The one user of the SASL/PLAIN listener.
pub(crate) const SASL_USERNAME: &str = "actionstate";
/// The password of [`SASL_USERNAME`].
pub(crate) const SASL_PASSWORD: &str = "actionstate-secret";

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
