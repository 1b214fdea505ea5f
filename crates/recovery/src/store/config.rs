//! The tuning of a store: rebuild reads and limits, pending checkpoints, retention, fencing.

use crate::retention::Retention;
use crate::waits::clock::Clock;
use std::time::Duration;

/// The default of [`StoreConfig::carry_forward_after`], in records of a partition.
pub const DEFAULT_CARRY_FORWARD_AFTER: u64 = 100_000;

/// Tuning of an [`ActionStateStore`](crate::ActionStateStore).
#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// Records per read call during rebuild.
    pub read_batch: usize,
    /// A rebuild read that does not return within this long fails the rebuild with
    /// [`StoreError::RebuildStalled`](crate::StoreError::RebuildStalled). (A read that returns
    /// an empty batch without advancing breaks the [`StateLog`](actionstate_core::StateLog)
    /// contract and fails the rebuild at once with
    /// [`actionstate_core::Error::NoProgress`].) A stalled read is given one more such period
    /// to return (its backend may hold files open until it does) before it is abandoned, so a
    /// failed rebuild reports its failure at most twice this long after it happened.
    pub rebuild_stall: Duration,
    /// A rebuild that has not read every partition to its end within this time fails with
    /// [`StoreError::RebuildDeadline`](crate::StoreError::RebuildDeadline), naming the
    /// unfinished partitions (`None`: no limit beyond the per-read stall).
    pub rebuild_deadline: Option<Duration>,
    /// Checkpoints snapshotted but neither completed nor aborted that are remembered; older
    /// ones are forgotten (as if aborted), so the map stays bounded.
    pub max_pending_checkpoints: usize,
    /// How much history the log keeps: by default what the last
    /// [`DEFAULT_RETAINED_CHECKPOINTS`](crate::DEFAULT_RETAINED_CHECKPOINTS) completed
    /// checkpoints need (see [`Retention`]).
    pub retention: Retention,
    /// Whether a [`restore`](crate::ActionStateStore::restore) takes a new owner epoch and fences
    /// the writers before it (the default: a runtime's restore). `false` is for tools that
    /// are not an owner (an operator's repair, an inspection): the store then writes with the
    /// newest epoch it replayed over its keys (of the fences, and of the records, whose
    /// fences retention may have reclaimed) and appends no fence, so its records replay and
    /// nobody is fenced.
    pub fence_on_rebuild: bool,
    /// Goes into every durable call's idempotency key (see
    /// [`IdempotencyKey`](actionstate_core::IdempotencyKey)): deployments that call one
    /// service with the same business keys set different scopes, so that the service does not
    /// deduplicate one's calls against the other's. Empty by default: the key then depends on
    /// the history alone. Changing it changes the key of every call not yet journaled.
    pub call_key_scope: String,
    /// What durable waits are timed by: their start and deadline are recorded in the log, so by
    /// default the system's wall clock ([`Clock::System`]).
    pub clock: Clock,
    /// How far (in records) a partition's oldest live state may lag behind the partition's
    /// end before a checkpoint carries the lagging states forward: appends each again,
    /// unchanged, at the end, so that retention passes their old records (docs/design.md,
    /// section 6). A state lives long when its round does: an action waiting for a person, a
    /// round suspended. A carried state is written once per half this many records of the
    /// partition, so the log stays within about this many records of live work. 0 never
    /// carries (the oldest live state then holds its partition's reclaim point).
    pub carry_forward_after: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            read_batch: 4096,
            rebuild_stall: Duration::from_secs(30),
            rebuild_deadline: Some(Duration::from_secs(3600)),
            max_pending_checkpoints: 64,
            retention: Retention::default(),
            fence_on_rebuild: true,
            call_key_scope: String::new(),
            clock: Clock::System,
            carry_forward_after: DEFAULT_CARRY_FORWARD_AFTER,
        }
    }
}
