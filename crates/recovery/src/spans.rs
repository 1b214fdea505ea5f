//! The store's spans, through `tracing` (docs/design.md, section 5.8): one per attempt of an
//! action (from `begin` to `complete`, or to the end of its handle), one per durable call and
//! per wait inside it, and one each for restore, rebuild, checkpoint and reclaim. Their
//! attributes carry the `actionstate.` prefix.
//!
//! What a span never holds: a business key (the key's digest, [`KeyId`], stands for it), a
//! wait's token or reply, a call's result, or an idempotency key in clear (a digest of it,
//! [`call_key_digest`], which a service's logs can be matched against but not turned back
//! into a key). A replayed call, a wait whose outcome came from the journal, and a reused
//! action say `actionstate.replayed = true`: a replay never reads as an execution.
//!
//! With no subscriber, or one that leaves `actionstate` spans out, a span is a disabled
//! handle: nothing is formatted or recorded (the fields below are evaluated only for an
//! enabled span).
//!
//! [`KeyId`]: actionstate_core::KeyId

use actionstate_core::{ActionId, IdempotencyKey, MissReason, StateKey, TraceContext};
use tracing::Span;
use tracing::field::Empty;

/// What `begin` decided for an attempt: `actionstate.decision`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// The action completed before: its state is returned, nothing runs.
    Reuse,
    /// The action ran before and did not complete: its journal replays, then it goes on.
    Resume,
    /// Nothing usable was recorded: the action runs from its start.
    Fresh(MissReason),
}

/// The span of one attempt of the action `key` names. A reuse is an attempt that runs nothing:
/// its span ends at once, marked replayed. `first`: the trace context the state recorded of
/// the attempt that first wrote it, which this attempt names as `actionstate.first_attempt`
/// (a W3C `traceparent`), so that a later attempt, in another process, leads back to it.
pub(crate) fn action(
    key: &StateKey,
    action: &ActionId,
    incarnation: u32,
    decision: Decision,
    first: Option<&TraceContext>,
) -> Span {
    let (name, reason) = match decision {
        Decision::Reuse => ("reuse", None),
        Decision::Resume => ("resume", None),
        Decision::Fresh(reason) => ("fresh", Some(reason.as_str())),
    };
    let span = tracing::info_span!(
        "actionstate.action",
        actionstate.key = %key.key,
        actionstate.round = key.seq,
        actionstate.action = %action,
        actionstate.incarnation = incarnation,
        actionstate.decision = name,
        actionstate.miss_reason = Empty,
        actionstate.replayed = decision == Decision::Reuse,
        actionstate.completed = Empty,
        actionstate.first_attempt = Empty,
    );
    if let Some(reason) = reason {
        span.record("actionstate.miss_reason", reason);
    }
    // A disabled span records nothing, but the arguments would still be built: a resume or a
    // reuse formats the traceparent only for a span that keeps it.
    if let Some(first) = first.filter(|_| !span.is_disabled()) {
        span.record("actionstate.first_attempt", first.traceparent());
        #[cfg(feature = "otel")]
        otel::link(&span, first);
    }
    span
}

/// The trace context of `span` as OpenTelemetry knows it, for the state an attempt writes
/// first: with the `otel` feature and a `tracing-opentelemetry` layer installed. `None`
/// otherwise (`tracing` alone gives spans no trace ids), and for a span no layer records.
pub(crate) fn context_of(span: &Span) -> Option<TraceContext> {
    #[cfg(feature = "otel")]
    return otel::context_of(span);
    #[cfg(not(feature = "otel"))]
    {
        let _ = span;
        None
    }
}

/// The spans as OpenTelemetry spans: the context a state records, the link to it.
#[cfg(feature = "otel")]
mod otel {
    use actionstate_core::TraceContext;
    use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
    use tracing::Span;
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    pub(super) fn context_of(span: &Span) -> Option<TraceContext> {
        if span.is_disabled() {
            return None;
        }
        let context = span.context();
        let span_ref = context.span();
        let sc = span_ref.span_context();
        if !sc.is_valid() {
            return None;
        }
        TraceContext::new(sc.trace_id().to_bytes(), sc.span_id().to_bytes(), sc.trace_flags().to_u8())
    }

    pub(super) fn rename(span: &Span, name: String) {
        span.context().span().update_name(name);
    }

    /// A link from `span` to the first attempt's span: a remote context, written by another
    /// process (or an earlier one).
    pub(super) fn link(span: &Span, first: &TraceContext) {
        let context = SpanContext::new(
            TraceId::from_bytes(first.trace_id),
            SpanId::from_bytes(first.span_id),
            TraceFlags::new(first.flags),
            true,
            TraceState::default(),
        );
        span.add_link(context);
    }
}

/// The span of the durable call at `index` of an attempt's journal, inside the attempt's span.
/// Its source and, for a call that reaches the service, its key's digest are recorded as the
/// call goes.
pub(crate) fn call(attempt: &Span, function: &str, index: usize, incarnation: u32) -> Span {
    tracing::info_span!(
        parent: attempt,
        "actionstate.call",
        actionstate.call.function = function,
        actionstate.call.index = index,
        actionstate.incarnation = incarnation,
        actionstate.call.source = Empty,
        actionstate.call.key_digest = Empty,
        actionstate.call.ok = Empty,
        actionstate.replayed = Empty,
        otel.name = Empty,
        gen_ai.operation.name = Empty,
        gen_ai.tool.name = Empty,
        gen_ai.request.model = Empty,
    )
}

/// What a call is in the OpenTelemetry GenAI conventions, when the caller says
/// ([`tool`](crate::DurableCall::tool), [`model`](crate::DurableCall::model)): its span, when
/// the call executes, is named and attributed as that operation (docs/design.md, section 5.8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GenAi<'a> {
    /// `execute_tool`, the tool being the call's function.
    Tool,
    /// `chat` with the named model.
    Model(&'a str),
}

/// An executed call the caller said is a GenAI operation: the span takes the operation's
/// attributes and name (`otel.name`; with the `otel` feature, the exported span's name).
pub(crate) fn genai(span: &Span, function: &str, genai: GenAi<'_>) {
    let name = match genai {
        GenAi::Tool => {
            span.record("gen_ai.operation.name", "execute_tool");
            span.record("gen_ai.tool.name", function);
            format!("execute_tool {function}")
        }
        GenAi::Model(model) => {
            span.record("gen_ai.operation.name", "chat");
            span.record("gen_ai.request.model", model);
            format!("chat {model}")
        }
    };
    span.record("otel.name", name.as_str());
    // `tracing-opentelemetry` takes `otel.name` only before the span starts; this one has run.
    #[cfg(feature = "otel")]
    otel::rename(span, name);
}

/// The span of the wait at `index` of an attempt's journal, inside the attempt's span: how it
/// went (`suspended`, `resumed` with the outcome's kind, or `timed_out`) is recorded as it goes.
pub(crate) fn wait(attempt: &Span, name: &str, index: usize) -> Span {
    tracing::info_span!(
        parent: attempt,
        "actionstate.wait",
        actionstate.wait.name = name,
        actionstate.wait.index = index,
        actionstate.wait.status = Empty,
        actionstate.wait.outcome = Empty,
        actionstate.replayed = Empty,
    )
}

/// A digest of an idempotency key, for spans: the first 8 bytes of its blake3 hash, in hex.
/// Enough to match the calls a service logged with the key, without the key itself: a span is
/// read by more people than the service that deduplicates by the key.
pub fn call_key_digest(key: &IdempotencyKey) -> String {
    let hash = blake3::hash(key.as_str().as_bytes());
    hex::encode(&hash.as_bytes()[..8])
}
