//! The error type of the store.

use actionstate_core::StateKey;

/// Everything the store can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The log failed (append, read, offsets) or a record failed to decode; see
    /// [`actionstate_core::Error`].
    #[error(transparent)]
    Log(#[from] actionstate_core::Error),
    /// A rebuild read of a partition made no progress within the configured time.
    #[error("rebuild of partition {partition} stalled at offset {offset} (end {end}) for {seconds}s")]
    RebuildStalled {
        /// The partition.
        partition: u32,
        /// Where reading stopped.
        offset: u64,
        /// The end offset captured at the start.
        end: u64,
        /// How long it made no progress.
        seconds: u64,
    },
    /// A rebuild did not finish within [`StoreConfig::rebuild_deadline`](crate::StoreConfig);
    /// `unfinished` names each partition still being read, with the offset it had reached and
    /// the end offset captured at the start.
    #[error("rebuild did not finish within {limit:?}; unfinished partitions (partition, reached, end): {unfinished:?}")]
    RebuildDeadline {
        /// The deadline.
        limit: std::time::Duration,
        /// (partition, offset reached, end offset) of every partition not read to its end.
        unfinished: Vec<(u32, u64, u64)>,
    },
    /// A durable call was made on a state that is not the one the handle was begun for.
    #[error("action handle for {key:?} is stale: {detail}")]
    StaleHandle {
        /// The state.
        key: StateKey,
        /// What is wrong.
        detail: &'static str,
    },
    /// A configuration value could not be understood.
    #[error("invalid log configuration `{value}`: {detail}")]
    Config {
        /// The value, with any secret it carries shown as `***` (`url::redact`).
        value: String,
        /// What is wrong.
        detail: String,
    },
    /// The log holds records of one business key in two partitions (a backend broke the
    /// one-partition-per-key rule).
    #[error("records of key {key} found in partition {partition} and in another partition")]
    KeyInTwoPartitions {
        /// The key.
        key: actionstate_core::KeyId,
        /// One of the partitions.
        partition: u32,
    },
    /// A newer owner restored key groups this store owns: the store is a zombie. Nothing it
    /// appended after that owner's fence is replayed by any later rebuild, and it refuses
    /// every further write and snapshot (see `ActionStateStore::check_fenced`). Rebuilding
    /// it takes a new epoch (and fences the other owner in turn): do that only as the
    /// runtime's restore of an attempt that owns the keys.
    #[error(
        "fenced: {groups} were restored by a newer owner (epoch {}); this store writes with epoch {epoch} \
         and no record it appends is replayed any more",
        fenced_by.map_or_else(|| "unknown: its fence was reclaimed".to_owned(), |e| e.to_string())
    )]
    Fenced {
        /// The keys of this store the newer owner holds.
        groups: actionstate_core::Ownership,
        /// This store's writer epoch.
        epoch: u64,
        /// The newer owner's epoch; `None` when the log reclaimed history this store had not
        /// read, fence records included (see `ActionStateStore::check_fenced`).
        fenced_by: Option<u64>,
    },
    /// A rebuild task failed to run to completion.
    #[error("rebuild task failed: {0}")]
    Task(String),
}

impl StoreError {
    /// Whether retrying the operation may succeed (a transient backend failure).
    pub fn is_retryable(&self) -> bool {
        match self {
            StoreError::Log(e) => e.is_retryable(),
            StoreError::RebuildStalled { .. } | StoreError::RebuildDeadline { .. } => true,
            _ => false,
        }
    }
}

/// Result alias of the store.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
