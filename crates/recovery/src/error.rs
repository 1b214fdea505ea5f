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
    /// A restore was asked for a checkpoint the log does not hold for every key group of the
    /// ownership (the id was never written, or its records were reclaimed).
    #[error("no complete checkpoint {id} for {ownership} in partition {partition} from offset {earliest} to {end}")]
    CheckpointNotFound {
        /// The checkpoint id asked for.
        id: u64,
        /// The ownership restored.
        ownership: actionstate_core::Ownership,
        /// The checkpoint partition.
        partition: u32,
        /// Where its retained records start.
        earliest: u64,
        /// Its end when the restore started.
        end: u64,
    },
    /// A checkpoint's commit is in the log but not all of its parts are between the offset
    /// its commit names and the commit: the log lost records (a broken backend, or records
    /// removed by hand).
    #[error(
        "checkpoint {id} of {owner} (epoch {epoch}) at partition {partition} offset {offset} has {found} of its \
         {expected} parts between offsets {from} and {offset}"
    )]
    CheckpointIncomplete {
        /// The checkpoint id.
        id: u64,
        /// The owner that wrote it.
        owner: actionstate_core::Ownership,
        /// Its writer epoch.
        epoch: u64,
        /// The checkpoint partition.
        partition: u32,
        /// The commit's offset.
        offset: u64,
        /// Where its parts start at the earliest.
        from: u64,
        /// Parts the commit counts.
        expected: u32,
        /// Distinct parts found.
        found: u32,
    },
    /// The log's checkpoints divide the keys into key groups in a way the restore cannot
    /// combine: group ranges of another number of groups than the ownership restored.
    #[error(
        "checkpoint {id} at partition {partition} offset {offset} covers {owner}, which cannot be combined with {ownership}"
    )]
    MixedKeyGroups {
        /// The checkpoint's id.
        id: u64,
        /// Its owner.
        owner: actionstate_core::Ownership,
        /// The ownership restored.
        ownership: actionstate_core::Ownership,
        /// The checkpoint partition.
        partition: u32,
        /// The commit's offset.
        offset: u64,
    },
    /// A rebuild task failed to run to completion.
    #[error("rebuild task failed: {0}")]
    Task(String),
    /// Work on a key the store does not own: its key group lies outside the store's groups.
    /// Two owners writing one key is the split brain that fencing exists to prevent, so
    /// `begin`, durable calls and `complete` refuse it before writing anything.
    #[error("key {key} is in key group {group} of {max_groups}, which this store does not own (it owns {owned})")]
    NotOwned {
        /// The key.
        key: actionstate_core::KeyId,
        /// Its key group among `max_groups`.
        group: u16,
        /// The number of key groups.
        max_groups: u16,
        /// The store's ownership.
        owned: actionstate_core::Ownership,
    },
    /// The arguments of a durable call could not be encoded canonically for their digest.
    #[error("the arguments of durable call `{function}` could not be encoded for their digest: {detail}")]
    Args {
        /// The call's function id.
        function: String,
        /// Why encoding failed.
        detail: String,
    },
    /// No wait of this store's has the token: it never existed, an invalidation voided it (a
    /// divergence, an operator's repair), or its action completed. Nothing was written.
    #[error("no wait of key {key} has this token: unknown, voided by an invalidation, or its action completed")]
    UnknownWait {
        /// The key the token names.
        key: actionstate_core::KeyId,
    },
    /// A reply or rejection larger than [`MAX_WAIT_REPLY`](actionstate_core::MAX_WAIT_REPLY).
    /// Nothing was written.
    #[error("a wait's reply of {len} bytes exceeds {max}")]
    WaitReplyTooLarge {
        /// Its length.
        len: usize,
        /// The most a wait records.
        max: usize,
    },
    /// A text that is not a wait token (the reason, never the text).
    #[error("not a wait token: {0}")]
    BadWaitToken(#[from] actionstate_core::BadWaitToken),
    /// The handle's action suspended on a durable wait: it does nothing more until the runtime
    /// begins it again.
    #[error("the action of {key:?} suspended on a wait; begin it again once the wait is resolved")]
    Suspended {
        /// The state.
        key: StateKey,
    },
    /// Typed checkpoint metadata could not be encoded, or the metadata restored does not
    /// decode as the type asked for.
    #[error("checkpoint metadata as `{type_name}` ({len} bytes): {detail}")]
    Metadata {
        /// The type asked for.
        type_name: &'static str,
        /// The bytes restored (0 when encoding failed).
        len: usize,
        /// Why it failed.
        detail: String,
    },
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
