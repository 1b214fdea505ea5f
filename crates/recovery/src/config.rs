//! Choosing a backend at run time: [`LogConfig`], [`open`] and [`AnyLog`].
//!
//! A log is named by one URL everywhere (the library, the simulator, the CLI, the benchmarks
//! and the tests). Each backend crate owns its grammar and its defaults
//! (`FileConfig::from_url`, `KafkaConfig::from_url`, `FlussConfig::from_url`); this module only
//! picks the backend by the URL's scheme.

use crate::error::{Result, StoreError};
use actionstate_core::{Error, LogIdentity, Position, ReadBatch, StateLog, WireRecord};
use std::fmt;
use std::str::FromStr;

/// Which backend to open, and where: parsed from a log URL (`FromStr`) by the backend's own
/// grammar.
///
/// - `file:DIR[?partitions=N&cache_mb=M]` — the embedded default (feature `file`); see
///   `actionstate_file::FileConfig::from_url`;
/// - `kafka://HOST:PORT[,HOST:PORT]/TOPIC[?...]` — a topic on an Apache Kafka cluster
///   (feature `kafka`), with partitions, timeouts, SASL (PLAIN, SCRAM) and a TLS CA file; see
///   `actionstate_kafka::KafkaConfig::from_url`;
/// - `fluss://HOST:PORT[,HOST:PORT]/DATABASE/TABLE[?...]` — a log table on an Apache Fluss
///   cluster (feature `fluss`), with buckets, timeouts, a log TTL and SASL/PLAIN; see
///   `actionstate_fluss::FlussConfig::from_url`;
/// - `memory` or `memory:N` — the in-memory log (feature `memory`).
///
/// Secrets never appear in the URL: parameters name an environment variable or a file
/// (`password_env=VAR`, `password_file=PATH`), and `Debug` and `Display` show no secret.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum LogConfig {
    /// The embedded store in a local data directory.
    #[cfg(feature = "file")]
    File(actionstate_file::FileConfig),
    /// The in-memory test log.
    Memory {
        /// Partitions.
        partitions: u32,
    },
    /// A topic on an Apache Kafka cluster.
    #[cfg(feature = "kafka")]
    Kafka(Box<actionstate_kafka::KafkaConfig>),
    /// A log table on an Apache Fluss cluster.
    #[cfg(feature = "fluss")]
    Fluss(Box<actionstate_fluss::FlussConfig>),
}

/// Partitions of a log created without an explicit count.
pub const DEFAULT_PARTITIONS: u32 = 8;

impl FromStr for LogConfig {
    type Err = StoreError;

    fn from_str(value: &str) -> Result<Self> {
        let (scheme, rest) = value.trim().split_once(':').unwrap_or((value.trim(), ""));
        let not_compiled = |feature: &str| StoreError::Config {
            value: actionstate_core::url::redact(value),
            detail: format!("the {feature} backend is not compiled in (enable the `{feature}` cargo feature)"),
        };
        match scheme {
            #[cfg(feature = "file")]
            "file" => Ok(LogConfig::File(actionstate_file::FileConfig::from_url(value)?)),
            #[cfg(feature = "kafka")]
            "kafka" => Ok(LogConfig::Kafka(Box::new(actionstate_kafka::KafkaConfig::from_url(value)?))),
            #[cfg(feature = "fluss")]
            "fluss" => Ok(LogConfig::Fluss(Box::new(actionstate_fluss::FlussConfig::from_url(value)?))),
            "memory" => {
                let partitions = if rest.is_empty() {
                    DEFAULT_PARTITIONS
                } else {
                    rest.parse().map_err(|_| StoreError::Config {
                        value: actionstate_core::url::redact(value),
                        detail: "`memory:N` takes a partition count".into(),
                    })?
                };
                Ok(LogConfig::Memory { partitions: partitions.max(1) })
            }
            #[allow(unreachable_patterns, reason = "reachable when a backend feature is off")]
            "file" | "kafka" | "fluss" => Err(not_compiled(scheme)),
            _ => Err(StoreError::Config {
                value: actionstate_core::url::redact(value),
                detail: "unknown backend; expected `file:DIR`, `kafka://HOST:PORT/TOPIC`, \
                         `fluss://HOST:PORT/DATABASE/TABLE` or `memory[:N]`"
                    .into(),
            }),
        }
    }
}

impl LogConfig {
    /// The same log, opened as it is for tools that only read: nothing is created or
    /// migrated, the partition count is taken as found, and appends and reclaims fail
    /// ([`Error::Unsupported`]). See each backend's `read_only` setting.
    pub fn read_only(self) -> Self {
        match self {
            #[cfg(feature = "file")]
            LogConfig::File(c) => LogConfig::File(actionstate_file::FileConfig { read_only: true, ..c }),
            #[cfg(feature = "kafka")]
            LogConfig::Kafka(mut c) => {
                c.read_only = true;
                LogConfig::Kafka(c)
            }
            #[cfg(feature = "fluss")]
            LogConfig::Fluss(mut c) => {
                c.read_only = true;
                LogConfig::Fluss(c)
            }
            memory @ LogConfig::Memory { .. } => memory,
        }
    }

    /// The same log with `partitions` partitions (buckets on Fluss): for a tool that learnt
    /// the count of an existing log and opens it for writing.
    pub fn with_partitions(self, partitions: u32) -> Self {
        match self {
            #[cfg(feature = "file")]
            LogConfig::File(c) => LogConfig::File(actionstate_file::FileConfig { partitions, ..c }),
            #[cfg(feature = "kafka")]
            LogConfig::Kafka(mut c) => {
                c.partitions = partitions;
                LogConfig::Kafka(c)
            }
            #[cfg(feature = "fluss")]
            LogConfig::Fluss(mut c) => {
                c.buckets = partitions;
                LogConfig::Fluss(c)
            }
            LogConfig::Memory { .. } => LogConfig::Memory { partitions },
        }
    }

    /// The partitions a log created from this configuration gets.
    pub fn partitions(&self) -> u32 {
        match self {
            #[cfg(feature = "file")]
            LogConfig::File(c) => c.partitions,
            #[cfg(feature = "kafka")]
            LogConfig::Kafka(c) => c.partitions,
            #[cfg(feature = "fluss")]
            LogConfig::Fluss(c) => c.buckets,
            LogConfig::Memory { partitions } => *partitions,
        }
    }
}

/// The log's name: `file:DIR`, `memory:N`, and for Kafka and Fluss the whole URL an operator
/// passes back to any command (`kafka://SERVERS/TOPIC?...`, `fluss://SERVERS/DATABASE/TABLE?...`
/// with every parameter that is not at its default; see `KafkaConfig`'s and `FlussConfig`'s
/// `Display`). Never a secret: a password is named by reference (`password_env=VAR`,
/// `password_file=PATH`).
impl fmt::Display for LogConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            #[cfg(feature = "file")]
            LogConfig::File(c) => write!(f, "file:{}", c.dir.display()),
            #[cfg(feature = "kafka")]
            LogConfig::Kafka(c) => write!(f, "{c}"),
            #[cfg(feature = "fluss")]
            LogConfig::Fluss(c) => write!(f, "{c}"),
            LogConfig::Memory { partitions } => write!(f, "memory:{partitions}"),
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
    #[cfg(feature = "memory")]
    Memory(actionstate_memory::MemoryLog),
    /// A topic on an Apache Kafka cluster.
    #[cfg(feature = "kafka")]
    Kafka(actionstate_kafka::KafkaLog),
    /// A log table on an Apache Fluss cluster.
    #[cfg(feature = "fluss")]
    Fluss(actionstate_fluss::FlussLog),
}

/// Opens the log `config` names.
pub async fn open(config: &LogConfig) -> Result<AnyLog> {
    match config {
        #[cfg(feature = "file")]
        LogConfig::File(config) => {
            let log = actionstate_file::FileLog::open(config.clone()).map_err(Error::from)?;
            Ok(AnyLog::File(log))
        }
        #[cfg(feature = "memory")]
        LogConfig::Memory { partitions } => Ok(AnyLog::Memory(actionstate_memory::MemoryLog::new(*partitions))),
        #[cfg(feature = "kafka")]
        LogConfig::Kafka(config) => Ok(AnyLog::Kafka(actionstate_kafka::KafkaLog::open((**config).clone()).await?)),
        #[cfg(feature = "fluss")]
        LogConfig::Fluss(config) => Ok(AnyLog::Fluss(actionstate_fluss::FlussLog::open((**config).clone()).await?)),
        #[allow(unreachable_patterns, reason = "reachable when the memory feature is off")]
        other => Err(StoreError::Config {
            value: other.to_string(),
            detail: "this backend is not compiled in (enable its cargo feature)".into(),
        }),
    }
}

macro_rules! dispatch {
    ($self:expr, $log:ident => $body:expr) => {
        match $self {
            #[cfg(feature = "file")]
            AnyLog::File($log) => $body,
            #[cfg(feature = "memory")]
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

    #[cfg(all(feature = "file", feature = "kafka", feature = "fluss"))]
    #[test]
    fn each_scheme_goes_to_its_backend_grammar() {
        match parse("file:./d?partitions=2").unwrap() {
            LogConfig::File(c) => assert_eq!((c.dir.to_str(), c.partitions), (Some("./d"), 2)),
            other => panic!("{other:?}"),
        }
        match parse("kafka://b1:9092,b2:9093/t?partitions=16").unwrap() {
            LogConfig::Kafka(c) => {
                assert_eq!((c.bootstrap.as_str(), c.topic.as_str(), c.partitions), ("b1:9092,b2:9093", "t", 16))
            }
            other => panic!("{other:?}"),
        }
        match parse("fluss://a:1,b:2/db_1/log-2?buckets=3").unwrap() {
            LogConfig::Fluss(c) => assert_eq!((c.database.as_str(), c.table.as_str(), c.buckets), ("db_1", "log-2", 3)),
            other => panic!("{other:?}"),
        }
        assert_eq!(parse("memory:3").unwrap(), LogConfig::Memory { partitions: 3 });
        let text = parse("kafka://h:1/t?partitions=0").unwrap_err().to_string();
        assert!(text.contains("positive integer"), "{text}");
        let text = parse("redis://h:1/t").unwrap_err().to_string();
        assert!(text.contains("unknown backend"), "{text}");
        // The whole URL, parameters included, for hints an operator pastes back.
        for url in ["kafka://h:1/t?request_timeout=5s&allow_retention=true", "fluss://h:1/d/t?buckets=2&log_ttl=7d"] {
            assert_eq!(parse(url).unwrap().to_string(), url);
            assert_eq!(parse(&parse(url).unwrap().to_string()).unwrap(), parse(url).unwrap());
        }
    }

    #[cfg(all(feature = "file", feature = "kafka", feature = "fluss"))]
    #[test]
    fn read_only_reaches_every_backend() {
        for url in ["file:d", "kafka://h:1/t", "fluss://h:1/d/t"] {
            let debug = format!("{:?}", parse(url).unwrap().read_only());
            assert!(debug.contains("read_only: true"), "{url}: {debug}");
        }
    }

    #[cfg(not(feature = "kafka"))]
    #[test]
    fn kafka_without_its_feature_is_a_config_error() {
        let err = parse("kafka://127.0.0.1:9092/t").unwrap_err();
        assert!(err.to_string().contains("`kafka` cargo feature"), "{err}");
    }
}
