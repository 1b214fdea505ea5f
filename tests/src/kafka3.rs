//! The local three-node Kafka cluster that `cargo xtask services up kafka3` starts, for the
//! fault tests that kill its nodes (`tests/tests/kafka3.rs`, the SIGKILL campaign on it in
//! `tests/tests/all/sigkill.rs`, and the `chaos` binary).
//!
//! [`Kafka3`] reads `target/services/kafka3.env` (never the environment: a restart rewrites
//! the file's pids, see [`ServerProcess::restart`]), kills a node with SIGKILL and starts it
//! again with the command line it ran, in its directory, with its output appended to its
//! `node.log` and its new pid written where `cargo xtask services down kafka3` looks for it.
//! It implements [`Cluster`] for the scenarios of [`actionstate_sim::chaos`]. Dropped, it
//! starts again every node it killed and did not restart, so that a failed test leaves the
//! cluster whole for the next one (which waits until every replica is back in sync).

use actionstate_kafka::{KafkaConfig, KafkaLog};
use actionstate_sim::chaos::Cluster;
use actionstate_testkit::services::{self, ServerProcess, Service};
use std::path::PathBuf;
use std::time::Duration;

/// The nodes of the cluster; node `n` is broker id `n`.
pub const NODES: usize = 3;

/// One node: the process it runs (or last ran, once killed).
#[derive(Debug)]
struct Node {
    process: ServerProcess,
    running: bool,
}

/// The cluster `cargo xtask services up kafka3` started.
#[derive(Debug)]
pub struct Kafka3 {
    bootstrap: String,
    env_file: PathBuf,
    nodes: Vec<Node>,
}

impl Kafka3 {
    /// The cluster `target/services/kafka3.env` describes, with every node running; `Err`
    /// says what is missing.
    pub fn find() -> Result<Kafka3, String> {
        let missing = || "no cluster started by `cargo xtask services up kafka3`".to_owned();
        let env_file = services::env_file("kafka3").filter(|f| f.exists()).ok_or_else(missing)?;
        let env = Service::in_env_file("kafka3", "KAFKA3").ok_or_else(missing)?;
        let bootstrap = env.get("KAFKA3_BOOTSTRAP").ok_or_else(missing)?.to_owned();
        let nodes = (0..NODES)
            .map(|n| {
                let var = format!("KAFKA3_NODE{n}_PID");
                let pid: u32 = env
                    .get(&var)
                    .and_then(|p| p.parse().ok())
                    .ok_or_else(|| format!("{} has no {var}", env_file.display()))?;
                let process = ServerProcess::of(pid, "kafka.Kafka").map_err(|e| {
                    format!("node {n} (pid {pid}) is not running ({e}); `cargo xtask services up kafka3` starts it")
                })?;
                Ok(Node { process, running: true })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Kafka3 { bootstrap, env_file, nodes })
    }

    /// The cluster for `test`, or `None` after printing the skip marker (a panic when
    /// `ACTIONSTATE_REQUIRE_SERVICES` is set).
    pub fn require(test: &str) -> Option<Kafka3> {
        match Kafka3::find() {
            Ok(cluster) => Some(cluster),
            Err(why) => {
                services::skip_because("kafka3", test, &why);
                None
            }
        }
    }

    /// Every node's address, comma-separated.
    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    /// A topic of `partitions` partitions replicated on all three nodes, whose appends fail
    /// after `delivery_timeout`, and whose reads and requests give up after 10 s.
    pub fn config(&self, topic: &str, partitions: u32, delivery_timeout: Duration) -> KafkaConfig {
        let mut config = KafkaConfig::new(&self.bootstrap, topic, partitions);
        config.replication = Some(NODES as i32);
        config.delivery_timeout = delivery_timeout;
        config.request_timeout = Duration::from_secs(10);
        config.read_stall_timeout = Duration::from_secs(10);
        config
    }

    /// The URL of such a topic, with timeouts of 30 s: longer than a leader election takes
    /// here (about 10 s, Kafka's broker session timeout), so that a client waits one out.
    pub fn topic_url(&self, topic: &str, partitions: u32) -> String {
        format!(
            "kafka://{}/{topic}?partitions={partitions}&replication={NODES}&delivery_timeout=30s\
             &read_stall_timeout=30s&request_timeout=30s",
            self.bootstrap
        )
    }

    /// Starts node `node` again with the command line it ran.
    fn start(&mut self, node: usize) -> Result<(), String> {
        let old = &self.nodes[node].process;
        let dir = old.dir().join(format!("node-{node}"));
        let process = old
            .restart(&dir.join("node.log"), &dir.join("node.pid"), &self.env_file, &format!("KAFKA3_NODE{node}_PID"))
            .map_err(|e| format!("starting node {node} again: {e}"))?;
        self.nodes[node] = Node { process, running: true };
        Ok(())
    }
}

impl Cluster<KafkaLog> for Kafka3 {
    fn nodes(&self) -> usize {
        self.nodes.len()
    }

    async fn leaders(&self, log: &KafkaLog) -> Result<Vec<Option<usize>>, String> {
        let replicas = log.partition_replicas().await.map_err(|e| e.to_string())?;
        Ok(replicas.iter().map(|p| p.leader.and_then(|id| usize::try_from(id).ok())).collect())
    }

    async fn in_sync(&self, log: &KafkaLog) -> Result<bool, String> {
        if let Some(n) = self.nodes.iter().position(|n| !n.running) {
            return Err(format!("node {n} is not running"));
        }
        let replicas = log.partition_replicas().await.map_err(|e| e.to_string())?;
        Ok(!replicas.is_empty()
            && replicas.iter().all(|p| {
                p.leader.is_some() && p.replicas.len() == self.nodes.len() && p.in_sync.len() == p.replicas.len()
            }))
    }

    async fn kill(&mut self, node: usize) -> Result<(), String> {
        let process = self.nodes[node].process.clone();
        tokio::task::spawn_blocking(move || process.kill())
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("killing node {node}: {e}"))?;
        self.nodes[node].running = false;
        Ok(())
    }

    async fn restart(&mut self, node: usize) -> Result<(), String> {
        // Quick (a fork and two small files), so not worth a blocking thread.
        self.start(node)
    }
}

impl Drop for Kafka3 {
    fn drop(&mut self) {
        for node in 0..self.nodes.len() {
            if !self.nodes[node].running
                && let Err(e) = self.start(node)
            {
                eprintln!("kafka3: {e}");
            }
        }
    }
}
