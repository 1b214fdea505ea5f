//! What the offline commands that write (`reset`, `resolve`) share: an index of the whole log
//! rebuilt by a store that owns every key and fences nobody, and the log opened for writing
//! only once the plan made on the read-only log says there is something to write (a data
//! directory opened for writing changes its file's bytes).

use actionstate_core::{Marker, StateLog};
use actionstate_recovery::{ActionStateStore, AnyLog, Ownership, Retention, Snapshot, StoreConfig, TwoPhase};
use anyhow::{Context, Result};
use std::sync::Arc;

/// A store over every retained record of `log` (every key, nothing pruned; it takes no
/// checkpoint, so it never reclaims), and the number of records its rebuild read.
pub(crate) async fn whole<L: StateLog>(log: L) -> Result<(ActionStateStore<L, TwoPhase>, u64)> {
    // An operator is not an owner: what it writes carries the newest epoch and fences nobody.
    let config = StoreConfig { retention: Retention::KeepAll, fence_on_rebuild: false, ..StoreConfig::default() };
    let earliest = log.earliest_offsets().await?;
    let start =
        Snapshot { checkpoint: 0, marker: Marker::new(log.identity().clone(), earliest), completed: Arc::default() };
    let (store, restored) =
        ActionStateStore::restore(log, config, &Ownership::All, &[start]).await.context("rebuilding the index")?;
    Ok((store, restored.rebuild.records))
}

/// Opens the log `url` names for writing, with the partition count it has.
pub(crate) async fn open_for_writing(url: &str, partitions: u32) -> Result<AnyLog> {
    let config = crate::inspect::config(url)?.with_partitions(partitions);
    actionstate_recovery::open(&config).await.map_err(|e| {
        crate::hint::with_hint(anyhow::Error::new(e).context(format!("opening {config} for writing")), &config)
    })
}
