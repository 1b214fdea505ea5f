//! Durable waits (docs/design.md, section 5.7): an action suspends on a person's approval or an
//! external reply, and resumes exactly once with it.
//!
//! A wait is a slot of its action's durable-call journal. The first time the action waits, the
//! slot is written with a fresh secret, the wait's start and its deadline, and only then does
//! the action suspend, handing out the [`WaitToken`] (the key and the secret). A resolve
//! rewrites the slot with the outcome (a reply, a rejection, a timeout), under the key's lock
//! and after reading the slot the index holds, so the first outcome is the only one: a later
//! resolve writes nothing and returns it. The runtime re-enters the action (it begins it
//! again, and its journal replays), and the wait returns the recorded outcome.
//!
//! What lives where: this file holds the API ([`Wait`], [`Waited`], [`Resolution`],
//! [`WaitInfo`] and the store's `wait`, `resolve`, `reject`, `expire_waits`, `waits`);
//! `registry.rs` the store's map of the waits its pending states record; `requests.rs` the
//! resolves other processes ask for through the log; `clock.rs` the [`Clock`] waits are
//! timed by.

pub(crate) mod clock;
pub(crate) mod registry;
pub(crate) mod requests;

use crate::checkpoint::form::CheckpointForm;
use crate::error::{Result, StoreError};
use crate::metrics as m;
use crate::spans;
use crate::store::ActionStateStore;
use crate::store::handle::ActionHandle;
use actionstate_core::{
    ActionId, ActionState, CallResult, CallStatus, KeyId, KeyLabel, MAX_WAIT_REPLY, Progress, StateLog, WaitOutcome,
    WaitSecret, WaitSlot, WaitToken,
};
use std::sync::Arc;
use std::time::Duration;
use tracing::{Instrument, Span};

/// A durable wait to make: its name (stable, like a durable call's function id), the digest
/// of what it asks (its arguments, as for a [`DurableCall`](crate::DurableCall)), and
/// optionally how long it may take. Made with [`ActionStateStore::wait`].
#[derive(Clone, Debug)]
#[must_use = "a `Wait` does nothing until it is passed to `ActionStateStore::wait`"]
pub struct Wait<'a> {
    name: &'a str,
    digest: [u8; 32],
    timeout: Option<Duration>,
}

impl<'a> Wait<'a> {
    /// A wait named `name`, without arguments (digest all zeros) and without a deadline.
    pub fn new(name: &'a str) -> Self {
        Wait { name, digest: [0; 32], timeout: None }
    }

    /// What the wait asks, as any `serde::Serialize` value (digested as a durable call's
    /// arguments are): a replay that waits with other arguments waits anew.
    pub fn args<T: serde::Serialize + ?Sized>(self, args: &T) -> Result<Self> {
        let digest = crate::calls::digest::of_args(args)
            .map_err(|detail| StoreError::Args { function: self.name.to_owned(), detail })?;
        Ok(Wait { digest, ..self })
    }

    /// The wait times out this long after the action first waits: the deadline is recorded
    /// then, and replays keep it.
    pub fn timeout(self, timeout: Duration) -> Self {
        Wait { timeout: Some(timeout), ..self }
    }
}

/// What [`ActionStateStore::wait`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Waited {
    /// The wait ended: go on with its outcome.
    Done(WaitOutcome),
    /// The wait is durable and not resolved: the action stops here (its handle refuses further
    /// work) and is begun again once the wait is resolved. Hand the token to whoever resolves.
    Suspended(WaitToken),
}

/// What a resolve did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolution {
    /// The wait's outcome: the one just recorded, or the first one if it had one.
    pub outcome: WaitOutcome,
    /// Whether this resolve recorded it (`false`: an earlier outcome stands, nothing written).
    pub recorded: bool,
}

/// Where a wait stands, as [`ActionStateStore::waits`] lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WaitStatus {
    /// Durable and not resolved.
    Pending,
    /// Resolved, and the action has not gone on past it yet: begin it again.
    Resolved {
        /// The outcome's name: `reply`, `rejected` or `timed_out`.
        outcome: &'static str,
    },
}

/// A wait the runtime must know about after a restore or while running. Never its token or
/// its reply: those are the resolver's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaitInfo {
    /// The business key.
    pub key: KeyId,
    /// Its readable name, if the round gave one.
    pub label: Option<KeyLabel>,
    /// The round.
    pub seq: u64,
    /// The waiting action.
    pub action: ActionId,
    /// The wait's name.
    pub name: String,
    /// When the action first waited (milliseconds since the Unix epoch).
    pub since_ms: u64,
    /// When it times out, if it does.
    pub deadline_ms: Option<u64>,
    /// Pending, or resolved and not yet resumed.
    pub status: WaitStatus,
}

impl<L: StateLog, F: CheckpointForm> ActionStateStore<L, F> {
    /// Waits durably for a reply, inside an action. If the journal slot at the handle's cursor
    /// records this wait (same name and arguments) and it ended, its outcome is returned and
    /// the cursor moves on; a wait whose deadline passed ends now, as timed out, durably.
    /// Otherwise the action suspends: a new wait is written (with a fresh secret, its start and
    /// its deadline) before [`Waited::Suspended`] hands out its token, and the handle refuses
    /// further calls ([`StoreError::Suspended`]). A slot that records something else is a
    /// different history: the journal is truncated there, as for a durable call.
    ///
    /// The round of a suspended action stays live: end it with
    /// [`OpenRound::suspend`](crate::OpenRound::suspend), not `finish`. Once the wait is
    /// resolved, [`waits`](Self::waits) lists it, and the runtime begins the action again.
    pub async fn wait(&self, handle: &mut ActionHandle, wait: Wait<'_>) -> Result<Waited> {
        let span = spans::wait(&handle.span, wait.name, handle.cursor);
        let waited = self.wait_in(handle, wait, &span).instrument(span.clone()).await;
        match &waited {
            Ok(Waited::Done(outcome)) => {
                span.record("actionstate.wait.status", "resumed");
                span.record("actionstate.wait.outcome", outcome.name());
            }
            Ok(Waited::Suspended(_)) => {
                span.record("actionstate.wait.status", "suspended");
                span.record("actionstate.replayed", false);
            }
            Err(_) => {}
        }
        waited
    }

    /// [`wait`](Self::wait), inside the wait's `span`, which learns whether the outcome it
    /// returns was the journal's (`actionstate.replayed`).
    async fn wait_in(&self, handle: &mut ActionHandle, wait: Wait<'_>, span: &Span) -> Result<Waited> {
        self.check_owned(&handle.key.key)?;
        handle.check_live()?;
        let Wait { name, digest, timeout } = wait;
        let recorded = handle.journal.get(handle.cursor).filter(|s| s.matches(name, &digest)).map(|s| s.status.clone());
        let key = handle.key.key;
        let token = |secret| WaitToken { key, secret };
        match recorded {
            Some(CallStatus::Resolved { outcome, .. }) => {
                handle.cursor += 1;
                span.record("actionstate.replayed", true);
                m::wait("resumed");
                Ok(Waited::Done(outcome))
            }
            Some(CallStatus::Waiting { wait }) => {
                // A resolve since `begin` is in the index, not in the handle.
                let expired = wait.deadline_ms.is_some_and(|d| self.config.clock.now_ms() >= d);
                let now = if expired {
                    Some(self.settle(&token(wait.secret), WaitOutcome::TimedOut).await?.outcome)
                } else {
                    self.wait_outcome(&token(wait.secret))?
                };
                match now {
                    Some(outcome) => {
                        // Delivered for the first time: recorded since the action suspended.
                        span.record("actionstate.replayed", false);
                        if let Some(slot) = handle.journal.get_mut(handle.cursor) {
                            slot.status = CallStatus::Resolved { wait, outcome: outcome.clone() };
                        }
                        handle.cursor += 1;
                        m::wait("resumed");
                        Ok(Waited::Done(outcome))
                    }
                    None => {
                        handle.suspended = true;
                        Ok(Waited::Suspended(token(wait.secret)))
                    }
                }
            }
            _ => {
                let now = self.config.clock.now_ms();
                let deadline_ms = timeout.map(|t| now.saturating_add(u64::try_from(t.as_millis()).unwrap_or(u64::MAX)));
                let slot = WaitSlot { secret: WaitSecret::random(), since_ms: now, deadline_ms };
                let status = CallStatus::Waiting { wait: slot };
                self.persist_slot(handle, CallResult { function_id: name.to_owned(), args_digest: digest, status })
                    .await?;
                handle.suspended = true;
                m::wait("suspended");
                Ok(Waited::Suspended(token(slot.secret)))
            }
        }
    }

    /// Resolves the wait `token` names with `reply` (at most [`MAX_WAIT_REPLY`] bytes): durable
    /// before this returns, and only the first outcome of a wait counts: a wait already
    /// resolved, rejected or timed out is left as it is, and its outcome returned
    /// ([`Resolution::recorded`] `false`). A token no wait of this store's has (malformed
    /// ones are refused by [`WaitToken::parse`]; one voided by an invalidation, one whose
    /// action completed) is [`StoreError::UnknownWait`], and a key the store does not own is
    /// [`StoreError::NotOwned`]; neither writes anything.
    pub async fn resolve(&self, token: &WaitToken, reply: &[u8]) -> Result<Resolution> {
        self.resolve_with(token, WaitOutcome::Reply(reply.to_vec())).await
    }

    /// Rejects the wait `token` names, with `reason` (at most [`MAX_WAIT_REPLY`] bytes): as
    /// [`resolve`](Self::resolve), with a rejection as the outcome.
    pub async fn reject(&self, token: &WaitToken, reason: &[u8]) -> Result<Resolution> {
        self.resolve_with(token, WaitOutcome::Rejected(reason.to_vec())).await
    }

    async fn resolve_with(&self, token: &WaitToken, outcome: WaitOutcome) -> Result<Resolution> {
        if let WaitOutcome::Reply(bytes) | WaitOutcome::Rejected(bytes) = &outcome
            && bytes.len() > MAX_WAIT_REPLY
        {
            return Err(StoreError::WaitReplyTooLarge { len: bytes.len(), max: MAX_WAIT_REPLY });
        }
        self.check_owned(&token.key)?;
        self.settle(token, outcome).await
    }

    /// Ends every pending wait whose deadline has passed, as timed out, durably; returns how
    /// many it ended. A runtime calls it now and then (a wait re-entered after its deadline
    /// ends that way too); [`waits`](Self::waits) then lists them as resolved.
    pub async fn expire_waits(&self) -> Result<usize> {
        let now = self.config.clock.now_ms();
        let due: Vec<WaitToken> = self
            .shared
            .lock()
            .waits
            .all()
            .filter(|(_, w)| w.outcome.is_none() && w.deadline_ms.is_some_and(|d| now >= d))
            .map(|(secret, w)| WaitToken { key: w.state.key, secret: *secret })
            .collect();
        let mut ended = 0;
        for token in due {
            if self.settle(&token, WaitOutcome::TimedOut).await?.recorded {
                ended += 1;
            }
        }
        Ok(ended)
    }

    /// The waits that are pending, and those resolved whose actions have not gone on past them
    /// (begin those again), ordered by key, round and start.
    pub fn waits(&self) -> Vec<WaitInfo> {
        let sh = self.shared.lock();
        let mut out: Vec<WaitInfo> = sh
            .waits
            .all()
            .filter(|(_, w)| w.outcome.is_none() || !w.resumed)
            .map(|(_, w)| WaitInfo {
                key: w.state.key,
                label: w.label,
                seq: w.state.seq,
                action: w.action.clone(),
                name: w.name.clone(),
                since_ms: w.since_ms,
                deadline_ms: w.deadline_ms,
                status: match w.outcome {
                    None => WaitStatus::Pending,
                    Some(outcome) => WaitStatus::Resolved { outcome },
                },
            })
            .collect();
        out.sort_by(|a, b| (a.key, a.seq, a.since_ms, &a.name).cmp(&(b.key, b.seq, b.since_ms, &b.name)));
        out
    }

    /// Where the wait `token` names stands, without writing anything: its outcome, or `None`
    /// while it is pending. A token no wait of this store's has is
    /// [`StoreError::UnknownWait`], as for [`resolve`](Self::resolve). The outcome holds the
    /// reply: show it only to whoever holds the token.
    pub fn wait_outcome(&self, token: &WaitToken) -> Result<Option<WaitOutcome>> {
        let (state, slot) = self.recorded_wait(token)?;
        Ok(match &state.calls()[slot].status {
            CallStatus::Resolved { outcome, .. } => Some(outcome.clone()),
            _ => None,
        })
    }

    /// The indexed state that records the wait `token` names, and the wait's slot in it.
    fn recorded_wait(&self, token: &WaitToken) -> Result<(Arc<ActionState>, usize)> {
        let unknown = || StoreError::UnknownWait { key: token.key };
        let sh = self.shared.lock();
        let at = sh.waits.get(&token.key, &token.secret).ok_or_else(unknown)?;
        let state = sh.index.get(&at.state).ok_or_else(unknown)?.state()?;
        let recorded = state.calls().get(at.slot).and_then(|s| s.status.wait()).map(|w| w.secret);
        if recorded != Some(token.secret) {
            return Err(unknown());
        }
        Ok((state, at.slot))
    }

    /// Records `outcome` for the wait `token` names unless it has one: read and written under
    /// the key's lock, so that of two outcomes racing, the first is the only one.
    async fn settle(&self, token: &WaitToken, outcome: WaitOutcome) -> Result<Resolution> {
        let _epoch = self.epoch.read().await;
        let _key = self.keys.lock(token.key).await;
        let (state, slot) = self.recorded_wait(token)?;
        let mut calls = state.calls().to_vec();
        let wait = match &calls[slot].status {
            CallStatus::Resolved { outcome: first, .. } => {
                return Ok(Resolution { outcome: first.clone(), recorded: false });
            }
            CallStatus::Waiting { wait } => *wait,
            _ => return Err(StoreError::UnknownWait { key: token.key }),
        };
        calls[slot].status = CallStatus::Resolved { wait, outcome: outcome.clone() };
        let resolved = ActionState { progress: Progress::Pending { calls }, ..(*state).clone() };
        self.put_locked(resolved).await?;
        m::wait(outcome.name());
        Ok(Resolution { outcome, recorded: true })
    }
}
