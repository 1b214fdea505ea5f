//! Checkpoints: their two forms, how a store writes them, and how a restore finds and rebuilds
//! from them (docs/design.md, sections 5.6 and 6).
//!
//! - `form.rs`: the forms in types ([`CheckpointForm`](form::CheckpointForm),
//!   [`InLog`](form::InLog), [`TwoPhase`](form::TwoPhase)); a store of one form has no method
//!   of the other.
//! - `in_log.rs`: checkpoints the store writes into its log (`checkpoint`, `checkpoint_with`).
//! - `two_phase.rs`: checkpoints the runtime keeps (`snapshot`, `checkpoint_complete`,
//!   `checkpoint_aborted`).
//! - `partition.rs`: the one reader of the checkpoint partition (partition 0): its backward
//!   windows, its landmarks (fences, commits, rollbacks, completed checkpoints kept outside
//!   the log), the compact commit both restore and the shared reclaim judge, and the rule that
//!   voids a replaced owner's commit.
//! - `restore.rs`: `restore`, `RestoreFrom`, `RestorePoint`: which checkpoint serves each owned
//!   key group, and loading its parts.
//! - `coverage.rs`: which owned key groups a checkpoint read so far serves; `floors.rs`: the
//!   per-key floor of a restore that combines several owners' checkpoints.
//! - `rebuild.rs`: the rebuild from the checkpoints' markers to the end of the log.

pub(crate) mod coverage;
pub(crate) mod floors;
pub(crate) mod form;
pub(crate) mod in_log;
pub(crate) mod partition;
pub(crate) mod rebuild;
pub(crate) mod restore;
pub(crate) mod two_phase;
