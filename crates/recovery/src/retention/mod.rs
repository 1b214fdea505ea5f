//! Checkpoint-aligned retention (docs/design.md, section 6): the store keeps the log only as far
//! back as the last completed checkpoints need, and asks the backend to reclaim what lies
//! before, in the background.
//!
//! The reclaim point of a partition is the smallest offset among the covering markers of the
//! retained checkpoints, and never past the oldest record the index still holds.
//!
//! A store that owns every key reclaims from the checkpoints it completed itself. A store only
//! knows the checkpoints completed since it was created or rebuilt, so it reclaims only once
//! `n` of them have completed: until then an older checkpoint, completed by an earlier process,
//! may be among the last `n`, and its marker is not known here.
//!
//! Stores that share one log (owners of key groups) reclaim from the checkpoints every owner
//! wrote into the log (`ActionStateStore::checkpoint`): after each of its own, a store reads
//! the checkpoint partition backwards and takes, per key group, the last `n` checkpoints of
//! its current owner (see `owners.rs`). A group whose owner has not checkpointed yet holds
//! reclaim back, and [`ReclaimStatus::waiting`] names it. A shared store whose runtime keeps
//! its checkpoints (the two-phase form) reclaims the same way: once its runtime completes a
//! checkpoint, the reclaim job first appends the checkpoint's marker to the checkpoint
//! partition (`publish.rs`), where every owner's scan reads it as it reads a commit.
//!
//! What lives where: this file holds [`Retention`], the retained checkpoints' markers and the
//! background reclaimer with its status; `shared.rs` the incremental scan of partition 0 that
//! stores sharing a log reclaim by (its cache of compact landmarks); `owners.rs` the owners'
//! rule that turns the landmarks met newest first into a reclaim point; `publish.rs` the
//! record a two-phase owner appends so that the others learn its completed checkpoint;
//! `carry.rs` the long-lived states appended again before a checkpoint so that retention
//! passes their old records.

pub(crate) mod carry;
pub(crate) mod owners;
pub(crate) mod publish;
pub(crate) mod shared;

use crate::checkpoint::partition::Landmark;
use crate::metrics as m;
use crate::retention::owners::Outcome;
use crate::retention::shared::{Landmarks, SharedReclaim, shared_point};
use actionstate_core::{Marker, Ownership, StateLog};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;
use tracing::Instrument;

/// Checkpoints retained by default: a restore may go back this many completed checkpoints.
pub const DEFAULT_RETAINED_CHECKPOINTS: u32 = 3;

/// How much history a store keeps in its log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retention {
    /// Keep what the last `n` completed checkpoints need (at least one): once `n`
    /// checkpoints have completed since the store was created or rebuilt, the records below
    /// the oldest of their markers are reclaimed, and a restore of an older checkpoint fails
    /// with the data-loss error.
    LastCheckpoints(u32),
    /// Keep every record.
    KeepAll,
}

impl Default for Retention {
    fn default() -> Self {
        Retention::LastCheckpoints(DEFAULT_RETAINED_CHECKPOINTS)
    }
}

/// What the store's reclaiming has done, for operators ([`ActionStateStore::reclaim_status`]).
///
/// [`ActionStateStore::reclaim_status`]: crate::ActionStateStore::reclaim_status
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReclaimStatus {
    /// Why the store does not reclaim, when it does not: retention keeps everything, or the
    /// backend cannot reclaim.
    pub disabled: Option<&'static str>,
    /// Per partition, the offset below which the store last asked the backend to reclaim.
    pub requested: Option<Vec<u64>>,
    /// Per partition, the earliest offsets the backend reported after the last successful
    /// reclaim.
    pub earliest: Option<Vec<u64>>,
    /// Successful reclaims.
    pub reclaims: u64,
    /// Records reclaimed, summed over partitions (as the earliest offsets moved).
    pub records_reclaimed: u64,
    /// Failed reclaims; each is retried at the next completed checkpoint.
    pub failures: u64,
    /// The last failure, if the last reclaim failed.
    pub last_error: Option<String>,
    /// Whether a reclaim is running now.
    pub running: bool,
    /// Key groups whose current owner has not written a checkpoint into the log yet (a commit,
    /// or the marker of a completed checkpoint its runtime keeps), when stores share the log:
    /// nothing is reclaimed until each has one (empty otherwise).
    pub waiting: Vec<Ownership>,
}

/// The markers of the checkpoints completed since the store was created or rebuilt, newest
/// last, at most `n` of them.
#[derive(Debug, Default)]
pub(crate) struct Retained {
    markers: VecDeque<Marker>,
}

impl Retained {
    /// Notes a completed checkpoint's marker; returns the reclaim point once `n` checkpoints
    /// are retained: per partition, the smallest of their offsets.
    pub(crate) fn complete(&mut self, retention: Retention, marker: Marker) -> Option<Vec<u64>> {
        let Retention::LastCheckpoints(n) = retention else { return None };
        let n = usize::try_from(n.max(1)).unwrap_or(usize::MAX);
        // Markers of another log (the store was pointed elsewhere) cannot be compared.
        if self.markers.front().is_some_and(|m| m.log != marker.log) {
            self.markers.clear();
        }
        self.markers.push_back(marker);
        while self.markers.len() > n {
            self.markers.pop_front();
        }
        if self.markers.len() < n {
            return None;
        }
        Marker::merge(&self.markers).ok().flatten().map(|m| m.offsets)
    }

    /// Forgets every retained checkpoint (the store was rebuilt).
    pub(crate) fn clear(&mut self) {
        self.markers.clear();
    }
}

/// Runs reclaims in the background, one at a time; a request made while one runs replaces
/// any other waiting one.
#[derive(Debug, Default)]
pub(crate) struct Reclaimer {
    state: Mutex<State>,
    idle: tokio::sync::Notify,
    /// What the last shared reclaim read of partition 0, for the next one (`shared.rs`).
    landmarks: Mutex<Landmarks>,
}

#[derive(Debug, Default)]
struct State {
    status: ReclaimStatus,
    wanted: Option<Wanted>,
}

/// What a reclaim request asks for.
#[derive(Clone, Debug)]
enum Wanted {
    /// Reclaim below these offsets.
    Point(Vec<u64>),
    /// Find the point in the log's checkpoints first (stores sharing the log).
    Shared(SharedReclaim),
}

impl Reclaimer {
    pub(crate) fn status(&self) -> ReclaimStatus {
        self.state.lock().status.clone()
    }

    pub(crate) fn disable(&self, why: Option<&'static str>) {
        self.state.lock().status.disabled = why;
    }

    /// Asks for records below `point` to be reclaimed, unless the last successful reclaim
    /// already went that far. Starts a background task when none runs.
    pub(crate) fn request<L: StateLog>(self: &Arc<Self>, log: &Arc<L>, point: Vec<u64>) {
        let st = self.state.lock();
        if st.status.disabled.is_some() {
            return;
        }
        if st
            .status
            .earliest
            .as_ref()
            .is_some_and(|e| e.len() == point.len() && point.iter().zip(e).all(|(p, e)| p <= e))
        {
            return;
        }
        self.start(log, st, Wanted::Point(point));
    }

    /// Asks for a reclaim of a store that shares its log: the point is found in the log's
    /// checkpoints, in the background, after `job`'s publication is appended.
    ///
    /// A request replaces one still waiting. Its publication replaces the waiting one's too:
    /// a store's checkpoints complete in order, and the newer marker lies at or past the
    /// older, so leaving the older out only lets the scan count an older checkpoint of the
    /// owner, which holds back more. A request without one keeps the waiting one's.
    pub(crate) fn request_shared<L: StateLog>(self: &Arc<Self>, log: &Arc<L>, mut job: SharedReclaim) {
        let mut st = self.state.lock();
        if st.status.disabled.is_some() {
            return;
        }
        if job.publish.is_none()
            && let Some(Wanted::Shared(waiting)) = st.wanted.as_mut()
        {
            job.publish = waiting.publish.take();
        }
        self.start(log, st, Wanted::Shared(job));
    }

    /// The store learned that a newer owner fenced it: a publication not yet appended is
    /// dropped (one appended anyway would be void, its window holding the newer fence).
    pub(crate) fn fenced(&self) {
        if let Some(Wanted::Shared(job)) = self.state.lock().wanted.as_mut() {
            job.publish = None;
        }
    }

    fn start<L: StateLog>(self: &Arc<Self>, log: &Arc<L>, mut st: parking_lot::MutexGuard<'_, State>, wanted: Wanted) {
        st.wanted = Some(wanted);
        if st.status.running {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            st.status.failures += 1;
            st.status.last_error = Some("no tokio runtime to reclaim on".into());
            st.wanted = None;
            return;
        };
        st.status.running = true;
        drop(st);
        let (me, log) = (Arc::clone(self), Arc::clone(log));
        runtime.spawn(async move { me.run(log).await });
    }

    /// Reclaims until nothing is wanted. The task lets go of the log before it says it is idle,
    /// in the same critical section that finds nothing wanted: whoever waited for `idle` to
    /// reopen the log, as a restore in the same process does, finds no handle of this task
    /// still open, and a request made meanwhile is either taken here or starts a new task.
    async fn run<L: StateLog>(&self, log: Arc<L>) {
        loop {
            let point = {
                let mut st = self.state.lock();
                let Some(point) = st.wanted.take() else {
                    drop(log);
                    st.status.running = false;
                    drop(st);
                    self.idle.notify_waiters();
                    return;
                };
                point
            };
            let span = tracing::info_span!("actionstate.reclaim", actionstate.reclaim.records = tracing::field::Empty);
            let outcome = async {
                let point = match point {
                    Wanted::Point(point) => point,
                    Wanted::Shared(mut job) => match self.publish_and_scan(&*log, &mut job).await? {
                        Outcome::Reclaim(point) => {
                            self.state.lock().status.waiting.clear();
                            point.iter().zip(&job.local).map(|(p, l)| (*p).min(*l)).collect()
                        }
                        Outcome::Waiting(groups) => {
                            let waiting = groups
                                .into_iter()
                                .map(|owned| Ownership::Groups { max_groups: job.max_groups, owned })
                                .collect();
                            self.state.lock().status.waiting = waiting;
                            return Ok(None);
                        }
                        Outcome::Mixed(owner) => {
                            return Err(actionstate_core::Error::Unsupported {
                                backend: format!("{owner} among stores of {} key groups", job.max_groups),
                                operation: "reclaim for owners of different key-group counts",
                            });
                        }
                    },
                };
                self.state.lock().status.requested = Some(point.clone());
                let before = log.earliest_offsets().await?;
                let after = log.reclaim(&point).await?;
                Ok::<_, actionstate_core::Error>(Some((before, after)))
            }
            .instrument(span.clone())
            .await;
            let mut st = self.state.lock();
            match outcome {
                Ok(None) => {}
                Ok(Some((before, after))) => {
                    let records: u64 = after.iter().zip(&before).map(|(a, b)| a.saturating_sub(*b)).sum();
                    st.status.reclaims += 1;
                    st.status.records_reclaimed += records;
                    st.status.earliest = Some(after);
                    st.status.last_error = None;
                    m::reclaimed(records);
                    span.record("actionstate.reclaim.records", records);
                    tracing::debug!(records, "reclaimed");
                }
                Err(e) => {
                    st.status.failures += 1;
                    st.status.last_error = Some(e.to_string());
                    m::reclaim_failed();
                    tracing::warn!(error = %e, "reclaim failed; retried at the next completed checkpoint");
                }
            }
        }
    }

    /// Appends `job`'s publication, if any, then finds the reclaim point. A failed append
    /// reclaims nothing this time; the next completed checkpoint publishes a newer marker.
    async fn publish_and_scan<L: StateLog>(
        &self,
        log: &L,
        job: &mut SharedReclaim,
    ) -> Result<Outcome, actionstate_core::Error> {
        if let Some(record) = job.publish.take() {
            log.append(record).await?;
        }
        self.shared_point(log, job).await
    }

    /// The reclaim point of stores sharing `log`, from the landmarks the last scan kept (one
    /// reclaim runs at a time, so they are taken out while it reads).
    async fn shared_point<L: StateLog>(
        &self,
        log: &L,
        job: &SharedReclaim,
    ) -> Result<Outcome, actionstate_core::Error> {
        let mut kept = std::mem::take(&mut *self.landmarks.lock());
        let outcome = shared_point(log, job, &mut kept).await;
        *self.landmarks.lock() = kept;
        outcome
    }

    /// Keeps the landmarks a look at partition 0 read in `[from, to)` for the next shared scan,
    /// when they continue the range kept (else the scan reads that range itself).
    pub(crate) fn learn(&self, from: u64, to: u64, read: Vec<Landmark>) {
        self.landmarks.lock().extend(from, to, read);
    }

    /// Waits until no reclaim runs.
    pub(crate) async fn idle(&self) -> ReclaimStatus {
        loop {
            let notified = self.idle.notified();
            {
                let st = self.state.lock();
                if !st.status.running {
                    return st.status.clone();
                }
            }
            notified.await;
        }
    }
}
