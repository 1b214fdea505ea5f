//! `--metrics ADDR` of the commands that run long (`demo`, `soak`, `bench`): the store's
//! metrics (`actionstate_recovery::metrics` lists them) served over HTTP in the Prometheus
//! text format while the command runs.

use actionstate_recovery::metrics as names;
use anyhow::{Context, Result};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use std::net::{SocketAddr, TcpListener};
use std::sync::OnceLock;
use std::time::Duration;

/// The metrics options every long-running command takes (`#[command(flatten)]`).
#[derive(clap::Args, Debug)]
pub(crate) struct MetricsArgs {
    /// Serve the store's metrics at `http://ADDR/metrics` in the Prometheus text format while
    /// the command runs, e.g. `127.0.0.1:9898` (port 0: a free port). The address served is
    /// printed on standard error as `metrics: http://ADDR/metrics`.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,
    /// With `--metrics`: keep serving this many seconds after the command finished, so the
    /// final values can still be scraped (not after an error, which is printed at once).
    #[arg(long, value_name = "SECS", requires = "metrics")]
    linger: Option<u64>,
    /// Export the store's spans (docs/design.md, section 5.8) to an OpenTelemetry collector
    /// over OTLP/HTTP with protobuf, e.g. `http://127.0.0.1:4318` (the path `/v1/traces` is
    /// added when none is given). Needs a build with `--features otlp`.
    #[arg(long, value_name = "ENDPOINT")]
    pub(crate) otlp: Option<String>,
}

/// How long `linger` keeps serving, once `serve` started a listener that should linger.
static LINGER: OnceLock<Duration> = OnceLock::new();

/// Starts serving the metrics when `--metrics` asks for it, and installs the recorder the
/// store records into; without it, does nothing and metrics go nowhere. Must run inside the
/// tokio runtime, which serves the requests, and at most once per process.
pub(crate) fn serve(args: &MetricsArgs) -> Result<()> {
    let Some(asked) = args.metrics else { return Ok(()) };
    let addr = resolve(asked).with_context(|| format!("--metrics {asked}"))?;
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .set_buckets_for_metric(Matcher::Full(names::PUT_SECONDS.to_owned()), names::PUT_SECONDS_BUCKETS)?
        .install()
        .with_context(|| format!("--metrics {asked}"))?;
    names::describe();
    if let Some(secs) = args.linger {
        let _ = LINGER.set(Duration::from_secs(secs));
    }
    eprintln!("metrics: http://{addr}/metrics");
    Ok(())
}

/// Keeps the process (and so the listener) up for `--linger` seconds once the command has
/// finished without an error; returns at once without `--linger`.
pub(crate) async fn linger() {
    if let Some(&d) = LINGER.get() {
        eprintln!("metrics: the command finished; serving the final values for {} s", d.as_secs());
        tokio::time::sleep(d).await;
    }
}

/// The address to listen on. The exporter does not say which port it bound, so port 0 is
/// resolved here, by binding it once and handing the port the system chose to the exporter.
fn resolve(addr: SocketAddr) -> Result<SocketAddr> {
    if addr.port() != 0 {
        return Ok(addr);
    }
    Ok(TcpListener::bind(addr)?.local_addr()?)
}
