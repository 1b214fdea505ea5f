//! The OTLP receiver of the command line's tracing test (`crates/cli/tests/otlp.rs`): the
//! `oteltest` package from the Python package index (its `HttpSink`, which parses each export
//! with `opentelemetry-proto`), in a virtual environment of its own under
//! `target/services/otlp-sink/venv`, made once. The test starts the receiver itself.

use super::config::services_dir;
use super::workspace_root;
use anyhow::{Context, Result, bail};
use std::path::PathBuf;
use std::process::Command;

/// The receiver's package, pinned: the test reads what its `HttpSink` hands over.
const PACKAGE: &str = "oteltest==0.49.0";

/// The variable that tells the test which Python runs the receiver.
pub(crate) const PYTHON_VAR: &str = "ACTIONSTATE_OTLP_SINK_PYTHON";

/// The receiver's environment, and the file written once the package is in it (an
/// environment a failed install left is made again).
fn venv() -> Result<(PathBuf, PathBuf)> {
    let venv = services_dir(&workspace_root()?).join("otlp-sink").join("venv");
    let installed = venv.join(format!("{PACKAGE}.installed"));
    Ok((venv, installed))
}

/// Whether the environment is made: what `services status otlp-sink` says.
pub(crate) fn status() -> Result<String> {
    let (venv, installed) = venv()?;
    Ok(if installed.exists() {
        format!("{PACKAGE} installed in {}", venv.display())
    } else {
        "not installed (`cargo xtask services up otlp-sink` installs it)".to_owned()
    })
}

/// The Python of the receiver's environment, made (and `PACKAGE` installed) if it is not yet.
pub(crate) fn python() -> Result<PathBuf> {
    let (venv, installed) = venv()?;
    let python = venv.join("bin").join("python");
    if installed.exists() {
        return Ok(python);
    }
    eprintln!("==> otlp-sink: installing {PACKAGE} into {}", venv.display());
    let status = Command::new("python3")
        .args(["-m", "venv", "--clear"])
        .arg(&venv)
        .status()
        .context("otlp-sink: running python3 -m venv (is Python 3 installed?)")?;
    if !status.success() {
        bail!("otlp-sink: python3 -m venv {} failed ({status})", venv.display());
    }
    let status = Command::new(&python)
        .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", PACKAGE])
        .status()
        .with_context(|| format!("otlp-sink: running {} -m pip", python.display()))?;
    if !status.success() {
        bail!("otlp-sink: pip install {PACKAGE} failed ({status}); the package index must be reachable");
    }
    std::fs::write(&installed, PACKAGE).with_context(|| format!("writing {}", installed.display()))?;
    Ok(python)
}
