//! The store's spans as OpenTelemetry spans (feature `otel`): one input through a crash and its
//! replay, exported by the OpenTelemetry SDK through a `tracing-opentelemetry` layer. The state
//! the first attempt writes records the first attempt's span; the attempts after the crash, in
//! traces of their own, link to it, so the later trace leads back to the first.
#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use actionstate_core::{TraceContext, Trigger};
use actionstate_memory::MemoryLog;
use actionstate_recovery::{
    ActionStateStore, Begin, CallSource, DurableCall, Ownership, RestoreFrom, Round, StoreConfig,
};
use common::{input, key, plan};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tracing_subscriber::layer::SubscriberExt;

async fn owner(log: &MemoryLog) -> ActionStateStore<MemoryLog> {
    ActionStateStore::restore(log.reopen(), StoreConfig::default(), &Ownership::All, RestoreFrom::Latest)
        .await
        .unwrap()
        .0
}

async fn begin(store: &ActionStateStore<MemoryLog>) -> Begin {
    let inp = input(1);
    let round = store.round(Round::new(key("dave"), 0, &inp));
    let begun = store.begin(&round, &plan(), &inp, &Trigger::Input).await.unwrap();
    round.suspend();
    begun
}

async fn call(store: &ActionStateStore<MemoryLog>, h: &mut actionstate_recovery::ActionHandle, n: u32) -> CallSource {
    let call = DurableCall::new("model").args(&n).unwrap().model("small-model");
    store.call(h, call, |_key| async move { Ok(n.to_le_bytes().to_vec()) }).await.unwrap().source
}

fn context(span: &SpanData) -> TraceContext {
    let sc = &span.span_context;
    TraceContext::new(sc.trace_id().to_bytes(), sc.span_id().to_bytes(), sc.trace_flags().to_u8()).unwrap()
}

fn attribute(span: &SpanData, name: &str) -> Option<String> {
    span.attributes.iter().find(|kv| kv.key.as_str() == name).map(|kv| kv.value.to_string())
}

/// A crash after one call, a restore, the same input again: the resumed attempt replays the
/// call, makes another and completes; a third `begin` reuses the action. The first attempt's
/// span is what the state records; both later attempts link to it.
#[tokio::test]
async fn later_attempts_link_to_the_first_attempts_span() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder().with_simple_exporter(exporter.clone()).build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("actionstate-test"));
    let _default = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));

    let log = MemoryLog::new(4);
    let recorded = {
        let store = owner(&log).await;
        let Begin::Fresh(mut h, _) = begin(&store).await else { panic!("a new input") };
        let recorded = *h.trace().expect("the first attempt's span has a context");
        assert_eq!(call(&store, &mut h, 1).await, CallSource::Executed);
        recorded
    };
    let store = owner(&log).await;
    let Begin::Resume(mut h) = begin(&store).await else { panic!("the action started before") };
    assert_eq!(h.trace(), Some(&recorded));
    assert_eq!(call(&store, &mut h, 1).await, CallSource::Journal);
    assert_eq!(call(&store, &mut h, 2).await, CallSource::Executed);
    store.complete(h, Vec::new(), Vec::new()).await.unwrap();
    let Begin::Reuse(state) = begin(&store).await else { panic!("the action completed") };
    assert_eq!(state.trace, Some(recorded), "the completed state still names the first attempt");
    drop(store);
    provider.force_flush().unwrap();

    let spans = exporter.get_finished_spans().unwrap();
    for s in &spans {
        let links: Vec<String> =
            s.links.iter().map(|l| format!("{:?}/{:?}", l.span_context.trace_id(), l.span_context.span_id())).collect();
        println!(
            "{:<22} trace {:?} span {:?} parent {:?} links {links:?} decision {:?} source {:?}",
            s.name,
            s.span_context.trace_id(),
            s.span_context.span_id(),
            s.parent_span_id,
            attribute(s, "actionstate.decision"),
            attribute(s, "actionstate.call.source"),
        );
    }
    let attempts: Vec<&SpanData> = spans.iter().filter(|s| s.name == "actionstate.action").collect();
    let decisions: Vec<_> = attempts.iter().map(|s| attribute(s, "actionstate.decision").unwrap()).collect();
    assert_eq!(decisions, ["fresh", "resume", "reuse"], "attempts as exported: {attempts:#?}");
    let [first, resumed, reused] = attempts[..] else { unreachable!() };
    assert_eq!(context(first), recorded, "the state records the first attempt's own span");
    assert!(first.links.is_empty());
    for later in [resumed, reused] {
        let links: Vec<TraceContext> = later
            .links
            .iter()
            .map(|l| {
                let sc = &l.span_context;
                TraceContext::new(sc.trace_id().to_bytes(), sc.span_id().to_bytes(), sc.trace_flags().to_u8()).unwrap()
            })
            .collect();
        assert_eq!(links, [recorded], "{} links to the first attempt", later.name);
        assert_ne!(later.span_context.trace_id(), first.span_context.trace_id(), "a trace of its own");
        assert_eq!(attribute(later, "actionstate.first_attempt"), Some(recorded.traceparent()));
    }
    // Each call inside the attempt that made it: executed by the first, replayed then executed
    // by the resumed one. An executed call is the GenAI operation the caller named; a replay
    // is no execution and keeps the plain call span.
    let calls_of = |attempt: &SpanData| -> Vec<(String, String, Option<String>)> {
        spans
            .iter()
            .filter(|s| s.parent_span_id == attempt.span_context.span_id())
            .map(|s| {
                let source = attribute(s, "actionstate.call.source").unwrap();
                (s.name.to_string(), source, attribute(s, "gen_ai.operation.name"))
            })
            .collect()
    };
    let chat = || ("chat small-model".to_owned(), "executed".to_owned(), Some("chat".to_owned()));
    assert_eq!(calls_of(first), [chat()]);
    assert_eq!(calls_of(resumed), [("actionstate.call".to_owned(), "journal".to_owned(), None), chat()]);
}
