//! The broker's files, jars and configuration: where they live, the pom Maven resolves, the
//! listener ports, `server.properties` and the other configuration files, and the formatted
//! storage.

use crate::services::artifacts::{Jars, LOG4J_VERSION, pom_dependency, pom_xml as pom_xml_of};
use crate::services::config::{ServiceFiles, log4j2_properties as log4j2_properties_of};
use crate::services::env::{SASL_PASSWORD, SASL_USERNAME};
use crate::services::process::{free_port_list, java, log_tail, remove_dir_if_exists};
use anyhow::{Context, Result, bail};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The Apache Kafka release the broker runs (`org.apache.kafka:kafka_2.13`).
pub(crate) const KAFKA_VERSION: &str = "4.3.1";
/// slf4j API 2.x; the Kafka poms name 1.7, which would not find the log4j 2 binding.
const SLF4J_VERSION: &str = "2.0.17";

/// The broker's node id, as broker and as controller.
pub(super) const NODE_ID: i32 = 1;

/// Where the broker keeps its files.
#[derive(Debug, Clone)]
pub(super) struct Paths {
    pub(super) files: ServiceFiles,
    pub(super) server_properties: PathBuf,
    pub(super) sasl_client: PathBuf,
    pub(super) data: PathBuf,
    pub(super) log: PathBuf,
    pub(super) pid: PathBuf,
}

impl Paths {
    pub(super) fn new(workspace_root: &Path) -> Self {
        let files = ServiceFiles::new(workspace_root, "kafka");
        Self {
            server_properties: files.config.join("server.properties"),
            sasl_client: files.config.join("sasl-client.properties"),
            data: files.dir.join("data"),
            log: files.dir.join("broker.log"),
            pid: files.dir.join("kafka.pid"),
            files,
        }
    }

    pub(super) fn current() -> Result<Self> {
        Ok(Self::new(&crate::services::workspace_root()?))
    }

    pub(super) fn classpath(&self) -> String {
        self.files.classpath()
    }
}

/// A project whose runtime dependencies are the broker, the command-line tools (for the
/// storage formatter and manual checks) and a logging backend.
fn pom_xml() -> String {
    // The tools' Connect plugin-path command pulls in Connect, Jetty and Jersey, which nothing
    // here uses.
    let no_connect = &[("org.apache.kafka", "connect-runtime")];
    let mut deps = String::new();
    deps += &pom_dependency("org.apache.kafka", "kafka_2.13", KAFKA_VERSION, &[]);
    deps += &pom_dependency("org.apache.kafka", "kafka-tools", KAFKA_VERSION, no_connect);
    deps += &pom_dependency("org.slf4j", "slf4j-api", SLF4J_VERSION, &[]);
    deps += &pom_dependency("org.apache.logging.log4j", "log4j-slf4j2-impl", LOG4J_VERSION, &[]);
    deps += &pom_dependency("org.apache.logging.log4j", "log4j-core", LOG4J_VERSION, &[]);
    pom_xml_of("kafka", "the local broker", "kafka-broker", KAFKA_VERSION, &deps)
}

/// Copies the broker's jars into `lib/` unless the ones there came from the same pom.
pub(super) fn ensure_jars(paths: &Paths) -> Result<()> {
    let jars = Jars {
        service: "kafka",
        what: "the Kafka broker jars",
        root: &format!("org.apache.kafka:kafka_2.13:{KAFKA_VERSION}"),
        pom: &pom_xml(),
        files: &paths.files,
        marker_jar: &format!("kafka_2.13-{KAFKA_VERSION}.jar"),
    };
    jars.ensure()
}

/// The broker's listener ports on 127.0.0.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Ports {
    pub(super) plaintext: u16,
    pub(super) sasl: u16,
    pub(super) controller: u16,
}

/// Three distinct ports that were free a moment ago: the listeners are held open together so
/// that the kernel hands out different ports, then closed for the broker to bind.
pub(super) fn free_ports() -> Result<Ports> {
    let ports = free_port_list(3)?;
    match ports[..] {
        [plaintext, sasl, controller] => Ok(Ports { plaintext, sasl, controller }),
        _ => bail!("expected three ports, got {ports:?}"),
    }
}

/// What a KRaft node's `server.properties` says beyond what every node of ours shares (see
/// [`Kraft::properties`]).
pub(super) struct Kraft<'a> {
    /// The first line, a comment that says what wrote the file.
    pub(super) header: &'a str,
    pub(super) node_id: usize,
    pub(super) voters: String,
    pub(super) listeners: String,
    pub(super) advertised: String,
    pub(super) protocol_map: &'a str,
    /// Lines after `controller.listener.names`, e.g. a SASL listener's settings.
    pub(super) listener_lines: String,
    pub(super) data: &'a Path,
    /// The replication factor of every topic, the internal ones included.
    pub(super) replicas: usize,
    /// The in-sync replicas an acknowledged write needs.
    pub(super) min_isr: usize,
    /// A cluster that survives a node's loss: an out-of-sync replica never leads, and a replica
    /// that stops fetching leaves the ISR after 10 s (Kafka's default is 30 s), so that a test
    /// that kills a node sees the partition shrink to the other two soon.
    pub(super) failover: bool,
}

impl Kraft<'_> {
    /// The `server.properties`: broker and controller in one process, the inter-broker listener
    /// `PLAINTEXT`, no automatic topic creation. The retention check and the log cleaner (which
    /// deletes the segments of `compact,delete` topics below their start offset) run every
    /// second, and a deleted segment's files go a second later (Kafka's defaults: 5 min, 15 s and
    /// 1 min), so that disk given back by `DeleteRecords` shows within seconds in tests and the
    /// soak.
    pub(super) fn properties(&self) -> String {
        let Kraft { header, node_id, voters, listeners, advertised, protocol_map, listener_lines, .. } = self;
        let (replicas, min_isr, data) = (self.replicas, self.min_isr, self.data.display());
        let (unclean, lag) = if self.failover {
            ("unclean.leader.election.enable=false\n", "replica.lag.time.max.ms=10000\n")
        } else {
            ("", "")
        };
        format!(
            "{header}\n\
             process.roles=broker,controller\n\
             node.id={node_id}\n\
             controller.quorum.voters={voters}\n\
             listeners={listeners}\n\
             advertised.listeners={advertised}\n\
             listener.security.protocol.map={protocol_map}\n\
             inter.broker.listener.name=PLAINTEXT\n\
             controller.listener.names=CONTROLLER\n\
             {listener_lines}\
             log.dirs={data}\n\
             metadata.log.dir={data}\n\
             num.partitions=1\n\
             default.replication.factor={replicas}\n\
             min.insync.replicas={min_isr}\n\
             {unclean}\
             auto.create.topics.enable=false\n\
             offsets.topic.replication.factor={replicas}\n\
             transaction.state.log.replication.factor={replicas}\n\
             transaction.state.log.min.isr={min_isr}\n\
             share.coordinator.state.topic.replication.factor={replicas}\n\
             share.coordinator.state.topic.min.isr={min_isr}\n\
             {lag}\
             group.initial.rebalance.delay.ms=0\n\
             log.retention.check.interval.ms=1000\n\
             log.cleaner.backoff.ms=1000\n\
             log.segment.delete.delay.ms=1000\n"
        )
    }
}

/// The broker's `server.properties`: one KRaft node acting as broker and controller, a
/// plaintext and a SASL/PLAIN listener, replication factors of one.
pub(super) fn server_properties(ports: Ports, data: &Path) -> String {
    let Ports { plaintext, sasl, controller } = ports;
    let jaas = format!(
        "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"{SASL_USERNAME}\" \
         password=\"{SASL_PASSWORD}\" user_{SASL_USERNAME}=\"{SASL_PASSWORD}\";"
    );
    Kraft {
        header: "# Generated by `cargo xtask services up kafka`; rewritten on every start.",
        node_id: NODE_ID as usize,
        voters: format!("{NODE_ID}@127.0.0.1:{controller}"),
        listeners: format!(
            "PLAINTEXT://127.0.0.1:{plaintext},SASL_PLAINTEXT://127.0.0.1:{sasl},CONTROLLER://127.0.0.1:{controller}"
        ),
        advertised: format!("PLAINTEXT://127.0.0.1:{plaintext},SASL_PLAINTEXT://127.0.0.1:{sasl}"),
        protocol_map: "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        listener_lines: format!(
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN\n\
             listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas}\n"
        ),
        data,
        replicas: 1,
        min_isr: 1,
        failover: false,
    }
    .properties()
}

/// The listener ports back from a `server.properties` written by [`server_properties`].
pub(super) fn ports_from_config(text: &str) -> Option<Ports> {
    let port = |name: &str| listener_port(text, name);
    Some(Ports { plaintext: port("PLAINTEXT")?, sasl: port("SASL_PLAINTEXT")?, controller: port("CONTROLLER")? })
}

/// The port of listener `name` in the `listeners=` line of a `server.properties`.
pub(super) fn listener_port(text: &str, name: &str) -> Option<u16> {
    crate::services::config::listener_port(text, "listeners=", name)
}

/// Client settings for the Kafka command-line tools (`--command-config`) on the SASL listener.
pub(super) fn sasl_client_properties(username: &str, password: &str) -> String {
    format!(
        "security.protocol=SASL_PLAINTEXT\n\
         sasl.mechanism=PLAIN\n\
         sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
         username=\"{username}\" password=\"{password}\";\n"
    )
}

/// The brokers' `log4j2.properties`, with the request and state-change loggers at warn.
pub(super) fn log4j2_properties() -> String {
    log4j2_properties_of(
        "# Generated by `cargo xtask services up kafka`. The broker's stdout goes to broker.log.",
        "logger.request.name = kafka.request.logger\n\
         logger.request.level = warn\n\
         logger.state.name = state.change.logger\n\
         logger.state.level = warn\n",
    )
}

/// A Kafka cluster id: 16 random bytes in unpadded URL-safe base64. The first character is never
/// `-`, which the command-line tools would take for an option.
pub(super) fn new_cluster_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut bytes = [0u8; 16];
    for (i, chunk) in bytes.chunks_mut(8).enumerate() {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u128(
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos(),
        );
        hasher.write_u32(std::process::id());
        hasher.write_usize(i);
        chunk.copy_from_slice(&hasher.finish().to_be_bytes());
    }
    bytes[0] &= 0x7f;
    base64_url(&bytes)
}

fn base64_url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
        }
    }
    out
}

/// Wipes the data directory and formats it for a new single-node cluster.
pub(super) fn format_storage(paths: &Paths, log: &File) -> Result<()> {
    remove_dir_if_exists(&paths.data)?;
    let mut cmd = storage_format_command(&paths.classpath(), &paths.server_properties, &new_cluster_id(), log)?;
    let status = cmd.status().with_context(|| format!("running {cmd:?}"))?;
    if !status.success() {
        bail!("formatting the Kafka storage failed ({status}); {}", log_tail(&paths.log, 30));
    }
    Ok(())
}

/// `kafka-storage format` of the data directories that `config` names, for cluster
/// `cluster_id`, printing into `log`.
pub(super) fn storage_format_command(classpath: &str, config: &Path, cluster_id: &str, log: &File) -> Result<Command> {
    let mut cmd = Command::new(java());
    // Without a log4j configuration only errors are logged, which keeps the broker log readable.
    cmd.args(["-Xmx256m", "-Djava.awt.headless=true"])
        .arg("-cp")
        .arg(classpath)
        .args(["kafka.tools.StorageTool", "format", "-t", cluster_id, "-c"])
        .arg(config)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log.try_clone()?);
    Ok(cmd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn sample_ports() -> Ports {
        Ports { plaintext: 40001, sasl: 40002, controller: 40003 }
    }

    #[test]
    fn free_ports_are_distinct_and_bindable() {
        let ports = free_ports().expect("free ports");
        let all = [ports.plaintext, ports.sasl, ports.controller];
        assert!(all.iter().all(|p| *p != 0), "{ports:?}");
        assert!(all[0] != all[1] && all[1] != all[2] && all[0] != all[2], "{ports:?}");
        for port in all {
            TcpListener::bind(("127.0.0.1", port)).expect("port is free again");
        }
    }

    #[test]
    fn server_properties_describe_a_single_node_kraft_broker() {
        let text = server_properties(sample_ports(), Path::new("/w/target/services/kafka/data"));
        let props: Vec<(&str, &str)> =
            text.lines().filter(|l| !l.starts_with('#')).filter_map(|l| l.split_once('=')).collect();
        let get = |key: &str| props.iter().find(|(k, _)| *k == key).map(|(_, v)| *v).unwrap_or_default();
        let keys: Vec<&str> = props.iter().map(|(k, _)| *k).collect();
        let mut unique = keys.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), keys.len(), "a key appears twice:\n{text}");

        assert_eq!(get("process.roles"), "broker,controller");
        assert_eq!(get("node.id"), "1");
        assert_eq!(get("controller.quorum.voters"), "1@127.0.0.1:40003");
        assert_eq!(
            get("listeners"),
            "PLAINTEXT://127.0.0.1:40001,SASL_PLAINTEXT://127.0.0.1:40002,CONTROLLER://127.0.0.1:40003"
        );
        assert_eq!(get("advertised.listeners"), "PLAINTEXT://127.0.0.1:40001,SASL_PLAINTEXT://127.0.0.1:40002");
        assert_eq!(get("controller.listener.names"), "CONTROLLER");
        assert_eq!(get("listener.name.sasl_plaintext.sasl.enabled.mechanisms"), "PLAIN");
        assert_eq!(
            get("listener.name.sasl_plaintext.plain.sasl.jaas.config"),
            "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"actionstate\" \
             password=\"actionstate-secret\" user_actionstate=\"actionstate-secret\";"
        );
        assert_eq!(get("log.dirs"), "/w/target/services/kafka/data");
        assert_eq!(get("auto.create.topics.enable"), "false");
        for key in ["offsets.topic.replication.factor", "transaction.state.log.replication.factor"] {
            assert_eq!(get(key), "1", "{key}");
        }
        assert_eq!(get("transaction.state.log.min.isr"), "1");
    }

    #[test]
    fn ports_read_back_from_the_generated_config() {
        let text = server_properties(sample_ports(), Path::new("/tmp/data"));
        assert_eq!(ports_from_config(&text), Some(sample_ports()));
        assert_eq!(ports_from_config("listeners=PLAINTEXT://127.0.0.1:1\n"), None);
    }

    #[test]
    fn paths_live_under_the_workspace_target_directory() {
        let paths = Paths::new(Path::new("/ws"));
        assert_eq!(paths.files.env, Path::new("/ws/target/services/kafka.env"));
        for p in [&paths.files.lib, &paths.data, &paths.log, &paths.pid, &paths.server_properties, &paths.files.pom] {
            assert!(p.starts_with("/ws/target/services/kafka"), "{}", p.display());
        }
        assert_eq!(paths.classpath(), "/ws/target/services/kafka/lib/*");
    }

    #[test]
    fn pom_pins_the_broker_tools_and_logging() {
        let pom = pom_xml();
        for needle in [
            "<artifactId>kafka_2.13</artifactId>",
            "<artifactId>kafka-tools</artifactId>",
            "<artifactId>log4j-slf4j2-impl</artifactId>",
            &format!("<version>{KAFKA_VERSION}</version>"),
        ] {
            assert!(pom.contains(needle), "pom lacks {needle}:\n{pom}");
        }
        assert!(!pom.contains("LATEST") && !pom.contains("RELEASE") && !pom.contains('['), "unpinned version:\n{pom}");
    }

    #[test]
    fn cluster_ids_look_like_kafka_uuids() {
        let a = new_cluster_id();
        let b = new_cluster_id();
        assert_ne!(a, b);
        for id in [a, b] {
            assert_eq!(id.len(), 22, "{id}");
            assert!(id.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'), "{id}");
            assert!(!id.starts_with('-'), "{id}");
        }
        assert_eq!(base64_url(b"\xfb\xff\xbf"), "-_-_");
        assert_eq!(base64_url(b"Ma"), "TWE");
        assert_eq!(base64_url(&[0; 16]), "AAAAAAAAAAAAAAAAAAAAAA");
    }
}
