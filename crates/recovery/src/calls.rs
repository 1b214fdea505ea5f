//! Durable calls: a call's result journaled in its action's pending state before it is
//! returned, replayed from the journal after a crash, or handed to a reconciler.

use crate::error::Result;
use crate::handle::ActionHandle;
use crate::metrics as m;
use crate::store::ActionStateStore;
use actionstate_core::{CallResult, CallStatus, IdempotencyKey, Progress, StateLog};
use std::future::Future;

/// The outcome of a durable call as the called function reported it: an encoded value, or an
/// encoded error. An empty value is a valid result (a unit or `None`).
pub type CallOutput = std::result::Result<Vec<u8>, Vec<u8>>;

/// Where a durable call's result came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallSource {
    /// Replayed from the journal; the function did not run.
    Journal,
    /// The function ran now.
    Executed,
    /// A PENDING slot was resolved by the reconciler; the function did not run.
    Reconciled,
}

/// The result of a durable call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// The call's outcome.
    pub output: CallOutput,
    /// Where it came from.
    pub source: CallSource,
}

impl<L: StateLog> ActionStateStore<L> {
    /// Runs a durable call, or replays it; [`call_keyed`](Self::call_keyed) without the key.
    pub async fn call<F, Fut>(
        &self,
        handle: &mut ActionHandle,
        function_id: &str,
        args_digest: [u8; 32],
        f: F,
    ) -> Result<Call>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = CallOutput>,
    {
        self.call_keyed(handle, function_id, args_digest, |_| f()).await
    }

    /// Runs a durable call, or replays it, handing `f` the call's [`IdempotencyKey`]: the same
    /// for every attempt of this logical call (retries on the handle, runs after a crash, a
    /// replay, a rebuild, a new owner), new once its history is invalidated. Send it to a
    /// service that deduplicates by it, and a call that ran before its result was durable
    /// makes its effect once.
    ///
    /// If the journal slot at the handle's cursor records a finished call with the same
    /// `function_id` and `args_digest`, its result is returned and `f` does not run. Otherwise
    /// the journal is truncated at the cursor (a different history), `f` runs, and its result
    /// is made durable before it is returned. If persisting fails, or the returned future is
    /// dropped before it completes, the call fails: its result is not returned, and the handle
    /// keeps the journal the log is known to hold.
    ///
    /// A PENDING slot (written by [`call_reconciled`](Self::call_reconciled)) reached here has
    /// an unknown outcome and no reconciler, so the call runs again, under the same key.
    pub async fn call_keyed<F, Fut>(
        &self,
        handle: &mut ActionHandle,
        function_id: &str,
        args_digest: [u8; 32],
        f: F,
    ) -> Result<Call>
    where
        F: FnOnce(IdempotencyKey) -> Fut,
        Fut: Future<Output = CallOutput>,
    {
        if let Some(output) = journaled(handle, function_id, &args_digest) {
            handle.cursor += 1;
            m::call("journal");
            return Ok(Call { output, source: CallSource::Journal });
        }
        let output = f(handle.next_call_key(function_id, &args_digest)).await;
        self.persist_slot(handle, slot(function_id, args_digest, finished(&output))).await?;
        handle.cursor += 1;
        m::call("executed");
        Ok(Call { output, source: CallSource::Executed })
    }

    /// A durable call in reconcile mode; [`call_reconciled_keyed`](Self::call_reconciled_keyed)
    /// without the key.
    pub async fn call_reconciled<F, Fut, R, RFut>(
        &self,
        handle: &mut ActionHandle,
        function_id: &str,
        args_digest: [u8; 32],
        f: F,
        reconcile: R,
    ) -> Result<Call>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = CallOutput>,
        R: FnOnce() -> RFut,
        RFut: Future<Output = CallOutput>,
    {
        self.call_reconciled_keyed(handle, function_id, args_digest, |_| f(), |_| reconcile()).await
    }

    /// Runs a durable call in reconcile mode: a PENDING slot carrying the call's
    /// [`IdempotencyKey`] is made durable before `f` runs, so that after a crash between the
    /// side effect and its result, recovery hands the key to `reconcile` (which asks the
    /// service whether call K happened) instead of running `f` again. The same holds for a
    /// retry on this handle after the result failed to persist: the handle keeps the durable
    /// PENDING slot. `reconcile` gets the key the slot recorded (the one derived now for a
    /// slot written before keys were recorded).
    pub async fn call_reconciled_keyed<F, Fut, R, RFut>(
        &self,
        handle: &mut ActionHandle,
        function_id: &str,
        args_digest: [u8; 32],
        f: F,
        reconcile: R,
    ) -> Result<Call>
    where
        F: FnOnce(IdempotencyKey) -> Fut,
        Fut: Future<Output = CallOutput>,
        R: FnOnce(IdempotencyKey) -> RFut,
        RFut: Future<Output = CallOutput>,
    {
        let derived = handle.next_call_key(function_id, &args_digest);
        let recorded = match handle.journal.get(handle.cursor) {
            Some(s) if s.matches(function_id, &args_digest) => match &s.status {
                CallStatus::Pending { key } => Some(key.clone().unwrap_or_else(|| derived.clone())),
                _ => None,
            },
            _ => None,
        };
        let (output, source) = match recorded {
            Some(key) => (reconcile(key).await, CallSource::Reconciled),
            None => {
                if let Some(output) = journaled(handle, function_id, &args_digest) {
                    handle.cursor += 1;
                    m::call("journal");
                    return Ok(Call { output, source: CallSource::Journal });
                }
                let pending = CallStatus::Pending { key: Some(derived.clone()) };
                self.persist_slot(handle, slot(function_id, args_digest, pending)).await?;
                (f(derived).await, CallSource::Executed)
            }
        };
        self.persist_slot(handle, slot(function_id, args_digest, finished(&output))).await?;
        handle.cursor += 1;
        m::call(if source == CallSource::Reconciled { "reconciled" } else { "executed" });
        Ok(Call { output, source })
    }

    /// Makes the journal up to the cursor followed by `slot` durable, and only then adopts it
    /// in the handle. If the write fails, or the caller drops the future first, the handle keeps
    /// the journal the log is known to hold, so a retry never returns a result that is not
    /// durable and never loses a durable PENDING slot.
    async fn persist_slot(&self, handle: &mut ActionHandle, slot: CallResult) -> Result<()> {
        let mut journal: Vec<CallResult> = handle.journal.iter().take(handle.cursor).cloned().collect();
        journal.push(slot);
        self.put(handle.state(Progress::Pending { calls: journal.clone() })).await?;
        handle.journal = journal;
        Ok(())
    }
}

fn journaled(handle: &ActionHandle, function_id: &str, args_digest: &[u8; 32]) -> Option<CallOutput> {
    let s = handle.journal.get(handle.cursor)?;
    if !s.matches(function_id, args_digest) {
        return None;
    }
    match &s.status {
        CallStatus::Succeeded { result } => Some(Ok(result.clone())),
        CallStatus::Failed { error } => Some(Err(error.clone())),
        CallStatus::Pending { .. } => None,
    }
}

fn slot(function_id: &str, args_digest: [u8; 32], status: CallStatus) -> CallResult {
    CallResult { function_id: function_id.to_owned(), args_digest, status }
}

fn finished(output: &CallOutput) -> CallStatus {
    match output {
        Ok(result) => CallStatus::Succeeded { result: result.clone() },
        Err(error) => CallStatus::Failed { error: error.clone() },
    }
}
