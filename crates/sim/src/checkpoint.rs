//! Checkpoints: what a completed one holds, where they are kept, which ones retention keeps,
//! and taking one (snapshots of every store, some aborted).

use crate::attempt::{Attempt, Parked};
use crate::crash::Crashes;
use crate::outcome::{Outcome, SimError, crash_or};
use crate::plan::{SimConfig, mix};
use crate::results::Memory;
use crate::source::LogSource;
use actionstate_core::{KeyId, Marker};
use actionstate_recovery::{Retention, Snapshot, StoreConfig};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

/// A completed checkpoint: the runtime's own state (input position, next sequence number per
/// key, memory, the rounds that wait and the inputs queued behind them) and the store's (every owner's marker, and the last completed round per key).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Checkpoint {
    pub(crate) id: u64,
    pub(crate) pos: usize,
    pub(crate) next_seq: HashMap<KeyId, u64>,
    pub(crate) memory: Memory,
    pub(crate) markers: Vec<Marker>,
    pub(crate) completed: HashMap<KeyId, u64>,
    #[serde(default)]
    pub(crate) parked: BTreeMap<KeyId, Parked>,
    #[serde(default)]
    pub(crate) deferred: BTreeMap<KeyId, VecDeque<(u32, i64)>>,
    /// The runtime's clock when the checkpoint was taken (0: before the clock was kept).
    #[serde(default)]
    pub(crate) clock_ms: u64,
}

impl Checkpoint {
    /// The last round of every key the checkpoint's inputs had finished (the stores'
    /// `completed` maps leave out keys with nothing left to restore).
    pub(crate) fn rounds_done(&self) -> HashMap<KeyId, u64> {
        self.next_seq.iter().filter_map(|(k, n)| n.checked_sub(1).map(|s| (*k, s))).collect()
    }

    /// The checkpoint as the snapshots a restore starts from: one per owner's marker. The
    /// owners' completed rounds were merged when the checkpoint was kept, and a restore
    /// combines its snapshots' by the latest round per key, so every snapshot carries the
    /// merged map (shared): the restore prunes exactly the rounds the checkpoint completed.
    pub(crate) fn snapshots(&self) -> Vec<Snapshot> {
        let completed = Arc::new(self.completed.clone());
        self.markers
            .iter()
            .map(|marker| Snapshot { checkpoint: self.id, marker: marker.clone(), completed: Arc::clone(&completed) })
            .collect()
    }
}

/// Where completed checkpoints are kept: in memory by [`Sim::run`](crate::Sim::run), in a
/// directory by [`Sim::run_attempt`](crate::Sim::run_attempt). A checkpoint is kept before the
/// stores are told it completed.
pub(crate) trait KeepCheckpoints: Send {
    fn keep(&mut self, checkpoint: &Checkpoint) -> std::io::Result<()>;
}

impl KeepCheckpoints for Vec<Checkpoint> {
    fn keep(&mut self, checkpoint: &Checkpoint) -> std::io::Result<()> {
        self.push(checkpoint.clone());
        Ok(())
    }
}

/// The id of the oldest checkpoint the stores' retention keeps (`None`: all of them), given
/// the ids of the completed checkpoints in completion order.
pub(crate) fn retained_floor(completed: &[u64]) -> Option<u64> {
    match StoreConfig::default().retention {
        Retention::KeepAll => None,
        Retention::LastCheckpoints(n) => completed.iter().rev().nth(n.max(1) as usize - 1).copied(),
    }
}

/// Takes checkpoint `id` of attempt `a`: snapshots every store, then aborts it (every
/// `abort_every`-th, by the seed) or keeps it in `keep` and completes it.
pub(crate) async fn take<S: LogSource>(
    config: &SimConfig,
    a: &mut Attempt<S>,
    id: u64,
    crashes: &Crashes,
    outcome: &mut Outcome,
    keep: &mut dyn KeepCheckpoints,
) -> Result<(), SimError> {
    crashes.operation()?;
    let mut snapshots = Vec::new();
    for store in &a.stores {
        snapshots.push(store.snapshot(id).await.map_err(|e| crash_or(e, crashes))?);
    }
    outcome.checkpoints += 1;
    a.checkpoint_id = id + 1;
    let abort = config.abort_every > 0 && id > 0 && mix(config.seed, 0x2, id).is_multiple_of(config.abort_every);
    if abort {
        for store in &a.stores {
            store.checkpoint_aborted(id);
        }
        return Ok(());
    }
    let mut completed = HashMap::new();
    for s in &snapshots {
        completed.extend(s.completed.iter().map(|(k, v)| (*k, *v)));
    }
    let cp = Checkpoint {
        id,
        pos: a.pos,
        next_seq: a.next_seq.clone(),
        memory: a.memory.clone(),
        markers: snapshots.into_iter().map(|s| s.marker).collect(),
        completed,
        parked: a.parked.clone(),
        deferred: a.deferred.clone(),
        clock_ms: a.clock.now_ms(),
    };
    keep.keep(&cp)?;
    for store in &a.stores {
        store.checkpoint_complete(id);
    }
    outcome.completed_ids.push(id);
    Ok(())
}
