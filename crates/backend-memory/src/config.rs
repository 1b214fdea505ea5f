//! [`MemoryConfig`]: how many partitions a new in-memory log gets, and its URL grammar
//! (`memory[:N]`).

use crate::open::MemoryLog;
use actionstate_core::url::LogUrl;
use actionstate_core::{BackendConfig, DEFAULT_PARTITIONS, Error};
use std::fmt;

/// Which in-memory log to open: every [`open`](BackendConfig::open) makes a new, empty
/// [`MemoryLog`] with `partitions` partitions (share one log between opens through
/// [`MemoryLog::reopen`] instead).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryConfig {
    /// Partitions of the log (at least 1 is made).
    pub partitions: u32,
}

impl MemoryConfig {
    /// A configuration of `partitions` partitions.
    pub fn new(partitions: u32) -> Self {
        MemoryConfig { partitions }
    }

    /// The configuration a log URL names: `memory` ([`DEFAULT_PARTITIONS`] partitions) or
    /// `memory:N` (`N` partitions; `memory:0` makes one). It takes no parameters.
    ///
    /// Errors are [`Error::BadUrl`].
    pub fn from_url(text: &str) -> Result<MemoryConfig, Error> {
        if text.trim() == "memory" {
            return Ok(MemoryConfig::new(DEFAULT_PARTITIONS));
        }
        let url = LogUrl::parse(text)?;
        if url.scheme() != "memory" || !url.authority().is_empty() {
            return Err(url.error("expected `memory` or `memory:N`"));
        }
        let partitions = match url.path() {
            "" => DEFAULT_PARTITIONS,
            n => n.parse::<u32>().map_err(|_| url.error("`memory:N` takes a partition count"))?,
        };
        url.finish()?;
        Ok(MemoryConfig::new(partitions.max(1)))
    }
}

/// `memory:N`.
impl fmt::Display for MemoryConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "memory:{}", self.partitions)
    }
}

impl BackendConfig for MemoryConfig {
    type Log = MemoryLog;
    const SCHEME: &'static str = "memory";
    const URL_FORM: &'static str = "memory[:N]";

    fn from_url(url: &str) -> Result<Self, Error> {
        MemoryConfig::from_url(url)
    }

    /// Itself: a log opened from it is new and empty, so there is nothing to keep unchanged.
    fn read_only(self) -> Self {
        self
    }

    fn with_partitions(self, partitions: u32) -> Self {
        MemoryConfig { partitions }
    }

    fn partitions(&self) -> u32 {
        self.partitions
    }

    fn open(&self) -> impl Future<Output = Result<MemoryLog, Error>> + Send {
        std::future::ready(Ok(MemoryLog::new(self.partitions)))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    #[test]
    fn a_memory_url_names_its_partitions_and_reads_back() {
        assert_eq!(MemoryConfig::from_url("memory").unwrap().partitions, DEFAULT_PARTITIONS);
        assert_eq!(MemoryConfig::from_url(" memory: ").unwrap().partitions, DEFAULT_PARTITIONS);
        assert_eq!(MemoryConfig::from_url("memory:3").unwrap(), MemoryConfig::new(3));
        assert_eq!(MemoryConfig::from_url("memory:0").unwrap(), MemoryConfig::new(1));
        let shown = MemoryConfig::new(5).to_string();
        assert_eq!((shown.as_str(), MemoryConfig::from_url(&shown).unwrap()), ("memory:5", MemoryConfig::new(5)));
        for bad in ["memory:x", "memory:-1", "memory://h/3", "memory:2?partitions=3", "file:d"] {
            assert!(matches!(MemoryConfig::from_url(bad), Err(Error::BadUrl { .. })), "{bad}");
        }
        let text = MemoryConfig::from_url("memory:x").unwrap_err().to_string();
        assert!(text.contains("`memory:N` takes a partition count"), "{text}");
    }
}
