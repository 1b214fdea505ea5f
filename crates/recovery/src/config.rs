//! Choosing a backend at run time: [`LogConfig`], [`open`] and [`AnyLog`].
//!
//! A log is named by one URL everywhere (the library, the simulator, the CLI, the benchmarks
//! and the tests). Each backend crate owns its grammar, its defaults and its opening, through
//! its [`BackendConfig`] (`FileConfig`, `KafkaConfig`, `FlussConfig`, `MemoryConfig`); this
//! module only picks the backend by the URL's scheme. The backends are listed once, in the
//! `backends!` invocation below: one line each, naming the cargo feature that compiles it in
//! (which is also its scheme), its variant, and its configuration type (boxed when large).

use crate::error::{Result, StoreError};
#[allow(unused_imports, reason = "unused when no backend is compiled in")]
use actionstate_core::BackendConfig;
pub use actionstate_core::DEFAULT_PARTITIONS;
use actionstate_core::{Error, LogIdentity, Position, ReadBatch, StateLog, WireRecord};
use std::fmt;
use std::str::FromStr;

backends! {
    /// The embedded store in a local data directory.
    "file" => File(actionstate_file::FileConfig),
    /// A topic on an Apache Kafka cluster.
    "kafka" => Kafka(Box<actionstate_kafka::KafkaConfig>),
    /// A log table on an Apache Fluss cluster.
    "fluss" => Fluss(Box<actionstate_fluss::FlussConfig>),
    /// The in-memory log: every open is a new, empty log.
    "memory" => Memory(actionstate_memory::MemoryConfig),
}

/// The error for a URL whose scheme names no backend: the URL forms of the backends compiled
/// in (`compiled`), and the names of those that are not (`missing`).
fn unknown_backend(value: &str, compiled: &[&str], missing: &[&str]) -> StoreError {
    let quoted = |names: &[&str]| {
        let names: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
        match names.split_last() {
            None => String::new(),
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        }
    };
    let mut detail = match compiled {
        [] => "unknown backend; none is compiled in".to_owned(),
        forms => format!("unknown backend; expected {}", quoted(forms)),
    };
    if !missing.is_empty() {
        detail.push_str(&format!(" (not compiled in: {}, each with the cargo feature of its name)", quoted(missing)));
    }
    StoreError::Config { value: actionstate_core::url::redact(value), detail }
}

// Long: one generated item per place that dispatches on the backend (the two enums, `FromStr`,
// the methods, `Display`, `open`, the `StateLog` impl); split, the backends would be listed
// once per part.
/// Generates, from one line per backend (`"FEATURE" => Variant(ConfigType),` with its doc),
/// [`LogConfig`] and its `FromStr`, methods and `Display`; [`AnyLog`] and its [`StateLog`]
/// impl; and [`open`]. Each line's code is compiled only with its feature, which is also the
/// scheme of the backend's URLs ([`BackendConfig::SCHEME`]; checked by a test).
macro_rules! backends {
    ($($(#[doc = $doc:literal])* $feature:literal => $variant:ident $held:tt,)*) => {
        /// Which backend to open, and where: parsed from a log URL (`FromStr`) by the backend's
        /// own grammar ([`BackendConfig::from_url`]).
        ///
        /// - `file:DIR[?partitions=N&cache_mb=M]` — the embedded default (feature `file`); see
        ///   `actionstate_file::FileConfig::from_url`;
        /// - `kafka://HOST:PORT[,HOST:PORT]/TOPIC[?...]` — a topic on an Apache Kafka cluster
        ///   (feature `kafka`), with partitions, timeouts, SASL (PLAIN, SCRAM) and a TLS CA
        ///   file; see `actionstate_kafka::KafkaConfig::from_url`;
        /// - `fluss://HOST:PORT[,HOST:PORT]/DATABASE/TABLE[?...]` — a log table on an Apache
        ///   Fluss cluster (feature `fluss`), with buckets, timeouts, a log TTL and SASL/PLAIN;
        ///   see `actionstate_fluss::FlussConfig::from_url`;
        /// - `memory` or `memory:N` — the in-memory log (feature `memory`); see
        ///   `actionstate_memory::MemoryConfig::from_url`.
        ///
        /// Secrets never appear in the URL: parameters name an environment variable or a file
        /// (`password_env=VAR`, `password_file=PATH`), and `Debug` and `Display` show no
        /// secret.
        #[derive(Clone, Debug, PartialEq)]
        #[non_exhaustive]
        pub enum LogConfig {
            $($(#[doc = $doc])* #[cfg(feature = $feature)] $variant $held,)*
        }

        /// A log of any backend compiled in, chosen at run time.
        #[derive(Debug)]
        #[non_exhaustive]
        pub enum AnyLog {
            $(
                $(#[doc = $doc])*
                #[cfg(feature = $feature)]
                $variant(<config_of!$held as BackendConfig>::Log),
            )*
        }

        impl FromStr for LogConfig {
            type Err = StoreError;

            fn from_str(value: &str) -> Result<Self> {
                let scheme = value.trim().split_once(':').map_or(value.trim(), |(scheme, _)| scheme);
                $(
                    #[cfg(feature = $feature)]
                    if scheme == <config_of!$held as BackendConfig>::SCHEME {
                        let config = <config_of!$held as BackendConfig>::from_url(value)?;
                        return Ok(LogConfig::$variant(config.into()));
                    }
                    #[cfg(not(feature = $feature))]
                    if scheme == $feature {
                        return Err(StoreError::Config {
                            value: actionstate_core::url::redact(value),
                            detail: concat!(
                                "the ", $feature, " backend is not compiled in (enable the `", $feature, "` cargo feature)"
                            )
                            .into(),
                        });
                    }
                )*
                let compiled: &[&str] =
                    &[$(#[cfg(feature = $feature)] <config_of!$held as BackendConfig>::URL_FORM,)*];
                let missing: &[&str] = &[$(#[cfg(not(feature = $feature))] $feature,)*];
                Err(unknown_backend(value, compiled, missing))
            }
        }

        impl LogConfig {
            /// The same log, opened as it is for tools that only read: nothing is created or
            /// migrated, the partition count is taken as found, and appends and reclaims fail
            /// ([`Error::Unsupported`]). See each backend's `read_only` setting.
            pub fn read_only(self) -> Self {
                match self {
                    $(#[cfg(feature = $feature)] LogConfig::$variant(c) => LogConfig::$variant(BackendConfig::read_only(unbox!($held, c)).into()),)*
                }
            }

            /// The same log with `partitions` partitions (buckets on Fluss): for a tool that
            /// learnt the count of an existing log and opens it for writing.
            #[allow(unused_variables, reason = "unused when no backend is compiled in")]
            pub fn with_partitions(self, partitions: u32) -> Self {
                match self {
                    $(
                        #[cfg(feature = $feature)]
                        LogConfig::$variant(c) => {
                            LogConfig::$variant(BackendConfig::with_partitions(unbox!($held, c), partitions).into())
                        }
                    )*
                }
            }

            /// The partitions a log created from this configuration gets.
            pub fn partitions(&self) -> u32 {
                match *self {
                    $(#[cfg(feature = $feature)] LogConfig::$variant(ref c) => BackendConfig::partitions(config_ref!($held, c)),)*
                }
            }
        }

        /// The log's name: `file:DIR`, `memory:N`, and for Kafka and Fluss the whole URL an
        /// operator passes back to any command (`kafka://SERVERS/TOPIC?...`,
        /// `fluss://SERVERS/DATABASE/TABLE?...` with every parameter that is not at its
        /// default; see `KafkaConfig`'s and `FlussConfig`'s `Display`). Never a secret: a
        /// password is named by reference (`password_env=VAR`, `password_file=PATH`).
        #[allow(unused_variables, reason = "unused when no backend is compiled in")]
        impl fmt::Display for LogConfig {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match *self {
                    $(#[cfg(feature = $feature)] LogConfig::$variant(ref c) => write!(f, "{}", config_ref!($held, c)),)*
                }
            }
        }

        /// Opens the log `config` names.
        pub async fn open(config: &LogConfig) -> Result<AnyLog> {
            match *config {
                $(#[cfg(feature = $feature)] LogConfig::$variant(ref c) => Ok(AnyLog::$variant(config_ref!($held, c).open().await?)),)*
            }
        }

        #[allow(unused_variables, reason = "unused when no backend is compiled in")]
        impl StateLog for AnyLog {
            fn identity(&self) -> &LogIdentity {
                match *self {
                    $(#[cfg(feature = $feature)] AnyLog::$variant(ref log) => log.identity(),)*
                }
            }

            async fn current_identity(&self) -> Result<LogIdentity, Error> {
                match *self {
                    $(#[cfg(feature = $feature)] AnyLog::$variant(ref log) => log.current_identity().await,)*
                }
            }

            async fn append(&self, record: WireRecord) -> Result<Position, Error> {
                match *self {
                    $(#[cfg(feature = $feature)] AnyLog::$variant(ref log) => log.append(record).await,)*
                }
            }

            async fn earliest_offsets(&self) -> Result<Vec<u64>, Error> {
                match *self {
                    $(#[cfg(feature = $feature)] AnyLog::$variant(ref log) => log.earliest_offsets().await,)*
                }
            }

            async fn end_offsets(&self) -> Result<Vec<u64>, Error> {
                match *self {
                    $(#[cfg(feature = $feature)] AnyLog::$variant(ref log) => log.end_offsets().await,)*
                }
            }

            async fn offsets(&self) -> Result<(Vec<u64>, Vec<u64>), Error> {
                match *self {
                    $(#[cfg(feature = $feature)] AnyLog::$variant(ref log) => log.offsets().await,)*
                }
            }

            async fn read(&self, partition: u32, from: u64, to: u64, max: usize) -> Result<ReadBatch, Error> {
                match *self {
                    $(#[cfg(feature = $feature)] AnyLog::$variant(ref log) => log.read(partition, from, to, max).await,)*
                }
            }

            fn capabilities(&self) -> actionstate_core::Capabilities {
                match *self {
                    $(#[cfg(feature = $feature)] AnyLog::$variant(ref log) => log.capabilities(),)*
                }
            }

            async fn reclaim(&self, before: &[u64]) -> Result<Vec<u64>, Error> {
                match *self {
                    $(#[cfg(feature = $feature)] AnyLog::$variant(ref log) => log.reclaim(before).await,)*
                }
            }
        }

        /// (feature, scheme) of every backend compiled in, for the test that they agree.
        #[cfg(test)]
        fn compiled_schemes() -> Vec<(&'static str, &'static str)> {
            let schemes: &[(&'static str, &'static str)] =
                &[$(#[cfg(feature = $feature)] ($feature, <config_of!$held as BackendConfig>::SCHEME),)*];
            schemes.to_vec()
        }
    };
}
use backends;

/// The configuration type of a `backends!` line's variant: `(Box<C>)` or `(C)` is `C`.
#[allow(unused_macros, reason = "unused when no backend is compiled in")]
macro_rules! config_of {
    (Box<$config:ty>) => {
        $config
    };
    ($config:ty) => {
        $config
    };
}
#[allow(unused_imports, reason = "unused when no backend is compiled in")]
use config_of;

/// The configuration a variant holds, by value: `*c` when boxed.
#[allow(unused_macros, reason = "unused when no backend is compiled in")]
macro_rules! unbox {
    ((Box<$config:ty>), $c:expr) => {
        *$c
    };
    (($config:ty), $c:expr) => {
        $c
    };
}
#[allow(unused_imports, reason = "unused when no backend is compiled in")]
use unbox;

/// A reference to the configuration a variant holds (`&C` from `&Box<C>` or `&C`).
#[allow(unused_macros, reason = "unused when no backend is compiled in")]
macro_rules! config_ref {
    ($held:tt, $c:expr) => {{
        let config: &config_of!$held = $c;
        config
    }};
}
#[allow(unused_imports, reason = "unused when no backend is compiled in")]
use config_ref;

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    fn parse(value: &str) -> Result<LogConfig> {
        value.parse()
    }

    #[cfg(all(feature = "file", feature = "kafka", feature = "fluss", feature = "memory"))]
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
        assert_eq!(parse("memory:3").unwrap(), LogConfig::Memory(actionstate_memory::MemoryConfig::new(3)));
        let text = parse("kafka://h:1/t?partitions=0").unwrap_err().to_string();
        assert!(text.contains("positive integer"), "{text}");
        let text = parse("redis://h:1/t").unwrap_err().to_string();
        assert!(text.contains("unknown backend"), "{text}");
        assert!(
            text.contains(
                "expected `file:DIR`, `kafka://HOST:PORT/TOPIC`, `fluss://HOST:PORT/DATABASE/TABLE` or `memory[:N]`"
            ) && !text.contains("not compiled in"),
            "{text}"
        );
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

    #[cfg(not(feature = "kafka"))]
    #[test]
    fn an_unknown_backend_names_the_ones_compiled_in_and_the_features_of_the_others() {
        let text = parse("redis://h:1/t").unwrap_err().to_string();
        assert!(text.contains("unknown backend; expected `file:DIR`"), "{text}");
        assert!(text.contains("not compiled in: `kafka`"), "{text}");
        assert!(text.contains("cargo feature of its name"), "{text}");
    }

    #[test]
    fn every_backend_is_named_by_its_feature_and_its_url_reads_back() {
        let schemes = compiled_schemes();
        assert!(schemes.len() >= 2, "{schemes:?}");
        for (feature, scheme) in schemes {
            assert_eq!(feature, scheme, "the `{feature}` backend's scheme");
        }
        for url in ["file:d", "memory:3", "memory"] {
            let config = parse(url).unwrap();
            assert_eq!(parse(&config.to_string()).unwrap(), config, "{url}");
            assert_eq!(config.clone().with_partitions(5).partitions(), 5, "{url}");
        }
        assert_eq!(parse("memory").unwrap().to_string(), format!("memory:{DEFAULT_PARTITIONS}"));
        assert_eq!(parse("file:d").unwrap().partitions(), DEFAULT_PARTITIONS);
    }

    #[cfg(feature = "memory")]
    #[tokio::test]
    async fn a_memory_url_opens_a_new_empty_log() {
        let config = parse("memory:3").unwrap();
        let (a, b) = (open(&config).await.unwrap(), open(&config).await.unwrap());
        assert!(matches!(a, AnyLog::Memory(_)), "{a:?}");
        assert_eq!(a.identity().partitions, 3);
        assert_ne!(a.identity(), b.identity());
        assert_eq!(a.end_offsets().await.unwrap(), vec![0; 3]);
        let text = parse("memory:x").unwrap_err().to_string();
        assert!(text.contains("`memory:N` takes a partition count"), "{text}");
    }
}
