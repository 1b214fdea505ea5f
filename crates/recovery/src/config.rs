//! Choosing a backend at run time: [`LogConfig`], [`open`] and [`AnyLog`].

use crate::error::{Result, StoreError};
use actionstate_core::{Error, LogIdentity, Position, ReadBatch, StateLog, WireRecord};
use std::path::PathBuf;
use std::str::FromStr;

/// Which backend to open, and where.
///
/// Parsed from a string (`FromStr`):
/// - `file:PATH` or `file:PATH?partitions=N` — the embedded default (feature `file`);
/// - `memory` or `memory:N` — the in-memory log of the test kit (feature `testkit`).
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
}

/// Partitions of a log created without an explicit count.
pub const DEFAULT_PARTITIONS: u32 = 8;

impl FromStr for LogConfig {
    type Err = StoreError;

    fn from_str(value: &str) -> Result<Self> {
        let bad = |detail: &str| StoreError::Config { value: value.to_owned(), detail: detail.to_owned() };
        let (scheme, rest) = value.split_once(':').unwrap_or((value, ""));
        match scheme {
            "file" => {
                let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
                if path.is_empty() {
                    return Err(bad("`file:` needs a directory, e.g. `file:./actionstate-data`"));
                }
                let partitions = match query.strip_prefix("partitions=") {
                    Some(n) => n.parse().map_err(|_| bad("partitions must be a positive integer"))?,
                    None if query.is_empty() => DEFAULT_PARTITIONS,
                    None => return Err(bad("the only option is `partitions=N`")),
                };
                if partitions == 0 {
                    return Err(bad("partitions must be a positive integer"));
                }
                Ok(LogConfig::File { dir: PathBuf::from(path), partitions })
            }
            "memory" => {
                let partitions = if rest.is_empty() {
                    DEFAULT_PARTITIONS
                } else {
                    rest.parse().map_err(|_| bad("`memory:N` takes a partition count"))?
                };
                Ok(LogConfig::Memory { partitions: partitions.max(1) })
            }
            _ => Err(bad("unknown backend; expected `file:PATH` or `memory[:N]`")),
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
}
