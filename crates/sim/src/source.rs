//! Where a simulated process gets its log: [`LogSource`], opened again after every crash.

use actionstate_core::StateLog;
use actionstate_recovery::{AnyLog, LogConfig, StoreError};
use std::future::Future;

/// Opens the log a simulated process uses; called again after every crash.
pub trait LogSource: Send + Sync {
    /// The log type.
    type Log: StateLog;
    /// Backend name for reports.
    fn backend(&self) -> &'static str;
    /// Opens (or reopens) the log.
    fn open(&self) -> impl Future<Output = Result<Self::Log, StoreError>> + Send;
}

/// The log a URL names ([`LogConfig`]): every open, and every reopen after a crash, opens it
/// again, creating it on the first open. `memory` is refused: a memory log opened from a URL
/// would start empty at every reopen (use [`MemorySource`]).
impl LogSource for LogConfig {
    type Log = AnyLog;
    fn backend(&self) -> &'static str {
        match self {
            #[cfg(feature = "kafka")]
            LogConfig::Kafka(_) => "kafka",
            #[cfg(feature = "fluss")]
            LogConfig::Fluss(_) => "fluss",
            LogConfig::Memory { .. } => "memory",
            _ => "file",
        }
    }
    async fn open(&self) -> Result<Self::Log, StoreError> {
        if let LogConfig::Memory { .. } = self {
            return Err(StoreError::Config {
                value: self.to_string(),
                detail: "a memory log does not survive a reopen; simulate on it through MemorySource".into(),
            });
        }
        // On the heap: the opening futures of every backend would otherwise sit inline in
        // every attempt's future.
        Box::pin(actionstate_recovery::open(self)).await
    }
}

/// The in-memory log (records survive "crashes" because the source keeps them).
#[derive(Clone, Debug)]
pub struct MemorySource {
    /// The shared log.
    pub log: actionstate_memory::MemoryLog,
}

impl LogSource for MemorySource {
    type Log = actionstate_memory::MemoryLog;
    fn backend(&self) -> &'static str {
        "memory"
    }
    async fn open(&self) -> Result<Self::Log, StoreError> {
        Ok(self.log.reopen())
    }
}
