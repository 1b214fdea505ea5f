//! A replicated Kafka cluster for tests: `cargo xtask services up|down|status kafka3` and
//! `cargo xtask services restart-node kafka3 N`.
//!
//! Three KRaft nodes (ids 0, 1 and 2) on 127.0.0.1, each one JVM acting as broker and controller,
//! with a static three-voter quorum (`controller.quorum.voters`), from the same jars as the single
//! broker (`target/services/kafka/lib/`, resolved by Maven the first time). Topics are created
//! with replication factor 3 and need 2 in-sync replicas for an acknowledged write
//! (`min.insync.replicas=2`, the consumer offsets and transaction state topics likewise); an
//! out-of-sync replica never becomes leader (`unclean.leader.election.enable=false`). So the
//! cluster keeps taking writes with one node down, and a test can SIGKILL a node and check that
//! nothing acknowledged is lost. Each node has a 256 MiB heap. The cluster is separate from the
//! single broker, which keeps serving the ordinary tests; `cargo xtask ci` does not start it.
//!
//! - `up kafka3` with no node running wipes the data, picks six free ports (a client and a
//!   controller listener per node, plaintext, no SASL), formats all three data directories with
//!   one new cluster id, starts the three nodes and returns once every node answers a `Metadata`
//!   request that lists all three brokers. With some nodes running, it starts only the others,
//!   on their data and ports, and waits the same way: a test that killed a node brings it back
//!   by running `up kafka3` again.
//! - `restart-node kafka3 N` stops node N (SIGTERM, SIGKILL after 30 s) if it runs, and starts
//!   it again on its data, together with any other node that is not running; it never wipes.
//! - `down kafka3` stops only the processes whose pids `up` recorded, and only while those pids
//!   still run a node with our configuration; `status kafka3` reports each node.
//!
//! Files, under `<workspace root>/target/services/`:
//!
//! - `kafka3.env` — the addresses and pids, written once the cluster answers, removed by `down`;
//! - `kafka3/log4j2.properties`;
//! - `kafka3/node-N/server.properties`, `kafka3/node-N/data/` (log and metadata directory),
//!   `kafka3/node-N/node.log` (what the node and its storage formatter print) and
//!   `kafka3/node-N/node.pid`.
//!
//! `kafka3.env`, one `KEY=VALUE` per line like `kafka.env`:
//!
//! ```text
//! KAFKA3_BOOTSTRAP=127.0.0.1:40101,127.0.0.1:40103,127.0.0.1:40105
//! KAFKA3_NODE0_BOOTSTRAP=127.0.0.1:40101
//! KAFKA3_NODE0_PID=12345
//! KAFKA3_NODE1_BOOTSTRAP=127.0.0.1:40103
//! KAFKA3_NODE1_PID=12346
//! KAFKA3_NODE2_BOOTSTRAP=127.0.0.1:40105
//! KAFKA3_NODE2_PID=12347
//! ```

use super::config::{
    Kraft, Paths as BrokerPaths, ensure_jars, listener_port, log4j2_properties, new_cluster_id, storage_format_command,
};
use super::probe::probe_nodes;
use crate::services::artifacts::check_java;
use crate::services::config::{Gc, Jvm, services_dir};
use crate::services::env;
use crate::services::process::{
    READY_TIMEOUT, child_exited, free_port_list, log_tail, process_runs, read_pid, remove_dir_if_exists,
    remove_file_if_exists, resident, spawn_detached, stop_process, write_atomic,
};
use anyhow::{Context, Result, anyhow, bail};
use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Instant;

/// The cluster's size; node ids are `0..NODES`.
pub(crate) const NODES: usize = 3;
/// The single broker's flags with half its heap (512 MiB there), so that the three nodes
/// together stay under 800 MiB of heap next to the single broker and Fluss.
const JVM: Jvm = Jvm { max_heap: "256m", initial_heap: "64m", gc: Gc::G1 };

/// Where the cluster keeps its files.
#[derive(Debug, Clone)]
struct ClusterPaths {
    dir: PathBuf,
    log4j: PathBuf,
    env: PathBuf,
    nodes: Vec<NodePaths>,
}

/// One node's files, under `target/services/kafka3/node-N/`.
#[derive(Debug, Clone)]
struct NodePaths {
    id: usize,
    server_properties: PathBuf,
    data: PathBuf,
    log: PathBuf,
    pid: PathBuf,
}

impl ClusterPaths {
    fn new(workspace_root: &Path) -> Self {
        let services = services_dir(workspace_root);
        let dir = services.join("kafka3");
        let nodes = (0..NODES)
            .map(|id| {
                let node = dir.join(format!("node-{id}"));
                NodePaths {
                    id,
                    server_properties: node.join("server.properties"),
                    data: node.join("data"),
                    log: node.join("node.log"),
                    pid: node.join("node.pid"),
                }
            })
            .collect();
        Self { log4j: dir.join("log4j2.properties"), env: services.join("kafka3.env"), nodes, dir }
    }

    fn current() -> Result<Self> {
        Ok(Self::new(&crate::services::workspace_root()?))
    }
}

/// A node's listener ports on 127.0.0.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct NodePorts {
    client: u16,
    controller: u16,
}

/// Ports for every node, all distinct (see [`free_port_list`]).
fn free_cluster_ports() -> Result<Vec<NodePorts>> {
    let ports = free_port_list(2 * NODES)?;
    Ok(ports.chunks(2).map(|pair| NodePorts { client: pair[0], controller: pair[1] }).collect())
}

/// The `controller.quorum.voters` of every node: `0@127.0.0.1:P0,1@127.0.0.1:P1,...`.
fn voters(ports: &[NodePorts]) -> String {
    let voters: Vec<String> =
        ports.iter().enumerate().map(|(id, p)| format!("{id}@127.0.0.1:{}", p.controller)).collect();
    voters.join(",")
}

/// Node `id`'s `server.properties`: broker and controller in one process, one of three voters,
/// a plaintext client listener, replication factor 3 with 2 in-sync replicas required, and the
/// settings of [`Kraft::failover`].
fn node_properties(id: usize, ports: &[NodePorts], data: &Path) -> String {
    let NodePorts { client, controller } = ports[id];
    Kraft {
        header: "# Generated by `cargo xtask services up kafka3` on a fresh start.",
        node_id: id,
        voters: voters(ports),
        listeners: format!("PLAINTEXT://127.0.0.1:{client},CONTROLLER://127.0.0.1:{controller}"),
        advertised: format!("PLAINTEXT://127.0.0.1:{client}"),
        protocol_map: "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        listener_lines: String::new(),
        data,
        replicas: NODES,
        min_isr: 2,
        failover: true,
    }
    .properties()
}

/// The ports back from a `server.properties` written by [`node_properties`].
fn node_ports_from_config(text: &str) -> Option<NodePorts> {
    Some(NodePorts { client: listener_port(text, "PLAINTEXT")?, controller: listener_port(text, "CONTROLLER")? })
}

/// Every node's ports, from the configuration files of the last fresh start.
fn ports_from_configs(paths: &ClusterPaths) -> Result<Vec<NodePorts>> {
    paths
        .nodes
        .iter()
        .map(|node| {
            fs::read_to_string(&node.server_properties)
                .ok()
                .and_then(|text| node_ports_from_config(&text))
                .with_context(|| {
                    format!(
                        "{} is missing or has no listeners; `cargo xtask services down kafka3` and `up kafka3` \
                         start the cluster afresh",
                        node.server_properties.display()
                    )
                })
        })
        .collect()
}

/// How tests reach the cluster; the contents of `target/services/kafka3.env`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Kafka3Env {
    /// Each node's `host:port` of the plaintext listener, by node id.
    pub(crate) nodes: Vec<String>,
    /// Each node's process id, by node id.
    pub(crate) pids: Vec<u32>,
}

impl Kafka3Env {
    fn new(ports: &[NodePorts], pids: Vec<u32>) -> Self {
        Self { nodes: ports.iter().map(|p| format!("127.0.0.1:{}", p.client)).collect(), pids }
    }

    /// All nodes' addresses, comma-separated: a client's bootstrap servers.
    pub(crate) fn bootstrap(&self) -> String {
        self.nodes.join(",")
    }

    pub(crate) fn vars(&self) -> Vec<(String, String)> {
        let mut vars = vec![("KAFKA3_BOOTSTRAP".to_owned(), self.bootstrap())];
        for (id, (addr, pid)) in self.nodes.iter().zip(&self.pids).enumerate() {
            vars.push((format!("KAFKA3_NODE{id}_BOOTSTRAP"), addr.clone()));
            vars.push((format!("KAFKA3_NODE{id}_PID"), pid.to_string()));
        }
        vars
    }

    pub(crate) fn render(&self) -> String {
        env::render(&self.vars())
    }

    fn parse(text: &str) -> Result<Self> {
        let mut nodes = Vec::new();
        let mut pids = Vec::new();
        for id in 0..NODES {
            nodes.push(env::value(text, &format!("KAFKA3_NODE{id}_BOOTSTRAP"))?);
            let pid = env::value(text, &format!("KAFKA3_NODE{id}_PID"))?;
            pids.push(pid.parse().with_context(|| format!("KAFKA3_NODE{id}_PID is not a pid"))?);
        }
        Ok(Self { nodes, pids })
    }
}

/// Whether `pid` is a live node started with node `node`'s `server.properties`.
fn node_is_ours(pid: u32, node: &NodePaths) -> bool {
    process_runs(pid, "kafka.Kafka", &node.server_properties)
}

/// The pid of each node that runs, by node id; a pid file whose pid no longer runs the node
/// counts as not running (and is overwritten by the next start, removed by `down`).
fn running_nodes(paths: &ClusterPaths) -> Result<Vec<Option<u32>>> {
    paths.nodes.iter().map(|node| Ok(read_pid(&node.pid)?.filter(|pid| node_is_ours(*pid, node)))).collect()
}

/// Starts the cluster, or the nodes of it that are not running, waits until every node answers
/// with all three brokers registered, writes `target/services/kafka3.env` and returns it.
pub(crate) fn up_kafka3() -> Result<Kafka3Env> {
    start(false)
}

/// Stops node `id` if it runs, then starts it (and any other node that is not running) on its
/// data, and waits as [`up_kafka3`] does.
pub(crate) fn restart_node(id: usize) -> Result<Kafka3Env> {
    if id >= NODES {
        bail!("kafka3 has nodes 0 to {}, not {id}", NODES - 1);
    }
    let paths = ClusterPaths::current()?;
    let node = &paths.nodes[id];
    if let Some(pid) = read_pid(&node.pid)?.filter(|pid| node_is_ours(*pid, node)) {
        let started = Instant::now();
        eprintln!("==> kafka3: stopping node {id} (pid {pid})");
        stop_process(pid)?;
        eprintln!("==> kafka3: node {id} stopped in {:.1}s", started.elapsed().as_secs_f64());
    }
    remove_file_if_exists(&node.pid)?;
    start(true)
}

/// A node started by this call, or one that already ran.
enum NodeProcess {
    Started(Child),
    Running(u32),
}

impl NodeProcess {
    fn pid(&self) -> u32 {
        match self {
            Self::Started(child) => child.id(),
            Self::Running(pid) => *pid,
        }
    }
}

fn start(keep_data: bool) -> Result<Kafka3Env> {
    let started = Instant::now();
    let paths = ClusterPaths::current()?;
    let running = running_nodes(&paths)?;
    let fresh = !keep_data && running.iter().all(Option::is_none);
    let broker = BrokerPaths::current()?;
    if running.iter().all(Option::is_some) {
        eprintln!("==> kafka3: all {NODES} nodes already running; checking that they answer");
    } else {
        check_java()?;
        ensure_jars(&broker)?;
    }
    let ports = if fresh {
        remove_file_if_exists(&paths.env)?;
        let ports = free_cluster_ports()?;
        for node in &paths.nodes {
            remove_dir_if_exists(&node.data)?;
            let dir = node.pid.parent().context("node directory")?;
            fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            write_atomic(&node.server_properties, &node_properties(node.id, &ports, &node.data))?;
            File::create(&node.log).with_context(|| format!("creating {}", node.log.display()))?;
        }
        write_atomic(&paths.log4j, &log4j2_properties())?;
        format_all(&paths, &broker)?;
        ports
    } else {
        ports_from_configs(&paths)?
    };

    let mut processes = Vec::new();
    for (node, pid) in paths.nodes.iter().zip(&running) {
        processes.push(match pid {
            Some(pid) => NodeProcess::Running(*pid),
            None => {
                let child = spawn_node(node, &paths, &broker)?;
                write_atomic(&node.pid, &format!("{}\n", child.id()))?;
                eprintln!(
                    "==> kafka3: node {} started (pid {}) on 127.0.0.1:{}{}",
                    node.id,
                    child.id(),
                    ports[node.id].client,
                    if fresh { "" } else { ", on its data" }
                );
                NodeProcess::Started(child)
            }
        });
    }
    let env = Kafka3Env::new(&ports, processes.iter().map(NodeProcess::pid).collect());
    if let Err(e) = wait_until_ready(&env, &paths, &mut processes) {
        for (node, process) in paths.nodes.iter().zip(&mut processes) {
            if let NodeProcess::Started(child) = process {
                if child.try_wait().ok().flatten().is_none() {
                    eprintln!("==> kafka3: stopping node {} that this start began", node.id);
                    let _ = stop_process(child.id());
                    let _ = child.wait();
                }
                remove_file_if_exists(&node.pid)?;
            }
        }
        return Err(e);
    }
    write_atomic(&paths.env, &env.render())?;
    eprintln!(
        "==> kafka3: ready in {:.1}s at {}; settings in {}",
        started.elapsed().as_secs_f64(),
        env.bootstrap(),
        paths.env.display()
    );
    Ok(env)
}

/// Formats every node's data directory with one new cluster id, the formatters running side by
/// side.
fn format_all(paths: &ClusterPaths, broker: &BrokerPaths) -> Result<()> {
    let cluster_id = new_cluster_id();
    let children = paths
        .nodes
        .iter()
        .map(|node| {
            let log = OpenOptions::new().append(true).open(&node.log)?;
            let mut cmd = storage_format_command(&broker.classpath(), &node.server_properties, &cluster_id, &log)?;
            cmd.spawn().with_context(|| format!("running {cmd:?}"))
        })
        .collect::<Result<Vec<_>>>()?;
    for (node, mut child) in paths.nodes.iter().zip(children) {
        let status = child.wait()?;
        if !status.success() {
            bail!("formatting node {}'s storage failed ({status}); {}", node.id, log_tail(&node.log, 30));
        }
    }
    eprintln!("==> kafka3: formatted {NODES} data directories for cluster {cluster_id}");
    Ok(())
}

fn spawn_node(node: &NodePaths, paths: &ClusterPaths, broker: &BrokerPaths) -> Result<Child> {
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&node.log)
        .with_context(|| format!("opening {}", node.log.display()))?;
    let logs_dir = format!("-Dkafka.logs.dir={}", node.data.parent().unwrap_or(&paths.dir).display());
    let mut cmd = JVM.command(&paths.log4j, &[logs_dir], &broker.classpath(), "kafka.Kafka");
    cmd.arg(&node.server_properties).current_dir(&paths.dir);
    spawn_detached(&mut cmd, log, &format!("Kafka node {}", node.id))
}

/// The node ids every node must list as brokers.
fn all_node_ids() -> Vec<i32> {
    (0..NODES as i32).collect()
}

/// Polls every node until each answers with all brokers registered, a node exits, or
/// [`READY_TIMEOUT`] passes.
fn wait_until_ready(env: &Kafka3Env, paths: &ClusterPaths, processes: &mut [NodeProcess]) -> Result<()> {
    let expected = all_node_ids();
    let mut exited = || {
        paths.nodes.iter().zip(processes.iter_mut()).find_map(|(node, process)| {
            let why = match process {
                NodeProcess::Started(child) => child_exited(child, "it"),
                NodeProcess::Running(pid) => (!node_is_ours(*pid, node)).then(|| "it exited".to_owned()),
            }?;
            let log = log_tail(&node.log, 40);
            Some(anyhow!("kafka3 node {} stopped before the cluster answered: {why}; {log}", node.id))
        })
    };
    let timed_out = |last_error: anyhow::Error| {
        let logs: Vec<String> = paths.nodes.iter().map(|node| log_tail(&node.log, 15)).collect();
        anyhow!(
            "the kafka3 cluster did not answer within {}s (last attempt: {last_error:#}); {}",
            READY_TIMEOUT.as_secs(),
            logs.join("\n")
        )
    };
    crate::services::probe::wait_until_ready(
        &mut exited,
        &mut || env.nodes.iter().try_for_each(|addr| probe_nodes(addr, None, &expected).map(drop)),
        &timed_out,
    )
}

/// Stops the nodes `up` started that still run (all at once, so that none waits for a quorum
/// the others already left), and removes the pid and env files.
pub(crate) fn down_kafka3() -> Result<()> {
    let paths = ClusterPaths::current()?;
    let running = running_nodes(&paths)?;
    if running.iter().all(Option::is_none) {
        eprintln!("==> kafka3: not running");
    } else {
        let started = Instant::now();
        let results: Vec<Result<()>> = std::thread::scope(|scope| {
            let stops: Vec<_> = paths
                .nodes
                .iter()
                .zip(&running)
                .filter_map(|(node, pid)| pid.map(|pid| (node.id, pid)))
                .map(|(id, pid)| {
                    eprintln!("==> kafka3: stopping node {id} (pid {pid})");
                    scope.spawn(move || stop_process(pid))
                })
                .collect();
            stops.into_iter().map(|h| h.join().unwrap_or_else(|_| bail!("a stopping thread panicked"))).collect()
        });
        results.into_iter().collect::<Result<()>>()?;
        eprintln!("==> kafka3: stopped in {:.1}s", started.elapsed().as_secs_f64());
    }
    for node in &paths.nodes {
        remove_file_if_exists(&node.pid)?;
    }
    remove_file_if_exists(&paths.env)
}

/// Prints, for each node, whether it runs and what it answers.
pub(crate) fn status_kafka3() -> Result<()> {
    let paths = ClusterPaths::current()?;
    let running = running_nodes(&paths)?;
    if running.iter().all(Option::is_none) {
        println!("kafka3: not running");
        return Ok(());
    }
    let up = running.iter().filter(|pid| pid.is_some()).count();
    println!("kafka3: {up} of {NODES} nodes running, Apache Kafka {}", super::config::KAFKA_VERSION);
    let ports = ports_from_configs(&paths).ok();
    let expected = all_node_ids();
    for (node, pid) in paths.nodes.iter().zip(&running) {
        let addr = ports.as_ref().map(|p| format!("127.0.0.1:{}", p[node.id].client));
        let Some(pid) = pid else {
            println!("  node {}: not running ({})", node.id, addr.as_deref().unwrap_or("?"));
            continue;
        };
        let memory = resident(*pid).map(|memory| format!(", {memory}")).unwrap_or_default();
        match addr {
            Some(addr) => match probe_nodes(&addr, None, &expected) {
                Ok(info) => println!("  node {}: pid {pid}{memory}, {addr} answers ({})", node.id, info.summary()),
                Err(e) => println!("  node {}: pid {pid}{memory}, {addr} does not answer: {e:#}", node.id),
            },
            None => println!("  node {}: pid {pid}{memory}, listeners unknown", node.id),
        }
    }
    match fs::read_to_string(&paths.env).ok().map(|text| Kafka3Env::parse(&text)) {
        Some(Ok(env)) => println!("  bootstrap {}", env.bootstrap()),
        _ => println!("  {} missing: the cluster has not answered since it last started", paths.env.display()),
    }
    println!("  env file  {}", paths.env.display());
    println!("  logs      {}/node-N/node.log", paths.dir.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::services::process::cmdline_runs;

    fn sample_ports() -> Vec<NodePorts> {
        vec![
            NodePorts { client: 40101, controller: 40102 },
            NodePorts { client: 40103, controller: 40104 },
            NodePorts { client: 40105, controller: 40106 },
        ]
    }

    fn props(text: &str) -> Vec<(&str, &str)> {
        text.lines().filter(|l| !l.starts_with('#')).filter_map(|l| l.split_once('=')).collect()
    }

    #[test]
    fn node_properties_describe_three_replicating_voters() {
        let paths = ClusterPaths::new(Path::new("/w"));
        let ports = sample_ports();
        let mut voters_seen = Vec::new();
        for node in &paths.nodes {
            let text = node_properties(node.id, &ports, &node.data);
            let props = props(&text);
            let get = |key: &str| props.iter().find(|(k, _)| *k == key).map(|(_, v)| *v).unwrap_or_default();
            let mut keys: Vec<&str> = props.iter().map(|(k, _)| *k).collect();
            let all = keys.len();
            keys.sort_unstable();
            keys.dedup();
            assert_eq!(keys.len(), all, "a key appears twice:\n{text}");

            assert_eq!(get("process.roles"), "broker,controller");
            assert_eq!(get("node.id"), node.id.to_string());
            let NodePorts { client, controller } = ports[node.id];
            assert_eq!(get("listeners"), format!("PLAINTEXT://127.0.0.1:{client},CONTROLLER://127.0.0.1:{controller}"));
            assert_eq!(get("advertised.listeners"), format!("PLAINTEXT://127.0.0.1:{client}"));
            assert_eq!(get("controller.listener.names"), "CONTROLLER");
            for key in [
                "default.replication.factor",
                "offsets.topic.replication.factor",
                "transaction.state.log.replication.factor",
                "share.coordinator.state.topic.replication.factor",
            ] {
                assert_eq!(get(key), "3", "{key}");
            }
            for key in ["min.insync.replicas", "transaction.state.log.min.isr", "share.coordinator.state.topic.min.isr"]
            {
                assert_eq!(get(key), "2", "{key}");
            }
            assert_eq!(get("unclean.leader.election.enable"), "false");
            assert_eq!(get("auto.create.topics.enable"), "false");
            let data = format!("/w/target/services/kafka3/node-{}/data", node.id);
            assert_eq!(get("log.dirs"), data);
            assert_eq!(get("metadata.log.dir"), data);
            assert_eq!(node_ports_from_config(&text), Some(ports[node.id]));
            voters_seen.push(get("controller.quorum.voters").to_owned());
        }
        assert!(
            voters_seen.iter().all(|v| *v == "0@127.0.0.1:40102,1@127.0.0.1:40104,2@127.0.0.1:40106"),
            "{voters_seen:?}"
        );
    }

    #[test]
    fn cluster_ports_are_distinct() {
        let ports = free_cluster_ports().expect("ports");
        assert_eq!(ports.len(), NODES);
        let mut all: Vec<u16> = ports.iter().flat_map(|p| [p.client, p.controller]).collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 2 * NODES, "{ports:?}");
        assert!(all.iter().all(|p| *p != 0));
    }

    #[test]
    fn paths_are_per_node_under_the_workspace_target_directory() {
        let paths = ClusterPaths::new(Path::new("/ws"));
        assert_eq!(paths.env, Path::new("/ws/target/services/kafka3.env"));
        assert_eq!(paths.nodes.len(), NODES);
        for (id, node) in paths.nodes.iter().enumerate() {
            assert_eq!(node.id, id);
            let dir = PathBuf::from(format!("/ws/target/services/kafka3/node-{id}"));
            for p in [&node.server_properties, &node.data, &node.log, &node.pid] {
                assert!(p.starts_with(&dir), "{}", p.display());
            }
        }
        let single = BrokerPaths::new(Path::new("/ws"));
        assert!(!paths.nodes[0].data.starts_with(&single.files.dir), "the cluster's data is not the single broker's");
    }

    #[test]
    fn env_file_round_trips_and_names_every_node() {
        let env = Kafka3Env::new(&sample_ports(), vec![11, 12, 13]);
        let text = env.render();
        assert_eq!(
            text,
            "KAFKA3_BOOTSTRAP=127.0.0.1:40101,127.0.0.1:40103,127.0.0.1:40105\n\
             KAFKA3_NODE0_BOOTSTRAP=127.0.0.1:40101\nKAFKA3_NODE0_PID=11\n\
             KAFKA3_NODE1_BOOTSTRAP=127.0.0.1:40103\nKAFKA3_NODE1_PID=12\n\
             KAFKA3_NODE2_BOOTSTRAP=127.0.0.1:40105\nKAFKA3_NODE2_PID=13\n"
        );
        assert_eq!(Kafka3Env::parse(&text).expect("parse"), env);
        assert!(Kafka3Env::parse("KAFKA3_BOOTSTRAP=127.0.0.1:1\n").is_err());
    }

    #[test]
    fn a_node_is_recognised_by_its_own_configuration() {
        let paths = ClusterPaths::new(Path::new("/ws"));
        let node1 = paths.nodes[1].server_properties.to_string_lossy().into_owned();
        let cmdline = format!("java\0-Xmx256m\0-cp\0/ws/target/services/kafka/lib/*\0kafka.Kafka\0{node1}\0");
        assert!(cmdline_runs(cmdline.as_bytes(), "kafka.Kafka", &paths.nodes[1].server_properties));
        assert!(!cmdline_runs(cmdline.as_bytes(), "kafka.Kafka", &paths.nodes[0].server_properties));
        let single = BrokerPaths::new(Path::new("/ws"));
        assert!(!cmdline_runs(cmdline.as_bytes(), "kafka.Kafka", &single.server_properties));
    }
}
