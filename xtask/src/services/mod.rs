//! Local services for integration tests and benchmarks: `cargo xtask services up|down|status
//! [kafka] [kafka3] [fluss] [fluss3]`, and `services restart-node kafka3|fluss3 N`. Without a
//! service named, `up` starts Kafka, and `down` and `status` cover all four.
//!
//! - [`kafka`] — one Apache Kafka broker; its jars and configuration files in `kafka/config.rs`,
//!   its readiness probe (the Kafka wire protocol) in `kafka/probe.rs`; and `kafka3`, a cluster
//!   of three replicating KRaft nodes from the same jars, for tests that stop a broker, in
//!   `kafka/cluster.rs`;
//! - [`fluss`] — an Apache Fluss cluster of ZooKeeper, a coordinator and a tablet server; its jars
//!   and configuration files in `fluss/config.rs`, its readiness probes (ZooKeeper's four-letter
//!   commands and the Fluss RPC protocol) in `fluss/probe.rs`; and `fluss3`, the same with three
//!   tablet servers and tables replicated three times, for tests that stop a tablet server, in
//!   `fluss/cluster.rs`.
//!
//! Both use the shared modules below, which know neither of them (and neither server module uses
//! the other):
//!
//! - [`process`] — starting a JVM detached from the terminal, pid files, whether a pid still runs
//!   our process or has exited, stopping it, the polling and timeouts of the waits, free ports,
//!   resident memory, atomic writes, log tails;
//! - [`config`] — where a service keeps its files, the classpath, the JVM flags and command line,
//!   the log4j 2 configuration, and reading a listener's port back from a configuration file;
//! - [`probe`] — the probes' TCP connection, response frames, SASL/PLAIN token and server nodes,
//!   and the wait that polls a probe until the server answers, exits or times out;
//! - [`artifacts`] — the Java check and the jars Maven resolves from Maven Central into a `lib/`
//!   directory, the servers' classpath;
//! - [`env`](mod@env) — the one SASL/PLAIN user both servers know, the client settings every env
//!   file starts with, and the `KEY=VALUE` format of the env files they write for tests and
//!   benchmarks.

mod artifacts;
mod config;
mod env;
pub(crate) mod fluss;
pub(crate) mod kafka;
pub(crate) mod otlp_sink;
mod probe;
mod process;

pub(crate) use kafka::cluster::{down_kafka3, up_kafka3};
pub(crate) use kafka::{down_kafka, kafka_log_dir, up_kafka};

use anyhow::{Context, Result, bail};

const USAGE: &str = "usage: cargo xtask services <up|down|status> [kafka] [kafka3] [fluss] [fluss3] [otlp-sink]\n       \
                     cargo xtask services restart-node <kafka3|fluss3> <0|1|2>";
const SERVICES: [&str; 5] = ["kafka", "kafka3", "fluss", "fluss3", "otlp-sink"];

/// `cargo xtask services <action> [service...]`. Without services, `up` starts Kafka only, and
/// `down` and `status` cover all of them; see [`kafka`], [`kafka::cluster`], [`fluss`] and
/// [`fluss::cluster`].
pub(crate) fn run(args: &[String]) -> Result<()> {
    let Some(action) = args.first() else { bail!(USAGE) };
    if action == "restart-node" {
        let [_, service, node] = args else { bail!(USAGE) };
        let node = node.parse().with_context(|| format!("`{node}` is not a node number\n{USAGE}"))?;
        match service.as_str() {
            "kafka3" => print!("{}", kafka::cluster::restart_node(node)?.render()),
            "fluss3" => print!("{}", fluss::cluster::restart_node(node)?.render()),
            _ => bail!("restart-node applies to kafka3 and fluss3 only, not `{service}`\n{USAGE}"),
        }
        return Ok(());
    }
    let mut named: Vec<&str> = Vec::new();
    for service in &args[1..] {
        let Some(known) = SERVICES.iter().copied().find(|s| *s == service.as_str()) else {
            bail!("unknown service `{service}` (known: {})\n{USAGE}", SERVICES.join(", "));
        };
        if !named.contains(&known) {
            named.push(known);
        }
    }
    let all = |default: &[&'static str]| if named.is_empty() { default.to_vec() } else { named.clone() };
    match action.as_str() {
        "up" => {
            for service in all(&["kafka"]) {
                match service {
                    "fluss" => print!("{}", fluss::up_fluss()?.render()),
                    "fluss3" => print!("{}", fluss::cluster::up_fluss3()?.render()),
                    "kafka3" => print!("{}", kafka::cluster::up_kafka3()?.render()),
                    // Made ready only: the tracing test starts the receiver itself.
                    "otlp-sink" => println!("{}={}", otlp_sink::PYTHON_VAR, otlp_sink::python()?.display()),
                    _ => print!("{}", kafka::up_kafka()?.render()),
                }
            }
            Ok(())
        }
        "down" => {
            // Every service is stopped even when one of them fails to stop.
            let results: Vec<Result<()>> = all(&["fluss3", "fluss", "kafka3", "kafka"])
                .into_iter()
                .map(|service| match service {
                    "fluss" => fluss::down_fluss(),
                    "fluss3" => fluss::cluster::down_fluss3(),
                    "kafka3" => kafka::cluster::down_kafka3(),
                    "otlp-sink" => Ok(()),
                    _ => kafka::down_kafka(),
                })
                .collect();
            results.into_iter().collect()
        }
        "status" => {
            for service in all(&["kafka", "kafka3", "fluss", "fluss3"]) {
                match service {
                    "fluss" => fluss::status_fluss()?,
                    "fluss3" => fluss::cluster::status_fluss3()?,
                    "kafka3" => kafka::cluster::status_kafka3()?,
                    "otlp-sink" => println!("otlp-sink: {}", otlp_sink::status()?),
                    _ => kafka::status_kafka()?,
                }
            }
            Ok(())
        }
        other => bail!("unknown services action `{other}`\n{USAGE}"),
    }
}

/// The workspace's root directory: where the services keep their files, and where every task
/// runs.
pub(crate) fn workspace_root() -> anyhow::Result<std::path::PathBuf> {
    let manifest = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    Ok(manifest.parent().ok_or_else(|| anyhow::anyhow!("xtask has no parent directory"))?.to_path_buf())
}
