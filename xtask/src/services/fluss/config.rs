//! The clusters' files, jars and configuration: which cluster ([`Layout`]: the single `fluss`
//! or the three tablet servers of `fluss3`), its processes and where they keep their files, the
//! listener ports, the pom Maven resolves, `zoo.cfg` and the servers' `server.yaml`.

use crate::services::artifacts::{Jars, LOG4J_VERSION, pom_dependency, pom_xml as pom_xml_of};
use crate::services::config::{Gc, Jvm, ServiceFiles, log4j2_properties};
use crate::services::env::{SASL_PASSWORD, SASL_USERNAME};
use crate::services::process::{free_port_list, process_runs, write_atomic};
use anyhow::{Context, Result, bail};
use std::fs;
use std::path::{Path, PathBuf};

/// The Apache Fluss release the servers run (`org.apache.fluss:fluss-server`).
pub(crate) const FLUSS_VERSION: &str = "0.9.1-incubating";
/// The Apache ZooKeeper release (`org.apache.zookeeper:zookeeper`).
pub(crate) const ZOOKEEPER_VERSION: &str = "3.9.5";
/// ZooKeeper's default metrics provider needs Dropwizard Metrics; the version its parent pom names.
const DROPWIZARD_METRICS_VERSION: &str = "4.1.12.1";

/// The size in MiB at which a tablet server rolls a bucket's log segment
/// (`log.segment.file-size`; Fluss's default is 1 GiB); see "Segments and remote storage" in
/// `fluss/mod.rs`.
pub(super) const TABLET_SEGMENT_MIB: u64 = 4;
/// How often, in seconds, a tablet server copies rolled segments to the remote data directory
/// and deletes expired ones (`remote.log.task-interval-duration`; Fluss's default is 1 min).
pub(super) const REMOTE_LOG_TASK_INTERVAL_SECS: u64 = 1;

/// In a replicated cluster, how long in seconds a server's ZooKeeper session outlives its last
/// heartbeat (`zookeeper.client.session-timeout`; Fluss asks for 60 s, which ZooKeeper caps at
/// 40 s with its tick of 2 s), and so how soon the coordinator sees that a killed tablet server
/// is gone and moves its buckets' leadership; and how long a follower may lag before its leader
/// drops it from the in-sync replicas (`log.replica.max-lag-time`, default 30 s), holding up the
/// writes that wait for all of them until then. Kafka's equivalents in `kafka3` are about 10 s
/// too.
const FAILOVER_SECS: u64 = 10;
/// In a replicated cluster, how many in-sync replicas a write with `acks=all` (the Fluss
/// client's default) needs (`log.replica.min-in-sync-replicas-number`, default 1): with 2, an
/// acknowledged write is on two tablet servers, and the cluster takes writes with one of three
/// down, as `kafka3` does.
const MIN_IN_SYNC_REPLICAS: usize = 2;
/// In a replicated cluster, how long in milliseconds a leader holds a follower's fetch that
/// finds nothing new (`log.replica.fetch.wait-max-time`, default 500 ms). Sequential `acks=all`
/// appends on Fluss 0.9.1 took about that long (the write counts as replicated once a later
/// follower fetch reports it): with the default, most took 450-500 ms; with 20 ms, 20-45 ms.
/// Each follower sends at most one such fetch per leader server per wait.
const REPLICA_FETCH_WAIT_MS: u64 = 20;

/// The JVM of ZooKeeper, in either cluster.
pub(super) const ZOOKEEPER_JVM: Jvm = Jvm { max_heap: "128m", initial_heap: "32m", gc: Gc::Serial };

/// Which cluster: its name (its directory under `target/services/` and its env file), the
/// prefix of its env file's keys, how many tablet servers it runs (and so how many times it
/// replicates a table), and the JVM of each Fluss server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Layout {
    pub(super) name: &'static str,
    pub(super) prefix: &'static str,
    pub(super) tablets: usize,
    pub(super) server_jvm: Jvm,
}

const FLUSS_JVM: Jvm = Jvm { max_heap: "512m", initial_heap: "128m", gc: Gc::G1 };
/// `services up fluss`: one tablet server, tables replicated once.
pub(super) const SINGLE: Layout = Layout { name: "fluss", prefix: "FLUSS", tablets: 1, server_jvm: FLUSS_JVM };
/// `services up fluss3`: three tablet servers, tables replicated three times; a smaller heap
/// per server, so that its four Fluss servers together take 1.5 GiB of heap at most.
pub(super) const THREE: Layout =
    Layout { name: "fluss3", prefix: "FLUSS3", tablets: 3, server_jvm: Jvm { max_heap: "384m", ..FLUSS_JVM } };

impl Layout {
    /// Whether it replicates: a cluster of several tablet servers, which keeps its data when one
    /// of them stops, and brings that one back on its data (`up` and `restart-node`) rather than
    /// starting afresh as the single cluster does.
    pub(super) fn replicated(self) -> bool {
        self.tablets > 1
    }

    /// What tablet server `id`'s files are called: `tablet` in the single cluster, `tablet-N`
    /// in a replicated one.
    pub(super) fn tablet_name(self, id: usize) -> String {
        if self.replicated() { format!("tablet-{id}") } else { "tablet".to_owned() }
    }

    /// The env file's key of tablet server `id`'s pid: `FLUSS_TABLET_PID` in the single
    /// cluster, `FLUSS3_TABLETN_PID` in a replicated one.
    pub(super) fn tablet_pid_var(self, id: usize) -> String {
        let n = if self.replicated() { id.to_string() } else { String::new() };
        format!("{}_TABLET{n}_PID", self.prefix)
    }
}

/// The processes of a cluster: ZooKeeper, the coordinator, and tablet server `N` (its
/// `tablet-server.id`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    ZooKeeper,
    Coordinator,
    Tablet(usize),
}

impl Role {
    /// The name in progress lines and errors.
    pub(super) fn label(self) -> String {
        match self {
            Role::ZooKeeper => "ZooKeeper server".to_owned(),
            Role::Coordinator => "coordinator".to_owned(),
            Role::Tablet(id) => format!("tablet server {id}"),
        }
    }

    pub(super) fn main_class(self) -> &'static str {
        match self {
            Role::ZooKeeper => "org.apache.zookeeper.server.ZooKeeperServerMain",
            Role::Coordinator => "org.apache.fluss.server.coordinator.CoordinatorServer",
            Role::Tablet(_) => "org.apache.fluss.server.tablet.TabletServer",
        }
    }
}

/// A tablet server's files: its configuration directory (`--configDir`, holding its
/// `server.yaml`) and its `data.dir`.
#[derive(Debug, Clone)]
pub(super) struct TabletPaths {
    pub(super) conf: PathBuf,
    pub(super) data: PathBuf,
}

/// Where a cluster keeps its files, all under `target/services/NAME/` but the jars, which both
/// clusters take from `target/services/fluss/lib/`.
#[derive(Debug, Clone)]
pub(super) struct Paths {
    pub(super) layout: Layout,
    pub(super) files: ServiceFiles,
    /// The single cluster's files, whose `pom.xml` and `lib/` are both clusters' jars.
    pub(super) jars: ServiceFiles,
    pub(super) zoo_cfg: PathBuf,
    pub(super) coordinator_conf: PathBuf,
    pub(super) plugins: PathBuf,
    pub(super) data: PathBuf,
    pub(super) zookeeper_data: PathBuf,
    pub(super) remote_data: PathBuf,
    /// By tablet server id.
    pub(super) tablets: Vec<TabletPaths>,
}

impl Paths {
    pub(super) fn new(workspace_root: &Path, layout: Layout) -> Self {
        let files = ServiceFiles::new(workspace_root, layout.name);
        let data = files.dir.join("data");
        let tablets = (0..layout.tablets)
            .map(|id| TabletPaths {
                conf: files.config.join(layout.tablet_name(id)),
                data: data.join(layout.tablet_name(id)),
            })
            .collect();
        Self {
            layout,
            jars: ServiceFiles::new(workspace_root, SINGLE.name),
            zoo_cfg: files.config.join("zookeeper").join("zoo.cfg"),
            coordinator_conf: files.config.join("coordinator"),
            plugins: files.dir.join("plugins"),
            zookeeper_data: data.join("zookeeper"),
            remote_data: data.join("remote"),
            tablets,
            data,
            files,
        }
    }

    pub(super) fn current(layout: Layout) -> Result<Self> {
        Ok(Self::new(&crate::services::workspace_root()?, layout))
    }

    pub(super) fn classpath(&self) -> String {
        self.jars.classpath()
    }

    /// Every process of the cluster, in start order: ZooKeeper, the coordinator, the tablet
    /// servers by id.
    pub(super) fn roles(&self) -> Vec<Role> {
        [Role::ZooKeeper, Role::Coordinator].into_iter().chain((0..self.layout.tablets).map(Role::Tablet)).collect()
    }

    /// What the process's pid and log files are called: `zookeeper`, `coordinator`, and
    /// [`Layout::tablet_name`].
    pub(super) fn name(&self, role: Role) -> String {
        match role {
            Role::ZooKeeper => "zookeeper".to_owned(),
            Role::Coordinator => "coordinator".to_owned(),
            Role::Tablet(id) => self.layout.tablet_name(id),
        }
    }

    pub(super) fn pid(&self, role: Role) -> PathBuf {
        self.files.dir.join(format!("{}.pid", self.name(role)))
    }

    pub(super) fn log(&self, role: Role) -> PathBuf {
        self.files.dir.join(format!("{}.log", self.name(role)))
    }

    /// The argument that identifies our process of `role` on its command line: the ZooKeeper
    /// configuration file, or a Fluss server's configuration directory.
    pub(super) fn config_arg(&self, role: Role) -> &Path {
        match role {
            Role::ZooKeeper => &self.zoo_cfg,
            Role::Coordinator => &self.coordinator_conf,
            Role::Tablet(id) => &self.tablets[id].conf,
        }
    }

    /// A Fluss server's `server.yaml`.
    fn server_yaml(&self, role: Role) -> PathBuf {
        self.config_arg(role).join("server.yaml")
    }

    pub(super) fn is_ours(&self, role: Role, pid: u32) -> bool {
        process_runs(pid, role.main_class(), self.config_arg(role))
    }
}

/// A Fluss server's two listener ports: `INTERNAL` (plaintext) and `CLIENT` (SASL/PLAIN).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Listeners {
    pub(super) plain: u16,
    pub(super) sasl: u16,
}

impl Listeners {
    /// `127.0.0.1:PORT` of the plaintext listener.
    pub(super) fn plain_addr(self) -> String {
        format!("127.0.0.1:{}", self.plain)
    }
}

/// The listener ports on 127.0.0.1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Ports {
    pub(super) zookeeper: u16,
    pub(super) coordinator: Listeners,
    /// By tablet server id.
    pub(super) tablets: Vec<Listeners>,
}

impl Ports {
    /// Free ports for ZooKeeper, the coordinator and `tablets` tablet servers, all distinct.
    pub(super) fn free(tablets: usize) -> Result<Self> {
        let ports = free_port_list(3 + 2 * tablets)?;
        let [zookeeper, plain, sasl, rest @ ..] = &ports[..] else { bail!("expected {} ports", 3 + 2 * tablets) };
        Ok(Self {
            zookeeper: *zookeeper,
            coordinator: Listeners { plain: *plain, sasl: *sasl },
            tablets: rest.chunks(2).map(|pair| Listeners { plain: pair[0], sasl: pair[1] }).collect(),
        })
    }

    /// The ports back from the configuration files that [`write_configs`] wrote.
    pub(super) fn read(paths: &Paths) -> Option<Self> {
        let zoo = fs::read_to_string(&paths.zoo_cfg).ok()?;
        let zookeeper = zoo.lines().find_map(|l| l.strip_prefix("clientPort="))?.trim().parse().ok()?;
        let listeners = |role: Role| -> Option<Listeners> {
            let yaml = fs::read_to_string(paths.server_yaml(role)).ok()?;
            Some(Listeners { plain: listener_port(&yaml, "INTERNAL")?, sasl: listener_port(&yaml, "CLIENT")? })
        };
        Some(Self {
            zookeeper,
            coordinator: listeners(Role::Coordinator)?,
            tablets: (0..paths.layout.tablets).map(|id| listeners(Role::Tablet(id))).collect::<Option<_>>()?,
        })
    }

    /// The listeners of a Fluss server (the coordinator's for ZooKeeper, which has none).
    pub(super) fn of(&self, role: Role) -> Listeners {
        match role {
            Role::Tablet(id) => self.tablets[id],
            Role::ZooKeeper | Role::Coordinator => self.coordinator,
        }
    }
}

/// The port of listener `name` in the `bind.listeners` line of a `server.yaml`.
fn listener_port(yaml: &str, name: &str) -> Option<u16> {
    crate::services::config::listener_port(yaml, "bind.listeners:", name)
}

/// A project whose runtime dependencies are the Fluss server, ZooKeeper and a logging backend.
fn pom_xml() -> String {
    let mut deps = String::new();
    deps += &pom_dependency("org.apache.fluss", "fluss-server", FLUSS_VERSION, &[]);
    // The native TLS libraries for every platform are the bulk of ZooKeeper's dependencies, and
    // TLS is not used here; logback would compete with the log4j binding.
    deps += &pom_dependency(
        "org.apache.zookeeper",
        "zookeeper",
        ZOOKEEPER_VERSION,
        &[("io.netty", "netty-tcnative-boringssl-static"), ("ch.qos.logback", "logback-classic")],
    );
    deps += &pom_dependency("io.dropwizard.metrics", "metrics-core", DROPWIZARD_METRICS_VERSION, &[]);
    // The server jar bundles the slf4j 1.7 API, so the binding is the one for slf4j 1.x.
    deps += &pom_dependency("org.apache.logging.log4j", "log4j-slf4j-impl", LOG4J_VERSION, &[]);
    deps += &pom_dependency("org.apache.logging.log4j", "log4j-core", LOG4J_VERSION, &[]);
    pom_xml_of("fluss", "the local cluster", "fluss-cluster", FLUSS_VERSION, &deps)
}

/// The jars in `target/services/fluss/lib/`, resolved by Maven unless they are there.
pub(super) fn ensure_jars(paths: &Paths) -> Result<()> {
    fs::create_dir_all(&paths.jars.dir).with_context(|| format!("creating {}", paths.jars.dir.display()))?;
    Jars {
        service: paths.layout.name,
        what: "the Fluss server and ZooKeeper jars",
        root: &format!("org.apache.fluss:fluss-server:{FLUSS_VERSION}"),
        pom: &pom_xml(),
        files: &paths.jars,
        marker_jar: &format!("fluss-server-{FLUSS_VERSION}.jar"),
    }
    .ensure()
}

pub(super) fn write_configs(paths: &Paths, ports: &Ports) -> Result<()> {
    let zoo_dir = paths.zoo_cfg.parent().unwrap_or(&paths.files.config);
    for dir in [zoo_dir, &paths.coordinator_conf].into_iter().chain(paths.tablets.iter().map(|t| t.conf.as_path())) {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let log4j = format!(
        "# Generated by `cargo xtask services up {}`. Each process's stdout goes to its own log.",
        paths.layout.name
    );
    write_atomic(&paths.files.log4j, &log4j2_properties(&log4j, ""))?;
    write_atomic(&paths.zoo_cfg, &zoo_cfg(paths.layout, ports.zookeeper, &paths.zookeeper_data))?;
    for role in fluss_servers(paths) {
        write_atomic(&paths.server_yaml(role), &server_yaml(role, ports, paths))?;
    }
    Ok(())
}

/// The coordinator and the tablet servers.
fn fluss_servers(paths: &Paths) -> Vec<Role> {
    paths.roles().into_iter().filter(|role| *role != Role::ZooKeeper).collect()
}

/// Whether the Fluss servers' configuration files are what [`write_configs`] writes now for
/// `ports`: a cluster started by an earlier xtask with other settings is not reused.
pub(super) fn configs_are_current(paths: &Paths, ports: &Ports) -> bool {
    fluss_servers(paths).into_iter().all(|role| {
        fs::read_to_string(paths.server_yaml(role)).is_ok_and(|yaml| yaml == server_yaml(role, ports, paths))
    })
}

fn zoo_cfg(layout: Layout, port: u16, data: &Path) -> String {
    format!(
        "# Generated by `cargo xtask services up {}`; rewritten on every fresh start.\n\
         tickTime=2000\n\
         dataDir={}\n\
         clientPort={port}\n\
         clientPortAddress=127.0.0.1\n\
         maxClientCnxns=0\n\
         admin.enableServer=false\n\
         4lw.commands.whitelist=ruok,srvr\n",
        layout.name,
        data.display()
    )
}

/// The `server.yaml` of the coordinator or a tablet server. Every server names the default
/// replication factor: the number of tablet servers.
pub(super) fn server_yaml(role: Role, ports: &Ports, paths: &Paths) -> String {
    let Listeners { plain, sasl } = ports.of(role);
    let mut yaml = format!(
        "# Generated by `cargo xtask services up {name}`; rewritten on every fresh start.\n\
         zookeeper.address: 127.0.0.1:{zookeeper}\n\
         bind.listeners: INTERNAL://127.0.0.1:{plain}, CLIENT://127.0.0.1:{sasl}\n\
         internal.listener.name: INTERNAL\n\
         security.protocol.map: CLIENT:SASL\n\
         security.sasl.enabled.mechanisms: PLAIN\n\
         security.sasl.plain.jaas.config: org.apache.fluss.security.auth.sasl.plain.PlainLoginModule required \
         user_{SASL_USERNAME}=\"{SASL_PASSWORD}\";\n\
         default.bucket.number: 1\n\
         default.replication.factor: {replicas}\n\
         remote.data.dir: {remote}\n",
        name = paths.layout.name,
        zookeeper = ports.zookeeper,
        replicas = paths.layout.tablets,
        remote = paths.remote_data.display(),
    );
    if paths.layout.replicated() {
        yaml += &format!("zookeeper.client.session-timeout: {FAILOVER_SECS}s\n");
    }
    if let Role::Tablet(id) = role {
        yaml += &format!(
            "tablet-server.id: {id}\n\
             data.dir: {}\n\
             log.segment.file-size: {TABLET_SEGMENT_MIB}mb\n\
             remote.log.task-interval-duration: {REMOTE_LOG_TASK_INTERVAL_SECS}s\n",
            paths.tablets[id].data.display()
        );
        if paths.layout.replicated() {
            yaml += &format!(
                "log.replica.max-lag-time: {FAILOVER_SECS}s\n\
                 log.replica.min-in-sync-replicas-number: {MIN_IN_SYNC_REPLICAS}\n\
                 log.replica.fetch.wait-max-time: {REPLICA_FETCH_WAIT_MS}ms\n"
            );
        }
    }
    yaml
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::services::process::cmdline_runs;

    fn sample_ports(tablets: usize) -> Ports {
        Ports {
            zookeeper: 40000,
            coordinator: Listeners { plain: 40001, sasl: 40002 },
            tablets: (0..tablets as u16).map(|id| Listeners { plain: 40003 + 2 * id, sasl: 40004 + 2 * id }).collect(),
        }
    }

    fn get(yaml: &str, key: &str) -> String {
        yaml.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(": ")).unwrap_or_default().to_owned()
    }

    #[test]
    fn paths_live_under_the_workspace_target_directory() {
        let paths = Paths::new(Path::new("/ws"), SINGLE);
        assert_eq!(paths.files.env, Path::new("/ws/target/services/fluss.env"));
        let tablet = &paths.tablets[0];
        for p in [&paths.files.lib, &paths.data, &paths.zoo_cfg, &tablet.data, &paths.remote_data, &paths.files.pom] {
            assert!(p.starts_with("/ws/target/services/fluss"), "{}", p.display());
        }
        assert!(paths.zookeeper_data.starts_with(&paths.data) && paths.remote_data.starts_with(&paths.data));
        assert_eq!(paths.roles(), [Role::ZooKeeper, Role::Coordinator, Role::Tablet(0)]);
        assert_eq!(paths.pid(Role::Tablet(0)), Path::new("/ws/target/services/fluss/tablet.pid"));
        assert_eq!(paths.log(Role::ZooKeeper), Path::new("/ws/target/services/fluss/zookeeper.log"));
        assert_eq!(tablet.conf, Path::new("/ws/target/services/fluss/config/tablet"));
        assert_eq!(tablet.data, Path::new("/ws/target/services/fluss/data/tablet"));
        assert_eq!(paths.classpath(), "/ws/target/services/fluss/lib/*");
        assert_eq!(SINGLE.tablet_pid_var(0), "FLUSS_TABLET_PID");
    }

    #[test]
    fn server_yaml_describes_two_listeners_and_sasl() {
        let paths = Paths::new(Path::new("/ws"), SINGLE);
        let ports = sample_ports(1);
        let coordinator = server_yaml(Role::Coordinator, &ports, &paths);
        let tablet = server_yaml(Role::Tablet(0), &ports, &paths);
        assert_eq!(get(&coordinator, "zookeeper.address"), "127.0.0.1:40000");
        assert_eq!(get(&coordinator, "bind.listeners"), "INTERNAL://127.0.0.1:40001, CLIENT://127.0.0.1:40002");
        assert_eq!(get(&tablet, "bind.listeners"), "INTERNAL://127.0.0.1:40003, CLIENT://127.0.0.1:40004");
        assert_eq!(get(&tablet, "tablet-server.id"), "0");
        assert_eq!(get(&tablet, "data.dir"), "/ws/target/services/fluss/data/tablet");
        assert_eq!(get(&tablet, "log.segment.file-size"), "4mb");
        assert_eq!(get(&tablet, "remote.log.task-interval-duration"), "1s");
        assert_eq!(get(&coordinator, "tablet-server.id"), "");
        assert_eq!(get(&coordinator, "log.segment.file-size"), "");
        for yaml in [&coordinator, &tablet] {
            assert_eq!(get(yaml, "security.protocol.map"), "CLIENT:SASL");
            assert_eq!(get(yaml, "internal.listener.name"), "INTERNAL");
            assert_eq!(
                get(yaml, "security.sasl.plain.jaas.config"),
                "org.apache.fluss.security.auth.sasl.plain.PlainLoginModule required \
                 user_actionstate=\"actionstate-secret\";"
            );
            assert_eq!(get(yaml, "remote.data.dir"), "/ws/target/services/fluss/data/remote");
            assert_eq!(get(yaml, "default.replication.factor"), "1");
            for key in ["zookeeper.client.session-timeout", "log.replica.min-in-sync-replicas-number"] {
                assert_eq!(get(yaml, key), "", "the single cluster keeps Fluss's default {key}");
            }
        }
        assert_eq!(listener_port(&tablet, "CLIENT"), Some(40004));
        assert_eq!(listener_port(&tablet, "OTHER"), None);
    }

    #[test]
    fn free_ports_are_distinct_for_every_server() {
        let ports = Ports::free(3).expect("ports");
        assert_eq!(ports.tablets.len(), 3);
        let mut all: Vec<u16> = [ports.zookeeper, ports.coordinator.plain, ports.coordinator.sasl]
            .into_iter()
            .chain(ports.tablets.iter().flat_map(|l| [l.plain, l.sasl]))
            .collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 9, "{ports:?}");
    }

    #[test]
    fn ports_read_back_from_the_generated_configs() {
        for (layout, tablets) in [(SINGLE, 1), (THREE, 3)] {
            let dir = std::env::temp_dir().join(format!("xtask-{}-ports-{}", layout.name, std::process::id()));
            let paths = Paths::new(&dir, layout);
            let ports = sample_ports(tablets);
            write_configs(&paths, &ports).expect("write configs");
            assert_eq!(Ports::read(&paths), Some(ports.clone()));
            assert!(configs_are_current(&paths, &ports));
            let mut other = ports.clone();
            other.tablets[tablets - 1].plain = 40100;
            assert!(!configs_are_current(&paths, &other), "another port is another configuration");
            let tablet_yaml = paths.tablets[0].conf.join("server.yaml");
            let yaml = fs::read_to_string(&tablet_yaml).expect("server.yaml");
            fs::write(&tablet_yaml, yaml.replace("log.segment.file-size: 4mb\n", "")).expect("rewrite");
            assert!(!configs_are_current(&paths, &ports), "a cluster started with other segments is stale");
            let zoo = fs::read_to_string(&paths.zoo_cfg).expect("zoo.cfg");
            assert!(
                zoo.contains("admin.enableServer=false\n") && zoo.contains("clientPortAddress=127.0.0.1\n"),
                "{zoo}"
            );
            fs::remove_dir_all(&dir).expect("clean up");
        }
    }

    #[test]
    fn pom_pins_every_artifact() {
        let pom = pom_xml();
        for needle in [
            "<artifactId>fluss-server</artifactId>",
            "<artifactId>zookeeper</artifactId>",
            "<artifactId>metrics-core</artifactId>",
            "<artifactId>log4j-slf4j-impl</artifactId>",
            "<artifactId>netty-tcnative-boringssl-static</artifactId>",
            &format!("<version>{FLUSS_VERSION}</version>"),
            &format!("<version>{ZOOKEEPER_VERSION}</version>"),
        ] {
            assert!(pom.contains(needle), "pom lacks {needle}:\n{pom}");
        }
        assert!(!pom.contains("LATEST") && !pom.contains("RELEASE") && !pom.contains('['), "unpinned version:\n{pom}");
    }

    #[test]
    fn processes_are_recognised_by_main_class_and_config() {
        let paths = Paths::new(Path::new("/ws"), SINGLE);
        let tablet = b"java\0-Xmx512m\0-cp\0/ws/target/services/fluss/lib/*\0\
                       org.apache.fluss.server.tablet.TabletServer\0--configDir\0/ws/target/services/fluss/config/tablet\0";
        let role = Role::Tablet(0);
        assert!(cmdline_runs(tablet, role.main_class(), paths.config_arg(role)));
        assert!(!cmdline_runs(tablet, Role::Coordinator.main_class(), paths.config_arg(Role::Coordinator)));
        assert!(!cmdline_runs(tablet, role.main_class(), Path::new("/elsewhere")));
        let three = Paths::new(Path::new("/ws"), THREE);
        for id in 0..3 {
            assert!(!cmdline_runs(tablet, role.main_class(), three.config_arg(Role::Tablet(id))));
        }
        let tablet1 = b"java\0org.apache.fluss.server.tablet.TabletServer\0--configDir\0\
                        /ws/target/services/fluss3/config/tablet-1\0";
        assert!(cmdline_runs(tablet1, role.main_class(), three.config_arg(Role::Tablet(1))));
        assert!(!cmdline_runs(tablet1, role.main_class(), three.config_arg(Role::Tablet(0))));
    }
}
