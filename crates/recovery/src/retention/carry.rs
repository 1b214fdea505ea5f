//! Carrying long-lived states forward (docs/design.md, section 6): a state lives as long as
//! its round, and a round waiting for a person may live for days. Its record would hold its
//! partition's reclaim point there, and the log would grow with the history after it. Before
//! a checkpoint, the states whose records lag more than
//! [`StoreConfig::carry_forward_after`](crate::StoreConfig::carry_forward_after) records
//! behind their partition's end are appended again, unchanged, at the end; the checkpoint's
//! marker then lies past their old records, and retention reclaims those.
//!
//! A carried state is the same record: its waits keep their secrets, deadlines and outcomes,
//! and a replay of the old record and the new one ends where a replay of either does. A
//! resolve request for a carried wait may lie between the two records: a checkpoint's marker
//! never passes a request not read yet in a partition that holds a pending wait (`Shared::
//! covering_marker`, below), and a checkpoint reads the requests (`poll_resolutions`) before it
//! carries.

use crate::checkpoint::form::CheckpointForm;
use crate::error::Result;
use crate::store::{ActionStateStore, Shared};
use actionstate_core::{LogIdentity, Marker, StateLog};

impl<L: StateLog, F: CheckpointForm> ActionStateStore<L, F> {
    /// What a checkpoint does first: reads the resolve requests if a wait is pending (so that
    /// the marker may pass what it read), then carries the lagging states forward. Returns how
    /// many states it carried.
    pub(crate) async fn before_checkpoint(&self) -> Result<usize> {
        let waiting = self.shared.lock().waits.all().any(|(_, w)| w.outcome.is_none());
        if waiting {
            self.poll_resolutions().await?;
        }
        self.carry_forward().await
    }

    /// Appends again, unchanged, every state whose record lags more than the configured
    /// distance behind its partition's end as the last snapshot read it (half of it is left
    /// behind, so that a carried state is written again only after as many records more).
    async fn carry_forward(&self) -> Result<usize> {
        let lag = self.config.carry_forward_after;
        let lagging = {
            let sh = self.shared.lock();
            if lag == 0 || sh.last_end.is_empty() {
                return Ok(0);
            }
            let covering = sh.index.covering_offsets(&sh.last_end);
            let below: Vec<u64> = covering
                .iter()
                .zip(&sh.last_end)
                .map(|(&oldest, &end)| if end.saturating_sub(oldest) > lag { end - lag / 2 } else { 0 })
                .collect();
            if below.iter().all(|&b| b == 0) {
                return Ok(0);
            }
            (sh.index.living_below(&below), below)
        };
        let (states, below) = lagging;
        let mut carried = 0;
        for sk in states {
            let _epoch = self.epoch.read().await;
            let _key = self.keys.lock(sk.key).await;
            // The state as it is now, if it still lags: its action may have written since.
            let current = {
                let sh = self.shared.lock();
                let lags = sh
                    .index
                    .position(&sk)
                    .is_some_and(|at| below.get(at.partition as usize).is_some_and(|&b| at.offset < b));
                match sh.index.get(&sk) {
                    Some(recorded) if lags => Some(recorded.state()?),
                    _ => None,
                }
            };
            if let Some(state) = current {
                self.put_locked((*state).clone()).await?;
                carried += 1;
            }
        }
        if carried > 0 {
            crate::metrics::carried(carried as u64);
            tracing::debug!(carried, "states carried forward past the retention lag");
        }
        Ok(carried)
    }
}

impl Shared {
    /// The covering marker of the index for `end`, with its fences. In a partition that holds
    /// a pending wait it never passes a resolve request not read yet: a carried wait may lie
    /// after requests for it (`retention/carry.rs`), which a restore must read.
    pub(crate) fn covering_marker(&self, log: &LogIdentity, end: &[u64]) -> Marker {
        let mut marker = self.index.marker(log, end);
        for (_, w) in self.waits.all().filter(|(_, w)| w.outcome.is_none()) {
            let p = w.state.key.partition(log.partitions) as usize;
            if let (Some(o), Some(&read)) = (marker.offsets.get_mut(p), self.requests.read_to.get(p)) {
                *o = (*o).min(read);
            }
        }
        marker.fences = self.fencing.marks_for(&marker.offsets);
        marker
    }
}
