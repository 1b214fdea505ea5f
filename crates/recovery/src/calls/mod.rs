//! Durable calls: a call's result journaled in its action's pending state before it is
//! returned, replayed from the journal after a crash, or handed to a reconciler.
//!
//! What lives where: this file holds `call`, [`DurableCall`] and the journal's words
//! ([`Call`], [`CallOutput`], [`CallSource`]); `digest.rs` argument digests over canonical
//! JSON. The [`ActionHandle`] the calls go through is the store's (`store/handle.rs`).

pub(crate) mod digest;

use crate::checkpoint::form::CheckpointForm;
use crate::error::{Result, StoreError};
use crate::metrics as m;
use crate::spans::{self, GenAi, call_key_digest};
use crate::store::ActionStateStore;
use crate::store::handle::ActionHandle;
use actionstate_core::{CallResult, CallStatus, IdempotencyKey, Progress, StateLog};
use std::future::Future;
use tracing::{Instrument, Span};

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

impl CallSource {
    /// A stable snake_case name: `journal`, `executed` or `reconciled` (the label of the calls
    /// metric and the `actionstate.call.source` of a call's span).
    pub fn as_str(self) -> &'static str {
        match self {
            CallSource::Journal => "journal",
            CallSource::Executed => "executed",
            CallSource::Reconciled => "reconciled",
        }
    }
}

/// The result of a durable call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// The call's outcome.
    pub output: CallOutput,
    /// Where it came from.
    pub source: CallSource,
}

/// What the default [`DurableCall`] reconciles with: nothing (a PENDING slot reached without a
/// reconciler runs the call again, under the same key).
pub type NoReconcile = fn(IdempotencyKey) -> std::future::Ready<CallOutput>;

/// A durable call to make: the function it calls, the digest of its arguments, and
/// optionally a reconciler. Built with [`DurableCall::new`], then [`args`](Self::args) (or
/// [`args_bytes`](Self::args_bytes), [`args_digest`](Self::args_digest)) and
/// [`reconcile`](Self::reconcile); made with [`ActionStateStore::call`].
///
/// ```
/// # fn main() -> Result<(), actionstate_recovery::StoreError> {
/// use actionstate_recovery::DurableCall;
/// let call = DurableCall::new("weather.lookup").args(&("Paris", 3))?;
/// assert_eq!(call.digest(), DurableCall::new("weather.lookup").args(&("Paris", 3))?.digest());
/// assert_ne!(call.digest(), DurableCall::new("weather.lookup").args(&("Oslo", 3))?.digest());
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "a `DurableCall` does nothing until it is passed to `ActionStateStore::call`"]
pub struct DurableCall<'a, R = NoReconcile> {
    function: &'a str,
    digest: [u8; 32],
    reconcile: Option<R>,
    genai: Option<GenAi<'a>>,
}

impl<'a> DurableCall<'a> {
    /// A call of `function` without arguments (its digest is all zeros) and without a
    /// reconciler.
    pub fn new(function: &'a str) -> Self {
        DurableCall { function, digest: [0; 32], reconcile: None, genai: None }
    }
}

impl<'a, R> DurableCall<'a, R> {
    /// The arguments the call is made with, as any `serde::Serialize` value: their digest is
    /// the BLAKE3 hash of their canonical JSON (maps sorted by key, no whitespace), so the
    /// same arguments give the same digest in every process, whatever the order a map
    /// iterates in. A replay that calls with other arguments does not take the journaled
    /// result (a different history). Arguments JSON cannot hold (a map whose keys are not
    /// strings or numbers, a non-finite float) are [`StoreError::Args`].
    pub fn args<T: serde::Serialize + ?Sized>(self, args: &T) -> Result<Self> {
        let digest = crate::calls::digest::of_args(args)
            .map_err(|detail| StoreError::Args { function: self.function.to_owned(), detail })?;
        Ok(DurableCall { digest, ..self })
    }

    /// Arguments already encoded: their digest is the BLAKE3 hash of `bytes`.
    pub fn args_bytes(self, bytes: &[u8]) -> Self {
        DurableCall { digest: *blake3::hash(bytes).as_bytes(), ..self }
    }

    /// The digest of the arguments, computed by the caller.
    pub fn args_digest(self, digest: [u8; 32]) -> Self {
        DurableCall { digest, ..self }
    }

    /// The digest the call's journal slot records.
    pub fn digest(&self) -> [u8; 32] {
        self.digest
    }

    /// Reconcile mode: a PENDING slot carrying the call's [`IdempotencyKey`] is made durable
    /// before the call runs, so that after a crash between the side effect and its result,
    /// recovery hands the key to `reconcile` (which asks the service whether the call with
    /// that key happened) instead of running the call again. The same holds for a retry on
    /// the handle after the result failed to persist. `reconcile` gets the key the slot
    /// recorded.
    pub fn reconcile<G, GFut>(self, reconcile: G) -> DurableCall<'a, G>
    where
        G: FnOnce(IdempotencyKey) -> GFut,
        GFut: Future<Output = CallOutput>,
    {
        DurableCall { function: self.function, digest: self.digest, reconcile: Some(reconcile), genai: self.genai }
    }

    /// The call executes a tool, the function it calls: when it executes, its span is the
    /// GenAI `execute_tool` operation (`gen_ai.tool.name`). A replay from the journal is no
    /// execution and keeps the plain call span.
    pub fn tool(self) -> Self {
        DurableCall { genai: Some(GenAi::Tool), ..self }
    }

    /// The call asks `model` (a chat completion): when it executes, its span is the GenAI
    /// `chat` operation (`gen_ai.request.model`). A replay from the journal keeps the plain
    /// call span.
    pub fn model(self, model: &'a str) -> Self {
        DurableCall { genai: Some(GenAi::Model(model)), ..self }
    }
}

impl<L: StateLog, F: CheckpointForm> ActionStateStore<L, F> {
    /// Runs a durable call, or replays it, handing `f` the call's [`IdempotencyKey`]: the same
    /// for every attempt of this logical call (retries on the handle, runs after a crash, a
    /// replay, a restore, a new owner), new once its history is invalidated. Send it to a
    /// service that deduplicates by it, and a call that ran before its result was durable
    /// makes its effect once.
    ///
    /// If the journal slot at the handle's cursor records a finished call with the same
    /// function and argument digest, its result is returned and `f` does not run. Otherwise
    /// the journal is truncated at the cursor (a different history), `f` runs, and its result
    /// is made durable before it is returned. If persisting fails, or the returned future is
    /// dropped before it completes, the call fails: its result is not returned, and the handle
    /// keeps the journal the log is known to hold.
    ///
    /// A PENDING slot (written in [reconcile mode](DurableCall::reconcile)) reached by a call
    /// with a reconciler is settled by it; reached without one, its outcome is unknown and
    /// the call runs again, under the same key.
    pub async fn call<R, RFut, Fn, Fut>(
        &self,
        handle: &mut ActionHandle,
        call: DurableCall<'_, R>,
        f: Fn,
    ) -> Result<Call>
    where
        Fn: FnOnce(IdempotencyKey) -> Fut,
        Fut: Future<Output = CallOutput>,
        R: FnOnce(IdempotencyKey) -> RFut,
        RFut: Future<Output = CallOutput>,
    {
        let span = spans::call(&handle.span, call.function, handle.cursor, handle.incarnation);
        self.call_in(handle, call, f, &span).instrument(span.clone()).await
    }

    /// [`call`](Self::call), inside the call's `span`.
    async fn call_in<R, RFut, Fn, Fut>(
        &self,
        handle: &mut ActionHandle,
        call: DurableCall<'_, R>,
        f: Fn,
        span: &Span,
    ) -> Result<Call>
    where
        Fn: FnOnce(IdempotencyKey) -> Fut,
        Fut: Future<Output = CallOutput>,
        R: FnOnce(IdempotencyKey) -> RFut,
        RFut: Future<Output = CallOutput>,
    {
        self.check_owned(&handle.key.key)?;
        handle.check_live()?;
        let DurableCall { function: function_id, digest: args_digest, reconcile, genai } = call;
        let derived = handle.next_call_key(function_id, &args_digest);
        let key_digest = |key: &IdempotencyKey| {
            if !span.is_disabled() {
                span.record("actionstate.call.key_digest", call_key_digest(key));
            }
        };
        let recorded = match (&reconcile, handle.journal.get(handle.cursor)) {
            (Some(_), Some(s)) if s.matches(function_id, &args_digest) => match &s.status {
                CallStatus::Pending { key } => Some(key.clone().unwrap_or_else(|| derived.clone())),
                _ => None,
            },
            _ => None,
        };
        let (output, source) = match (recorded, reconcile) {
            (Some(key), Some(reconcile)) => {
                key_digest(&key);
                (reconcile(key).await, CallSource::Reconciled)
            }
            (_, reconcile) => {
                if let Some(output) = journaled(handle, function_id, &args_digest) {
                    outcome(span, function_id, None, CallSource::Journal, output.is_ok());
                    handle.cursor += 1;
                    m::call(CallSource::Journal.as_str());
                    return Ok(Call { output, source: CallSource::Journal });
                }
                if reconcile.is_some() {
                    let pending = CallStatus::Pending { key: Some(derived.clone()) };
                    self.persist_slot(handle, slot(function_id, args_digest, pending)).await?;
                }
                key_digest(&derived);
                (f(derived).await, CallSource::Executed)
            }
        };
        // Before the journal write: a call that ran is an execution on its span even when
        // the write fails or the process dies in it (the next attempt may replay it).
        outcome(span, function_id, genai, source, output.is_ok());
        self.persist_slot(handle, slot(function_id, args_digest, finished(&output))).await?;
        handle.cursor += 1;
        m::call(source.as_str());
        Ok(Call { output, source })
    }

    /// Makes the journal up to the cursor followed by `slot` durable, and only then adopts it
    /// in the handle. If the write fails, or the caller drops the future first, the handle keeps
    /// the journal the log is known to hold, so a retry never returns a result that is not
    /// durable and never loses a durable PENDING slot.
    pub(crate) async fn persist_slot(&self, handle: &mut ActionHandle, slot: CallResult) -> Result<()> {
        let mut journal: Vec<CallResult> = handle.journal.iter().take(handle.cursor).cloned().collect();
        journal.push(slot);
        self.put(handle.state(Progress::Pending { calls: journal.clone() })).await?;
        handle.journal = journal;
        Ok(())
    }
}

/// Records on a call's `span` where its output came from and whether it is a success; an
/// executed call the caller marked as a GenAI operation takes that operation's attributes.
fn outcome(span: &Span, function: &str, genai: Option<GenAi<'_>>, source: CallSource, ok: bool) {
    if span.is_disabled() {
        return;
    }
    span.record("actionstate.call.source", source.as_str());
    span.record("actionstate.replayed", source == CallSource::Journal);
    span.record("actionstate.call.ok", ok);
    if source == CallSource::Executed
        && let Some(genai) = genai
    {
        spans::genai(span, function, genai);
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
        CallStatus::Pending { .. } | CallStatus::Waiting { .. } | CallStatus::Resolved { .. } => None,
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
