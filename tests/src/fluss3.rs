//! The local Fluss cluster of three tablet servers that `cargo xtask services up fluss3`
//! starts, for the fault tests that kill its tablet servers (`tests/tests/fluss3.rs`, the
//! SIGKILL campaign on it in `tests/tests/all/sigkill.rs`, and the `chaos` binary).
//!
//! [`Fluss3`] reads `target/services/fluss3.env` (never the environment: a restart rewrites
//! the file's pids), kills a tablet server with SIGKILL and starts it again with the command
//! line it ran, in its directory, with its output appended to its log and its new pid written
//! where `cargo xtask services down fluss3` looks for it. It implements [`Cluster`] for the
//! scenarios of [`actionstate_sim::chaos`]: a bucket's leader comes from the cluster's
//! metadata ([`FlussLog::bucket_leaders`]), and whether every replica is in sync from the
//! bucket's leader-and-ISR record in ZooKeeper, which Fluss's client does not report. Dropped,
//! it starts again every server it killed and did not restart.

use actionstate_fluss::{FlussConfig, FlussLog};
use actionstate_sim::chaos::Cluster;
use actionstate_testkit::services::{self, ServerProcess, Service};
use std::path::PathBuf;
use std::time::Duration;

/// The tablet servers; server `n` has tablet server id `n`.
pub const NODES: usize = 3;

/// The main class of a tablet server's JVM.
const TABLET_SERVER: &str = "org.apache.fluss.server.tablet.TabletServer";

/// One tablet server: the process it runs (or last ran, once killed).
#[derive(Debug)]
struct Node {
    process: ServerProcess,
    running: bool,
}

/// The cluster `cargo xtask services up fluss3` started.
#[derive(Debug)]
pub struct Fluss3 {
    bootstrap: String,
    zookeeper: String,
    env_file: PathBuf,
    nodes: Vec<Node>,
}

impl Fluss3 {
    /// The cluster `target/services/fluss3.env` describes, with every tablet server running;
    /// `Err` says what is missing.
    pub fn find() -> Result<Fluss3, String> {
        let missing = || "no cluster started by `cargo xtask services up fluss3`".to_owned();
        let env_file = services::env_file("fluss3").filter(|f| f.exists()).ok_or_else(missing)?;
        let env = Service::in_env_file("fluss3", "FLUSS3").ok_or_else(missing)?;
        let var = |name: &str| {
            env.get(name).map(str::to_owned).ok_or_else(|| format!("{} has no {name}", env_file.display()))
        };
        let (bootstrap, zookeeper) = (var("FLUSS3_BOOTSTRAP")?, var("FLUSS3_ZOOKEEPER")?);
        let nodes = (0..NODES)
            .map(|n| {
                let name = format!("FLUSS3_TABLET{n}_PID");
                let pid: u32 = var(&name)?.parse().map_err(|_| format!("{name} is not a pid"))?;
                let process = ServerProcess::of(pid, TABLET_SERVER).map_err(|e| {
                    format!(
                        "tablet server {n} (pid {pid}) is not running ({e}); `cargo xtask services up fluss3` starts it"
                    )
                })?;
                Ok(Node { process, running: true })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Fluss3 { bootstrap, zookeeper, env_file, nodes })
    }

    /// The cluster for `test`, or `None` after printing the skip marker (a panic when
    /// `ACTIONSTATE_REQUIRE_SERVICES` is set).
    pub fn require(test: &str) -> Option<Fluss3> {
        match Fluss3::find() {
            Ok(cluster) => Some(cluster),
            Err(why) => {
                services::skip_because("fluss3", test, &why);
                None
            }
        }
    }

    /// The coordinator's plaintext address.
    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    /// A table of `buckets` buckets in the tests' database, replicated on all three tablet
    /// servers, whose appends fail after `delivery_timeout`, and whose reads and requests give
    /// up after 15 s.
    pub fn config(&self, table: &str, buckets: u32, delivery_timeout: Duration) -> FlussConfig {
        let mut config = FlussConfig::new(&self.bootstrap, crate::FLUSS_DATABASE, table, buckets);
        config.replication = Some(NODES as i32);
        config.delivery_timeout = delivery_timeout;
        config.request_timeout = Duration::from_secs(15);
        config.read_stall_timeout = Duration::from_secs(15);
        config
    }

    /// The URL of such a table, with timeouts of 30 s: longer than a leader election takes
    /// here, so that a client waits one out.
    pub fn table_url(&self, table: &str, buckets: u32) -> String {
        format!(
            "fluss://{}/{}/{table}?buckets={buckets}&replication={NODES}&delivery_timeout=30s\
             &read_stall_timeout=30s&request_timeout=30s",
            self.bootstrap,
            crate::FLUSS_DATABASE
        )
    }

    /// Starts tablet server `node` again with the command line it ran.
    fn start(&mut self, node: usize) -> Result<(), String> {
        let old = &self.nodes[node].process;
        let dir = old.dir().to_path_buf();
        let process = old
            .restart(
                &dir.join(format!("tablet-{node}.log")),
                &dir.join(format!("tablet-{node}.pid")),
                &self.env_file,
                &format!("FLUSS3_TABLET{node}_PID"),
            )
            .map_err(|e| format!("starting tablet server {node} again: {e}"))?;
        self.nodes[node] = Node { process, running: true };
        Ok(())
    }

    /// Per bucket of `log`, its leader and in-sync replicas as the coordinator recorded them in
    /// ZooKeeper (`/fluss/tabletservers/tables/<id>/buckets/<bucket>/leader_isr`).
    async fn leader_and_isr(&self, log: &FlussLog) -> Result<Vec<(i32, Vec<i32>)>, String> {
        let zk = zookeeper_client::Client::connect(&self.zookeeper)
            .await
            .map_err(|e| format!("connecting to ZooKeeper at {}: {e}", self.zookeeper))?;
        let table = log.table_info().get_table_id();
        let mut out = Vec::new();
        for bucket in 0..log.table_info().get_num_buckets() {
            let path = format!("/fluss/tabletservers/tables/{table}/buckets/{bucket}/leader_isr");
            let (data, _) = zk.get_data(&path).await.map_err(|e| format!("reading {path}: {e}"))?;
            let json: serde_json::Value =
                serde_json::from_slice(&data).map_err(|e| format!("{path} is not JSON ({e}): {data:?}"))?;
            let leader = json["leader"].as_i64().and_then(|l| i32::try_from(l).ok()).unwrap_or(-1);
            let isr = json["isr"]
                .as_array()
                .map(|a| a.iter().filter_map(|r| r.as_i64().and_then(|r| i32::try_from(r).ok())).collect())
                .unwrap_or_default();
            out.push((leader, isr));
        }
        Ok(out)
    }
}

impl Cluster<FlussLog> for Fluss3 {
    fn nodes(&self) -> usize {
        self.nodes.len()
    }

    async fn leaders(&self, log: &FlussLog) -> Result<Vec<Option<usize>>, String> {
        let leaders = log.bucket_leaders().await.map_err(|e| e.to_string())?;
        Ok(leaders.into_iter().map(|l| l.and_then(|id| usize::try_from(id).ok())).collect())
    }

    async fn in_sync(&self, log: &FlussLog) -> Result<bool, String> {
        if let Some(n) = self.nodes.iter().position(|n| !n.running) {
            return Err(format!("tablet server {n} is not running"));
        }
        let buckets = self.leader_and_isr(log).await?;
        Ok(!buckets.is_empty() && buckets.iter().all(|(leader, isr)| *leader >= 0 && isr.len() == NODES))
    }

    async fn kill(&mut self, node: usize) -> Result<(), String> {
        let process = self.nodes[node].process.clone();
        tokio::task::spawn_blocking(move || process.kill())
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("killing tablet server {node}: {e}"))?;
        self.nodes[node].running = false;
        Ok(())
    }

    async fn restart(&mut self, node: usize) -> Result<(), String> {
        self.start(node)
    }
}

impl Drop for Fluss3 {
    fn drop(&mut self) {
        for node in 0..self.nodes.len() {
            if !self.nodes[node].running
                && let Err(e) = self.start(node)
            {
                eprintln!("fluss3: {e}");
            }
        }
    }
}
