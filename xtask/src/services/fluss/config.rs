//! The cluster's files, jars and configuration: the three processes and where they keep their
//! files, the listener ports, the pom Maven resolves, `zoo.cfg` and the servers' `server.yaml`.

use crate::services::artifacts::{Jars, LOG4J_VERSION, pom_dependency, pom_xml as pom_xml_of};
use crate::services::config::{ServiceFiles, log4j2_properties};
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

/// The tablet server's id.
pub(super) const TABLET_SERVER_ID: i32 = 0;
/// The size in MiB at which the tablet server rolls a bucket's log segment
/// (`log.segment.file-size`; Fluss's default is 1 GiB); see "Segments and remote storage" in
/// `fluss/mod.rs`.
pub(super) const TABLET_SEGMENT_MIB: u64 = 4;
/// How often, in seconds, the tablet server copies rolled segments to the remote data directory
/// and deletes expired ones (`remote.log.task-interval-duration`; Fluss's default is 1 min).
pub(super) const REMOTE_LOG_TASK_INTERVAL_SECS: u64 = 1;

/// The three processes of the cluster, in start order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    ZooKeeper,
    Coordinator,
    Tablet,
}

impl Role {
    pub(super) const ALL: [Role; 3] = [Role::ZooKeeper, Role::Coordinator, Role::Tablet];

    pub(super) fn name(self) -> &'static str {
        match self {
            Role::ZooKeeper => "zookeeper",
            Role::Coordinator => "coordinator",
            Role::Tablet => "tablet",
        }
    }

    /// The name in progress lines and errors.
    pub(super) fn label(self) -> &'static str {
        match self {
            Role::ZooKeeper => "ZooKeeper server",
            Role::Coordinator => "coordinator",
            Role::Tablet => "tablet server",
        }
    }

    pub(super) fn main_class(self) -> &'static str {
        match self {
            Role::ZooKeeper => "org.apache.zookeeper.server.ZooKeeperServerMain",
            Role::Coordinator => "org.apache.fluss.server.coordinator.CoordinatorServer",
            Role::Tablet => "org.apache.fluss.server.tablet.TabletServer",
        }
    }
}

/// Where the cluster keeps its files.
#[derive(Debug, Clone)]
pub(super) struct Paths {
    pub(super) files: ServiceFiles,
    pub(super) zoo_cfg: PathBuf,
    pub(super) coordinator_conf: PathBuf,
    pub(super) tablet_conf: PathBuf,
    pub(super) plugins: PathBuf,
    pub(super) data: PathBuf,
    pub(super) zookeeper_data: PathBuf,
    pub(super) tablet_data: PathBuf,
    pub(super) remote_data: PathBuf,
}

impl Paths {
    fn new(workspace_root: &Path) -> Self {
        let files = ServiceFiles::new(workspace_root, "fluss");
        let data = files.dir.join("data");
        Self {
            zoo_cfg: files.config.join("zookeeper").join("zoo.cfg"),
            coordinator_conf: files.config.join("coordinator"),
            tablet_conf: files.config.join("tablet"),
            plugins: files.dir.join("plugins"),
            zookeeper_data: data.join("zookeeper"),
            tablet_data: data.join("tablet"),
            remote_data: data.join("remote"),
            data,
            files,
        }
    }

    pub(super) fn current() -> Result<Self> {
        Ok(Self::new(&crate::workspace_root()?))
    }

    pub(super) fn classpath(&self) -> String {
        self.files.classpath()
    }

    pub(super) fn pid(&self, role: Role) -> PathBuf {
        self.files.dir.join(format!("{}.pid", role.name()))
    }

    pub(super) fn log(&self, role: Role) -> PathBuf {
        self.files.dir.join(format!("{}.log", role.name()))
    }

    /// The argument that identifies our process of `role` on its command line: the ZooKeeper
    /// configuration file, or a Fluss server's configuration directory.
    pub(super) fn config_arg(&self, role: Role) -> &Path {
        match role {
            Role::ZooKeeper => &self.zoo_cfg,
            Role::Coordinator => &self.coordinator_conf,
            Role::Tablet => &self.tablet_conf,
        }
    }

    pub(super) fn is_ours(&self, role: Role, pid: u32) -> bool {
        process_runs(pid, role.main_class(), self.config_arg(role))
    }
}

/// The listener ports on 127.0.0.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Ports {
    pub(super) zookeeper: u16,
    pub(super) coordinator: u16,
    pub(super) coordinator_sasl: u16,
    pub(super) tablet: u16,
    pub(super) tablet_sasl: u16,
}

impl Ports {
    pub(super) fn free() -> Result<Self> {
        match free_port_list(5)?[..] {
            [zookeeper, coordinator, coordinator_sasl, tablet, tablet_sasl] => {
                Ok(Self { zookeeper, coordinator, coordinator_sasl, tablet, tablet_sasl })
            }
            ref other => bail!("expected five ports, got {other:?}"),
        }
    }

    /// The ports back from the configuration files that [`write_configs`] wrote.
    pub(super) fn read(paths: &Paths) -> Option<Self> {
        let zoo = fs::read_to_string(&paths.zoo_cfg).ok()?;
        let zookeeper = zoo.lines().find_map(|l| l.strip_prefix("clientPort="))?.trim().parse().ok()?;
        let coordinator = fs::read_to_string(paths.coordinator_conf.join("server.yaml")).ok()?;
        let tablet = fs::read_to_string(paths.tablet_conf.join("server.yaml")).ok()?;
        Some(Self {
            zookeeper,
            coordinator: listener_port(&coordinator, "INTERNAL")?,
            coordinator_sasl: listener_port(&coordinator, "CLIENT")?,
            tablet: listener_port(&tablet, "INTERNAL")?,
            tablet_sasl: listener_port(&tablet, "CLIENT")?,
        })
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

pub(super) fn ensure_jars(paths: &Paths) -> Result<()> {
    Jars {
        service: "fluss",
        what: "the Fluss server and ZooKeeper jars",
        root: &format!("org.apache.fluss:fluss-server:{FLUSS_VERSION}"),
        pom: &pom_xml(),
        files: &paths.files,
        marker_jar: &format!("fluss-server-{FLUSS_VERSION}.jar"),
    }
    .ensure()
}

pub(super) fn write_configs(paths: &Paths, ports: Ports) -> Result<()> {
    for dir in [paths.zoo_cfg.parent().unwrap_or(&paths.files.config), &paths.coordinator_conf, &paths.tablet_conf] {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let log4j = "# Generated by `cargo xtask services up fluss`. Each process's stdout goes to its own log.";
    write_atomic(&paths.files.log4j, &log4j2_properties(log4j, ""))?;
    write_atomic(&paths.zoo_cfg, &zoo_cfg(ports.zookeeper, &paths.zookeeper_data))?;
    write_atomic(&paths.coordinator_conf.join("server.yaml"), &server_yaml(Role::Coordinator, ports, paths))?;
    write_atomic(&paths.tablet_conf.join("server.yaml"), &server_yaml(Role::Tablet, ports, paths))
}

/// Whether the Fluss servers' configuration files are what [`write_configs`] writes now for
/// `ports`: a cluster started by an earlier xtask with other settings is not reused.
pub(super) fn configs_are_current(paths: &Paths, ports: Ports) -> bool {
    [(Role::Coordinator, &paths.coordinator_conf), (Role::Tablet, &paths.tablet_conf)].into_iter().all(|(role, dir)| {
        fs::read_to_string(dir.join("server.yaml")).is_ok_and(|yaml| yaml == server_yaml(role, ports, paths))
    })
}

fn zoo_cfg(port: u16, data: &Path) -> String {
    format!(
        "# Generated by `cargo xtask services up fluss`; rewritten on every start.\n\
         tickTime=2000\n\
         dataDir={}\n\
         clientPort={port}\n\
         clientPortAddress=127.0.0.1\n\
         maxClientCnxns=0\n\
         admin.enableServer=false\n\
         4lw.commands.whitelist=ruok,srvr\n",
        data.display()
    )
}

/// The `server.yaml` of the coordinator or the tablet server.
fn server_yaml(role: Role, ports: Ports, paths: &Paths) -> String {
    let (plain, sasl) = match role {
        Role::Tablet => (ports.tablet, ports.tablet_sasl),
        Role::ZooKeeper | Role::Coordinator => (ports.coordinator, ports.coordinator_sasl),
    };
    let mut yaml = format!(
        "# Generated by `cargo xtask services up fluss`; rewritten on every start.\n\
         zookeeper.address: 127.0.0.1:{zookeeper}\n\
         bind.listeners: INTERNAL://127.0.0.1:{plain}, CLIENT://127.0.0.1:{sasl}\n\
         internal.listener.name: INTERNAL\n\
         security.protocol.map: CLIENT:SASL\n\
         security.sasl.enabled.mechanisms: PLAIN\n\
         security.sasl.plain.jaas.config: org.apache.fluss.security.auth.sasl.plain.PlainLoginModule required \
         user_{SASL_USERNAME}=\"{SASL_PASSWORD}\";\n\
         default.bucket.number: 1\n\
         default.replication.factor: 1\n\
         remote.data.dir: {remote}\n",
        zookeeper = ports.zookeeper,
        remote = paths.remote_data.display(),
    );
    if role == Role::Tablet {
        yaml += &format!(
            "tablet-server.id: {TABLET_SERVER_ID}\n\
             data.dir: {}\n\
             log.segment.file-size: {TABLET_SEGMENT_MIB}mb\n\
             remote.log.task-interval-duration: {REMOTE_LOG_TASK_INTERVAL_SECS}s\n",
            paths.tablet_data.display()
        );
    }
    yaml
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::services::process::cmdline_runs;

    fn sample_ports() -> Ports {
        Ports { zookeeper: 40000, coordinator: 40001, coordinator_sasl: 40002, tablet: 40003, tablet_sasl: 40004 }
    }

    #[test]
    fn paths_live_under_the_workspace_target_directory() {
        let paths = Paths::new(Path::new("/ws"));
        assert_eq!(paths.files.env, Path::new("/ws/target/services/fluss.env"));
        for p in
            [&paths.files.lib, &paths.data, &paths.zoo_cfg, &paths.tablet_data, &paths.remote_data, &paths.files.pom]
        {
            assert!(p.starts_with("/ws/target/services/fluss"), "{}", p.display());
        }
        assert!(paths.zookeeper_data.starts_with(&paths.data) && paths.remote_data.starts_with(&paths.data));
        assert_eq!(paths.pid(Role::Tablet), Path::new("/ws/target/services/fluss/tablet.pid"));
        assert_eq!(paths.log(Role::ZooKeeper), Path::new("/ws/target/services/fluss/zookeeper.log"));
        assert_eq!(paths.classpath(), "/ws/target/services/fluss/lib/*");
    }

    #[test]
    fn server_yaml_describes_two_listeners_and_sasl() {
        let paths = Paths::new(Path::new("/ws"));
        let coordinator = server_yaml(Role::Coordinator, sample_ports(), &paths);
        let tablet = server_yaml(Role::Tablet, sample_ports(), &paths);
        let get = |yaml: &str, key: &str| {
            yaml.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(": ")).unwrap_or_default().to_owned()
        };
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
        }
        assert_eq!(listener_port(&tablet, "CLIENT"), Some(40004));
        assert_eq!(listener_port(&tablet, "OTHER"), None);
    }

    #[test]
    fn ports_read_back_from_the_generated_configs() {
        let dir = std::env::temp_dir().join(format!("xtask-fluss-ports-{}", std::process::id()));
        let paths = Paths::new(&dir);
        write_configs(&paths, sample_ports()).expect("write configs");
        assert_eq!(Ports::read(&paths), Some(sample_ports()));
        assert!(configs_are_current(&paths, sample_ports()));
        let other = Ports { tablet: 40005, ..sample_ports() };
        assert!(!configs_are_current(&paths, other), "another port is another configuration");
        let tablet_yaml = paths.tablet_conf.join("server.yaml");
        let yaml = fs::read_to_string(&tablet_yaml).expect("server.yaml");
        fs::write(&tablet_yaml, yaml.replace("log.segment.file-size: 4mb\n", "")).expect("rewrite");
        assert!(!configs_are_current(&paths, sample_ports()), "a cluster started with other segments is stale");
        let zoo = fs::read_to_string(&paths.zoo_cfg).expect("zoo.cfg");
        assert!(zoo.contains("admin.enableServer=false\n") && zoo.contains("clientPortAddress=127.0.0.1\n"), "{zoo}");
        fs::remove_dir_all(&dir).expect("clean up");
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
        let paths = Paths::new(Path::new("/ws"));
        let tablet = b"java\0-Xmx512m\0-cp\0/ws/target/services/fluss/lib/*\0\
                       org.apache.fluss.server.tablet.TabletServer\0--configDir\0/ws/target/services/fluss/config/tablet\0";
        assert!(cmdline_runs(tablet, Role::Tablet.main_class(), paths.config_arg(Role::Tablet)));
        assert!(!cmdline_runs(tablet, Role::Coordinator.main_class(), paths.config_arg(Role::Coordinator)));
        assert!(!cmdline_runs(tablet, Role::Tablet.main_class(), Path::new("/elsewhere")));
    }
}
