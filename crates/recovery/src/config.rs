//! Choosing a backend at run time: [`LogConfig`], [`open`] and [`AnyLog`].

use crate::error::{Result, StoreError};
use actionstate_core::{Error, LogIdentity, Position, ReadBatch, StateLog, WireRecord};
use std::path::PathBuf;
use std::str::FromStr;

/// Which backend to open, and where.
///
/// Parsed from a string (`FromStr`):
/// - `file:PATH` or `file:PATH?partitions=N` — the embedded default (feature `file`);
/// - `memory` or `memory:N` — the in-memory log of the test kit (feature `testkit`);
/// - `kafka://HOST:PORT/TOPIC` or `kafka://HOST:PORT/TOPIC?partitions=N` — a topic on an
///   Apache Kafka cluster (feature `kafka`). `HOST:PORT` may be a comma-separated list of
///   bootstrap brokers (`kafka://b1:9092,b2:9092/agent-state`); the topic name consists of
///   ASCII letters, digits, `.`, `_` and `-` (at most 249 characters). The topic is created with
///   `N` partitions (default [`DEFAULT_PARTITIONS`]) when absent; an existing topic must have
///   exactly `N`. The cluster is reached without authentication, with a 10 s request timeout and
///   30 s delivery and read-stall timeouts.
/// - `fluss://HOST:PORT/DATABASE/TABLE` or `fluss://HOST:PORT/DATABASE/TABLE?buckets=N` — a
///   log table on an Apache Fluss cluster (feature `fluss`). `HOST:PORT` may be a
///   comma-separated list of bootstrap servers; database and table names consist of ASCII
///   letters, digits, `_` and `-`. The database and the table are created when absent, the
///   table with `N` buckets (default [`DEFAULT_PARTITIONS`]); an existing table must have
///   exactly `N`. The cluster is reached without authentication, with a 10 s request timeout
///   and 30 s delivery and read-stall timeouts.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LogConfig {
    /// The embedded store in a local data directory.
    File {
        /// Data directory.
        dir: PathBuf,
        /// Partitions (used when the directory is created).
        partitions: u32,
    },
    /// The in-memory test log.
    Memory {
        /// Partitions.
        partitions: u32,
    },
    /// A topic on an Apache Kafka cluster.
    Kafka {
        /// `bootstrap.servers`: comma-separated `host:port` list.
        bootstrap: String,
        /// The topic holding the log.
        topic: String,
        /// Partitions (used when the topic is created, checked when it exists).
        partitions: u32,
    },
    /// A log table on an Apache Fluss cluster.
    Fluss {
        /// Bootstrap servers: comma-separated `host:port` list.
        bootstrap: String,
        /// The database holding the table.
        database: String,
        /// The log table.
        table: String,
        /// Buckets (used when the table is created, checked when it exists).
        buckets: u32,
    },
}

/// Partitions of a log created without an explicit count.
pub const DEFAULT_PARTITIONS: u32 = 8;

impl FromStr for LogConfig {
    type Err = StoreError;

    fn from_str(value: &str) -> Result<Self> {
        let bad = |detail: &str| StoreError::Config { value: value.to_owned(), detail: detail.to_owned() };
        let (scheme, rest) = value.split_once(':').unwrap_or((value, ""));
        let partitions_of = |query: &str| -> Result<u32> {
            let partitions = match query.strip_prefix("partitions=") {
                Some(n) => n.parse().map_err(|_| bad("partitions must be a positive integer"))?,
                None if query.is_empty() => DEFAULT_PARTITIONS,
                None => return Err(bad("the only option is `partitions=N`")),
            };
            if partitions == 0 {
                return Err(bad("partitions must be a positive integer"));
            }
            Ok(partitions)
        };
        let check_bootstrap = |bootstrap: &str, scheme: &str| -> Result<()> {
            if bootstrap.is_empty() {
                return Err(bad(&format!("`{scheme}://` needs a bootstrap server `HOST:PORT`")));
            }
            for server in bootstrap.split(',') {
                match server.rsplit_once(':') {
                    Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0) => {}
                    _ => return Err(bad("every bootstrap server must be `HOST:PORT` with a numeric port")),
                }
            }
            Ok(())
        };
        match scheme {
            "file" => {
                let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
                if path.is_empty() {
                    return Err(bad("`file:` needs a directory, e.g. `file:./actionstate-data`"));
                }
                Ok(LogConfig::File { dir: PathBuf::from(path), partitions: partitions_of(query)? })
            }
            "kafka" => {
                let example = "expected `kafka://HOST:PORT/TOPIC[?partitions=N]`";
                let rest = rest.strip_prefix("//").ok_or_else(|| bad(example))?;
                let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
                let (bootstrap, topic) = rest.split_once('/').ok_or_else(|| bad(example))?;
                if bootstrap.is_empty() {
                    return Err(bad("`kafka://` needs a bootstrap broker `HOST:PORT`"));
                }
                for server in bootstrap.split(',') {
                    match server.rsplit_once(':') {
                        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0) => {}
                        _ => return Err(bad("every bootstrap broker must be `HOST:PORT` with a numeric port")),
                    }
                }
                if topic.is_empty() || topic.len() > 249 || topic == "." || topic == ".." {
                    return Err(bad("`kafka://HOST:PORT/TOPIC` needs a topic name of 1 to 249 characters"));
                }
                if !topic.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)) {
                    return Err(bad("a topic name consists of ASCII letters, digits, `.`, `_` and `-`"));
                }
                Ok(LogConfig::Kafka {
                    bootstrap: bootstrap.to_owned(),
                    topic: topic.to_owned(),
                    partitions: partitions_of(query)?,
                })
            }
            "fluss" => {
                let example = "expected `fluss://HOST:PORT/DATABASE/TABLE[?buckets=N]`";
                let rest = rest.strip_prefix("//").ok_or_else(|| bad(example))?;
                let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
                let (bootstrap, path) = rest.split_once('/').ok_or_else(|| bad(example))?;
                check_bootstrap(bootstrap, "fluss")?;
                let (database, table) = path.split_once('/').ok_or_else(|| bad(example))?;
                let name_ok = |n: &str| {
                    !n.is_empty()
                        && n.len() <= 200
                        && n.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-".contains(&b))
                };
                if !name_ok(database) || !name_ok(table) {
                    return Err(bad(
                        "database and table names are 1 to 200 ASCII letters, digits, `_` and `-` (`fluss://HOST:PORT/DATABASE/TABLE`)",
                    ));
                }
                let buckets = match query.strip_prefix("buckets=") {
                    Some(n) => n.parse().map_err(|_| bad("buckets must be a positive integer"))?,
                    None if query.is_empty() => DEFAULT_PARTITIONS,
                    None => return Err(bad("the only option is `buckets=N`")),
                };
                if buckets == 0 || i32::try_from(buckets).is_err() {
                    return Err(bad("buckets must be a positive integer"));
                }
                Ok(LogConfig::Fluss {
                    bootstrap: bootstrap.to_owned(),
                    database: database.to_owned(),
                    table: table.to_owned(),
                    buckets,
                })
            }
            "memory" => {
                let partitions = if rest.is_empty() {
                    DEFAULT_PARTITIONS
                } else {
                    rest.parse().map_err(|_| bad("`memory:N` takes a partition count"))?
                };
                Ok(LogConfig::Memory { partitions: partitions.max(1) })
            }
            _ => Err(bad(
                "unknown backend; expected `file:PATH`, `kafka://HOST:PORT/TOPIC`, `fluss://HOST:PORT/DATABASE/TABLE` or `memory[:N]`",
            )),
        }
    }
}

/// A log of any backend compiled in, chosen at run time.
#[derive(Debug)]
#[non_exhaustive]
pub enum AnyLog {
    /// The embedded store.
    #[cfg(feature = "file")]
    File(actionstate_file::FileLog),
    /// The in-memory test log.
    #[cfg(feature = "testkit")]
    Memory(crate::testkit::MemoryLog),
    /// A topic on an Apache Kafka cluster.
    #[cfg(feature = "kafka")]
    Kafka(actionstate_kafka::KafkaLog),
    /// A log table on an Apache Fluss cluster.
    #[cfg(feature = "fluss")]
    Fluss(actionstate_fluss::FlussLog),
}

/// The client settings [`open`] uses for a [`LogConfig::Kafka`]: no authentication, the
/// broker's default replication factor, a 10 s request timeout and 30 s delivery and
/// read-stall timeouts.
#[cfg(feature = "kafka")]
pub fn kafka_config(bootstrap: &str, topic: &str, partitions: u32) -> actionstate_kafka::KafkaConfig {
    let mut config = actionstate_kafka::KafkaConfig::new(bootstrap, topic, partitions);
    config.request_timeout = std::time::Duration::from_secs(10);
    config.delivery_timeout = std::time::Duration::from_secs(30);
    config.read_stall_timeout = std::time::Duration::from_secs(30);
    config
}

/// The client settings [`open`] uses for a [`LogConfig::Fluss`]: no authentication, a 10 s
/// request timeout and 30 s delivery and read-stall timeouts.
#[cfg(feature = "fluss")]
pub fn fluss_config(bootstrap: &str, database: &str, table: &str, buckets: u32) -> actionstate_fluss::FlussConfig {
    let mut config = actionstate_fluss::FlussConfig::new(bootstrap, database, table, buckets);
    config.request_timeout = std::time::Duration::from_secs(10);
    config.delivery_timeout = std::time::Duration::from_secs(30);
    config.read_stall_timeout = std::time::Duration::from_secs(30);
    config
}

/// Opens the backend `config` names. A backend whose feature is not compiled in is a
/// [`StoreError::Config`] error.
pub async fn open(config: &LogConfig) -> Result<AnyLog> {
    match config {
        #[cfg(feature = "file")]
        LogConfig::File { dir, partitions } => {
            let config = actionstate_file::FileConfig::new(dir.clone(), *partitions);
            let log = actionstate_file::FileLog::open(config).map_err(Error::from)?;
            Ok(AnyLog::File(log))
        }
        #[cfg(feature = "testkit")]
        LogConfig::Memory { partitions } => Ok(AnyLog::Memory(crate::testkit::MemoryLog::new(*partitions))),
        #[cfg(feature = "kafka")]
        LogConfig::Kafka { bootstrap, topic, partitions } => {
            let log = actionstate_kafka::KafkaLog::open(kafka_config(bootstrap, topic, *partitions)).await?;
            Ok(AnyLog::Kafka(log))
        }
        #[cfg(feature = "fluss")]
        LogConfig::Fluss { bootstrap, database, table, buckets } => {
            let log = actionstate_fluss::FlussLog::open(fluss_config(bootstrap, database, table, *buckets)).await?;
            Ok(AnyLog::Fluss(log))
        }
        #[allow(unreachable_patterns, reason = "reachable when a backend feature is off")]
        other => Err(StoreError::Config {
            value: format!("{other:?}"),
            detail: "this backend is not compiled in (enable its cargo feature)".into(),
        }),
    }
}

macro_rules! dispatch {
    ($self:expr, $log:ident => $body:expr) => {
        match $self {
            #[cfg(feature = "file")]
            AnyLog::File($log) => $body,
            #[cfg(feature = "testkit")]
            AnyLog::Memory($log) => $body,
            #[cfg(feature = "kafka")]
            AnyLog::Kafka($log) => $body,
            #[cfg(feature = "fluss")]
            AnyLog::Fluss($log) => $body,
        }
    };
}

impl StateLog for AnyLog {
    fn identity(&self) -> &LogIdentity {
        dispatch!(self, log => log.identity())
    }

    async fn current_identity(&self) -> Result<LogIdentity, Error> {
        dispatch!(self, log => log.current_identity().await)
    }

    async fn append(&self, record: WireRecord) -> Result<Position, Error> {
        dispatch!(self, log => log.append(record).await)
    }

    async fn earliest_offsets(&self) -> Result<Vec<u64>, Error> {
        dispatch!(self, log => log.earliest_offsets().await)
    }

    async fn end_offsets(&self) -> Result<Vec<u64>, Error> {
        dispatch!(self, log => log.end_offsets().await)
    }

    async fn read(&self, partition: u32, from: u64, to: u64, max: usize) -> Result<ReadBatch, Error> {
        dispatch!(self, log => log.read(partition, from, to, max).await)
    }

    fn capabilities(&self) -> actionstate_core::Capabilities {
        dispatch!(self, log => log.capabilities())
    }

    async fn reclaim(&self, before: &[u64]) -> Result<Vec<u64>, Error> {
        dispatch!(self, log => log.reclaim(before).await)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    fn parse(value: &str) -> Result<LogConfig> {
        value.parse()
    }

    fn kafka(bootstrap: &str, topic: &str, partitions: u32) -> LogConfig {
        LogConfig::Kafka { bootstrap: bootstrap.into(), topic: topic.into(), partitions }
    }

    #[test]
    fn parses_kafka_urls() {
        assert_eq!(parse("kafka://127.0.0.1:9092/agent-state").ok(), Some(kafka("127.0.0.1:9092", "agent-state", 8)));
        assert_eq!(
            parse("kafka://localhost:9092/agent.state_1?partitions=3").ok(),
            Some(kafka("localhost:9092", "agent.state_1", 3))
        );
        assert_eq!(parse("kafka://b1:9092,b2:9093/t?partitions=16").ok(), Some(kafka("b1:9092,b2:9093", "t", 16)));
    }

    #[test]
    fn rejects_malformed_kafka_urls() {
        for (value, detail) in [
            ("kafka:", "expected `kafka://"),
            ("kafka:127.0.0.1:9092/t", "expected `kafka://"),
            ("kafka://127.0.0.1:9092", "expected `kafka://"),
            ("kafka:///t", "needs a bootstrap broker"),
            ("kafka://127.0.0.1/t", "numeric port"),
            ("kafka://127.0.0.1:x/t", "numeric port"),
            ("kafka://127.0.0.1:0/t", "numeric port"),
            ("kafka://:9092/t", "numeric port"),
            ("kafka://b1:9092,/t", "numeric port"),
            ("kafka://127.0.0.1:9092/", "needs a topic name"),
            ("kafka://127.0.0.1:9092/..", "needs a topic name"),
            ("kafka://127.0.0.1:9092/a/b", "ASCII letters"),
            ("kafka://127.0.0.1:9092/a b", "ASCII letters"),
            ("kafka://127.0.0.1:9092/t?partitions=0", "positive integer"),
            ("kafka://127.0.0.1:9092/t?partitions=-1", "positive integer"),
            ("kafka://127.0.0.1:9092/t?replication=3", "the only option"),
        ] {
            match parse(value) {
                Err(StoreError::Config { value: v, detail: d }) => {
                    assert_eq!(v, value);
                    assert!(d.contains(detail), "{value}: {d}");
                }
                other => panic!("{value} parsed as {other:?}"),
            }
        }
        let long = format!("kafka://h:1/{}", "t".repeat(250));
        assert!(parse(&long).is_err());
        assert!(parse(&format!("kafka://h:1/{}", "t".repeat(249))).is_ok());
    }

    fn fluss(bootstrap: &str, database: &str, table: &str, buckets: u32) -> LogConfig {
        LogConfig::Fluss { bootstrap: bootstrap.into(), database: database.into(), table: table.into(), buckets }
    }

    #[test]
    fn parses_fluss_urls() {
        assert_eq!(
            parse("fluss://127.0.0.1:9123/agents/state").ok(),
            Some(fluss("127.0.0.1:9123", "agents", "state", 8))
        );
        assert_eq!(parse("fluss://a:1,b:2/db_1/log-2?buckets=3").ok(), Some(fluss("a:1,b:2", "db_1", "log-2", 3)));
    }

    #[test]
    fn rejects_malformed_fluss_urls() {
        for (value, detail) in [
            ("fluss:h:1/d/t", "expected `fluss://"),
            ("fluss://h:1/d", "expected `fluss://"),
            ("fluss:///d/t", "needs a bootstrap server"),
            ("fluss://h/d/t", "numeric port"),
            ("fluss://h:1//t", "database and table names"),
            ("fluss://h:1/d/", "database and table names"),
            ("fluss://h:1/d/t/x", "database and table names"),
            ("fluss://h:1/d/a.b", "database and table names"),
            ("fluss://h:1/d/t?buckets=0", "positive integer"),
            ("fluss://h:1/d/t?partitions=2", "the only option"),
        ] {
            match parse(value) {
                Err(StoreError::Config { value: v, detail: d }) => {
                    assert_eq!(v, value);
                    assert!(d.contains(detail), "{value}: {d}");
                }
                other => panic!("{value} parsed as {other:?}"),
            }
        }
    }

    #[test]
    fn parses_file_and_memory() {
        assert_eq!(parse("file:./d?partitions=2").ok(), Some(LogConfig::File { dir: "./d".into(), partitions: 2 }));
        assert_eq!(parse("memory:3").ok(), Some(LogConfig::Memory { partitions: 3 }));
        assert!(parse("redis://h:1/t").is_err());
    }

    #[cfg(not(feature = "fluss"))]
    #[tokio::test]
    async fn fluss_without_its_feature_is_a_config_error() {
        let err = open(&fluss("127.0.0.1:9123", "d", "t", 1)).await.unwrap_err();
        assert!(matches!(err, StoreError::Config { .. }), "{err}");
    }

    #[cfg(not(feature = "kafka"))]
    #[tokio::test]
    async fn kafka_without_its_feature_is_a_config_error() {
        let err = open(&kafka("127.0.0.1:9092", "t", 1)).await.unwrap_err();
        assert!(matches!(err, StoreError::Config { .. }), "{err}");
    }
}
