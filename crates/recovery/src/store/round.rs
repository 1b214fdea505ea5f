//! A round the runtime is working on, finished explicitly: dropping it unfinished is counted
//! and logged, and never counts as completed.

use crate::checkpoint::form::CheckpointForm;
use crate::metrics as m;
use crate::store::ActionStateStore;
use crate::store::vocab::Round;
use actionstate_core::StateLog;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// A round started with [`ActionStateStore::round`]. It derefs to its [`Round`], so it is
/// what [`begin`](ActionStateStore::begin) takes. [`finish`](Self::finish) it once every
/// action of the round is done: a checkpoint taken afterwards need not replay the round, and
/// a restore of it resumes the input after it. Dropped unfinished (an action failed, the task
/// was cancelled), the round is not completed: a restore replays it. The store counts such
/// rounds ([`rounds_dropped`](crate::metrics::ROUNDS_DROPPED)) and logs each at `warn`.
#[must_use = "a round must be finished once its actions are done; dropped, it is replayed after a restore"]
pub struct OpenRound<'s, L: StateLog, F: CheckpointForm> {
    store: Held<'s, L, F>,
    round: Round,
    finished: bool,
}

/// How an [`OpenRound`] holds its store: borrowed, or shared when the round must outlive any
/// borrow ([`ActionStateStore::round_shared`]).
enum Held<'s, L: StateLog, F: CheckpointForm> {
    Borrowed(&'s ActionStateStore<L, F>),
    Shared(Arc<ActionStateStore<L, F>>),
}

impl<L: StateLog, F: CheckpointForm> std::ops::Deref for Held<'_, L, F> {
    type Target = ActionStateStore<L, F>;

    fn deref(&self) -> &ActionStateStore<L, F> {
        match self {
            Held::Borrowed(store) => store,
            Held::Shared(store) => store,
        }
    }
}

impl<L: StateLog, F: CheckpointForm> ActionStateStore<L, F> {
    /// Starts `round`; [`OpenRound::finish`] completes it.
    pub fn round(&self, round: Round) -> OpenRound<'_, L, F> {
        OpenRound { store: Held::Borrowed(self), round, finished: false }
    }

    /// [`round`](Self::round) for a store shared by `Arc`: the round holds the store, so it
    /// can be kept beyond any borrow (by a task that owns it, or by a binding to another
    /// language, whose objects cannot borrow).
    pub fn round_shared(self: &Arc<Self>, round: Round) -> OpenRound<'static, L, F> {
        OpenRound { store: Held::Shared(Arc::clone(self)), round, finished: false }
    }
}

impl<L: StateLog, F: CheckpointForm> OpenRound<'_, L, F> {
    /// Every action of the round is done: a checkpoint taken from now on need not replay it.
    pub fn finish(mut self) {
        self.finished = true;
        self.store.round_completed(self.round.key, self.round.seq);
    }
}

impl<L: StateLog, F: CheckpointForm> OpenRound<'_, L, F> {
    /// An action of the round suspended on a durable wait
    /// ([`Waited::Suspended`](crate::Waited::Suspended)): the round stays live (a checkpoint
    /// keeps it, a restore replays it) without counting as dropped. Begin the round's action
    /// again, in a new `OpenRound`, once [`waits`](ActionStateStore::waits) lists the wait as
    /// resolved.
    pub fn suspend(mut self) {
        self.finished = true;
    }
}

impl<L: StateLog, F: CheckpointForm> std::ops::Deref for OpenRound<'_, L, F> {
    type Target = Round;

    fn deref(&self) -> &Round {
        &self.round
    }
}

impl<L: StateLog, F: CheckpointForm> std::fmt::Debug for OpenRound<'_, L, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenRound").field("round", &self.round).field("finished", &self.finished).finish()
    }
}

impl<L: StateLog, F: CheckpointForm> Drop for OpenRound<'_, L, F> {
    fn drop(&mut self) {
        if !self.finished {
            self.store.rounds_dropped.fetch_add(1, Ordering::Relaxed);
            m::round_dropped();
            tracing::warn!(key = %self.round.key, seq = self.round.seq, "round dropped unfinished: a restore replays it");
        }
    }
}
